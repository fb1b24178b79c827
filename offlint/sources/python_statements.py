"""Statements in the Python reader: blocks run in order, `if` tests decided on known literals or split into
paths (python_branches merges them), loops as branches that may not run, and assignments, which bind local
names or write config keys (`cfg.model.x = v`, `cfg.env_vars = {...}`) with their positions, or write into a dict
or list a name holds (python_mutations). A `raise` ends its path (Frame.raises).
"""

from __future__ import annotations

import ast
import dataclasses
from itertools import chain, compress, islice
from operator import is_not

from offlint.keys import FIELD_SECTIONS, OTHER_BRIDGE_SECTIONS, known_fields
from offlint.sources import python_calls, python_inputs, python_mutations
from offlint.sources.hf_models import HFModel
from offlint.sources.python_branches import BranchPoint, merge_into, narrowings, paths_of, same
from offlint.sources.python_expressions import _is_entry, bindings, target_names
from offlint.sources.python_configs import CORE_SECTIONS, SECTIONS_OF_CONTAINER, _env_str, _section_for
from offlint.sources.python_syntax import FUNCTIONS, TRY, _attr_chain, _call_name, test_leaves
from offlint.sources.python_values import (OPTIONAL_SECTIONS, RAISED, RETURNED_NONE, SECTION_NONE, ConfigObj, Frame,
                                           FunctionRef, MachineValue, ModuleRef, ObjectTuple, Record, merge_origins,
                                           new_assignment, record_steps, _ENV, _PYTHON)
from offlint.types import Assignment, Location, OneOf, Unknown, UserInput

_UNDECIDED = object()
_DEFINITIONS = (*FUNCTIONS, ast.ClassDef)  # statements a block skips (built once, not per statement)
# What _run_block does with a statement, by its class (worked out once per class from the isinstance tests
# below, then one dict lookup per statement instead of up to six tests)
_SKIP, _IF, _LOOP, _BODY, _SMALL = "skip", "if", "loop", "body", "small"
_KINDS: dict[type, str] = {}


def _kind(stmt) -> str:
    if isinstance(stmt, _DEFINITIONS):
        return _SKIP
    if isinstance(stmt, ast.If):
        return _IF
    if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
        return _LOOP
    if isinstance(stmt, (ast.With, ast.AsyncWith)) or isinstance(stmt, TRY):
        return _BODY
    return _SMALL

