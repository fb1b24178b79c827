"""The bisect's journal (JSON lines) and the result cache built on it.

Each finished probe run is one record. The whole file is rewritten to a temporary file and renamed over the
journal after every record, so a kill at any moment leaves either the old or the new journal, never half a
line. A result is keyed by (commit, submodule SHAs, probe and its options), so `--resume` reuses exactly
the runs that answered the same question and repeats nothing else. `--resume` checks every line it reads
(a JSON object with the fields its type needs): a damaged journal is a `JournalError` (one line, exit 2),
never a guess, since a wrong record would be reused as a verdict.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from offlint.outcomes import Outcome

_TEXT = (str,)
_OPTIONAL_TEXT = (str, type(None))
_NUMBER = (int, float)
_OPTIONAL_LIST = (list, type(None))
# The fields each record type needs, with the types they must have (other fields and types are kept as is).
FIELDS = {
    "run": {"key": _TEXT, "sha": _TEXT, "attempt": (int,), "outcome": _TEXT, "signature": _OPTIONAL_TEXT,
            "rules": _OPTIONAL_LIST, "detail": _OPTIONAL_TEXT, "peak_allocated_bytes": _OPTIONAL_LIST,
            "loss": _OPTIONAL_LIST, "log": _TEXT, "duration_s": _NUMBER},
    "slurm-job": {"step": _TEXT, "job_id": _TEXT},
}
OUTCOMES = {o.value for o in Outcome}


class JournalError(Exception):
    """The journal cannot be read or is not one offlint wrote: one line for the user, with what to do."""


def result_key(sha: str, submodules: dict[str, str], probe_key: str) -> str:
    text = json.dumps({"commit": sha, "submodules": submodules, "probe": probe_key}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


class Journal:
    def __init__(self, path: Path, resume: bool):
        self.path = path
        self.records: list[dict] = []
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise JournalError(f"{path.parent}: cannot create the bisect's state directory ({exc.strerror or exc}); "
                               f"if it is a file, remove it") from None
        if resume and (path.exists() or path.is_symlink()):
            self.records = load(path)
        self.resumed = sum(1 for r in self.records if r.get("type") == "run")

    def append(self, record: dict) -> None:
        """Add a record and rewrite the journal atomically (JournalError when it cannot be written)."""
        try:
            self._write(record)
        except OSError as exc:
            raise JournalError(f"{self.path}: cannot write the bisect journal ({exc.strerror or exc}); remove it if "
                               f"it is not a file, and check that {self.path.parent} is writable") from None

    def _write(self, record: dict) -> None:
        self.records.append(record)
        temporary = self.path.with_name(self.path.name + ".tmp")
        with open(temporary, "w") as handle:
            handle.writelines(json.dumps(r, sort_keys=True) + "\n" for r in self.records)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, self.path)

    def runs(self, key: str) -> list[dict]:
        """Finished runs of one (commit, submodules, probe) question, oldest first."""
        return [r for r in self.records if r.get("type") == "run" and r.get("key") == key]


def load(path: Path) -> list[dict]:
    """Every record of the journal at `path`, checked; JournalError names the first bad line."""
    fix = f"run without --resume to start afresh (that replaces the journal), or remove {path.parent}"
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise JournalError(f"{path}: damaged bisect journal (not UTF-8 text); {fix}") from None
    except OSError as exc:
        raise JournalError(f"{path}: cannot read the bisect journal ({exc.strerror or exc}); {fix}") from None
    records = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        problem = _problem(line)
        if problem:
            raise JournalError(f"{path}: line {number}: damaged bisect journal ({problem}); {fix}")
        records.append(json.loads(line))
    return records


def _problem(line: str) -> str | None:
    """What is wrong with one journal line, or None when it is a well-formed record."""
    try:
        record = json.loads(line)
    except ValueError:
        return "not JSON"
    if not isinstance(record, dict):
        return f"a JSON {type(record).__name__ if record is not None else 'null'}, not a record"
    kind = record.get("type")
    if not isinstance(kind, str):
        return "a record without a type"
    for name, types in FIELDS.get(kind, {}).items():
        value = record.get(name)
        if not isinstance(value, types) or isinstance(value, bool) and bool not in types:
            return f"{kind} record with a missing or invalid {name!r}"
    if kind == "run" and record["outcome"] not in OUTCOMES:
        return f"run record with an unknown outcome {record['outcome'][:40]!r}"
    return None
