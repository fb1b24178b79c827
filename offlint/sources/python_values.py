"""The values the Python reader computes with: config objects under construction, dataclass records, tuples of
config objects, dict literals with unreadable spreads, and a function activation's local names.

Literals are plain Python values and what offlint cannot read is an `Unknown` (types.py); these classes are the
rest. They hold no logic beyond copying and equality, so the reader (python.py) and the merging of branches
(python_branches.py) share them without depending on each other.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from itertools import count

from offlint.types import Assignment, Location, Source, Unknown

_PYTHON, _ENV = Source.PYTHON, Source.ENV  # (an enum member read from its class costs a descriptor call each time)

# Assignments and locations are frozen dataclasses, whose generated __init__ sets each field through
# object.__setattr__; the reader makes hundreds of thousands of them in a cold check of Megatron Bridge (a followed
# call's reused result copies every assignment it holds with the caller's provenance: 95,000). These build the
# same objects (same fields in the same order, so equal, hashed and pickled alike) by filling the instance's dict.
_new = object.__new__


def new_assignment(key: str, value, location: Location, source, text: str = "", via: tuple = (),
                   op: str = "set") -> Assignment:
    """`Assignment(key, value, location, source, text, via, op)`, about twice as fast. A module or a function of
    the tree (`activation_func=squared_relu`) is not a value a configuration can be checked or stored with: it is
    unknown."""
    if type(value) in _REFERENCES:
        value = Unknown(f"`{text}` is {value!r}, not a value offlint reads")
    made = _new(Assignment)
    state = made.__dict__
    state["key"], state["value"], state["location"], state["source"] = key, value, location, source
    state["text"], state["via"], state["op"] = text, via, op
    return made


def with_via(a: Assignment, via: tuple) -> Assignment:
    """`a` with its provenance replaced by `via` (`dataclasses.replace(a, via=via)`), about twice as fast."""
    made = _new(Assignment)
    state = made.__dict__
    state.update(a.__dict__)
    state["via"] = via
    return made


def new_location(path: str, line: int, col: int) -> Location:
    """`Location(path, line, col)`, a third faster."""
    made = _new(Location)
    state = made.__dict__
    state["path"], state["line"], state["col"] = path, line, col
    return made


class PartialDict(dict):
    """A dict literal with a `**spread` offlint could not read: its own entries are known, the rest is not."""

    def __init__(self, items, reason: str):
        super().__init__(items)
        self.reason = reason


class Registry(PartialDict):
    """A module's dict that a decorator of the module fills (`@register def bf16_mixed(): ...` with
    `REGISTRY[func.__name__] = func`): the functions registered under their own names are known entries, the
    rest (keys derived otherwise) is not (python_following._note_registries). Also a module's dict that other
    modules only add to with `setdefault` as they are imported: its own entries stay (python._note_outside_writes)."""



class Record:
    """An instance of a plain @dataclass of the tree (perf `WorkloadBaseConfig(...)`): field values by name.

    Historical perf configs build them as module constants and derive variants with `replace(BASE, key=...)`;
    code that reads `settings.cpu_offloading_num_layers` gets the value, and `settings.sequence_parallel`, a
    @property of the class, what the property computes from the fields (python_expressions).

    `made` says, for each field the tree's code gave, which records passed it on, outermost first: one step per
    record (`from replace(...) at FILE:LINE`), the last the one that set it. A config write from the field carries
    them after its calls (Statements._assignment), so `replace(BASE, cuda_graph_impl="none")` is seen to
    override a scope BASE chose, though one helper then writes both (conditions/settings.py overrides).
    """

    def __init__(self, name: str, fields: dict, plain: bool = False, origin: str = "", made: dict | None = None):
        self.name = name
        self.fields = dict(fields)
        self.plain = plain  # its class subclasses nothing, so it is never a str, int, list, ... (isinstance)
        self.origin = origin  # the module that defines its class ("" for a namespace offlint builds)
        self.made: dict[str, tuple[str, ...]] = made or {}

    def replaced(self, changes: dict, step: str = "") -> "Record":
        """A copy with `changes`; `step` names the call that made it (`replace(...)`), else the changed fields'
        origins are not known."""
        if step:
            made = {name: (step, *steps) for name, steps in self.made.items()}
            made.update((name, (step,)) for name in changes)
        else:
            made = {name: steps for name, steps in self.made.items() if name not in changes}
        return Record(self.name, {**self.fields, **changes}, self.plain, self.origin, made)

    def __eq__(self, other) -> bool:
        return isinstance(other, Record) and (self.name, self.fields) == (other.name, other.fields)

    def __hash__(self) -> int:
        return hash((self.name, repr(sorted(self.fields.items(), key=lambda kv: kv[0]))))

    def __repr__(self) -> str:
        return f"{self.name}(...)"


NO_PROPERTY = object()  # a record's class defines no such field or @property (python_constructors._record_property)


class ModuleRef:
    """A module a program imports by a name it computes (`importlib.import_module(f"configs.{family}")`); names
    read from it are looked up in the tree."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"<module {self.name}>"


