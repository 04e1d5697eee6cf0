"""The GPU types a pool may declare (gpuPool.gpuType): each one's memory, CUDA architecture and the node
label that selects it. The one home of GPU hardware facts; standard library only, so the config model,
the rules and plan.md all ask it.

Where the figures come from:
- `product`: the value NVIDIA GPU Feature Discovery (GFD; the GPU Operator deploys it) puts in the node
  label `nvidia.com/gpu.product`: the name NVML reports for the card (what nvidia-smi prints) with every
  space replaced by '-' (NVIDIA/k8s-device-plugin internal/lm/resource.go resourceLabeler.productLabel:
  strings.ReplaceAll(p, " ", "-")). A shared (time-sliced) GPU gets "-SHARED" appended, which this
  catalogue does not guess: such a pool sets gpuPool.nodeSelector itself.
- the NVML names themselves: the NVIDIA Linux driver README, appendix A "Supported NVIDIA GPU Products"
  ("NVIDIA H20", "NVIDIA H100 80GB HBM3", ...), and as the engines read them: vLLM 0.33.0 names its tuned
  fused-MoE kernel configs after torch.cuda.get_device_name() with spaces as '_'
  (vllm/model_executor/layers/fused_moe/configs/*device_name=NVIDIA_H20.json, NVIDIA_H100_80GB_HBM3,
  NVIDIA_H200, NVIDIA_A100-SXM4-80GB, NVIDIA_A100-SXM4-40GB, NVIDIA_L40S, NVIDIA_B200; vllm/utils/
  platform_utils.py get_device_name_as_file_name), and PyTorch 2.x names the L4 "NVIDIA L4"
  (torch/_inductor/analysis/device_info.py, keyed by torch.cuda.get_device_name()).
- `memory_mib`: the card's total memory as nvidia-smi's memory.total (and GFD's `nvidia.com/gpu.memory`
  label) report it, in MiB: a little less than the marketing figure on the HBM3 parts (ECC and reserved
  memory). Each is the value seen in public nvidia-smi output of that card; cited per entry.
- `architecture`: the CUDA compute capability as the sm name (NVIDIA "CUDA GPUs" compute capability
  table; GFD labels it nvidia.com/gpu.compute.major/minor): Ampere A100 8.0, Ada L4/L40S 8.9, Hopper
  H20/H100/H200 9.0, Blackwell B200 10.0.

Where a card has variants (SXM and PCIe, which NVML names differently), the entry is the one said in
`variant`; a pool of another variant sets gpuPool.nodeSelector to its own product label (and
gpuPool.gpuMemoryGiB if the memory differs): the selector, not the catalogue, decides where pods go.
"""

from __future__ import annotations

from dataclasses import dataclass

# The GFD node label naming the GPU model (NVIDIA/k8s-device-plugin internal/lm/resource.go).
PRODUCT_LABEL = "nvidia.com/gpu.product"
MIB_PER_GIB = 1024


@dataclass(frozen=True)
class GpuType:
    name: str            # what gpuPool.gpuType says
    product: str         # the nvidia.com/gpu.product value GFD sets on its nodes
    memory_mib: int      # memory.total as nvidia-smi reports it
    architecture: str    # CUDA architecture, as gpuPool.gpuArchitecture spells it
    variant: str         # which form of the card the product label is
    memory_source: str   # where memory_mib was seen

    @property
    def memory_gib(self) -> float:
        return self.memory_mib / MIB_PER_GIB


CATALOGUE: dict[str, GpuType] = {t.name: t for t in (
    # The field report's card (2.1: 8 x H20 96 GB); nvidia-smi shows "NVIDIA H20 ... / 97871MiB".
    GpuType("H20", "NVIDIA-H20", 97871, "sm90", "HGX (SXM) H20 96 GB",
            "nvidia-smi memory.total of an NVIDIA H20: 97871MiB"),
    # "NVIDIA H100 80GB HBM3" is the SXM5 (HGX) H100; the PCIe card is "NVIDIA H100 PCIe".
    GpuType("H100-80GB", "NVIDIA-H100-80GB-HBM3", 81559, "sm90", "SXM5 (HGX H100); the PCIe card is NVIDIA-H100-PCIe",
            "nvidia-smi memory.total of an NVIDIA H100 80GB HBM3: 81559MiB"),
    # "NVIDIA H200" is the SXM (HGX) H200; the PCIe card is "NVIDIA H200 NVL".
    GpuType("H200", "NVIDIA-H200", 143771, "sm90", "SXM (HGX H200); the PCIe card is NVIDIA-H200-NVL",
            "nvidia-smi memory.total of an NVIDIA H200: 143771MiB"),
    GpuType("A100-80GB", "NVIDIA-A100-SXM4-80GB", 81920, "sm80", "SXM4; the PCIe card is NVIDIA-A100-80GB-PCIe",
            "GFD nvidia.com/gpu.memory of an A100 80GB node: 81920"),
    GpuType("A100-40GB", "NVIDIA-A100-SXM4-40GB", 40960, "sm80", "SXM4; the PCIe card is NVIDIA-A100-PCIE-40GB",
            "GFD nvidia.com/gpu.memory of an A100 40GB node: 40960"),
    GpuType("L40S", "NVIDIA-L40S", 46068, "sm89", "PCIe (the only form)",
            "nvidia-smi memory.total of an NVIDIA L40S: 46068MiB"),
    GpuType("L4", "NVIDIA-L4", 23034, "sm89", "PCIe (the only form)",
            "GFD nvidia.com/gpu.memory of an L4 node: 23034"),
    GpuType("B200", "NVIDIA-B200", 183359, "sm100", "SXM (HGX B200)",
            "nvidia-smi memory.total of an NVIDIA B200: 183359MiB"),
)}
NAMES = tuple(CATALOGUE)


def named(name: str | None) -> GpuType | None:
    return CATALOGUE.get(name) if name is not None else None


def by_product(product: str | None) -> GpuType | None:
    """The entry whose GFD product label this is, if any."""
    return next((t for t in CATALOGUE.values() if t.product == product), None)


def listing() -> str:
    """The catalogue in words, for messages and docs: `H20 (NVIDIA-H20, 95.58 GiB, sm90), ...`."""
    return ", ".join(f"{t.name} ({t.product}, {t.memory_gib:.2f} GiB, {t.architecture})" for t in CATALOGUE.values())
