"""Rules over what surrounds serving: image mirrors, the day-2 Jobs, the drain, and the gateway P/D needs."""

from __future__ import annotations

from typing import Iterator

from components.base import labels
from components.dashboards import CONFIG_MAP_BASE
from components.engines import engine_of, max_model_len
from components.image_refs import PULL_THROUGH_UPSTREAMS, ecr_prefix, parse_upstream
from components.topologies import topology_of
from config_model import Environment, StackConfig, is_ip_host, k8s
from stacks.rules.problem import Problem


def images(cfg: StackConfig) -> Iterator[Problem]:
    mirror = cfg.images.mirror
    section = {"ecr": mirror.ecr, "registry": mirror.registry}
    if mirror.kind in section and section[mirror.kind] is None:
        yield Problem(f"images.mirror.{mirror.kind}", None, f"is required when images.mirror.kind is {mirror.kind!r}")
    for other, value in section.items():
        if other != mirror.kind and value is not None:
            yield Problem(f"images.mirror.{other}", "(set)", f"must be unset when images.mirror.kind is {mirror.kind!r}")
    if mirror.kind == "ecr" and mirror.ecr is not None:
        if not cfg.object_store.on_aws:
            yield Problem("images.mirror.kind", "ecr", "needs AWS, but this stack's aws provider points at the "
                          f"non-AWS endpoint {cfg.object_store.endpoint}; use kind 'registry'")
        too_long: set[str] = set()
        for key, ref in sorted(cfg.all_images().items()):
            registry = parse_upstream(ref.upstream).registry
            path = cfg.image_path(key)
            prefix = ecr_prefix(mirror.ecr.repository_prefix, registry) if registry in PULL_THROUGH_UPSTREAMS else ""
            if len(prefix) > k8s.ECR_CACHE_PREFIX_MAX and prefix not in too_long:
                too_long.add(prefix)
                room = k8s.ECR_CACHE_PREFIX_MAX - (len(prefix) - len(mirror.ecr.repository_prefix))
                yield Problem("images.mirror.ecr.repositoryPrefix", mirror.ecr.repository_prefix,
                              f"derives the pull-through cache prefix {prefix!r} ({len(prefix)} characters) for "
                              f"{registry}, which ECR allows at most {k8s.ECR_CACHE_PREFIX_MAX}; this field may have "
                              f"at most {room} characters")
            if registry not in PULL_THROUGH_UPSTREAMS:
                yield Problem(f"{path}.upstream", ref.upstream,
                              f"ECR cannot pull-through-cache {registry}; supported: "
                              f"{', '.join(sorted(PULL_THROUGH_UPSTREAMS))}. Use images.mirror.kind 'registry'")
            elif PULL_THROUGH_UPSTREAMS[registry][2] and registry not in mirror.ecr.upstream_credential_arns:
                yield Problem("images.mirror.ecr.upstreamCredentialArns", mirror.ecr.upstream_credential_arns,
                              f"needs a Secrets Manager ARN for {registry} (used by {path}): ECR caches "
                              f"{registry} only with credentials")


# preStop endpoint removal plus the engine's own shutdown after the last request.
DRAIN_MARGIN_SECONDS = 30


def _warmup_fits(cfg: StackConfig) -> Iterator[Problem]:
    """The warm-up's longest request fits each model's context; components/ops_commands.py
    warmup_args would refuse it while resources are being registered."""
    warmup = cfg.operations.warmup
    if not warmup.enabled:
        return
    for i, m in enumerate(cfg.models):
        limit = max_model_len(m)
        if limit is None:   # the checkpoint's context: no near-maximum request (components/ops_commands.py)
            continue
        longest = max([*warmup.input_tokens, int(limit * warmup.near_max_input_fraction)])
        if longest + warmup.output_tokens > limit:
            engine = engine_of(m)
            at = f"models[{i}].{engine.SECTION}.{engine.CONTEXT_FIELD}"
            yield Problem(at, limit, f"the warm-up sends {longest} input + {warmup.output_tokens} output "
                          "tokens, more than this context; lower operations.warmup.inputTokens or "
                          "nearMaxInputFraction, or disable operations.warmup")


