"""Day-2 rollouts (issue 18 cases 2, 3 and 7), as before/after pairs of renders:

- scaling a model never changes an engine pod template (the routing default no longer follows the
  replica count), so a scale-out starts one new pod instead of recreating the serving one;
- a rotated Secret changes the tag annotation of every pod template that reads it, and for the API
  key the smoke, warm-up and load-test Job names, and nothing else;
- the rollout key that names those Jobs covers every input of the engine pod templates (enumerated
  field by field), and a change that reaches no pod template renames no Job.

Judged against the controllers' and the provider's rules: a workload rolls its pods when its pod
template changes (Deployment, StormService, RoleBasedGroup; a RayClusterFleet on any change of its
RayCluster template, aibrix v0.7.0 pkg/controller/rayclusterfleet/sync.go, util/fleet.go
ComputeHash), and pulumi-kubernetes v4.32.0 replaces a Job whose name or spec.template changes
(provider/pkg/provider/diff.go: metadata.name and, for batch/v1 Job, .spec.template force a new
object), so a new Job name is a new run after the rollout. The gateway's single-pod pick is ported
from aibrix v0.7.0 pkg/plugins/gateway/gateway.go in tests/upstream_aibrix.py.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import typing

import pydantic
import pytest
import upstream_aibrix as aibrix
from conftest import PROJECT_DIR, k8s_objects
from pulumi.runtime import rpc
from test_config import SECRETS, raw_config
from test_pd import stack as pd_stack
from variants import dev_config, render, sglang_stack, variant_file

from components.combined import CombinedEngineArgs, EngineImage, TemplateSource, combined_pod_templates
from components.disaggregated import DisaggregatedArgs, fleet_pod_templates, same_pod_template
from components.rollout import engine_templates, rollout_key
from components.secrets import (
    ANN_CONTENT_TAG,
    API_KEY_SECRET,
    CONSUMER_KEYS_SECRET,
    OBJECT_STORE_SECRET,
    ConsumerKeys,
    secret_tag_annotation,
)
from config_model import CompileCache, Rdma, Toleration
from config_model.infra import GangScheduling, NodeNetwork
from policy.workloads import containers, pod_templates
from render import runtime, stackfile
from stacks import loader

OPS_KINDS = ("smoke", "warmup", "loadtest")


# ---- reading renders ----

def by_name(rendered) -> dict[str, dict]:
    """Kubernetes objects by logical (Pulumi) name: a Job that gets a new name keeps its logical name."""
    return {r.name: r.inputs for r in rendered.resources if r.type.startswith("kubernetes:") and "kind" in r.inputs}


def engine_pod_templates(rendered) -> dict[tuple[str, str], dict]:
    """Every engine pod template, by (workload kind, workload name)."""
    out = {}
    for obj in k8s_objects(rendered):
        if obj.get("kind") == "Job":
            continue
        for ref in pod_templates(obj["kind"], obj):
            labels = (ref.template.get("metadata") or {}).get("labels") or {}
            if labels.get("app.kubernetes.io/component") == "engine":
                out[(obj["kind"], obj["metadata"]["name"], ref.path)] = ref.template
    return out


def ops_job_names(rendered) -> dict[str, str]:
    """The day-2 Jobs that run after a rollout, logical name -> Kubernetes name."""
    return {name: obj["metadata"]["name"] for name, obj in by_name(rendered).items()
            if obj["kind"] == "Job" and obj["metadata"]["labels"]["app.kubernetes.io/component"] in OPS_KINDS}


def reads_secret(template: dict, secret: str) -> bool:
    """Whether a pod of this template reads the Secret: an env secretKeyRef or a secret volume."""
    spec = template.get("spec") or {}
    if any((v.get("secret") or {}).get("secretName") == secret for v in spec.get("volumes") or []):
        return True
    return any(((e.get("valueFrom") or {}).get("secretKeyRef") or {}).get("name") == secret
               for _, c in containers(template) for e in c.get("env") or [])


def all_pod_templates(rendered) -> dict[tuple[str, str], dict]:
    """Every pod template of every object, by (logical name, path)."""
    return {(name, ref.path): ref.template for name, obj in by_name(rendered).items()
            for ref in pod_templates(obj["kind"], obj)}


def without_annotation(template: dict, key: str) -> dict:
    t = copy.deepcopy(template)
    (t.get("metadata") or {}).get("annotations", {}).pop(key, None)
    return t


def changed(before, after) -> set[str]:
    a, b = by_name(before), by_name(after)
    assert set(a) == set(b)
    return {n for n in a if a[n] != b[n]}


# ---- variants: every topology and orchestrator, autoscaling on and off ----

def autoscaled(**changes) -> dict:
    return {"enabled": True, "minReplicas": 1, "maxReplicas": 2, "metric": "kv-cache-usage", "targetValue": 0.8,
            **changes}


def variant(name: str, replicas: int = 1, autoscaling: bool = False, **model_changes):
    """A stack of one served model: dev's with topology/orchestrator `name`, room for two replicas."""
    changes = dict(model_changes, replicas=replicas)
    if autoscaling:
        changes["autoscaling"] = autoscaled(maxReplicas=max(2, replicas))
    if name == "sglang-rbg":
        sf = sglang_stack(**changes)
        sf.config["llm-serving:gpuBudget"] = "64"
        return sf
    topology, orchestrator = name.split(":")
    return pd_stack(topology, orchestrator, 64, **changes)


