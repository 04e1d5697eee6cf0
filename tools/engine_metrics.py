"""Check a recorded metrics table (tests/upstream_vllm.py, tests/upstream_sglang.py) against an
engine's source: every metric is built in its recorded file by a call whose name is the metric and
whose callee names its kind (Counter, _gauge_cls, ...), with the recorded label names when they are
literal; every REMOVED name appears nowhere. Run when bumping an engine:

    python tools/engine_metrics.py vllm <dir holding vllm/>     # e.g. an unpacked wheel
    python tools/engine_metrics.py sglang <dir holding sglang/> [release index]
"""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path


def _definitions(path: Path) -> dict[str, tuple[str, tuple[str, ...] | None]]:
    """Metric name -> (callee name, literal label names or None) for every call with name=<literal>."""
    out = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        callee = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        kw = {k.arg: k.value for k in node.keywords}
        name = kw.get("name", node.args[0] if node.args else None)
        if isinstance(name, ast.Constant) and isinstance(name.value, str):
            labels = kw.get("labelnames")
            literal = (tuple(e.value for e in labels.elts) if isinstance(labels, (ast.List, ast.Tuple))
                       and all(isinstance(e, ast.Constant) for e in labels.elts) else None)
            out[name.value] = (callee, literal)
    return out


def problems(metrics: dict, removed: tuple[str, ...], root: Path, release: int = 0) -> list[str]:
    found = []
    for name, (kind, labels, files) in metrics.items():
        file = [f.strip() for f in files.split("|")][min(release, files.count("|"))]
        path = root / file
        if not path.exists():
            found.append(f"{name}: {file} does not exist")
            continue
        defined = _definitions(path).get(name)
        if defined is None or kind not in defined[0].lower():
            found.append(f"{name}: no {kind} named so in {file} (found {defined})")
        elif defined[1] is not None and not set(labels) <= set(defined[1]):
            found.append(f"{name}: labels {defined[1]} in {file}, recorded {labels}")
    for name in removed:
        for path in root.rglob("*.py"):
            if f'"{name}"' in path.read_text(encoding="utf-8", errors="replace"):
                found.append(f"{name}: still defined in {path.relative_to(root)}")
    return found


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    module = importlib.import_module(f"upstream_{sys.argv[1]}")
    release = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    # A module recording metrics that only later releases define says which (metrics_at).
    metrics, absent = module.metrics_at(release) if hasattr(module, "metrics_at") else (module.METRICS, ())
    issues = problems(metrics, getattr(module, "REMOVED", ()) + absent, Path(sys.argv[2]), release)
    print("\n".join(issues) or "ok")
    sys.exit(1 if issues else 0)
