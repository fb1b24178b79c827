"""The Python reader's shortcuts and memos give what the plain computation gives: each memo is tested on two inputs
that differ in exactly what it is keyed by (another statement, another file, another importer), and each shortcut
against the plain code it replaces (kept here as the reference). Fixtures of our own."""

from __future__ import annotations

import ast

import pytest

from offlint.keys import KEYS
from offlint.sources.python import _lines
from offlint.sources.python_branches import BranchPoint, merge_values
from offlint.sources.python_configs import _sections_of
from offlint.sources.python_inputs import NAMESPACE_TYPES, is_namespace_annotation
from offlint.sources.python_names import _LOCAL_IMPORT, _local_import_lines
from offlint.sources.python_project import PythonProject
from offlint.sources.python_statements import _UNBOUND, _rebound
from offlint.types import Assignment, Location, OneOf, Source

# Two `if`s with the same test text on different lines, in a helper every recipe follows.
SPLITS = '''\
def _apply(cfg, fast):
    if fast:
        cfg.model.num_layers = 2
    else:
        cfg.model.num_layers = 4
    if fast:
        cfg.model.pipeline_model_parallel_size = 2
    for _ in range(3):
        cfg.model.hidden_size = 64


def first_config(fast):
    cfg = ConfigContainer(model=GPTModelProvider())
    _apply(cfg, fast)
    return cfg


def second_config(fast):
    cfg = ConfigContainer(model=GPTModelProvider())
    _apply(cfg, fast)
    return cfg
'''


def _conditions(unit, key: str) -> list[str]:
    value = next(a.value for layer in unit.layers for a in layer.assignments if a.key == key)
    assert isinstance(value, OneOf), value
    return [step[2] for _, steps, _, _ in value.paths for step in steps]


def _units(texts: dict[str, str], path: str) -> dict:
    project = PythonProject(sorted(texts), texts.get)
    with project.tracking():
        return {unit.name: unit for unit in project.reader(path).units()}


def test_a_split_is_named_by_its_own_statement_and_file():
    # the same text in two files: each split names its own file (the memo is the reader's, keyed by statement)
    for path in ("a/recipes.py", "b/other.py"):
        units = _units({"a/recipes.py": SPLITS, "b/other.py": SPLITS}, path)
        for name in ("first_config", "second_config"):  # the second run of _apply's statements reuses their splits
            unit = units[name]
            assert _conditions(unit, "model.num_layers") == [f"`if fast` ({path}:2) is true",
                                                             f"`if fast` ({path}:2) is false"]
            # the same test text on another line: its own split
            assert _conditions(unit, "model.pipeline_model_parallel_size") == [f"`if fast` ({path}:6) is true",
                                                                               f"`if fast` ({path}:6) is false"]
            assert _conditions(unit, "model.hidden_size") == [f"the loop body at {path}:8 runs",
                                                              f"the loop body at {path}:8 does not run"]


def _rebound_reference(before: dict, after: dict) -> list:
    return list({n: None for n, v in after.items() if before.get(n, _UNBOUND) is not v})


@pytest.mark.parametrize("change", ["nothing", "rebind", "new", "both", "reordered", "fewer"])
def test_rebound_names_are_those_the_plain_comparison_finds_in_its_order(change):
    one, two, three = object(), object(), object()
    before = {"a": one, "b": two, "c": three}
    after = dict(before)
    if change in ("rebind", "both"):
        after["b"] = object()
    if change in ("new", "both"):
        after["d"] = object()
    if change == "reordered":  # not a copy's order: compared by name instead
        after = {"c": object(), "a": one, "b": two}
    if change == "fewer":
        after = {"a": one}
    assert list(_rebound(before, after)) == _rebound_reference(before, after)


def _assignment(key: str, value, line: int) -> Assignment:
    return Assignment(key, value, Location("r.py", line, 1), Source.PYTHON, repr(value))