TOPOLOGIES = ["combined:deployment", "combined:stormservice", "sglang-rbg", "pd:rayclusterfleet",
              "hybrid:stormservice", "hybrid:deployment", "pd-same-pod:deployment"]


@functools.lru_cache(maxsize=None)
def rendered_variant(name: str, replicas: int = 1, autoscaling: bool = False, strategy: str | None = None):
    extra = {"routingStrategy": strategy} if strategy else {}
    return render(variant(name, replicas, autoscaling, **extra))


# ---- case 2: scaling never touches the pods ----

SCALABLE = [(t, a) for t in TOPOLOGIES for a in (False, True)
            # The stack rules autoscale combined Deployments and StormServices only (stacks/rules/capacity.py).
            if not a or t in ("combined:deployment", "combined:stormservice")]


@pytest.mark.parametrize("name,autoscaling", SCALABLE)
def test_scaling_one_to_two_leaves_every_engine_pod_template_and_job_identical(name, autoscaling):
    one, two = rendered_variant(name, 1, autoscaling), rendered_variant(name, 2, autoscaling)
    assert engine_pod_templates(one) and engine_pod_templates(one) == engine_pod_templates(two)
    # No pod template changes, so the rollout key, and with it every day-2 Job name, stays. (Where the
    # workload rolls in waves, the Jobs' endpoint wait, waves x deadline, is in their args: those Jobs
    # are replaced and run again, through the gateway, without any engine restart: docs/day-2/rollouts.md.)
    assert ops_job_names(one) == ops_job_names(two)
    assert changed(one, two), "the scale itself must change the workload"


@pytest.mark.parametrize("name", ["combined:deployment", "combined:stormservice"])
def test_autoscaling_on_or_off_leaves_every_engine_pod_template_identical(name):
    assert engine_pod_templates(rendered_variant(name, 1, False)) == engine_pod_templates(rendered_variant(name, 1, True))
    assert ops_job_names(rendered_variant(name, 1, False)) == ops_job_names(rendered_variant(name, 1, True))


def test_an_explicit_routing_strategy_is_kept_and_scaling_still_leaves_the_pods():
    one = rendered_variant("combined:deployment", 1, strategy="least-kv-cache")
    two = rendered_variant("combined:deployment", 2, strategy="least-kv-cache")
    assert engine_pod_templates(one) == engine_pod_templates(two)
    (template,) = engine_pod_templates(one).values()
    profile = json.loads(template["metadata"]["annotations"][aibrix.ANN_CONFIG])["profiles"]["default"]
    assert profile["routingStrategy"] == "least-kv-cache"


def test_with_one_pod_the_gateway_picks_it_before_any_strategy_runs():
    """prefix-cache with one pod is least-request with one pod: the plugin sends the request to the only
    routable pod of at most one port before the strategy's Route (and its prefix index) runs; from two
    pods on the strategy decides (gateway.go selectTargetPod)."""
    for replicas in (1, 2):
        r = rendered_variant("combined:deployment", replicas)
        (template,) = engine_pod_templates(r).values()
        pods = [((template["metadata"]["labels"]), [(e["name"], e.get("value", "")) for _, c in containers(template)
                                                    for e in c.get("env") or []])] * replicas
        assert aibrix.ports_for_pod(*pods[0]) == [8000]
        assert aibrix.picks_without_strategy(pods) is (replicas == 1)
    assert aibrix.ports_for_pod({aibrix.LABEL_PORT: "8000"}, [(aibrix.ENV_DATA_PARALLEL_SIZE, "2")]) == [8000, 8001]


# ---- case 3: a rotated Secret rolls its readers ----

