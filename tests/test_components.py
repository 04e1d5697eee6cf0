"""Each component on its own, under the mock runtime with the recording monitor."""

from __future__ import annotations

import json

import pulumi
import pytest

from components import pod_template
from components.combined import CombinedEngine, CombinedEngineArgs, EngineImage
from components.secrets import SecretsArgs, ServingSecrets
from components.storage import ModelStore, ModelStoreArgs, read_only_policy
from components.sync_job import ModelSyncArgs, ModelSyncJob, job_name, sync_pod_spec
from components.volume import ModelVolumeArgs, ModelVolumeClaims
from config_model import (
    CephFsVolume,
    CompileCache,
    ExistingClaim,
    Gateway,
    GpuPool,
    ModelSync,
    ModelVolume,
    NfsVolume,
    ObjectStore,
    Rollout,
    ServedModel,
    derived,
)
from render.runtime import record
from render.stackfile import MASK

DIGEST = "@sha256:" + "a" * 64


def by_type(rendered, type_: str) -> list:
    return [r for r in rendered.resources if r.type == type_]


def served(**kw) -> ServedModel:
    base = dict(name="dsv4", served_model_name="DeepSeek-V4-Flash", directory="DeepSeek-V4-Flash-0731",
                object_prefix="models/DeepSeek-V4-Flash-0731", revision="0731")
    return ServedModel(**{**base, **kw})


# ---- ModelStore ----

def store_run(protect: bool, **store):
    def program():
        s = ModelStore("store", ModelStoreArgs(store=ObjectStore(bucket_name="weights", **store),
                                               model_prefixes=["models/a"], protect_data=protect, user_name="t-model-reader"))
        return {"bucket": s.bucket_name, "keyId": s.access_key_id, "secret": s.secret_access_key}
    return record("test", program)


