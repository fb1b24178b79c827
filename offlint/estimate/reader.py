"""How the input readers ask a resolved configuration for a value: three-valued, an unknown one recorded with its
reason (never replaced by a guess), a size left at megatron-core's placeholder 0 counted as unknown.
"""

from __future__ import annotations

import math

from offlint.types import Unknown
from offlint.estimate.shapes import Lookup

_DTYPE_BYTES = {"torch.float32": 4, "torch.float16": 2, "torch.bfloat16": 2, "torch.uint8": 1,
                "torch.float8_e4m3fn": 1, "fp32": 4, "fp16": 2, "bf16": 2, "float32": 4, "float16": 2,
                "bfloat16": 2}


class Reader:
    def __init__(self, lookup: Lookup):
        self.lookup = lookup
        self.unknown: dict[str, str] = {}
        self.assumed: dict[str, str] = {}
        self.other_seq_length: tuple[str, int] | None = None

    def get(self, key: str, fallback: object = None) -> object:
        """The effective value; an unknown one is recorded and replaced by `fallback` so reading can go on."""
        value = self.lookup(key)
        if value.state == "unknown":  # (Value.is_unknown, without its call: a unit's memory inputs read 60 keys)
            self.unknown[key] = value.value.reason if isinstance(value.value, Unknown) else "unknown"
            return fallback
        return value.value if value.value is not None else fallback

    def size(self, key: str, *alternatives: str) -> int:
        """A required size: unknown when unset or left at megatron-core's placeholder 0."""
        for name in (key, *alternatives):
            value = self.lookup(name)
            if not value.is_unknown and value.state == "known" and positive_int(value.value):
                return int(value.value)
        value = self.lookup(key)
        if value.is_unknown and isinstance(value.value, Unknown):
            self.unknown[key] = value.value.reason
        else:
            self.unknown[key] = f"`{key}` is not set (model sizes are needed; set it or pass --override {key}=N)"
        return 0

    def soft_int(self, key: str, assumption: str) -> int | None:
        """A setting the estimate can go on without: unknown becomes None, with the assumption recorded."""
        value = self.lookup(key)
        if not value.is_unknown and positive_int(value.value):
            return int(value.value)
        if value.is_unknown:
            self.assumed[key] = assumption
        return None

    def number(self, key: str, fallback: float, get=None) -> float:
        """A count or a fraction the estimate reads with a default (the router's top-k, an offload fraction): a value
        that is no number (a string a YAML file or a command line gives) is recorded as unknown, as an unknown one
        is, instead of failing the conversion. `get`: another reading of the key than `get` (a hybrid provider's
        defaults)."""
        value = (get or self.get)(key, fallback)
        if value is None:
            return fallback
        if isinstance(value, int) or isinstance(value, float) and math.isfinite(value):
            return value  # (a bool too: True counts 1, as megatron-core's arithmetic does)
        # (`inf` and `nan`, which Hydra reads as floats, count nothing: `moe_router_topk=inf` had ended a check in
        # an OverflowError)
        self.unknown[key] = f"{value!r} is not a {'finite ' if isinstance(value, float) else ''}number"
        return fallback

    def optional_int(self, key: str) -> int | None:
        value = self.get(key)
        return int(value) if positive_int(value) else None

    def dtype_bytes(self, key: str, default: int = 4) -> int:
        value = self.get(key)
        return _DTYPE_BYTES.get(str(value).replace("'", ""), default) if value is not None else default


def positive_int(value: object) -> bool:
    if type(value) is int:  # the usual case, without isinstance(value, bool)'s look-up of an int's __class__
        return value > 0
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def before(lookup: Lookup, release: tuple[int, int]) -> bool:
    """Whether the megatron-core version the lookup resolves against (a ResolvedUnit's `get` carries it, and
    named_precision.resolving's wrapper keeps it) is older than `release`; False for a lookup without one."""
    version = getattr(getattr(lookup, "__self__", None), "version", None) or getattr(lookup, "version", None)
    return version is not None and (version.major, version.minor) < release


def positive_number(value: object) -> bool:
    try:
        return not isinstance(value, bool) and float(value) > 0  # env values are strings
    except (TypeError, ValueError):
        return False
