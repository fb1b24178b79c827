"""Calls followed into functions of this file or another: the arguments bound, the function run there, its result
(results of calls with plain arguments kept per project and copied to each caller), and the module dicts a
registering decorator fills (a look-up by a known name follows the function). What a call that is not followed
gives is python_call_effects.
"""

from __future__ import annotations

import ast

from offlint.sources import python_inputs, python_mutations
from offlint.sources.python_branches import same, settle_early
from offlint.sources.python_records import MARK, arguments, call_args
from offlint.sources.python_values import (MAX_DEPTH, NOT_KEPT, RAISED, RETURNED_NONE, ConfigObj, Frame, FunctionRef,
                                           ObjectTuple, PartialDict, Record, Registry, configs_in, record_steps,
                                           with_via)
from offlint.types import Assignment, Location, OneOf, Unit, Unknown


class CallFollowing:
    """Calls followed into functions; part of PythonReader."""

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
        settle_early(sub)
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
