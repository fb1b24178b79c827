"""The content-hash cache under `.offlint_cache/`: what reading and checking one file gave, reused while valid.

An entry is keyed by the file's path and the hash of its text, and remembers the hash of every other file
its reading depended on (imported base builders, helpers, constants). It is valid only while all of those
hashes still match, so an edit to a base builder re-reads every recipe that inherits from it. The whole
cache is keyed by a fingerprint of everything else that decides the result: offlint's own code and rules,
the options, the megatron-core version and the set of Python files (an added module can change an import).
The directory carries CACHEDIR.TAG so backup tools skip it; a damaged cache is ignored, never an error.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from offlint.suppressions import Suppression
from offlint.types import Finding, Unit

CACHE_DIR = ".offlint_cache"
_TAG = ("Signature: 8a477f597d28d172789f06886806bc55\n"
        "# This file is a cache directory tag created by offlint.\n"
        "# For information about cache directory tags, see https://bford.info/cachedir/\n")
_FORMAT = 3


@dataclass
class FileOutcome:
    """Everything one file contributes to a check, as computed when it was read."""

    path: str
    digest: str
    units: list[Unit] = field(default_factory=list)
    suppressions: list[Suppression] = field(default_factory=list)
    error: str | None = None
    findings: list[Finding] = field(default_factory=list)  # of its units that need no linking (not commands)
    deps: dict[str, str] = field(default_factory=dict)  # other files read while reading it -> their digest


def digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def fingerprint(*parts: object) -> str:
    """The cache's key: offlint's code and rules (by name, size and mtime) plus the given option values."""
    h = hashlib.blake2b(digest_size=16)
    h.update(repr((_FORMAT, parts)).encode())
    package = Path(__file__).resolve().parent
    roots = [package]
    rules = package.parent / "rules"
    if rules.is_dir():
        roots.append(rules)
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.suffix in (".py", ".yaml", ".json") and "__pycache__" not in path.parts:
                stat = path.stat()
                h.update(f"{path.relative_to(root)}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
    return h.hexdigest()


@dataclass
class _Entry:
    """A stored outcome: its key fields in the clear, the outcome itself pickled until someone needs it."""

    digest: str
    deps: dict[str, str]
    payload: bytes


class Cache:
    def __init__(self, root: Path, key: str):
        self.directory = root / CACHE_DIR
        self.file = self.directory / f"check-{key}.pickle"
        self.entries: dict[str, _Entry] = {}
        # The whole previous run: (key of every input's digest, its pickled result). An unchanged tree gets the
        # same answer without unpickling a single unit.
        self.last: tuple[str, bytes] | None = None
        self.changed = False

    def load(self) -> "Cache":
        try:
            with open(self.file, "rb") as handle:
                stored = pickle.load(handle)
            entries = stored.get("entries") if isinstance(stored, dict) else None
            if isinstance(entries, dict) and all(isinstance(e, _Entry) for e in entries.values()):
                self.entries = entries
                last = stored.get("last")
                self.last = last if isinstance(last, tuple) and len(last) == 2 else None
        except (OSError, pickle.PickleError, EOFError, AttributeError, ImportError, TypeError, ValueError):
            self.entries, self.last = {}, None
        return self

    def last_result(self, run_key: str):
        if self.last is None or self.last[0] != run_key:
            return None
        try:
            return pickle.loads(self.last[1])
        except (pickle.PickleError, EOFError, AttributeError, ImportError, TypeError, ValueError):
            return None

    def remember_result(self, run_key: str, result: object) -> None:
        self.last = (run_key, pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL))
        self.changed = True
        self.save(None)

    def dependencies(self) -> dict[str, dict[str, str]]:
        """file -> the files its last reading depended on (with their digests then)."""
        return {path: entry.deps for path, entry in self.entries.items()}

    def lookup(self, path: str, text_digest: str, digests: dict[str, str]) -> FileOutcome | None:
        """The stored outcome when the file and everything it read are unchanged."""
        entry = self.entries.get(path)
        if entry is None or entry.digest != text_digest:
            return None
        if any(digests.get(dep) != dep_digest for dep, dep_digest in entry.deps.items()):
            return None
        try:
            outcome = pickle.loads(entry.payload)
        except (pickle.PickleError, EOFError, AttributeError, ImportError, TypeError, ValueError):
            return None
        return outcome if isinstance(outcome, FileOutcome) else None

    def store(self, outcome: FileOutcome) -> None:
        payload = pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL)
        self.entries[outcome.path] = _Entry(outcome.digest, outcome.deps, payload)
        self.changed = True

    def save(self, keep: set[str] | None) -> None:
        """Write the entries (of the files in `keep`, when given) atomically; stale cache files are removed."""
        stale = set(self.entries) - keep if keep is not None else set()
        if not self.changed and not stale:
            return
        for path in stale:
            del self.entries[path]
        try:
            self.directory.mkdir(exist_ok=True)
            tag = self.directory / "CACHEDIR.TAG"
            if not tag.exists():
                tag.write_text(_TAG)
            ignore = self.directory / ".gitignore"
            if not ignore.exists():
                ignore.write_text("# Created by offlint automatically.\n*\n")
            for old in self.directory.glob("check-*.pickle"):
                if old != self.file:
                    old.unlink(missing_ok=True)
            handle, temporary = tempfile.mkstemp(dir=self.directory, prefix=".check-", suffix=".tmp")
            with os.fdopen(handle, "wb") as out:
                pickle.dump({"entries": self.entries, "last": self.last}, out, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(temporary, self.file)
            self.changed = False
        except OSError:
            pass  # a read-only tree still gets checked, only without a cache