_UNBOUND = object()
# Statement and expression classes tested by identity (the parser makes these exact classes, no subclasses of them)
_ASSIGN, _ANN_ASSIGN, _EXPR, _RETURN = ast.Assign, ast.AnnAssign, ast.Expr, ast.Return
_AUG_ASSIGN, _DELETE, _SUBSCRIPT, _RAISE = ast.AugAssign, ast.Delete, ast.Subscript, ast.Raise
_NAME, _ATTRIBUTE, _CALL, _CONSTANT = ast.Name, ast.Attribute, ast.Call, ast.Constant
_BOOL_OP, _UNARY_OP, _COMPARE, _LAMBDA = ast.BoolOp, ast.UnaryOp, ast.Compare, ast.Lambda
_IS_OPS = (ast.Is, ast.IsNot)
_DECIDABLE = {
    ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b, ast.Is: lambda a, b: a is b,
    ast.IsNot: lambda a, b: a is not b, ast.Lt: lambda a, b: a < b, ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b, ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
_MEMBERSHIP = (ast.In, ast.NotIn)
_MAX_PASSES = 16  # the passes of a loop over known items that are run one by one (_loop_passes)
_MAX_UNROLLED = 2  # loops run pass by pass inside one another (at most _MAX_PASSES ** 2 passes of a body)


def _note_early_returns(frame: Frame, subs: list[Frame]) -> None:
    """What the branches of a statement returned, in `frame.early`; `frame.ended` when none of them goes on (each
    returned, raised or ended)."""
    frame.early += tuple(chain.from_iterable(sub.early for sub in subs)) + tuple(
        sub.returned for sub in subs if sub.returned is not None and sub.returned is not RAISED)
    if all(sub.ended or sub.returned is not None for sub in subs):
        frame.ended = True


def _set_aside_returns(frame: Frame, objects: list[ConfigObj], results: list, split) -> None:
    """Where some paths of a split returned and others go on, what comes after the statement runs on the others
    only: the returned paths' states of the config objects wait for the end of the function (settle_early), and
    the merge after the statement takes a going-on path's state in their place (as for a path that raised). The
    early states the branches noted of their own splits move to the objects they copied. `results` is changed in
    place."""
    for index, (copies, sub) in enumerate(results):
        if sub.early_states and all(other is not sub for _, other in results[:index]):  # (a path given twice: once)
            parent = {id(copies[id(obj)]): obj for obj in objects}
            frame.early_states += tuple((s, n, parent[id(o)], r) for s, n, o, r in sub.early_states
                                        if id(o) in parent)
    returned = [sub.returned is not None and sub.returned is not RAISED for _, sub in results]
    if not any(returned) or all(returned) or not objects:
        return
    going_on = next(result for result, ends in zip(results, returned) if not ends)
    for obj in objects:
        frame.early_states += ((split, len(results), obj,
                                {i: copies[id(obj)] for i, ((copies, _), ends) in enumerate(zip(results, returned))
                                 if ends}),)
    results[:] = [going_on if ends else result for result, ends in zip(results, returned)]


class Statements:
    """Running statements: blocks, `if` and loops, assignments; part of PythonReader."""

    def _run_block(self, body, frame: Frame) -> list[ConfigObj]:
        """Run statements in order; return the config objects created or touched (in creation order)."""
        touched: list[ConfigObj] = []
        for stmt in body:
            if frame.returned is not None or frame.ended:
                break
            kind = _KINDS.get(type(stmt))
            if kind is None:
                kind = _KINDS[type(stmt)] = _kind(stmt)
            if kind is _SMALL:
                touched.extend(self._run_small(stmt, frame))
            elif kind is _IF:
                touched.extend(self._run_if(stmt, frame))
            elif kind is _LOOP and (passes := self._loop_passes(stmt, frame)) is not None:
                self._unrolled += 1
                try:
                    for bound in passes:  # (`for section in (cfg.optimizer, cfg.ddp):` runs once per section)
                        frame.names.update(bound)
                        touched.extend(self._run_block(stmt.body, frame))
                finally:
                    self._unrolled -= 1
            elif kind is _LOOP:
                split = self._static.get(("loop", id(stmt)))
                if split is None or split[0] is not stmt:  # the loop's split, built once per statement
                    where = f"{self.path}:{stmt.lineno}"  # file and line: a kept reading's texts move with it
                    split = self._static[("loop", id(stmt))] = (stmt, BranchPoint(
                        self._loc(stmt), self._loop_header(stmt), (f"the loop body at {where} runs",
                                                                   f"the loop body at {where} does not run")))
                touched.extend(self._run_branches([stmt.body, []], frame, split[1]))
            elif kind is _BODY:
                trying = isinstance(stmt, TRY)
                frame.trying += trying
                try:
                    touched.extend(self._run_block(stmt.body, frame))
                finally:
                    frame.trying -= trying
        return touched

    def _loop_passes(self, stmt, frame: Frame) -> list[dict[str, object]] | None:
        """The names each pass of a `for` loop binds, in order, where the loop goes over what offlint knows whole
        (iterated_items: config objects, `for section in (cfg.optimizer, cfg.ddp)`, or literals, `for attr, val in
        [("cpu_offloading", True), ...]` or `in OFFLOAD.items()`); its target a name or a tuple of names; its body
        leaving no pass early, no `else`, at most _MAX_PASSES passes. None for any other loop, read as a loop that
        may not run: the writes through its names had been dropped and the values before them stayed known (recall
        studies' recipes kept the distributed optimizer on, and turned offloading on unseen, so)."""
        if type(stmt) is not ast.For or stmt.orelse or self._unrolled >= _MAX_UNROLLED:
            return None  # (loops in loops run pass by pass multiply: past two deep, hostile input stays linear)
        names = target_names(stmt.target)
        items = self.iterated_items(stmt.iter, frame) if names else None
        if not items or len(items) > _MAX_PASSES or \
                any(type(node) in (ast.Break, ast.Continue) for statement in stmt.body for node in ast.walk(statement)):
            return None
        passes = [bindings(stmt.target, names, item) for item in items]
        return None if None in passes else passes

    def _loop_header(self, stmt) -> str:
        """A loop as its first line says it (`for name in names`, `while todo`): what a value set in its body
        depends on, as an `if`'s test is."""
        if isinstance(stmt, ast.While):
            return f"while {self._segment(stmt.test)}"
        return f"for {self._segment(stmt.target)} in {self._segment(stmt.iter)}"  # (or `async for`)

    def _run_if(self, node: ast.If, frame: Frame) -> list[ConfigObj]:
        decided = self._decide(node.test, frame)
        if decided is not None:  # the test is known here (a literal parameter default, a constant): one path runs
            return self._run_block(node.body if decided else node.orelse, frame)
        parts = self._static.get(("if", id(node)))
        if parts is None or parts[0] is not node:  # what the statement's syntax alone gives, once per statement
            parts = self._static[("if", id(node))] = (node, *self._if_parts(node))
        _, loc, what, paths, branches, narrow, plain = parts
        flags = self._input_flags(node, frame)
        split = BranchPoint(loc, what, paths, flags) if flags else \
            BranchPoint(loc, what, paths, machine=True) if self._tests_machine(node, frame) else plain
        return self._run_branches(branches, frame, split, narrow=narrow)

    def _tests_machine(self, node: ast.If, frame: Frame) -> bool:
        """Whether an `if`/`elif` chain's tests read the machine the job runs on: a `torch.cuda` call, or a name or
        attribute holding what one gave (python_values.MachineValue). Asked only in a module that names
        `torch.cuda` (most do not: their undecided tests are not evaluated again for it)."""
        if self._names_cuda is None:
            self._names_cuda = b"".join(self.lines).find(b"torch.cuda") != -1
        if not self._names_cuda:
            return False
        tests = [node.test]
        while len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
            node = node.orelse[0]
            tests.append(node.test)
        for leaf in (leaf for test in tests for leaf in test_leaves(test)):
            if isinstance(leaf, ast.Call) and _call_name(leaf.func).startswith("torch.cuda."):
                return True
            if isinstance(leaf, (ast.Name, ast.Attribute)) and isinstance(self._eval(leaf, frame), MachineValue):
                return True
        return False

    def _if_parts(self, node: ast.If) -> tuple:
        """An undecided `if`/`elif` chain's split as its text gives it (where, its name, each path's condition), its
        branches, and what each test fixes on its branch (python_branches.narrowings)."""
        branches = [node.body]
        written = self._segment(node.test)  # the test as written (once: the paths' texts and the split's name)
        test = f"`if {written}` ({self.path}:{node.lineno})"
        paths = [f"{test} is true"]
        orelse = node.orelse
        while len(orelse) == 1 and isinstance(orelse[0], ast.If):  # elif
            branches.append(orelse[0].body)
            paths.append(f"`elif {self._segment(orelse[0].test)}` ({self.path}:{orelse[0].lineno}) is the branch "
                         "taken")
            orelse = orelse[0].orelse
        branches.append(orelse)  # the else branch, or [] when there is none (the path that skips the if)
        paths.append(f"{test} is false" if len(branches) == 2 else f"no branch of {test} is taken")
        tests, chain = [node.test], node
        while len(chain.orelse) == 1 and isinstance(chain.orelse[0], ast.If):  # each elif's own test
            chain = chain.orelse[0]
            tests.append(chain.test)
        loc, what, paths = self._loc(node), f"if {written}", tuple(paths)
        # (the split when no command-line flag decides it, made once: a BranchPoint is a frozen value)
        return loc, what, paths, branches, [narrowings(t) for t in tests], BranchPoint(loc, what, paths)

    def _input_flags(self, node: ast.If, frame: Frame) -> tuple[str, ...]:
        """The command-line flags an `if`/`elif` chain tests, when its tests read nothing else that is unknown
        (python_inputs); () otherwise."""
        held = self._static.get(("flags", id(node.test)))
        if held is None or held[0] is not node.test:  # the chain's leaves, sorted out once per statement
            held = self._static[("flags", id(node.test))] = (node.test, *_flag_leaves(node))
        _, leaves, stops = held
        flags: list[str] = []
        for leaf, attribute in leaves:
            if attribute is not None:
                namespace = self._eval(leaf.args[0], frame)  # getattr(args, "name", default)
                value = python_inputs.attribute(namespace, attribute, self._segment(leaf)) \
                    if isinstance(namespace, UserInput) and not namespace.flags else Unknown("")
            else:
                value = self._eval(leaf, frame)
            if isinstance(value, UserInput) and value.flags:
                flags.extend(value.flags)
            elif isinstance(value, (Unknown, ConfigObj, Record, HFModel, ObjectTuple)):
                return ()
        if stops:
            return ()
        return tuple(dict.fromkeys(flags))

    def _declared_options(self) -> dict[str, tuple[str, ...]]:
        """The argparse options declared in this module and in the modules it imports names from."""
        if self._options is None:
            self._options = {}
            readers = [self] + ([self.project.module_reader(m, self.path, mentioning="add_argument") for m in
                                 sorted({m for m, _ in self.imports.values()})] if self.project else [])
            for reader in readers:
                if reader is not None:
                    for dest, options in reader.own_options().items():
                        self._options.setdefault(dest, options)
        return self._options

    def _decide(self, test, frame: Frame) -> bool | None:
        """The truth of an `if` test when every value it reads is a known literal, else None (both paths)."""
        kind = type(test)  # (by identity: the parser makes these exact classes)
        if kind is _BOOL_OP:
            parts = [self._decide(v, frame) for v in test.values]
            if isinstance(test.op, ast.And):
                return False if False in parts else (True if all(p is True for p in parts) else None)
            return True if True in parts else (False if all(p is False for p in parts) else None)
        if kind is _UNARY_OP and isinstance(test.op, ast.Not):
            inner = self._decide(test.operand, frame)
            return None if inner is None else not inner
        if kind is _COMPARE:
            # (_object_is_none answers None for a test of another operator without evaluating anything)
            objects = self._object_is_none(test, frame) if type(test.ops[0]) in _IS_OPS else None
            if objects is not None:
                return objects
            left = self._literal(test.left, frame)
            for op, right_node in zip(test.ops, test.comparators):
                right = self._literal(right_node, frame)
                if left is _UNDECIDED or right is _UNDECIDED or type(op) not in _DECIDABLE:
                    return None
                try:
                    # (`(pp, vp) in table`: the tuple, held as a list, looked up among the dict's tuple keys)
                    probe = python_calls.as_key(left) if type(op) in _MEMBERSHIP and isinstance(right, dict) else left
                    if type(op) in _MEMBERSHIP and getattr(right, "reason", "") and probe not in right:
                        return None  # a partly known dict (python_values.PartialDict) may hold the key all the same
                    if not _DECIDABLE[type(op)](probe, right):
                        return False
                except TypeError:
                    return None
                left = right
            return True
        value = self._literal(test, frame)
        return None if value is _UNDECIDED else bool(value)

    def _object_is_none(self, test: ast.Compare, frame: Frame) -> bool | None:
        """`x is None` / `x is not None` where x is an object the code built or looked up (a config, a dataclass
        record, a module or function): never None. None when the test is not one of those."""
        if len(test.ops) != 1 or not isinstance(test.ops[0], (ast.Is, ast.IsNot)) or not (
                isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None) or \
                isinstance(test.left, (ast.Call, ast.Lambda)):
            return None
        value = self._eval(test.left, frame)
        if not isinstance(value, (ConfigObj, Record, ObjectTuple, ModuleRef, FunctionRef, HFModel)):
            return None
        return isinstance(test.ops[0], ast.IsNot)

    def _literal(self, node, frame: Frame):
        kind = type(node)
        if kind is _CONSTANT:  # what _eval gives a constant, never undecided but for bytes (not a literal here)
            value = node.value
            return value if not isinstance(value, bytes) else _UNDECIDED
        if kind is _LAMBDA or (kind is _CALL and not self._is_pure(node, frame)):
            return _UNDECIDED  # never run a call just to decide a branch (only the pure ones of python_calls)
        value = self._eval(node, frame)
        if isinstance(value, (Unknown, ConfigObj, Record, HFModel, ObjectTuple)) or (
                isinstance(value, dict) and not value):
            return _UNDECIDED
        return value

    def _run_branches(self, branches, frame: Frame, split: "BranchPoint", narrow=()) -> list[ConfigObj]:
        """Run each branch on a copy of the state, then merge: a value that differs by path becomes a OneOf.
        `narrow[i]`: what branch i's test fixes there (python_branches.narrowings)."""
        held = [(k, v) for k, v in frame.names.items() if type(v) is ConfigObj]  # (a class nothing subclasses)
        objects = [v for _, v in held]
        results = []
        for index, body in enumerate(branches):
            copies = {id(o): o.copy() for o in objects} if objects else {}
            names = dict(frame.names)
            for k, v in held:
                names[k] = copies[id(v)]
            sub = Frame(names=names, depth=frame.depth, trying=frame.trying,
                        returned_on_a_path=frame.returned_on_a_path,
                        origins=dict(frame.origins) if frame.origins else None)
            # (_narrow of no facts changes nothing and gives {})
            restore = self._narrow(narrow[index], sub, body) if index < len(narrow) and narrow[index] else {}
            self._run_block(body, sub)
            for name, (fixed, before) in restore.items():
                if sub.names.get(name) is fixed:  # the body did not rebind it: the name is as before the test
                    sub.names[name] = before
            results.append((copies, sub))
        some_returned = any(sub.returned_on_a_path or sub.returned is not None and sub.returned is not RAISED
                            for _, sub in results)
        if some_returned:
            frame.returned_on_a_path = True  # (and, when every path returned, `frame.returned` below)
            _note_early_returns(frame, [sub for _, sub in results])
        raised = [sub.returned is RAISED for _, sub in results]
        if any(raised):
            if all(raised):  # every path raises: nothing after the statement runs
                frame.raises()
                return list(objects)
            # A path that raises goes no further: the others are the state after the statement (given in its place,
            # so each path keeps its position for the merge's descriptions)
            # (a path that goes on past the statement, where there is one: not one that returned from it)
            going_on = next((result for result, ends in zip(results, raised)
                             if not ends and result[1].returned is None), None) or \
                next(result for result, ends in zip(results, raised) if not ends)
            results = [going_on if ends else result for result, ends in zip(results, raised)]
        if some_returned:  # (a branch's own early returns set its returned_on_a_path too)
            _set_aside_returns(frame, objects, results, split)
        for obj in objects:
            merge_into(obj, [copies[id(obj)] for copies, _ in results], split)
        touched = list(objects)
        # The names some branch bound (or rebound); the others, most of them (constants, parameters), stay as they
        # are: comparing every name of every branch cost a tenth of reading a recipe module's many `if`s.
        before = frame.names
        bound: set = set()
        origins = False
        for _, sub in results:
            bound.update(_rebound(before, sub.names))
            origins = origins or bool(sub.origins)
        merged_ids = {id(obj) for obj in objects}
        for name in bound:
            if id(frame.names.get(name)) in merged_ids:
                # merged above; the branches held copies of it (one copy on every path, where the others raised:
                # `elif on: if not ok: raise ...` then `cfg.x = True`, NeMo RL's _apply_performance_config)
                continue
            values = [sub.names.get(name, frame.names.get(name)) for _, sub in results]
            if all(v is values[0] for v in values) and (name in frame.names or values[0] is not None):
                frame.names[name] = values[0]  # no branch rebound it (most names: constants, parameters)
                continue
            if isinstance(frame.names.get(name), ConfigObj):
                continue  # merged above
            created = [v for v in values if isinstance(v, ConfigObj)]
            if created:
                # A config object first seen inside a branch: on the other paths its keys are unset.
                first = created[0]
                variants = [v if isinstance(v, ConfigObj) else ConfigObj(first.kind, first.base, first.section)
                            for v in values]
                merged = variants[0].copy()
                merge_into(merged, variants, split)
                frame.names[name] = merged
                touched.append(merged)
            elif all(same(v, values[0]) for v in values):
                frame.names[name] = values[0]
            else:
                reason = f"`{name}` differs by branch ({split.what} at {split.loc.path}:{split.loc.line})"
                defined = name in frame.names or all(name in sub.names for _, sub in results)
                paths = paths_of([(v, None, "") for v in values], split) if defined else None
                frame.names[name] = OneOf(reason, paths) if paths else Unknown(reason)
        if origins:
            merge_origins(frame, [sub for _, sub in results], bound)
        returns = [sub.returned for _, sub in results if sub.returned is not None]
        if returns and len(returns) == len(results) and all(isinstance(r, ConfigObj) for r in returns):
            frame.returned = returns[0]
        return touched

    def _narrow(self, facts, frame: Frame, body) -> dict:
        """Give what a branch's test fixes its value on that branch, where it is not known already: a config key
        gets an assignment at the test (so the merge after the `if` pairs it with the branch's path), a local name
        the literal for the branch's body only. A config the function was given (`cfg`, not yet an object here)
        becomes one as the body's own first write through it would make it. Returns {name: (literal, value
        before)} for the names."""
        restore = {}
        for target, literal_node in facts:
            literal = literal_node.value
            if isinstance(target, ast.Name):
                before = frame.names.get(target.id)
                if isinstance(before, (Unknown, OneOf, UserInput)):
                    frame.names[target.id] = literal
                    restore[target.id] = (literal, before)
                continue
            chain = _attr_chain(target)
            receiver = frame.names.get(chain[0]) if chain else None
            if chain and not isinstance(receiver, ConfigObj) and self._writes_through(body, chain[0]):
                receiver = self._implicit_receiver(chain[0], chain[1:], frame)
            if not isinstance(receiver, ConfigObj):
                continue
            attrs = chain[1:]
            if receiver.kind == "container" and len(attrs) == 2 and attrs[0] in SECTIONS_OF_CONTAINER:
                receiver, attrs = receiver.child(attrs[0]), attrs[1:]
            if receiver.kind != "section" or len(attrs) != 1:
                continue
            current = receiver.values.get(attrs[0])
            value = current.value if current is not None else receiver.base
            if isinstance(value, (Unknown, OneOf)):
                key = f"{receiver.section}.{attrs[0]}"
                text = f"{self._segment(target)} (on the branch where it is {literal!r})"
                receiver.values[attrs[0]] = Assignment(key, literal, self._loc(target), _PYTHON, text,
                                                       tuple(self.via_stack))
        return restore

    def _writes_through(self, body: list, root: str) -> bool:
        """_writes_through(body, root), walked once per branch body and name (a helper's branches run for each of
        its callers). A body is a node's list of statements, kept with the answers to check it is that one."""
        held = self._static.get(("writes", id(body)))
        if held is None or held[0] is not body:
            held = self._static[("writes", id(body))] = (body, {})
        answers = held[1]
        if root not in answers:
            answers[root] = _writes_through(body, root)
        return answers[root]

    def _run_small(self, stmt, frame: Frame) -> list[ConfigObj]:
        kind = type(stmt)  # (by identity: the parser makes these exact classes)
        if kind is _ASSIGN:
            value = self._eval(stmt.value, frame)
            targets = stmt.targets
            if len(targets) == 1:
                return self._assign(targets[0], value, stmt.value, frame)
            touched = []
            for target in targets:  # a = b = value: every target gets the value (chained assignment)
                touched.extend(self._assign(target, value, stmt.value, frame))
            return touched
        if kind is _ANN_ASSIGN and stmt.value is not None:
            value = self._eval(stmt.value, frame)
            return self._assign(stmt.target, value, stmt.value, frame)
        if kind is _EXPR and type(stmt.value) is _CALL:
            result = self._eval(stmt.value, frame)
            return [result] if isinstance(result, ConfigObj) else []
        if kind is _RETURN:  # a bare `return` ends the function too
            frame.returned = self._eval(stmt.value, frame) if stmt.value is not None else None
            if frame.returned is None:
                frame.returned = RETURNED_NONE
            return []
        if kind is _AUG_ASSIGN:
            return self._augmented(stmt, frame)
        if kind is _RAISE:
            frame.raises()
            return []
        if kind is _DELETE:
            for target in stmt.targets:
                if type(target) is _SUBSCRIPT:
                    self._write_item(target, None, None, frame, delete=True)
            return []
        return []

    def _augmented(self, stmt: ast.AugAssign, frame: Frame) -> list[ConfigObj]:
        """`x += v`, `cfg.train.global_batch_size *= 2`, `kw["k"] -= 1`: the target gets the operation's result
        on the value it holds (unknown when either is; ignored, the target kept its old value as known)."""
        target, text = stmt.target, self._segment(stmt)
        if type(target) is _SUBSCRIPT:
            self._write_item(target, None, stmt, frame, op=stmt.op)
            return []
        current = self._eval(target, frame) if type(target) in (_NAME, _ATTRIBUTE) else None
        value = python_calls.arithmetic(stmt.op, current, self._eval(stmt.value, frame), text)
        return self._assign(target, value, stmt, frame)

    def _write_item(self, target: ast.Subscript, value, value_node, frame: Frame, delete: bool = False,
                    op: ast.operator | None = None) -> None:
        """`name[key] = value` (`del name[key]`, `name[key] op= value`) on a dict or a list the name holds
        (python_mutations)."""
        holder = target.value
        if type(holder) is _ATTRIBUTE and holder.attr == "env_vars" and type(holder.value) is _NAME:
            owner = frame.names.get(holder.value.id)
            if isinstance(owner, ConfigObj) and owner.kind == "container":
                self._write_env_item(owner, target, value, value_node, frame, delete, op is not None)
            return
        held = frame.names.get(holder.id) if type(holder) is _NAME else None
        if isinstance(held, list):  # `xs[i] = v`, `del xs[i]`: the list is no longer the one offlint knows
            frame.names[holder.id] = python_mutations.unknown_write(holder.id, self._segment(value_node or target))
            return
        if not isinstance(held, dict):
            return
        key = self._eval(target.slice, frame)
        if not python_mutations.literal_key(key) or op is not None and key not in held:
            frame.names[holder.id] = python_mutations.unknown_write(holder.id, self._segment(value_node or target))
        elif delete:
            frame.names[holder.id] = python_mutations.changed(held, removed=(key,))
        else:
            if op is not None:
                value = python_calls.arithmetic(op, python_mutations.value_of(held[key]),
                                                self._eval(value_node.value, frame), self._segment(value_node))
            entry = (value, self._loc(target), self._segment(value_node))
            frame.names[holder.id] = python_mutations.changed(held, {key: entry})

    def _write_env_item(self, owner: ConfigObj, target: ast.Subscript, value, value_node, frame: Frame,
                        delete: bool, augmented: bool) -> None:
        """`cfg.env_vars["NAME"] = value` (or `del cfg.env_vars["NAME"]`): the entry joins (leaves) the recipe's
        environment, as `cfg.env_vars.update({...})` does. An entry offlint cannot name, or an `op=` on one, leaves
        the environment unknown: the rules read no entry as unset that such a write may set."""
        key = self._eval(target.slice, frame)
        written = self._segment(value_node or target)
        if not isinstance(key, str) or augmented:
            owner.env_unknown = owner.env_unknown or f"cfg.env_vars written by `{written}`"
            return
        env = owner.env_to_change(f"cfg.env_vars is only written here (`{written}`)")
        if delete:
            env.pop(key, None)
        else:
            env[key] = self._assignment(f"env.{key}", value, self._loc(target), self._segment(value_node), ())

    def _assign(self, target, value, value_node, frame: Frame) -> list[ConfigObj]:
        kind = type(target)
        if kind is _NAME:
            # (a record's field is read as `name.field`; a name holds one only where frame.origins says so)
            steps = record_steps(value_node, frame) if type(value_node) is _ATTRIBUTE or frame.origins else ()
            frame.names[target.id] = value
            if steps:
                if frame.origins is None:
                    frame.origins = {}
                frame.origins[target.id] = (value, steps)
            elif frame.origins:
                frame.origins.pop(target.id, None)
            return [value] if isinstance(value, ConfigObj) else []
        if kind is _ATTRIBUTE:
            held = self._chains.get(id(target))
            if held is None or held[0] is not target:  # (shared with _eval_attribute: the chain once per node)
                chain = _attr_chain(target)
                held = self._chains[id(target)] = (target, chain, ".".join(chain) if chain is not None else "")
            chain = held[1]
        elif kind is _SUBSCRIPT:
            self._write_item(target, value, value_node, frame)
            return []
        elif kind is ast.Tuple or kind is ast.List:
            if isinstance(value, ObjectTuple) and len(value) == len(target.elts):
                built: list[ConfigObj] = []
                for element, item in zip(target.elts, value):
                    built += self._assign(element, item, value_node, frame)
                return built
            if type(value) is list and len(value) == len(target.elts) and \
                    not any(isinstance(e, ast.Starred) for e in target.elts):
                # `pp, vp = model.pipeline_model_parallel_size, 1`: literals, one to each name (GLM-4.5V's layout
                # helper); each name's own expression where the right side spells them out
                nodes = value_node.elts if isinstance(value_node, (ast.Tuple, ast.List)) and \
                    len(value_node.elts) == len(value) else [value_node] * len(value)
                touched: list[ConfigObj] = []
                for element, item, node in zip(target.elts, value, nodes):
                    touched += self._assign(element, item, node, frame)
                return touched
            for element in target.elts:
                if isinstance(element, ast.Name):
                    frame.names[element.id] = Unknown("tuple unpacking")
            return []
        else:
            return []
        if chain is None:
            return []
        root, attrs = chain[0], chain[1:]
        receiver = frame.names.get(root)
        if isinstance(receiver, HFModel) and receiver.config and attrs == ["architectures"]:
            # `text_config.architectures = ["Qwen3_5ForCausalLM"]`: the bridge class AutoBridge.from_hf_config picks
            name = value[0] if isinstance(value, (list, tuple)) and value and isinstance(value[0], str) else None
            frame.names[root] = dataclasses.replace(receiver, architecture=name) if name else Unknown(
                f"`{root}.architectures` set from `{self._segment(value_node)}`")
            return []
        if isinstance(receiver, Record) and len(attrs) == 1:
            # `cfg = bf16_mixed(); cfg.fp8 = "hybrid"`: the write changes the record the name holds (kept
            # otherwise, the record would be known and wrong), and a container key already set to that same
            # record (`cfg.peft = peft_cfg; peft_cfg.dim = 8`).
            changed = receiver.replaced({attrs[0]: value})
            frame.names[root] = changed
            for obj in frame.names.values():
                if isinstance(obj, ConfigObj) and obj.kind == "container":
                    for key, held in list(obj.top.items()):
                        if held.value is receiver:
                            obj.top[key] = dataclasses.replace(held, value=changed)
            return []
        if not isinstance(receiver, ConfigObj):
            receiver = self._implicit_receiver(root, attrs, frame)
            if receiver is None:
                return []
        steps = record_steps(value_node, frame) if type(value_node) is _ATTRIBUTE or frame.origins else ()
        return self._store(receiver, attrs, value, value_node, target, steps)

    def _implicit_receiver(self, root: str, attrs: list[str], frame: Frame) -> ConfigObj | None:
        """A name not bound to a config here (a parameter, or from a call offlint cannot follow)."""
        why = frame.names.get(root)
        reason = why.reason if isinstance(why, Unknown) else f"`{root}` comes from outside this function"
        looks_like_config = any(part in root.lower() for part in ("cfg", "config", "recipe", "container"))
        if attrs[0] in CORE_SECTIONS or (looks_like_config and (
                attrs[0] in ("env_vars", "mixed_precision") or attrs[0] in OTHER_BRIDGE_SECTIONS)):
            # `x.model.k = v` is a Bridge container whatever its name; `executor.env_vars = {...}` is not.
            obj = ConfigObj("container", Unknown(reason))
        elif len(attrs) == 1:
            section = _section_for(root, attrs[0])
            if section is None:
                return None
            obj = ConfigObj("section", Unknown(reason), section)
            obj.guessed = True
        else:
            return None
        frame.names[root] = obj
        return obj

    def _store(self, receiver: ConfigObj, attrs: list[str], value, value_node, target, steps) -> list[ConfigObj]:
        """Write `value` to the key `attrs` names under `receiver`; `steps`: the records it came from
        (record_steps), after the calls in its provenance."""
        loc = self._loc(target)
        text = self._segment(value_node)
        if receiver.kind == "container":
            head = attrs[0]
            if len(attrs) == 1:
                if head in SECTIONS_OF_CONTAINER:
                    if isinstance(value, ConfigObj) and value.kind == "section":
                        value.section = head
                        receiver.children[head] = value
                    elif value is None and head in OPTIONAL_SECTIONS:  # `cfg.comm_overlap = None`
                        receiver.children[head] = ConfigObj("section", SECTION_NONE, head)
                    else:
                        reason = value.reason if isinstance(value, Unknown) else f"set from `{text}`"
                        receiver.children[head] = ConfigObj("section", Unknown(reason), head)
                elif head == "env_vars":
                    receiver.env = self._env_dict(value_node, value, loc)
                    receiver.env_location = loc
                    receiver.env_unknown = getattr(value, "reason", "") if isinstance(value, dict) else (
                        value.reason if isinstance(value, Unknown) else f"cfg.env_vars = {text}")
                elif head == "mixed_precision":
                    receiver.top["mixed_precision"] = self._assignment("mixed_precision", value, loc, text, steps)
                elif head == "peft":
                    # The PEFT config: the dataclass record offlint built (Bridge's LoRA(...)), else the text of
                    # what it is set to (a config offlint did not evaluate), or None.
                    held = value if value is None or isinstance(value, Record) else text
                    receiver.top["peft"] = self._assignment("peft", held, loc, text, steps)
                return [receiver]
            if head in ("peft", "mixed_precision") and len(attrs) == 2:
                # `cfg.peft.target_modules = [...]`, `cfg.mixed_precision.grad_reduce_in_fp32 = False`: the record
                # changes; a value offlint did not evaluate stays what it was (not a known config either way).
                held = receiver.top.get(head)
                if held is not None and isinstance(held.value, Record):
                    receiver.top[head] = dataclasses.replace(held, value=held.value.replaced({attrs[1]: value}))
                return [receiver]
            if head in SECTIONS_OF_CONTAINER and len(attrs) == 2:
                child = receiver.child(head)
                child.values[attrs[1]] = self._assignment(f"{head}.{attrs[1]}", value, loc, text, steps,
                                                          _write_op(child, attrs[1]))
                return [receiver]
            if head == "env_vars" and len(attrs) == 2:
                if receiver.env is None:
                    receiver.env = {}
                receiver.env[attrs[1]] = self._assignment(f"env.{attrs[1]}", value, loc, text, steps)
            return [receiver]
        if len(attrs) == 1:
            receiver.values[attrs[0]] = self._assignment(f"{receiver.section}.{attrs[0]}", value, loc, text, steps,
                                                         _write_op(receiver, attrs[0]))
            return [receiver]
        return []

    def _env_dict(self, node, value, loc: Location) -> dict[str, Assignment]:
        out: dict[str, Assignment] = {}
        if not isinstance(value, dict):
            return out
        for name, (val, where, text) in value.items():
            out[str(name)] = Assignment(f"env.{name}", _env_str(val), where or loc, _ENV, text,
                                        tuple(self.via_stack))
        return out

    def _assignment(self, key, value, loc, text, steps: tuple = (), op: str = "set") -> Assignment:
        if isinstance(value, ConfigObj):
            value = Unknown(f"a config object, not a value (`{text}`)")
        if isinstance(value, dict):
            # a dict literal's entries are (value, where, text); a dict read back from a config holds plain values
            # (`cfg.dataset.dataset_kwargs = cfg.dataset.dataset_kwargs or {}`)
            value = {k: v[0] if _is_entry(v) else v for k, v in value.items()}
        return new_assignment(key, value, loc, _PYTHON, text, (*self.via_stack, *steps), op)


def _write_op(section: ConfigObj, name: str) -> str:
    """"add" where `section.name = value` gives a config object an attribute no release of its class has (a
    dataclass without __slots__ takes any attribute, which nothing of megatron-core or Megatron Bridge then reads:
    `cfg.model.cpu_offloading_num_layer = 2` changes nothing, as a `+key` override of one does), else "set". Not
    judged: a section taken for one by its receiver's name alone (an argparse or SimpleNamespace object may be
    meant), and a private name (`_builder`: the tree's own bookkeeping). OFL003 reports a near miss of a field."""
    if not _JUDGED:
        _JUDGED.update((judged, known_fields(judged)) for judged in FIELD_SECTIONS)
    kind = section.section
    if kind not in _JUDGED or name in _JUDGED[kind] or section.guessed or name[:1] == "_":
        return "set"
    return "add"


# section -> every field of it offlint knows (keys.known_fields), for the sections OFL003 judges; filled on first use
_JUDGED: dict[str, frozenset[str]] = {}


def _flag_leaves(node: ast.If) -> tuple[list, bool]:
    """What _input_flags reads of an `if`/`elif` chain, from its syntax alone: its tests' leaves up to the first it
    cannot read, in the order it reads them, each with the attribute name a `getattr(ns, "name", ...)` reads (None:
    the leaf is evaluated), and whether such an unreadable leaf ends them (the answer is then () whatever the
    others are, once they are read)."""
    tests = [node.test]
    while len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
        node = node.orelse[0]
        tests.append(node.test)
    read = []
    for leaf in (leaf for test in tests for leaf in test_leaves(test)):
        if isinstance(leaf, ast.Call) and _call_name(leaf.func) == "getattr" and len(leaf.args) >= 2 and \
                isinstance(leaf.args[1], ast.Constant) and isinstance(leaf.args[1].value, str):
            read.append((leaf, leaf.args[1].value))
        elif python_inputs.readable_operand(leaf):
            read.append((leaf, None))
        else:
            return read, True
    return read, False


def _rebound(before: dict, after: dict):
    """The names `after` (a branch's copy of `before`, run) binds to another object than `before` does, or newly, in
    `after`'s order. A copy keeps its names' order, rebinding keeps a name's place and a new name comes last, so
    where `after` starts with `before`'s names in order, compare the two dicts position by position (in C: a
    module's constants are most of the names, and every branch of every `if` asked this of each)."""
    count = len(before)
    if len(after) >= count and list(islice(after, count)) == list(before):
        return chain(compress(before, map(is_not, islice(after.values(), count), before.values())),
                     islice(after, count, None))
    return (n for n, v in after.items() if before.get(n, _UNBOUND) is not v)


def _writes_through(body, root: str) -> bool:
    """Whether a block assigns an attribute of `root` (`root.optimizer.x = ...`) anywhere in it."""
    for node in (n for stmt in body for n in ast.walk(stmt)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AugAssign, ast.AnnAssign)) else []
        for target in targets:
            chain = _attr_chain(target) if isinstance(target, ast.Attribute) else None
            if chain and chain[0] == root:
                return True
    return False
