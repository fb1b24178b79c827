"""Where a function's paths split and join: the values of an `if` (or a loop) whose test offlint cannot decide.

Each branch runs on its own copy of the config objects; afterwards a key with the same value on every path keeps
it, and a key set differently (or only on some paths) becomes a `OneOf`: one value per path, each with the
path's condition ("`if fast` (recipes/llama.py:4) is true": a line is named with its file, which lets the cache
move a kept reading's texts with its lines) and the split it belongs to, so that the rule engine can evaluate
rules per consistent combination of paths. A key left unset on a path has its section's default
there (KEY_DEFAULT), or is unknown when the section's base is. A path that returns early keeps the state it
returned with until the function ends (settle_early): what comes after the split runs on the other paths only.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cached_property
from operator import is_

from offlint.sources.python_values import SECTION_NONE, ConfigObj
from offlint.types import KEY_DEFAULT, UNREAD_SPLIT, AnyField, Assignment, Location, OneOf, Unknown


def same(a, b) -> bool:
    if isinstance(a, Unknown) or isinstance(b, Unknown):
        return False
    return type(a) is type(b) and a == b


@dataclass(frozen=True)
class BranchPoint:
    """Where the paths of a function split (an `if` or a loop): the statement, how messages name it, and each
    path's condition. Its id (the statement's place) ties together the values one split decides. Two runs of the
    same statement (a helper called twice) share it, which is what lets a followed call's result be reused."""

    loc: Location
    what: str  # "if precision == 'fp8'", "loop"
    paths: tuple[str, ...]  # one per branch, in order: "`if x` (recipes/llama.py:4) is true", ...
    # The command-line flags the test reads, when it reads nothing else unknown: a split only a user's own flags
    # decide (python_inputs). Its steps carry them as a fourth item.
    flags: tuple[str, ...] = ()
    # Its test reads the machine the job runs on (python_values.MachineValue): which path a run takes is not read
    # (types.UNREAD_SPLIT leads its id).
    machine: bool = False

    @cached_property  # (kept in the instance's dict, not a field: a split reused by every run of its statement)
    def id(self) -> str:
        return f"{UNREAD_SPLIT}{self.loc}" if self.machine else str(self.loc)


MAX_PATHS = 8  # beyond this many paths a value is left unknown (rules are evaluated once per combination)


def merge_into(obj: ConfigObj, variants: list[ConfigObj], split: BranchPoint) -> None:
    """After branches: a key with the same value on every path keeps it; otherwise it becomes a OneOf."""
    if obj.kind == "container":
        for section in set().union(*(v.children for v in variants)) | set(obj.children):
            children = [v.children.get(section) or v.blank(section) for v in variants]
            merge_into(obj.child(section), children, split)
        obj.top = merge_values([v.top for v in variants], split, [_unset(v) for v in variants])
        envs = [v.env for v in variants]
        unknown = [v.env_unknown for v in variants if v.env_unknown]
        if unknown:
            obj.env, obj.env_unknown = None, unknown[0]
        elif all(e is None for e in envs):
            obj.env = None
        elif any(e is None for e in envs):
            obj.env, obj.env_unknown = None, f"cfg.env_vars is assigned only on some paths (`{split.what}`)"
        else:
            obj.env = merge_values(envs, split, None)
        return
    bases = [v.base for v in variants]
    overridden = [b for b in bases if isinstance(b, AnyField)]
    if all(b == bases[0] for b in bases):
        obj.base = bases[0]
    elif overridden and all(b == "default" or isinstance(b, AnyField) for b in bases):
        obj.base = overridden[0]  # its defaults, but for what a write by a name offlint cannot read set on a path
    else:
        obj.base = Unknown(f"set differently by branch ({split.what})")
    obj.values = merge_values([v.values for v in variants], split, [_unset(v) for v in variants])


def settle_early(frame) -> None:
    """At the end of a function: each config object is, on the paths that returned early, as it was when they
    returned (Frame.early_states), and as the function left it on the others; the latest split first, as its
    other paths are those that went on from the earlier ones."""
    for split, count, obj, returned in reversed(frame.early_states):
        if all(_same_state(state, obj) for state in returned.values()):
            continue  # (nothing after the split changed it: the merge would give what it holds)
        merge_into(obj, [returned.get(index) or obj.copy() for index in range(count)], split)
    frame.early_states = ()


def _same_state(a: ConfigObj, b: ConfigObj) -> bool:
    """Whether two copies of a config object hold the same keys and values (the assignments are shared objects, so
    the dicts compare by identity first)."""
    return a.base == b.base and a.values == b.values and a.top == b.top and a.env == b.env and \
        a.env_unknown == b.env_unknown and a.children.keys() == b.children.keys() and \
        all(_same_state(child, b.children[name]) for name, child in a.children.items())


def _unset(obj: ConfigObj) -> object:
    """What a key the path leaves unset is: its section's default, or the reason the section is unknown."""
    return KEY_DEFAULT if obj.base in ("default", SECTION_NONE) else obj.base


