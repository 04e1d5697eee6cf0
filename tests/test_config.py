"""Bad stack files: every rule has a case, and the message names file, path, value and what is allowed."""

from __future__ import annotations

import copy
import json
import re

import pytest
from conftest import PROJECT_DIR

from config_model import StackConfig
from config_model.resources import MemoryQuantity
from render import stackfile
from stacks import loader
from stacks.loader import ConfigError

SECRETS = {"apiKey": True, "objectStoreAccessKeyId": True, "objectStoreSecretAccessKey": True, "cephUserKey": True,
           "registryDockerConfigJson": True}


def raw_config(stack: str = "dev") -> dict:
    sf = stackfile.read(PROJECT_DIR, stack)
    prefix = "llm-serving:"
    return {k[len(prefix):]: loader.decode(k[len(prefix):], v) for k, v in sf.config.items()
            if k.startswith(prefix) and k[len(prefix):] not in loader.SECRET_KEYS}


def problems(raw: dict, secrets: dict | None = None, stack: str = "dev") -> list[str]:
    with pytest.raises(ConfigError) as err:
        loader.validate(raw, stack, SECRETS if secrets is None else secrets)
    lines = str(err.value).splitlines()
    assert all(line.startswith(f"Pulumi.{stack}.yaml: llm-serving:") for line in lines), lines
    return lines


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_committed_stacks_are_valid(stack):
    cfg = loader.validate(raw_config(stack), stack, SECRETS)
    assert isinstance(cfg, StackConfig)


def test_gpus_per_pod_must_equal_parallel_size():
    raw = raw_config()
    raw["models"][0]["gpusPerPod"] = 4
    assert problems(raw) == ["Pulumi.dev.yaml: llm-serving:models[0].gpusPerPod = 4: must equal the parallel "
                             "size 8 (tensorParallelSize 8 x pipelineParallelSize 1 x dataParallelSize 1)"]


def test_data_parallel_past_one_node_is_refused_naming_it():
    """Issue 29: dataParallelSize 2 x TP 8 on 8-GPU nodes was refused blaming tensorParallelSize; it names
    dataParallelSize now, and the Deployment that cannot run a group."""
    raw = raw_config()
    raw["models"][0]["vllm"]["dataParallelSize"] = 2
    raw["gpuBudget"] = 16
    raw["gpuPool"] = {"gpuType": "H20", "gangScheduling": {"scheduler": "none"}}
    found = problems(raw)
    assert found[0] == ("Pulumi.dev.yaml: llm-serving:models[0].vllm.dataParallelSize = 2: must be 1 for a model "
                        "spanning nodes (16 GPUs > gpuPool.gpusPerNode 8): data parallelism across nodes is not "
                        "offered; raise replicas for more copies of the model, or keep TP x DP within one node")
    assert found[1].startswith("Pulumi.dev.yaml: llm-serving:models[0].orchestrator = 'deployment': cannot run "
                               "deepseek-v4-flash across nodes (2 pods of 8 GPUs per replica")
    assert not any("tensorParallelSize =" in p for p in found)


def test_gpu_budget_counts_every_replica():
    raw = raw_config()
    raw["models"][0]["replicas"] = 2
    assert problems(raw) == ["Pulumi.dev.yaml: llm-serving:gpuBudget = 8: the workloads need 16 GPUs at peak, "
                             "rollouts included (deepseek-v4-flash 16); raise gpuBudget or lower replicas"]


def test_rollout_surge_is_counted_in_the_budget():
    raw = raw_config()
    raw["models"][0]["rollout"] = {"strategy": "RollingUpdate", "maxSurge": 1}
    assert problems(raw) == ["Pulumi.dev.yaml: llm-serving:gpuBudget = 8: the workloads need 16 GPUs at peak, "
                             "rollouts included (deepseek-v4-flash 16); raise gpuBudget or lower replicas"]


def test_startup_budget_must_cover_the_cold_start():
    raw = raw_config()
    raw["models"][0]["startupBudgetSeconds"] = 600
    assert problems(raw) == ["Pulumi.dev.yaml: llm-serving:models[0].startupBudgetSeconds = 600: must be at least "
                             "720 (the measured vllm cold start of profile 'deepseek-v4', field report); a shorter budget kills every cold start"]


