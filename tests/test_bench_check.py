"""benchmarks/bench_check.py's edits of a changed file: what the pre-commit measurements time."""

import ast
import importlib.util
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location(
    "bench_check", Path(__file__).resolve().parent.parent / "benchmarks" / "bench_check.py")
bench_check = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(bench_check)

SOURCE = b'''def first():
    return 1


def second(
    a: int = 1,
) -> int:
    """Doc."""
    return a
'''


def test_a_file_alone_gets_a_comment_line_at_its_end():
    assert bench_check.edited(SOURCE, None, "in-place") == SOURCE + b"\n# edited by offlint's benchmark\n"


def test_a_function_edited_in_place_changes_its_def_line_only():
    edited = bench_check.edited(SOURCE, "second", "in-place")
    before, after = SOURCE.split(b"\n"), edited.split(b"\n")
    assert len(before) == len(after)
    assert [i for i, (a, b) in enumerate(zip(before, after)) if a != b] == [4]
    ast.parse(edited)


def test_an_insert_goes_after_the_whole_signature_at_the_body_s_indent():
    edited = bench_check.edited(SOURCE, "second", "insert")
    lines = edited.split(b"\n")
    assert lines[7] == b"    _edited_by_offlint_benchmark = 1"
    assert len(lines) == len(SOURCE.split(b"\n")) + 1
    tree = ast.parse(edited)
    assert [type(s).__name__ for s in tree.body[1].body][0] == "Assign"


def test_a_function_the_file_does_not_define_is_an_error():
    with pytest.raises(SystemExit, match="no module-level function third"):
        bench_check.edited(SOURCE, "third", "in-place")


VALUES = b'''def recipe(n: int = 3):
    cfg = base(eval_iters=32, lr=1.5e-4)  # x = 7 in a comment
    if cfg.a == 2:
        cfg.b = 4
    return cfg


def other():
    return 9
'''


def test_a_value_edit_adds_one_to_the_first_integer_the_body_sets():
    """`=` only (not `==`, not a float, not the signature's default, not a comment), the first in the body."""
    edited = bench_check.edited(VALUES, "recipe", "value")
    changed = [(a, b) for a, b in zip(VALUES.split(b"\n"), edited.split(b"\n")) if a != b]
    assert changed == [(b"    cfg = base(eval_iters=32, lr=1.5e-4)  # x = 7 in a comment",
                        b"    cfg = base(eval_iters=33, lr=1.5e-4)  # x = 7 in a comment")]
    ast.parse(edited)
    with pytest.raises(SystemExit, match="other sets no integer"):
        bench_check.edited(VALUES, "other", "value")  # `return 9` sets nothing


def test_a_new_file_renames_every_function_it_defines_wherever_its_name_is_a_word():
    text = b"from x import base\n\n\ndef helper():\n    return base()\n\n\ndef recipe_config():\n    return helper()\n"
    added = bench_check.new_module(text)
    assert added == (b"from x import base\n\n\ndef helper_bench():\n    return base()\n\n\n"
                     b"def recipe_config_bench():\n    return helper_bench()\n")
    ast.parse(added)


def test_an_added_file_is_timed_and_removed_afterwards(tmp_path, monkeypatch):
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "leaf.py").write_bytes(b"def leaf_config():\n    return 1\n")
    seen = []
    monkeypatch.setattr(bench_check, "measure", lambda cwd, args: seen.append(
        (args, (tmp_path / args[0]).read_bytes())) or {"wall": 0.1})
    assert bench_check.measure_edited(tmp_path, "recipes/leaf.py", None, "new-file", ["-q"]) == {"wall": 0.1}
    assert seen == [(["recipes/leaf_offlint_bench.py", "-q"], b"def leaf_config_bench():\n    return 1\n")]
    assert sorted(p.name for p in (tmp_path / "recipes").iterdir()) == ["leaf.py"]
