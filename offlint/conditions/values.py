"""Helper functions on plain values (lists, strings, numbers, dtypes) for conditions and message templates."""

from __future__ import annotations

from offlint.conditions.scope import UNKNOWN, takes_unknown


def is_whole(value) -> bool:
    """An int that is not a bool (a size as megatron-core compares it)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_positive_count(value) -> bool:
    """A whole number above 0 (not a bool): a size or batch megatron-core can divide by."""
    return is_whole(value) and value > 0


def as_list(value) -> list:
    """megatron-core iterates these: a string iterates its characters, None is empty."""
    if value is None:
        return []
    if isinstance(value, (list, tuple, set)):
        return list(value)
    if isinstance(value, str):
        return list(value)
    return [value]


def contains(collection, item) -> bool:
    return item in as_list(collection)


def overlap(collection, items) -> list:
    return sorted({str(i) for i in as_list(collection) if i in items})


def is_str(value) -> bool:
    return isinstance(value, str)


def is_list(value) -> bool:
    return isinstance(value, (list, tuple))


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def startswith(value, prefix) -> bool:
    return str(value).startswith(prefix)


def lower(value) -> str:
    return str(value).lower()


def fmt(value) -> str:
    """A value as a user would write it in a recipe."""
    if isinstance(value, str):
        return repr(value)
    return repr(value)


@takes_unknown
def known(value) -> bool:
    return value is not UNKNOWN


FP32_SPELLINGS = ("torch.float32", "torch.float", "float32", "fp32", "torch.fp32")


def is_fp32(dtype) -> bool:
    """A dtype setting (as offlint reads it: "torch.float32", "fp32", ...) that means fp32."""
    return str(dtype) in FP32_SPELLINGS


@takes_unknown
def listing(*parts) -> str:
    """Message parts joined with ", ", leaving out empty ones (a setting that is not worth naming) and unknown
    ones; "?" when nothing known is left but something was unknown."""
    known_parts = [str(p) for p in parts if p is not UNKNOWN and p != ""]
    if known_parts:
        return ", ".join(known_parts)
    return "?" if any(p is UNKNOWN for p in parts) else ""
