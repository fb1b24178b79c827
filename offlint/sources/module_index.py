"""Which of the tree's Python files a dotted module name is, and what a reading's answers depend on of the set of files.

A reading that imports `recipes.common` depends on which files claim that name, not only on their texts: a module
added next to it (a second `recipes/common.py` in another tree, a `torch.py`) or removed changes what the import
gives. So each question a reader asks of the set of files is noted as a *lookup*, a dependency whose state is the
answer's inputs now (`lookup_state`): the cache keeps it beside the files a reading used and compares it as it
compares a file's digest. An added or removed file re-reads only the files whose lookups it changes, where keying
the whole cache by the set of files read the whole tree again after any file was added (14 s against 0.45 s for a
pre-commit run on Megatron Bridge).

A lookup's key starts with NUL, which no path holds, so it never names a file.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import PurePosixPath

from offlint.scope import nearest

LOOKUP = "\0"
_MODULE, PACKAGE_LOOKUP, FUNCTION_LOOKUP, _FILE = LOOKUP + "m:", LOOKUP + "p:", LOOKUP + "f:", LOOKUP + "k:"
WRITER_LOOKUP = LOOKUP + "w:"
# A module-level `def NAME(`: after a line break (a literal the regex engine searches for, where `^` with re.M is
# tried at every character: 0.10 s against 0.02 s over Megatron Bridge's texts, in each process indexing them), or at
# the start
_DEFINITION = re.compile(r"\ndef ([A-Za-z_]\w*)\s*\(")
_DEFINITION_FIRST = re.compile(r"def ([A-Za-z_]\w*)\s*\(")
# A module-level write into a dict: `NAME.setdefault(...)`, `NAME.update(...)`, `NAME[...] = ...` at column 0, and
# what a text must hold to have one (a search anchored on a line break: a sixth of the full pattern's time)
_MODULE_WRITE = re.compile(r"^([A-Za-z_]\w*)(\.setdefault\(|\.update\(|\[[^\n]*\][ \t]*=(?!=))", re.M)
_MAY_WRITE = re.compile(r"\n[A-Za-z_]\w*(?:\.setdefault\(|\.update\(|\[)")


def module_parts(path: str) -> list[str]:
    """The parts of a file's path without its suffix (`a/b/c.py` -> a, b, c), as PurePosixPath gives them, with
    plain string operations for the usual spelling (a tenth of the time: 1,700 files in a pre-commit run)."""
    if path.endswith(".py") and not path.endswith("/.py") and path != ".py" and "//" not in path and \
            not path.startswith(("/", "./")) and "/./" not in path and "\\" not in path:
        return path[:-3].split("/")
    return list(PurePosixPath(path).with_suffix("").parts)


def dotted_names(path: str) -> list[str]:
    """Every dotted module name a file answers to: its module name and each of its suffixes (`a.b.c`, `b.c`,
    `c` for `a/b/c.py`; a package's `__init__.py` answers for the package)."""
    parts = module_parts(path)
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return [".".join(parts[start:]) for start in range(len(parts))]


def module_lookup(dotted: str) -> str:
    return _MODULE + dotted


def package_lookup(package: str, suffix: str) -> str:
    return f"{PACKAGE_LOOKUP}{package}:{suffix}"


def function_lookup(name: str) -> str:
    return FUNCTION_LOOKUP + name


def file_lookup(path: str) -> str:
    return _FILE + path


def writer_lookup(folder: str, name: str) -> str:
    return f"{WRITER_LOOKUP}{folder}:{name}"


def _folders(path: str) -> list[str]:
    """The folders a file lies under, nearest first ("" for the tree's top)."""
    parts = path.split("/")[:-1]
    return ["/".join(parts[:end]) for end in range(len(parts), -1, -1)]


def outside_writes(text: str) -> dict[str, bool]:
    """The dicts a module writes into at module level without defining them there (`from .ov2 import TABLE` then
    `TABLE.setdefault(...)`: entries another module's dict gets when this module is imported), each with whether
    a write may replace an entry the dict has (`update`, `TABLE[k] = v`; `setdefault` never does)."""
    found: dict[str, bool] = {}
    if _MAY_WRITE.search(text) is None and not _MODULE_WRITE.match(text):
        return found
    for name, how in _MODULE_WRITE.findall(text):
        found[name] = found.get(name, False) or how != ".setdefault("
    return {name: replaces for name, replaces in found.items()
            if not re.search(rf"^{name}[ \t]*(?::[^=\n]*)?=(?!=)", text, re.M)}


def lookups_of(path: str, text: str | None) -> list[str]:
    """The lookups whose answer a Python file at `path` with `text` takes part in (the ones its adding or removing
    may change), but for package listings, which `package_lookup_matches` tells."""
    return [file_lookup(path), *(module_lookup(name) for name in dotted_names(path)),
            *(function_lookup(name) for name in dict.fromkeys(defined_functions(text or ""))),
            *(writer_lookup(folder, name) for name in outside_writes(text or "") for folder in _folders(path))]


def package_lookup_matches(key: str, path: str) -> bool:
    """Whether `path` is among the files the package lookup `key` lists."""
    return _listed(path, ".".join(dotted_names(path)[:1]), *_package_and_suffix(key))


def _package_and_suffix(key: str) -> tuple[str, str]:
    package, _, suffix = key[len(PACKAGE_LOOKUP):].rpartition(":")
    return package, suffix


def _listed(path: str, module: str, package: str, suffix: str) -> bool:
    """Whether the file at `path`, module `module`, is one a package listing of `package` and `suffix` names."""
    return path.endswith(suffix) and f".{package}." in f".{module}"


class ModuleIndex:
    """The tree's Python files by dotted module name: a name maps to the file it is the longest path suffix of, or,
    where several files claim it, to none until an importer is given (`path_of`). Built once per run from the
    discovered paths; its answers are fixed for the run."""

    def __init__(self, paths: list[str], read_text):
        """`paths`: every Python file of the tree (as displayed); `read_text(path)`: its text or None (read only
        when a function's files are asked for)."""
        self._read_text = read_text
        self._by_module: dict[str, str | None] = {}  # dotted suffix -> path (None when ambiguous)
        self._claims: dict[str, list[str]] = {}  # an ambiguous dotted suffix -> every path that claims it
        self._nearest: dict[tuple[str, str], str | None] = {}  # path_of's answers for the claimed ones
        self.module_of: dict[str, str] = {}
        self._definitions: dict[str, list[str]] | None = None  # function name -> files (function_paths)
        # folder -> dict name -> (file, replaces): the writers of each folder asked about (writers)
        self._writers: dict[str, dict[str, list[tuple[str, bool]]]] = {}
        for path in paths:
            names = dotted_names(path)
            if not names:
                continue
            self.module_of[path] = names[0]
            for dotted in names:
                known = self._by_module.get(dotted, path)
                self._by_module[dotted] = path if known == path else None  # None: two files claim it
                if known != path:
                    claims = self._claims.setdefault(dotted, [] if known is None else [known])
                    claims.append(path)

    def claims(self, dotted: str) -> list[str]:
        """Every file that claims the dotted name, in the order of the paths given."""
        found = self._by_module.get(dotted)
        return [found] if found is not None else list(self._claims.get(dotted, ()))

    def path_of(self, module: str, importer: str | None = None) -> str | None:
        """The file of a dotted module name. When several files claim it (two trees with their own `recipes/`
        package side by side in one repository), the one nearest to the importing file: the one sharing the
        most leading directories with it, if only one does; else None (unknown)."""
        found = self._by_module.get(module)
        if found is not None or importer is None or module not in self._claims:
            return found
        key = (module, importer)
        if key not in self._nearest:
            closest = nearest(self._claims[module], importer)
            self._nearest[key] = closest[0] if len(closest) == 1 else None
        return self._nearest[key]

    def paths_in_package(self, package: str, suffix: str = "") -> list[str]:
        """The files whose dotted module name lies under `package`, whatever directories lead to it
        (`src/megatron/bridge/models/...` for "megatron.bridge.models"), ending in `suffix`, in sorted order."""
        return sorted(path for path, module in self.module_of.items() if _listed(path, module, package, suffix))

    def function_paths(self, name: str) -> list[str]:
        """The files defining a module-level function `name`, found by text (indexed on first use)."""
        if self._definitions is None:
            self._definitions = {}
            for path in self.module_of:
                for found in dict.fromkeys(defined_functions(self._read_text(path) or "")):
                    self._definitions.setdefault(found, []).append(path)
        return list(self._definitions.get(name, ()))

    def writers(self, folder: str, name: str) -> list[tuple[str, bool]]:
        """The files under `folder` that write into a dict `name` they do not define, at module level, each with
        whether a write may replace an entry (outside_writes), found by text (indexed per folder on first use).
        A module's table is filled by modules of its own package (`from .ov2 import TABLE`): the folder is the
        defining module's, so a pre-commit run reads that package's texts, not the whole tree's (0.25 s on Bridge)."""
        found = self._writers.get(folder)
        if found is None:
            found = self._writers[folder] = {}
            prefix = folder + "/" if folder else ""
            for path in self.module_of:
                if path.startswith(prefix):
                    for written, replaces in outside_writes(self._read_text(path) or "").items():
                        found.setdefault(written, []).append((path, replaces))
        return list(found.get(name, ()))

    def knows(self, path: str) -> bool:
        return path in self.module_of


def defined_functions(text: str) -> list[str]:
    """The names of the module-level functions a text defines (`def NAME(` at the start of a line), in order."""
    first = _DEFINITION_FIRST.match(text)
    return ([first.group(1)] if first else []) + _DEFINITION.findall(text)


def lookup_state(key: str, index: ModuleIndex) -> str:
    """What a lookup depends on now, to compare with what a cache entry noted: a digest of the files answering it
    (a package's listing can be a hundred paths, kept in every entry that asked for it)."""
    if key.startswith(_MODULE):
        found = index.claims(key[len(_MODULE):])
    elif key.startswith(PACKAGE_LOOKUP):
        found = index.paths_in_package(*_package_and_suffix(key))
    elif key.startswith(FUNCTION_LOOKUP):
        found = index.function_paths(key[len(FUNCTION_LOOKUP):])
    elif key.startswith(WRITER_LOOKUP):
        folder, _, name = key[len(WRITER_LOOKUP):].rpartition(":")
        found = [f"{path}:{'replaces' if replaces else 'adds'}" for path, replaces in index.writers(folder, name)]
    elif key.startswith(_FILE):
        found = [key[len(_FILE):]] if index.knows(key[len(_FILE):]) else []
    else:
        return "?"  # not a lookup offlint notes: never the state an entry recorded
    return "lookup:" + hashlib.blake2b("\n".join(sorted(found)).encode("utf-8", "surrogatepass"),
                                       digest_size=16).hexdigest()
