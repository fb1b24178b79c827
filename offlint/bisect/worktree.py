"""Worktrees that offlint manages: one detached checkout per concurrent job, removed on every exit path.

The user's working tree, index, HEAD and branches are never touched: each job gets `git worktree add
--detach` in a temporary directory, later commits are checked out inside it, and submodules are updated to
each commit's gitlinks. `close()` (also run from `__exit__`, so on errors and Ctrl-C) removes every worktree
and prunes git's bookkeeping, so `git worktree list` is what it was. SIGINT is ignored while cleaning up,
so a second Ctrl-C cannot leave a half-removed worktree behind. With a `record` (state.py), every path is
written to the run's record before it is created, so a later run can remove what a SIGKILL left.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import tempfile
from pathlib import Path

import git

# Local submodule URLs (fixtures, mirrors) need the file transport, which git disables for submodules by default.
SUBMODULE_CONFIG = ("-c", "protocol.file.allow=always")


class WorktreeError(RuntimeError):
    pass


class Worktrees:
    def __init__(self, repo: git.Repo, base: Path | None = None, record=None):
        self.repo = repo
        self.record = record
        name = f"offlint-bisect-{os.getpid()}-{secrets.token_hex(4)}"
        self.base = Path(base or tempfile.gettempdir()).resolve() / name
        if record is not None:
            record.worktree_base(self.base)
        self.base.mkdir(mode=0o700)
        self.slots: dict[int, Path] = {}

    def checkout(self, slot: int, sha: str) -> Path:
        """The worktree of job `slot`, at `sha` with its submodules at that commit's gitlinks."""
        path = self.slots.get(slot)
        if path is None:
            path = self.base / f"job{slot}"
            self.slots[slot] = path  # registered first: a failing `add` is still cleaned up
            if self.record is not None:
                self.record.worktree(path)
            self.repo.git.worktree("add", "--detach", "--force", str(path), sha)
        else:
            tree = git.Repo(path)
            tree.git.checkout("--detach", "--force", sha)
            tree.git.clean("-ffdx", "--quiet")
        if (path / ".gitmodules").is_file():
            try:
                git.Repo(path).git.execute(["git", *SUBMODULE_CONFIG, "submodule", "update", "--init",
                                            "--recursive", "--force"])
            except git.GitCommandError as exc:
                raise WorktreeError(f"submodule update failed at {sha[:10]}: {exc.stderr.strip()[-300:]}") from None
        return path

    def close(self) -> None:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if _main_thread() else None
        try:
            for path in self.slots.values():
                try:
                    self.repo.git.worktree("remove", "--force", "--force", str(path))
                except git.GitCommandError:
                    pass  # half-created or already gone: rmtree + prune below
            shutil.rmtree(self.base, ignore_errors=True)
            self.repo.git.worktree("prune")
            self.slots.clear()
        finally:
            if previous is not None:
                signal.signal(signal.SIGINT, previous)

    def __enter__(self) -> "Worktrees":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()
