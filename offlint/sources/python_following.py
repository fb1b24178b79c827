"""Calls in the Python reader: what a call builds (config classes, `ConfigContainer`, dataclass records, a
Hugging Face model's section), Bridge's mutators (the tree's own source, else bridge_mutators), environment
updates, and calls followed into functions of this file or another (arguments bound, the function run there,
results of calls with plain arguments cached per project). A call it cannot follow taints what it is given.
"""

from __future__ import annotations

import ast
import dataclasses
from functools import lru_cache
from pathlib import Path

from offlint.sources import (bridge_checks, bridge_finalize, bridge_mutators, bridge_models, bridge_schedule,
                             bridge_vlm_step, python_calls, python_inputs, python_mutations)
from offlint.sources.bridge_provider_defaults import bridge_provider_defaults, is_megatron_core
from offlint.sources.hf_models import (HF_SIZE_KEYS, PROVIDER_METHODS, HFModel, config_candidates, model_architecture,
                                      model_sizes)
from offlint.sources.python_configs import (CONTAINER_CLASSES, MODEL_CLASSES, _PROVIDER, SECTION_CLASSES,
                                            SECTIONS_OF_CONTAINER, TREE_DEFAULT_SECTIONS, _branch_dependent,
                                            _restore, _taint)
from offlint.sources.python_branches import same
from offlint.sources.python_records import MARK, arguments, call_args
from offlint.sources.python_statements import _UNDECIDED
from offlint.sources.python_syntax import _attr_chain, _call_name
from offlint.sources.python_values import (MAX_DEPTH, NO_PROPERTY, NOT_KEPT, OPTIONAL_SECTIONS, RAISED, RETURNED_NONE, SECTION_NONE,
                                           ConfigObj, Frame, FunctionRef, ModuleRef, ObjectTuple, PartialDict, Record,
                                           Registry, configs_in, new_assignment, record_steps, with_via)
from offlint.types import AnyField, Assignment, Location, OneOf, Source, Unit, Unknown

_PYTHON, _ENV = Source.PYTHON, Source.ENV  # (an enum member read from its class costs a descriptor call each time)


