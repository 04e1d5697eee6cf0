"""Time from `pulumi up` to the first served token, and the GPU time held before it: pure arithmetic
over a model's size, engine, GPUs and whether its image was pre-pulled (components/prepull.py).

The order it models is the program's: the sync Job and the pre-pull DaemonSets start together; the
engine pods are created only when the sync Job has verified the weights (stacks/program.py
depends_on), and hold their GPUs from then on, through the image pull (when the image is not on the
node yet) and the cold start, until the first token.
"""

from __future__ import annotations

from dataclasses import dataclass

from config_model.object_store import FIELD_REPORT_DOWNLOAD_MIB_PER_SECOND
from policy.profiles import profile_named

# The download rate when objectStore.downloadRateMiBps is unset: field report 3.2, one 155.43 GiB
# download in about 364 s from one COS bucket. Only the download: the report does not time a
# verification pass.
SYNC_MIB_PER_SECOND = FIELD_REPORT_DOWNLOAD_MIB_PER_SECOND
# Field report 12.2: the ~14.29 GB SGLang image took about 127 s on its first pull; the only engine
# image pull the report times, so it stands for every engine image here. Not a stack-file setting: a
# pull depends on the registry, the mirror and each node's link, and pre-pull (operations.imagePrePull)
# takes it off the GPUs' path instead.
IMAGE_PULL_SECONDS = 127
IMAGE_PULL_SECTION = "12.2"
IMAGE_PULL_SOURCE = f"{IMAGE_PULL_SECONDS} s for a 14.29 GB SGLang image"
# The cold-start estimate of a model's profile on its engine (policy/profiles/, pod creation to Ready)
# says whether it already contains the pull (COLD_START_INCLUDES_IMAGE_PULL): DeepSeek-V4's SGLang 23 min
# do (12.2); its vLLM 12 min (6, 9.3) are not broken down, so nothing is taken off them. The 23 min also
# include a model preparation the report does not time, so that figure stays an upper bound. A profile
# without a measurement (generic) gives no cold start: the estimate is then a lower bound.


@dataclass(frozen=True)
class TimeToServing:
    """One served model's path to its first token, in seconds."""

    sync_seconds: float          # the model's directory, at the store's download rate
    pull_seconds: float          # the engine image onto the node (serialized pulls when pre-pulling several)
    cold_start_seconds: float    # engine start with image and weights present, to a port that serves (0: unmeasured)
    gpus: int                    # GPUs of the model's engine pods at steady state
    pre_pulled: bool
    first_token_seconds: float   # from `pulumi up`
    gpu_wait_seconds: float      # from the engine pods' scheduling to the first token
    measured: bool = True        # False: the profile has no cold start on this engine; the times are lower bounds

    @property
    def gpu_minutes(self) -> float:
        return self.gpus * self.gpu_wait_seconds / 60


def sync_seconds(size_gib: float, mib_per_second: float = SYNC_MIB_PER_SECOND) -> float:
    return size_gib * 1024 / mib_per_second


def cold_start_seconds(engine: str, profile: str) -> float | None:
    p = profile_named(profile)
    if engine not in p.COLD_START_ESTIMATE_SECONDS:
        return None
    return p.COLD_START_ESTIMATE_SECONDS[engine] - (IMAGE_PULL_SECONDS if p.COLD_START_INCLUDES_IMAGE_PULL[engine] else 0)


def cold_start_source(engine: str, profile: str) -> str | None:
    """The field report section of the profile's measured cold start on the engine; None: not measured
    there (or not at all)."""
    return profile_named(profile).COLD_START_FIELD_REPORT.get(engine)


def time_to_serving(size_gib: float, engine: str, gpus: int, pre_pulled: bool, images_per_node: int = 1, *,
                    profile: str, download_mib_per_second: float = SYNC_MIB_PER_SECOND) -> TimeToServing:
    """Without pre-pull the engine pod pulls its image after the sync, holding its GPUs through it.
    With it, every GPU node pulls each distinct engine image during the sync; the kubelet pulls one
    image at a time by default (serializeImagePulls, default true: k8s.io/kubelet config/v1beta1
    KubeletConfiguration), so a node holds all `images_per_node` images only after that many pulls,
    and the engine pod waits only for what of it outlasts the sync."""
    sync = sync_seconds(size_gib, download_mib_per_second)
    measured = cold_start_seconds(engine, profile)
    cold = measured or 0.0
    if pre_pulled:
        pull = IMAGE_PULL_SECONDS * images_per_node
        waiting = max(0.0, pull - sync) + cold
    else:
        pull = IMAGE_PULL_SECONDS
        waiting = pull + cold
    return TimeToServing(sync_seconds=sync, pull_seconds=pull, cold_start_seconds=cold, gpus=gpus,
                         pre_pulled=pre_pulled, first_token_seconds=sync + waiting, gpu_wait_seconds=waiting,
                         measured=measured is not None)


def minutes(seconds: float) -> str:
    """How plan.md prints a duration: minutes with one decimal."""
    return f"{seconds / 60:.1f} min"