def with_secret(sf: stackfile.StackFile, key: str, ciphertext: str) -> stackfile.StackFile:
    out = copy.deepcopy(sf)
    out.config[f"llm-serving:{key}"] = stackfile.placeholder(ciphertext)
    if f"llm-serving:{key}" not in out.secret_keys:
        out.secret_keys.append(f"llm-serving:{key}")
    return out


def assert_rotation_rolls_exactly_the_readers(before, after, secret: str, expect_ops_jobs: bool):
    a_templates, b_templates = all_pod_templates(before), all_pod_templates(after)
    readers = {k for k, t in a_templates.items() if reads_secret(t, secret)}
    assert readers
    ops = set(ops_job_names(before))
    tag = secret_tag_annotation(secret)
    for k in readers:
        if k[0] in ops:
            continue   # a smoke/warm-up Job: it gets a new name instead (below)
        a_tag = a_templates[k]["metadata"]["annotations"][tag]
        b_tag = b_templates[k]["metadata"]["annotations"][tag]
        assert a_tag != b_tag, k
        # The tag is the whole difference of the template.
        assert without_annotation(a_templates[k], tag) == without_annotation(b_templates[k], tag), k
    for k in set(a_templates) - readers:
        assert a_templates[k] == b_templates[k], f"{k} does not read {secret} and must not change"
    a_jobs, b_jobs = ops_job_names(before), ops_job_names(after)
    renamed = {n for n in a_jobs if a_jobs[n] != b_jobs[n]}
    assert renamed == (set(a_jobs) if expect_ops_jobs else set())
    secret_resource = next(n for n, o in by_name(before).items()
                           if o["kind"] == "Secret" and o["metadata"]["name"] == secret)
    reader_objects = {k[0] for k in readers}
    assert changed(before, after) == reader_objects | {secret_resource}
    a_secret, b_secret = by_name(before)[secret_resource], by_name(after)[secret_resource]
    assert a_secret["metadata"]["annotations"][ANN_CONTENT_TAG] != b_secret["metadata"]["annotations"][ANN_CONTENT_TAG]


@pytest.mark.parametrize("name", TOPOLOGIES)
def test_api_key_rotation_rolls_every_engine_and_renames_the_day2_jobs_of_every_topology(name):
    sf = variant(name)
    before, after = render(with_secret(sf, "apiKey", "v1:AAAA")), render(with_secret(sf, "apiKey", "v1:BBBB"))
    assert_rotation_rolls_exactly_the_readers(before, after, API_KEY_SECRET, expect_ops_jobs=True)
    engines = engine_pod_templates(before)
    assert engines and all(reads_secret(t, API_KEY_SECRET) for t in engines.values())


def write_project(tmp_path, text: str):
    (tmp_path / "Pulumi.yaml").write_text((PROJECT_DIR / "Pulumi.yaml").read_text())
    (tmp_path / "Pulumi.rot.yaml").write_text(text)
    return stackfile.read(tmp_path, "rot")


SECRET_KEYS = ("apiKey", "objectStoreAccessKeyId", "objectStoreSecretAccessKey", "cephUserKey")


