"""The Python files of the linted tree, and how the names one module imports map onto another module.

Recipes set values through layers: base builders imported from `recipes/common.py`, recipes inherited from
other modules through `x_config as y_config` aliases and `__init__.py` re-exports, helpers and constants
defined elsewhere. The project lets a reader follow those names: it maps dotted module names to files
(by the longest path suffix that identifies a file), parses a file only when a name is first looked up in
it, and keeps one reader per file. Cycles are cut by the readers' call depth and a re-export chain guard.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from offlint.scope import nearest
from offlint.sources.module_index import (ModuleIndex, file_lookup, function_lookup, module_lookup,
                                          package_lookup, writer_lookup)
from offlint.sources.python_records import MARK, CallRecord
from offlint.sources.python_values import MAX_DEPTH, NOT_KEPT, ConfigObj, configs_in, serial_mark

# What a reading used of another module, as the cache records it (part_digests.definition_digests): a path alone is the
# whole file; (path, MODULE) its module-level statements (imports, constants, classes, the names it defines);
# (path, name) one of its module-level functions.
MODULE = "<module>"


class Definitions(dict):
    """A module's functions by name (`PythonReader.functions`), noting each one handed out as used by the
    reading in progress, so that an edit of one function re-reads only what ran it. Asking whether a name is
    defined is not noted: the names a module defines are part of MODULE."""

    def __init__(self, project: "PythonProject", path: str):
        super().__init__()
        self._project, self._path = project, path

    def __getitem__(self, name):
        self._project.touched.add((self._path, name))
        return super().__getitem__(name)

    def get(self, name, default=None):
        if name in self:
            self._project.touched.add((self._path, name))
        return super().get(name, default)

    def quietly(self, name):
        """The function `name` (or None), not noted as used: python_following._call notes it, or a record of the call
        that stands for it."""
        return dict.get(self, name)

    def _all(self):
        self._project.touched.update((self._path, name) for name in dict.keys(self))

    def values(self):
        self._all()
        return super().values()

    def items(self):
        self._all()
        return super().items()

    def __iter__(self):
        self._all()
        return super().__iter__()


class PythonProject:
    def __init__(self, paths: list[str], read_text, index: ModuleIndex | None = None):
        """`paths`: every Python file of the tree (as displayed); `read_text(path)` returns its text or None;
        `index`: the module index of those paths, when the caller has one."""
        self._read_text = read_text
        self._index = index if index is not None else ModuleIndex(paths, read_text)
        self._readers: dict[str, object] = {}
        self.via_stack: list[str] = []  # shared by all readers: the calls being followed, outermost first
        self.results: dict[tuple, object] = {}  # call_result's values (bridge_models' registrations, settings)
        # While not None, every string an f-string builds is appended (perf_scripts: the recipe name a
        # launcher computes from its flags).
        self.string_probe: list[str] | None = None
        # What a read depended on, for the content-hash cache: `touched` collects the files (or the parts of
        # them, see MODULE) used while reading the current file; a reader's preparation and a cached call result
        # remember their own.
        self.touched: set = set()
        self._reader_deps: dict[str, frozenset] = {}
        # Per unit of a file being read, keyed by (path, unit name): a unit still valid from the cache with what
        # its reading used (set by the pipeline; None where the function gave no unit), and what each unit read
        # now used (for the cache: an edit re-reads only the units that used what changed).
        self.unit_reuse: dict[tuple[str, str], tuple[object, frozenset]] = {}
        self.unit_used: dict[tuple[str, str], frozenset] = {}
        self._unreadable: set[str] = set()
        self._parsed: dict[str, object] = {}  # parsed(): path -> syntax tree (None: missing or does not parse)
        self._result_deps: dict[tuple, frozenset[str]] = {}
        # Followed calls with plain arguments, run once and reused (followed_call): per (file, function, arguments)
        # what each run that could be reused returned, with what it used.
        self._calls: dict[tuple, list[_Memo]] = {}
        self.deepest = 0  # the deepest function activation run so far (python_following.run_function)
        self.refused = 0  # calls not followed because they were too deep (python_values.MAX_DEPTH)
        # Config objects that module constants hold (modules' own are not constants, so in Bridge none), each with
        # its state once its module was prepared: a followed call that changes one has an effect besides its value.
        self._shared: list[tuple[object, object]] = []
        # The records of followed calls noted as used (python_records): (MARK, path, function, arguments, depth) ->
        # its CallRecord, or the stored form of one kept from the cache (pipeline).
        self.records: dict[tuple, object] = {}
        # What code that looks at syntax trees without running them worked out from one node alone, for the project's
        # life (bridge_schedule: a function's own nodes, a class's own verdict): key -> (node, value).
        self.node_memo: dict[tuple, tuple] = {}

    # The questions asked of the set of files below note a lookup (module_index): a file added or removed
    # changes the reading when it changes their answers.

    def function_paths(self, name: str, near: str) -> list[str]:
        """The files defining a module-level function `name` (found by text), nearest to the file `near` first: a
        name a program computes at run time (perf_scripts' selected recipe)."""
        self.touched.add(function_lookup(name))
        found = self._index.function_paths(name)
        return nearest(found, near) if len(found) > 1 else found

    def writers(self, folder: str, name: str) -> list[tuple[str, bool]]:
        """The files under `folder` that add entries to a dict `name` they import, as they are imported, each with
        whether it may replace one the dict has (module_index.outside_writes)."""
        self.touched.add(writer_lookup(folder, name))
        return self._index.writers(folder, name)

    def paths_in_package(self, package: str, suffix: str = "") -> list[str]:
        """The tree's Python files whose dotted module name lies under `package`, whatever directories lead to it
        (`src/megatron/bridge/models/...` for "megatron.bridge.models"), ending in `suffix`, in sorted order."""
        self.touched.add(package_lookup(package, suffix))
        return self._index.paths_in_package(package, suffix)

    def text(self, path: str) -> str | None:
        """A file's text, noted as read whole (the cache keys the reading on it)."""
        self.touched.add(path)
        return self._read_text(path)

    def parsed(self, path: str):
        """A file's syntax tree, parsed once per project (its reader's, when a reader parsed it), noted as read
        whole as `text` notes it; None when it cannot be read or parsed. For code that looks at a module without
        running it (bridge_models, bridge_schedule): Megatron Bridge's model bridges were parsed again for each
        architecture, bridge method and class looked up (193 parses of 82 files in a cold check)."""
        self.touched.add(path)
        reader = self._readers.get(path)
        if reader is not None:
            return reader.module
        if path not in self._parsed:
            import ast

            text = self._read_text(path)
            try:
                self._parsed[path] = ast.parse(text) if text else None
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                self._parsed[path] = None
        return self._parsed[path]

    def adopt_parsed(self, modules: dict) -> None:
        """Syntax trees of files' texts parsed elsewhere (path -> tree; the pipeline's definition digests of a
        changed file), for a reader or `parsed` to take instead of parsing them again."""
        for path, module in modules.items():
            self._parsed.setdefault(path, module)

    def knows(self, path: str) -> bool:
        """Whether `path` (as displayed) is one of the tree's Python files."""
        self.touched.add(file_lookup(path))
        return self._index.knows(path)

    def module_name(self, path: str) -> str:
        return self._index.module_of.get(path, PurePosixPath(path).stem)

    def is_package(self, path: str) -> bool:
        return PurePosixPath(path).name == "__init__.py"

    def path_of(self, module: str, importer: str | None = None) -> str | None:
        """The file of a dotted module name. When several files claim it (two trees with their own `recipes/`
        package side by side in one repository), the one nearest to the importing file: the one sharing the
        most leading directories with it, if only one does; else None (unknown)."""
        self.touched.add(module_lookup(module))
        return self._index.path_of(module, importer)

    def has_reader(self, path: str) -> bool:
        """Whether `path` was read already (another file imported it)."""
        return self._readers.get(path) is not None

    def reader(self, path: str, text: str | None = None, module=None):
        """The (prepared) reader of a file, parsed on first use; None when it cannot be read or parsed.

        A caller that already parsed the file passes `text` and `module`, so it is not parsed twice.
        """
        # A file that cannot be read or parsed counts whole; one being prepared (an import cycle) by its MODULE.
        self.touched.add(path if path in self._unreadable else (path, MODULE))
        if path in self._readers:
            self.touched.update(self._reader_deps.get(path, ()))
            return self._readers[path]
        self._readers[path] = None  # guards against import cycles while preparing
        text = self._read_text(path) if text is None else text
        if text is None:
            self._unreadable.add(path)
            self.touched.add(path)
            return None
        from offlint.sources.python import PythonReader, parse

        if module is None:
            module = self._parsed.pop(path, None)  # parsed already for a look without running it (parsed())
        if module is None:
            try:
                module = parse(path, text)
            except (SyntaxError, ValueError, RecursionError):
                self._unreadable.add(path)
                self.touched.add(path)
                return None
        reader = PythonReader(path, module, text, project=self)
        reader.functions = Definitions(self, path)
        self._readers[path] = reader
        with self.tracking() as deps:
            reader.prepare()
        self._reader_deps[path] = frozenset(deps)
        self._shared.extend((obj, _state(obj)) for obj in configs_in(reader.constants.values()))
        return reader

    def function_unit(self, path: str, name: str, compute):
        """The unit of function `name` of `path` (None when it gives none): reused when the cache holds it still
        valid, else computed; either way what it used is noted, its own function and module-level statements
        included."""
        reused = self.unit_reuse.get((path, name))
        if reused is not None:
            unit, used = reused
            self.touched.update(used)
            self.unit_used[(path, name)] = used
            return unit
        with self.tracking() as used:
            unit = compute()
            self.touched.add((path, MODULE))
            # what preparing its module asked (a table other modules fill: python._note_outside_writes)
            self.touched.update(self._reader_deps.get(path, ()))
            if "." not in name:  # a module-level function (a method is part of its class, in MODULE)
                self.touched.add((path, name))
        self.unit_used[(path, name)] = frozenset(used)
        return unit

    def read_already(self, path: str):
        """The reader of a file this project has read (None when it has not, or could not); nothing is noted."""
        return self._readers.get(path)

    def call_result(self, key: tuple, compute):
        """A value computed once per project and key (a pure function of the tree's files: bridge_models); the file
        reads of its computation are noted again for each caller. Calls the reader follows: followed_call."""
        if key not in self.results:
            with self.tracking() as deps:
                self.results[key] = compute()
            self._result_deps[key] = frozenset(deps)
        self.touched.update(self._result_deps.get(key, ()))
        return self.results[key]

    def followed_call(self, key: tuple, depth: int, compute, keep, record: tuple | None = None):
        """A followed call whose arguments are plain values (python_following._call): run by `compute` (the callee's
        activation at `depth`), or reused from an earlier run of the same callee with the same arguments, as
        (result, reused, recorded). A reused result is the stored one: the caller gets its own copy of it. What the
        run used (files, parts of modules) is noted for the caller either way, as the run would note it; or, when
        `record` ((path, function, arguments as JSON): python_records.call_args) is given and the run is kept, a
        record of the call instead (recorded: True), which stands for the function's part and all the run used.

        A run is kept for reuse only when it had no effect besides its value, so that skipping it changes nothing:
        it changed no config object a module constant holds, the config objects it returned are its own (made
        during the run and held by no constant: `keep(result, own)` turns the result into the stored form, given
        which config objects are the run's own, or says NOT_KEPT), and
        the call depth limit did not cut it short in a way another caller's depth would not (kept with its
        depth; reused at another depth only where no call was refused and none would be). While a probe collects
        the strings the reading builds (`string_probe`), every call runs."""
        for memo in self._calls.get(key, ()):
            if memo.usable_at(depth):
                marker = self._marker(memo, record, depth)
                if marker is not None:
                    self.touched.add(marker)
                else:
                    self.touched.update(memo.deps)
                self.deepest = max(self.deepest, depth + memo.reach)
                self.refused += memo.refused
                return memo.result, True, marker is not None
        mark = serial_mark()
        known = len(self._shared)
        before = [(obj, _state(obj)) for obj, _ in self._shared]
        outer_deepest, outer_refused = self.deepest, self.refused
        self.deepest = depth
        outer = self.touched
        deps: set = set()
        self.touched = deps
        finished = False
        try:
            result = compute()
            finished = True
        finally:
            reached, refused = self.deepest, self.refused - outer_refused
            self.deepest = max(outer_deepest, reached)
            self.touched = outer
            if not finished:
                outer.update(deps)
        marker = None
        if self.string_probe is None and all(_state(obj) == old for obj, old in (*before, *self._shared[known:])):
            shared = {id(obj) for obj, _ in self._shared}
            kept = keep(result, lambda obj: obj.serial > mark and id(obj) not in shared)
            if kept is not NOT_KEPT:
                memo = _Memo(kept, frozenset(deps), depth, reached - depth, refused)
                if record is not None:
                    path, function, args = record
                    used = {(path, function), (path, MODULE)}
                    nested = []
                    for dep in deps:
                        if type(dep) is tuple and dep and dep[0] == MARK:
                            found = self.records.get(dep)
                            if not isinstance(found, CallRecord):
                                used = None  # a stored record inside: not at hand to nest
                                break
                            nested.append((dep[4], found))
                        else:
                            used.add(dep)
                    if used is not None:
                        nested.sort(key=lambda item: (item[1].path, item[1].function, item[1].args, item[0]))
                        memo.record = CallRecord(path, function, args, memo.reach, refused, frozenset(used),
                                                 tuple(nested), kept)
                self._calls.setdefault(key, []).append(memo)
                marker = self._marker(memo, record, depth)
        if marker is not None:
            outer.add(marker)
        else:
            outer.update(deps)
        return result, False, marker is not None

    def _marker(self, memo: "_Memo", record: tuple | None, depth: int) -> tuple | None:
        """The record a reading notes for a call `memo` answers (None: the call leaves none, its uses are noted)."""
        if record is None or memo.record is None or memo.record.args != record[2]:
            return None
        marker = (MARK, record[0], record[1], record[2], depth)
        self.records[marker] = memo.record
        return marker

    def tracking(self):
        """Collect the files read inside a `with` block separately (and also into the enclosing collection)."""
        return _Tracking(self)

    def module_reader(self, module: str, importer: str | None = None, mentioning: str = ""):
        """The reader of a dotted module name. `mentioning`: only when the module's text contains that word (it
        is not parsed and run otherwise: the argparse options of every module a launcher imports names from
        live in the few that say `add_argument`)."""
        path = self.path_of(module, importer)
        if not path:
            return None
        if mentioning and path not in self._readers:
            self.touched.add(path)  # what it says decides, even when that is nothing
            text = self._read_text(path)
            if text is None or mentioning not in text:
                return None
        return self.reader(path)


class _Tracking:
    """PythonProject.tracking's context manager (one class: a class built per call cost 7,000 class creations a cold
    check of Megatron Bridge)."""

    __slots__ = ("project", "outer")

    def __init__(self, project: PythonProject):
        self.project = project

    def __enter__(self) -> set:
        self.outer = self.project.touched
        self.project.touched = set()
        return self.project.touched

    def __exit__(self, *exc) -> bool:
        inner = self.project.touched
        self.project.touched = self.outer
        self.project.touched.update(inner)
        return False


class _Memo:
    """One kept run of a followed call: its result (provenance relative to the call), what it used, the depth of
    the callee's activation, how much deeper its own calls went, and how many calls it did not follow for depth."""

    __slots__ = ("result", "deps", "depth", "reach", "refused", "record")

    def __init__(self, result, deps: frozenset, depth: int, reach: int, refused: int):
        self.result, self.deps, self.depth, self.reach, self.refused = result, deps, depth, reach, refused
        self.record: CallRecord | None = None  # python_records: when the call's arguments are literals

    def usable_at(self, depth: int) -> bool:
        """Whether a run at `depth` would go as this one did: at its own depth; elsewhere only when this run
        refused no call for depth, and the other would not either (shallower, or its deepest activation still
        short of the limit)."""
        return depth == self.depth or not self.refused and (depth <= self.depth or
                                                             depth + self.reach < MAX_DEPTH)


def _state(obj: ConfigObj) -> tuple:
    """What a config object holds now, its sections' objects by identity, to compare with a later state."""
    return (obj.kind, obj.section, obj.base, obj.origin, obj.guessed, obj.env_unknown, obj.env_location,
            tuple(obj.values.items()), tuple(obj.top.items()), None if obj.env is None else tuple(obj.env.items()),
            tuple((name, child, _state(child)) for name, child in obj.children.items()))
