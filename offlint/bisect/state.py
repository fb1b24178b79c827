"""The bisect's state directory, and what a killed run left behind.

`<git dir>/offlint-bisect/` holds the journal, the logs and, under `runs/`, one record per running bisect
(`<pid>.json`): its pid and start time, the worktree directory and every worktree it is about to create,
and the process groups of its running probes. The record is written before each worktree is created and
when each probe starts, and removed when the run has cleaned up after itself. A run killed with SIGKILL
cleans up nothing, so every run (fresh or `--resume`) first looks at the records of runs that are no longer
alive (same pid and start time, same boot): it kills their probe groups (only when the group's leader is gone
or is still the recorded process, see watchdog.py), removes their worktrees (`git worktree remove --force`,
then the directory, then `git worktree prune`) and deletes the record. Records of live runs are left alone.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Callable

import git

from offlint.bisect.watchdog import boot_id, have_proc, kill_groups, start_time

WORKTREE_PREFIX = "offlint-bisect-"


class StateError(Exception):
    """The state directory cannot be used: one line for the user, with what to do."""


def open_state(path: Path) -> Path:
    """The state directory and its `runs/` and `logs/` folders, created; StateError when one is not a folder."""
    for folder in (path, path / "runs", path / "logs"):
        if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
            raise StateError(f"{folder}: not a directory, but offlint keeps its bisect state there; remove it and "
                             f"rerun (without --resume: there are no earlier runs to reuse)")
        try:
            folder.mkdir(exist_ok=True)
        except OSError as exc:
            raise StateError(f"{folder}: cannot create the bisect's state directory ({exc.strerror or exc}); "
                             f"check the permissions of {folder.parent}") from None
    return path


class RunRecord:
    """This run's worktrees and probe groups, in `<state>/runs/<pid>.json`, rewritten atomically on each change."""

    def __init__(self, state: Path):
        pid = os.getpid()
        self.path = state / "runs" / f"{pid}.json"
        self.data = {"pid": pid, "start": start_time(pid), "boot": boot_id(), "worktree_base": None,
                     "worktrees": [], "groups": {}}
        self._write()

    def worktree_base(self, path: Path) -> None:
        self.data["worktree_base"] = str(path)
        self._write()

    def worktree(self, path: Path) -> None:
        if str(path) not in self.data["worktrees"]:
            self.data["worktrees"].append(str(path))
            self._write()

    def started(self, pgid: int, start: int | None) -> None:
        self.data["groups"][str(pgid)] = start
        self._write()

    def ended(self, pgid: int) -> None:
        self.data["groups"].pop(str(pgid), None)
        self._write()

    def close(self) -> None:
        """Delete the record once nothing it lists is left (else a later run cleans up what is)."""
        base = self.data["worktree_base"]
        if not self.data["groups"] and not (base and Path(base).exists()):
            self.path.unlink(missing_ok=True)

    def __enter__(self) -> "RunRecord":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _write(self) -> None:
        temporary = self.path.with_name(self.path.name + ".tmp")
        try:
            temporary.write_text(json.dumps(self.data, sort_keys=True))
            os.replace(temporary, self.path)
        except OSError as exc:
            raise StateError(f"{self.path}: cannot write the bisect's run record ({exc.strerror or exc}); check the "
                             f"permissions and free space of {self.path.parent}") from None


def recover(state: Path, repo: git.Repo, progress: Callable[[str], None] = lambda line: None,
            keep_worktrees: bool = False) -> int:
    """Clean up after every recorded run that is no longer alive; how many such runs there were.

    `keep_worktrees`: a `--resume` with the Slurm launcher re-attaches to the jobs the killed run submitted, and
    those jobs are still running in its worktrees: only its local probe groups are stopped."""
    cleaned = 0
    for path in sorted((state / "runs").glob("*.json")):
        record = _load(path)
        if record is None or _alive(record):
            continue
        groups = {int(pgid): start for pgid, start in record["groups"].items()}
        killed = kill_groups(groups) if groups and record["boot"] == boot_id() else []
        removed = 0 if keep_worktrees else _remove_worktrees(repo, record)
        path.unlink(missing_ok=True)
        cleaned += 1
        done = [f"removed {removed} worktree(s)" if removed else "",
                f"stopped {len(killed)} probe process group(s)" if killed else ""]
        if removed or killed:
            progress(f"offlint: an earlier bisect (pid {record['pid']}) was killed; "
                     f"{' and '.join(d for d in done if d)} it left behind")
    return cleaned


def _load(path: Path) -> dict | None:
    """A checked run record; None when it vanished meanwhile (its run ended); StateError when damaged."""
    try:
        record = json.loads(path.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise StateError(f"{path}: damaged record of an earlier bisect run ({type(exc).__name__}); remove it, "
                         f"then run `git worktree prune`") from None
    if not _well_formed(record):
        raise StateError(f"{path}: damaged record of an earlier bisect run (not the fields offlint writes); "
                         f"remove it, then run `git worktree prune`")
    return record


def _well_formed(record) -> bool:
    if not isinstance(record, dict) or not isinstance(record.get("pid"), int):
        return False
    base = record.get("worktree_base")
    trees = record.get("worktrees")
    groups = record.get("groups")
    if not isinstance(trees, list) or not isinstance(groups, dict) or not isinstance(record.get("boot"), str):
        return False
    if base is not None:  # only ever delete what offlint itself created
        if not isinstance(base, str) or not os.path.isabs(base) or not Path(base).name.startswith(WORKTREE_PREFIX):
            return False
        if not all(isinstance(t, str) and Path(t).parent == Path(base) for t in trees):
            return False
    elif trees:
        return False
    return all(k.isdigit() and int(k) > 1 and (v is None or isinstance(v, int)) for k, v in groups.items())


def _alive(record: dict) -> bool:
    """Whether the recorded run is still running: same pid, same start time, same boot."""
    pid = record["pid"]
    if record["boot"] != boot_id():
        return False
    if have_proc():
        now = start_time(pid)
        return now is not None and now == record.get("start")
    try:  # no /proc: a process with that pid is taken to be the run
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def _remove_worktrees(repo: git.Repo, record: dict) -> int:
    removed = 0
    for tree in record["worktrees"]:
        if Path(tree).exists():
            removed += 1
        try:
            repo.git.worktree("remove", "--force", "--force", tree)
        except git.GitCommandError:
            pass  # half-created or gone: the directory goes below, git's bookkeeping with prune
    if record["worktree_base"]:
        shutil.rmtree(record["worktree_base"], ignore_errors=True)
    repo.git.worktree("prune")
    return removed