def stack_text(stack: str, ciphers: dict[str, str]) -> str:
    text = (PROJECT_DIR / f"Pulumi.{stack}.yaml").read_text()
    return text + "".join(f"  llm-serving:{k}:\n    secure: {ciphers.get(k, 'v1:c3RhYmxl')}\n" for k in SECRET_KEYS)


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_a_changed_ciphertext_in_the_stack_file_is_a_rotation_offline(tmp_path, stack):
    """The committed stack files, with `secure:` values as `pulumi config set --secret` writes them:
    a new apiKey ciphertext rolls the engines (and OpenWebUI in dev) and renames the day-2 Jobs; neither
    the ciphertext nor the stand-in the program got reaches a rendered file."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = write_project(tmp_path / "a", stack_text(stack, {"apiKey": "v1:Zmlyc3Q="}))
    b = write_project(tmp_path / "b", stack_text(stack, {"apiKey": "v1:c2Vjb25k"}))
    before, after = runtime.render(a), runtime.render(b)
    assert_rotation_rolls_exactly_the_readers(before, after, API_KEY_SECRET, expect_ops_jobs=True)
    from render import output
    for r, cipher, sf in ((before, "v1:Zmlyc3Q=", a), (after, "v1:c2Vjb25k", b)):
        text = output.kubernetes_yaml(r) + output.resources_json(r) + output.plan_md(r) + json.dumps(r.outputs)
        assert cipher not in text and sf.config["llm-serving:apiKey"] not in text
    if stack == "dev":
        assert any(o["kind"] == "Deployment" and o["metadata"]["name"] == "open-webui"
                   for n, o in by_name(before).items() if n in changed(before, after))


def test_the_render_cli_writes_no_ciphertext_or_stand_in(tmp_path, capsys):
    from render.__main__ import main as render_main
    cipher = "v1:Y2lwaGVydGV4dA=="
    sf = write_project(tmp_path, stack_text("dev", {"apiKey": cipher}))
    out = tmp_path / "out"
    assert render_main(["--stack", "rot", "--project-dir", str(tmp_path), "--out", str(out)]) == 0
    printed = capsys.readouterr()
    written = "".join(p.read_text() for p in out.iterdir()) + printed.out + printed.err
    assert "deepseek" in written
    assert cipher not in written and sf.config["llm-serving:apiKey"] not in written


def test_object_store_rotation_replaces_the_sync_job_and_nothing_else(tmp_path):
    """dev reads the bucket keys from secret config: rotating them changes the Secret and the sync
    Job's template (a new Job, pulumi-kubernetes diff.go .spec.template), never an engine or a day-2 Job."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = write_project(tmp_path / "a", stack_text("dev", {"objectStoreSecretAccessKey": "v1:b2xk"}))
    b = write_project(tmp_path / "b", stack_text("dev", {"objectStoreSecretAccessKey": "v1:bmV3"}))
    before, after = runtime.render(a), runtime.render(b)
    assert_rotation_rolls_exactly_the_readers(before, after, OBJECT_STORE_SECRET, expect_ops_jobs=False)
    readers = {k[0] for k, t in all_pod_templates(before).items() if reads_secret(t, OBJECT_STORE_SECRET)}
    assert {by_name(before)[n]["metadata"]["labels"]["app.kubernetes.io/component"] for n in readers} == {"model-sync"}


def test_the_same_secret_in_two_stacks_has_unrelated_tags(tmp_path):
    from components.secrets import content_tag
    data = {"api-key": "0123456789abcdef" * 4}
    assert content_tag("dev", API_KEY_SECRET, data) != content_tag("prod", API_KEY_SECRET, data)
    assert content_tag("dev", API_KEY_SECRET, data) != content_tag("dev", API_KEY_SECRET, {"api-key": "other"})
    assert data["api-key"][:8] not in content_tag("dev", API_KEY_SECRET, data)


# ---- case 7: the rollout key covers every input of the engine pod templates ----

def dev_args() -> CombinedEngineArgs:
    cfg = loader.validate(raw_config("dev"), "dev", SECRETS)
    m = cfg.models[0]
    ref = cfg.images.named()["vllm"]
    image = f"{ref.upstream}@{ref.digest}"
    return CombinedEngineArgs(
        namespace=cfg.namespace, model=m, gpu_pool=cfg.gpu_pool, compile_cache=cfg.compile_cache,
        image=EngineImage(image, image), image_digest=ref.digest, image_cuda_version=ref.cuda_version,
        model_claim_name="model-store", model_mount_path=cfg.model_volume.mount_path, api_key_secret=API_KEY_SECRET,
        api_key_tag="0" * 8, scripts_config_map="scripts", drain_timeout_seconds=cfg.gateway.longest_request_seconds)


def key_of(args: CombinedEngineArgs) -> str:
    return rollout_key(args.namespace, engine_templates([TemplateSource(combined_pod_templates, args)]))


def templates_of(args: CombinedEngineArgs) -> dict:
    return combined_pod_templates(dataclasses.replace(args, image=args.image.as_known()))


def _literal_choices(annotation) -> list:
    """The values of a Literal annotation (inside Optional/Annotated too), else []."""
    if annotation is None:
        return []
    if typing.get_origin(annotation) is typing.Literal:
        return list(typing.get_args(annotation))
    return [v for a in typing.get_args(annotation) for v in _literal_choices(a)]


# A valid instance of each optional settings model a leaf may be unset in (None in dev).
SAMPLES = {"Rdma": {"resource_name": "rdma/hca", "count": 1}, "KvCache": {"layers": 61, "latent_dim": 576}}


