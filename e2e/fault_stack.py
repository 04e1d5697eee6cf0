"""The stack the CLI and concurrency fault scenarios interrupt (issue 30): the dev stack on a GPU node of its own
(8 GPUs, exactly its budget, tainted so no other scenario lands there), its updates held at a point with
e2e/faults.py, and what must hold after every recovery: `pulumi preview --expect-no-changes`, no GPU workload
duplicated or over the pool, no engine pod of another revision, no data claim replaced, no secret in any output."""

from __future__ import annotations

import json
import secrets
import time

import cluster
import faults
import stackfiles
from harness import POLICY_LAUNCHER, Pulumi, Result, log

POLICY = ("--policy-pack", POLICY_LAUNCHER, "--policy-pack-config", "policy/config.dev.json")
GPU = "nvidia.com/gpu"
POOL_KEY = "e2e.llm-serving.io/pool"
REVISION = "llm-serving.io/model-revision"
JOB_NAME = "batch.kubernetes.io/job-name"
# What the file backend says to a second update while a lock is held (pkg/backend/diy/lock.go checkForLock).
LOCKED = ("error: the stack is currently locked by 1 lock(s). Either wait for the other process(es) to end or delete "
          "the lock file with `pulumi cancel`.")


def _job_pods(prefix: str) -> tuple[str, dict[str, str]]:
    return (f"has(object.metadata.labels) && '{JOB_NAME}' in object.metadata.labels && "
            f"object.metadata.labels['{JOB_NAME}'].startsWith('{prefix}')", {JOB_NAME: f"{prefix}probe"})


# Where an update is held (faults.held_pods): the CEL condition on the pods that stay Pending, and labels of a
# pod it matches. The sync Job's pod (components/sync_job.py), the engine's (app.kubernetes.io/component), the
# smoke Job's (components/operations.py): the three points of issue 30's scenario 1, in the order `up` meets them.
# The engine point holds the smoke Job's pods too: pulumi-kubernetes may report a Recreate rollout done before
# its new pod exists (FaultStack.engine_await_passed), and `up` would then run on to its end with the engine
# pod still Pending; so the interruption lands while the rollout is in progress either way, Pulumi waiting for
# the Deployment or, past it, for the smoke Job.
_ENGINE = ("has(object.metadata.labels) && object.metadata.labels.exists(k, k == 'app.kubernetes.io/component' "
           "&& object.metadata.labels[k] == 'engine')")
POINTS = {
    "sync": _job_pods("sync-"),
    "engine": (f"({_ENGINE}) || ({_job_pods('smoke-')[0]})", {"app.kubernetes.io/component": "engine"}),
    "smoke": _job_pods("smoke-"),
}


