"""Day-2 operations per served model, run by `pulumi up` after its workloads are ready: the smoke
test (correctness, field report 12.3, and the route's evidence, 11.3), then the warm-up (JIT before
traffic, 8.2), then optionally the load test (8.4, 11.4); plus a PodDisruptionBudget. The Jobs are
CPU-only and named after what they test, so a rollout brings new ones. Smoke and warm-up go through
the gateway when the stack has one, the way users reach the model (the model's Service selects
prefill and decode pods alike, each answering on its own), and so does the load test, whose idle
check reads every engine's /metrics through a headless Service of its own. Smoke and warm-up wait
for the endpoint up to the rollout's own deadline: a workload's Ready can come before the new
revision serves."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.base import Component, job_metadata, labels, metadata
from components.combined import rollout_timeouts, served_model_selector, service_exceptions, serving_selector
from components.engines import max_model_len, smoke_settings, tokenizer_mode
from components.group import spans_nodes
from components.ops_commands import Engines, SmokeRoute, load_test_plan, smoke_args, warmup_args
from components.orchestrators import orchestrator_of
from components.pod_template import API_KEY_ENTRY, SCRIPTS_MOUNT, container_security, cpu_job_pod, revision_path
from components.retention import kept, kept_annotations
from components.topologies import topology_of
from config_model import GpuPool, Operations, ServedModel, derived

RESULTS_CLAIM = "llm-bench-results"
RESULTS_MOUNT = "/results"
KEY_DIR = "/var/run/secrets/llm-serving"
AWAIT_MARGIN_SECONDS = 300


@dataclass(frozen=True)
class OperationsArgs:
    namespace: str
    model: ServedModel
    endpoint: str                  # the model's Service /v1 URL
    operations: Operations
    gpu_pool: GpuPool
    python_image: Any              # pulumi.Input[str]: stdlib scripts
    bench_image: Any               # pulumi.Input[str]: the vLLM image (vllm bench serve, tokenizer)
    revision_key: str              # components/rollout.py rollout_key: a new engine pod template, new Jobs
    api_key_secret: str
    scripts_config_map: str
    model_claim_name: str
    model_mount_path: str
    image_pull_secrets: tuple[str, ...] = ()
    results_claim: str | None = None
    gateway_endpoint: str | None = None   # the gateway's in-cluster /v1 URL; None: the stack has no gateway
    # Label keys of the models' own node pools (config_model/resources.py model_node_label_keys): CPU Jobs avoid them too.
    model_label_keys: tuple[str, ...] = ()


def smoke_route(m: ServedModel, via_gateway: bool) -> SmokeRoute:
    """What the topology's route must show: the gateway's pick, a prefill/decode pair, and KV that
    moved (route_evidence.py); without the gateway, only that the Service answers."""
    if not via_gateway:
        return SmokeRoute()
    return topology_of(m).smoke_route(m)


def engines_service(m: ServedModel) -> str:
    """The load test's headless Service of every engine pod that serves: of a group, its leader, through
    which every request enters, so its running and queued counts are the group's (a vLLM worker serves no
    /metrics at all). No controller derives it: StormService
    Services take the workload's name (the model's), RBG role Services <rbg>-<role> and
    s-<rbg>-<role> with role `server`, KubeRay head Services end in -head-svc (tests/upstream_*.py).
    A name past 63 characters keeps a hash of the whole, so two long model names stay apart."""
    return derived.bounded(f"{m.name}-engines")


def engine_metric_ports(m: ServedModel) -> tuple[int, ...]:
    """Where each engine pod serves /metrics: same-pod P/D has two engines, each on its own port."""
    return topology_of(m).engine_metric_ports(m)


def endpoint_wait_seconds(m: ServedModel) -> int:
    """Pulumi's own bound on the rollout (every wave a cold start)."""
    return int(str(rollout_timeouts(m).update).removesuffix("s"))