def other(value, annotation=None):
    """Another value of the same type, or raise: a field of a type this cannot change fails the test."""
    if isinstance(value, EngineImage):
        return EngineImage(value.reference + "-x", value.known + "-x")
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value + 1.5
    literals = [a for a in _literal_choices(annotation) if a != value]
    if literals:
        return literals[0]
    if isinstance(value, str) and value.startswith("sha256:"):
        return "sha256:" + "".join("0" if c != "0" else "1" for c in value.removeprefix("sha256:"))
    if isinstance(value, str):
        return value + "x"
    if isinstance(value, dict):
        return {**value, "llm-serving.io/x": "y"}
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [*value, "--x"]
    if isinstance(value, tuple):
        pair = typing.get_args(annotation)[0] if annotation is not None else None
        if pair is not None and typing.get_origin(pair) is tuple:
            return value + (("llm-serving.io/x", "y"),)
        return value + ("x",)
    if value is None:
        inner = [a for a in typing.get_args(annotation) if a is not type(None)] if annotation is not None else [str]
        kinds = [typing.get_args(a)[0] if typing.get_origin(a) is typing.Annotated else a for a in inner]
        for kind in kinds:
            if isinstance(kind, type) and issubclass(kind, pydantic.BaseModel):
                return kind.model_validate(SAMPLES[kind.__name__])
            if kind in (int, float):
                return kind(1)
            if kind is ConsumerKeys:   # issue 21: one consumer's token, by reference
                return ConsumerKeys(CONSUMER_KEYS_SECRET, "0" * 8, ("search",))
        return "x"
    raise TypeError(f"no other value for {value!r}")


# Leaves of the settings the pod-template builders take that reach no pod template in any context,
# each with where it goes instead. Every other leaf must change some context's templates (below).
NOT_IN_POD_TEMPLATE = {
    # gpusPerNode, nodeCpu and nodeMemoryGiB size the engine pod (its share of the node): they reach it.
    "gpu_pool.gpu_type": "the memory-fit rule (the nodeSelector and gpuArchitecture it fills are leaves of their own)",
    "gpu_pool.gpu_memory_gib": "the memory-fit rule and plan.md's per-GPU budget",
    "model.kv_cache": "the memory-fit rule and plan.md's per-GPU budget",
    "model.size_gib": "plan.md's time-to-serving estimate",
    "model.replicas": "the workload's count (case 2)",
    "model.keep_revisions": "the sync Job's pruning",
    "model.object_prefix": "the sync Job's source",
    "model.rollout.strategy": "the workload's update strategy",
    "model.rollout.max_unavailable": "the workload's update strategy",
    "model.rollout.max_surge": "the workload's update strategy",
    "model.rollout.pre_start_seconds": "the workload's progress deadline and Pulumi's await, not the pod",
    "model.pd.rollout_overshoot_pods": "an annotation of the prefill fleet itself, read by the GPU budget",
    "model.autoscaling.enabled": "the autoscaler and the workload's replicas (case 2)",
    "model.autoscaling.min_replicas": "the autoscaler",
    "model.autoscaling.max_replicas": "the autoscaler and the GPU budget",
    "model.autoscaling.metric": "the autoscaler",
    "model.autoscaling.target_value": "the autoscaler",
    "model.smoke.prompt": "the smoke Job", "model.smoke.expected_text": "the smoke Job", "model.smoke.max_tokens": "the smoke Job",
    "model.smoke.checks": "the smoke and warm-up Jobs",
    "compile_cache.storage_class_name": "the compile-cache claim the stack makes (kind claim), not the pod",
    "gpu_pool.node_count": "the config rules' nodes per replica against the pool, and plan.md",
    "gpu_pool.gang_scheduling.timeout_seconds": "the pod group's timeout: the StormService role's schedulingStrategy "
                                                "or the RoleBasedGroup's annotation, not the pod",
}


def test_every_field_of_the_engine_pod_template_args_changes_the_rollout_key():
    """Every field of CombinedEngineArgs, changed one at a time, changes the key: a new field the
    pod-template builder does not use, or whose change the key misses, fails here."""
    base = dev_args()
    hints = typing.get_type_hints(CombinedEngineArgs)
    for f in dataclasses.fields(CombinedEngineArgs):
        value = getattr(base, f.name)
        if isinstance(value, pydantic.BaseModel):
            continue   # enumerated leaf by leaf below
        changed_args = dataclasses.replace(base, **{f.name: other(value, hints[f.name])})
        assert key_of(changed_args) != key_of(base), f"CombinedEngineArgs.{f.name} does not reach the rollout key"


def leaves(obj: pydantic.BaseModel, prefix: str):
    """Every leaf of a settings model: (dotted path, value); nested models are walked into."""
    for name, info in type(obj).model_fields.items():
        value = getattr(obj, name)
        path = f"{prefix}.{name}"
        if isinstance(value, pydantic.BaseModel):
            yield from leaves(value, path)
        else:
            yield path, value, info.annotation


