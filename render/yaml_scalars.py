"""Which strings build/<stack>/kubernetes.yaml may write as plain (unquoted) scalars: those that every
reader of the file takes back as the same text. Any other string is written quoted.

PyYAML's emitter quotes only what its own YAML 1.1 resolver would read as another type, so a content
tag such as `06589482` or `4802e56` went out plain, and readers that resolve more read a number:
- YAML 1.2's core schema (spec 1.2.2, 10.3.2 "Tag Resolution"): `[-+]?[0-9]+` is an int whatever its
  leading zeros, `0o17` an int, `1e3` a float, with no dot needed (1.1 needs one);
- kubectl: `kubectl apply -f` reads manifests with sigs.k8s.io/yaml v1.6.0 (k8s.io/apimachinery
  pkg/util/yaml YAMLOrJSONDecoder -> yaml.YAMLToJSON), which decodes with go.yaml.in/yaml/v2 v2.4.4
  (resolve.go resolve(): the YAML 1.1 booleans y/yes/on/n/no/off in every case its table lists, Go's
  strconv.ParseInt base 0 after dropping `_`, so `06589482`, failing as octal, is then the float
  6589482); an annotation the server then gets as a number is refused ("cannot unmarshal number into
  Go struct field ObjectMeta.metadata.annotations of type string");
- go-yaml v3 (render/yaml12.py resolve, its port, which reads the stack files as the Pulumi CLI does).
"""

from __future__ import annotations

import re

import yaml

from render import yaml12

# go.yaml.in/yaml/v2 v2.4.4 resolve.go init(): its resolveMap beyond what go-yaml v3 keeps
# (render/yaml12.py _MAP): YAML 1.1's one-letter and word booleans, and the merge key.
GO_YAML_V2_ONLY = frozenset(("y", "Y", "yes", "Yes", "YES", "on", "On", "ON",
                             "n", "N", "no", "No", "NO", "off", "Off", "OFF", "<<"))

# YAML 1.2.2, 10.3.2: the core schema's regular expressions for null, bool, int and float.
CORE_SCHEMA = re.compile(
    r"null|Null|NULL|~|"
    r"true|True|TRUE|false|False|FALSE|"
    r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+|"
    r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?|"
    r"[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)")

_STR = "tag:yaml.org,2002:str"
_YAML11 = yaml.resolver.Resolver()


def yaml11_reads_as_text(text: str) -> bool:
    """PyYAML's YAML 1.1 resolver (what its emitter already quotes for)."""
    return _YAML11.resolve(yaml.ScalarNode, text, (True, False)) == _STR


def core_schema_reads_as_text(text: str) -> bool:
    return text != "" and not CORE_SCHEMA.fullmatch(text)


def go_yaml_v2_reads_as_text(text: str) -> bool:
    """go.yaml.in/yaml/v2 v2.4.4 resolve("", text): v3's resolution (the same hint table, ParseInt and
    ParseUint base 0 without `_`, the float pattern, 0b, timestamps) plus its wider map. A timestamp v2
    decodes into interface{} keeps as text (decode.go), but v3 does not: quoted all the same."""
    return text not in GO_YAML_V2_ONLY and yaml12.resolve(text)[0] == "!!str"


def plain_is_safe(text: str) -> bool:
    """True when every reader above takes `text`, written plain, back as this text."""
    return (core_schema_reads_as_text(text) and go_yaml_v2_reads_as_text(text)
            and yaml11_reads_as_text(text))
