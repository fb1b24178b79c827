"""What a call evaluates to, and what it changes, where the reader does not follow it into a function: which kind of
call it is (python_calls: builtins and methods known without following; python_constructors: config classes and
records; python_following: functions of the tree), Bridge's mutators (the tree's own source, else
bridge_mutators), `setattr` and `env_vars.update` on a config, writes into a local dict or list, and a call
offlint cannot follow, which taints the config objects it is given.
"""

from __future__ import annotations

import ast
import dataclasses

from offlint.sources import bridge_checks, bridge_mutators, python_calls, python_inputs, python_mutations
from offlint.sources.hf_models import PROVIDER_METHODS, HFModel
from offlint.sources.python_configs import (CONTAINER_CLASSES, MODEL_CLASSES, SECTIONS_OF_CONTAINER, _branch_dependent,
                                            _restore, _taint)
from offlint.sources.python_constructors import _config_kind, _own_class, _section_of_class
from offlint.sources.python_statements import _UNDECIDED
from offlint.sources.python_syntax import _attr_chain, _call_name
from offlint.sources.python_values import (OPTIONAL_SECTIONS, SECTION_NONE, ConfigObj, Frame, FunctionRef,
                                           MachineValue, ModuleRef, ObjectTuple, PartialDict, Record, new_assignment,
                                           _ENV, _PYTHON)
from offlint.types import AnyField, Assignment, Unknown


# dict methods that change `cfg.env_vars`, read on the recipe's environment (_env_method)
_ENV_METHODS = frozenset({"update", "setdefault", "pop", "clear"})

class CallEffects:
    """A call's value and what it changes; part of PythonReader."""

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
        if name.startswith("torch.cuda."):  # the machine's: no config object is given to one
            return MachineValue(f"the result of `{self._segment(node.func)}(...)` on the machine the job runs on")
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
        if isinstance(node.func, ast.Attribute) and node.func.attr in _ENV_METHODS:
            updated = self._env_method(node, frame)
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

    def _env_method(self, node: ast.Call, frame: Frame):
        """A dict method that changes `cfg.env_vars` (_ENV_METHODS), on the recipe's environment: update's two forms,
        `update({...})` and `update(NAME="1")` (a literal dict and named arguments only), `setdefault(NAME, value)`,
        `pop(NAME[, default])` and `clear()`. The named form of update and setdefault had been left unread, and a
        recipe setting NVTE_CPU_OFFLOAD_V1 so was told it did not (round 5 of the recall study, a false OFL112)."""
        chain = _attr_chain(node.func.value)
        if not chain or chain[-1] != "env_vars":
            return _UNDECIDED
        owner = frame.names.get(chain[0]) if len(chain) == 2 else None
        if not isinstance(owner, ConfigObj) or owner.kind != "container":
            return _UNDECIDED
        method = node.func.attr
        if method == "clear" and not node.args and not node.keywords:
            owner.env, owner.env_unknown = {}, ""  # (whatever its base held)
            return None
        if method in ("setdefault", "pop"):
            name = self._eval(node.args[0], frame) if node.args and not node.keywords else None
            if not isinstance(name, str) or len(node.args) > 2:
                owner.env_unknown = owner.env_unknown or f"cfg.env_vars changed by `{self._segment(node)}`"
                return None
            env = owner.env_to_change(f"cfg.env_vars is only changed here ({self._segment(node)})")
            if method == "pop":
                env.pop(name, None)
            elif name not in env and not owner.env_unknown:  # (an unknown base may hold it: then unknown)
                given = node.args[1] if len(node.args) > 1 else None
                env.update(self._env_dict(node, {name: (self._eval(given, frame) if given is not None else None,
                                                        self._loc(node), self._segment(given or node))},
                                          self._loc(node)))
            return None
        if len(node.args) > 1 or not (node.args or node.keywords):
            return _UNDECIDED
        value = self._eval(node.args[0], frame) if node.args else {}
        if not isinstance(value, dict) or isinstance(value, PartialDict) or \
                any(keyword.arg is None for keyword in node.keywords):  # (`**other`: entries offlint cannot list)
            shown = self._segment(node.args[0]) if node.args else self._segment(node)
            owner.env_unknown = owner.env_unknown or f"cfg.env_vars updated from `{shown}`"
            return None
        value = {**value, **{keyword.arg: (self._eval(keyword.value, frame), self._loc(keyword),
                                           self._segment(keyword.value)) for keyword in node.keywords}}
        owner.env_to_change(f"cfg.env_vars is only updated here ({self._segment(node)})").update(
            self._env_dict(node, value, self._loc(node)))
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
    maybe_pure = python_calls.is_logging_call(func) or name in python_calls.IS_DATACLASS or (
        isinstance(func, ast.Name) and func.id in python_calls.PURE_BUILTINS) or (
        method in python_calls.VALUE_METHODS and
        python_calls.value_receiver(func.value))
    special = bool(node.args) and short in ("from_hf_pretrained", "from_hf_config", "replace", "import_module") or \
        bool(name) and bool(node.args) and name.endswith("AutoConfig.from_pretrained") or \
        method in PROVIDER_METHODS or method in _ENV_METHODS or short in CONTAINER_CLASSES or \
        bool(_section_of_class(short)) or short in bridge_mutators.MUTATORS or \
        bool(name) and short in bridge_mutators.TRAINING_ENTRY_POINTS
    return name, short, early, maybe_pure, special


def _any_field(why: Unknown, held: Assignment) -> AnyField:
    """The value of a key a catch-all write may have replaced, with what it held before the first such write."""
    if isinstance(held.value, AnyField):
        return dataclasses.replace(held.value, reason=why.reason)
    return AnyField(why.reason, held.value, held.location, held.text)