class CallFollowing:
    """What a call builds or changes, and following calls into functions; part of PythonReader."""

    def _note_registries(self) -> None:
        """Module dicts a registering decorator of the module fills as the module is imported (Bridge's
        `@register` on each precision recipe, read by `MIXED_PRECISION_RECIPES[name]()`): each decorated
        function becomes the entry under its own name, so a lookup by a known name follows it. Nothing runs."""
        written: dict[tuple[str, str], bool] = {}  # (registry, decorator) -> _written_elsewhere, one walk each
        for fn in list(dict.values(self.functions)):  # looking at decorators is no use of a function's body
            for decorator in fn.decorator_list:
                if not isinstance(decorator, ast.Name) or decorator.id not in self.functions:
                    continue
                target = _registry_of(self.functions[decorator.id])
                if target and (target, decorator.id) not in written:
                    written[target, decorator.id] = _written_elsewhere(self.module, target, decorator.id)
                if target and written[target, decorator.id]:
                    # other entries than the decorated functions, or some replaced: in an order offlint does not
                    # follow (a module-level write before or after the decorators), so no entry is known
                    if target in self.constants:
                        self.constants[target] = Unknown(f"`{target}` is filled by `@{decorator.id}` and also "
                                                         f"written elsewhere in its module")
                    continue
                registry = self.constants.get(target) if target else None
                if not isinstance(registry, dict) or isinstance(registry, PartialDict) and \
                        not isinstance(registry, Registry):
                    continue
                if not isinstance(registry, Registry):
                    registry = self.constants[target] = Registry(
                        registry, f"`{target}` is filled by `@{decorator.id}`, also under keys offlint does not derive")
                registry[fn.name] = FunctionRef(self, self.functions[fn.name])  # noted as used (the cache)

    def _eval_call(self, node: ast.Call, frame: Frame):
        held = self._call_names.get(id(node))
        if held is None or held[0] is not node:  # the called name as written and what it may be, once per call
            held = self._call_names[id(node)] = (node, *_call_kinds(node))
        _, name, short, early, maybe_pure, special = held
        # (the call as written, for messages: `self._segment(node.func) + "(...)"`, made where one needs it)
        if short in python_mutations.METHODS and type(node.func) is ast.Attribute and type(node.func.value) is ast.Name:
            held = frame.names.get(node.func.value.id)
            if isinstance(held, dict) and short in python_mutations.WRITES:
                return self._dict_write(node, frame)
            if isinstance(held, list) and short in python_mutations.LIST_WRITES:
                return self._list_write(node, frame)
        if early:
            if short == "cast" and len(node.args) == 2:  # typing.cast(Type, value) is the value
                return self._eval(node.args[1], frame)
            variable = python_inputs.environment_variable(node)
            if variable is not None:  # `os.environ.get("NAME", "0")`: the launch's, whichever runs the recipe
                return python_inputs.environment(variable, self._segment(node))
            if python_inputs.is_parse_call(node):  # `args = parser.parse_args()`: what the user gives
                parsed = python_inputs.namespace(f"`{self._segment(node)}`", self._declared_options())
                return ObjectTuple((parsed, Unknown("arguments the parser does not know"))) \
                    if short == "parse_known_args" else parsed
        if maybe_pure:
            pure = self._pure_call(node, frame)
            if pure is not python_calls.NOT_PURE:
                return pure
        if special:
            done = self._special_call(node, frame, name, short)
            if done is not _NOT_SPECIAL:
                return done
        called = frame.names.get(node.func.id) if isinstance(node.func, ast.Name) else \
            self._eval(node.func, frame) if isinstance(node.func, ast.Subscript) else None  # `REGISTRY[name]()`
        if isinstance(called, FunctionRef) and self._may_follow(frame):  # `builder = getattr(module, name); builder()`
            return self._call(called.reader, called.fn, node, frame)
        if short in python_calls.MCORE_CONSUMERS and name and self._imports_mcore_consumer(name):
            # megatron-core reads the config; it does not change it
            return Unknown(f"the result of `{self._segment(node.func)}(...)`")
        dataclass, target = self._called_definition(name) if name else (None, None)
        if dataclass is not None:
            kind = _config_kind(dataclass)  # a provider or dataset class named otherwise: its bases say
            if kind in ("provider", "dataset"):
                return self._config_section(node, frame, name, short, "model" if kind == "provider" else "dataset")
            return self._record(dataclass, node, frame)
        if target is not None and self._may_follow(frame):
            return self._call(target[0], target[1], node, frame, quiet=True)
        if target is not None and self.project is not None:  # looked up, not followed: noted as the lookup would
            self.project.touched.add((target[0].path, target[1].name))
        if name == "setattr" and len(node.args) == 3 and not node.keywords and self._set_attribute(node, frame):
            return None
        # A call offlint does not follow: the config objects it can reach (`f(cfg)`: the whole container,
        # `f(cfg.model)`: the model section) may be changed by it; the reason names the call and where it is.
        text = self._segment(node.func) + "(...)"
        why = None  # (made for the first config object found: most calls are given none)
        for arg in [*node.args, *(k.value for k in node.keywords)]:
            arg = arg.value if isinstance(arg, ast.Starred) else arg
            value = self._eval(arg, frame) if isinstance(arg, (ast.Name, ast.Attribute)) else None
            if isinstance(value, ConfigObj):
                if why is None:
                    why = Unknown(f"may be changed by `{text}` at {self.path}:{node.lineno}")
                _taint(value, why)
        return Unknown(f"the result of `{text}`")

    def _set_attribute(self, node: ast.Call, frame: Frame) -> bool:
        """`setattr(cfg.model, name, value)` on a config section: the field a literal name names is set as
        `cfg.model.<name> = value` would set it; a name offlint cannot read (a loop over an override dict, as
        Bridge's apply_overrides walks a YAML file) may set any field, so every field the section holds becomes
        unknown, not only its defaults (an unknown call's taint). False when the target is not a config object
        offlint holds (then it is an unknown call as any other)."""
        target = self._eval(node.args[0], frame) if isinstance(node.args[0], (ast.Name, ast.Attribute)) else None
        if not isinstance(target, ConfigObj):
            return False
        field_name, loc, text = self._eval(node.args[1], frame), self._loc(node), self._segment(node)
        if isinstance(field_name, str) and field_name.isidentifier() and target.kind == "section":
            target.values[field_name] = self._assignment(f"{target.section}.{field_name}",
                                                         self._eval(node.args[2], frame), loc, text)
            return True
        why = AnyField(f"may be set by `{text}` at {self.path}:{node.lineno}, a field name offlint cannot read")
        _taint(target, why)
        for obj in [target, *target.children.values()]:
            for key, held in list(obj.values.items()):
                obj.values[key] = self._assignment(held.key, _any_field(why, held), loc, text)
        return True

    def _special_call(self, node: ast.Call, frame: Frame, name: str, short: str):
        """What a call of one of the names this reader knows (_call_kinds: a Hugging Face model or config, a
        provider method, a config class, a Bridge mutator, `update`, `replace`, a training entry point,
        `import_module`) gives; _NOT_SPECIAL when it is none of them here after all."""
        if short == "from_hf_pretrained" and node.args:
            model_id = self._eval(node.args[0], frame)
            return HFModel(model_id) if isinstance(model_id, str) else Unknown(
                f"`{self._segment(node.func)}(...)` of an unknown model")
        if name and name.endswith("AutoConfig.from_pretrained") and node.args:  # a Hugging Face config object
            model_id = self._eval(node.args[0], frame)
            return HFModel(model_id, config=True) if isinstance(model_id, str) else Unknown(
                f"`{self._segment(node.func)}(...)` of an unknown model")
        if short == "from_hf_config" and node.args:  # `AutoBridge.from_hf_config(AutoConfig.from_pretrained(id)...)`
            held = self._eval(node.args[0], frame)
            return dataclasses.replace(held, config=False) if isinstance(held, HFModel) and held.config else \
                Unknown(f"`{self._segment(node.func)}(...)` of a config offlint does not know")
        if isinstance(node.func, ast.Attribute) and node.func.attr in PROVIDER_METHODS:
            owner = self._eval(node.func.value, frame)
            if isinstance(owner, HFModel) and not owner.config:
                return self._hf_model_section(owner, node)
        if short in CONTAINER_CLASSES:
            obj = ConfigObj("container", "default")
            obj.origin = "bridge"
            # (what the tree's Bridge checks and defaults: OFL223's local graph check, OFL217's evaluation batch check,
            # the expert tensor parallel default OFL216 and OFL217 count GPUs with)
            for key, found in ((bridge_checks.LOCAL_GRAPH_CHECK, bridge_checks.local_graph_check),
                               (bridge_checks.EVAL_BATCH_CHECK, bridge_checks.eval_batch_check),
                               (bridge_checks.EXPERT_TP_DEFAULT, bridge_checks.expert_tp_default)):
                check = found(self.project, self.path)
                if check is not None:
                    obj.top[key] = self._assignment(key, check, self._loc(node), f"{self._segment(node.func)}(...)")
            for arg in node.keywords:
                if arg.arg is None:
                    continue
                key = arg.arg
                value = self._eval(arg.value, frame)
                if key in SECTIONS_OF_CONTAINER:
                    if isinstance(value, ConfigObj) and value.kind == "section":
                        value.section = key
                        obj.children[key] = value
                    elif value is None:  # an optional section (comm_overlap) is then None, as by default
                        obj.children[key] = ConfigObj("section", SECTION_NONE if key in OPTIONAL_SECTIONS else
                                                      Unknown(f"`{key}=None` in {short}(...)"), key)
                    else:
                        reason = value.reason if isinstance(value, Unknown) else f"set from {short}(...)"
                        obj.children[key] = ConfigObj("section", Unknown(reason), key)
                elif key == "env_vars":
                    obj.env = self._env_dict(arg.value, value, self._loc(arg))
                elif key == "mixed_precision":
                    obj.top[key] = self._assignment(key, value, self._loc(arg), self._segment(arg.value))
                elif key == "peft":
                    text = self._segment(arg.value)
                    held = value if value is None or isinstance(value, Record) else text  # as `cfg.peft = ...`
                    obj.top[key] = self._assignment(key, held, self._loc(arg), text)
            return obj
        section = _section_of_class(short)
        if section == "model" and short not in MODEL_CLASSES:  # a `...Provider` may be a dataset's: its bases say
            found = self._find_dataclass(name) if name else None
            kind = _config_kind(found) if found is not None else None
            # (a class of the tree's own that no config class is a base of is no Megatron config, whatever its
            # name: Model-Optimizer's diffusers `ModelConfig(cpu_offloading=...)` is a record)
            section = "dataset" if kind == "dataset" else None if kind == "" and _own_class(found) else section
        if section:
            return self._config_section(node, frame, name, short, section)
        if short in bridge_mutators.MUTATORS:
            # The tree's own helper when its source is there and decides every key it writes; the documented
            # model (bridge_mutators) where it is not, or where it branches on the megatron-core version.
            target = self._find_function(name) if name else None
            if target is not None and self._may_follow(frame):
                done = self._tree_mutator(target, node, frame)
                if done is not _UNDECIDED:
                    return done
            return self._apply_mutator(short, node, frame)
        if isinstance(node.func, ast.Attribute) and node.func.attr == "update":
            updated = self._env_update(node, frame)
            if updated is not _UNDECIDED:
                return updated
        if short == "replace" and node.args:
            base = self._eval(node.args[0], frame)
            if isinstance(base, Record):
                return base.replaced(python_mutations.spread_over(self._call_keywords(node, frame), base.fields),
                                     f"from replace(...) at {self.path}:{node.lineno}")
        if name and self._imports_training_entry_point(name):
            # the configuration ends here; it is not changed
            return Unknown(f"`{self._segment(node.func)}(...)` runs training")
        if short == "import_module" and name and self._imported_from(name, "importlib") and node.args:
            target = self._eval(node.args[0], frame)  # importlib.import_module(f"configs.{family}")
            return ModuleRef(target) if isinstance(target, str) and not target.startswith(".") else Unknown(
                f"`{self._segment(node)}`: a module offlint cannot name")
        return _NOT_SPECIAL

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

    def _call_keywords(self, node: ast.Call, frame: Frame) -> dict:
        """Keyword arguments, `**spread` of literal dicts included. A spread offlint cannot read in full (not a dict
        it knows, or one with an unread part) is kept under python_mutations.SPREAD: any parameter the call does not
        name may be set by it (skipped, the callee's defaults were taken as known)."""
        out: dict = {}
        for keyword in node.keywords:
            if keyword.arg is not None:
                out[keyword.arg] = self._eval(keyword.value, frame)
                continue
            spread = self._eval(keyword.value, frame)
            if isinstance(spread, dict):
                out.update({k: python_mutations.value_of(v) for k, v in spread.items() if isinstance(k, str)})
            if not isinstance(spread, dict) or isinstance(spread, PartialDict):
                reason = spread.reason if isinstance(spread, (Unknown, PartialDict)) and spread.reason else \
                    "not a dict offlint can read"
                out.setdefault(python_mutations.SPREAD, Unknown(f"`**{self._segment(keyword.value)}`: {reason}"))
        return out

    def _dict_write(self, node: ast.Call, frame: Frame):
        """`kw.update(...)`, `kw.setdefault(k, v)`, `kw.pop(k[, default])`, `kw.clear()` on the dict the local name
        `kw` holds (python_mutations): its result, the name given the changed copy (or unknown)."""
        name, method, text = node.func.value.id, node.func.attr, self._segment(node)
        held = frame.names[name]
        args = [self._eval(a, frame) for a in node.args]
        unread = any(isinstance(a, ast.Starred) for a in node.args)
        if method == "clear" and not args and not node.keywords:
            frame.names[name] = python_mutations.changed(held, cleared=True)
            return None
        if method == "update" and len(args) <= 1 and not unread:
            entries = {}
            if args:
                if not isinstance(args[0], dict) or isinstance(args[0], PartialDict):
                    frame.names[name] = python_mutations.unknown_write(name, text)
                    return None
                entries.update(args[0])
            for keyword in node.keywords:
                if keyword.arg is None:  # `kw.update(**other)`
                    frame.names[name] = python_mutations.unknown_write(name, text)
                    return None
                entries[keyword.arg] = (self._eval(keyword.value, frame), self._loc(keyword),
                                        self._segment(keyword.value))
            frame.names[name] = python_mutations.changed(held, entries)
            return None
        key = args[0] if args else None
        if method in ("setdefault", "pop") and 1 <= len(args) <= 2 and not unread and not node.keywords \
                and python_mutations.literal_key(key):
            if key in held:
                found = python_mutations.value_of(held[key])
                if method == "pop":
                    frame.names[name] = python_mutations.changed(held, removed=(key,))
                return found
            if isinstance(held, PartialDict):  # the key may be in its unread part
                if method == "setdefault":
                    frame.names[name] = python_mutations.unknown_write(name, text)
                return Unknown(f"`{text}`: {held.reason}")
            value = args[1] if len(args) == 2 else None
            if method == "setdefault":
                frame.names[name] = python_mutations.changed(
                    held, {key: (value, self._loc(node), self._segment(node.args[1]) if len(args) == 2 else "None")})
                return value
            return value if len(args) == 2 else Unknown(f"`{text}` raises KeyError")
        frame.names[name] = python_mutations.unknown_write(name, text)
        return Unknown(f"the result of `{text}`")

    def _list_write(self, node: ast.Call, frame: Frame):
        """`xs.append(v)`, `xs.extend(...)`, `xs.clear()`, or another write, on the list the local name `xs` holds
        (python_mutations): its result, the name given the changed copy (or unknown)."""
        name, method = node.func.value.id, node.func.attr
        args = [self._eval(a, frame) for a in node.args if not isinstance(a, ast.Starred)]
        changed = python_mutations.list_write(frame.names[name], method, args,
                                              bool(node.keywords) or len(args) != len(node.args))
        frame.names[name] = changed if changed is not None else \
            python_mutations.unknown_write(name, self._segment(node))
        return None if method != "pop" else Unknown(f"the result of `{self._segment(node)}`")

    def _called_definition(self, name: str) -> tuple:
        """(`_find_dataclass(name)`, and when that is None `_find_function(name, quiet=True)`): a name imported from
        another module is looked up there once for both (the same `_exported` look-up, noting the same uses)."""
        if name in self.dataclasses or self.project is None or "." in name or name not in self.imports:
            dataclass = self._find_dataclass(name)
            return dataclass, None if dataclass is not None else self._find_function(name, quiet=True)
        module, attr = self.imports[name]
        if attr is None:
            return None, self._find_function(name, quiet=True)
        found = self._exported(module, attr, set(), quiet=True)  # what both look-ups find there
        if found is not None and found[1] == "dataclass":
            return (found[0], found[2]), None
        if name in self.functions:  # defined here too: _find_function takes this module's own
            return None, self._find_function(name, quiet=True)
        return None, (found[0], found[2]) if found is not None and found[1] == "function" else None

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

    def _tree_mutator(self, target, node: ast.Call, frame: Frame):
        """Run a mutator's source from the tree on the config objects passed to it. If that leaves a key
        depending on a branch offlint cannot decide there (Bridge's cuda-graph helpers branch on whether the
        installed megatron-core has `CudaGraphModule`), undo it and return _UNDECIDED: the version-aware model
        decides instead."""
        receivers = [v for v in (self._eval(a, frame) for a in [*node.args, *(k.value for k in node.keywords)]
                                 if isinstance(a, (ast.Name, ast.Attribute))) if isinstance(v, ConfigObj)]
        before = [(obj, obj.copy()) for obj in receivers]
        result = self._call(target[0], target[1], node, frame)
        if any(_branch_dependent(obj, old) for obj, old in before):
            for obj, old in before:
                _restore(obj, old)
            return _UNDECIDED
        return result

    def _env_update(self, node: ast.Call, frame: Frame):
        """`cfg.env_vars.update({...})`: the entries join the recipe's environment (a literal dict only)."""
        chain = _attr_chain(node.func.value)
        if not chain or chain[-1] != "env_vars" or len(node.args) != 1 or node.keywords:
            return _UNDECIDED
        owner = frame.names.get(chain[0]) if len(chain) == 2 else None
        if not isinstance(owner, ConfigObj) or owner.kind != "container":
            return _UNDECIDED
        value = self._eval(node.args[0], frame)
        if not isinstance(value, dict) or isinstance(value, PartialDict):
            owner.env_unknown = owner.env_unknown or f"cfg.env_vars updated from `{self._segment(node.args[0])}`"
            return None
        if owner.env is None:
            owner.env = {}
            if owner.base != "default":  # the entries before the update are the unknown base's
                owner.env_unknown = owner.env_unknown or f"cfg.env_vars is only updated here ({self._segment(node)})"
        owner.env.update(self._env_dict(node.args[0], value, self._loc(node)))
        return None

    def _apply_mutator(self, name: str, node: ast.Call, frame: Frame):
        """A Bridge library mutator: its documented effects on the config object passed first (returns None)."""
        first = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg in ("config", "cfg")),
                                                    None)
        receiver = self._eval(first, frame) if first is not None else None
        if not isinstance(receiver, ConfigObj):
            return None
        modules = None
        if name == "set_cuda_graph_modules":
            given = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords
                                                                 if k.arg == "modules"), None)
            modules = bridge_mutators.member_names(self._module_names(given, frame)) if given is not None else \
                Unknown("set_cuda_graph_modules() without modules")
        loc, text = self._loc(node), self._segment(node)
        via = (*self.via_stack, f"by {name}() at {self.path}:{node.lineno}")
        for key, value in bridge_mutators.effects(name, modules):
            section, field_name = key.split(".", 1)
            if section == "env":
                if receiver.kind != "container":
                    continue
                if receiver.env is None:
                    # Only these variables are known: the rest of the launch environment is the shell's.
                    receiver.env = {}
                    receiver.env_unknown = receiver.env_unknown or f"cfg.env_vars is only updated by {name}()"
                receiver.env[field_name] = new_assignment(key, value, loc, _ENV, text, via)
                continue
            target = receiver.child(section) if receiver.kind == "container" else receiver
            if target.kind == "section" and target.section in ("", section):
                target.values[field_name] = new_assignment(key, value, loc, _PYTHON, text, via)
        return None

    def _module_names(self, node, frame: Frame):
        """CUDA graph modules as written: `[CudaGraphModule.attn, "mlp"]` -> ["attn", "mlp"]."""
        if isinstance(node, (ast.List, ast.Tuple)):
            names = []
            for element in node.elts:
                if isinstance(element, ast.Attribute):
                    names.append(element.attr)
                else:
                    value = self._eval(element, frame)
                    if not isinstance(value, str):
                        return Unknown(f"`{self._segment(element)}` is not a module name")
                    names.append(value)
            return names
        if isinstance(node, ast.Attribute) and _attr_chain(node) and _attr_chain(node)[0] in ("CudaGraphModule",
                                                                                             "CudaGraphScope"):
            return [node.attr]
        return self._eval(node, frame)

    def _may_follow(self, frame: Frame) -> bool:
        """Whether a call made in `frame` is followed (not too deep: cycles end here); a refusal is counted, since
        it makes what a call returns depend on how deep it was made (PythonProject.followed_call)."""
        if frame.depth < MAX_DEPTH:
            return True
        if self.project is not None:
            self.project.refused += 1
        return False

    def _call(self, reader, fn: ast.FunctionDef, call: ast.Call, frame: Frame, quiet: bool = False):
        """Follow a function (of this file or another): bind the arguments evaluated here, run it there. `quiet`:
        the function was looked up without noting it as used (Definitions.quietly); noted here, unless a record
        of the call stands for it (python_records)."""
        unexpected = _unexpected_keyword(fn, call)
        if unexpected:  # Python raises TypeError before the function runs: the caller's path ends here
            if self.project is not None:
                self.project.touched.add((reader.path, fn.name))  # (its signature decides)
            frame.raises()
            return Unknown(f"{fn.name}() got an unexpected keyword argument {unexpected!r} (called at "
                           f"{self.path}:{call.lineno})")
        positional = [self._eval(a, frame) for a in call.args if not isinstance(a, ast.Starred)]
        keywords = self._call_keywords(call, frame)
        where = "" if reader is self else f" in {reader.path}"
        entry = (f"via {fn.name}() at {self.path}:{call.lineno}" if not where else
                 f"via {fn.name}(){where}, called at {self.path}:{call.lineno}")
        given = _argument_steps(call, frame)
        # (a call given a record's fields writes them with the records' steps: run for this call, not reused)
        key = None if given else _cache_key(reader.path, fn.name, positional, keywords)
        self.via_stack.append(entry)
        recorded = False
        try:
            if key is None or self.project is None or self.project.string_probe is not None:
                result = reader.run_function(fn, positional, keywords, frame.depth + 1, given)
            else:
                # Base builders and inherited recipes are called with the same (literal) arguments again and again:
                # run once, each caller gets its own copy of the result, its provenance relative to the call.
                prefix = tuple(self.via_stack)
                args = call_args(positional, keywords)
                result, reused, recorded = self.project.followed_call(
                    key, frame.depth + 1, lambda: reader.run_function(fn, positional, keywords, frame.depth + 1),
                    lambda value, own: _kept(value, prefix, own), (reader.path, fn.name, args) if args else None)
                if reused:
                    result = _copied(result, prefix, {})
        finally:
            self.via_stack.pop()
            if quiet and not recorded and self.project is not None:
                self.project.touched.add((reader.path, fn.name))
        if result is RAISED:  # the exception reaches this function: its path ends here (Frame.raises)
            frame.raises()
            return Unknown(f"{fn.name}() raises (called at {self.path}:{call.lineno})")
        return result

    def run_recorded(self, fn: ast.FunctionDef, args: str, depth: int):
        """A recorded call (python_records) of this module's function `fn` run again as `_call` runs it at `depth`:
        its CallRecord now, or None when the run leaves none."""
        positional, keywords = arguments(args)
        key = _cache_key(self.path, fn.name, positional, keywords)
        project = self.project
        if key is None or project is None or project.string_probe is not None:
            return None
        self.via_stack.append(f"via {fn.name}() run again")
        try:
            prefix = tuple(self.via_stack)
            with project.tracking():
                _, _, recorded = project.followed_call(
                    key, depth, lambda: self.run_function(fn, positional, keywords, depth),
                    lambda value, own: _kept(value, prefix, own), (self.path, fn.name, args))
        finally:
            self.via_stack.pop()
        return project.records.get((MARK, self.path, fn.name, args, depth)) if recorded else None

    def _note_depth(self, depth: int) -> None:
        """The deepest activation run so far, for PythonProject.followed_call."""
        if self.project is not None and depth > self.project.deepest:
            self.project.deepest = depth

    def run_function(self, fn: ast.FunctionDef, positional: list, keywords: dict, depth: int,
                     given: dict | None = None):
        """`given`: the record steps of arguments that are a record's field ({position or keyword: steps})."""
        self._note_depth(depth)
        sub = Frame(names=dict(self.constants), depth=depth)
        self._bind_params(fn, sub, positional, keywords)
        if given:
            _bind_steps(fn, sub, len(positional), given)
        self._run_block(fn.body, sub)
        result = sub.returned
        if result is None and sub.ended and sub.early:  # every path that did not raise returned early
            first = sub.early[0]
            if not all(v is first or same(v, first) or _same_unknown(v, first) for v in sub.early):
                return Unknown(f"{fn.name}() returns a different value on each path")
            return None if first is RETURNED_NONE else first
        if result is RETURNED_NONE:
            # A path that returned earlier went elsewhere (`for x in xs: if ...: return x` then `return None`, merged):
            # None is then only one of its results, and not one to decide on (`if found is None: raise ...`)
            return Unknown(f"{fn.name}() returns None on one path, something else on another") \
                if sub.returned_on_a_path else None
        if result is RAISED:
            return RAISED  # (_call: the caller's path ends there too)
        return result if result is not None else Unknown(f"{fn.name}() returns no value")

    def recipe_unit(self, name: str, location: Location, built: ConfigObj) -> Unit:
        """A configuration another program built with this reader's help (a launcher's recipe selection),
        flattened into a recipe unit."""
        return self._unit(name, location, [built])

    def run_stepwise(self, fn: ast.FunctionDef, positional: list, keywords: dict, depth: int = 1):
        """Run a function one top-level statement at a time, yielding each statement once it has run (so a
        caller can tell which statement made which change: perf_scripts attributes config writes to flags)."""
        self._note_depth(depth)
        frame = Frame(names=dict(self.constants), depth=depth)
        self._bind_params(fn, frame, positional, keywords)
        for stmt in fn.body:
            if frame.returned is not None:
                return
            self._run_block([stmt], frame)
            yield stmt

    def _bind_params(self, fn: ast.FunctionDef, frame: Frame, positional: list, keywords: dict) -> None:
        params = fn.args
        held = self._params.get(id(fn))
        if held is None or held[0] is not fn:  # the parameters in order and their defaults' nodes, once per function
            ordered = [*params.posonlyargs, *params.args]
            defaults = dict(zip([p.arg for p in ordered][len(ordered) - len(params.defaults):], params.defaults))
            defaults.update({p.arg: d for p, d in zip(params.kwonlyargs, params.kw_defaults) if d is not None})
            held = self._params[id(fn)] = (fn, ordered, defaults)
        _, ordered, defaults = held
        spread = keywords.get(python_mutations.SPREAD)  # a `**spread` offlint cannot read: it may set any parameter
        for index, param in enumerate(ordered):
            if index < len(positional):
                frame.names[param.arg] = positional[index]
            elif param.arg in keywords:
                frame.names[param.arg] = keywords[param.arg]
            else:
                frame.names[param.arg] = spread if spread is not None else \
                    self._param_default(param.arg, defaults.get(param.arg), fn)
        for param in params.kwonlyargs:
            frame.names[param.arg] = keywords[param.arg] if param.arg in keywords else spread \
                if spread is not None else self._param_default(param.arg, defaults.get(param.arg), fn)
        if params.vararg is not None:
            frame.names[params.vararg.arg] = Unknown(f"`{params.vararg.arg}` collects arbitrary arguments")
        if params.kwarg is not None:
            # `**user_kwargs: Unpack[...]` recipes: the keywords no named parameter took (none when the recipe is
            # checked on its own), as a literal dict so `{**recommended_kwargs, **user_kwargs}` stays readable.
            # A keyword whose value offlint cannot read is still that keyword: its value is unknown, the other
            # parameters keep theirs (a fork's launcher passing argparse values had made every parameter of
            # `_qwen3_vl_common(**combined_kwargs)` unknown, `peft` too). A `**spread` offlint cannot read may hold any.
            named = {p.arg for p in (*ordered, *params.kwonlyargs)}
            extra = {k: v for k, v in keywords.items() if k not in named}
            if spread is not None:
                frame.names[params.kwarg.arg] = Unknown(f"`{params.kwarg.arg}` collects arbitrary arguments")
            else:
                frame.names[params.kwarg.arg] = {k: (v, None, repr(v)) for k, v in extra.items()}

    def _param_default(self, name: str, default, fn: ast.FunctionDef):
        if default is None:
            annotation = next((a.annotation for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)
                               if a.arg == name), None)
            if python_inputs.is_namespace_annotation(annotation):  # `def main(args: argparse.Namespace)`
                return python_inputs.namespace(f"parameter `{name}` of {fn.name}()", self._declared_options())
            return Unknown(f"parameter `{name}` of {fn.name}()")
        return self._eval_default(default)

    def _eval_default(self, node):
        """A default's value (a parameter's, a dataclass field's), evaluated with the module's constants as the
        names: a constant, or a name of them, read as _eval reads it there without copying them into a frame."""
        kind = type(node)
        if kind is ast.Constant:
            return node.value if not isinstance(node.value, bytes) else Unknown("bytes")
        if kind is ast.Name:
            return self.constants[node.id] if node.id in self.constants else self._imported_value(node.id)
        return self._eval(node, Frame(names=dict(self.constants)))