def operations(cfg: StackConfig) -> Iterator[Problem]:
    ops = cfg.operations
    for i, sc in enumerate(ops.load_test.scenarios):
        if sc.num_warmups < sc.concurrency:
            yield Problem(f"operations.loadTest.scenarios[{i}].numWarmups", sc.num_warmups,
                          f"must be at least the concurrency {sc.concurrency}: fewer warm-ups leave shapes to JIT "
                          "inside the measured round (field report 8.2)")
    if ops.load_test.enabled and cfg.environment == Environment.prod and not ops.load_test.allow_live_traffic:
        yield Problem("operations.loadTest.enabled", True,
                      "runs `vllm bench serve` against the engines that serve this prod stack's users after every "
                      "rollout, and its rounds compete with their requests (the idle check only waits for a moment "
                      "with nothing in flight); run it on staging, or set operations.loadTest.allowLiveTraffic: true "
                      "for a window without users")
    if ops.load_test.enabled and cfg.images.vllm is None:
        yield Problem("images.vllm", None, "is required when operations.loadTest.enabled is true: the load-test Job "
                      "runs `vllm bench serve` from the vLLM image, whatever engine the models run on")
    if ops.smoke.enabled and ops.smoke.expected_text is not None and not ops.smoke.expected_text.strip():
        yield Problem("operations.smoke.expectedText", ops.smoke.expected_text,
                      "must be the exact answer the deterministic prompt returns (field report 12.3); leave it out "
                      "for each model's (models[].smoke.expectedText, then its profile's)")
    if ops.smoke.enabled and ops.smoke.prompt is not None and not ops.smoke.prompt.strip():
        yield Problem("operations.smoke.prompt", ops.smoke.prompt, "must not be empty; leave it out for each model's")
    if ops.open_webui.enabled and ops.open_webui.image is None:
        yield Problem("operations.openWebUI.image", None, "is required when operations.openWebUI.enabled is true")
    if cfg.gateway.external_endpoint and is_ip_host(cfg.gateway.external_endpoint):
        yield Problem("gateway.externalEndpoint", cfg.gateway.external_endpoint,
                      "must be a stable DNS name, never an IP: a Pod IP changes when the pod is re-created (field report 10)")
    dash = ops.monitoring.dashboards
    if ops.monitoring.enabled and dash.enabled and dash.label_key in labels(CONFIG_MAP_BASE, "dashboards"):
        yield Problem("operations.monitoring.dashboards.labelKey", dash.label_key,
                      "must not be a label the program sets on every object (app.kubernetes.io/name, component, "
                      "part-of, managed-by): the sidecar label would replace it")
    yield from _warmup_fits(cfg)
    longest = cfg.gateway.longest_request_seconds
    need = longest + DRAIN_MARGIN_SECONDS
    for i, m in enumerate(cfg.models):
        if m.termination_grace_seconds < need:
            yield Problem(f"models[{i}].terminationGraceSeconds", m.termination_grace_seconds,
                          f"must be at least {need}: the longest request through the gateway {longest}s "
                          f"(gateway.requestTimeoutSeconds, at least AIBrix's own 120 s route when the gateway is on) "
                          f"plus {DRAIN_MARGIN_SECONDS}s, so in-flight requests finish before the engine stops")


def gateway_needed(cfg: StackConfig) -> Iterator[Problem]:
    """P/D exists only behind the AIBrix gateway: its plugin picks the prefill/decode pair and injects
    the transfer parameters (field report 11.3, 11.5). Without the routes, clients reach prefill and
    decode pods directly, each answering alone, and the smoke Job could prove nothing."""
    if cfg.gateway.enabled:
        return
    for i, m in enumerate(cfg.models):
        if topology_of(m).fleets:
            yield Problem(f"models[{i}].topology", m.topology, "needs gateway.enabled: true; the AIBrix gateway is what "
                          "pairs prefill and decode (field report 11.3), without it every pod answers on its own")