def test_shm_must_be_64_gib_for_tp8():
    raw = raw_config()
    raw["gpuPool"] = {"gpuType": "H20", "shmSizeGiB": 32}
    assert problems(raw) == ["Pulumi.dev.yaml: llm-serving:gpuPool.shmSizeGiB = 32: must be at least 64 GiB for "
                             "models[0] (deepseek-v4-flash) with 8 GPUs per pod (TP=8)"]


def test_shm_must_stay_below_the_memory_limit():
    raw = raw_config()
    raw["gpuPool"] = {"gpuType": "H20", "shmSizeGiB": 128, "memoryLimitGiB": 128, "memoryRequestGiB": 64}
    assert problems(raw) == ["Pulumi.dev.yaml: llm-serving:gpuPool.shmSizeGiB = 128: must be below "
                             "gpuPool.memoryLimitGiB 128: a Memory emptyDir counts against the pod's memory"]


def test_requests_must_not_exceed_limits():
    raw = raw_config()
    raw["gpuPool"] = {"gpuType": "H20", "cpuRequest": 200}
    (line,) = problems(raw)
    # The limit the stack left unset is named with where it came from.
    assert line == ("Pulumi.dev.yaml: llm-serving:gpuPool.cpuRequest = 200: must not exceed gpuPool.cpuLimit 128 (unset: "
                    "field report 2.1's 16 cores per GPU for the 8-GPU pods of models[0] deepseek-v4-flash; declare "
                    "gpuPool.nodeCpu and nodeMemoryGiB to size pods from the node)")


@pytest.mark.parametrize("field,allowed", [
    ("directory", "a non-empty directory name: letters, digits, '.', '_' or '-', no '/'"),
    ("servedModelName", "a Kubernetes label value: 1-63 letters, digits, '.', '_' or '-', alphanumeric at both ends")])
def test_model_path_and_served_name_must_not_be_empty(field, allowed):
    raw = raw_config()
    raw["models"][0][field] = ""
    assert problems(raw) == [f"Pulumi.dev.yaml: llm-serving:models[0].{field} = '': must be {allowed}"]


def test_names_must_be_dns_labels():
    raw = raw_config()
    raw["models"][0]["name"] = "DeepSeek_V4"
    # A DNS-1035 label: the model's Service `<name>-api` and the StormService's own headless Service.
    assert problems(raw) == ["Pulumi.dev.yaml: llm-serving:models[0].name = 'DeepSeek_V4': must be a DNS-1035 label: "
                             "lowercase letters, digits or '-', starting with a letter, alphanumeric at the end"]


def test_missing_required_field_is_named():
    raw = raw_config()
    del raw["models"][0]["servedModelName"]
    assert problems(raw) == ["Pulumi.dev.yaml: llm-serving:models[0].servedModelName = (unset): is required"]


def test_unknown_key_is_refused():
    raw = raw_config()
    raw["gpuBuget"] = 8
    # Never its value: a misspelled key may hold a secret.
    assert problems(raw) == ["Pulumi.dev.yaml: llm-serving:gpuBuget = (value not shown): is not a known setting; "
                             "did you mean gpuBudget?"]
    raw["zzzz"] = 8
    assert problems(raw)[1] == ("Pulumi.dev.yaml: llm-serving:zzzz = (value not shown): is not a known setting "
                                "(check the spelling against the README config reference)")


def test_image_without_digest_is_refused():
    raw = raw_config()
    del raw["images"]["vllm"]["digest"]
    assert problems(raw) == ["Pulumi.dev.yaml: llm-serving:images.vllm.digest = (unset): is required"]


@pytest.mark.parametrize("upstream", ["vllm/vllm-openai@sha256:" + "a" * 64, "vllm/vllm-openai:v1@sha256:" + "a" * 64])
def test_digest_inside_the_upstream_reference_is_refused(upstream):
    raw = raw_config()
    raw["images"]["vllm"]["upstream"] = upstream
    (line,) = problems(raw)
    assert line.startswith("Pulumi.dev.yaml: llm-serving:images.vllm.upstream = ") and "without a digest" in line


def test_malformed_digest_is_refused():
    raw = raw_config()
    raw["images"]["vllm"]["digest"] = "sha256:abc"
    assert problems(raw) == ["Pulumi.dev.yaml: llm-serving:images.vllm.digest = 'sha256:abc': must be a digest: "
                             "sha256: and 64 lowercase hex digits"]