_NOT_SPECIAL = object()  # _special_call: none of the calls it knows


def _call_kinds(node: ast.Call) -> tuple[str, str, bool, bool, bool]:
    """What a call expression's syntax alone says of it, for _eval_call: the called name as written (`a.b.f`, ""
    when it is not a dotted name) and its last part; whether it may be `cast(T, v)`, a parser's `parse_args` or
    an environment read;
    whether it may be a pure or logging call (python_calls: _pure_call answers NOT_PURE for any other without
    evaluating anything); whether it may be one of the calls _special_call knows (each of its tests needs what
    this finds: the name, a last part of it, the method, arguments)."""
    func = node.func
    name = _call_name(func)
    short = name.rsplit(".", 1)[-1] if name else ""
    method = func.attr if isinstance(func, ast.Attribute) else None
    early = (short == "cast" and len(node.args) == 2) or python_inputs.is_parse_call(node) or \
        python_inputs.environment_variable(node) is not None
    maybe_pure = python_calls.is_logging_call(func) or (
        isinstance(func, ast.Name) and func.id in python_calls.PURE_BUILTINS) or (
        method in python_calls.VALUE_METHODS and
        python_calls.value_receiver(func.value))
    special = bool(node.args) and short in ("from_hf_pretrained", "from_hf_config", "replace", "import_module") or \
        bool(name) and bool(node.args) and name.endswith("AutoConfig.from_pretrained") or \
        method in PROVIDER_METHODS or method == "update" or short in CONTAINER_CLASSES or \
        bool(_section_of_class(short)) or short in bridge_mutators.MUTATORS or \
        bool(name) and short in bridge_mutators.TRAINING_ENTRY_POINTS
    return name, short, early, maybe_pure, special