def test_created_bucket_is_versioned_encrypted_private_and_protected_outside_dev():
    r = store_run(protect=True)
    (bucket,) = by_type(r, "aws:s3/bucket:Bucket")
    assert bucket.options["protect"] and bucket.options["retainOnDelete"]
    assert bucket.inputs["bucket"] == "weights" and bucket.inputs["forceDestroy"] is False
    (ver,) = by_type(r, "aws:s3/bucketVersioning:BucketVersioning")
    assert ver.inputs["versioningConfiguration"] == {"status": "Enabled"}
    (sse,) = by_type(r, "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration")
    assert sse.inputs["rules"][0]["applyServerSideEncryptionByDefault"]["sseAlgorithm"] == "AES256"
    (pab,) = by_type(r, "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock")
    assert all(pab.inputs[k] for k in ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets"))
    assert r.outputs["bucket"] == "weights"


def test_dev_bucket_is_not_protected():
    (bucket,) = by_type(store_run(protect=False), "aws:s3/bucket:Bucket")
    assert not bucket.options["protect"] and not bucket.options["retainOnDelete"]


def test_credentials_are_scoped_and_secret():
    r = store_run(protect=True)
    (policy,) = by_type(r, "aws:iam/userPolicy:UserPolicy")
    assert json.loads(policy.inputs["policy"]) == json.loads(read_only_policy("weights", ["models/a"]))
    assert {"keyId", "secret"} <= r.secret_outputs
    (key,) = by_type(r, "aws:iam/accessKey:AccessKey")
    assert key.parent == "llm-serving:storage:ModelStore::store"


def test_read_only_policy_allows_nothing_but_list_and_get_on_the_prefix():
    doc = json.loads(read_only_policy("weights", ["models/a"]))
    actions = sorted(a for s in doc["Statement"] for a in s["Action"])
    assert actions == ["s3:GetObject", "s3:ListBucket"]
    get = next(s for s in doc["Statement"] if s["Action"] == ["s3:GetObject"])
    assert get["Resource"] == ["arn:aws:s3:::weights/models/a/*"]
    lst = next(s for s in doc["Statement"] if s["Action"] == ["s3:ListBucket"])
    assert lst["Condition"]["StringLike"]["s3:prefix"] == ["models/a", "models/a/", "models/a/*"]


def test_adopted_bucket_without_created_credentials_registers_nothing():
    r = store_run(protect=True, create=False, create_credentials=False, endpoint="https://cos.example.com")
    assert [x.type for x in r.resources] == ["llm-serving:storage:ModelStore"]
    assert r.outputs["bucket"] == "weights"


# ---- ModelVolume ----

def volume_run(vol: ModelVolume):
    def program():
        v = ModelVolumeClaims("vol", ModelVolumeArgs(volume=vol, namespace="ns", ceph_secret_name="ceph"))
        return {"serving": v.serving_claim_name, "sync": v.sync_claim_name}
    return record("test", program)


def pvs(r) -> dict[str, dict]:
    return {x.name: x.inputs["spec"] for x in by_type(r, "kubernetes:core/v1:PersistentVolume")}


def test_cephfs_csi_serving_volume_is_read_only_many_and_read_only():
    r = volume_run(ModelVolume(kind="cephfs", cephfs=CephFsVolume(cluster_id="c", fs_name="fs", path="/m", user="u")))
    spec = pvs(r)
    ro, rw = spec["vol-pv-ro"], spec["vol-pv-rw"]
    assert ro["accessModes"] == ["ReadOnlyMany"] and ro["csi"]["readOnly"] is True
    assert rw["accessModes"] == ["ReadWriteMany"] and rw["csi"]["readOnly"] is False
    assert ro["csi"]["volumeAttributes"] == {"clusterID": "c", "fsName": "fs", "staticVolume": "true", "rootPath": "/m"}
    assert ro["csi"]["nodeStageSecretRef"] == {"name": "ceph", "namespace": "ns"}
    assert ro["csi"]["volumeHandle"] != rw["csi"]["volumeHandle"]
    assert all(s["persistentVolumeReclaimPolicy"] == "Retain" for s in spec.values())
    claims = {x.inputs["metadata"]["name"]: x.inputs["spec"] for x in by_type(r, "kubernetes:core/v1:PersistentVolumeClaim")}
    # Named after the volume source (issue 18 case 5): the tag of what both PVs share.
    tag = derived.source_tag({"csi": {**ro["csi"], "readOnly": False, "volumeHandle": ""}})
    serving, sync = f"model-store-{tag}", f"model-store-sync-{tag}"
    assert claims[serving]["volumeName"] == f"ns-{serving}" and claims[serving]["storageClassName"] == ""
    assert {n: c["resources"]["requests"]["storage"] for n, c in claims.items()} == {serving: "1Gi", sync: "1Gi"}
    assert r.outputs == {"serving": serving, "sync": sync}


def test_in_tree_cephfs_carries_the_report_fields():
    ceph = CephFsVolume(driver="in-tree", monitors=["m1:6789", "m2:6789"], path="/m", user="u")
    ro = pvs(volume_run(ModelVolume(kind="cephfs", cephfs=ceph)))["vol-pv-ro"]["cephfs"]
    assert ro == {"monitors": ["m1:6789", "m2:6789"], "path": "/m", "user": "u",
                  "secretRef": {"name": "ceph", "namespace": "ns"}, "readOnly": True}


def test_nfs_serving_volume_is_read_only():
    spec = pvs(volume_run(ModelVolume(kind="nfs", nfs=NfsVolume(server="nfs", path="/e"))))
    assert spec["vol-pv-ro"]["nfs"] == {"server": "nfs", "path": "/e", "readOnly": True}
    assert spec["vol-pv-rw"]["nfs"]["readOnly"] is False


def test_existing_claim_is_used_as_is():
    r = volume_run(ModelVolume(kind="existingClaim", existing_claim=ExistingClaim(claim_name="weights")))
    assert [x.type for x in r.resources] == ["llm-serving:volume:ModelVolume"]
    assert r.outputs == {"serving": "weights", "sync": "weights"}


# ---- Secrets ----

@pytest.mark.parametrize("driver,keys", [("csi", {"userID", "userKey"}), ("in-tree", {"key"})])
def test_secrets_are_masked_and_shaped_for_the_ceph_driver(driver, keys):
    def program():
        s = pulumi.Output.secret
        ServingSecrets("sec", SecretsArgs(namespace="ns", stack="test", api_key=s("k"), api_key_tag="0" * 8,
                                          object_store_access_key_id=s("i"),
                                          object_store_secret_access_key=s("x"), ceph=("u", s("c"), driver)))
        return {}
    r = record("test", program)
    data = {x.inputs["metadata"]["name"]: x.inputs["stringData"] for x in by_type(r, "kubernetes:core/v1:Secret")}
    assert set(data["llm-serving-ceph"]) == keys
    assert data["llm-serving-api-key"] == {"api-key": MASK}
    assert data["llm-serving-object-store"] == {"credentials": MASK}


# ---- Model sync Job ----

def sync_args(model: ServedModel | None = None, **store) -> ModelSyncArgs:
    return ModelSyncArgs(namespace="ns", model=model or served(), store=ObjectStore(bucket_name="weights", **store),
                         sync=ModelSync(), gpu_pool=GpuPool(gpu_type="H20"), bucket_name="weights", sync_claim_name="model-store-sync",
                         credentials_secret="creds", credentials_tag="0" * 8, scripts_config_map="scripts",
                         sync_image="aws" + DIGEST, verify_image="py" + DIGEST)


def test_sync_job_is_cpu_only_off_gpu_and_verifies():
    r = record("test", lambda: ModelSyncJob("sync", sync_args(endpoint="https://cos.example.com", create=False,
                                                                  create_credentials=False)) and {})
    (job,) = by_type(r, "kubernetes:batch/v1:Job")
    pod = job.inputs["spec"]["template"]["spec"]
    assert pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
        {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "DoesNotExist"}]}]
    assert "tolerations" not in pod
    assert "initContainers" not in pod
    download, verify = pod["containers"]
    for c in pod["containers"]:
        assert "nvidia.com/gpu" not in json.dumps(c["resources"])
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in download["env"]}
    assert env["ENDPOINT_URL"] == "https://cos.example.com" and env["ADDRESSING_STYLE"] == "virtual"
    assert env["MAX_CONCURRENT_REQUESTS"] == "20" and env["AWS_EC2_METADATA_DISABLED"] == "true"
    assert "AWS_SECRET_ACCESS_KEY" not in env and env["AWS_SHARED_CREDENTIALS_FILE"] == "/var/run/secrets/object-store/credentials"
    assert {"name": "credentials", "secret": {"secretName": "creds", "defaultMode": 0o440,
                                              "items": [{"key": "credentials", "path": "credentials"}]}} in pod["volumes"]
    assert pod["securityContext"]["runAsNonRoot"] and download["securityContext"]["readOnlyRootFilesystem"]
    # Side by side: the verifier hashes as files land and reads how the download ended from the
    # directory both mount (an emptyDir of this pod).
    assert verify["args"][verify["args"].index("--download-status") + 1] == env["STATUS_DIR"] == "/work/download-status"
    assert {"name": "work", "mountPath": "/work"} in download["volumeMounts"] and {"name": "work", "mountPath": "/work"} in verify["volumeMounts"]
    assert verify["args"][verify["args"].index("--workers") + 1] == verify["resources"]["limits"]["cpu"] == "4"
    assert verify["args"][verify["args"].index("--expected-shards") + 1] == "48"
    # The sync keeps (excludes from --delete) the very file the verifier caches digests in.
    assert verify["args"][verify["args"].index("--digest-cache") + 1] == env["DIGEST_CACHE"] == ".llm-serving-digests.json"
    assert job.options["deleteBeforeReplace"] is True
    assert job.options["customTimeouts"] == {"create": "7500s", "update": "7500s"}
    assert pod["volumes"][0] == {"name": "model", "persistentVolumeClaim": {"claimName": "model-store-sync"}}