class FunctionRef:
    """A function of the tree held in a variable (`builder = getattr(module, name)`), called later."""

    def __init__(self, reader, fn):
        self.reader = reader
        self.fn = fn

    def __repr__(self) -> str:
        return f"<function {self.fn.name}>"


_REFERENCES = (ModuleRef, FunctionRef)  # what new_assignment does not store as a value


class ObjectTuple(tuple):
    """A tuple holding config objects (`return optimizer, scheduler`), kept whole so the caller can unpack it."""


_SERIALS = count()


def serial_mark() -> int:
    """A number every config object created from now on exceeds (ConfigObj.serial)."""
    return next(_SERIALS)


# A section object's base when the container holds None there: Bridge's ConfigContainer keeps `comm_overlap` None
# unless a recipe gives one (training/config.py:1007 at Bridge 067f987, `Optional[CommOverlapConfig] = None`), and a
# recipe may set it back (`cfg.comm_overlap = None`). Its keys read as unset (their defaults, None), and code that
# reads the section gets None (`if cfg.comm_overlap is not None:` is decided).
SECTION_NONE = "none"
OPTIONAL_SECTIONS = ("comm_overlap",)


class ConfigObj:
    """A config object under construction: a container (with sections) or one section's object."""

    def __init__(self, kind: str, base: object, section: str = ""):
        # Creation order: a followed call's result is its own when every config object in it is newer than the
        # call (python_project.PythonProject.followed_call).
        self.serial = next(_SERIALS)
        self.kind = kind  # "container" or "section"
        self.section = section  # for a section object: "model", "optimizer", "ddp", ...
        self.base = base  # "default" or Unknown: what unset keys are
        self.values: dict[str, Assignment] = {}  # field -> last assignment (section objects)
        self.children: dict[str, ConfigObj] = {}  # section -> object (containers)
        self.env: dict[str, Assignment] | None = None  # cfg.env_vars, when assigned from a literal
        self.env_unknown = ""  # why cfg.env_vars is not known (assigned from something offlint cannot read)
        self.env_location: Location | None = None  # where cfg.env_vars was last assigned
        self.top: dict[str, Assignment] = {}  # container-level keys such as mixed_precision
        self.origin = ""  # "megatron-core" when built from a class imported from megatron.core, "bridge" for Bridge's
        # A section taken for one by its receiver's name alone (`model_cfg.x = 1`, `md.num_layers = 2` of a
        # SimpleNamespace: python_statements._implicit_receiver): what class it is, if any, is not known
        self.guessed = False

    def child(self, section: str) -> "ConfigObj":
        if section not in self.children:
            self.children[section] = self.blank(section)
        return self.children[section]

    def env_to_change(self, why: str) -> dict:
        """The environment a write changes in place (`cfg.env_vars[...] = `, `.update`, `.pop`, ...): an empty one
        where the config holds none yet; then, where its base is not Bridge's default, the entries before the write
        are that base's, unknown (`why`)."""
        if self.env is None:
            self.env = {}
            if self.base != "default":
                self.env_unknown = self.env_unknown or why
        return self.env

    def blank(self, section: str) -> "ConfigObj":
        """A new section object as this container holds `section` when nothing set it: its own base (defaults,
        or unknown), or None for an optional section of a container built with its defaults."""
        none = section in OPTIONAL_SECTIONS and self.base == "default"
        return ConfigObj("section", SECTION_NONE if none else self.base, section)

    def copy(self) -> "ConfigObj":
        """A copy with copies of its sections and of its dicts (the assignments shared), a serial of its own taken
        before its sections' (as `ConfigObj(...)` and then each section's copy take them). Its instance dict is
        filled in __init__'s order without running __init__: every branch of an undecided `if` copies the config
        objects a function holds (24,700 copies reading Megatron Bridge 067f987)."""
        other = _new(ConfigObj)
        state = other.__dict__
        state["serial"] = next(_SERIALS)
        state["kind"], state["section"], state["base"] = self.kind, self.section, self.base
        state["values"] = dict(self.values)
        state["children"] = {k: v.copy() for k, v in self.children.items()}
        state["env"] = dict(self.env) if self.env is not None else None
        state["env_unknown"], state["env_location"] = self.env_unknown, self.env_location
        state["top"] = dict(self.top)
        state["origin"] = self.origin
        state["guessed"] = self.guessed
        return other


