"""GPU devices: memory capacity, the share a training process can use, and the figures the cost model needs.

`total_mib` is the total nvidia-smi reports for the device (public nvidia-smi outputs: H100 80GB HBM3 81559MiB,
H200 143771MiB, B200 183359MiB, GB200 189471MiB, A100-SXM4 80GB 81920MiB). Of that, the driver's reserve and the
CUDA context are not available to PyTorch's allocator; `RESERVED_GIB` stands for both (on an A100-SXM4-80GB,
torch reports 85,056,798,720 bytes = 79.2 GiB of 80 GiB). `bf16_tflops` is the dense BF16 tensor-core peak
from NVIDIA's data sheets, as are the dense FP8 peak, the HBM bandwidth and the NVLink bandwidth per GPU and direction
(H100/H200 NVLink 4: 900 GB/s both directions; B200/GB200 NVLink 5: 1.8 TB/s; A100 NVLink 3: 600 GB/s); they
only feed the step-time model (cost.py), never the memory.
"""

from __future__ import annotations

from dataclasses import dataclass

GIB = 1024**3
RESERVED_GIB = 1.0


# Compute capability by offlint's device names and the GPU names Bridge recipes use (NVIDIA's CUDA GPU table).
CAPABILITY = {"a100-80gb": (8, 0), "a100": (8, 0), "h100-80gb": (9, 0), "h100": (9, 0), "h200": (9, 0),
              "b200": (10, 0), "gb200": (10, 0), "b300": (10, 3), "gb300": (10, 3)}


def keeps_fp8_transpose(capability: tuple[int, int]) -> bool:
    """Whether per-tensor FP8 keeps a transposed weight copy at this compute capability: Transformer Engine's FP8
    GEMMs take the row-wise data for both layouts on 10.x, 11.x and from 13.0 on (nvte_is_non_tn_fp8_gemm_supported),
    and need the transpose below 10.0 and on 12.x."""
    return not ((10, 0) <= capability < (12, 0) or capability >= (13, 0))


@dataclass(frozen=True)
class Device:
    name: str
    total_mib: float
    bf16_tflops: float = 989.0  # dense; a plain "<GiB>" device uses the H100 figures for the cost model
    gpus_per_node: int = 8
    fp8_tflops: float = 1979.0  # dense FP8 (the A100 has none: its BF16 figure)
    hbm_tb_per_s: float = 3.35
    nvlink_gb_per_s: float = 450.0  # per GPU and direction
    # Whether per-tensor FP8 keeps a separate transposed copy for the column-wise GEMM operand: on Hopper
    # (compute capability 9.0) yes; on Blackwell (10.x) the FP8 GEMM takes the row-wise data (Transformer
    # Engine's nvte_is_non_tn_fp8_gemm_supported). None: not known (a capacity given in GiB; the A100 has no FP8).
    fp8_transpose: bool | None = None

    def peak_flops(self, dtype: str = "bf16") -> float:
        return (self.fp8_tflops if dtype in ("fp8", "fp4") else self.bf16_tflops) * 1e12

    @property
    def hbm_bytes_per_s(self) -> float:
        return self.hbm_tb_per_s * 1e12

    @property
    def nvlink_bytes_per_s(self) -> float:
        return self.nvlink_gb_per_s * 1e9

    @property
    def total_gib(self) -> float:
        return self.total_mib / 1024

    @property
    def usable_bytes(self) -> float:
        return (self.total_gib - RESERVED_GIB) * GIB


DEVICES = {
    "h100-80gb": Device("h100-80gb", 81559, 989.0, 8, 1979.0, 3.35, 450.0, fp8_transpose=True),
    "h200": Device("h200", 143771, 989.0, 8, 1979.0, 4.8, 450.0, fp8_transpose=True),
    "b200": Device("b200", 183359, 2250.0, 8, 4500.0, 8.0, 900.0, fp8_transpose=False),
    "gb200": Device("gb200", 189471, 2500.0, 4, 5000.0, 8.0, 900.0, fp8_transpose=False),
    "a100-80gb": Device("a100-80gb", 81920, 312.0, 8, 312.0, 2.039, 300.0),
}
DEFAULT_DEVICE = "h100-80gb"
ALIASES = {"h100": "h100-80gb", "a100": "a100-80gb", "h200-141gb": "h200"}


