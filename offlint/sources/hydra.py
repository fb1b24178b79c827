"""Hydra override tokens (`model.cpu_offloading=true`, `+x=[a,b]`, `~key`), read by hydra-core's own parser.

Using Hydra's parser means offlint sees exactly what Bridge sees: `None` is the string 'None', `no` is the
string 'no', `core_attn` is a string and not a list, `[a,b]` is a list, `null` is None.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from offlint.types import InputError

# A token that looks like an override: optional +, ++ or ~, a dotted key, then =value (or nothing, for ~key).
_OVERRIDE_SHAPE = re.compile(r"^(~|\+\+|\+)?([A-Za-z_][\w\-]*(?:\.[\w\-@/]+)*)(=.*)?$", re.S)


TOP_LEVEL_KEYS = ("mixed_precision", "peft")  # ConfigContainer fields offlint reads that have no section


@dataclass(frozen=True)
class Override:
    key: str  # canonical key (env_vars.X -> env.X)
    value: object
    op: str  # "set" | "add" | "force" | "delete"
    text: str  # the value as written


class OverrideError(InputError):
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


# Hydra's ANTLR parser takes about a third of a millisecond a token (a command of 100,000 overrides took half a
# minute), and importing and creating it about 0.15 s per process. The tokens of the plain shapes below are read
# here instead, with the answer Hydra's grammar (hydra/grammar/OverrideLexer.g4, OverrideParser.g4 of hydra-core
# 1.3) gives them; anything else goes to Hydra. `_read_plain` gives None for a token outside these shapes.
#
# - the key: optional + or ++, then dotted identifiers (ASCII letters, digits, _). The lexer's key mode reads it as
#   one ID or DOT_PATH token, the key's text.
# - a value is an element: a quoted string, a list [e,...], a dict {k:e,...}, or an unquoted primitive of the
#   characters `_PRIM` only (no blank, escape, quote, `$`, `:`, `=`, `,`, bracket or parenthesis: so no sweep,
#   function, interpolation or whitespace trimming). In the value mode each such character begins a token the
#   `primitive` rule takes (a letter or _ an ID, a digit an INT, the others UNQUOTED_CHAR), so the lexer cannot
#   fail, and the primitive is the tokens up to the next structural character. ANTLR's lexer takes the longest
#   match, the earlier rule on a tie: the primitive is ONE token exactly when some rule's language holds all of
#   it, and then its type is the first such rule in the order FLOAT, INT, BOOL, NULL, UNQUOTED_CHAR, ID. Hydra
#   gives float(text), int(text), the bool, None, or the text; for two or more tokens it joins their texts, which
#   is the text again.
# - a quoted string whose content is printable ASCII without quotes, backslash or `$` is one QUOTED_VALUE token,
#   and Hydra gives its content (there is no escape to undo).
# - a dict key is such an unquoted primitive too (the dictKey rule: the primitive's tokens less COLON and
#   INTERPOLATION), typed alike; Hydra builds the dict with dict(pairs).
_KEY = re.compile(r"(\+\+|\+)?([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)=")
_PRIM = re.compile(r"[A-Za-z0-9_/.+%*@?|-]+")
_QUOTED = re.compile(r"""(?:"[ !#%&(-\[\]-~]*"|'[ !#%&(-\[\]-~]*')""")  # printable ASCII less ' " $ and \\
_INT_UNSIGNED = r"(?:0|[1-9](?:_?[0-9])*)"
_POINT_FLOAT = rf"(?:{_INT_UNSIGNED}\.|{_INT_UNSIGNED}?\.[0-9](?:_?[0-9])*)"
_FLOAT = re.compile(rf"[+-]?(?:{_POINT_FLOAT}|(?:{_INT_UNSIGNED}|{_POINT_FLOAT})[eE][+-]?[0-9](?:_?[0-9])*"
                    rf"|[Ii][Nn][Ff]|[Nn][Aa][Nn])")
_INT = re.compile(rf"[+-]?{_INT_UNSIGNED}")
_NAMED = {"true": True, "false": False, "null": None}  # BOOL and NULL, any case
_MAX_PLAIN_DEPTH = 20


class _NotPlain(Exception):
    pass


def _typed(text: str):
    """An unquoted primitive's value (`text` all of `_PRIM`)."""
    if _FLOAT.fullmatch(text):
        return float(text)
    if _INT.fullmatch(text):
        return int(text)
    return _NAMED.get(text.lower(), text)