class _ReturnedNone:
    """`Frame.returned` for a function that returned None (`return`, `return None`, `return layout` with layout
    None): `returned` is None only while the function has not returned."""

    def __repr__(self) -> str:
        return "<returned None>"


RETURNED_NONE = _ReturnedNone()


class _Raised:
    """`Frame.returned` for a run that raised where no `try` of its function is around it (a `raise`, or a followed
    call that raised): nothing after it runs on that path, and a branch that raises leaves its `if` on the other
    paths only (python_statements). A unit keeps what its run built before the raise (PythonReader._function_unit)."""

    def __repr__(self) -> str:
        return "<raised>"


RAISED = _Raised()


@dataclass(frozen=True)
class MachineValue(Unknown):
    """A value of the machine the job runs on (`torch.cuda.is_available()`, a device's properties): unknown to a
    static check, and not a path the code's author chose. A split whose test reads one is one whose conditions
    offlint does not read (BranchPoint.machine): a rule holding on some of its paths only is possible (--strict), as
    Bridge's flex-dispatcher fallback for a GPU that is none of Ampere, Hopper or Blackwell is no path a GB200
    recipe takes."""


@dataclass(slots=True)
class Frame:
    """Local names of one function activation."""

    names: dict[str, object] = field(default_factory=dict)
    returned: object = None  # None: not returned yet; RETURNED_NONE: returned the value None; RAISED: raised
    depth: int = 0
    trying: int = 0  # `try` bodies the run is inside: a raise there may be caught, and is not followed
    # Some path returned while others went on (offlint merges them): a raise after it may not end every path, so it
    # is not followed (`if name in TABLE: return TABLE[name]` then `raise ValueError(...)` returns a value)
    returned_on_a_path: bool = False
    # The values the paths that returned while others went on returned, and whether every path has since ended
    # (the others raised): the function then returns one of those values (CallFollowing.run_function), as Megatron
    # Bridge's `if marker == pid: return config` then `os.execvpe(...)`, `raise RuntimeError(...)` does.
    early: tuple = ()
    ended: bool = False
    # The config objects' states on the paths that returned early, for the end of the function (settle_early): each
    # (the split, its number of paths, the object the rest of the function goes on changing, {path: its state}).
    # The statements after the split run on the other paths only: their writes are not the returned paths'.
    early_states: tuple = ()
    # Names bound to a record's field (`x = settings.cuda_graph_impl`, a parameter given one): name -> (the value
    # bound, Record.made's steps for it); a step holds while the name still holds that very value (record_steps).
    origins: dict | None = None

    def raises(self) -> None:
        """A raise on this path: it ends here, unless a `try` may catch it. Where another path returned already, the
        function has only those paths' values left to return (`ended`)."""
        if self.trying:
            return
        if self.returned_on_a_path:
            self.ended = True
        else:
            self.returned = RAISED


def record_steps(node: ast.AST, frame: Frame) -> tuple[str, ...]:
    """The records the value of `node` comes from (Record.made): for a record's field (`settings.cuda_graph_impl`)
    or a name bound to one and not rebound since (Frame.origins); () for anything else."""
    kind = type(node)
    if kind is ast.Attribute:
        held = node.value
        if type(held) is ast.Name:
            record = frame.names.get(held.id)
            if type(record) is Record:
                return record.made.get(node.attr, ())
    elif kind is ast.Name and frame.origins:
        bound = frame.origins.get(node.id)
        if bound is not None and frame.names.get(node.id) is bound[0]:
            return bound[1]
    return ()


def merge_origins(frame: Frame, subs: list[Frame], names) -> None:
    """After an `if`: a name's record steps (Frame.origins) hold where every path left it bound to the same value
    with the same steps, and the merged name is that value."""
    for name in names:
        held = [sub.origins.get(name) if sub.origins else None for sub in subs]
        first = held[0]
        if first is not None and frame.names.get(name) is first[0] and all(
                h is not None and h[0] is first[0] and h[1] == first[1] for h in held):
            if frame.origins is None:
                frame.origins = {}
            frame.origins[name] = first
        elif frame.origins:
            frame.origins.pop(name, None)


NOT_KEPT = object()  # followed_call's `keep`: the result cannot be kept for reuse
MAX_DEPTH = 8  # a function activation this deep follows no further calls (python_following)


def configs_in(values, depth: int = 0):
    """The config objects among `values` and inside the lists, tuples, dicts and records among them."""
    for value in values:
        if isinstance(value, ConfigObj):
            yield value
        elif depth < 8 and isinstance(value, (list, tuple, dict, Record)):
            inner = value.fields.values() if isinstance(value, Record) else \
                value.values() if isinstance(value, dict) else value
            yield from configs_in(inner, depth + 1)