def _same_unknown(a, b) -> bool:
    """Two unknown values unknown for the same reason (`return builder(**kwargs)` on one path, `return
    builder(precision=...)` on the other)."""
    return type(a) is Unknown and type(b) is Unknown and a.reason == b.reason


def _unexpected_keyword(fn: ast.FunctionDef, call: ast.Call) -> str:
    """A keyword the call passes by name that the function has no parameter for (and no `**kwargs` to take it):
    Python's TypeError. "" when there is none, or when a decorator may have changed the signature."""
    params = fn.args
    if params.kwarg is not None or fn.decorator_list:
        return ""
    names = {p.arg for p in (*params.args, *params.kwonlyargs)}
    return next((k.arg for k in call.keywords if k.arg is not None and k.arg not in names), "")


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


def _freeze(value):
    if isinstance(value, ConfigObj) or isinstance(value, dict):
        raise TypeError
    if isinstance(value, OneOf):
        return "one of", value.reason, tuple((_freeze(v), steps) for v, steps, _, _ in value.paths)
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, Record):  # hashable, but a config object among its fields could be changed by the call
        for field_value in value.fields.values():
            _freeze(field_value)
        # (equal records made by other `replace` calls pass other steps on to what the call writes)
        return value, tuple(sorted(value.made.items()))
    hash(value)
    return value