def test_in_tree_cephfs_is_refused_after_1_30():
    raw = raw_config()
    raw["modelVolume"]["cephfs"] = {"driver": "in-tree", "monitors": ["10.0.0.1:6789"], "path": "/m", "user": "u"}
    assert problems(raw) == ["Pulumi.dev.yaml: llm-serving:modelVolume.cephfs.driver = 'in-tree': Kubernetes 1.33 "
                             "has no in-tree CephFS plugin (removed in 1.31); use 'csi' (ceph-csi)"]
    raw["cluster"]["kubernetesVersion"] = "1.30"
    assert isinstance(loader.validate(raw, "dev", SECRETS), StackConfig)


def test_volume_section_must_match_kind():
    raw = raw_config()
    raw["modelVolume"]["kind"] = "nfs"
    lines = problems(raw)
    assert "Pulumi.dev.yaml: llm-serving:modelVolume.nfs = (unset): is required when modelVolume.kind is 'nfs'" in lines
    assert "Pulumi.dev.yaml: llm-serving:modelVolume.cephfs = '(set)': must be unset when modelVolume.kind is 'nfs'" in lines


def test_csi_needs_cluster_id():
    raw = raw_config()
    del raw["modelVolume"]["cephfs"]["clusterId"]
    assert problems(raw) == ["Pulumi.dev.yaml: llm-serving:modelVolume.cephfs.clusterId = (unset): is required for the csi driver"]


def test_non_aws_endpoint_cannot_create_iam_credentials_or_buckets():
    raw = raw_config()
    raw["objectStore"].update(createCredentials=True, create=True)
    lines = problems(raw)
    assert len(lines) == 2
    assert lines[0].startswith("Pulumi.dev.yaml: llm-serving:objectStore.createCredentials = true: must be false with "
                               "the non-AWS endpoint https://cos.ap-shanghai.myqcloud.com: it has no IAM")
    assert lines[1].startswith("Pulumi.dev.yaml: llm-serving:objectStore.create = true: must be false with the "
                               "non-AWS endpoint https://cos.ap-shanghai.myqcloud.com")


def test_shared_directory_must_hold_the_same_weights():
    raw = raw_config("staging")
    del raw["models"][1]["dsparkOf"]
    raw["models"][1]["revision"] = "0801"
    assert problems(raw, stack="staging") == [
        "Pulumi.staging.yaml: llm-serving:models[1].revision = '0801': must equal models[0].revision '0731': "
        "both models use directory 'DeepSeek-V4-Flash-0731'"]


def test_duplicate_names_are_refused():
    raw = raw_config()
    raw["models"].append(copy.deepcopy(raw["models"][0]))
    raw["gpuBudget"] = 16
    assert problems(raw) == [
        "Pulumi.dev.yaml: llm-serving:models[1].name = 'deepseek-v4-flash': must be unique; models[0] uses it",
        "Pulumi.dev.yaml: llm-serving:models[1].servedModelName = 'DeepSeek-V4-Flash': must be unique; models[0] uses it"]


def test_missing_secret_names_the_command():
    lines = problems(raw_config(), secrets={k: True for k in SECRETS if k != "cephUserKey"})
    assert lines == ["Pulumi.dev.yaml: llm-serving:cephUserKey = (unset): is required (Key of the Ceph user of "
                     "modelVolume.cephfs.user.); set it with pulumi config set --secret llm-serving:cephUserKey <value>"]


def test_plaintext_secret_is_refused():
    lines = problems(raw_config(), secrets={**SECRETS, "apiKey": False})
    assert lines == ["Pulumi.dev.yaml: llm-serving:apiKey = '(plaintext)': must be stored encrypted: "
                     "pulumi config set --secret llm-serving:apiKey <value>"]


def test_several_problems_are_reported_together():
    raw = raw_config()
    raw["models"][0]["startupBudgetSeconds"] = 100
    raw["gpuPool"] = {"gpuType": "H20", "shmSizeGiB": 16}
    raw["gpuBudget"] = 4
    assert len(problems(raw)) == 3


def test_stack_file_keys_keep_the_gib_unit():
    keys = json.dumps(StackConfig.model_json_schema(by_alias=True))
    for key in ("capacityGiB", "shmSizeGiB", "memoryLimitGiB", "memoryRequestGiB", "sizeGiB"):
        assert f'"{key}"' in keys
    assert "Gib" not in keys


