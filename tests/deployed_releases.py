"""Which release of each upstream component the stacks run: the one place that answers it, by reading
where the stacks decide it, never a second copy of the numbers.

- The stacks: every committed Pulumi.<stack>.yaml and every variant the e2e deploys (e2e/stackfiles.py
  VARIANTS), read as the CLI hands them to the program and validated by the config model, so a value the
  stack file leaves out is the model's default (config_model Platform.aibrix_version, Cluster, ...).
- What a stack is built for beyond its file: components/platform.py required_versions (AIBrix, the KubeRay,
  Envoy Gateway and Gateway API its bundle brings, RBG), the engine images' tags and CUDA versions, the
  cluster's Kubernetes minor.
- What the engine wheels pin (FlashInfer, TileLang, tvm-ffi, torch): the Requires-Dist tables in
  tests/upstream_vllm.py and tests/upstream_sglang.py, keyed by the engine release the stacks run; no other
  copy of them exists.
- The tools: requirements.txt (pulumi, pulumi_kubernetes: the provider release the SDK asks for,
  pulumi_aws), requirements-s3.txt (the AWS CLI the sync tests run), e2e/tools/pulumi/go.mod (the CLI the
  project runs), e2e/tools/kubernetes/VERSION, ../shared/crds/SOURCES.md (the CRDs validated against).

deployed(component) maps "where" (a stack file, a requirements file ...) to the release found there.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable
from pathlib import Path

import upstream_sglang
import upstream_vllm
from conftest import PROJECT_DIR, SHARED, STACKS

from components.platform import required_versions
from config_model import StackConfig
from config_model.infra import Cluster
from config_model.stack import SECRET_KEYS
from render import stackfile
from stacks import loader

E2E_TOOLS = PROJECT_DIR / "e2e" / "tools"
CRD_SOURCES = SHARED / "crds" / "SOURCES.md"
ENGINE_TABLES = {"vllm": upstream_vllm, "sglang": upstream_sglang}


# ---- the stacks ----

def _e2e_stackfiles():
    """e2e/stackfiles.py, loaded under its own name (tests/ and e2e/ each have a conftest)."""
    spec = importlib.util.spec_from_file_location("e2e_stackfiles", PROJECT_DIR / "e2e" / "stackfiles.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def stack_files() -> dict[str, stackfile.StackFile]:
    """Every stack that is deployed: the committed ones and the e2e's variants."""
    files = {f"Pulumi.{s}.yaml": stackfile.read(PROJECT_DIR, s) for s in STACKS}
    e2e = _e2e_stackfiles()
    files |= {f"variant {name} (e2e/stackfiles.py)": e2e._variant(name) for name in e2e.VARIANTS}
    return files


def config(sf: stackfile.StackFile) -> StackConfig:
    """The stack's config as the program validates it (stacks/loader.py from_pulumi, offline)."""
    prefix = f"{loader.NAMESPACE}:"
    raw, present_secrets = {}, {}
    for full_key, text in sf.config.items():
        if not full_key.startswith(prefix):
            continue
        key = full_key[len(prefix):]
        if key in SECRET_KEYS:
            present_secrets[key] = full_key in sf.secret_keys
        else:
            raw[key] = loader.decode(key, text)
    return loader.validate(raw, sf.stack, present_secrets, require_secrets=False)


def deployments() -> dict[str, StackConfig]:
    return {where: config(sf) for where, sf in stack_files().items()}


def _release_of_tag(image: str) -> str | None:
    """`vllm/vllm-openai:v0.26.0-cu129` -> 0.26.0; None for an image without a release in its tag."""
    tag = image.rpartition(":")[2] if ":" in image.rpartition("/")[2] else ""
    found = re.match(r"v?(\d+\.\d+\.\d+)", tag)
    return found[1] if found else None


def engine_images(cfg: StackConfig, engine: str) -> list:
    """The images the stack's models of `engine` run (vLLM P/D on RayClusterFleet uses images.vllmRay)."""
    if not any(m.engine == engine for m in cfg.models):
        return []
    if engine == "sglang":
        return [cfg.images.sglang]
    return [ref for ref in (cfg.images.vllm, cfg.images.vllm_ray) if ref is not None]


def engine_releases(cfg: StackConfig, engine: str) -> set[str]:
    return {_release_of_tag(ref.upstream) or f"? (untagged image {ref.upstream})" for ref in engine_images(cfg, engine)}


# ---- files outside the stacks ----

def pip_pin(requirements: str, package: str) -> str:
    text = (PROJECT_DIR / requirements).read_text()
    found = re.findall(rf"^{re.escape(package)}==(\S+)$", text, re.M | re.I)
    assert len(found) == 1, f"{requirements} pins {package} {len(found)} times"
    return found[0]


def pip_pins(requirements: str, package: str) -> set[str]:
    """Every version pinned (requirements-engines.txt installs several side by side)."""
    return set(re.findall(rf"^{re.escape(package)}==(\S+)$", (PROJECT_DIR / requirements).read_text(), re.M | re.I))


