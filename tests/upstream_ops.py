"""Upstream behaviour the day-2 Jobs and the same-pod proxy rely on, with where it was read. Re-check
each entry against the source at the new tag when a pinned version moves; the fakes in
fake_openai.py take these values from here, and test_route_evidence.py checks that the scripts use
the same ones.

AIBrix v0.7.0 (github.com/vllm-project/aibrix, tag v0.7.0):
- pkg/plugins/gateway/types.go, gateway_rsp_headers.go (HandleResponseHeaders): a routed response
  carries routing-strategy, target-pod, target-pod-ip and request-id; target-pod-ip is "ip:port"
  (pkg/types/router_context.go, TargetAddress).
- pkg/plugins/gateway/algorithms/pd_disaggregation.go (Route): prefill-target-pod and
  prefill-target-pod-ip only when a prefill/decode pair was chosen; a combined pod (nil prefill)
  gets neither. Prefill requests copy the client's headers (pd/prefill/default.go).
- pd/transfer/shfs.go: the prefill request carries kv_transfer_params {do_remote_decode: true,
  do_remote_prefill: false, remote_*: null}; the decode request the prefill's kv_transfer_params
  with remote_host set to the prefill pod IP.
- gateway_req_body.go (validateModelAvailability): 400 + x-error-no-model-backends: <model> when
  no pod of the model is known yet, 503 + x-error-no-model-backends: true when none is ready.
- config/gateway/gateway-plugin/gateway-plugin.yaml: /v1/models goes to aibrix-metadata-service,
  which lists the model.aibrix.ai/name labels of running pods (python/aibrix/aibrix/metadata/api/
  v1/models.py), never through the routing plugin.
- config/dependency/envoy-gateway: Envoy Gateway v1.2.8; its proxy Service is
  envoy-<gateway namespace>-<gateway name>-<sha256("<ns>/<name>")[:8]> in the Envoy Gateway
  namespace (envoyproxy/gateway v1.2.8 internal/utils/misc.go GetHashedName,
  internal/infrastructure/kubernetes/proxy/resource.go), listener port 80
  (config/gateway/gateway.yaml); AIBrix's own scripts name envoy-aibrix-system-aibrix-eg-903790dc.

vLLM v0.26.0 (github.com/vllm-project/vllm):
- vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py (NixlPromMetrics): histogram
  vllm:nixl_xfer_time_seconds (one observation per successful transfer per TP rank, on the decode,
  which reads), counters vllm:nixl_num_failed_transfers, vllm:nixl_num_failed_notifications,
  vllm:nixl_num_kv_expired_reqs (prefill side); prometheus_client exposes counters with _total.
- AuthenticationMiddleware (vllm/entrypoints/openai/server_utils.py; api_server.py in older trees):
  with --api-key, paths under /v1 answer 401 {"error": "Unauthorized"}
  without the bearer key; other paths (/health, /metrics) are open.
- examples/disaggregated/disaggregated_serving/disagg_proxy_multiturn.py (the image's proxy, field
  report 9.2): routes POST /v1/chat/completions, POST /v1/completions, GET /health only; its
  non-streaming answer is rebuilt from the streamed text alone (no reasoning, no tool calls, 9.5).
"""

from __future__ import annotations

GATEWAY_RESPONSE_HEADERS = ("routing-strategy", "target-pod", "target-pod-ip", "request-id")
PD_RESPONSE_HEADERS = ("prefill-target-pod", "prefill-target-pod-ip")
NO_BACKENDS_HEADER = "x-error-no-model-backends"
SHFS_PREFILL_PARAMS = {"do_remote_decode": True, "do_remote_prefill": False, "remote_engine_id": None,
                       "remote_block_ids": None, "remote_host": None, "remote_port": None}
ENVOY_GATEWAY_SERVICE_AIBRIX_DEFAULT = "envoy-aibrix-system-aibrix-eg-903790dc"
GATEWAY_LISTENER_PORT = 80

NIXL_TRANSFERS_HISTOGRAM = "vllm:nixl_xfer_time_seconds"
NIXL_FAILURE_COUNTERS = ("vllm:nixl_num_failed_transfers", "vllm:nixl_num_failed_notifications",
                         "vllm:nixl_num_kv_expired_reqs")
VLLM_UNAUTHORIZED = (401, {"error": "Unauthorized"})
IMAGE_PROXY_ROUTES = (("POST", "/v1/chat/completions"), ("POST", "/v1/completions"), ("GET", "/health"))
