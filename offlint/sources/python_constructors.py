"""Config objects and records a call builds: a config class (`GPTModelProvider(num_layers=8)`, `OptimizerConfig(...)`)
with the keywords given and the defaults of the tree's own classes (a provider's dataclass bases, Bridge's
CommOverlapConfig, the provider's finalize program), a Hugging Face model's section (`AutoBridge.from_hf_pretrained(id)
.to_megatron_provider()`), and a record of another @dataclass of the tree, with its @property values.
"""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

from offlint.sources import bridge_finalize, bridge_models, bridge_schedule, bridge_vlm_step, python_mutations
from offlint.sources.bridge_provider_defaults import bridge_provider_defaults, is_megatron_core
from offlint.sources.hf_models import HF_SIZE_KEYS, HFModel, config_candidates, model_architecture, model_sizes
from offlint.sources.python_configs import MODEL_CLASSES, _PROVIDER, SECTION_CLASSES, TREE_DEFAULT_SECTIONS
from offlint.sources.python_syntax import _call_name
from offlint.sources.python_values import NO_PROPERTY, RAISED, ConfigObj, Frame, Record, new_assignment, _PYTHON
from offlint.types import Assignment, Unknown


class Constructors:
    """Config sections and records built by calls; part of PythonReader."""

    def _config_section(self, node: ast.Call, frame: Frame, name: str, short: str, section: str) -> ConfigObj:
        """A config class built (`GPTModelProvider(num_layers=8)`, `OptimizerConfig(...)`): its section, with the
        keywords given and, for the tree's classes, their defaults."""
        obj = ConfigObj("section", "default", section)
        obj.origin = self._class_origin(name)
        nested: list[ConfigObj] = []
        for arg in node.keywords:
            if arg.arg is None:  # **kwargs: any key may be set
                obj.base = Unknown(f"`**{self._segment(arg.value)}` in {short}(...)")
                continue
            value = self._eval(arg.value, frame)
            if section == "model" and isinstance(value, ConfigObj) and value.kind == "section" \
                    and value.section == "model":
                nested.append(value)
                continue
            obj.values[arg.arg] = self._assignment(
                f"{section}.{arg.arg}", value, self._loc(arg), self._segment(arg.value))
        for inner in nested:  # `GPTModelConfig(transformer=TransformerConfig(...))`: megatron's ModelConfig
            # reads and writes its nested TransformerConfig's fields flat (__getattr__/__setattr__), its own
            # fields first
            for key, assignment in inner.values.items():
                obj.values.setdefault(key, assignment)
            if isinstance(inner.base, Unknown) and not isinstance(obj.base, Unknown):
                obj.base = inner.base
        if section == "model" and short not in MODEL_CLASSES:  # the model class its provide() builds (OFL219)
            # the class's own module, not this one's text (a recipe's units do not depend on all of its file)
            module, attr = self.imports.get(name, (None, None))
            local = any(isinstance(n, ast.ClassDef) and n.name == name for n in self.module.body)
            target = self.project.path_of(module, self.path) if self.project and module and attr else \
                self.path if local else None
            built = bridge_schedule.provider_model(self.project, target, attr or name) if target else \
                Unknown(f"the source of the provider `{name}` is not in the tree")
            obj.values[bridge_schedule.KEY.split(".", 1)[1]] = self._assignment(
                bridge_schedule.KEY, built, self._loc(node), f"{self._segment(node.func)}(...)")
            if target:  # what its finalize() does when the run starts (resolve runs it after every override)
                self._finalize_program(obj, bridge_finalize.program(self.project, target, attr or name), node)
        if section in TREE_DEFAULT_SECTIONS:
            self._tree_defaults(obj, name, node)
        elif section == "model" and short not in MODEL_CLASSES and not node.args:
            self._provider_defaults(obj, name, node)
        return obj

    def _tree_defaults(self, obj: ConfigObj, name: str, node: ast.Call) -> None:
        """A section built from a class no megatron-core release describes (Bridge's CommOverlapConfig): the fields
        the call leaves out get the defaults of the class in the linted tree, each noted where the class gives it;
        a field without a default, or a class whose source is not in the tree, leaves them unknown."""
        if isinstance(obj.base, Unknown):  # `**kwargs` in the call: any field may be set
            return
        short = name.rsplit(".", 1)[-1]
        found = self._find_dataclass(name)
        if found is None or node.args:
            obj.base = Unknown(f"the defaults of `{short}` (its source is not in the linted tree)" if found is None
                               else f"`{short}(...)` with positional arguments")
            return
        reader, cls = found
        loc, text = self._loc(node), self._segment(node)
        for field_name, (default, line) in _dataclass_defaults(reader, cls).items():
            if field_name in obj.values:
                continue
            where = f"the default of {cls.name}.{field_name} at {reader.path}:{line}"
            if isinstance(default, Unknown):
                default = Unknown(f"`{text}` leaves {field_name} unset and {cls.name} gives it no default here")
            obj.values[field_name] = new_assignment(f"{obj.section}.{field_name}", default, loc, _PYTHON, text,
                                                    (*self.via_stack, where))

    def _finalize_program(self, obj: ConfigObj, program, node: ast.Call) -> None:
        """Keep the provider's finalize program on the model section (sources/bridge_finalize.py); nothing when the
        provider has none or offlint cannot read which class it is (finalize is then not modelled, as before)."""
        if isinstance(program, tuple) and program:
            obj.values[bridge_finalize.KEY.split(".", 1)[1]] = new_assignment(
                bridge_finalize.KEY, program, self._loc(node), _PYTHON, f"{self._segment(node.func)}(...)",
                tuple(self.via_stack))

    def _provider_defaults(self, obj: ConfigObj, name: str, node: ast.Call) -> None:
        """A model provider built from its class (`OlMoEModelProvider(tensor_model_parallel_size=1)`): the fields
        the call leaves out take the defaults the class and its @dataclass bases in the linted tree give them
        (Bridge's GPTModelProvider and the model's own provider; the nearest class's default wins, as in Python).
        A default offlint cannot evaluate, and the fields of bases outside the tree (megatron-core's
        TransformerConfig), keep what offlint assumed before: megatron-core's default, or unknown."""
        if isinstance(obj.base, Unknown):  # `**kwargs` in the call: any field may be set
            return
        found = self._find_dataclass(name)
        loc, text = self._loc(node), self._segment(node)
        seen: set = set()
        while found is not None and len(seen) < 8:
            reader, cls = found
            if (reader.path, cls.name) in seen or is_megatron_core(reader.path):
                break  # (megatron-core's own classes in the tree: the release's defaults, offlint's data)
            seen.add((reader.path, cls.name))
            for field_name, (default, line) in _dataclass_defaults(reader, cls).items():
                if field_name in obj.values or isinstance(default, Unknown) or not _plain_default(default):
                    continue
                where = f"the default of {cls.name}.{field_name} at {reader.path}:{line}"
                obj.values[field_name] = new_assignment(f"model.{field_name}", default, loc, _PYTHON, text,
                                                        (*self.via_stack, where))
            # single inheritance, as Bridge's providers: the first base that is a @dataclass of the tree
            bases = [b for b in (_call_name(base) for base in cls.bases) if b]
            found = next((f for f in (reader._find_dataclass(b) for b in bases) if f is not None), None)

    def _find_dataclass(self, name: str):
        """(reader, class) for a called @dataclass of the tree, defined here or imported."""
        if name in self.dataclasses:
            return self, self.dataclasses[name]
        if self.project is None or "." in name or name not in self.imports:
            return None
        module, attr = self.imports[name]
        # through re-exports; a function found there is not used (quiet: not noted)
        found = self._exported(module, attr, set(), quiet=True) if attr is not None else None
        return (found[0], found[2]) if found is not None and found[1] == "dataclass" else None

    def _record(self, found, node: ast.Call, frame: Frame) -> Record:
        reader, cls = found
        fields = {name: default for name, (default, _) in _dataclass_defaults(reader, cls).items()}
        names = list(fields)
        for index, arg in enumerate(node.args):
            if index < len(names) and not isinstance(arg, ast.Starred):
                fields[names[index]] = self._eval(arg, frame)
        # (a field given positionally is not the spread's)
        given = python_mutations.spread_over(self._call_keywords(node, frame), names[len(node.args):])
        fields.update(given)
        step = (f"from {cls.name}(...) at {self.path}:{node.lineno}",)
        made = {name: step for name in (*names[:len(node.args)], *given)}
        return Record(cls.name, fields, plain=not cls.bases and not cls.keywords, origin=reader.path, made=made)

    def _record_property(self, record: Record, attr: str, frame: Frame):
        """What the @property `attr` of a record's class computes from the record (Bridge's performance scripts read
        `settings.sequence_parallel`, WorkloadBaseConfig's `bool(self.tensor_model_parallel_size > 1)`), run as a
        method call; NO_PROPERTY when the class as offlint finds it defines no such property (its bases are not
        searched: a property there stays unknown)."""
        reader = self if record.origin in ("", self.path) or self.project is None else \
            self.project.reader(record.origin)
        cls = reader.dataclasses.get(record.name) if reader is not None and record.origin else None
        fn = next((stmt for stmt in cls.body if isinstance(stmt, ast.FunctionDef) and stmt.name == attr
                   and any(isinstance(d, ast.Name) and d.id == "property" for d in stmt.decorator_list)),
                  None) if cls is not None else None
        if fn is None:
            return NO_PROPERTY
        if not self._may_follow(frame):
            return Unknown(f"`{record.name}.{attr}` is computed in calls nested too deep to follow")
        result = reader.run_function(fn, [record], {}, frame.depth + 1)
        return Unknown(f"{record.name}.{attr} raises") if result is RAISED else result

    def _hf_model_section(self, model: HFModel, node: ast.Call) -> ConfigObj:
        """The model section Bridge builds from a Hugging Face config: its sizes when offlint can know them."""
        text = self._segment(node)
        here = Path(self.path).parent  # (where a local config.json is looked for: made once)
        found = model_sizes(model.model_id, here, text_only=model.text_only)
        if self.project is not None:
            self.project.touched.update(str(path) for path in config_candidates(model.model_id, here))
        # Fields the Hugging Face config does not map (offloading, recompute, parallelism) keep the provider's
        # dataclass defaults, as in Bridge; the sizes it maps are known only from a config.json or the table.
        obj = ConfigObj("section", "default", "model")
        architecture = model.architecture or model_architecture(model.model_id, here)
        if node.func.attr in ("to_megatron_provider", "get_model_config"):  # the model class it builds (OFL219)
            built = bridge_schedule.bridge_provider_model if node.func.attr == "to_megatron_provider" else \
                bridge_schedule.bridge_config_model
            obj.values[bridge_schedule.KEY.split(".", 1)[1]] = Assignment(
                bridge_schedule.KEY, built(self.project, architecture, self.path) if architecture else
                Unknown(f"the architecture of {model.model_id}"), self._loc(node), _PYTHON, text, tuple(self.via_stack))
            if architecture and node.func.attr == "to_megatron_provider":
                self._finalize_program(obj, bridge_finalize.bridge_program(self.project, architecture, self.path),
                                       node)
        if found is None:
            reason = Unknown(f"{model.model_id} is not in offlint's table of public models and no local "
                             f"config.json was found")
            for key in HF_SIZE_KEYS:
                obj.values[key.split(".", 1)[1]] = new_assignment(key, reason, self._loc(node), _PYTHON, text,
                                                                  tuple(self.via_stack))
            self._bridge_provider_defaults(obj, architecture, node)
            return obj
        sizes, origin = found
        loc = self._loc(node)
        for key, value in sizes.items():
            section, _, field_name = key.partition(".")
            if section == "model" and field_name:
                obj.values[field_name] = new_assignment(key, value, loc, _PYTHON, text, (*self.via_stack, origin))
        # Over the sizes, what the tree's own bridge for the model's architecture sets with literal values (Bridge
        # sets them after mapping the config); nothing where the tree has no such bridge.
        settings = bridge_models.settings(self.project, architecture, node.func.attr, self.path) if architecture \
            else {}
        for field_name, setting in settings.items():
            obj.values[field_name] = new_assignment(f"model.{field_name}", setting.value, loc, _PYTHON, text,
                                                    (*self.via_stack, setting.where))
        if "model.vision_config" in sizes:  # a Qwen3-VL or Qwen3.5 VLM: how the tree's step pads (OFL303's tokens)
            obj.values[bridge_vlm_step.KEY.split(".", 1)[1]] = Assignment(
                bridge_vlm_step.KEY, bridge_vlm_step.padding_condition(self.project, self.path), loc, _PYTHON, text,
                tuple(self.via_stack))
        self._bridge_provider_defaults(obj, architecture, node)
        return obj

    def _bridge_provider_defaults(self, obj: ConfigObj, architecture: str | None, node: ast.Call) -> None:
        """Under what the config and the bridge set, the literal defaults of the provider class the bridge builds
        (`.to_megatron_provider()`: sources/bridge_provider_defaults.py)."""
        if node.func.attr != "to_megatron_provider" or not architecture:
            return
        loc, text = self._loc(node), self._segment(node)
        for field_name, (value, where) in bridge_provider_defaults(self.project, architecture, self.path).items():
            if field_name not in obj.values:
                obj.values[field_name] = new_assignment(f"model.{field_name}", value, loc, _PYTHON, text,
                                                        (*self.via_stack, where))


