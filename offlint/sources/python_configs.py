"""Config objects in the Python reader: which classes build them, which section a field belongs to, what an
unset field reads as, and how a unit is told what was left at defaults or made unknown.

The objects themselves (`ConfigObj`) are python_values; these are the rules about them that the reader's
statements, expressions and calls share.
"""

from __future__ import annotations

import re

from offlint import keys
from offlint.keys import KEYS
from offlint.sources.python_values import OPTIONAL_SECTIONS, SECTION_NONE, ConfigObj
from offlint.types import AnyField, Unknown

MODEL_CLASSES = {"TransformerConfig", "MLATransformerConfig", "ModelParallelConfig"}
SECTION_CLASSES = {
    "OptimizerConfig": "optimizer",
    "DistributedDataParallelConfig": "ddp",
    "DistributedInitConfig": "dist",
    "TrainingConfig": "train",  # micro/global batch sizes, for the memory model and replay
    "TokenizerConfig": "tokenizer",  # Bridge sizes the model's vocabulary from the tokenizer (estimate.inputs)
    # Bridge's communication overlap (training/comm_overlap.py), applied onto the model, optimizer and DDP configs at
    # run time (CommOverlapConfig.setup); its defaults are read from the tree's own class (python_constructors).
    "CommOverlapConfig": "comm_overlap",
    # Bridge's dataset configs whose seq_length ConfigContainer.validate checks against the model's (estimate.inputs)
    **dict.fromkeys(("GPTDatasetConfig", "MockGPTDatasetConfig", "GPTFIMDatasetConfig", "GPTSFTDatasetConfig",
                     "FinetuningDatasetConfig", "DirectHFSFTDatasetConfig", "EnergonDatasetConfig",
                     "MockVLMSFTDatasetConfig", "WanDatasetConfig"), "dataset"),
}
CONTAINER_CLASSES = {"ConfigContainer"}
_PROVIDER = re.compile(r"^\w*(ModelProvider|ModelConfig|Provider)$")
# `x.model.k = v` makes x a Bridge container whatever its name; a write to x.tokenizer or x.dataset does only when
# x is named like a config (python_statements._implicit_receiver).
CORE_SECTIONS = ("model", "optimizer", "ddp", "train")
_PARTS_ONLY = ("tokenizer", "dataset", "dist", *OPTIONAL_SECTIONS)
# Sections whose class's defaults the reader takes from the linted tree's own dataclass (no megatron-core release
# describes them): the construction sets every field the call leaves out to the default the class gives it.
TREE_DEFAULT_SECTIONS = ("comm_overlap",)
SECTIONS_OF_CONTAINER = (*CORE_SECTIONS, *_PARTS_ONLY)


_SECTIONS_OF_FIELD: dict[str, frozenset[str]] = {}  # field -> the sections of KEYS that have it (built on first use)


def _sections_of(field: str) -> frozenset[str]:
    if not _SECTIONS_OF_FIELD:
        found: dict[str, set[str]] = {}
        for k in KEYS:
            if "." in k:
                section, rest = k.split(".", 1)
                found.setdefault(rest, set()).add(section)
        _SECTIONS_OF_FIELD.update((name, frozenset(sections)) for name, sections in found.items())
    return _SECTIONS_OF_FIELD.get(field, frozenset())


def _section_for(root: str, field: str) -> str | None:
    """Which section a bare receiver like `model_cfg.x` or `opt_config.x` writes to."""
    sections = _sections_of(field)  # (once per field, not a walk of every key per write)
    lowered = root.lower()
    if "opt" in lowered and "optimizer" in sections:
        return "optimizer"
    if "ddp" in lowered and "ddp" in sections:
        return "ddp"
    if ("model" in lowered or "provider" in lowered or "transformer" in lowered) and "model" in sections:
        return "model"
    if len(sections) == 1 and lowered not in ("self", "args"):
        section = next(iter(sections))
        return section if section in ("model", "optimizer", "ddp") else None
    return None