def test_each_revision_has_its_own_place_that_sync_gate_and_engine_share():
    """A sync of the next revision never writes where running pods of this one read (issue 12)."""
    for model in (served(), served(revision="0801")):
        pod = sync_pod_spec(sync_args(model))
        dest = {e["name"]: e["value"] for e in pod["containers"][0]["env"]}["DEST"]
        verify = pod["containers"][1]["args"]
        assert dest == verify[verify.index("--model-dir") + 1] == f"/models/DeepSeek-V4-Flash-0731/{model.revision}"
        (dep,) = by_type(combined_run(model), "kubernetes:apps/v1:Deployment")
        spec = dep.inputs["spec"]["template"]["spec"]
        gate = spec["initContainers"][0]["args"]
        assert gate[gate.index("--model-dir") + 1] == dest
        assert spec["containers"][0]["args"][1] == dest  # vllm serve <model path>


def test_a_pinned_manifest_reaches_the_verifier_and_the_gate_and_nothing_pins_by_default():
    pin = "ab" * 32
    for model, expected in ((served(), []), (served(manifest_sha256=pin), ["--manifest-sha256", pin])):
        verify = sync_pod_spec(sync_args(model))["containers"][1]["args"]
        (dep,) = by_type(combined_run(model), "kubernetes:apps/v1:Deployment")
        gate = dep.inputs["spec"]["template"]["spec"]["initContainers"][0]["args"]
        for args in (verify, gate):
            assert [a for a in args if a == "--manifest-sha256"] == expected[:1]
            assert args[len(args) - len(expected):] == expected


