"""GPU devices: memory capacity, the share a training process can use, and the figures the cost model needs.

`total_mib` is the total nvidia-smi reports for the device (public nvidia-smi outputs: H100 80GB HBM3 81559MiB,
H200 143771MiB, B200 183359MiB, GB200 189471MiB, A100-SXM4 80GB 81920MiB; "NVIDIA B300 SXM6 AC" 275040MiB and
"NVIDIA GB300" 284208MiB, each in the nvidia-smi tables of several independent public machines, among them AWS
p6-b300.48xlarge nodes and GB300 NVL72 trays; docs/estimate.md lists them). Of that, the driver's reserve and the
CUDA context are not available to PyTorch's allocator; `RESERVED_GIB` stands for both (on an A100-SXM4-80GB,
torch reports 85,056,798,720 bytes = 79.2 GiB of 80 GiB). `bf16_tflops` is the dense BF16 tensor-core peak
from NVIDIA's data sheets, as are the dense FP8 peak, the HBM bandwidth and the NVLink bandwidth per GPU and direction
(H100/H200 NVLink 4: 900 GB/s both directions; B200/GB200 NVLink 5: 1.8 TB/s; A100 NVLink 3: 600 GB/s); they
only feed the step-time model (cost.py), never the memory.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

GIB = 1024**3
RESERVED_GIB = 1.0


# Compute capability by offlint's device names and the GPU names Bridge recipes use (NVIDIA's CUDA GPU table;
# Rubin, R100 / VR200: 10.7, which CUDA 13.4 added, as PyTorch's and TensorRT-LLM's Rubin support state: pytorch
# PR 190654, TensorRT-LLM PR 17336).
CAPABILITY = {"a100-80gb": (8, 0), "a100": (8, 0), "h100-80gb": (9, 0), "h100": (9, 0), "h200": (9, 0),
              "b200": (10, 0), "gb200": (10, 0), "b300": (10, 3), "gb300": (10, 3), "r100": (10, 7),
              "vr200": (10, 7)}


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
    # A GPU whose capacity is bracketed, not measured (stated_range): this device is the low end and `upper` the
    # high end; None for a measured capacity. A verdict about it must hold at both ends (ends()).
    upper: Device | None = None

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
    # Blackwell Ultra: the cost-model figures are B200's / GB200's, which NVIDIA's data sheets give for B300 / GB300
    # too (dense BF16 2.25 / 2.5 PFLOP/s, 8 TB/s HBM, NVLink 5); compute capability 10.3, no FP8 weight transposes
    "b300": Device("b300", 275040, 2250.0, 8, 4500.0, 8.0, 900.0, fp8_transpose=False),
    "gb300": Device("gb300", 284208, 2500.0, 4, 5000.0, 8.0, 900.0, fp8_transpose=False),
    "a100-80gb": Device("a100-80gb", 81920, 312.0, 8, 312.0, 2.039, 300.0),
}
DEFAULT_DEVICE = "h100-80gb"

# NVIDIA's stated memory per GPU, in GB as its data sheets write it. For every measured device above, nvidia-smi's
# total lies between the stated figure read as decimal GB and read as GiB (tests/test_estimate_stated_capacity.py
# checks it on the table): H100 80 -> 81559 MiB, H200 141 -> 143771, B200 180 -> 183359, GB200 186 -> 189471,
# A100 80 -> 81920 (the GiB end), B300 288 -> 275040 (0.1% above the GB end), GB300 288 -> 284208. A GPU with a
# stated size and no measured one is sized by that bracket (stated_range). Rubin (R100; VR200, its NVL72 rack's
# name): 288 GB of HBM4 per GPU, NVIDIA's figure since GTC 2025 and in the Vera Rubin NVL72 announcement
# (CES 2026); no public nvidia-smi output of a Rubin GPU was found by 2026-11-28.
STATED_GB = {"h100-80gb": 80, "h200": 141, "b200": 180, "gb200": 186, "b300": 288, "gb300": 288, "a100-80gb": 80,
             "r100": 288, "vr200": 288}
GPUS_PER_NODE = {"r100": 8, "vr200": 4}  # HGX Rubin NVL8 boards; VR200 NVL72 compute trays, as GB200's


def stated_range(name: str) -> Device:
    """A GPU with a stated but no measured capacity: the device at the low end of the bracket (stated GB, in
    bytes), whose `upper` is the device at the high end (stated GiB). The cost-model figures are GB200's, the newest
    measured ones; they only rank the what-if options, never decide a verdict."""
    gb, base = STATED_GB[name], DEVICES["gb200"]
    figures = dict(bf16_tflops=base.bf16_tflops, gpus_per_node=GPUS_PER_NODE.get(name, 8), fp8_tflops=base.fp8_tflops,
                   hbm_tb_per_s=base.hbm_tb_per_s, nvlink_gb_per_s=base.nvlink_gb_per_s,
                   fp8_transpose=keeps_fp8_transpose(CAPABILITY[name]))
    high = Device(f"{name} (at most {gb} GiB)", gb * 1024, **figures)
    low_mib = gb * 1e9 / 2**20
    return Device(f"{name} (at least {gb} GB = {low_mib / 1024:.1f} GiB)", low_mib, **figures, upper=high)


def ends(dev: Device) -> tuple[Device, ...]:
    """The capacities a verdict about `dev` must hold at: the device itself, or both ends of its bracket."""
    return (dev,) if dev.upper is None else (dev, dev.upper)


def agreed(judge, dev: Device, undecided):
    """`judge(device)` where it is the same at every end of `dev` (ends), else `undecided`."""
    found = {judge(d) for d in ends(dev)}
    return found.pop() if len(found) == 1 else undecided
ALIASES = {"h100": "h100-80gb", "a100": "a100-80gb", "h200-141gb": "h200"}


class DeviceError(ValueError):
    pass


def parse_device(text: str) -> Device:
    """`h100-80gb`, `h200`, `b200`, `gb200`, `b300`, `gb300`, `a100-80gb`, `r100`, `vr200` (a stated capacity:
    stated_range), or a capacity in GiB (`96`, `96GiB`)."""
    name = text.strip().lower()
    name = ALIASES.get(name, name)
    if name in DEVICES:
        return DEVICES[name]
    if name in STATED_GB:
        return stated_range(name)
    number = name.removesuffix("gib").removesuffix("gb").strip()
    try:
        gib = float(number)
    except ValueError:
        raise DeviceError(f"unknown GPU {text!r}: use one of {', '.join({**DEVICES, **STATED_GB})} or a capacity "
                          f"in GiB such as 96") from None
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


@lru_cache(maxsize=8)
def configured_device(cwd: str) -> Device:
    """`[tool.offlint] gpu` of the project at `cwd`, else the default (here, not in oom.py, so that the cache key of
    `offlint check` does not import the memory model)."""
    from offlint.config import ConfigError, load_config

    try:
        name = load_config(Path(cwd)).gpu
        return parse_device(name or DEFAULT_DEVICE)
    except (ConfigError, DeviceError):
        return parse_device(DEFAULT_DEVICE)  # `offlint estimate` reports a bad setting; the lint goes on


def device() -> Device:
    return configured_device(os.getcwd())  # (str(Path.cwd()) for an absolute path, without building a Path)
