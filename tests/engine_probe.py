"""Run upstream cache-path code with the environment of a rendered engine container; print JSON.

One engine version per process (SGLang versions share the package name). Runs in a child process whose environment is exactly the container's (plus HOME=/root, the vendor
images' user), so os.environ is what the engine would see. Usage:
    python engine_probe.py <packages dir> <json: {"environ": [[pin, path], ...],
                                                  "tilelang": [[pin, path, [attribute, ...]], ...],
                                                  "statements": [[pin, path, target], ...]}>
The paths and attributes come from the citation modules (tests/upstream_sglang.py ENVIRON,
tests/upstream_tilelang.py ENV and ATTRIBUTES), so a bump that moves them is one edit there.
Output: {"<what>": "<resolved path>", ...}, every path expanded as the reader expands it.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import pathlib
import sys
import types


def load(name: str, path: pathlib.Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module   # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module


ENVIRON: dict[str, str] = {}   # sglang pin -> path of its environment module, from the request


def sglang_environ(root: pathlib.Path, pin: str):
    """sglang.srt.environ from the pin's files. The packages above it are the real directories
    without their __init__ (sglang/__init__.py imports torch); the module's own last import,
    sglang.srt.debug_utils.cuda_coredump, then resolves as in the engine. One SGLang pin per process."""
    if "sglang.srt.environ" in sys.modules:
        return sys.modules["sglang.srt.environ"]
    for name in ("sglang", "sglang.srt", "sglang.srt.debug_utils"):
        package = types.ModuleType(name)
        package.__path__ = [str(root / pin / name.replace(".", "/"))]
        sys.modules[name] = package
    return load("sglang.srt.environ", root / pin / ENVIRON[pin])


def environ_paths(root: pathlib.Path, pin: str) -> dict[str, str]:
    """Every cache-directory field of SGLang's envs, resolved; 0.5.23's redirects applied as
    sglang/__init__.py applies them."""
    before = dict(os.environ)
    module = sglang_environ(root, pin)
    out = {}
    envs = module.envs
    for name in dir(type(envs)):
        field = getattr(type(envs), name, None)
        # The cache directories (not profiler output, recorder dumps or daemon sockets in /tmp).
        if not (name.isupper() and name.endswith(("CACHE_DIR", "CACHE_ROOT")) and hasattr(field, "get")):
            continue
        value = getattr(envs, name).get()
        if isinstance(value, str) and value.startswith(("/", "~")):
            out[f"{pin} envs.{name}"] = os.path.expanduser(value)
    if hasattr(module, "redirect_third_party_caches"):
        module.redirect_third_party_caches()
        for key in module.third_party_cache_defaults():
            out[f"{pin} redirect {key}"] = os.path.expanduser(os.environ[key])
    os.environ.clear()
    os.environ.update(before)
    return out


def statement(root: pathlib.Path, pin: str, path: str, target: str) -> str:
    """Execute the first assignment to `target` in the upstream file, as written."""
    tree = ast.parse((root / pin / path).read_text())
    node = next((n for n in ast.walk(tree) if isinstance(n, ast.Assign)
                 and any(ast.unparse(t) == target for t in n.targets)), None)
    if node is None:
        raise SystemExit(f"{pin} {path}: no assignment to {target}")
    before = dict(os.environ)
    namespace: dict = {"os": os, "Path": pathlib.Path}
    if pin.startswith("sglang=="):
        namespace["envs"] = sglang_environ(root, pin).envs
    exec(compile(ast.Module(body=[node], type_ignores=[]), path, "exec"), namespace)
    value = eval(ast.unparse(node.targets[0]), namespace)
    os.environ.clear()
    os.environ.update(before)
    return os.path.expanduser(str(value))


def main() -> None:
    root = pathlib.Path(sys.argv[1])
    request = json.loads(sys.argv[2])
    out: dict[str, str] = {}
    ENVIRON.update(request.get("environ", []))
    for pin in ENVIRON:
        out.update(environ_paths(root, pin))
    for pin, path, attributes in request.get("tilelang", []):
        env = load(f"probe_tilelang_{len(sys.modules)}", root / pin / path).env
        for attr in attributes:
            out[f"{pin} env.{attr}"] = os.path.expanduser(str(getattr(env, attr)))
    for pin, path, target in request.get("statements", []):
        out[f"{pin} {path}: {target}"] = statement(root, pin, path, target)
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main()