def go_required(wrapper: str, module: str) -> str:
    """The version of `module` e2e/tools/<wrapper>/go.mod requires (what `go build` compiles)."""
    text = (E2E_TOOLS / wrapper / "go.mod").read_text()
    found = re.search(rf"^\s*(?:require\s+)?{re.escape(module)} (v\S+)", text, re.M)
    assert found, f"e2e/tools/{wrapper}/go.mod does not require {module}"
    return found[1]


def crd_sources(path: Path = CRD_SOURCES) -> dict[str, tuple[str, str, str]]:
    """../shared/crds/SOURCES.md, its first table: local dir -> (repository, tag, commit)."""
    rows = {}
    for line in path.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 6 and cells[0].startswith("`") and re.fullmatch(r"[0-9a-f]{40}", cells[3]):
            rows[cells[0].strip("`").rstrip("/")] = (cells[1], cells[2], cells[3])
    return rows


def supported_kubernetes() -> list[str]:
    """The minors config_model Cluster accepts, asked of the model itself."""
    out = []
    for minor in range(0, 100):
        try:
            Cluster(kubernetes_version=f"1.{minor}")
        except ValueError:
            continue
        out.append(f"1.{minor}")
    return out


# ---- one function per component ----

def _per_stack(release: Callable[[StackConfig], set[str]], what: str):
    def read(stacks: dict[str, StackConfig]) -> dict[str, str]:
        return {f"{where}: {what}": r for where, cfg in stacks.items() for r in sorted(release(cfg))}
    return read


def _platform(key: str):
    return _per_stack(lambda cfg: {required_versions(cfg.platform)[key]},
                      f"{key} (components/platform.py required_versions)")


def _engine(engine: str):
    return _per_stack(lambda cfg: engine_releases(cfg, engine), f"images.{engine} tag")


def _engine_pin(table: str):
    """A package each engine release pins (Requires-Dist), for the engine releases the stack runs."""
    def release(cfg: StackConfig) -> set[str]:
        out = set()
        for engine, module in ENGINE_TABLES.items():
            pins = getattr(module, table)
            for r in engine_releases(cfg, engine):
                out.add(pins.get(r, f"? ({engine} {r} is not in tests/upstream_{engine}.py {table})"))
        return out
    return _per_stack(release, f"Requires-Dist of the engine releases it runs ({table})")


def _cuda(cfg: StackConfig) -> set[str]:
    return {ref.cuda_version or f"? (no cudaVersion on {ref.upstream})"
            for engine in ENGINE_TABLES for ref in engine_images(cfg, engine)}


def _kubernetes(stacks: dict[str, StackConfig]) -> dict[str, str]:
    supported = supported_kubernetes()
    return {**{f"{where}: cluster.kubernetesVersion": cfg.cluster.kubernetes_version for where, cfg in stacks.items()},
            "config_model Cluster: oldest supported minor": supported[0],
            "config_model Cluster: newest supported minor": supported[-1],
            "e2e/tools/kubernetes/VERSION (the e2e's control plane)": (E2E_TOOLS / "kubernetes" / "VERSION").read_text().strip()}


def _fixed(where: str, read: Callable[[], str]):
    return lambda stacks: {where: read()}


COMPONENTS: dict[str, Callable[[dict[str, StackConfig]], dict[str, str]]] = {
    "aibrix": _platform("aibrix"),
    "kuberay": _platform("kuberay"),
    "envoy-gateway": _platform("envoyGateway"),
    "gateway-api": _platform("gatewayApi"),
    "rbg": _platform("rbg"),
    "vllm": _engine("vllm"),
    "sglang": _engine("sglang"),
    "cuda": _per_stack(_cuda, "cudaVersion of its engine images"),
    "flashinfer": _engine_pin("FLASHINFER"),
    "tilelang": _engine_pin("TILELANG"),
    "apache-tvm-ffi": _engine_pin("TVM_FFI"),
    "torch": _engine_pin("TORCH"),
    "kubernetes": _kubernetes,
    "pulumi": _fixed("e2e/tools/pulumi/go.mod (the Pulumi CLI the project runs)",
                     lambda: go_required("pulumi", "github.com/pulumi/pulumi/pkg/v3")),
    "pulumi-kubernetes": _fixed("requirements.txt pulumi_kubernetes (the provider release the SDK asks for)",
                                lambda: pip_pin("requirements.txt", "pulumi_kubernetes")),
    "pulumi-aws": _fixed("requirements.txt pulumi_aws", lambda: pip_pin("requirements.txt", "pulumi_aws")),
    "awscli": _fixed("requirements-s3.txt (the AWS CLI the sync tests run)",
                     lambda: pip_pin("requirements-s3.txt", "awscli")),
    "s3transfer": _fixed("requirements-s3.txt (its s3transfer)", lambda: pip_pin("requirements-s3.txt", "s3transfer")),
    # No stack installs or pins a Prometheus Operator: the manifests are validated against these CRDs.
    "prometheus-operator": _fixed("../shared/crds/SOURCES.md prometheus-operator (the CRDs validated against)",
                                  lambda: crd_sources()["prometheus-operator"][1]),
}


def deployed(component: str, stacks: dict[str, StackConfig] | None = None) -> dict[str, str]:
    """Where -> the release of `component` found there."""
    return COMPONENTS[component](deployments() if stacks is None else stacks)
