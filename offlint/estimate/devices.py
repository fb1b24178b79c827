"""GPU devices: memory capacity, the share a training process can use, and the figures the cost model needs.

`total_mib` is the total nvidia-smi reports for the device (public nvidia-smi outputs: H100 80GB HBM3 81559MiB,
H200 143771MiB, B200 183359MiB, GB200 189471MiB, A100-SXM4 80GB 81920MiB). Of that, the driver's reserve and the
CUDA context are not available to PyTorch's allocator; `RESERVED_GIB` stands for both (on an A100-SXM4-80GB,
torch reports 85,056,798,720 bytes = 79.2 GiB of 80 GiB). `bf16_tflops` is the dense BF16 tensor-core peak
from NVIDIA's data sheets; it only scales the relative step-time estimate, never the memory.
"""

from __future__ import annotations

from dataclasses import dataclass

GIB = 1024**3
RESERVED_GIB = 1.0


@dataclass(frozen=True)
class Device:
    name: str
    total_mib: float
    bf16_tflops: float = 989.0  # dense; a plain "<GiB>" device uses the H100 figure for the cost model
    gpus_per_node: int = 8

    @property
    def total_gib(self) -> float:
        return self.total_mib / 1024

    @property
    def usable_bytes(self) -> float:
        return (self.total_gib - RESERVED_GIB) * GIB


DEVICES = {
    "h100-80gb": Device("h100-80gb", 81559, 989.0),
    "h200": Device("h200", 143771, 989.0),
    "b200": Device("b200", 183359, 2250.0),
    "gb200": Device("gb200", 189471, 2500.0, gpus_per_node=4),
    "a100-80gb": Device("a100-80gb", 81920, 312.0),
}
DEFAULT_DEVICE = "h100-80gb"
ALIASES = {"h100": "h100-80gb", "a100": "a100-80gb", "h200-141gb": "h200"}


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