def test_new_revision_is_a_new_job():
    assert job_name(served()) != job_name(served(revision="0801"))
    assert job_name(served()) == job_name(served(name="other-name"))  # keyed by directory, not model
    assert len(job_name(served(directory="D" * 200))) <= 63


# ---- Combined engine and the pod template ----

def combined_run(model: ServedModel, cache: CompileCache | None = None):
    args = CombinedEngineArgs(namespace="ns", model=model, gpu_pool=GpuPool(gpu_type="H20"), compile_cache=cache or CompileCache(),
                              image=EngineImage("vllm" + DIGEST, "vllm" + DIGEST), image_digest=DIGEST[1:],
                              image_cuda_version="12.9", model_claim_name="model-store", model_mount_path="/models",
                              api_key_secret="api", api_key_tag="0" * 8, scripts_config_map="scripts")
    return record("test", lambda: {"backend": CombinedEngine(model.name, args).route_backend.service_name})


def test_combined_deployment_waits_for_the_cold_start():
    r = combined_run(served(startup_budget_seconds=1800))
    (dep,) = by_type(r, "kubernetes:apps/v1:Deployment")
    assert dep.inputs["spec"]["strategy"] == {"type": "Recreate"}
    assert dep.inputs["spec"]["progressDeadlineSeconds"] == 2400
    assert dep.options["customTimeouts"] == {"create": "2400s", "update": "2400s"}
    engine = dep.inputs["spec"]["template"]["spec"]["containers"][0]
    startup = engine["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 1800
    # What comes before the budget (scheduling, pull, gate) is rollout.preStartSeconds, 600 unless set.
    (tight,) = by_type(combined_run(served(startup_budget_seconds=1800, rollout={"pre_start_seconds": 120})),
                       "kubernetes:apps/v1:Deployment")
    assert tight.inputs["spec"]["progressDeadlineSeconds"] == 1920
    assert tight.options["customTimeouts"] == {"create": "1920s", "update": "1920s"}
    assert "model.aibrix.ai/name" not in dep.inputs["metadata"]["labels"]  # else AIBrix makes its own route


def test_rolling_update_never_surges():
    r = combined_run(served(replicas=2, rollout=Rollout(strategy="RollingUpdate", max_unavailable=1)))
    (dep,) = by_type(r, "kubernetes:apps/v1:Deployment")
    assert dep.inputs["spec"]["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}


def routes_run(gateway: Gateway | None = None):
    from components.gateway import ModelRoutes, ModelRoutesArgs, RouteBackend
    backend = RouteBackend(served_model_name="DeepSeek-V4-Flash", service_name="dsv4",
                           selector={"app.kubernetes.io/name": "dsv4"}, port=8000, target_port="engine",
                           service_labels={"model.aibrix.ai/name": "DeepSeek-V4-Flash"})

    def program():
        r = ModelRoutes("routes", ModelRoutesArgs(namespace="ns", gateway=gateway or Gateway(
            external_endpoint="https://llm.example.com"), backends=[backend]))
        return {"endpoints": r.endpoints, "external": r.external_endpoint}
    return record("test", program)


def test_each_served_model_gets_a_service_and_a_route_on_the_aibrix_gateway():
    r = routes_run()
    (svc,) = by_type(r, "kubernetes:core/v1:Service")
    assert svc.inputs["metadata"] == {"name": "dsv4", "namespace": "ns", "labels": {
        **svc.inputs["metadata"]["labels"], "model.aibrix.ai/name": "DeepSeek-V4-Flash"}}
    assert svc.inputs["spec"]["ports"][0] == {"name": "http", "port": 8000, "targetPort": "engine", "protocol": "TCP",
                                               "appProtocol": "http"}
    (route,) = by_type(r, "kubernetes:gateway.networking.k8s.io/v1:HTTPRoute")
    assert route.inputs["metadata"]["namespace"] == "aibrix-system"
    spec = route.inputs["spec"]
    assert spec["parentRefs"] == [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "aibrix-eg",
                                   "namespace": "aibrix-system"}]
    (rule,) = spec["rules"]
    assert len(rule["matches"]) == 11
    assert all(m["headers"] == [{"type": "Exact", "name": "model", "value": "DeepSeek-V4-Flash"}] for m in rule["matches"])
    assert {m["path"]["value"] for m in rule["matches"]} >= {"/v1/chat/completions", "/v1/completions"}
    assert rule["backendRefs"] == [{"group": "", "kind": "Service", "name": "dsv4", "namespace": "ns", "port": 8000}]
    assert rule["timeouts"] == {"request": "120s"}
    (grant,) = by_type(r, "kubernetes:gateway.networking.k8s.io/v1beta1:ReferenceGrant")
    assert grant.inputs["metadata"]["namespace"] == "ns"
    assert grant.inputs["spec"] == {"from": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute",
                                              "namespace": "aibrix-system"}], "to": [{"group": "", "kind": "Service"}]}
    assert r.outputs == {"endpoints": {"DeepSeek-V4-Flash": "http://dsv4.ns.svc.cluster.local:8000/v1"},
                         "external": "https://llm.example.com/v1"}


