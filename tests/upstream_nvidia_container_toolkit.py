"""The NVIDIA Container Toolkit (github.com/NVIDIA/nvidia-container-toolkit, tag v1.19.1, read from the
mirror; the runtime on GPU nodes cannot run here): which GPUs a container gets from
NVIDIA_VISIBLE_DEVICES. Re-check on a bump: internal/config/image/cuda_image.go and devices.go, and
cmd/nvidia-container-runtime/README.md "Possible values".

The README: `all` (the default in NVIDIA's CUDA images, which the vLLM and SGLang images build on),
`none` (no GPU, driver capabilities still injected), and "`void` or *empty* or *unset*:
`nvidia-container-runtime` will have the same behavior as `runc`". The runtime reads the variable
from the OCI spec's process env, where the container's own env replaces the image's.
"""

from __future__ import annotations

TAG = "v1.19.1"

PORTED_FROM = {
    "repo": "NVIDIA/nvidia-container-toolkit", "release": TAG,
    "files": ("internal/config/image/cuda_image.go", "internal/config/image/devices.go",
              "cmd/nvidia-container-runtime/README.md"),
    "not_deployed": "the runtime of the GPU nodes, which the stacks neither install nor pin",
}
VARIABLE = "NVIDIA_VISIBLE_DEVICES"


def visible_devices(env: dict[str, str], legacy_image: bool = False) -> list[str]:
    """CUDA.devicesFromEnvvars then NewVisibleDevices(...).List() (internal/config/image/cuda_image.go,
    devices.go): the comma-separated entries; unset with a legacy image (CUDA_VERSION without
    NVIDIA_REQUIRE_CUDA) means all; none given, or any entry "void", is void; then the first entry
    that is "all", "none" or ""/"void" decides, else the ids. List(): all -> ["all"], none -> [""],
    void -> nil, else the ids."""
    devices: list[str] = []
    is_set = VARIABLE in env
    if is_set:
        devices = [d.strip() for d in env[VARIABLE].split(",") if d.strip()]
    if not is_set and not devices and legacy_image:
        devices = ["all"]
    if not devices or "void" in devices:
        devices = ["void"]
    for d in devices:
        if d == "all":
            return ["all"]
        if d == "none":
            return [""]
        if d in ("", "void"):
            return []
    return devices


def gets_gpus(env: dict[str, str], legacy_image: bool = False) -> bool:
    """Whether the runtime hands the container any GPU: void (nil) behaves like runc, none ([""])
    gives none."""
    return visible_devices(env, legacy_image) not in ([], [""])
