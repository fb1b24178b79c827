"""Shared helpers of the bisect tests: generated histories and running `offlint bisect` as a real subprocess."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("generate_history", ROOT / "fixtures" / "generate_history.py")
generate_history = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(generate_history)


def history(tmp_path: Path, kind: str, commits: int, culprit: int, **kwargs) -> dict:
    return generate_history.build_history(tmp_path, kind, commits, culprit, **kwargs)


def bisect(repo: str, *args: str, env: dict | None = None, timeout: float = 170) -> subprocess.CompletedProcess:
    import os

    return subprocess.run([sys.executable, "-m", "offlint", "bisect", "--repo", repo, *args], capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})


def repo_state(repo: str) -> str:
    """Everything the user can see of the repository: status, branches, HEAD, worktrees, index and stash."""
    def git(*args):
        return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True).stdout

    index = Path(repo, ".git", "index").read_bytes()
    return "\n".join([git("status", "--porcelain", "--ignored"), git("branch", "-a", "-v"), git("rev-parse", "HEAD"),
                      git("worktree", "list", "--porcelain"), git("stash", "list"), str(hash(index))])


def read_json(path: Path) -> dict:
    return json.loads(path.read_text())
