"""Server-side dry run against the e2e cluster, straight over its REST API: what `kubectl apply
--server-side --dry-run=server` sends (an apply patch with dryRun=All, fieldValidation=Strict and a
field manager), one keep-alive connection, and the server's refusal as its structured Status (every
cause with its field), which kubectl would flatten into one line of text.

The credentials are the kubeconfig's (harness.KUBECONFIG, E2E_KUBECONFIG): its first cluster's server
and CA, its first user's token. Python standard library only.
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

FIELD_MANAGER = "e2e-differential"


@dataclass
class Verdict:
    """The server's answer to one object: accepted, or refused with its Status."""
    accepted: bool
    code: int
    reason: str = ""
    message: str = ""
    causes: list[dict] = field(default_factory=list)  # {"field", "reason", "message"} as the Status has them

    def fields(self) -> set[str]:
        return {c.get("field", "") for c in self.causes}


class Api:
    def __init__(self, kubeconfig: Path):
        text = kubeconfig.read_text()
        config = json.loads(text) if text.lstrip().startswith("{") else _yaml(text)
        cluster = config["clusters"][0]["cluster"]
        url = urllib.parse.urlsplit(cluster["server"])
        self.host, self.port = url.hostname, url.port or 443
        self.token = config["users"][0]["user"]["token"]
        self.ctx = ssl.create_default_context(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
        self.conn: http.client.HTTPSConnection | None = None
        self._resources: dict[str, dict[str, tuple[str, bool]]] = {}

    def request(self, method: str, path: str, body: object = None, content_type: str = "application/json") -> tuple[int, dict]:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = content_type
        for attempt in (1, 2):  # a keep-alive connection the server closed is reopened once
            if self.conn is None:
                self.conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=30)
            try:
                self.conn.request(method, path, body=data, headers=headers)
                resp = self.conn.getresponse()
                raw = resp.read()
                break
            except (http.client.HTTPException, ConnectionError):
                self.conn.close()
                self.conn = None
                if attempt == 2:
                    raise
        try:
            return resp.status, json.loads(raw) if raw else {}
        except ValueError:
            return resp.status, {"message": raw.decode(errors="replace")}

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    # ---- discovery ----

    def resources(self, api_version: str) -> dict[str, tuple[str, bool]]:
        """kind -> (plural resource, namespaced) for one group version; {} when the server serves none."""
        if api_version not in self._resources:
            path = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
            status, doc = self.request("GET", path)
            self._resources[api_version] = {} if status != 200 else {
                r["kind"]: (r["name"], r["namespaced"]) for r in doc.get("resources", []) if "/" not in r["name"]}
        return self._resources[api_version]

    def collection(self, obj: dict) -> tuple[str, bool] | None:
        """The collection URL of the object's kind (in its namespace) and whether it is namespaced."""
        api_version, kind = obj.get("apiVersion", ""), obj.get("kind", "")
        found = self.resources(api_version).get(kind)
        if found is None:
            return None
        plural, namespaced = found
        prefix = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
        if namespaced:
            ns = (obj.get("metadata") or {}).get("namespace") or "default"
            return f"{prefix}/namespaces/{urllib.parse.quote(ns, safe='')}/{plural}", True
        return f"{prefix}/{plural}", False

    def exists(self, obj: dict) -> bool:
        """Whether the cluster holds the object already (then a dry-run apply is an update, not a create)."""
        where = self.collection(obj)
        name = (obj.get("metadata") or {}).get("name") or ""
        if where is None or not name or name in (".", "..") or any(c in name for c in "/%"):
            return False
        return self.request("GET", f"{where[0]}/{urllib.parse.quote(name, safe='')}")[0] == 200

    # ---- the dry run ----

    def dry_run(self, obj: dict) -> Verdict:
        """Server-side apply with dryRun=All (kubectl apply --server-side --dry-run=server). A name that
        cannot be a path segment (empty, '.', '..', with '/' or '%') goes as a dry-run create instead:
        the server's own name validation then answers, as `kubectl create --dry-run=server` would."""
        where = self.collection(obj)
        if where is None:
            return Verdict(False, 404, "NotFound", f"the server serves no {obj.get('kind')} in {obj.get('apiVersion')}")
        url, _ = where
        name = (obj.get("metadata") or {}).get("name") or ""
        query = {"dryRun": "All", "fieldManager": FIELD_MANAGER, "fieldValidation": "Strict"}
        if name and name not in (".", "..") and not any(c in name for c in "/%"):
            query["force"] = "true"
            status, doc = self.request("PATCH", f"{url}/{urllib.parse.quote(name, safe='')}?{urllib.parse.urlencode(query)}",
                                       obj, "application/apply-patch+yaml")
        else:
            status, doc = self.request("POST", f"{url}?{urllib.parse.urlencode(query)}", obj)
        if status in (200, 201):
            return Verdict(True, status)
        details = doc.get("details") or {}
        return Verdict(False, status, doc.get("reason", ""), doc.get("message", ""), list(details.get("causes") or []))

    # ---- namespaces, for real ----

    def namespace_phase(self, name: str) -> str | None:
        status, doc = self.request("GET", f"/api/v1/namespaces/{urllib.parse.quote(name, safe='')}")
        return (doc.get("status") or {}).get("phase", "Active") if status == 200 else None

    def ensure_namespace(self, name: str, wait: float = 60) -> bool:
        """Creates the namespace unless it is there and Active (waits out one that is terminating).
        True when this call created it (and so its caller deletes it)."""
        deadline = time.monotonic() + wait
        while (phase := self.namespace_phase(name)) == "Terminating":
            if time.monotonic() > deadline:
                raise TimeoutError(f"namespace {name} still Terminating after {wait:g} s")
            time.sleep(0.5)
        if phase is not None:
            return False
        status, doc = self.request("POST", "/api/v1/namespaces",
                                   {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        if status == 409:
            return False
        if status not in (200, 201):
            raise RuntimeError(f"creating namespace {name}: HTTP {status} {doc.get('message')}")
        return True

    def delete_namespaces(self, names: list[str], wait: float = 60) -> list[str]:
        """Deletes them and waits (bounded) until they are gone; returns those still there."""
        for name in names:
            self.request("DELETE", f"/api/v1/namespaces/{urllib.parse.quote(name, safe='')}")
        deadline = time.monotonic() + wait
        left = list(names)
        while left and time.monotonic() < deadline:
            left = [n for n in left if self.namespace_phase(n) is not None]
            if left:
                time.sleep(0.5)
        return left


def _yaml(text: str) -> dict:
    import yaml  # a kubeconfig kubectl rewrote is YAML; e2e/cluster.py writes JSON
    return yaml.safe_load(text)