def test_routes_follow_the_gateway_config():
    r = routes_run(Gateway(namespace="gw", name="edge", request_timeout_seconds=300, paths=["/v1/chat/completions"]))
    (route,) = by_type(r, "kubernetes:gateway.networking.k8s.io/v1:HTTPRoute")
    assert route.inputs["metadata"]["namespace"] == "gw"
    assert route.inputs["spec"]["parentRefs"][0]["name"] == "edge"
    assert route.inputs["spec"]["rules"][0]["timeouts"] == {"request": "300s"}
    assert len(route.inputs["spec"]["rules"][0]["matches"]) == 1
    assert r.outputs["external"] is None
    off = routes_run(Gateway(enabled=False))
    assert by_type(off, "kubernetes:gateway.networking.k8s.io/v1:HTTPRoute") == []
    assert len(by_type(off, "kubernetes:core/v1:Service")) == 1


def test_compile_cache_is_separate_writable_and_keyed():
    r = combined_run(served(), CompileCache(kind="existingClaim", claim_name="cache"))
    (dep,) = by_type(r, "kubernetes:apps/v1:Deployment")
    spec = dep.inputs["spec"]["template"]["spec"]
    cache = next(v for v in spec["volumes"] if v["name"] == "compile-cache")
    assert cache == {"name": "compile-cache", "persistentVolumeClaim": {"claimName": "cache"}}
    mount = next(m for m in spec["containers"][0]["volumeMounts"] if m["name"] == "compile-cache")
    assert "readOnly" not in mount and mount["subPath"] == dep.inputs["spec"]["template"]["metadata"]["annotations"][
        pod_template.cache_key_annotation("engine")]


def test_cache_key_changes_with_image_cuda_driver_architecture_and_arguments():
    def key(digest="sha256:" + "a" * 64, arch="sm90", cuda="12.9", driver="570.1", args=("serve", "--tp", "8")):
        return pod_template.compile_cache_key(digest, arch, cuda, driver, ["vllm"], list(args), {})
    base = key()
    assert base.startswith("sm90-aaaaaaaaaaaa-")
    assert key(digest="sha256:" + "b" * 64) != base
    assert key(arch="sm100") != base
    assert key(cuda="13.0") != base
    assert key(driver="580.2") != base
    assert key(args=("serve", "--tp", "4")) != base
    assert key() == base


