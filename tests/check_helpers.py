"""Running `offlint check` as a user does, in a subprocess, for tests that read its JSON findings."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def check_json(root: Path, *args: str, paths: tuple[str, ...] = (".",)) -> list[dict]:
    """The findings of `offlint check PATHS --mcore-version 0.20.0 --output-format json ARGS` run in `root`; the run
    must end with exit 0 or 1 (no file error, no traceback)."""
    done = subprocess.run([sys.executable, "-m", "offlint", "check", *paths, "--mcore-version", "0.20.0",
                           "--output-format", "json", *args], cwd=root, capture_output=True, text=True)
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stdout)


def write_tree(root: Path, files: dict[str, str]) -> None:
    """A project at `root` (an empty pyproject.toml) holding `files` (path -> text)."""
    (root / "pyproject.toml").write_text("")
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
