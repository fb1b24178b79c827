"""What every `offlint check` would otherwise rebuild from offlint's own files and the tree's .gitignore files: the
rule catalog (rules/*.yaml read and validated, about 30 ms, plus the yaml import) and each .gitignore's joined regex
(gitignore.py; importing pathspec alone took 35 ms, most of it asyncio, which pathspec's deprecation decorator
imports). Kept as JSON in the project's cache folder (cache_files.project_cache_dir), under the cache's own trust
rules: a regular file of this user that nobody else can write, data only, keyed by offlint's code and rules
(cache.fingerprint: their names, sizes and mtimes) and the Python version; a .gitignore's regex is keyed by its
lines and pathspec's installed files too. And a walk's listing (discover._kept_walk: 45 ms on Megatron Bridge, most of
it its .gitignore's regex on 2,800 paths), taken again while no folder it listed and no file it opened has changed.
Anything wrong with the file means "not kept": the values are computed as without it. `--no-cache` neither reads
nor writes it.
"""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from pathlib import Path

from offlint import discover, gitignore
from offlint.cache import fingerprint
from offlint.cache_files import owned_private_dir, project_cache_dir, read_owned, write_atomically
from offlint.cache_format import CacheFormatError

_PREFIX = "warm-"
_KINDS = frozenset(discover._KIND_OF)  # the letters of the kinds of files a kept listing found


class WarmStart:
    def __init__(self, directory: Path | None):
        self.directory = directory
        self.key = fingerprint("warm-start", sys.version_info[:2])
        self._rules: str | None = None  # the catalog, encoded (rules_codec)
        # key -> [joined regex or None, include flags] (gitignore.GitIgnore)
        self._gitignores = _Kept({}, gitignore.valid_joined)
        # a walk's key (discover._kept_walk) -> what it read and found (_valid_listing)
        self._listings = _Kept({}, _valid_listing)
        self._loaded: object = None  # what the file held, to write it only when something changed

    @property
    def file(self) -> Path | None:
        return self.directory / f"{_PREFIX}{self.key}.json" if self.directory else None

    @classmethod
    def load(cls, root: Path) -> WarmStart:
        warm = cls(project_cache_dir(root))
        data = read_owned(warm.file) if warm.directory is not None and owned_private_dir(warm.directory) else None
        try:
            stored = json.loads(data) if data else None
        except ValueError:
            stored = None
        if isinstance(stored, dict) and stored.get("key") == warm.key:
            warm._loaded = stored
            if isinstance(stored.get("rules"), str):
                warm._rules = stored["rules"]
            warm._gitignores = _Kept(stored.get("gitignores"), gitignore.valid_joined)
            warm._listings = _Kept(stored.get("listings"), _valid_listing)
        return warm

    def rules(self) -> dict | None:
        """The rule catalog as kept, or None (not kept, or not what offlint writes)."""
        if self._rules is None:
            return None
        from offlint.rules import Rule, rule_files, rules_codec

        try:
            catalog = rules_codec().loads(self._rules)
        except CacheFormatError:
            return None
        if not isinstance(catalog, dict) or sorted(catalog) != [path.name.partition("-")[0] for path in rule_files()] \
                or not all(type(rule) is Rule and rule.code == code for code, rule in catalog.items()):
            return None  # every rule file's rule, and nothing else
        return catalog

    def holds_rules(self) -> bool:
        return self._rules is not None

    def keep_rules(self, catalog: dict) -> None:
        from offlint.rules import rules_codec

        try:
            self._rules = rules_codec().dumps(catalog)
        except (TypeError, ValueError, RecursionError):
            self._rules = None

    def gitignore(self, key: str) -> list | None:
        return self._gitignores.get(key)

    def keep_gitignore(self, key: str, joined: list) -> None:
        self._gitignores.keep(key, joined)

    def listing(self, key: str) -> dict | None:
        return self._listings.get(key)

    def keep_listing(self, key: str, listing: dict) -> None:
        self._listings.keep(key, listing)

    def save(self) -> None:
        """Write what this run used, when it differs from what was kept, into a cache folder that exists already
        (the cache makes it); other keys' files are removed."""
        stored = {"key": self.key, "rules": self._rules, "gitignores": self._gitignores.used(),
                  "listings": self._listings.used()}
        if stored == self._loaded or self.directory is None or not owned_private_dir(self.directory):
            return
        try:
            for old in self.directory.iterdir():
                if old.name.startswith(_PREFIX) and old != self.file:
                    old.unlink(missing_ok=True)
            write_atomically(self.directory, self.file, json.dumps(stored, ensure_ascii=True))
            self._loaded = stored
        except OSError:
            pass  # not kept: the next run computes them again


class _Kept:
    """Values kept by key from one run to the next (.gitignore regexes, walks' listings): a value read back is used
    only once it passes `valid`, checked when first asked for (a pre-commit run whose walk is a kept listing asks for
    no .gitignore's regex: checking all of Bridge's by compiling them took 0.01-0.02 s of its 0.5 s), and only
    those this run asked for or made are written again (keys of files gone drop out)."""

    def __init__(self, stored: object, valid):
        self._values = dict(stored) if isinstance(stored, dict) else {}
        self._valid = valid
        self._checked: set[str] = set()  # keys whose value passed `valid`, or was made by this run
        self._asked: set[str] = set()

    def get(self, key: str):
        self._asked.add(key)
        value = self._values.get(key)
        if value is not None and key not in self._checked:
            if not self._valid(value):
                del self._values[key]
                return None
            self._checked.add(key)
        return value

    def keep(self, key: str, value) -> None:
        self._asked.add(key)
        self._checked.add(key)
        self._values[key] = value

    def used(self) -> dict:
        """What to write again: the values this run asked for or made; all of them as read when it asked for none
        (a pre-commit run whose walk is a kept listing reads no .gitignore: that says nothing of their files, and
        dropping their regexes rewrote the 0.5 MB file on every such run and left the next walk to make them; a
        damaged one among them is written back unused, and refused again when a run asks for it)."""
        keys = self._asked & set(self._values) if self._asked else self._values
        return {key: self._values[key] for key in sorted(keys)}


@contextmanager
def remembered(warm: WarmStart | None):
    """The .gitignore regexes of discoveries inside the block are looked up in (and added to) `warm`."""
    previous = gitignore.MEMO, discover.MEMO
    gitignore.MEMO = discover.MEMO = warm
    try:
        yield warm
    finally:
        gitignore.MEMO, discover.MEMO = previous


def _valid_listing(value: object) -> bool:
    """Whether a kept listing has the form discover._kept_walk gives it: {"dirs": the folders' paths as one text,
    "numbers": four integers per folder, "files": [[path, four integers], ...], "found": one text of the files
    found, each a kind's letter and its path}."""
    if not (isinstance(value, dict) and value.keys() == {"dirs", "numbers", "files", "found"}
            and isinstance(value["dirs"], str) and isinstance(value["found"], str)
            and isinstance(value["numbers"], list) and isinstance(value["files"], list)):
        return False
    if not all(type(n) is int for n in value["numbers"]):
        return False
    if not all(isinstance(row, list) and len(row) == 5 and isinstance(row[0], str)
               and all(type(n) is int for n in row[1:]) for row in value["files"]):
        return False
    return all(line[:1] in _KINDS for line in value["found"].split("\n") if line)
