"""scripts/fuzz_check.py: mutations of a tree's own files, checked (and fixed) as pre-commit would; a problem is an
exception, an internal error, a hang, `--diff` writing, or a fix breaking a file that parsed."""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_SPEC = importlib.util.spec_from_file_location("fuzz_check", ROOT / "scripts" / "fuzz_check.py")
fuzz_check = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(fuzz_check)

TEXT = "def recipe():\n    cfg.model.tensor_model_parallel_size = 4\n    cfg.model.cpu_offloading = True\n    return cfg\n"


def _run(monkeypatch, *args: str) -> int:
    monkeypatch.setattr(sys, "argv", ["fuzz_check.py", *args])
    cwd = Path.cwd()
    try:
        return fuzz_check.main()
    finally:
        import os

        os.chdir(cwd)


def test_the_same_seed_gives_the_same_edits():
    first = [fuzz_check.mutate(random.Random(seed), TEXT) for seed in range(30)]
    again = [fuzz_check.mutate(random.Random(seed), TEXT) for seed in range(30)]
    assert first == again
    assert sum(text != TEXT for text, _ in first) >= 20  # (a delete of the only line, a swap with itself: no change)


def test_the_bundled_fixtures_give_no_problem(monkeypatch, tmp_path, capsys):
    assert _run(monkeypatch, str(ROOT / "fixtures"), "--runs", "25", "--out", str(tmp_path / "out")) == 0
    assert "25 runs on" in capsys.readouterr().out
    assert not (tmp_path / "out").exists()


def test_fixes_run_on_a_copy_and_the_tree_is_left_as_it_was(monkeypatch, tmp_path, capsys):
    tree = ROOT / "fixtures" / "bad"
    before = {path: path.read_bytes() for path in tree.rglob("*") if path.is_file()}
    assert _run(monkeypatch, str(tree), "--fix", "--runs", "12", "--out", str(tmp_path / "out")) == 0
    printed = capsys.readouterr().out
    fixable = int(printed.split(" of the files have a fix")[0].split()[-1])
    assert fixable >= 2 and "12 runs on" in printed  # (the fixtures' card and Hydra override: fixes were tried)
    assert {path: path.read_bytes() for path in tree.rglob("*") if path.is_file()} == before
    assert not (tmp_path / "out").exists()


def test_an_exception_out_of_offlint_is_written_down(monkeypatch, tmp_path, capsys):
    """The tool can fail: a check that raises is a problem, with the mutated file and a note kept."""
    from offlint import api

    def broken(*_args, **_kwargs):
        raise ZeroDivisionError("integer modulo by zero")

    monkeypatch.setattr(api, "check", broken)
    out = tmp_path / "out"
    assert _run(monkeypatch, str(ROOT / "fixtures"), "--runs", "3", "--out", str(out)) == 1
    printed = capsys.readouterr().out
    assert printed.count("ZeroDivisionError: integer modulo by zero") == 3 and "3 problems" in printed
    notes = sorted(out.glob("*.txt"))
    assert len(notes) == 3 and "ZeroDivisionError" in notes[0].read_text()


@pytest.mark.parametrize("tree", ["missing", "empty"])
def test_bad_input_is_one_line_and_exit_2(monkeypatch, tmp_path, capsys, tree):
    (tmp_path / "empty").mkdir()
    assert _run(monkeypatch, str(tmp_path / tree)) == 2
    err = capsys.readouterr().err
    assert err.startswith("fuzz_check.py: error: ") and err.count("\n") == 1