def _element(s: str, i: int, depth: int):
    """The element at s[i:]: (its value as Hydra gives it, the index after it)."""
    c = s[i : i + 1]
    if c == "[" or c == "{":
        if depth > _MAX_PLAIN_DEPTH:
            raise _NotPlain
        close, out, pairs = ("]", [], None) if c == "[" else ("}", None, [])
        i += 1
        if s[i : i + 1] == close:
            return (out if out is not None else {}), i + 1
        while True:
            if pairs is not None:
                key = _PRIM.match(s, i)
                if key is None or s[key.end() : key.end() + 1] != ":":
                    raise _NotPlain
                value, i = _element(s, key.end() + 1, depth + 1)
                pairs.append((_typed(key.group()), value))
            else:
                value, i = _element(s, i, depth + 1)
                out.append(value)
            c = s[i : i + 1]
            if c == close:
                return (out if out is not None else dict(pairs)), i + 1
            if c != ",":
                raise _NotPlain
            i += 1
    if c == '"' or c == "'":
        quoted = _QUOTED.match(s, i)
        if quoted is None:
            raise _NotPlain
        return quoted.group()[1:-1], quoted.end()
    prim = _PRIM.match(s, i)
    if prim is None:
        raise _NotPlain
    return _typed(prim.group()), prim.end()


def _read_plain(token: str) -> list[Override] | None:
    """What Hydra's parser reads from `token`, for the plain shapes described above; None for any other token."""
    key = _KEY.match(token)
    if key is None:
        return None
    start = key.end()
    try:
        value, end = _element(token, start, 0)
    except (_NotPlain, ValueError):  # (ValueError: an int too long to convert; Hydra's own error says so)
        return None
    if end != len(token):
        return None
    op = {"+": "add", "++": "force"}.get(key.group(1) or "", "set")
    name = key.group(2)
    value = _plain(value)
    if isinstance(value, dict):
        return [Override(canonical_key(f"{name}.{k}"), v, op, repr(v)) for k, v in value.items()]
    return [Override(canonical_key(name), value, op, token[start:])]


def parse_override(token: str) -> list[Override]:
    """One token -> one or more canonical overrides (a dict value `model={a:1}` expands to its keys)."""
    plain = _read_plain(token)
    if plain is not None:
        return plain
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
    # (a sweep, `a,b` or `range(1,3)`, is kept as written: its value is Hydra's sweep object, which no run gets)
    value = text if parsed.is_sweep_override() else _plain(parsed.value())
    if isinstance(value, dict) and op != "delete":
        return [Override(canonical_key(f"{key}.{k}"), v, op, repr(v)) for k, v in value.items()]
    return [Override(canonical_key(key), value, op, text)]


def is_sweep(text) -> bool:
    """Whether an override's value as written (`core_attn,mlp`, `range(1,3)`, `choice(a,b)`) is a Hydra sweep, a value
    per run of a --multirun: Megatron Bridge's parse_hydra_overrides applies overrides once and refuses one ("Error
    merging override ...": OmegaConf cannot hold the sweep object); a Hydra app run without --multirun stops at
    "Ambiguous value for argument"."""
    # (the plain shapes _read_plain reads, lists among them, are no sweep: asked without Hydra's parser, which
    # costs a process 0.15 s to make)
    return isinstance(text, str) and ("," in text or "(" in text) and _read_plain(f"k={text}") is None and \
        _sweep(text)


@lru_cache(maxsize=1024)
def _sweep(text: str) -> bool:
    from hydra.errors import HydraException

    try:
        return _parser().parse_overrides([f"k={text}"])[0].is_sweep_override()
    except HydraException:
        return False


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
