"""The bisect's journal (JSON lines) and the result cache built on it.

Each finished probe run is one record. The whole file is rewritten to a temporary file and renamed over the
journal after every record, so a kill at any moment leaves either the old or the new journal, never half a
line. A result is keyed by (commit, submodule SHAs, probe and its options), so `--resume` reuses exactly
the runs that answered the same question and repeats nothing else.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path


def result_key(sha: str, submodules: dict[str, str], probe_key: str) -> str:
    text = json.dumps({"commit": sha, "submodules": submodules, "probe": probe_key}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


class Journal:
    def __init__(self, path: Path, resume: bool):
        self.path = path
        self.records: list[dict] = []
        path.parent.mkdir(parents=True, exist_ok=True)
        if resume and path.is_file():
            for line in path.read_text().splitlines():
                try:
                    self.records.append(json.loads(line))
                except ValueError:
                    continue  # cannot happen with atomic writes; tolerate a hand-edited file
        self.resumed = sum(1 for r in self.records if r.get("type") == "run")

    def append(self, record: dict) -> None:
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
