"""Envoy's route selection, at the release AIBrix v0.7.0 runs its gateway proxy with: envoyproxy/envoy
v1.33.2 (the image in aibrix config/gateway/gateway.yaml's EnvoyProxy patch). Read with `git show
v1.33.2:<path>` of envoyproxy/envoy:
- source/common/router/config_impl.cc: VirtualHostImpl::getRouteFromEntries walks the routes in order
  and returns the first whose matches() holds; RouteEntryImplBase::matchRoute checks the headers
  (Http::HeaderUtility::matchHeaders: every matcher must hold) after the path (PrefixRouteEntryImpl:
  case-sensitive prefix unless case_sensitive is false).
- source/common/http/header_utility.cc HeaderDataBaseImpl::matchesHeaders: a header the request lacks
  matches nothing (absent treat_missing_header_as_empty), present_match only its presence, invert_match
  negates (not rendered, so refused here); string_match via Matchers::StringMatcherImpl: exact, prefix, suffix, contains, and safe_regex
  matched against the WHOLE value (source/common/common/regex.h CompiledGoogleReMatcher::match, RE2
  FullMatch). Header names are case-insensitive (HTTP/2 lower-cases them; LowerCaseString lookups).
The regexes here use only what Python's re and RE2 agree on (literals, escapes, ^ $ .* and (?i:...)).
make e2e checks the routes these tests model against the real Envoy Gateway translator (egctl)."""

from __future__ import annotations

import re

RELEASE = "v1.33.2"
# The Envoy AIBrix v0.7.0 runs (its EnvoyProxy patch names the image): held to that AIBrix release.
PORTED_FROM = {
    "repo": "envoyproxy/envoy", "release": RELEASE, "component": "aibrix", "deployed_as": "v0.7.0",
    "files": ("source/common/router/config_impl.cc", "source/common/http/header_utility.cc",
              "source/common/common/regex.h"),
    "note": "the envoyproxy/envoy image tag in aibrix config/gateway/gateway.yaml at v0.7.0",
}


def _value(headers: dict[str, str], name: str) -> str | None:
    return next((v for k, v in headers.items() if k.lower() == name.lower()), None)


def _string_matches(m: dict, value: str) -> bool:
    if "exact" in m:
        return value == m["exact"]
    if "prefix" in m:
        return value.startswith(m["prefix"])
    if "suffix" in m:
        return value.endswith(m["suffix"])
    if "contains" in m:
        return m["contains"] in value
    if "safe_regex" in m:
        return re.fullmatch(m["safe_regex"]["regex"], value) is not None
    raise NotImplementedError(m)


def header_matches(h: dict, headers: dict[str, str]) -> bool:
    if h.get("invert_match") or h.get("treat_missing_header_as_empty"):
        raise NotImplementedError(h)   # their missing-header cases changed across releases: not modelled
    value = _value(headers, h["name"])
    if value is None:
        return False
    if "present_match" in h:
        matched = bool(h["present_match"])
    elif "string_match" in h:
        matched = _string_matches(h["string_match"], value)
    elif "exact_match" in h:
        matched = value == h["exact_match"]
    else:
        matched = True
    return matched


def route_matches(route: dict, path: str, headers: dict[str, str]) -> bool:
    match = route["match"]
    if "prefix" in match:
        if not path.startswith(match["prefix"]):
            return False
    elif "path" in match:
        if path != match["path"]:
            return False
    elif "path_separated_prefix" in match:
        # PathSeparatedPrefixRouteEntryImpl (Envoy Gateway's PathPrefix): the path without query and
        # fragment (Http::PathUtil::removeQueryAndFragment) is the prefix or continues with `/`.
        bare, prefix = re.split(r"[?#]", path, maxsplit=1)[0], match["path_separated_prefix"]
        if not (bare.startswith(prefix) and (len(bare) == len(prefix) or bare[len(prefix)] == "/")):
            return False
    else:
        raise NotImplementedError(match)
    return all(header_matches(h, headers) for h in match.get("headers") or [])


def select_route(route_configuration: dict, path: str, headers: dict[str, str], virtual_host: int = 0) -> dict | None:
    """The route Envoy picks for a request (the first that matches), or None (404)."""
    for route in route_configuration["virtual_hosts"][virtual_host]["routes"]:
        if route_matches(route, path, headers):
            return route
    return None