class FaultStack:
    def __init__(self, pulumi: Pulumi, name: str, node_index: int):
        self.pulumi, self.name, self.index = pulumi, name, node_index
        self.namespace = f"e2e-{name}"
        self.node = f"gpu-{name}"
        self.secrets: dict[str, str] = {}
        self.claims: dict[str, str] | None = None
        self.env: dict[str, str] = {}

    # -- set-up and tear-down ---------------------------------------------------------------------------------
    def init(self) -> None:
        _, keys = stackfiles.write(self.name, self.pulumi.project, self.namespace)
        self.pulumi.run("stack", "init", self.name, "--secrets-provider", "passphrase")
        for key in keys:
            self.secrets[key] = secrets.token_hex(16)
            self.pulumi.set_secret(key, self.secrets[key], stack=self.name)
        node = cluster.node(self.node, cluster.GPU, {**cluster.GPU_LABELS, POOL_KEY: self.name},
                            [*cluster.GPU_TAINTS, {"key": POOL_KEY, "value": self.name, "effect": "NoSchedule"}],
                            self.index)
        cluster.kubectl("apply", "-f", "-", input=json.dumps(node))
        faults.wait_until(f"node {self.node} Ready (kwok)", lambda: cluster.true(cluster.get("node", self.node), "Ready"), 30)
        # Pinned to that node with `pulumi config set --path`, as a user points a stack at a pool.
        for path, value in ((f'gpuPool.nodeSelector["{POOL_KEY}"]', self.name),
                            ("gpuPool.tolerations[0].key", GPU), ("gpuPool.tolerations[0].operator", "Exists"),
                            ("gpuPool.tolerations[0].effect", "NoSchedule"),
                            ("gpuPool.tolerations[1].key", POOL_KEY), ("gpuPool.tolerations[1].operator", "Equal"),
                            ("gpuPool.tolerations[1].value", self.name), ("gpuPool.tolerations[1].effect", "NoSchedule")):
            self.set(path, value)

    def cleanup(self) -> None:
        """Destroyed, failed or not (the HTTPRoutes live in the gateway's namespace, the static PVs in none), and
        the node deleted; a lock a failed scenario left is removed first or destroy would be refused."""
        for lock in faults.lock_files(self.pulumi, self.name):
            lock.unlink()
        self.pulumi.run("destroy", "--yes", "--skip-preview", stack=self.name, timeout=600, check=False)
        cluster.kubectl("delete", "node", self.node, "--ignore-not-found", "--wait=false")

    # -- the CLI ---------------------------------------------------------------------------------------------
    def set(self, path: str, value: str) -> None:
        self.pulumi.run("config", "set", "--path", f"llm-serving:{path}", value, stack=self.name)

    def run(self, *args: str, check: bool = True, **kw) -> Result:
        return self.pulumi.run(*args, stack=self.name, check=check, timeout=600, env=self.env, **kw)

    def up(self, *extra: str, check: bool = True) -> Result:
        return self.run("up", "--yes", "--skip-preview", *POLICY, *extra, check=check)

    def start(self, *args: str) -> faults.Cli:
        return faults.Cli(self.pulumi, *args, stack=self.name, env=self.env)

    def start_up(self) -> faults.Cli:
        return self.start("up", "--yes", "--skip-preview", *POLICY)

    def held_at(self, cli: faults.Cli, point: str) -> list[str]:
        """Waits (bounded) until `up` is held at `point`: a pod of it exists, gated, and the CLI still runs."""
        def held():
            assert cli.alive(), f"pulumi up ended before it reached the {point}:\n{cli.wait(1)}"
            return faults.gated_pods(self.namespace)
        pods = faults.wait_until(f"pulumi up held at the {point}", held, 240, 1)
        if point == "engine":
            # Past the rollout already (engine_await_passed)? Then held at the smoke Job, once its pod exists.
            time.sleep(3)
            if self.engine_await_passed(cli):
                pods = faults.wait_until("pulumi up held at the smoke Job after the rollout",
                                         lambda: held() if any(p.startswith("smoke-") for p in held()) else None, 120, 1)
        log(f"{self.name}: up held at the {point} ({', '.join(pods)}) after {time.monotonic() - cli.start:.0f} s")
        return pods

    def engine_await_passed(self, cli: faults.Cli) -> bool:
        """Whether the provider had reported the engine Deployment updated, its new pod still held, by the time
        the CLI was signalled (read from the CLI's output after it exited). It can:
        with strategy Recreate the Deployment controller keeps the Complete conditions (NewReplicaSetAvailable)
        at the new generation until the old ReplicaSet is scaled down, before the new one exists
        (kubernetes/kubernetes#115538), and pulumi-kubernetes' awaiter (pkg/await/deployment.go
        checkAndLogStatus, checkReplicaSetStatus) then takes the old ReplicaSet at 0 replicas for done ("Replicas
        scaled to 0 for Deployment"). Then `up` is already in the smoke Job when interrupted."""
        text = " ".join(cli.log.read_text().split())
        return "Deployment deepseek-v4-flash-deployment updated" in text.split("^C received", 1)[0]

    def cluster_versions(self) -> dict[str, str]:
        """resourceVersion of every object the stack manages in its namespace (pods and events: the cluster's)."""
        items = cluster.get("deployments,replicasets,jobs,services,configmaps,secrets,pvc,networkpolicies,"
                            "poddisruptionbudgets,daemonsets", "-n", self.namespace)["items"]
        return {f"{o['kind']}/{o['metadata']['name']}": o["metadata"]["resourceVersion"] for o in items}

    # -- what must hold after every recovery ------------------------------------------------------------------
    def pods(self) -> list[dict]:
        items = cluster.get("pods", "-n", self.namespace)["items"]
        return [p for p in items if p["status"].get("phase") not in ("Succeeded", "Failed")]

    def converged(self, revision: str) -> float:
        """Asserts the stack converged on `revision`; returns the seconds the no-changes preview took."""
        preview = self.run("preview", "--expect-no-changes", *POLICY, check=False)
        assert preview.returncode == 0, preview
        pods = self.pods()
        gpus = sum(int((c.get("resources", {}).get("limits") or {}).get(GPU, 0)) for p in pods
                   for c in p["spec"]["containers"])
        pool = int(cluster.GPU[GPU])
        assert gpus <= pool, f"{gpus} GPUs requested in {self.namespace}, the pool has {pool}"
        engines = [p for p in pods if p["metadata"]["labels"].get("app.kubernetes.io/component") == "engine"]
        assert len(engines) == 1, f"engine pods: {[p['metadata']['name'] for p in engines]} (one replica declared)"
        for p in engines:
            gate = next(c for c in p["spec"]["initContainers"] if c["name"] == "model-gate")
            args = gate.get("args") or gate.get("command") or []
            assert p["metadata"]["annotations"].get(REVISION) == revision and revision in args, \
                (p["metadata"]["name"], p["metadata"]["annotations"].get(REVISION), args)
            assert p["spec"].get("nodeName") == self.node and p["status"].get("phase") == "Running", p["status"]
        assert self.serving_revisions() == {revision}
        serving = [r for r in cluster.get("replicasets", "-n", self.namespace, "-l", "app.kubernetes.io/component=engine")
                   ["items"] if r["spec"].get("replicas")]
        assert {r["spec"]["template"]["metadata"]["annotations"].get(REVISION) for r in serving} <= {revision}, \
            [r["metadata"]["name"] for r in serving]
        assert not faults.gated_pods(self.namespace)
        claims = {c["metadata"]["name"]: c["metadata"]["uid"]
                  for c in cluster.get("pvc", "-n", self.namespace)["items"]}
        if self.claims is None:
            self.claims = claims
        assert claims == self.claims, f"data claims replaced: {self.claims} -> {claims}"
        assert not faults.pending_operations(self.pulumi, self.name)
        assert not faults.lock_files(self.pulumi, self.name)
        self.no_secret_anywhere()
        return preview.seconds

    def serving_revisions(self) -> set[str]:
        """The model revisions Ready engine pods serve, each asserted to be one a sync Job completed (verified,
        its ready marker written: components/sync_job.py), so no pod of a half-applied update serves."""
        verified = {j["spec"]["template"]["metadata"]["labels"].get(REVISION)
                    for j in cluster.get("jobs", "-n", self.namespace, "-l", "app.kubernetes.io/component=model-sync")
                    ["items"] if j["status"].get("succeeded")}
        serving = {p["metadata"]["annotations"].get(REVISION) for p in self.pods()
                   if p["metadata"]["labels"].get("app.kubernetes.io/component") == "engine" and cluster.true(p, "Ready")}
        assert serving <= verified, f"engine pods serve {serving}, the sync Jobs verified {verified}"
        assert len(serving) <= 1, f"engine pods of several revisions serve: {serving}"
        return serving

    def no_secret_anywhere(self) -> None:
        texts = [(p.name, p.read_text(errors="replace")) for d in (self.pulumi.logs, self.pulumi.state)
                 for p in d.rglob("*") if p.is_file()]
        for key, value in self.secrets.items():
            leaks = [name for name, text in texts if value in text]
            assert not leaks, f"the value of {key} appears in {leaks}"