# The controller on each engine pod's ownerReferences, by what creates the pods. The Kubernetes
# disruption controller (pkg/controller/disruption/disruption.go getExpectedPodCount) reads the
# expected count for maxUnavailable from that controller's scale: a ReplicaSet (via its Deployment) or
# a custom resource with a /scale subresource (getScaleController). An owner without one fails the
# PDB's sync ("does not implement the scale subresource"), its status stays at 0 disruptions allowed
# and every eviction of those pods is refused: `kubectl drain` of a GPU node hangs. The chains, each
# pinned in tests/upstream_*.py: Deployment -> ReplicaSet -> pod; StormService -> RoleSet -> pod
# (AIBrix v0.7.0); RoleBasedGroup -> RoleInstanceSet -> RoleInstance -> pod (RBG v0.7.0, the role's
# default workload); RayClusterFleet -> RayClusterReplicaSet -> RayCluster -> pod (AIBrix v0.7.0,
# KubeRay v1.2.1). RoleSet, RoleInstance and RayCluster have no /scale in their CRDs.
FLEET_POD_CONTROLLER = "RayCluster"
SCALED_POD_CONTROLLERS = frozenset({"ReplicaSet"})


def pod_controllers(m: ServedModel) -> set[str]:
    """The controller kinds of the pods served_model_selector matches: every engine pod of the model,
    a P/D or hybrid model's fleet pods included (they carry the same model and component labels)."""
    t = topology_of(m)
    kinds = set()
    if t.model_workload:
        o = orchestrator_of(m)
        kinds.add(o.group_pod_controller if spans_nodes(m) else o.pod_controller)
    if t.fleets:
        kinds.add(FLEET_POD_CONTROLLER)
    return kinds


def steady_engine_pods(m: ServedModel) -> int:
    """Engine pods the PDB's selector matches when nothing rolls out (the topology counts them). An
    autoscaled model counts its minReplicas: see disruption_budget."""
    return topology_of(m).steady_engine_pods(m)


def disruption_budget(m: ServedModel) -> dict[str, int]:
    """One engine pod at a time, in the form the disruption controller can compute for these pods.
    maxUnavailable 1 where every pod's controller has /scale (it then follows the autoscaler's count).
    Otherwise an integer minAvailable, the one form computed from the matching pods alone, with no
    controller lookup (getExpectedPodCount: expectedCount = len(pods)): all pods but one. For an
    autoscaled model the count varies; minReplicas - 1 never blocks a drain (above the minimum more
    pods may go, never fewer than one) and at the minimum it still keeps all pods but one.

    A model spanning nodes (issue 29) counts groups: one pod's eviction takes its whole group down (LWS
    v0.10.0 pkg/controllers/pod_controller.go handleRestartPolicy: a deleted pod deletes its leader, and the
    group is created again; RBG v0.7.0 and AIBrix v0.7.0 replace the pod alone, and the group serves again
    only once it has rejoined its leader: orchestrators' group_restart). So its budget is all pods but one,
    replicas x size - 1, which lets one group go and holds every other: while a group is down, its size
    (>= 2) pods are not healthy, fewer than the budget's all-but-one, and the disruption controller allows
    no eviction until it is back (disruption.go updatePdbStatus: disruptionsAllowed = currentHealthy -
    desiredHealthy, floored at 0). The integer form, whatever the controllers: an RBG group's pods are
    owned by a RoleInstance and a StormService group's by a PodSet (AIBrix v0.7.0 pkg/controller/podset/
    podset_controller.go), neither with /scale in its CRD, so maxUnavailable would fail the sync; an LWS's
    are owned by StatefulSets (a leader one and one per group, owned by its leader pod), which the
    controller counts, but the group's worker StatefulSet goes with its leader while the group is created
    again. A model of one replica lets its group go, as a one-pod model lets its pod."""
    if spans_nodes(m):
        return {"minAvailable": steady_engine_pods(m) - 1}
    if pod_controllers(m) <= SCALED_POD_CONTROLLERS:
        return {"maxUnavailable": 1}
    return {"minAvailable": max(0, steady_engine_pods(m) - 1)}


