"""`offlint estimate`'s overrides, checked before they are applied: an unknown key is an error naming the closest
known key (Hydra refuses it at launch too), and a value must have the key's type (`optimizer_offload_fraction=abc`
or `optimizer_cpu_offload=maybe` would otherwise be read as "set to something" and silently change nothing).
"""

from __future__ import annotations

import difflib
from collections.abc import Collection

from offlint import keys
from offlint.sources import hydra
from offlint.versions import Version

# Keys the estimate reads outside the sections megatron-core's field lists describe, with their types.
_EXTRA_TYPES = {"train.micro_batch_size": "int", "train.global_batch_size": "int", "dataset.seq_length": "int",
                "dataset.sequence_length": "int", "tokenizer.vocab_size": "int", "model.seq_length": "int",
                "model.vocab_size": "int"}
_TOP_LEVEL = ("mixed_precision", "peft")


class OverrideInputError(ValueError):
    """A one-line reason why an override cannot be used."""


def check(tokens: list[str], version: Version, written: Collection[str] | None = None) -> None:
    """Raise OverrideInputError for the first override with an unknown key or a value of the wrong type. `written`:
    the keys the configuration itself writes (its recipe, with the provider class's defaults, files and command
    line; the overrides aside), which are known whatever megatron-core's config says (a Bridge provider's own field,
    such as Qwen3-VL's `vision_cuda_graph_impl`); None before the configuration is read: the form of each override
    and the section of its key are checked, a field megatron-core does not know is left for the second call."""
    for token in tokens:
        if not hydra.looks_like_override(token):
            raise OverrideInputError(f"{token!r} is not an override: expected KEY=VALUE with a dotted key, for "
                                     f"example optimizer.optimizer_offload_fraction=0.5")
        try:
            parsed = hydra.parse_override(token)
        except hydra.OverrideError as exc:
            raise OverrideInputError(str(exc)) from None
        for override in parsed:
            _check_key(override.key, token, written)
            if override.op != "delete":
                _check_value(override.key, override.value, token, version)


def _check_key(key: str, token: str, written: Collection[str] | None) -> None:
    section, _, name = key.partition(".")
    if key in _TOP_LEVEL or key in _EXTRA_TYPES or section in keys.OTHER_BRIDGE_SECTIONS or section == "env":
        return
    if section not in ("model", "optimizer", "ddp") or not name or "." in name:
        sections = ", ".join(("model", "optimizer", "ddp", "env", *keys.OTHER_BRIDGE_SECTIONS[:4]))
        raise OverrideInputError(f"override `{token}`: unknown key `{key}` (a key is SECTION.FIELD with a section "
                                 f"such as {sections}, ...)")
    known = keys.known_fields(section)
    if name in known or written is None or key in written:
        return
    close = difflib.get_close_matches(name, sorted(known | {k.partition(".")[2] for k in written
                                                            if k.startswith(section + ".")}), n=1, cutoff=0.75)
    hint = f"; did you mean `{section}.{close[0]}`?" if close else ""
    raise OverrideInputError(f"override `{token}`: `{key}` is not a field of the `{section}` config in any "
                             f"megatron-core version offlint knows, nor a key the configuration sets{hint}")


def _check_value(key: str, value: object, token: str, version: Version) -> None:
    kind = _EXTRA_TYPES.get(key) or keys.key_type(key, version)
    if value is None or not kind or (isinstance(value, str) and "${" in value):
        return  # null, an untyped key, or an interpolation resolved at launch (the estimate reports it unknown)
    ok = {
        "bool": isinstance(value, bool),
        "int": isinstance(value, int) and not isinstance(value, bool),
        "float": isinstance(value, (int, float)) and not isinstance(value, bool),
        "str": isinstance(value, str),
        "dtype": isinstance(value, str),
        "list": isinstance(value, (list, tuple)),
        "str|list": isinstance(value, (str, list, tuple)),
    }.get(kind, True)
    if not ok:
        expected = {"bool": "true or false", "int": "an integer", "float": "a number", "list": "a list such as [a,b]",
                    "str": "a string", "dtype": "a dtype name", "str|list": "a string or a list"}[kind]
        raise OverrideInputError(f"override `{token}`: `{key}` takes {expected}, not {value!r}")
