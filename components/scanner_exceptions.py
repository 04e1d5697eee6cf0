"""Scanner exceptions, on the object they concern and each with its reason: what checkov (make test,
tests/test_scan.py) and kube-score (make e2e, e2e/test_kube_score.py) flag and the program keeps on purpose.

One dict of check id -> reason per object; the id says whose it is. checkov's (CKV_*) become its own
annotations, `checkov.io/skip<n>: "<id>=<reason>"`. kube-score v1.20.0 reads one annotation,
`kube-score/ignore`, a comma-separated list of check ids with no room for a reason (scorecard/scorecard.go
ignoredChecksAnnotation, scorecard/enabled.go isEnabled: each id is trimmed and compared exactly; unknown
annotation keys are ignored), so each reason goes beside it, numbered like checkov's:
`llm-serving.io/kube-score-skip<n>: "<id>=<reason>"`. kube-score reads them from the object and, for a
workload's pod checks, from its pod template too; ours are on the object. A custom resource's annotations
are read by neither scanner (kube-score does not parse custom resources at all), so none is put there.
"""

from __future__ import annotations

from collections.abc import Iterable

KUBE_SCORE_IGNORE = "kube-score/ignore"
KUBE_SCORE_REASON = "llm-serving.io/kube-score-skip"
# Ignoring container-resources silently ignores container-ephemeral-storage-request-and-limit too (kube-score
# v1.20.0 scorecard/scorecard.go impliedIgnoreAnnotations): never an exception.
NEVER_IGNORED = frozenset({"container-resources", "container-ephemeral-storage-request-and-limit"})


def scanner_exceptions(reasons: dict[str, str]) -> dict[str, str]:
    """The annotations of one object's deliberate exceptions, each with its reason (see above)."""
    checkov = sorted((c, r) for c, r in reasons.items() if c.startswith("CKV_"))
    kube_score = sorted((c, r) for c, r in reasons.items() if not c.startswith("CKV_"))
    if refused := NEVER_IGNORED & {c for c, _ in kube_score}:
        raise ValueError(f"kube-score checks {sorted(refused)} are never ignored")
    out = {f"checkov.io/skip{i}": f"{check}={reason}" for i, (check, reason) in enumerate(checkov, 1)}
    if kube_score:
        out[KUBE_SCORE_IGNORE] = ",".join(c for c, _ in kube_score)
        out.update({f"{KUBE_SCORE_REASON}{i}": f"{c}={r}" for i, (c, r) in enumerate(kube_score, 1)})
    return out


# kube-score takes the text after an image's last ':' for its tag, so a digest is a tag to it and any policy
# but Always fails (score/container/container.go containerImagePullPolicy).
DIGEST_PINNED = {
    "container-image-pull-policy": "every image is pinned by digest (pack rule image-digest), so IfNotPresent "
                                   "never runs other bytes; Always would make each pod start wait on the registry "
                                   "and undo the pre-pull DaemonSets",
}


def vendor_image(runs_as_root: str, writes_root: str) -> dict[str, str]:
    """A vendor image kept as it ships: each scanner's checks of a root user (checkov CKV_K8S_23, CKV_K8S_40;
    kube-score user-group-id) and of a writable root filesystem (CKV_K8S_22; readonlyrootfilesystem), with
    the image's reasons, and its digest-pinned pull policy."""
    return {"CKV_K8S_23": runs_as_root, "CKV_K8S_40": runs_as_root, "CKV_K8S_22": writes_root, **DIGEST_PINNED,
            "container-security-context-user-group-id": runs_as_root,
            "container-security-context-readonlyrootfilesystem": writes_root}


# Why engine containers keep what the scanners flag (vendor vLLM/SGLang images).
ENGINE_SCANNER_EXCEPTIONS = {
    **vendor_image("the vendor vLLM and SGLang images run as root and are not validated as another user",
                   "engines write runtime sockets and kernels under /tmp and /root beside the cache volume"),
    "CKV_K8S_35": "vLLM reads its API key only from VLLM_API_KEY or argv; a secretKeyRef env is the narrower exposure",
    # kube-score compares only the handlers (score/probes/probes.go), not period or thresholds.
    "pod-probes-identical": "readiness and liveness both open a TCP connection to the serving port, as every "
                            "engine probe must (field report 12.4: an HTTP /health may generate); they differ "
                            "in period and failure threshold",
}


# The kinds kube-score v1.20.0 reads pods from that this program renders pods in (parser/parse.go decodes Pod,
# Job, CronJob, Deployment, StatefulSet, DaemonSet; every other kind is dropped as "Unknown datatype").
SCANNED_POD_KINDS = frozenset({"Deployment", "Job", "DaemonSet"})


def unscanned_pods(check: str, kinds: Iterable[str]) -> dict[str, str]:
    """The exception for a Service (service-targets-pod) or NetworkPolicy (networkpolicy-targets-pod) that
    selects pods of these workload kinds only, when kube-score reads none of them; none otherwise."""
    kinds = set(kinds)
    if not kinds or kinds & SCANNED_POD_KINDS:
        return {}
    return {check: f"it selects pods of {', '.join(sorted(kinds))}, custom resources kube-score does not read"}
