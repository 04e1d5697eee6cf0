"""The pods the controllers make from the rendered group workloads (issue 29), as the kubelet starts their
engine containers: every rank of one group of each GROUP_PAIRS stack at TP 8 x PP 2 and TP 16 x PP 1, with the
variables each controller injects (tests/upstream_lws.py, upstream_aibrix.py, upstream_rbg.py: names, order,
the leader's address form) put first, the pod IP and Secrets resolved, and every $(VAR) of env, command and
args expanded as the kubelet does (tests/upstream_kubernetes.py expand). Rendered once per process."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import upstream_aibrix
import upstream_lws
import upstream_rbg
from conftest import k8s_objects
from multinode_stacks import GROUP_PAIRS, RDMA_NETWORK, r1_stack
from upstream_kubernetes import container_environment, expand
from variants import render

from policy.workloads import gpu_count

SHAPES = ((8, 2), (16, 1))   # TP x PP over two nodes of 8 GPUs
WORKLOAD_KINDS = {"leaderworkerset": "LeaderWorkerSet", "stormservice": "StormService",
                  "rolebasedgroup": "RoleBasedGroup"}
# Made-up names the controllers would generate: the RoleSet's generated suffix and the role template's hash.
ROLESET_SUFFIX, TEMPLATE_HASH = "x7k2p", "5d8f7c9b6"


@dataclass(frozen=True)
class GroupPod:
    where: str                  # orchestrator/engine/tp x pp/rank
    orchestrator: str
    engine: str
    tp: int
    pp: int
    rank: int
    size: int
    leader_address: str         # the leader's DNS name as the controller gives it
    argv: tuple[str, ...]       # from `serve` on, expanded
    env: dict                   # the container's environment, expanded
    container: dict             # as rendered
    labels: dict                # the pod's labels from its template (controller labels not added)
    spec: dict                  # the pod template's spec

    @property
    def pod_ip(self) -> str:
        return f"10.0.0.{self.rank + 1}"


@functools.lru_cache(maxsize=None)
def rendered(orchestrator: str, engine: str, tp: int, pp: int):
    return render(r1_stack(orchestrator, engine, tp=tp, pp=pp, network=RDMA_NETWORK))


def workload(orchestrator: str, engine: str, tp: int, pp: int) -> dict:
    (obj,) = [o for o in k8s_objects(rendered(orchestrator, engine, tp, pp))
              if o["kind"] == WORKLOAD_KINDS[orchestrator]]
    return obj


def _ranks(orchestrator: str, obj: dict) -> tuple[int, list[tuple[int, dict, list[dict], str]]]:
    """(size, [(rank, pod template, injected env, leader address)]) of group 0."""
    name, ns, spec = obj["metadata"]["name"], obj["metadata"]["namespace"], obj["spec"]
    if orchestrator == "leaderworkerset":
        lwt = spec["leaderWorkerTemplate"]
        size = lwt["size"]
        leader = upstream_lws.leader_address(name, 0, name, ns)
        return size, [(r, lwt["leaderTemplate"] if r == 0 else lwt["workerTemplate"],
                       upstream_lws.injected_env(name, 0, ns, size, r), leader) for r in range(size)]
    if orchestrator == "stormservice":
        (role,) = spec["template"]["spec"]["roles"]
        size, roleset = role["podGroupSize"], f"{name}-roleset-{ROLESET_SUFFIX}"
        podset = upstream_aibrix.podset_name(roleset, role["name"], TEMPLATE_HASH, 0)
        return size, [(r, role["template"], upstream_aibrix.podset_injected_env(
            name, roleset, 0, role["name"], TEMPLATE_HASH, 0, r, size),
            upstream_aibrix.group_leader_address(podset, name, ns)) for r in range(size)]
    (role,) = spec["roles"]
    lwp = role["leaderWorkerPattern"]
    size, template = lwp["size"], lwp["template"]
    # leaderTemplatePatch as this program writes it: labels only (a strategic merge of a map is a merge).
    patch_labels = lwp["leaderTemplatePatch"]["metadata"]["labels"]
    leader_template = {**template, "metadata": {**template["metadata"],
                                                "labels": {**template["metadata"]["labels"], **patch_labels}}}
    instance = f"{name}-{role['name']}-0"
    leader = f"{instance}-0.s-{name}-{role['name']}.{ns}"
    return size, [(r, leader_template if r == 0 else template,
                   upstream_rbg.lwp_injected_env(name, role["name"], ns, 0, r, size), leader) for r in range(size)]


def _engine_container(template: dict) -> dict:
    (c,) = [c for c in template["spec"]["containers"] if gpu_count(c)[1] > 0]
    return c


def _pods(orchestrator: str, engine: str, tp: int, pp: int) -> list[GroupPod]:
    size, ranks = _ranks(orchestrator, workload(orchestrator, engine, tp, pp))
    out = []
    for rank, template, injected, leader in ranks:
        c = _engine_container(template)
        names = {e["name"] for e in injected}
        env_list = injected + [e for e in c.get("env", []) if e["name"] not in names]

        def resolve(source: dict, rank=rank) -> str:
            if source.get("fieldRef", {}).get("fieldPath") == "status.podIP":
                return f"10.0.0.{rank + 1}"
            if "secretKeyRef" in source:
                return "secret-value"
            raise AssertionError(f"{orchestrator}: no value for {source}")
        env = container_environment(env_list, resolve)
        command = [expand(a, env) for a in (c.get("command") or []) + (c.get("args") or [])]
        argv = tuple(command[command.index("serve"):])
        out.append(GroupPod(f"{orchestrator}/{engine}/tp{tp}xpp{pp}/rank{rank}", orchestrator, engine, tp, pp, rank,
                            size, leader, argv, env, c, template["metadata"]["labels"], template["spec"]))
    return out


def pod_ids(engine: str) -> list[str]:
    """GroupPod.where of every rank of the engine's pairs, without rendering (for test ids at collection)."""
    return [f"{o}/{e}/tp{tp}xpp{pp}/rank{r}" for o, e in GROUP_PAIRS if e == engine for tp, pp in SHAPES
            for r in range(tp * pp // 8)]


def pod(where: str) -> GroupPod:
    (found,) = [p for p in group_pods() if p.where == where]
    return found


@functools.lru_cache(maxsize=None)
def group_pods() -> tuple[GroupPod, ...]:
    return tuple(p for o, e in GROUP_PAIRS for tp, pp in SHAPES for p in _pods(o, e, tp, pp))