def job_pod(args: OperationsArgs, name: str, image: Any, command: list[str], cpu: str, memory: str,
            extra_mounts: list[dict] | None = None, extra_volumes: list[dict] | None = None) -> dict:
    container = {
        "name": name,
        "image": image,
        "command": command[:1],
        "args": command[1:],
        # The API key is a file from the Secret, never an environment variable of the pod.
        "env": [{"name": "OPENAI_API_KEY_FILE", "value": f"{KEY_DIR}/{API_KEY_ENTRY}"},
                {"name": "HOME", "value": "/tmp"}, {"name": "HF_HOME", "value": "/tmp/huggingface"},
                {"name": "VLLM_NO_USAGE_STATS", "value": "1"}, {"name": "PYTHONUNBUFFERED", "value": "1"}],
        "resources": {"requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": cpu, "memory": memory}},
        "securityContext": container_security(non_root=True),
        "volumeMounts": [{"name": "scripts", "mountPath": SCRIPTS_MOUNT, "readOnly": True},
                         {"name": "api-key", "mountPath": KEY_DIR, "readOnly": True},
                         {"name": "tmp", "mountPath": "/tmp"}, *(extra_mounts or [])],
    }
    volumes = [{"name": "scripts", "configMap": {"name": args.scripts_config_map, "defaultMode": 0o555}},
               {"name": "api-key", "secret": {"secretName": args.api_key_secret, "defaultMode": 0o440,
                                              "items": [{"key": API_KEY_ENTRY, "path": API_KEY_ENTRY}]}},
               {"name": "tmp", "emptyDir": {"sizeLimit": "4Gi"}},
               *(extra_volumes or [])]
    return cpu_job_pod(args.gpu_pool, [container], volumes, image_pull_secrets=args.image_pull_secrets,
                       model_label_keys=args.model_label_keys)


