"""Running `offlint check` as a user does: in a subprocess, for tests that read its JSON findings, or in this process
for the tests of one rule on one file."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from offlint.api import CheckOptions, check


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


def rule_findings(tmp_path: Path, monkeypatch, code: str, name: str, text: str, version: str = "0.20.0",
                  strict: bool = False) -> list:
    """The findings of rule `code` on one file `name` holding `text` (dedented) in `tmp_path`, checked from there in
    this process as `offlint check NAME --select CODE --mcore-version VERSION [--strict]` checks it; no file error."""
    (tmp_path / name).write_text(textwrap.dedent(text))
    monkeypatch.chdir(tmp_path)
    result = check([name], CheckOptions(select=[code], strict=strict, mcore_version=version, root=tmp_path))
    assert not result.errors, result.errors
    return result.findings