def test_engine_gets_the_api_key_only_by_reference_and_gates_on_the_model():
    (dep,) = by_type(combined_run(served()), "kubernetes:apps/v1:Deployment")
    spec = dep.inputs["spec"]["template"]["spec"]
    env = {e["name"]: e for e in spec["containers"][0]["env"]}
    assert env["VLLM_API_KEY"] == {"name": "VLLM_API_KEY", "valueFrom": {"secretKeyRef": {"name": "api", "key": "api-key"}}}
    (gate,) = spec["initContainers"]
    assert gate["command"] == ["python3", "/opt/llm-serving/model_gate.py"]
    assert gate["args"][:4] == ["--model-dir", "/models/DeepSeek-V4-Flash-0731/0731", "--revision", "0731"]
    assert all(m["readOnly"] for m in gate["volumeMounts"])


# ---- Scripts ConfigMap and providers ----

def test_scripts_config_map_ships_the_tested_scripts_verbatim():
    from components.scripts import SCRIPTS_DIR, ModelScripts
    required = {"Qwen2.5-72B-Instruct": ("config.json", "model.safetensors.index.json")}
    r = record("test", lambda: ModelScripts("scripts", "ns", required) and {})
    (cm,) = by_type(r, "kubernetes:core/v1:ConfigMap")
    data = dict(cm.inputs["data"])
    # Beside the scripts, each model directory's required files (its profile's), which model_files.py reads.
    assert json.loads(data.pop("model_files.json")) == {"Qwen2.5-72B-Instruct": ["config.json", "model.safetensors.index.json"]}
    assert set(data) == {"drain.py", "load_test.py", "mirror_images.sh", "model_files.py", "model_gate.py",
                         "openai_client.py", "pd_proxy.py", "route_evidence.py", "smoke.py", "sync_model.sh",
                         "verify_model.py", "warmup.py"}
    for name, text in data.items():
        assert text == (SCRIPTS_DIR / name).read_text()


def providers_run(store: ObjectStore, kubeconfig=None, images=None):
    from components.providers import make_providers
    from config_model import Cluster, Images, StackConfig
    cfg = StackConfig.model_construct(namespace="ns", cluster=Cluster(context="gpu"), object_store=store,
                                      images=images or Images.model_construct())
    s = pulumi.Output.secret
    return record("test", lambda: make_providers(cfg, kubeconfig, s("id"), s("key")) and {})


def test_adopted_bucket_without_ecr_registers_no_aws_provider():
    # dev's COS bucket: adopted, keys from secret config, no ECR. A provider resource alone would make
    # every `pulumi up` load and configure the AWS plugin for nothing.
    r = providers_run(ObjectStore(bucket_name="bkt", region="ap-shanghai", endpoint="https://cos.ap-shanghai.myqcloud.com",
                                  create=False, create_credentials=False))
    assert by_type(r, "pulumi:providers:aws") == [] and len(by_type(r, "pulumi:providers:kubernetes")) == 1


def test_ecr_mirror_alone_needs_the_aws_provider():
    from config_model import EcrMirror, Images, Mirror
    r = providers_run(ObjectStore(bucket_name="bkt", create=False, create_credentials=False),
                      images=Images.model_construct(mirror=Mirror(kind="ecr", ecr=EcrMirror())))
    assert len(by_type(r, "pulumi:providers:aws")) == 1


def test_cos_provider_skips_aws_only_checks_and_keeps_keys_secret():
    # A bucket created through the S3 API of a compatible service.
    r = providers_run(ObjectStore(bucket_name="bkt", region="ap-shanghai", endpoint="https://cos.ap-shanghai.myqcloud.com",
                                  create=True, create_credentials=False))
    (aws_p,) = by_type(r, "pulumi:providers:aws")
    for flag in ("skipCredentialsValidation", "skipRequestingAccountId", "skipMetadataApiCheck", "skipRegionValidation"):
        assert aws_p.inputs[flag] in (True, "true"), flag
    assert aws_p.inputs["s3UsePathStyle"] in (False, "false")
    assert "https://cos.ap-shanghai.myqcloud.com" in json.dumps(aws_p.inputs["endpoints"])
    assert aws_p.inputs["accessKey"] == MASK and aws_p.inputs["secretKey"] == MASK


def test_aws_provider_keeps_the_default_checks():
    (aws_p,) = by_type(providers_run(ObjectStore(bucket_name="bkt", region="us-west-2")), "pulumi:providers:aws")
    assert aws_p.inputs["skipCredentialsValidation"] in (False, "false")  # the SDK's default, kept
    assert "skipRequestingAccountId" not in aws_p.inputs and "endpoints" not in aws_p.inputs
    assert "accessKey" not in aws_p.inputs  # AWS credentials come from the ambient chain
    assert aws_p.inputs["region"] == "us-west-2"


