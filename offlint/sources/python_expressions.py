"""Expressions in the Python reader: literals, names, containers, f-strings, comprehensions over literals,
attribute reads from config objects and records, and the calls known without following them (builtins,
string methods, `getattr`: python_calls). A value offlint cannot compute is an `Unknown` with the reason.
Calls of anything else are python_call_effects (and python_following, python_constructors).
"""

from __future__ import annotations

import ast
import dataclasses

from offlint import keys
from offlint.sources import python_calls, python_inputs
from offlint.sources.hf_models import HFModel
from offlint.sources.python_configs import SECTIONS_OF_CONTAINER, _field
from offlint.sources.python_syntax import _attr_chain, test_leaves
from offlint.sources.python_values import (NO_PROPERTY, SECTION_NONE, ConfigObj, Frame, MachineValue, ModuleRef,
                                           ObjectTuple, PartialDict, Record)
from offlint.types import Location, Unknown, UserInput


_NAME, _CALL, _ATTRIBUTE, _CONSTANT = ast.Name, ast.Call, ast.Attribute, ast.Constant


_NO_CONSTANT = object()


def target_names(target) -> list[str] | None:
    """The names a `for` target binds: one name, or a tuple or list of names; None for anything else."""
    if type(target) is ast.Name:
        return [target.id]
    if type(target) in (ast.Tuple, ast.List) and target.elts and all(type(e) is ast.Name for e in target.elts):
        return [e.id for e in target.elts]
    return None


def bindings(target, names: list[str], item) -> dict | None:
    """What a `for` target (its target_names) binds to one item: the item, or its parts one by one; None where the
    parts do not match the names."""
    if type(target) is ast.Name:
        return {names[0]: item}
    return dict(zip(names, item)) if isinstance(item, (list, tuple)) and len(item) == len(names) else None


def _is_entry(held) -> bool:
    """Whether a dict's value is a dict literal's entry, (value, where, text), not a plain value."""
    return type(held) is tuple and len(held) == 3 and isinstance(held[1], Location)


def _known_item(item) -> bool:
    """Whether a loop's item is one offlint knows whole: a config object, a literal, or a tuple or list of them."""
    if isinstance(item, (list, tuple)):
        return all(_known_item(element) for element in item)
    return isinstance(item, ConfigObj) or item is None or type(item) in (str, int, float, bool)


def _class_constants(module: ast.Module, cls: str) -> dict[str, object]:
    """The literal constants the module's plain class `cls` binds once in its body (_class_constant), by name."""
    node = next((stmt for stmt in module.body if isinstance(stmt, ast.ClassDef) and stmt.name == cls), None)
    if node is None or node.decorator_list or node.keywords or \
            any(not (isinstance(base, ast.Name) and base.id == "object") for base in node.bases):
        return {}
    found: dict[str, list] = {}
    for stmt in node.body:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else \
            [stmt.target] if isinstance(stmt, ast.AnnAssign) and stmt.value is not None else []
        for target in targets:
            if isinstance(target, ast.Name):
                try:
                    value = ast.literal_eval(stmt.value)
                except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                    value = _NO_CONSTANT
                found.setdefault(target.id, []).append(value)
    if not found:
        return {}
    rebound = {target.attr for stmt in ast.walk(module) if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign))
               for target in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target])
               if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == cls}
    return {name: values[0] for name, values in found.items()
            if len(values) == 1 and values[0] is not _NO_CONSTANT and not isinstance(values[0], (dict, set))
            and name not in rebound}