def _field(obj: ConfigObj, name: str, text: str):
    """A field read from a section object: its value when this code set it; when it did not and the section was
    built here, the dataclass default if every known megatron-core release agrees on it; else unknown."""
    if name in obj.values:
        return obj.values[name].value
    if obj.base == SECTION_NONE:
        return Unknown(f"`{text}` is read from a section that is None here")
    if obj.base == "default" and obj.section:
        default = keys.default_in_every_version(f"{obj.section}.{name}")
        if default is not keys.NO_COMMON_DEFAULT:
            return list(default) if isinstance(default, list) else default
        return Unknown(f"`{text}` is not set here and its default depends on the megatron-core version")
    return obj.base if isinstance(obj.base, Unknown) else Unknown(f"`{text}` is not set here")


def _branch_dependent(obj: ConfigObj, before: ConfigObj) -> bool:
    """Whether a call left a key of `obj` (or of its sections) unknown or depending on a branch, or tainted it."""
    if obj.base is not before.base and isinstance(obj.base, Unknown):
        return True
    if any(isinstance(a.value, Unknown) and before.values.get(k) is not a for k, a in obj.values.items()):
        return True
    return any(_branch_dependent(child, before.children.get(section) or before.blank(section))
               for section, child in obj.children.items())


def _restore(obj: ConfigObj, old: ConfigObj) -> None:
    """Put an object back as it was before a call, in place (names bound to it or its sections keep seeing it)."""
    obj.base, obj.values, obj.top = old.base, dict(old.values), dict(old.top)
    obj.env, obj.env_unknown, obj.env_location = old.env, old.env_unknown, old.env_location
    for section in list(obj.children):
        if section in old.children:
            _restore(obj.children[section], old.children[section])
        else:
            del obj.children[section]


def _framework(objects: list[ConfigObj]) -> str:
    """A unit that builds megatron-core's own config classes and no Bridge container or class is a megatron-core
    program: its configs are read by megatron-core's consumers one by one, not synced as Bridge does."""
    origins = {o.origin for o in objects} | {c.origin for o in objects for c in o.children.values()}
    if "megatron-core" in origins and "bridge" not in origins and all(o.kind == "section" for o in objects):
        return "megatron-core"
    return "bridge"


def _note_base(section: str, base, default_sections: set, unknown_sections: dict, overridden: set) -> None:
    if base in ("default", SECTION_NONE):  # a section held as None: its keys read as their defaults (None)
        default_sections.add(section)
        unknown_sections.pop(section, None)
        overridden.discard(section)
    elif section not in default_sections:
        unknown_sections[section] = base.reason if isinstance(base, Unknown) else str(base)
        if isinstance(base, AnyField):
            overridden.add(section)
        else:
            overridden.discard(section)


def _env_str(value):
    """Environment variables are strings; cfg.env_vars values are applied with str()."""
    if isinstance(value, Unknown):
        return value
    if isinstance(value, bool):
        return str(value)
    return str(value) if value is not None else "None"


def _taint(obj: ConfigObj, reason: Unknown) -> None:
    """A call offlint cannot follow received this object: its unset keys are no longer known defaults (nor only
    what a write by a name offlint cannot read may have set: AnyField)."""
    if obj.base in ("default", SECTION_NONE) or (isinstance(obj.base, AnyField) and not isinstance(reason, AnyField)):
        obj.base = reason
    for child in obj.children.values():
        _taint(child, reason)


def _dedupe(objects: list) -> list[ConfigObj]:
    seen: set[int] = set()
    out = []
    for obj in objects:
        if isinstance(obj, ConfigObj) and id(obj) not in seen:
            seen.add(id(obj))
            out.append(obj)
    # A section object attached to a container is represented by the container; a tokenizer or dataset config on
    # its own (Bridge's default_squad_config()) is not a training configuration.
    attached = {id(child) for obj in out if obj.kind == "container" for child in obj.children.values()}
    return [o for o in out if id(o) not in attached and not (o.kind == "section" and o.section in _PARTS_ONLY)]