def test_config_from_the_language_host_environment(monkeypatch):
    """Under `pulumi up` the Python host passes config as PULUMI_CONFIG JSON plus a secret key list."""
    import pulumi
    from pulumi.runtime import config as runtime_config

    from render.runtime import record

    sf = stackfile.read(PROJECT_DIR, "dev")
    env = dict(sf.config)
    for key in SECRETS:
        env[f"llm-serving:{key}"] = "x"
    monkeypatch.setenv("PULUMI_CONFIG", json.dumps(env))
    monkeypatch.setenv("PULUMI_CONFIG_SECRET_KEYS", json.dumps([f"llm-serving:{k}" for k in SECRETS]))
    seen = {}

    def program():
        runtime_config.set_all_config({}, [])
        seen["cfg"] = loader.from_pulumi()
        seen["stack"] = pulumi.get_stack()
        return {}

    record("dev", program)
    assert seen["cfg"].gpu_budget == 8 and seen["cfg"].models[0].served_model_name == "DeepSeek-V4-Flash"


def _sections(model=StackConfig, seen=None):
    import typing

    from pydantic import BaseModel
    seen = seen if seen is not None else set()
    if model in seen:
        return seen
    seen.add(model)
    for field in model.model_fields.values():
        stack = [field.annotation]
        while stack:
            t = stack.pop()
            if isinstance(t, type) and issubclass(t, BaseModel):
                _sections(t, seen)
            stack.extend(typing.get_args(t))
    return seen


def test_every_field_has_a_description_and_sizes_and_times_carry_units():
    for model in _sections():
        for name, field in model.model_fields.items():
            assert field.description, f"{model.__name__}.{name} has no description"
            # A Kubernetes quantity (models[].resources: 256Gi) carries its unit in its value.
            quantity = field.annotation == MemoryQuantity | None
            if re.search(r"memory|shm|capacity|^size", name) and "utilization" not in name and not quantity:
                assert name.endswith("_gib"), f"{model.__name__}.{name} needs a GiB unit in its name"
            numeric = field.annotation in (int, float, int | None, float | None)
            if numeric and any(w in name for w in ("deadline", "budget", "grace", "timeout")) and name != "gpu_budget":
                assert name.endswith("_seconds"), f"{model.__name__}.{name} needs a seconds unit in its name"


def test_scalar_keys_are_typed_in_the_project_file():
    import yaml
    project = yaml.safe_load((PROJECT_DIR / "Pulumi.yaml").read_text())["config"]
    types = {str: "string", int: "integer", bool: "boolean"}
    for name, field in StackConfig.model_fields.items():
        annotation = field.annotation
        scalar = annotation in types or (isinstance(annotation, type) and issubclass(annotation, str))
        if scalar:
            key = field.alias or name
            expected = types.get(annotation, "string")
            assert project.get(key, {}).get("type") == expected, f"{key} must be typed {expected} in Pulumi.yaml"


# ---- engine/orchestrator switch, DSpark pairs, mirrors (issue 3) ----

SGLANG_IMAGE = {"upstream": "lmsysorg/sglang:v0.5.17-cu130", "digest": "sha256:" + "5" * 64}


@pytest.mark.parametrize("engine,orchestrator", [("vllm", "rolebasedgroup"), ("sglang", "deployment"),
                                                 ("sglang", "stormservice")])
def test_unsupported_engine_orchestrator_pair_is_refused(engine, orchestrator):
    raw = raw_config()
    raw["images"]["sglang"] = SGLANG_IMAGE
    raw["compileCache"] = {"kind": "existingClaim", "claimName": "jit"}
    m = raw["models"][0]
    m.update(engine=engine, orchestrator=orchestrator)
    m.pop("rollout")
    if engine == "sglang":
        m.pop("vllm")
    assert problems(raw) == [
        f"Pulumi.dev.yaml: llm-serving:models[0].orchestrator = '{orchestrator}': topology 'combined' with engine "
        f"'{engine}' on '{orchestrator}' is not a combination this program supports; supported (validated in the "
        "field report): combined sglang+rolebasedgroup, combined vllm+deployment, combined vllm+stormservice, "
        "hybrid vllm+deployment, hybrid vllm+stormservice, pd vllm+rayclusterfleet, pd-same-pod vllm+deployment"]


def test_unknown_orchestrator_is_refused():
    raw = raw_config()
    raw["models"][0]["orchestrator"] = "statefulset"
    (line,) = problems(raw)
    assert line.startswith("Pulumi.dev.yaml: llm-serving:models[0].orchestrator = 'statefulset': Input should be ")