def merge_values(maps: list[dict[str, Assignment]], split: BranchPoint,
                  unset: list[object] | None) -> dict[str, Assignment]:
    """`unset`: per path, what a key it does not set is (None: not expressible, so such a key is unknown)."""
    out: dict[str, Assignment] = {}
    first_map = maps[0]
    rest = maps[1:]
    if all(m.keys() == first_map.keys() for m in rest):
        names = first_map.keys()
        # No branch touched any of them (most sections, at most `if`s): the same assignments, in the same order.
        if all(all(map(is_, m.values(), first_map.values())) for m in rest):
            return dict(first_map)
    else:
        names = set().union(*maps)
    for name in names:
        first = first_map.get(name)
        if first is not None:
            for m in rest:
                if m.get(name) is not first:
                    break
            else:  # no branch touched it (the common case)
                out[name] = first
                continue
        options = [m.get(name) for m in maps]
        if all(o is not None for o in options) and all(
                same(o.value, first.value) or o.value == first.value for o in options):
            out[name] = options[-1]
            continue
        present = [o for o in options if o is not None]
        anchor = present[-1]
        values = ", ".join(sorted({o.text or repr(o.value) for o in present}))
        missing = " or unset" if len(present) < len(options) else ""
        reason = f"{values}{missing} depending on `{split.what}` ({split.loc.path}:{split.loc.line})"
        paths = None
        if unset is not None or not missing:
            paths = paths_of([(o.value, o.location, o.text) if o is not None else (unset[i], None, None)
                            for i, o in enumerate(options)], split)  # text None: not set on that path
        out[name] = Assignment(anchor.key, OneOf(reason, paths) if paths else Unknown(reason), anchor.location,
                               anchor.source, anchor.text, anchor.via, anchor.op)
    return out


def paths_of(per_branch: list[tuple[object, Location | None, str | None]], split: BranchPoint):
    """A OneOf's paths: (value, steps, where it was set, as written), nested splits flattened; None when a
    value is not a plain literal or there are too many paths. "As written" is None on a path that leaves the
    key unset (its value is then its section's default, or the section's unknown base)."""
    paths = []
    for index, ((value, where, text), condition) in enumerate(zip(per_branch, split.paths)):
        step = (split.id, index, condition, split.flags) if split.flags else (split.id, index, condition)
        if isinstance(value, OneOf):
            paths.extend((v, (step, *steps), w or where, t) for v, steps, w, t in value.paths)
        elif value is KEY_DEFAULT or isinstance(value, Unknown) or _plain(value):
            paths.append((value, (step,), where, text))
        else:
            return None
    return tuple(paths) if len(paths) <= MAX_PATHS else None


def _plain(value) -> bool:
    if isinstance(value, (list, tuple)):
        return all(_plain(v) for v in value)
    return value is None or isinstance(value, (bool, int, float, str))


def narrowings(test) -> list[tuple[object, object]]:
    """What an `if` test fixes on the branch it guards: (target, literal) AST pairs for each conjunct of the form
    `x == LITERAL`, `x is True/False/None` or `x in (LITERAL,)` (one element), x a name or an attribute chain
    (`cfg.optimizer.optimizer == "adam"`, or `getattr(x, "name", d)` read as `x.name`). On that branch x is that
    literal, whatever it was before the test."""
    conjuncts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
    found = []
    for part in conjuncts:
        if not (isinstance(part, ast.Compare) and len(part.ops) == 1):
            continue
        op, target, literal = part.ops[0], part.left, part.comparators[0]
        if isinstance(target, ast.Constant) and not isinstance(literal, ast.Constant):
            target, literal = literal, target  # "adam" == cfg.optimizer.optimizer
        if isinstance(op, ast.In) and isinstance(literal, (ast.Tuple, ast.List, ast.Set)) and len(literal.elts) == 1:
            literal = literal.elts[0]
        elif isinstance(op, ast.Is):
            if not (isinstance(literal, ast.Constant) and literal.value in (True, False, None)):
                continue
        elif not isinstance(op, ast.Eq):
            continue
        target = _getattr_target(target)
        if isinstance(literal, ast.Constant) and isinstance(target, (ast.Name, ast.Attribute)):
            found.append((target, literal))
    return found


def _getattr_target(node):
    """`getattr(x, "name", default)` as the attribute `x.name` it reads (Megatron Bridge's run_recipe.py tests
    `getattr(optimizer, "optimizer", None) == "adam"`), x a name or an attribute chain; any other node as it is."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" and \
            len(node.args) in (2, 3) and not node.keywords and isinstance(node.args[0], (ast.Name, ast.Attribute)) \
            and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str) and \
            node.args[1].value.isidentifier():
        return ast.copy_location(ast.Attribute(value=node.args[0], attr=node.args[1].value, ctx=ast.Load()), node)
    return node
