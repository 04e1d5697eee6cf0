"""The mock floor of a render as a whole process (tools/bench.py runs it): load the same SDK modules the
render loaded, then register as many plain ConfigMaps through the same mock runtime and recording
monitor (render/runtime.py record), and exit.

    python tools/bench_floor.py COUNT MODULES_JSON

MODULES_JSON lists the SDK modules (pulumi, pulumi_kubernetes, pulumi_aws) a render of the stack had
loaded. Only the standard library is imported before them, so nothing of the program is loaded ahead.
render.runtime itself imports the program's config model, loader and rules (about 0.3 s, pydantic
included): that is the program's cost, not the floor's, so its import time is printed (JSON on stdout)
for tools/bench.py to take off this process's wall time.
"""

from __future__ import annotations

import importlib
import json
import sys
import time
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parent.parent


def main() -> int:
    count, modules = int(sys.argv[1]), json.loads(Path(sys.argv[2]).read_text())
    for name in modules:
        importlib.import_module(name)
    sys.path.insert(0, str(PROJECT_DIR))
    started = time.perf_counter()
    from render import runtime
    runtime_import_ms = (time.perf_counter() - started) * 1000
    import pulumi_kubernetes as k8s

    def program():
        for i in range(count):
            k8s.core.v1.ConfigMap(f"plain-{i}", metadata={"name": f"plain-{i}", "namespace": "bench"},
                                  data={"k": "v"})
        return {}

    rendered = runtime.record("bench", program)
    assert len(rendered.resources) == count, len(rendered.resources)
    print(json.dumps({"runtime_import_ms": round(runtime_import_ms, 1)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