def _any_field(why: Unknown, held: Assignment) -> AnyField:
    """The value of a key a catch-all write may have replaced, with what it held before the first such write."""
    if isinstance(held.value, AnyField):
        return dataclasses.replace(held.value, reason=why.reason)
    return AnyField(why.reason, held.value, held.location, held.text)


def _argument_steps(call: ast.Call, frame: Frame) -> dict:
    """{position or keyword: record steps} for the arguments of `call` that are a record's field (record_steps)."""
    given: dict = {}
    names = frame.origins  # (a record's field is read as `name.field`; a name holds one only where these say so)
    for index, arg in enumerate(call.args):
        kind = type(arg)
        if kind is ast.Starred:
            break  # (the positions after it are not known)
        if kind is ast.Attribute or names:
            steps = record_steps(arg, frame)
            if steps:
                given[index] = steps
    for keyword in call.keywords:
        if keyword.arg is not None and (type(keyword.value) is ast.Attribute or names):
            steps = record_steps(keyword.value, frame)
            if steps:
                given[keyword.arg] = steps
    return given


def _bind_steps(fn: ast.FunctionDef, frame: Frame, count: int, given: dict) -> None:
    """Note in `frame` the record steps of the parameters bound to a record's field (_argument_steps)."""
    ordered = [*fn.args.posonlyargs, *fn.args.args]
    frame.origins = {}
    for index, param in enumerate(ordered):
        steps = given.get(index) if index < count else given.get(param.arg)
        if steps and param.arg in frame.names:
            frame.origins[param.arg] = (frame.names[param.arg], steps)
    for param in fn.args.kwonlyargs:
        steps = given.get(param.arg)
        if steps and param.arg in frame.names:
            frame.origins[param.arg] = (frame.names[param.arg], steps)