# Megatron Bridge's base classes of dataset configs named like providers (data/base.py: DatasetProvider(
# DataloaderConfig)): MockVLMConversationProvider and WanMockDataModuleConfig build the dataset section, not the
# model's.
_DATASET_BASES = frozenset({"DatasetProvider", "DataloaderConfig"})


def _config_kind(found) -> str:
    """What a @dataclass of the tree ((reader, ClassDef)) configures, by the nearest of its bases (in the tree, or by
    name) that says: "dataset" (DatasetProvider, DataloaderConfig: checked first, since their names read like a
    provider's), "provider" (a `...ModelProvider`: WanModelProvider14B(WanModelProvider), the kind of class a recipe
    builds its model from), "model-config" (TransformerConfig alone: the config model code builds inside, such as
    Qwen3VLTransformerConfig for the vision tower), or "" when none does."""
    for _ in range(8):
        reader, cls = found
        names = [n.rsplit(".", 1)[-1] for n in (_call_name(base) for base in cls.bases) if n]
        if any(n in _DATASET_BASES for n in names):
            return "dataset"
        if any(_PROVIDER.match(n) for n in names):
            return "provider"
        if any(n in MODEL_CLASSES for n in names):
            return "model-config"
        found = next((f for f in (reader._find_dataclass(n) for n in names) if f is not None), None)
        if found is None:
            return ""
    return ""