def test_sglang_needs_its_image_and_a_persistent_jit_cache():
    raw = raw_config()
    m = raw["models"][0]
    m.update(engine="sglang", orchestrator="rolebasedgroup")
    m.pop("rollout"), m.pop("vllm"), m.pop("startupBudgetSeconds")
    assert problems(raw) == [
        f"Pulumi.dev.yaml: llm-serving:images.sglang = (unset): is required: models[0] ({m['name']}) runs SGLang",
        "Pulumi.dev.yaml: llm-serving:compileCache.kind = 'emptyDir': must be 'claim' (the stack makes it) or "
        "'existingClaim' for SGLang (models[0]): its JIT and graph capture are most of a 23-minute cold start and "
        "must survive the pod (field report 12.2)"]


def test_images_vllm_is_required_only_where_vllm_runs():
    """images.vllm is the vLLM engines' image and the load test's (`vllm bench serve`): a stack whose
    models all run on SGLang, without the load test, needs none; a vLLM model or the load test does."""
    from variants import render, sglang_stack

    sf = sglang_stack()
    images = json.loads(sf.config["llm-serving:images"])
    del images["vllm"]
    sf.config["llm-serving:images"] = json.dumps(images)
    rendered = render(sf)   # renders, and no object names a vLLM image
    assert "vllm-openai" not in json.dumps([r.inputs for r in rendered.resources])
    ops = {"loadTest": {"enabled": True}}
    sf.config["llm-serving:operations"] = json.dumps(ops)
    with pytest.raises(ConfigError) as err:
        render(sf)
    assert str(err.value) == ("Pulumi.variant.yaml: llm-serving:images.vllm = (unset): is required when "
                              "operations.loadTest.enabled is true: the load-test Job runs `vllm bench serve` from "
                              "the vLLM image, whatever engine the models run on")
    raw = raw_config()
    del raw["images"]["vllm"]
    assert problems(raw) == [f"Pulumi.dev.yaml: llm-serving:images.vllm = (unset): is required: models[0] "
                             f"({raw['models'][0]['name']}) runs vLLM"]


def test_sglang_startup_budget_below_23_minutes_is_refused():
    raw = raw_config()
    raw["images"]["sglang"] = SGLANG_IMAGE
    raw["compileCache"] = {"kind": "existingClaim", "claimName": "jit"}
    m = raw["models"][0]
    m.update(engine="sglang", orchestrator="rolebasedgroup", startupBudgetSeconds=1200)
    m.pop("rollout"), m.pop("vllm")
    assert problems(raw) == ["Pulumi.dev.yaml: llm-serving:models[0].startupBudgetSeconds = 1200: must be at least "
                             "1380 (the measured sglang cold start of profile 'deepseek-v4', field report); a shorter budget kills every cold start"]


def test_the_other_engines_section_is_refused():
    raw = raw_config()
    raw["models"][0]["sglang"] = {"memFractionStatic": 0.8}
    assert problems(raw) == ["Pulumi.dev.yaml: llm-serving:models[0].sglang = '(set)': must be unset for engine "
                             "'vllm': only the vllm section applies"]


def test_recreate_on_a_custom_resource_is_refused():
    raw = raw_config()
    raw["models"][0]["orchestrator"] = "stormservice"
    assert problems(raw) == ["Pulumi.dev.yaml: llm-serving:models[0].rollout.strategy = 'Recreate': stormservice "
                             "has no Recreate; it rolls with RollingUpdate, maxSurge 0"]


def pair_config() -> dict:
    return raw_config("staging")


def test_committed_dspark_pair_is_valid():
    cfg = loader.validate(pair_config(), "staging", SECRETS)
    assert cfg.models[1].dspark_of == cfg.models[0].name


@pytest.mark.parametrize("field,value,named", [
    ("replicas", 2, "replicas"),
    ("orchestrator", "deployment", "orchestrator"),
    ("vllm", {"maxNumSeqs": 128, "speculativeDecoding": "dspark"}, "vllm.max_num_seqs"),
    ("startupBudgetSeconds", 2400, "startup_budget_seconds"),
])
def test_dspark_pair_that_differs_in_anything_else_is_refused(field, value, named):
    raw = pair_config()
    raw["gpuBudget"] = 24
    raw["models"][1][field] = value
    lines = [l for l in problems(raw, stack="staging") if "dsparkOf" in l]
    assert lines == [f"Pulumi.staging.yaml: llm-serving:models[1].dsparkOf = 'deepseek-v4-flash': an A/B pair may "
                     f"differ only in speculative decoding, name and served name; models[1] and models[0] also "
                     f"differ in: {named}"]