def _cache_key(path: str, name: str, positional: list, keywords: dict):
    """A key for a call whose arguments are plain values (config objects make a call uncacheable)."""
    try:
        return path, name, tuple(_freeze(v) for v in positional), tuple(sorted(
            (k, _freeze(v)) for k, v in keywords.items()))
    except TypeError:
        return None


def _kept(value, prefix: tuple, own):
    """A followed call's result as kept for reuse: its config objects copied, their provenance made relative to the
    call (`prefix`, the caller's chain and the call, taken off); NOT_KEPT when a config object in it is not the
    run's own (`own`), sits where a copy would not reach (in a list, a dict, a record), or holds an assignment
    made outside the call."""
    try:
        _check_own(value, own)
        return _copied(value, prefix, {}, strip=True)
    except _NotKept:
        return NOT_KEPT


class _NotKept(Exception):
    pass


def _check_own(value, own) -> None:
    if isinstance(value, ConfigObj):
        if not own(value):
            raise _NotKept
        for child in value.children.values():
            _check_own(child, own)
    elif isinstance(value, ObjectTuple):
        for item in value:
            _check_own(item, own)
    elif isinstance(value, (list, tuple, dict, Record)) and next(configs_in([value]), None) is not None:
        raise _NotKept


def _copied(value, prefix: tuple, done: dict, strip: bool = False):
    """A copy of a result's config objects (a config object, or a tuple of them and other values): the same
    sharing among them, every assignment's provenance with `prefix` put before it, or (`strip`) taken off."""
    if isinstance(value, ObjectTuple):
        return ObjectTuple(_copied(item, prefix, done, strip) for item in value)
    if not isinstance(value, ConfigObj):
        return value
    if id(value) in done:
        return done[id(value)]
    copy = done[id(value)] = ConfigObj(value.kind, value.base, value.section)
    if strip:
        copy.values = {k: _stripped(a, prefix) for k, a in value.values.items()}
    else:  # `with_via(a, (*prefix, *a.via))` inline: a reused result's every assignment (95,000 reading Bridge)
        copy.values = {k: with_via(a, (*prefix, *a.via)) for k, a in value.values.items()}
    copy.children = {k: _copied(child, prefix, done, strip) for k, child in value.children.items()}
    move = _stripped if strip else _prefixed
    copy.env = {k: move(a, prefix) for k, a in value.env.items()} if value.env is not None else None
    copy.env_unknown, copy.env_location, copy.origin = value.env_unknown, value.env_location, value.origin
    copy.guessed = value.guessed
    copy.top = {k: move(a, prefix) for k, a in value.top.items()}
    return copy