def test_kubernetes_provider_pins_context_namespace_and_identity():
    r = providers_run(ObjectStore(bucket_name="bkt"), kubeconfig=pulumi.Output.secret("apiVersion: v1"))
    (k,) = by_type(r, "pulumi:providers:kubernetes")
    assert k.inputs["context"] == "gpu" and k.inputs["namespace"] == "ns" and k.inputs["clusterIdentifier"] == "gpu"
    assert k.inputs["kubeconfig"] == MASK


# ---- NetworkPolicies ----

def test_network_policies_deny_by_default_and_open_named_engine_ports_to_each_peer():
    # The flows themselves are evaluated per topology in tests/test_network_monitoring.py.
    from components.network import NetworkArgs, policies
    specs = policies(NetworkArgs(namespace="ns", gateway_namespace="aibrix-system", gateway_proxy_namespace="egs",
                                 prometheus_namespace="mon", rolesets=["dsv4-pd"]))
    assert specs["llm-serving-default-deny-ingress"] == {"podSelector": {}, "policyTypes": ["Ingress"]}
    rules = specs["llm-serving-engine-ingress"]["ingress"]
    assert [r["from"][0].get("namespaceSelector", {}).get("matchLabels") for r in rules] == [
        {"kubernetes.io/metadata.name": "egs"}, {"kubernetes.io/metadata.name": "aibrix-system"},
        {"kubernetes.io/metadata.name": "mon"}, None]
    assert [[p["port"] for p in r["ports"]] for r in rules] == [
        ["engine", "proxy"], ["engine", "proxy", "prefill", "decode"], ["engine", "prefill", "decode"],
        ["engine", "proxy", "prefill", "decode"]]
    pd = specs["llm-serving-pd-dsv4-pd"]
    assert pd["podSelector"] == {"matchLabels": {"roleset-name": "dsv4-pd"}}
    assert pd["ingress"] == [{"from": [{"podSelector": {"matchLabels": {"roleset-name": "dsv4-pd"}}}]}]
    off = policies(NetworkArgs(namespace="ns", gateway_namespace=None, prometheus_namespace=None))
    assert len(off["llm-serving-engine-ingress"]["ingress"]) == 1   # the stack's own pods only


def test_platform_installs_pinned_manifests_in_order():
    from components.platform import ClusterPrerequisites
    from config_model import Platform
    r = record("test", lambda: ClusterPrerequisites("platform", Platform(install=True)) and {})
    files = by_type(r, "kubernetes:yaml/v2:ConfigFile")
    assert [f.inputs["file"] for f in files] == [
        "https://github.com/vllm-project/aibrix/releases/download/v0.7.0/aibrix-core-v0.7.0.yaml",
        "https://github.com/vllm-project/aibrix/releases/download/v0.7.0/aibrix-core-crds-v0.7.0.yaml",
        "https://github.com/vllm-project/aibrix/releases/download/v0.7.0/aibrix-dependency-v0.7.0.yaml",
        # kubernetes-sigs/lws v0.10.0 site/content/en/docs/installation/_index.md, "Install by kubectl".
        "https://github.com/kubernetes-sigs/lws/releases/download/v0.10.0/manifests.yaml",
        "https://raw.githubusercontent.com/sgl-project/rbg/v0.7.0/deploy/kubectl/manifests.yaml"]
    # Applied in order: dependency, then the CRDs (a separate asset since v0.7.0), then core.
    crds = next(f for f in files if "aibrix-core-crds" in f.inputs["file"])
    core = next(f for f in files if "aibrix-core-v" in f.inputs["file"])
    assert any("aibrix-dependency" in d for d in crds.options["dependsOn"])
    assert any("aibrix-core-crds" in d for d in core.options["dependsOn"])


def test_object_store_keys_become_an_aws_credentials_file():
    import configparser

    from components.secrets import aws_credentials_file
    parser = configparser.ConfigParser()
    parser.read_string(aws_credentials_file("AKIDEXAMPLE", "s3cr3t/with+chars"))
    assert dict(parser["default"]) == {"aws_access_key_id": "AKIDEXAMPLE", "aws_secret_access_key": "s3cr3t/with+chars"}