def test_dspark_arm_must_turn_dspark_on_and_baseline_must_be_target_only():
    raw = pair_config()
    raw["models"][1]["vllm"]["speculativeDecoding"] = "off"
    assert problems(raw, stack="staging") == [
        "Pulumi.staging.yaml: llm-serving:models[1].dsparkOf = 'deepseek-v4-flash': models[1] must turn DSpark "
        "on: it is the DSpark arm of the pair"]
    raw = pair_config()
    raw["models"][0]["vllm"]["speculativeDecoding"] = "dspark"
    assert problems(raw, stack="staging") == [
        "Pulumi.staging.yaml: llm-serving:models[1].dsparkOf = 'deepseek-v4-flash': models[0] must be target-only "
        "(speculative decoding off, no dsparkOf)"]


def test_dspark_pair_must_name_an_existing_model():
    raw = pair_config()
    raw["models"][1]["dsparkOf"] = "nope"
    assert problems(raw, stack="staging") == [
        "Pulumi.staging.yaml: llm-serving:models[1].dsparkOf = 'nope': must name another model of this stack "
        "(the target-only arm)"]


def test_registry_mirror_needs_its_section_and_its_secret():
    raw = raw_config()
    raw["images"]["mirror"] = {"kind": "registry"}
    secrets = {k: v for k, v in SECRETS.items() if k != "registryDockerConfigJson"}
    assert problems(raw, secrets=secrets) == [
        "Pulumi.dev.yaml: llm-serving:images.mirror.registry = (unset): is required when images.mirror.kind is 'registry'",
        "Pulumi.dev.yaml: llm-serving:registryDockerConfigJson = (unset): is required (Docker config JSON with "
        "credentials for images.mirror.registry.host (pods pull with it, the copy Job pushes with it).); set it "
        "with pulumi config set --secret llm-serving:registryDockerConfigJson <value>"]


def test_ecr_mirror_is_refused_for_a_non_aws_store():
    raw = raw_config()
    raw["images"]["mirror"] = {"kind": "ecr", "ecr": {"upstreamCredentialArns": {"docker.io": "arn:x", "ghcr.io": "arn:y"}}}
    assert problems(raw) == ["Pulumi.dev.yaml: llm-serving:images.mirror.kind = 'ecr': needs AWS, but this stack's "
                             "aws provider points at the non-AWS endpoint https://cos.ap-shanghai.myqcloud.com; use "
                             "kind 'registry'"]


def test_ecr_mirror_needs_a_credential_for_docker_hub_and_refuses_uncacheable_registries():
    raw = raw_config("prod")
    raw["images"]["mirror"]["ecr"]["upstreamCredentialArns"] = {}
    raw["images"]["vllm"]["upstream"] = "nvcr.io/nvidia/vllm:26.01"
    lines = problems(raw, stack="prod")
    assert ("Pulumi.prod.yaml: llm-serving:images.vllm.upstream = 'nvcr.io/nvidia/vllm:26.01': ECR cannot "
            "pull-through-cache nvcr.io; supported: docker.io, ghcr.io, public.ecr.aws, quay.io, registry.gitlab.com, "
            "registry.k8s.io. Use images.mirror.kind 'registry'") in lines
    assert any(l.startswith("Pulumi.prod.yaml: llm-serving:images.mirror.ecr.upstreamCredentialArns = {}: needs a "
                            "Secrets Manager ARN for docker.io (used by images.modelSync)") for l in lines)


def test_ray_image_records_its_ray_version():
    raw = raw_config()
    raw["images"]["vllmRay"] = {"upstream": "registry.internal/llm/vllm-openai-ray:v0.26.0", "digest": "sha256:" + "7" * 64}
    assert problems(raw) == ["Pulumi.dev.yaml: llm-serving:images.vllmRay.rayVersion = (unset): is required"]
    raw["images"]["vllmRay"]["rayVersion"] = "2.47.1"
    assert loader.validate(raw, "dev", SECRETS).images.vllm_ray.ray_version == "2.47.1"



# ---- day-2 operations (issue 5) ----