def _own_class(found) -> bool:
    """Whether a @dataclass of the tree ((reader, ClassDef)) has no base but the ones the tree defines (and `object`),
    each of them so: none of them can be a config class of Megatron Bridge or megatron-core."""
    seen = 0
    pending = [found]
    while pending and seen < 16:
        reader, cls = pending.pop()
        seen += 1
        for base in cls.bases:
            name = _call_name(base.value if isinstance(base, ast.Subscript) else base)  # (`Mixin[Model]`: Mixin)
            if name == "object":
                continue
            inner = reader._find_dataclass(name) if name else None
            if inner is None:
                return False  # a base from elsewhere (or not a dataclass of the tree) may be Megatron's
            pending.append(inner)
    return not pending


@lru_cache(maxsize=None)  # a function of the name alone; asked for every call the reader evaluates
def _section_of_class(short: str) -> str | None:
    """The section a call of the class named `short` builds, or None (not a config class)."""
    return "model" if (short in MODEL_CLASSES or (short and _PROVIDER.match(short))) else SECTION_CLASSES.get(short)


def _plain_default(value) -> bool:
    """A default offlint can hold as a setting: a number, string, bool, None, or a list/tuple of them."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    return isinstance(value, (list, tuple)) and all(_plain_default(v) for v in value)


def _dataclass_defaults(reader, cls: ast.ClassDef) -> dict:
    """A @dataclass's fields in order: name -> (its default as the class body gives it, or Unknown; the line)."""
    fields: dict = {}
    for stmt in cls.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            name, default = stmt.target.id, stmt.value
            if default is None:
                value = Unknown(f"{cls.name}.{name} has no default")
            elif isinstance(default, ast.Call) and _call_name(default.func).endswith("field"):
                factory = next((k.value for k in default.keywords if k.arg == "default_factory"), None)
                literal = next((k.value for k in default.keywords if k.arg == "default"), None)
                if isinstance(factory, ast.Lambda) and not factory.args.args:  # `lambda: [...]`
                    value = reader._eval_default(factory.body)
                else:
                    value = ({} if _call_name(factory) == "dict" else [] if _call_name(factory) == "list" else
                             Unknown(f"{cls.name}.{name} default")) if factory is not None else \
                        reader._eval_default(literal) if literal is not None else Unknown(f"{cls.name}.{name}")
            else:
                value = reader._eval_default(default)
            fields[name] = (value, stmt.lineno)
    return fields