def set_leaf(args: CombinedEngineArgs, path: str, value) -> CombinedEngineArgs:
    top, *rest = path.split(".")

    def put(obj, names):
        if len(names) == 1:
            return obj.model_copy(update={names[0]: value})
        return obj.model_copy(update={names[0]: put(getattr(obj, names[0]), names[1:])})
    return dataclasses.replace(args, **{top: put(getattr(args, top), rest)})


# Leaves that pick what is built rather than set something of the same pod: another name, engine,
# orchestrator or topology is another workload (issue 18 case 1, and the contexts below), and a DSpark
# arm is built from its baseline's settings (stacks/program.py engine_models). Lists are judged by the
# stack-level pairs below (REACHES_THE_POD_TEMPLATE: gpuPool.tolerations).
NOT_ENUMERATED = {
    "model.name": "another workload", "model.engine": "a context below", "model.orchestrator": "another workload",
    "model.topology": "a context below", "model.dspark_of": "an A/B arm, built from its baseline",
    "gpu_pool.tolerations": "a list of tolerations: REACHES_THE_POD_TEMPLATE",
    "model.vllm.speculative_decoding": "a context below", "model.kv_cache_offload.backend": "a context below",
    "compile_cache.kind": "a context below",
    "gpu_pool.network.rdma": "unset outside the group contexts, whose Rdma's own leaves (resourceName, count) "
                             "are enumerated there",
    "model.gpus_per_pod": "the group's shape: with the parallel size, whether the model spans nodes (the group "
                          "contexts below set it as config_model/stack.py derives it)",
}


# Leaves whose other value must be valid of its kind: Kubernetes quantities, a node pool, a GPU resource name.
LEAF_SAMPLES = {
    "model.resources.cpu": "48", "model.resources.cpu_limit": "200", "model.resources.memory": "384Gi",
    "model.resources.memory_limit": "600Gi", "model.resources.shm": "96Gi",
    "model.node_selector": {"example.com/pool": "big"},
    "model.tolerations": [Toleration(key="example.com/pool", operator="Exists", effect="NoSchedule")],
    "model.gpu_resource_name": "amd.com/gpu",
}


def with_model(args: CombinedEngineArgs, **changes) -> CombinedEngineArgs:
    return dataclasses.replace(args, model=args.model.model_copy(update=changes))


def contexts() -> dict[str, tuple[typing.Callable, typing.Any, typing.Callable]]:
    """Each builder in a setting that makes its optional leaves count: name -> (builder, args, to the
    CombinedEngineArgs inside)."""
    base = dev_args()
    m = base.model
    combined = (combined_pod_templates, lambda a: a)
    fleet = (lambda a: fleet_pod_templates(a, "2.44.0"), lambda a: a.base)
    return {
        "combined vllm": (*combined[:1], base, combined[1]),
        "combined sglang": (*combined[:1], with_model(base, engine="sglang"), combined[1]),
        "dspark": (*combined[:1], with_model(base, vllm=m.vllm.model_copy(update={"speculative_decoding": "dspark"})),
                   combined[1]),
        "kv offload": (*combined[:1], with_model(base, kv_cache_offload=m.kv_cache_offload.model_copy(
            update={"backend": "native", "size_gib": 64})), combined[1]),
        "existing cache claim": (*combined[:1], dataclasses.replace(base, compile_cache=CompileCache(
            kind="existingClaim", claim_name="jit-cache")), combined[1]),
        "stack's cache claim": (*combined[:1], dataclasses.replace(base, compile_cache=CompileCache(
            kind="claim", storage_class_name="cephfs")), combined[1]),
        "pd fleets": (fleet[0], DisaggregatedArgs(base=with_model(base, topology="pd")), fleet[1]),
        "hybrid fleets": (fleet[0], DisaggregatedArgs(base=with_model(base, topology="hybrid")), fleet[1]),
        "same pod": (lambda a: {"same-pod": same_pod_template(a)}, with_model(base, topology="pd-same-pod"),
                     combined[1]),
        # A model spanning two nodes (issue 29) on each orchestrator that runs groups: the group pods read the
        # pool's network and gang settings.
        **{f"group {o} {e}": (*combined[:1], group_args(base, o, e), combined[1])
           for o, e in (("leaderworkerset", "vllm"), ("stormservice", "sglang"), ("rolebasedgroup", "sglang"))},
    }


