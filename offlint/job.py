"""What every stage of reading a tree shares: the job (the files, their texts, the rules), and the texts' digests.

A `Job` is made once per check by `api`, inherited by forked workers (workers.py), never pickled per file. The
texts are read on first use: a pre-commit run reads only the files it needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from offlint.cache import digest
from offlint.discover import SourceFile
from offlint.reading import OnFirstUse
from offlint.rules import Rule
from offlint.sources.module_index import LOOKUP, ModuleIndex, lookup_state
from offlint.versions import Version

Progress = Callable[[int, int], None]  # (files read, files to read)


@dataclass
class Job:
    """What every worker needs; inherited by forked workers, never pickled per file."""

    files: list[SourceFile]
    texts: Texts  # path -> text (None when unreadable), the Python tree included, read on first use
    python_paths: list[str]  # the Python files imports may resolve to
    rules: list[Rule]
    version: Version
    strict: bool
    # path -> {unit name: (unit or None, its findings, what its reading used)}: the units of a file read again that
    # are still valid (_reusable_units), found by the worker that reads it; the reader skips them
    reusable: Callable[[str], dict[str, tuple]] = lambda path: {}
    encode: Callable[[object], bytes] | None = None  # the cache's encoding: workers encode what they read, in parallel
    # Whether outcomes note what their reading used (deps, parts, unit_used, calls): only a cache reads them; a run
    # without one (--no-cache) skips encoding the call records and the definition digests
    keep_uses: bool = True
    # Whether forked workers keep the units of a file that holds only recipes, sending them only when linking names
    # them (_worker_held): set by `outcomes` when a caller says which it will look up. Should a worker not answer,
    # the file's payload stored this run gives them, or, without a cache, the file is read again
    hold_recipes: bool = False
    _index: ModuleIndex | None = None

    def index(self) -> ModuleIndex:
        """The module index of the Python files (made on first use; forked workers inherit it)."""
        if self._index is None:
            self._index = ModuleIndex(self.python_paths, self.texts.get)
        return self._index


class Texts(OnFirstUse):
    """path -> text; None for a file that cannot be read (why: `problems`)."""

    def __init__(self, read):
        super().__init__(self._text)
        self._read = read  # path -> (text, error message or "")
        self.problems: dict[str, str] = {}

    def _text(self, path: str) -> str | None:
        text, error = self._read(path)
        if error:
            self.problems[path] = error
        return None if error else text


class Digests(OnFirstUse):
    """path -> digest of its text; None for a file that cannot be read. A lookup of the set of files
    (module_index) -> what its answer depends on now."""

    def __init__(self, texts: Texts, index: Callable[[], ModuleIndex]):
        super().__init__(self._state)
        self._texts, self._index = texts, index

    def _state(self, path: str) -> str | None:
        if path.startswith(LOOKUP):
            return lookup_state(path, self._index())
        text = self._texts.get(path)
        return None if text is None else digest(text)


def digests_of(job: Job, paths: list[str]) -> Digests:
    """The digests of `paths`, computed now (the whole-run cache key needs every one of them)."""
    digests = Digests(job.texts, job.index)
    for path in paths:
        digests.get(path)
    return digests
