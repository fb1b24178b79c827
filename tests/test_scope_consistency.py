"""The findings located in a file do not depend on which paths were named (issue: real-tree trust).

For every directory D of a tree, the findings located under D are the same whether the check names D, a file in
D, or the project root; naming a file F likewise gives the findings located in F. offlint reads against the
whole project the paths lie in (scope.py) and the paths only select what is reported.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from offlint.api import CheckOptions, check

ROOT = Path(__file__).resolve().parent.parent
GENERATOR = ROOT / "fixtures" / "generate_bridge_tree.py"
LINTED = (".py", ".yaml", ".yml", ".sh")


def _findings(paths: list[Path], root: Path) -> set[tuple]:
    result = check([str(p) for p in paths], CheckOptions(mcore_version="0.20.0", root=root, cache=False))
    return {(os.path.relpath(os.path.realpath(f.location.path), root), f.location.line, f.location.col, f.code,
             f.message, f.units) for f in result.findings}


def _under(found: set[tuple], below: str) -> set[tuple]:
    return {f for f in found if f[0] == below or f[0].startswith(below.rstrip("/") + "/")}


def _project(tmp_path: Path, name: str) -> Path:
    if name == "generated":
        tree = tmp_path / "generated"
        subprocess.run([sys.executable, str(GENERATOR), str(tree), "--python-files", "60", "--seed", "11"],
                       check=True, capture_output=True, text=True)
    else:
        tree = tmp_path / name
        shutil.copytree(ROOT / "fixtures" / name, tree)
    (tree / ".git").mkdir(exist_ok=True)  # a repository: the project's root
    return tree.resolve()


def _directories(tree: Path) -> list[Path]:
    """Every directory holding a file offlint reads (at most 10, spread over the tree)."""
    found = sorted({p.parent for p in tree.rglob("*") if p.suffix in LINTED and ".git" not in p.parts} - {tree})
    step = max(1, len(found) // 10)
    return found[::step][:10]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["generated", "patterns", "bad"])
def test_findings_under_a_directory_do_not_depend_on_the_paths_named(tmp_path, monkeypatch, name):
    tree = _project(tmp_path, name)
    monkeypatch.chdir(tmp_path)  # the paths are named from outside the project, as a CI job might
    everything = _findings([tree], tree)
    assert everything, "a tree with no findings proves nothing"
    compared = 0
    for directory in _directories(tree):
        below = directory.relative_to(tree).as_posix()
        assert _under(_findings([directory], tree), below) == _under(everything, below), below
        files = sorted(p for p in directory.iterdir() if p.suffix in LINTED)
        for file in files[:2]:
            inside = file.relative_to(tree).as_posix()
            assert _under(_findings([file], tree), inside) == _under(everything, inside), inside
        compared += bool(_under(everything, below))
    assert compared, "no directory compared had a finding"