def group_args(base: CombinedEngineArgs, orchestrator: str, engine: str) -> CombinedEngineArgs:
    """DeepSeek-V4-Flash's args as TP 8 x PP 2 over two 8-GPU nodes, with an RDMA network, a topology domain and
    a gang scheduler set, so every leaf of gpuPool.network and gangScheduling has something to change."""
    m = base.model
    section = getattr(m, engine).model_copy(update={"pipeline_parallel_size": 2})
    model = m.model_copy(update={"engine": engine, "orchestrator": orchestrator, engine: section, "gpus_per_pod": 8})
    pool = base.gpu_pool.model_copy(update={
        "network": NodeNetwork(socket_interface="eth0", ib_hca="mlx5_0", rdma=Rdma(resource_name="rdma/hca"),
                               topology_key="topology.kubernetes.io/zone"),
        "gang_scheduling": GangScheduling(scheduler="coscheduling")})
    return dataclasses.replace(base, model=model, gpu_pool=pool)


def in_context(builder, args, inner, path: str, value):
    """The context's args with one leaf of its CombinedEngineArgs set."""
    changed_inner = set_leaf(inner(args), path, value)
    return changed_inner if isinstance(args, CombinedEngineArgs) else dataclasses.replace(args, base=changed_inner)


def context_key(builder, args) -> str:
    return rollout_key("ns", engine_templates([TemplateSource(builder, args)]))


@pytest.mark.parametrize("settings", ["model", "gpu_pool", "compile_cache"])
def test_every_leaf_of_the_builder_settings_changes_the_key_exactly_when_it_reaches_a_template(settings):
    """The key follows the pod templates leaf by leaf, in every builder's context: where a leaf changes
    the templates it changes the key, where it does not it leaves the key. A leaf that changes no
    template in any context must be named in NOT_IN_POD_TEMPLATE with where it goes; a new leaf is
    enumerated too and fails here until it reaches the key or is named there."""
    ctx = contexts()
    reaching: dict[str, set[str]] = {}
    for name, (builder, args, inner) in ctx.items():
        for path, value, annotation in leaves(getattr(inner(args), settings), settings):
            if path in NOT_ENUMERATED:
                continue
            new = LEAF_SAMPLES[path] if path in LEAF_SAMPLES else other(value, annotation)
            changed_args = in_context(builder, args, inner, path, new)
            try:
                template_changed = builder(known_args_of(changed_args)) != builder(known_args_of(args))
            except (AssertionError, KeyError, ValueError, TypeError, AttributeError) as err:
                raise AssertionError(f"{name}: {path}: the builder refuses {new!r}: name it in NOT_ENUMERATED") from err
            key_changed = context_key(builder, changed_args) != context_key(builder, args)
            assert key_changed == template_changed, (name, path)
            reaching.setdefault(path, set())
            if template_changed:
                reaching[path].add(name)
    never = {p for p, names in reaching.items() if not names}
    assert never == {p for p in NOT_IN_POD_TEMPLATE if p.startswith(settings + ".")}, \
        f"reach no pod template in any context: {sorted(never)}"


def known_args_of(args):
    from components.combined import known_args
    return known_args(args)


def test_the_fleet_and_same_pod_builders_reach_the_key_too():
    base = dataclasses.replace(dev_args(), model=dev_args().model.model_copy(update={"topology": "pd"}))
    fleets = DisaggregatedArgs(base=base)
    key = rollout_key("ns", engine_templates([TemplateSource(lambda a: fleet_pod_templates(a, "2.44.0"), fleets)]))
    assert key != rollout_key("ns", engine_templates([TemplateSource(lambda a: fleet_pod_templates(a, "2.45.0"), fleets)]))
    hybrid = DisaggregatedArgs(base=dataclasses.replace(base, model=base.model.model_copy(update={"topology": "hybrid"})))
    assert key != rollout_key("ns", engine_templates([TemplateSource(lambda a: fleet_pod_templates(a, "2.44.0"), hybrid)]))
    same_pod = dataclasses.replace(base, model=base.model.model_copy(update={"topology": "pd-same-pod"}))
    a = rollout_key("ns", engine_templates([TemplateSource(lambda x: {"p": same_pod_template(x)}, same_pod)]))
    b = rollout_key("ns", engine_templates([TemplateSource(lambda x: {"p": same_pod_template(x)},
                                                           dataclasses.replace(same_pod, drain_timeout_seconds=7))]))
    assert a != b


