"""Hydra override tokens (`model.cpu_offloading=true`, `+x=[a,b]`, `~key`), read by hydra-core's own parser.

Using Hydra's parser means offlint sees exactly what Bridge sees: `None` is the string 'None', `no` is the
string 'no', `core_attn` is a string and not a list, `[a,b]` is a list, `null` is None.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

# A token that looks like an override: optional +, ++ or ~, a dotted key, then =value (or nothing, for ~key).
_OVERRIDE_SHAPE = re.compile(r"^(~|\+\+|\+)?([A-Za-z_][\w\-]*(?:\.[\w\-@/]+)*)(=.*)?$", re.S)


TOP_LEVEL_KEYS = ("mixed_precision", "peft")  # ConfigContainer fields offlint reads that have no section


@dataclass(frozen=True)
class Override:
    key: str  # canonical key (env_vars.X -> env.X)
    value: object
    op: str  # "set" | "add" | "force" | "delete"
    text: str  # the value as written


class OverrideError(ValueError):
    pass


def looks_like_override(token: str) -> bool:
    match = _OVERRIDE_SHAPE.match(token)
    if not match or token.startswith("-"):
        return False
    prefix, key, rest = match.groups()
    if key in TOP_LEVEL_KEYS and rest is not None:
        return True
    return "." in key and (rest is not None or prefix == "~") or (rest is not None and key.isidentifier()
                                                                   and rest.startswith("={"))


@lru_cache(maxsize=1)
def _parser():
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create()


# The tokens Hydra's grammar reads without doubt: a plain dotted key set (or added) to a decimal integer, to
# true/false/null, or to a word that is no keyword. Hydra's ANTLR parser takes about a third of a millisecond a
# token, so a command of 100,000 overrides took half a minute; these are read here, with Hydra's answer.
_SIMPLE = re.compile(r"(\+\+|\+)?([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)=(?:(-?(?:0|[1-9][0-9]*))|([A-Za-z_][A-Za-z0-9_]*))")
_WORDS = {"true": True, "false": False, "null": None}
_FLOAT_WORDS = {"inf", "nan"}


def parse_override(token: str) -> list[Override]:
    """One token -> one or more canonical overrides (a dict value `model={a:1}` expands to its keys)."""
    simple = _SIMPLE.fullmatch(token)
    if simple is not None and (simple.group(4) or "").lower() not in _FLOAT_WORDS:
        prefix, key, number, word = simple.groups()
        value = int(number) if number is not None else _WORDS.get(word.lower(), word)
        op = {"+": "add", "++": "force"}.get(prefix or "", "set")
        return [Override(canonical_key(key), value, op, number if number is not None else word)]
    return _parse_with_hydra(token)


@lru_cache(maxsize=4096)  # a tree's scripts repeat the same overrides
def _parse_with_hydra(token: str) -> list[Override]:
    from hydra.errors import HydraException

    try:
        parsed = _parser().parse_overrides([token])[0]
    except HydraException as exc:
        first = str(exc).splitlines()[0]
        raise OverrideError(f"Hydra cannot parse override `{token}`: {first}") from None
    op = "delete" if parsed.is_delete() else "force" if parsed.is_force_add() else \
        "add" if parsed.is_add() else "set"
    key = parsed.key_or_group
    text = token.split("=", 1)[1] if "=" in token else ""
    value = _plain(parsed.value())
    if isinstance(value, dict) and op != "delete":
        return [Override(canonical_key(f"{key}.{k}"), v, op, repr(v)) for k, v in value.items()]
    return [Override(canonical_key(key), value, op, text)]


def canonical_key(key: str) -> str:
    if key.startswith("env_vars."):
        return "env." + key[len("env_vars."):]
    return key


def _plain(value):
    """Hydra returns its own sweep/containers for some syntaxes; keep plain Python values only."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return str(value)
