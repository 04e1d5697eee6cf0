"""How the e2e cluster runs the controllers `e2e/build-tools.sh` builds: against the loopback
kube-apiserver with only a kubeconfig, no webhooks, no leader election, metrics and health probes on
127.0.0.1, and no part that dials the pod IPs kwok invents.

Every flag below cites the upstream file at the tag the wrapper builds; read them in the module
directories (`cd e2e/tools/<name> && go list -m -f '{{.Dir}}' <module>`). All three are
controller-runtime managers: `--kubeconfig` is registered by controller-runtime's
`pkg/client/config/config.go` init (v0.19.2 for AIBrix, v0.17.5 for KubeRay) and read by
`ctrl.GetConfigOrDie()` (KubeRay) or `flag.Lookup("kubeconfig")` (AIBrix `cmd/controllers/main.go`).
They use Go's `flag` package, so `--name=value` is the form. RBAC is not an issue: they run with the
admin kubeconfig.

Start each only after its CRDs are installed and Established: both managers decide at start-up which
controllers to run and never look again (see `start_after_crds`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, TypedDict

CRDS = Path(__file__).resolve().parents[2] / "shared" / "crds"


class Controller(TypedDict):
    binary: str | None  # in .e2e/bin; None when it cannot be built (see `blocked`)
    module: str
    version: str
    argv: Callable[[str, int, int], list[str]]  # (kubeconfig, metrics port, health port) -> args
    env: dict[str, str]
    start_after_crds: list[Path]  # install (and wait for Established) before starting
    readyz: str  # GET http://127.0.0.1:<health port><readyz> answers 200 once started
    blocked: str | None


def _aibrix_argv(kubeconfig: str, metrics_port: int, health_port: int) -> list[str]:
    # vllm-project/aibrix v0.7.0 cmd/controllers/main.go unless noted.
    return [
        f"--kubeconfig={kubeconfig}",  # controller-runtime v0.19.2 pkg/client/config/config.go; main.go
        # reads it with flag.Lookup("kubeconfig") and uses clientcmd.BuildConfigFromFlags.
        f"--metrics-bind-address=127.0.0.1:{metrics_port}",  # default ":8080"
        f"--health-probe-bind-address=127.0.0.1:{health_port}",  # default ":8081"
        "--leader-elect=false",  # default false already; explicit so a default change shows.
        # No webhook server, no cert rotation (cert.CertsManager), readyz stops waiting for certs
        # and setupControllers skips every Setup*Webhook. Upstream's own standalone overlays use it:
        # config/standalone/{stormservice,distributed-inference}-controller/patch.yaml.
        "--disable-webhook",
        # pkg/features/features.go: names are stormservice-controller (StormService, RoleSet and
        # PodSet: pkg/controller/controller.go Initialize), distributed-inference-controller
        # (RayClusterFleet and RayClusterReplicaSet, only if CRD rayclusters.ray.io exists when
        # Initialize runs). Not enabled, on purpose:
        # - pod-autoscaler-controller: its metric fetchers scrape the engine pods' IPs
        #   (pkg/controller/podautoscaler); PodAutoscaler objects stay at the CRD level.
        # - model-adapter-controller: starts cache.InitWithOptions (main.go), which scrapes pod
        #   metrics, and loads adapters into the engines over HTTP.
        # - model-route-controller: creates aibrix-system/<model>-router HTTPRoutes only for
        #   workloads with a top-level model.aibrix.ai/name label, which ours never carry
        #   (components/routing.py); it also needs ModelAdapter in the scheme, which RegisterSchemas
        #   adds only with model-adapter-controller.
        # - kv-cache-controller: not used by the stacks.
        "--controllers=stormservice-controller,distributed-inference-controller",
    ]


def _kuberay_argv(kubeconfig: str, metrics_port: int, health_port: int) -> list[str]:
    # ray-project/kuberay ray-operator/v1.2.1 ray-operator/main.go unless noted. It always starts
    # the RayCluster, RayService and RayJob controllers (no flag selects them); only RayCluster is
    # used here (AIBrix's RayClusterReplicaSet creates RayClusters). The RayService and RayJob
    # controllers talk to a Ray dashboard only for RayService/RayJob objects, which the stacks
    # never create. Webhooks are registered only with ENABLE_WEBHOOKS=true in the environment.
    return [
        f"--kubeconfig={kubeconfig}",  # controller-runtime v0.17.5 pkg/client/config/config.go
        f"--metrics-addr=127.0.0.1:{metrics_port}",  # default ":8080" (apis/config/v1alpha1/defaults.go)
        f"--health-probe-bind-address=127.0.0.1:{health_port}",  # default ":8082" (same file)
        "--enable-leader-election=false",  # default true (DefaultEnableLeaderElection)
        # As AIBrix v0.7.0 deploys it: config/dependency/kuberay-operator/templates/deployment.yaml
        # passes this gate (and leader election on, which is off here). Gate in pkg/features/features.go.
        "--feature-gates=RayClusterStatusConditions=true",
    ]


def _rbg_argv(kubeconfig: str, metrics_port: int, health_port: int) -> list[str]:
    # sgl-project/rbg v0.7.0 cmd/rbgs/main.go (read from the GitHub repository: the module is not
    # served by the proxy, so there is no binary to run these with yet).
    return [
        f"--kubeconfig={kubeconfig}",  # controller-runtime v0.22.1, read by ctrl.GetConfigOrDie()
        f"--metrics-bind-address=127.0.0.1:{metrics_port}",  # default "0" (off)
        f"--health-probe-bind-address=127.0.0.1:{health_port}",  # default ":8082"
        # "none": no cert bootstrap, no conversion or admission webhooks; newManagerOptions then
        # forces LeaderElection=false and plain-HTTP metrics.
        "--enable-webhooks=none",
        "--leader-elect=false",  # default false
        "--metrics-secure=false",  # default true; forced off by --enable-webhooks=none anyway
    ]


CONTROLLERS: dict[str, Controller] = {
    "aibrix": {
        "binary": "aibrix-controller-manager",
        "module": "github.com/vllm-project/aibrix/cmd/controllers",
        "version": "v0.7.0",
        "argv": _aibrix_argv,
        "env": {},
        # pkg/controller/controller.go: Initialize checks rayclusters.ray.io once (absent: the
        # RayClusterFleet controllers are skipped for the life of the process) and SetupWithManager
        # skips, for good, a controller whose kind has no REST mapping (NoKindMatchError).
        "start_after_crds": [
            *(CRDS / "aibrix" / f"orchestration.aibrix.ai_{plural}.yaml" for plural in
              ("stormservices", "rolesets", "podsets", "rayclusterfleets", "rayclusterreplicasets")),
            CRDS / "kuberay" / "v1.2.1" / "ray.io_rayclusters.yaml",
        ],
        "readyz": "/readyz",  # main.go AddReadyzCheck: nil when --disable-webhook
        "blocked": None,
    },
    "kuberay": {
        "binary": "kuberay-operator",
        "module": "github.com/ray-project/kuberay/ray-operator",
        # What the stacks deploy (AIBrix v0.7.0's bundle, components/platform.py AIBRIX_BUNDLED) and
        # what aibrix v0.7.0's go.mod requires. AIBrix ships the image
        # aibrix/kuberay-operator:v1.2.1-patch-20250726 (config/dependency/kuberay-operator/
        # kustomization.yaml); its patch is not in any module: this is upstream v1.2.1.
        "version": "v1.2.1",
        "argv": _kuberay_argv,
        # config/dependency/kuberay-operator/templates/deployment.yaml (AIBrix v0.7.0): no readiness
        # or liveness probes injected into Ray pods (controllers/ray/utils/constant.go).
        "env": {"ENABLE_PROBES_INJECTION": "false"},
        # controllers/ray/{raycluster,rayservice,rayjob}_controller.go SetupWithManager watch all three
        # kinds; a missing one fails the manager's cache sync.
        "start_after_crds": [CRDS / "kuberay" / "v1.2.1" / f"ray.io_{plural}.yaml"
                             for plural in ("rayclusters", "rayjobs", "rayservices")],
        "readyz": "/readyz",  # healthz.Ping
        "blocked": None,
    },
    "rbg": {
        "binary": None,
        "module": "sigs.k8s.io/rbgs/cmd/rbgs",
        "version": "v0.7.0",
        "argv": _rbg_argv,
        "env": {},
        # internal/controller/workloads/*_controller.go CheckCrdExists exits when these are absent
        # (rolebasedgroups and clusterengineruntimeprofiles for the RBG controller).
        "start_after_crds": sorted((CRDS / "rbg").glob("workloads.x-k8s.io_*.yaml")),
        "readyz": "/readyz",
        "blocked": ("the Go module proxy refuses sigs.k8s.io/rbgs@v0.7.0 and github.com/sgl-project/rbg@v0.7.0 "
                    "(403 'This module version is not available'): RBG kinds stay at the CRD level"),
    },
}


def command(name: str, bin_dir: str | Path, kubeconfig: str, metrics_port: int, health_port: int) -> list[str]:
    """The full argv of controller `name`; raises if it cannot be built or is not built yet."""
    c = CONTROLLERS[name]
    if c["blocked"]:
        raise RuntimeError(f"{name}: {c['blocked']}")
    binary = Path(bin_dir) / str(c["binary"])
    if not binary.is_file():
        raise FileNotFoundError(f"{binary} is missing: run `bash e2e/build-tools.sh {name}`")
    return [str(binary), *c["argv"](kubeconfig, metrics_port, health_port)]


def buildable() -> list[str]:
    return [name for name, c in CONTROLLERS.items() if not c["blocked"]]