# GPUs whose capacity offlint has not measured, but that NVIDIA states larger than GPUs it has measured: the
# capacity torch reports on them is at least the largest measured capacity of a GPU NVIDIA states smaller, a lower
# bound that can show a peak fits and never that it does not (docs/estimate.md, "GPUs offlint has not measured").
# Per-GPU memory in GB as NVIDIA states it, all from one table: the GenMol NIM support matrix,
# https://docs.nvidia.com/nim/bionemo/genmol/2.0.0/support-matrix.html ("NVIDIA H100 80GB", "NVIDIA H200 141GB",
# "NVIDIA B200 180GB", "NVIDIA GB200 186GB", "NVIDIA B300 288GB", "NVIDIA GB300 288GB", "NVIDIA A100 40GB or
# 80GB"); the Boltz-2 NIM support matrix (https://docs.nvidia.com/nim/bionemo/boltz2/1.8.0/support-matrix.html)
# gives the same 288 for "NVIDIA B300 (NVIDIA-B300-SXM6-AC)" and "NVIDIA GB300 (Grace Blackwell Ultra)", and its
# 1.7.0 release note (https://docs.nvidia.com/nim/bionemo/boltz2/release-notes/2026/5/18) "B300 Tensor Core GPU
# SKU with 288GB HBM3e memory per GPU". Rubin (R100, VR200): no NVIDIA page found stating its memory, so no bound.
STATED_GB = {"h100-80gb": 80, "h200": 141, "b200": 180, "gb200": 186, "a100-80gb": 80, "b300": 288, "gb300": 288}
# The measured device whose cost-model figures (peaks, bandwidths, GPUs per node) stand in for an unmeasured GPU's.
_STAND_IN = {"b300": "b200", "gb300": "gb200"}


@dataclass(frozen=True)
class CapacityBound:
    """A lower bound of an unmeasured GPU's capacity: `device` has the largest capacity offlint measured on a GPU
    NVIDIA states smaller (`measured_on`)."""
    gpu: str
    device: Device
    measured_on: str


def capacity_bound(gpu: str) -> CapacityBound | None:
    """The lower bound for a GPU named in a recipe name (`b300`), or None when NVIDIA's stated size is not known."""
    if gpu in DEVICES or gpu not in STATED_GB:
        return None
    smaller = [name for name in DEVICES if STATED_GB[name] < STATED_GB[gpu]]
    if not smaller:
        return None
    measured_on = max(smaller, key=lambda name: DEVICES[name].total_mib)
    stand_in = DEVICES[_STAND_IN.get(gpu, measured_on)]
    device = Device(f"{gpu} (at least {measured_on}'s {DEVICES[measured_on].total_mib:g} MiB)",
                    DEVICES[measured_on].total_mib, stand_in.bf16_tflops, stand_in.gpus_per_node,
                    stand_in.fp8_tflops, stand_in.hbm_tb_per_s, stand_in.nvlink_gb_per_s, stand_in.fp8_transpose)
    return CapacityBound(gpu, device, measured_on)


class DeviceError(ValueError):
    pass


def parse_device(text: str) -> Device:
    """`h100-80gb`, `h200`, `b200`, `gb200`, `a100-80gb`, or a capacity in GiB (`96`, `96GiB`)."""
    name = text.strip().lower()
    name = ALIASES.get(name, name)
    if name in DEVICES:
        return DEVICES[name]
    number = name.removesuffix("gib").removesuffix("gb").strip()
    try:
        gib = float(number)
    except ValueError:
        raise DeviceError(f"unknown GPU {text!r}: use one of {', '.join(DEVICES)} or a capacity in GiB such "
                          f"as 96") from None
    if not 1 <= gib <= 4096:
        raise DeviceError(f"GPU capacity {text!r} is out of range: give the device memory in GiB, e.g. 80")
    return Device(f"{gib:g} GiB", gib * 1024)


# Headroom under which a peak that fits is at risk, as a share of the usable memory: the caching allocator's
# reserved-but-unallocated memory in Megatron Bridge's published runs reached 10-12 GiB (17-21% of allocated)
# without a stated allocator setting, and 7 GiB (11%) with expandable_segments; the memory-tuning card puts the
# usual fragmentation at 2-10 GB. See docs/estimate.md for the table.
AT_RISK_MARGIN = {True: 0.05, False: 0.15}  # with / without expandable_segments:True


def margin_bytes(dev: Device, with_expandable: bool) -> float:
    return AT_RISK_MARGIN[with_expandable] * dev.usable_bytes