class Expressions:
    """Evaluating expressions to values; part of PythonReader."""

    def _eval(self, node, frame: Frame):
        """Evaluate an expression to a Python literal, a ConfigObj, a dict of (value, loc, text), or Unknown."""
        kind = type(node)  # the commonest classes first, by identity (each is a leaf class: same branch as below)
        if kind is _NAME:
            if node.id in frame.names:
                return frame.names[node.id]
            return self._imported_value(node.id)
        if kind is _CALL:
            return self._eval_call(node, frame)
        if kind is _CONSTANT:
            return node.value if not isinstance(node.value, bytes) else Unknown("bytes")
        if kind is _ATTRIBUTE:
            return self._eval_attribute(node, frame)
        if isinstance(node, ast.Constant):
            return node.value if not isinstance(node.value, bytes) else Unknown("bytes")
        if isinstance(node, ast.Name):
            if node.id in frame.names:
                return frame.names[node.id]
            return self._imported_value(node.id)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            inner = self._eval(node.operand, frame)
            return -inner if isinstance(inner, (int, float)) and not isinstance(inner, bool) else Unknown(
                self._segment(node))
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            items = [self._eval(e, frame) for e in node.elts if not isinstance(e, ast.Starred)]
            if isinstance(node, ast.Tuple) and any(isinstance(i, ConfigObj) for i in items) and \
                    not any(isinstance(e, ast.Starred) for e in node.elts):
                return ObjectTuple(items)  # `return optimizer, scheduler`: unpacked by the caller
            if any(isinstance(e, ast.Starred) for e in node.elts) or any(
                    isinstance(i, (Unknown, ConfigObj)) for i in items):
                return Unknown(f"`{self._segment(node)}` is not a literal")
            return list(items)
        if isinstance(node, ast.Dict):
            return self._eval_dict(node, frame)
        if isinstance(node, ast.Attribute):
            return self._eval_attribute(node, frame)
        if isinstance(node, ast.Call):
            return self._eval_call(node, frame)
        if isinstance(node, ast.BoolOp) and not self._truth_only(node, frame):
            return self._eval_bool_value(node, frame)  # `x or 1`: the operand, not its truth
        if isinstance(node, (ast.Compare, ast.BoolOp)) or (isinstance(node, ast.UnaryOp) and
                                                           isinstance(node.op, ast.Not)):
            decided = self._decide(node, frame)  # `bf16=precision == "bf16-mixed"`
            if decided is not None:
                return decided
            leaves = test_leaves(node)
            # `use_muon = os.getenv("MUON") == "1"`: the user's choice, as its parts are
            if all(map(python_inputs.readable_operand, leaves)):
                chosen = python_inputs.combined([self._eval(leaf, frame) for leaf in leaves], self._segment(node))
                if chosen is not None:
                    return chosen
        if isinstance(node, ast.JoinedStr):
            return self._eval_fstring(node, frame)
        if isinstance(node, ast.IfExp):
            decided = self._decide(node.test, frame)
            if decided is not None:
                return self._eval(node.body if decided else node.orelse, frame)
        if isinstance(node, (ast.ListComp, ast.GeneratorExp, ast.SetComp, ast.DictComp)):
            return self._eval_comprehension(node, frame)
        if isinstance(node, ast.Subscript):
            variable = python_inputs.environment_variable(node)
            if variable is not None:  # `os.environ["NAME"]`
                return python_inputs.environment(variable, self._segment(node))
            return python_calls.item(self._eval(node.value, frame), self._eval(node.slice, frame),
                                     self._segment(node))
        if isinstance(node, ast.BinOp):
            return python_calls.arithmetic(node.op, self._eval(node.left, frame), self._eval(node.right, frame),
                                           self._segment(node))
        return Unknown(f"`{self._segment(node)}` is not a literal")

    def _truth_only(self, node: ast.BoolOp, frame: Frame) -> bool:
        """`a and b` whose operands are truth values (or unknown): Kleene logic decides it (`? and False`)."""
        return all(isinstance(v, (ast.Compare, ast.BoolOp, ast.UnaryOp)) or (isinstance(v, ast.Constant) and
                                                                         isinstance(v.value, bool))
                   for v in node.values)

    def _eval_bool_value(self, node: ast.BoolOp, frame: Frame):
        """`a or b` / `a and b` as Python gives it: the first operand that decides, as a value."""
        value = None
        for operand in node.values:
            value = self._eval(operand, frame)
            if isinstance(value, (Unknown, ConfigObj, Record, HFModel, ObjectTuple)):
                decided = self._decide(node, frame)
                return decided if isinstance(decided, bool) and all(
                    isinstance(self._eval(v, frame), (bool, Unknown)) for v in node.values) else Unknown(
                    f"`{self._segment(node)}` is not a literal")
            if bool(value) == isinstance(node.op, ast.Or):
                return value
        return value

    def _eval_fstring(self, node: ast.JoinedStr, frame: Frame):
        """An f-string of literal parts; the text is offered to the project's string probe (perf_scripts reads
        the recipe name a launcher computes this way)."""
        parts = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                parts.append(str(part.value))
                continue
            value = self._eval(part.value, frame) if isinstance(part, ast.FormattedValue) else Unknown("")
            if not isinstance(value, (str, int, float, bool, type(None))) or part.format_spec is not None:
                return Unknown(f"`{self._segment(node)}` is not a literal")
            parts.append(repr(value) if part.conversion == ord("r") else ascii(value)
                         if part.conversion == ord("a") else str(value))
        text = "".join(parts)
        if len(text) > python_calls.MAX_LITERAL:
            return Unknown(f"`{self._segment(node)}` is too long to follow")
        if self.project is not None and self.project.string_probe is not None:
            self.project.string_probe.append(text)
        return text

    def _eval_comprehension(self, node, frame: Frame):
        """`[f(x) for x in literal if test]` over a literal sequence, each element a literal; `{k: v for k, v in
        D.items() if test}` over a dict offlint knows (iterated_items), each key a literal (round 5 of the recall
        study dropped NCCL_GRAPH_REGISTER from a recipe's environment so). A dict's entries are located at the
        comprehension."""
        unknown = Unknown(f"`{self._segment(node)}` is not a literal")
        loop = node.generators[0]
        names = target_names(loop.target)
        if len(node.generators) != 1 or loop.is_async or names is None:
            return unknown
        held = self._static.get(("comprehension", id(node)))
        if held is None or held[0] is not node:  # whether it nests a loop or a lambda: once per expression
            parts = (node.key, node.value) if isinstance(node, ast.DictComp) else (node.elt,)
            held = self._static[("comprehension", id(node))] = (node, any(
                isinstance(inner, (ast.ListComp, ast.GeneratorExp, ast.SetComp, ast.DictComp, ast.Lambda))
                for part in (*parts, *loop.ifs) for inner in ast.walk(part)))
        if held[1]:
            return unknown  # nested loops would multiply: hostile input stays linear
        items = self.iterated_items(loop.iter, frame, literal=False)
        if items is None or len(items) > python_calls.MAX_ITEMS:
            return unknown
        sub = Frame(names=dict(frame.names), depth=frame.depth)
        out, entries = [], {}
        for item in items:
            bound = bindings(loop.target, names, item)
            if bound is None:
                return unknown
            sub.names.update(bound)
            tests = [self._decide(test, sub) for test in loop.ifs]
            if None in tests:
                return unknown
            if not all(tests):
                continue
            if isinstance(node, ast.DictComp):
                key, value = self._eval(node.key, sub), self._eval(node.value, sub)
                if not isinstance(key, (str, int, float, bool)) or \
                        isinstance(value, (Unknown, ConfigObj, Record, HFModel, ObjectTuple, dict)):
                    return unknown
                entries[key] = (value, self._loc(node), self._segment(node.value))
                continue
            value = self._eval(node.elt, sub)
            if isinstance(value, (Unknown, ConfigObj, Record, HFModel, ObjectTuple, dict)):
                return unknown
            out.append(value)
        if isinstance(node, ast.DictComp):
            return entries
        return list(dict.fromkeys(out)) if isinstance(node, ast.SetComp) and all(
            isinstance(v, (str, int, float, bool)) for v in out) else out

    def iterated_items(self, node, frame: Frame, literal: bool = True) -> list | None:
        """What a `for` goes over, where offlint knows it: the items, keys or values of a dict (`D.items()`; a dict
        literal's entries give their values), and a tuple or list; for a comprehension (`literal` false) any value
        that is a tuple, list, string or dict (its keys). None otherwise. `literal`: a loop run pass by pass, over
        a tuple or list written there or a name's, each item a literal, a config object, or a tuple or list of
        them (a comprehension judges its own elements)."""
        if type(node) is ast.Call and type(node.func) is ast.Attribute and \
                node.func.attr in ("items", "keys", "values") and not node.args and not node.keywords:
            held = self._eval(node.func.value, frame)
            if not isinstance(held, dict) or isinstance(held, PartialDict):
                return None
            pairs = [(key, value[0] if _is_entry(value) else value) for key, value in held.items()]
            items = pairs if node.func.attr == "items" else [pair[node.func.attr == "values"] for pair in pairs]
        else:
            if literal and type(node) not in (ast.Tuple, ast.List, ast.Name):  # (written there, or a name's)
                return None
            items = self._eval(node, frame)
            if not literal and isinstance(items, dict) and not isinstance(items, PartialDict):
                items = list(items)
            if not isinstance(items, (list, tuple) if literal else (list, tuple, str)):
                return None
            items = list(items)
        return items if not literal or all(_known_item(item) for item in items) else None

    def _eval_dict(self, node: ast.Dict, frame: Frame):
        out: dict = {}
        partial = ""
        for key_node, value_node in zip(node.keys, node.values):
            if key_node is None:  # **spread
                spread = self._eval(value_node, frame)
                if not isinstance(spread, dict):
                    partial = partial or f"`**{self._segment(value_node)}` is not a literal dict"
                    continue
                partial = partial or getattr(spread, "reason", "")
                out.update(spread)
                continue
            key = self._eval(key_node, frame)
            if isinstance(key_node, ast.Tuple) and isinstance(key, list) and \
                    all(isinstance(k, (str, int, float, bool, type(None))) for k in key):
                key = tuple(key)  # `{(4, 1): ...}`: a tuple of literals is a key like any literal
            if isinstance(key, (Unknown, ConfigObj, dict, list)):
                return Unknown("a dict key is not a literal")
            value = self._eval(value_node, frame)
            out[key] = (value, self._loc(key_node), self._segment(value_node))
        return PartialDict(out, partial) if partial else out

    def _eval_attribute(self, node: ast.Attribute, frame: Frame):
        if node.attr == "text_config":  # `AutoConfig.from_pretrained(id).text_config`: a VLM's language model alone
            owner = self._eval(node.value, frame)
            if isinstance(owner, HFModel) and owner.config:
                return dataclasses.replace(owner, text_only=True)
        held = self._chains.get(id(node))
        if held is None or held[0] is not node:  # the chain as written and its text, once per node
            chain = _attr_chain(node)
            held = self._chains[id(node)] = (node, chain, ".".join(chain) if chain is not None else "")
        _, chain, text = held
        if chain is None:
            return Unknown(f"`{self._segment(node)}`")
        if chain[0] == "torch" and len(chain) == 2:
            return f"torch.{chain[1]}"
        receiver = frame.names.get(chain[0])
        if receiver is None and chain[0] in self.imports:
            receiver = self._imported_value(chain[0])
        if isinstance(receiver, UserInput) and not receiver.flags and len(chain) == 2:
            return python_inputs.attribute(receiver, chain[1], text)  # `args.name`
        if isinstance(receiver, MachineValue):  # `props.major` of `props = torch.cuda.get_device_properties(0)`
            return MachineValue(f"`{text}` on the machine the job runs on")
        if isinstance(receiver, ModuleRef) and self.project is not None:
            # `base_cfgs.LLAMA3_8B_BF16`: a module-level value, or a function, of the tree's module
            found, member = self._module_member(receiver.name, chain[1]) if len(chain) == 2 else (False, None)
            return member if found else Unknown(f"`{text}`: not a value offlint finds in {receiver.name}")
        if isinstance(receiver, Record) and len(chain) == 2:
            value = self._record_member(receiver, chain[1], frame)
            return Unknown(f"{receiver.name} has no field {chain[1]}") if value is NO_PROPERTY else value
        if isinstance(receiver, ConfigObj):
            attrs = chain[1:]
            if receiver.kind == "container" and attrs and attrs[0] in SECTIONS_OF_CONTAINER:
                child = receiver.child(attrs[0])
                if len(attrs) == 1:
                    return None if child.base == SECTION_NONE else child  # `cfg.comm_overlap` left None
                if len(attrs) == 2:
                    return _field(child, attrs[1], text)
            held = receiver.top.get("mixed_precision") if receiver.kind == "container" and attrs and \
                attrs[0] == "mixed_precision" else None
            if held is not None:  # `get_mixed_precision_config(cfg.mixed_precision)` on the name the config holds
                if len(attrs) == 1:
                    return held.value  # the same record object, so a write through an alias reaches the config
                if len(attrs) == 2 and isinstance(held.value, Record):
                    return held.value.fields.get(attrs[1], Unknown(f"{held.value.name} has no field {attrs[1]}"))
            if receiver.kind == "section" and len(attrs) == 1:
                return _field(receiver, attrs[0], text)
            if receiver.kind == "container" and attrs == ["env_vars"]:
                return _env_vars(receiver, text)
        if receiver is None and len(chain) == 2:
            found = self._class_constant(chain[0], chain[1])
            if found is not _NO_CONSTANT:
                return found
        return Unknown(f"`{text}` is read from an object offlint does not evaluate")

    def _class_constant(self, cls: str, attr: str):
        """`_Opt.NAME` where this module's plain class `_Opt` (no base but object, no decorator) binds NAME to a
        literal in its body, once, and nothing in the module assigns `_Opt.NAME` (round 5 of the recall study: a
        recipe's optimizer name kept as a class constant had been unknown). _NO_CONSTANT otherwise: an Enum's
        member, say, is no such value."""
        memo = self._static.get(("class constants", cls))
        if memo is None:
            memo = self._static[("class constants", cls)] = _class_constants(self.module, cls)
        return memo.get(attr, _NO_CONSTANT)

    def _is_pure(self, node: ast.Call, frame: Frame) -> bool:
        """A call that only computes a value (decidable in a branch test without running anything else)."""
        func = node.func
        if isinstance(func, ast.Name):
            return func.id in python_calls.PURE_BUILTINS and not self._shadowed(func.id, frame) or \
                func.id == "is_dataclass" and self._is_dataclass_test(func, frame)
        return isinstance(func, ast.Attribute) and (
            func.attr in python_calls.VALUE_METHODS and python_calls.value_receiver(func.value) or
            func.attr == "is_dataclass" and self._is_dataclass_test(func, frame))

    def _is_dataclass_test(self, func: ast.expr, frame: Frame) -> bool:
        """`dataclasses.is_dataclass` (or the name imported from dataclasses), as the call's function."""
        if isinstance(func, ast.Attribute):
            return func.attr == "is_dataclass" and isinstance(func.value, ast.Name) and \
                func.value.id == "dataclasses" and self.imports.get("dataclasses") == ("dataclasses", None) and \
                "dataclasses" not in frame.names
        return isinstance(func, ast.Name) and func.id == "is_dataclass" and \
            self.imports.get("is_dataclass") == ("dataclasses", "is_dataclass") and "is_dataclass" not in frame.names

    def _shadowed(self, name: str, frame: Frame) -> bool:
        return name in frame.names or name in self.functions or name in self.imports or name in self.constants

    def _pure_call(self, node: ast.Call, frame: Frame):
        """The value of a builtin, string method or logging call (python_calls), or NOT_PURE for any other."""
        func = node.func
        if python_calls.is_logging_call(func):
            return None
        if not self._is_pure(node, frame):
            return python_calls.NOT_PURE
        if (func.attr if type(func) is ast.Attribute else func.id if type(func) is ast.Name else "") == "is_dataclass":
            # dataclasses' own (_is_pure said so): a config object or a dataclass record is one (Bridge's override
            # helpers return early for anything else); a literal is not; anything else is not known
            value = self._eval(node.args[0], frame) if len(node.args) == 1 and not node.keywords else None
            if isinstance(value, (ConfigObj, Record)):
                return True
            if value is None or type(value).__module__ == "builtins" and not isinstance(value, Unknown):
                return False if len(node.args) == 1 else Unknown(f"`{self._segment(node)}`")
            return Unknown(f"the result of `{self._segment(node)}`")
        if isinstance(func, ast.Attribute):
            receiver = self._eval(func.value, frame)
            if not python_calls.has_value_method(receiver, func.attr):
                return python_calls.NOT_PURE  # not a string or a literal dict: a method of something else
            args = [self._eval(a, frame) for a in node.args if not isinstance(a, ast.Starred)]
            if len(args) != len(node.args) or node.keywords:
                return Unknown(f"`{self._segment(node)}` is not a literal")
            return python_calls.method_value(receiver, func.attr, args)
        if func.id in ("getattr", "hasattr"):
            return self._getattr(node, frame, func.id)
        if func.id == "isinstance" and len(node.args) == 2 and not node.keywords:
            value = self._eval(node.args[0], frame)
            if self._plain_dataclass(node.args[1]) and type(value).__module__ == "builtins" and \
                    not isinstance(value, Unknown):
                return False  # a literal is never an instance of a tree @dataclass that subclasses nothing
            found = self._find_dataclass(node.args[1].id) if isinstance(node.args[1], ast.Name) else None
            if isinstance(value, Record) and found is not None and found[1].name == value.name:
                return True  # a record built by calling that very dataclass
            if isinstance(value, Record) and value.plain and python_calls.builtin_types(node.args[1]):
                return False  # `isinstance(cfg.mixed_precision, str)` on a MixedPrecisionConfig record
            return python_calls.isinstance_value(value, node.args[1])
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            return Unknown(f"the result of `{self._segment(node.func)}(...)`")
        args = [self._eval(a, frame) for a in node.args]
        keywords = {k.arg: self._eval(k.value, frame) for k in node.keywords}
        if any(isinstance(v, (ConfigObj, Record, HFModel, ObjectTuple)) for v in [*args, *keywords.values()]):
            return Unknown(f"the result of `{self._segment(node.func)}(...)` on a config object")
        return python_calls.builtin_value(func.id, args, keywords)

    def _plain_dataclass(self, node: ast.expr) -> bool:
        """Whether `node` names a @dataclass of the tree with no base class (`MixedPrecisionConfig`)."""
        found = self._find_dataclass(node.id) if isinstance(node, ast.Name) else None
        return found is not None and not found[1].bases and not found[1].keywords

    def _getattr(self, node: ast.Call, frame: Frame, which: str):
        """`getattr(obj, "name"[, default])` / `hasattr(obj, "name")`: the value where offlint knows it."""
        unknown = Unknown(f"`{self._segment(node)}`: not a value this code sets")
        if len(node.args) < 2 or node.keywords:
            return unknown
        obj = self._eval(node.args[0], frame)
        attr = self._eval(node.args[1], frame)
        if not isinstance(attr, str):
            return unknown
        found, value = False, None
        if isinstance(obj, ModuleRef) and self.project is not None:
            found, member = self._module_member(obj.name, attr)
            if found:
                return True if which == "hasattr" else member
            if self._never_binds(obj.name, attr):  # no such name there: the default
                if which == "hasattr":
                    return False
                return self._eval(node.args[2], frame) if len(node.args) > 2 else Unknown(
                    f"`{self._segment(node)}` raises AttributeError")
            return unknown  # not a function or constant offlint finds there: unknown, not the default
        if isinstance(obj, Record):
            value = self._record_member(obj, attr, frame)
            found = value is not NO_PROPERTY
            if not found and which == "getattr" and len(node.args) > 2:
                return self._eval(node.args[2], frame)  # a namespace without that name: the default
            if not found and which == "hasattr":
                return False
        elif isinstance(obj, ConfigObj) and obj.kind == "container" and attr in SECTIONS_OF_CONTAINER:
            found, value = True, obj.child(attr)
            value = None if value.base == SECTION_NONE else value
        elif isinstance(obj, ConfigObj) and obj.kind == "section":
            exists = keys.field_in_every_version(f"{obj.section}.{attr}") if obj.section else None
            if attr in obj.values:
                found, value = True, obj.values[attr].value
            elif which == "hasattr" and exists:
                # a field of the section's class in every release, whatever built the object (a recipe offlint
                # cannot see: a Bridge provider is a TransformerConfig): a benchmark's `if hasattr(m,
                # "cuda_graph_impl"): m.cuda_graph_impl = "none"` had left its graphs unknown
                return True
            elif obj.base == "default" and obj.section:  # a dataclass field, or not one, in every release
                if which == "hasattr":
                    return unknown if exists is None else exists
                if exists is False and len(node.args) > 2:
                    return self._eval(node.args[2], frame)
                value = _field(obj, attr, self._segment(node))
                return unknown if isinstance(value, Unknown) else value
        if not found:
            return unknown
        return True if which == "hasattr" else value


    def _record_member(self, record: Record, attr: str, frame: Frame):
        """A record's field, or its class's @property computed (_record_property); NO_PROPERTY when neither."""
        if attr in record.fields:
            return record.fields[attr]
        return self._record_property(record, attr, frame)


def _env_vars(container: ConfigObj, text: str):
    """`cfg.env_vars` read back (`{**cfg.env_vars, "X": "1"}`, Bridge PR 5554's deepseek_v4 recipe): the entries the
    config holds, as a dict literal gives them, each at the place that set it; with what offlint could not read of
    it as a PartialDict's reason. A container built here that was never given env_vars holds Bridge's empty
    default."""
    if container.env is None:
        if container.env_unknown or container.base != "default":
            return Unknown(container.env_unknown or f"`{text}` of a config offlint did not see built")
        return {}
    held = {name: (a.value, a.location, a.text) for name, a in container.env.items()}
    return PartialDict(held, container.env_unknown) if container.env_unknown else held