def rendered_key(rendered, model_name: str) -> str:
    """The key recomputed from the rendered workloads, independent of the program's own TemplateSources."""
    templates = {}
    for obj in k8s_objects(rendered):
        if obj["kind"] in ("Deployment", "StormService", "RoleBasedGroup"):
            for ref in pod_templates(obj["kind"], obj):
                labels = ref.template["metadata"]["labels"]
                if labels.get("llm-serving.io/model") == model_name and labels.get("app.kubernetes.io/component") == "engine":
                    templates[obj["metadata"]["name"]] = ref.template
        elif obj["kind"] == "RayClusterFleet" and obj["metadata"]["name"].startswith(f"{model_name}-"):
            templates[obj["metadata"]["name"]] = obj["spec"]["template"]
    namespace = next(o["metadata"]["namespace"] for o in k8s_objects(rendered) if o["kind"] == "Job")
    return rollout_key(namespace, templates)


@pytest.mark.parametrize("name", ["dev", "staging", *TOPOLOGIES])
def test_the_job_names_carry_the_hash_of_the_pod_templates_the_stack_registers(name):
    """Without a mirror whose reference is an Output (dev: none, staging: a registry), the key is the
    hash of the registered pod templates themselves: the program's rebuilt templates are the real ones."""
    from conftest import render_stack
    r = render_stack(name) if name in ("dev", "staging") else rendered_variant(name)
    jobs = {o["spec"]["template"]["metadata"]["labels"]["llm-serving.io/model"]: o["metadata"]["name"]
            for o in k8s_objects(r) if o["kind"] == "Job" and o["metadata"]["labels"]["app.kubernetes.io/component"] == "smoke"}
    assert jobs
    for model_name, job in jobs.items():
        assert job.endswith("-" + rendered_key(r, model_name)), (model_name, job)


def test_the_key_is_known_in_the_preview_of_a_first_up_with_an_ecr_mirror():
    """prod's engine images come from ECR repositories the same `pulumi up` creates: their URLs are
    unknown in preview, the Job names are not."""
    sf = stackfile.read(PROJECT_DIR, "prod")
    preview, up = runtime.render(sf, preview=True), runtime.render(sf)
    assert ops_job_names(preview) and ops_job_names(preview) == ops_job_names(up)
    assert all(isinstance(v, str) and rpc.UNKNOWN not in v for v in ops_job_names(preview).values())


# ---- stack-level pairs: what reaches a pod template re-runs the Jobs, and only that ----

def dev_variant(**changes):
    return render(variant_file(**changes))


def dev_with(path: str, value):
    cfg = copy.deepcopy(dev_config())
    node = cfg
    *parents, leaf = path.split(".")
    for p in parents:
        node = node[int(p)] if p.isdigit() else node.setdefault(p, {})
    node[leaf] = value
    return dev_variant(**cfg)


@functools.lru_cache(maxsize=None)
def dev_base():
    return dev_variant()


REACHES_THE_POD_TEMPLATE = [
    ("gateway.requestTimeoutSeconds", 150),          # the preStop drain timeout
    ("gpuPool.cpuRequest", 48),
    ("gpuPool.tolerations", [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]),
    ("compileCache.sizeGiB", 80),
    ("images.vllm.digest", "sha256:" + "7" * 64),
    ("models.0.vllm.maxNumSeqs", 32),
    ("models.0.startupBudgetSeconds", 2100),
]

REACHES_NO_POD_TEMPLATE = [
    ("models.0.sizeGiB", 160.5),
    ("models.0.objectPrefix", "models/DeepSeek-V4-Flash-0731-copy"),
    ("operations.monitoring.ttftP95SloSeconds", 3.0),
    ("operations.warmup.timeoutSeconds", 2400),
]


@pytest.mark.parametrize("path,value", REACHES_THE_POD_TEMPLATE)
def test_a_change_that_reaches_the_engine_pod_template_renames_the_day2_jobs(path, value):
    before, after = dev_base(), dev_with(path, value)
    assert engine_pod_templates(before) != engine_pod_templates(after), path
    a, b = ops_job_names(before), ops_job_names(after)
    assert a and all(a[n] != b[n] for n in a), path


@pytest.mark.parametrize("path,value", REACHES_NO_POD_TEMPLATE)
def test_a_change_that_reaches_no_pod_template_renames_no_job(path, value):
    before, after = dev_base(), dev_with(path, value)
    assert engine_pod_templates(before) == engine_pod_templates(after), path
    assert ops_job_names(before) == ops_job_names(after), path


def test_scaling_dev_renames_no_job():
    cfg = copy.deepcopy(dev_config())
    cfg["models"][0]["replicas"] = 2
    cfg["gpuBudget"] = 16
    before, after = dev_variant(gpuBudget=16), dev_variant(**cfg)
    assert engine_pod_templates(before) == engine_pod_templates(after)
    assert ops_job_names(before) == ops_job_names(after)