def test_merging_maps_no_branch_changed_keeps_the_same_assignments():
    split = BranchPoint(Location("r.py", 1, 1), "if x", ("`if x` (r.py:1) is true", "`if x` (r.py:1) is false"))
    held = {"a": _assignment("model.a", 1, 2), "b": _assignment("model.b", 2, 3)}
    merged = merge_values([held, dict(held)], split, ["default", "default"])
    assert merged == held and all(merged[k] is held[k] for k in held)
    changed = dict(held, b=_assignment("model.b", 3, 5))  # one branch set b again: b differs by path, a does not
    merged = merge_values([held, changed], split, ["default", "default"])
    assert merged["a"] is held["a"]
    assert isinstance(merged["b"].value, OneOf) and [p[0] for p in merged["b"].value.paths] == [2, 3]
    reordered = {"b": held["b"], "a": held["a"]}  # the same assignments in another order: the same merge
    assert merge_values([held, reordered], split, None) == held


@pytest.mark.parametrize("text", [
    "def f():\n    import os\n    from a.b import c\nimport d\n",
    "def f():\n    import os",  # no newline at the end
    "def f():\r\n    import os\r\n",
    "x = 1\r    import os\n    import sys\n",  # a lone carriage return ends a line too
    "x = 1\x0c    import os\n",  # and a form feed
    "",
    "\tfrom . import x\n \timport\ty\n  importer = 1\n",
    # a line's first "import" is not the one the pattern ends on, or is no import at all; "import" at column 0
    "def f():\n    from importlib import util\n    importlib.reload(m)  # import x\n    x = 'import y'\n"
    "import a; import b\nimport c\n        import d, e  # import\n",
    "    import os",  # one line, no newline
    "\n\n\n  import a\n\nx = 1\n\t\timport b\n",  # empty lines before and between
])
def test_local_import_lines_are_those_a_test_of_each_line_finds(text):
    lines = [line.encode("utf-8") for line in text.splitlines(keepends=True)]
    expected = [i for i, line in enumerate(lines, start=1) if b"import" in line and _LOCAL_IMPORT.match(line)]
    assert _local_import_lines(lines) == expected


def test_sections_of_a_field_are_the_walk_of_every_key_they_replace():
    """_section_for's only change from a walk of every key per write: the sections a field is in, memoised."""
    for field in {k.split(".", 1)[-1] for k in KEYS} | {"no_such_field", ""}:
        expected = {k.split(".", 1)[0] for k in KEYS if "." in k and k.split(".", 1)[-1] == field}
        assert _sections_of(field) == expected, field


@pytest.mark.parametrize("source", ["Namespace", "argparse.Namespace", "x", "Optional[Namespace]", "'Namespace'",
                                    "None", "Namespace | None", "a.b.Namespace", "1"])
def test_a_namespace_annotation_is_what_its_text_says(source):
    annotation = ast.parse(source, mode="eval").body
    assert is_namespace_annotation(annotation) == (ast.unparse(annotation) in NAMESPACE_TYPES)


def test_a_module_two_files_claim_is_the_one_nearest_each_importer():
    paths = ["one/recipes/common.py", "two/recipes/common.py", "one/run.py", "two/run.py"]
    project = PythonProject(paths, lambda path: "")
    assert project.path_of("recipes.common", "one/run.py") == "one/recipes/common.py"
    assert project.path_of("recipes.common", "two/run.py") == "two/recipes/common.py"  # asked again, other importer
    assert project.path_of("recipes.common", "one/run.py") == "one/recipes/common.py"
    assert project.path_of("recipes.common", "run.py") is None  # neither is nearer


@pytest.mark.parametrize("text", ["", "a", "a\n", "a\r\nb\rc\n", "x\x0cy\x0bz", "é\u2028z\n", "a\x85b\u2029",
                                  "\n\n", "ü\r", "a\x1cb\x1dc\x1e"])
def test_a_readers_lines_are_the_texts_lines_encoded(text):
    assert _lines(text) == [line.encode("utf-8") for line in text.splitlines(keepends=True)]


PARAMS = '''\
def _first(x=1, y=2):
    return x


def _second(x=3, y=4):
    return x


def layers_config():
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=_first(), hidden_size=_second()))
    cfg.model.ffn_hidden_size = _first(5)
    cfg.model.num_attention_heads = _second(y=6)
    cfg.model.kv_channels = _first()
    return cfg
'''


def test_each_call_and_function_keeps_its_own_name_and_defaults():
    # two functions with the same parameter names and other defaults, each called more than once
    unit = _units({"r.py": PARAMS}, "r.py")["layers_config"]
    values = {a.key: a.value for layer in unit.layers for a in layer.assignments}
    assert [values[f"model.{k}"] for k in ("num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads",
                                           "kv_channels")] == [1, 3, 5, 3, 1]
