"""What proves that a request took the route the topology promises (field report 11.3: "HTTP 200,
both Pods receiving requests, and External KV hit 100% are not sufficient evidence"): the AIBrix
gateway's routing response headers say which pod(s) it picked, and the engines' NIXL counters say
that KV moved from prefill to decode and that nothing failed back to recompute.

Upstream facts (re-checked in tests/upstream_aibrix.py and tests/upstream_vllm.py when a pinned version
moves):
- AIBrix v0.7.0 pkg/plugins/gateway/types.go + gateway_rsp_headers.go: every routed response carries
  `routing-strategy`, `target-pod`, `target-pod-ip` ("ip:port"); algorithms/pd_disaggregation.go adds
  `prefill-target-pod` and `prefill-target-pod-ip` only when it chose a prefill/decode pair (a
  combined fallback has none).
- vLLM v0.26.0 NixlConnector metrics (NixlPromMetrics): histogram `vllm:nixl_xfer_time_seconds`
  (its `_count` is the successful transfers, counted on the decode, which reads), counters
  `vllm:nixl_num_failed_transfers`, `vllm:nixl_num_failed_notifications`,
  `vllm:nixl_num_kv_expired_reqs` (on the prefill), exposed with `_total`. A failed load under
  kv_load_failure_policy=recompute is a failed transfer.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Callable

from openai_client import RequestFailed, metric_sums, request, scrape

ROUTING_STRATEGY = "routing-strategy"
TARGET_POD = "target-pod"
TARGET_POD_IP = "target-pod-ip"
PREFILL_POD = "prefill-target-pod"
PREFILL_POD_IP = "prefill-target-pod-ip"
TRANSFERS = "vllm:nixl_xfer_time_seconds_count"
FAILURES = ("vllm:nixl_num_failed_transfers_total", "vllm:nixl_num_failed_notifications_total",
            "vllm:nixl_num_kv_expired_reqs_total")
ROUTES = ("service", "combined", "pd", "hybrid", "same-pod")


@dataclass(frozen=True)
class Expect:
    route: str                       # one of ROUTES
    prefill_pod_prefix: str = ""     # pd/hybrid: pod names of the prefill side start so
    decode_pod_prefix: str = ""      # pd/hybrid: pod names of the decode side start so
    prefill_port: int = 8000         # where each side's /metrics answers on its pod IP
    decode_port: int = 8000
    probe_words: int = 512           # prompt length of a P/D probe (hybrid: above the P/D bucket)
    short_words: int = 16            # hybrid: a prompt the combined pods take
    settle_seconds: float = 15       # the engine records transfer stats a step after the transfer
    attempts: int = 4
    reasoning_kwarg: str = ""        # chat_template_kwargs key turning reasoning off in the probes; "" sends none


def probe(endpoint: str, model: str, words: int, rid: str, reasoning_kwarg: str = "") -> dict[str, str]:
    """A chat request no cache has seen (the nonce leads, so no prefix is shared); its headers."""
    prompt = f"[{rid}] " + " ".join(["hello"] * max(1, words)) + "\nReply with one word."
    body = {"model": model, "messages": [{"role": "user", "content": prompt}], "temperature": 0, "max_tokens": 8}
    if reasoning_kwarg:
        body["chat_template_kwargs"] = {reasoning_kwarg: False}
    answer, headers = request(f"{endpoint}/chat/completions", body, request_id=rid)
    if not answer.get("choices"):
        raise RequestFailed(f"probe {rid} returned no choices")
    return headers


def _host(address: str) -> str:
    return address.rsplit(":", 1)[0] if address.count(":") == 1 else address.strip("[]")


def gateway_pick(headers: dict[str, str]) -> tuple[str, str]:
    """(pod, strategy) the gateway plugin routed to; no target-pod means it did not route."""
    pod = headers.get(TARGET_POD)
    if not pod:
        raise RequestFailed("the answer has no target-pod header: the request did not go through the AIBrix "
                            f"gateway's routing (headers: {sorted(headers)})")
    return pod, headers.get(ROUTING_STRATEGY, "")


def pd_pair(headers: dict[str, str], e: Expect) -> tuple[str, str, str]:
    """(prefill metrics URL, decode metrics URL, description) of the pair the gateway chose."""
    decode, strategy = gateway_pick(headers)
    prefill = headers.get(PREFILL_POD)
    if strategy != "pd" or not prefill:
        raise RequestFailed(f"the gateway did not pick a prefill/decode pair: routing-strategy {strategy!r}, "
                            f"target-pod {decode!r}, prefill-target-pod {prefill!r}")
    if not prefill.startswith(e.prefill_pod_prefix) or not decode.startswith(e.decode_pod_prefix):
        raise RequestFailed(f"the pair {prefill} -> {decode} is not {e.prefill_pod_prefix}* -> {e.decode_pod_prefix}*")
    prefill_ip, decode_ip = headers.get(PREFILL_POD_IP, ""), _host(headers.get(TARGET_POD_IP, ""))
    return (f"http://{prefill_ip}:{e.prefill_port}/metrics", f"http://{decode_ip}:{e.decode_port}/metrics",
            f"{prefill} -> {decode}")


def same_pod(headers: dict[str, str], e: Expect) -> tuple[str, str, str]:
    pod, _ = gateway_pick(headers)
    ip = _host(headers.get(TARGET_POD_IP, ""))
    return (f"http://{ip}:{e.prefill_port}/metrics", f"http://{ip}:{e.decode_port}/metrics", f"pod {pod}")


def _counters(prefill_url: str, decode_url: str) -> dict[str, float]:
    try:
        p, d = metric_sums(scrape(prefill_url), FAILURES), metric_sums(scrape(decode_url), (TRANSFERS, *FAILURES))
    except OSError as err:
        raise RequestFailed(f"cannot read the engines' metrics ({prefill_url}, {decode_url}): {err}") from None
    return {**{f"prefill {k}": v for k, v in p.items()}, **{f"decode {k}": v for k, v in d.items()}}


def transfer_evidence(send: Callable[[int], dict[str, str]], locate: Callable[[dict[str, str]], tuple[str, str, str]],
                      e: Expect) -> str:
    """Counters before and after a probe on the same pair: decode transfers grew, no failure grew."""
    pair = locate(send(0))
    before = _counters(*pair[:2])
    for attempt in range(1, e.attempts + 1):
        now = locate(send(attempt))
        if now != pair:    # another pair took it: its counters are the new baseline
            pair, before = now, _counters(*now[:2])
            continue
        deadline = time.monotonic() + e.settle_seconds
        while True:
            after = _counters(*pair[:2])
            grew = after[f"decode {TRANSFERS}"] - before[f"decode {TRANSFERS}"]
            failed = {k: after[k] - before[k] for k in after if k.endswith(FAILURES) and after[k] > before[k]}
            if grew > 0 or failed or time.monotonic() >= deadline:
                break
            time.sleep(min(1.0, e.settle_seconds))
        if failed:
            raise RequestFailed(f"{pair[2]}: KV transfer failures grew {failed}; a failed load is recomputed "
                                "(kv_load_failure_policy) and is not P/D (field report 11.3)")
        if grew <= 0:
            raise RequestFailed(f"{pair[2]}: the decode's {TRANSFERS} did not grow within {e.settle_seconds:.0f}s; "
                                "the decode computed the prompt itself, no KV came from the prefill")
        return f"{pair[2]}: {grew:.0f} NIXL transfers, no failed transfer, notification or expired KV"
    raise RequestFailed(f"{e.attempts + 1} probes never reached the same pair twice in a row")


def prove(endpoint: str, model: str, e: Expect) -> str:
    """Evidence that requests took the expected route; RequestFailed saying what is missing."""
    nonce = uuid.uuid4().hex[:8]
    if e.route == "service":
        return "skipped: no gateway in this stack, the request went to the model's Service"
    if e.route == "combined":
        pod, strategy = gateway_pick(probe(endpoint, model, e.short_words, f"smoke-route-{nonce}", e.reasoning_kwarg))
        return f"the gateway routed to {pod} by {strategy or 'its default'}"
    if e.route == "same-pod":
        return transfer_evidence(lambda i: probe(endpoint, model, e.probe_words, f"smoke-pd-{nonce}-{i}", e.reasoning_kwarg),
                                 lambda h: same_pod(h, e), e)
    pd = transfer_evidence(lambda i: probe(endpoint, model, e.probe_words, f"smoke-pd-{nonce}-{i}", e.reasoning_kwarg),
                           lambda h: pd_pair(h, e), e)
    if e.route == "pd":
        return pd
    headers = probe(endpoint, model, e.short_words, f"smoke-short-{nonce}", e.reasoning_kwarg)
    pod, _ = gateway_pick(headers)
    if headers.get(PREFILL_POD) or pod.startswith((e.prefill_pod_prefix, e.decode_pod_prefix)):
        raise RequestFailed(f"a short prompt went to the P/D pair ({headers.get(PREFILL_POD)} -> {pod}), "
                            "not to a combined pod: prompt-length bucketing is off (11.5)")
    return f"long prompt {pd}; short prompt to combined pod {pod}"