class ModelOperations(Component):
    job_names: dict[str, str]

    def __init__(self, name: str, args: OperationsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:operations:ModelOperations", name, opts)
        self.resource_prefix = name
        m, ops, ns = args.model, args.operations, args.namespace
        self.job_names = {}
        previous: list[pulumi.Resource] = []
        user_endpoint = args.gateway_endpoint or args.endpoint
        wait = endpoint_wait_seconds(m)
        if ops.smoke.enabled:
            command = smoke_args(user_endpoint, m.served_model_name, smoke_settings(m, ops.smoke), smoke_settings(m, ops.smoke).max_tokens,
                                 smoke_route(m, bool(args.gateway_endpoint)), wait, max_model_len(m))
            previous = [self._job("smoke", args, args.python_image, command, "500m", "256Mi",
                                  deadline=wait + 900, backoff=0, after=previous)]
        if ops.warmup.enabled:
            prefix = f"warmup-{m.name}-{args.revision_key}"
            command = warmup_args(user_endpoint, m.served_model_name, ops.warmup, max_model_len(m), prefix, wait,
                                  smoke_settings(m, ops.smoke))
            previous = [self._job("warmup", args, args.python_image, command, "2", "2Gi",
                                  deadline=wait + ops.warmup.timeout_seconds, backoff=1, after=previous)]
        if ops.load_test.enabled:
            assert args.results_claim is not None
            model_path = f"{args.model_mount_path}/{revision_path(m.directory, m.revision)}"
            run_id = f"bench-{m.name}-{args.revision_key}"
            # Headless and publishing unready pods: its DNS name resolves to every engine pod's IP,
            # one still draining requests included, so the idle check misses none (field report 11.4).
            # Nothing for Pulumi to await: the Job checks every engine itself before each round.
            engines = k8s.core.v1.Service(
                f"{name}-engines", metadata={**metadata(engines_service(m), ns, "load-test"),
                                             "annotations": {"pulumi.com/skipAwait": "true", **service_exceptions(m)}},
                spec={"clusterIP": "None", "publishNotReadyAddresses": True, "selector": serving_selector(m),
                      "ports": [{"name": f"metrics-{p}", "port": p, "targetPort": p, "protocol": "TCP"}
                                for p in engine_metric_ports(m)]},
                opts=self.child_opts())
            host = f"{engines_service(m)}.{ns}.svc.cluster.local"
            plan = load_test_plan(user_endpoint, m.served_model_name, model_path, tokenizer_mode(m),
                                  ops.load_test.scenarios, run_id, Engines(host, engine_metric_ports(m), m.engine))
            command = ["python3", f"{SCRIPTS_MOUNT}/load_test.py", "--plan", plan, "--results", RESULTS_MOUNT]
            # Not awaited (components/base.py NOT_AWAITED): a benchmark is a measurement, not a gate.
            # Awaited, a failed round (engines busy, a round's error) failed that `pulumi up`, and with
            # replaceUnready every later one re-ran it; without, every later one failed again at once on
            # the Job's init error. Its outcome is the Job's status and the results claim.
            self._job("loadtest", args, args.bench_image, command, "4", "8Gi",
                      deadline=ops.load_test.timeout_seconds, backoff=0, after=[*previous, engines], awaited=False,
                      mounts=[{"name": "results", "mountPath": RESULTS_MOUNT},
                              {"name": "model", "mountPath": args.model_mount_path, "readOnly": True}],
                      volumes=[{"name": "results", "persistentVolumeClaim": {"claimName": args.results_claim}},
                               {"name": "model", "persistentVolumeClaim": {"claimName": args.model_claim_name,
                                                                          "readOnly": True}}])
        if ops.disruption_budget:
            k8s.policy.v1.PodDisruptionBudget(
                f"{name}-pdb", metadata=metadata(m.name, ns, "engine"),
                spec={**disruption_budget(m), "selector": {"matchLabels": served_model_selector(m)}},
                opts=self.child_opts())
        self.register_outputs({"jobs": self.job_names})

    def _job(self, kind: str, args: OperationsArgs, image: Any, command: list[str], cpu: str, memory: str,
             deadline: int, backoff: int, after: list[pulumi.Resource], mounts: list[dict] | None = None,
             volumes: list[dict] | None = None, awaited: bool = True) -> k8s.batch.v1.Job:
        m = args.model
        job_name = f"{kind}-{m.name}"[:54] + f"-{args.revision_key}"
        self.job_names[kind] = job_name
        timeout = f"{deadline + AWAIT_MARGIN_SECONDS}s"
        return k8s.batch.v1.Job(
            f"{self.resource_prefix}-{kind}",
            metadata=job_metadata(job_name, args.namespace, kind, awaited),
            spec={"backoffLimit": backoff, "activeDeadlineSeconds": deadline,
                  "template": {"metadata": {"labels": {**labels(job_name, kind), "llm-serving.io/model": m.name}},
                               "spec": job_pod(args, kind, image, command, cpu, memory, mounts, volumes)}},
            # A timeout bounds only an await: an unawaited Job's create returns at once.
            opts=self.child_opts(depends_on=after, delete_before_replace=True,
                                 custom_timeouts=pulumi.CustomTimeouts(create=timeout, update=timeout) if awaited else None))


class BenchResults(Component):
    """The claim load-test results live on. Outside dev it is kept (components/retention.py): switching
    the load test off or destroying the stack leaves it, switching it on again adopts it."""

    claim_name: str = RESULTS_CLAIM

    def __init__(self, name: str, namespace: str, size_gib: int, storage_class: str | None,
                 retained: k8s.Provider | None, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:operations:BenchResults", name, opts)
        spec: dict = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": f"{size_gib}Gi"}}}
        if storage_class:
            spec["storageClassName"] = storage_class
        # Unbound until the first load test mounts it, so Pulumi must not wait for Bound.
        k8s.core.v1.PersistentVolumeClaim(
            f"{name}-claim",
            metadata={**metadata(RESULTS_CLAIM, namespace, "bench-results"),
                      "annotations": {"pulumi.com/skipAwait": "true", **kept_annotations(retained)}},
            spec=spec, opts=self.child_opts(**kept(retained)))
        self.register_outputs({"claimName": RESULTS_CLAIM})