def test_external_endpoint_must_not_be_an_ip():
    raw = raw_config()
    raw["gateway"]["externalEndpoint"] = "http://10.96.0.12"
    assert problems(raw) == ["Pulumi.dev.yaml: llm-serving:gateway.externalEndpoint = 'http://10.96.0.12': must be a "
                             "stable DNS name, never an IP: a Pod IP changes when the pod is re-created (field report 10)"]


def test_grace_period_must_cover_the_request_timeout():
    raw = raw_config()
    raw["models"][0]["terminationGraceSeconds"] = 120
    assert problems(raw) == ["Pulumi.dev.yaml: llm-serving:models[0].terminationGraceSeconds = 120: must be at least "
                             "150: the longest request through the gateway 120s (gateway.requestTimeoutSeconds, at "
                             "least AIBrix's own 120 s route when the gateway is on) plus 30s, so in-flight requests "
                             "finish before the engine stops"]
    # A shorter route timeout does not shorten AIBrix's own route: the drain still covers 120 s.
    raw["gateway"] = {**raw.get("gateway", {}), "requestTimeoutSeconds": 60}
    raw["models"][0]["terminationGraceSeconds"] = 100
    assert any("terminationGraceSeconds = 100: must be at least 150" in line for line in problems(raw))


def test_load_test_warmups_below_concurrency_are_refused():
    raw = raw_config()
    raw["operations"] = {"loadTest": {"enabled": True, "scenarios": [
        {"inputLen": 128, "outputLen": 64, "concurrency": 8, "numPrompts": 64, "numWarmups": 2}]}}
    assert problems(raw) == ["Pulumi.dev.yaml: llm-serving:operations.loadTest.scenarios[0].numWarmups = 2: must be "
                             "at least the concurrency 8: fewer warm-ups leave shapes to JIT inside the measured round "
                             "(field report 8.2)"]


def test_smoke_needs_its_expected_text():
    raw = raw_config()
    raw["operations"] = {"smoke": {"expectedText": ""}}
    assert problems(raw) == ["Pulumi.dev.yaml: llm-serving:operations.smoke.expectedText = '': must be the exact "
                             "answer the deterministic prompt returns (field report 12.3); leave it out for each "
                             "model's (models[].smoke.expectedText, then its profile's)"]


def test_open_webui_needs_an_image():
    raw = raw_config()
    raw["operations"] = {"openWebUI": {"enabled": True}}
    assert problems(raw) == ["Pulumi.dev.yaml: llm-serving:operations.openWebUI.image = (unset): is required when "
                             "operations.openWebUI.enabled is true"]


def test_the_volume_holds_the_kept_revisions_the_one_being_synced_included():
    """Old revisions go once the listing shows the new one, before its download fills the volume
    (verify_model.py prunes on the download's "listed" signal): keepRevisions x sizeGiB per directory."""
    raw = raw_config("staging")
    assert isinstance(loader.validate(raw, "staging", SECRETS), StackConfig)   # 2 x 155.43 <= 400
    raw["models"][0]["keepRevisions"] = raw["models"][1]["keepRevisions"] = 3
    # Both arms share one directory: counted once.
    assert problems(raw, stack="staging") == [
        "Pulumi.staging.yaml: llm-serving:modelVolume.capacityGiB = 400: must be at least 466.3 GiB to hold every "
        "directory's kept revisions, the one being synced included ('DeepSeek-V4-Flash-0731': models[0].keepRevisions "
        "3 x 155.43 GiB); raise it or lower keepRevisions"]
    raw["modelVolume"]["capacityGiB"] = 467
    assert isinstance(loader.validate(raw, "staging", SECRETS), StackConfig)
    for m in raw["models"]:
        m["sizeGiB"] = 200
    assert "must be at least 600.0 GiB" in problems(raw, stack="staging")[0]


def test_keep_revisions_keeps_the_previous_one_and_is_one_value_per_directory():
    raw = raw_config()
    raw["models"][0]["keepRevisions"] = 1
    (line,) = problems(raw)
    assert line.startswith("Pulumi.dev.yaml: llm-serving:models[0].keepRevisions = 1:")
    raw = raw_config("staging")
    raw["models"][1]["keepRevisions"] = 3
    assert ("Pulumi.staging.yaml: llm-serving:models[1].keepRevisions = 3: must equal models[0].keepRevisions 2: "
            "both models use directory 'DeepSeek-V4-Flash-0731'") in problems(raw, stack="staging")