def _prefixed(a: Assignment, prefix: tuple) -> Assignment:
    return with_via(a, (*prefix, *a.via))


def _stripped(a: Assignment, prefix: tuple) -> Assignment:
    if a.via[:len(prefix)] != prefix:
        raise _NotKept
    return with_via(a, a.via[len(prefix):])


def _registry_of(decorator: ast.FunctionDef) -> str | None:
    """The module dict a decorator registers its function in under the function's own name (`name =
    func.__name__; REGISTRY[name] = func; return func`), or None when it does anything else with it."""
    params = decorator.args.posonlyargs + decorator.args.args
    if len(params) != 1:
        return None
    func = params[0].arg
    nodes = list(ast.walk(decorator))
    if not all(isinstance(n.value, ast.Name) and n.value.id == func for n in nodes if isinstance(n, ast.Return)):
        return None

    def is_own_name(node: ast.AST) -> bool:
        return isinstance(node, ast.Attribute) and node.attr == "__name__" and isinstance(node.value, ast.Name) \
            and node.value.id == func

    bound = [n for n in nodes if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.NamedExpr))]
    own_names = {t.id for n in bound if isinstance(n, ast.Assign) and is_own_name(n.value) for t in n.targets
                 if isinstance(t, ast.Name)}
    for name in list(own_names):  # bound once only, to the function's name
        if sum(1 for n in bound for t in getattr(n, "targets", [getattr(n, "target", None)])
               if isinstance(t, ast.Name) and t.id == name) != 1:
            own_names.discard(name)
    for n in bound:
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Subscript) and \
                isinstance(n.targets[0].value, ast.Name) and isinstance(n.value, ast.Name) and n.value.id == func:
            key = n.targets[0].slice
            if is_own_name(key) or isinstance(key, ast.Name) and key.id in own_names:
                return n.targets[0].value.id
    return None


_DICT_WRITES = frozenset({"update", "pop", "popitem", "setdefault", "clear", "__setitem__", "__delitem__"})


def _written_elsewhere(module: ast.Module, name: str, decorator: str) -> bool:
    """Whether module code other than the registering decorator writes into the dict `name` (an item assigned
    or deleted, a mutating method called), so that its entries are not just the decorated functions."""
    stack: list[ast.AST] = [module]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == decorator:
            continue
        targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else \
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
        if any(isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id == name
               for t in targets):
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _DICT_WRITES \
                and isinstance(node.func.value, ast.Name) and node.func.value.id == name:
            return True
        stack.extend(ast.iter_child_nodes(node))
    return False

