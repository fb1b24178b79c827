"""The cache's dependencies by part (part_digests.definition_digests): an edit of one function of an imported module
re-reads only the files whose reading ran that function, and a cached run always answers what a run without the
cache answers for the same tree."""

import ast
import bisect
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from offlint import file_outcomes
from offlint.api import CheckOptions, check
from offlint.cache_files import project_cache_dir
from offlint.part_digests import MODULE, _dirty, definition_digests, line_moves, meaning

COMMON = '''
from megatron.bridge.training.config import ConfigContainer, OptimizerConfig
from megatron.bridge.models import GPTModelProvider

LAYERS = 8


def _pretrain_common():
    return ConfigContainer(model=GPTModelProvider(num_layers=LAYERS, pipeline_model_parallel_size=4),
                           optimizer=OptimizerConfig(optimizer="adam"))


def _sft_common():
    return ConfigContainer(model=GPTModelProvider(num_layers=LAYERS, pipeline_model_parallel_size=2),
                           optimizer=OptimizerConfig(optimizer="adam"))


BUILDERS = {}


def register(func):
    BUILDERS[func.__name__] = func
    return func


@register
def registered_common():
    return ConfigContainer(model=GPTModelProvider(num_layers=LAYERS, pipeline_model_parallel_size=4),
                           optimizer=OptimizerConfig(optimizer="adam"))
'''
PRETRAIN = '''
from recipes.common import _pretrain_common


def llama_pretrain_config():
    cfg = _pretrain_common()
    cfg.model.cpu_offloading = True
    cfg.model.cpu_offloading_num_layers = 2
    return cfg
'''
SFT = '''
from recipes.common import _sft_common


def llama_sft_config():
    cfg = _sft_common()
    cfg.model.cpu_offloading = True
    cfg.model.cpu_offloading_num_layers = 1
    return cfg
'''

REGISTERED = '''
from recipes.common import BUILDERS


def llama_registered_config():
    cfg = BUILDERS["registered_common"]()
    cfg.model.cpu_offloading = True
    cfg.model.cpu_offloading_num_layers = 2
    return cfg
'''


def _digests(text: str) -> dict[str, str]:
    return definition_digests(ast.parse(text), [line.encode() for line in text.splitlines(keepends=True)])


def _meanings(text: str) -> dict[str, str]:
    return {name: meaning(value) for name, value in _digests(text).items()}


def test_a_function_edit_changes_that_function_s_meaning_only_and_moved_lines_only_their_layout():
    before = _digests(COMMON)
    assert set(before) == {MODULE, "_pretrain_common", "_sft_common", "register", "registered_common"}
    same_lines = _digests(COMMON.replace("pipeline_model_parallel_size=4", "pipeline_model_parallel_size=1", 1))
    assert {k for k in before if before[k] != same_lines[k]} == {"_pretrain_common"}
    assert _digests(COMMON + "\n# a comment\n") == before  # between statements: part of nothing
    longer = COMMON.replace("def _pretrain_common():\n", "def _pretrain_common():\n    x = 1\n")
    # every part below moves (the functions, and MODULE: BUILDERS = {} comes after the edited function), but only
    # the edited one means something else
    assert {k for k in before if before[k] != _digests(longer)[k]} == set(before)
    assert {k for k in before if meaning(before[k]) != _meanings(longer)[k]} == {"_pretrain_common"}
    moved = _digests(COMMON.replace("def _pretrain_common():\n", "def _pretrain_common():\n    # a note\n\n"))
    assert {k for k in before if before[k] != moved[k]} == set(before)
    assert {k for k in before if meaning(before[k]) != meaning(moved[k])} == set()
    assert _digests(COMMON.replace("def _sft_common():\n", "def _sft_common():  # a note\n")) == before
    assert _meanings(COMMON.replace("def _sft_common():\n", "def _sft_common():\n    # a note\n")) == \
        {k: meaning(v) for k, v in before.items()}
    last = COMMON.replace("def registered_common():\n", "def registered_common():\n    x = 1\n")
    assert {k for k in before if before[k] != _digests(last)[k]} == {"registered_common"}
    constant = _digests(COMMON.replace("LAYERS = 8", "LAYERS = 16"))
    assert {k for k in before if before[k] != constant[k]} == {MODULE}
    assert _digests(COMMON.replace("@register\n", ""))[MODULE] != before[MODULE]  # a decorator may fill a dict
    renamed = _digests(COMMON.replace("def _sft_common", "def _sft_common2"))
    assert renamed[MODULE] != before[MODULE]  # the names a module defines are part of MODULE
    local_import = COMMON.replace("def _sft_common():\n", "def _sft_common():\n    from os import path\n")
    assert _digests(local_import)[MODULE] != before[MODULE]  # imports inside a function: prepare collects them


def test_what_a_comment_can_change_changes_the_meaning():
    plain = "def helper():\n    return dict(\n        a=1,\n        b=2)\n"
    base = _meanings(plain)["helper"]
    # inside a statement: in the value's text as written (messages show it)
    assert _meanings(plain.replace("a=1,\n", "a=1,  # one\n"))["helper"] != base
    assert _meanings(plain.replace("a=1,\n", "a=1,\n        # one\n"))["helper"] != base
    # ending the statement, or between statements: not
    assert _meanings(plain.replace("b=2)\n", "b=2)  # two\n"))["helper"] == base
    assert _meanings(plain.replace("    return", "    # why\n\n    return"))["helper"] == base
    # a comment naming a config key makes the reader read a function it skipped
    assert _meanings(plain.replace("    return", "    # offload\n    return"))["helper"] != base
    # a `#` inside a string is no comment; a docstring is a statement
    quoted = "def helper():\n    x = '#a'\n    return x\n"
    assert _meanings(quoted.replace("'#a'", "'#b'"))["helper"] != _meanings(quoted)["helper"]
    assert _meanings(quoted.replace("'#a'\n", "'#a'  # c 'd'\n"))["helper"] == _meanings(quoted)["helper"]
    documented = 'def helper():\n    """Build it."""\n    return 1\n'
    assert _meanings(documented.replace("Build it", "Make it"))["helper"] != _meanings(documented)["helper"]
    # spacing inside a statement moves columns: a different meaning
    assert _meanings(quoted.replace("x = '#a'", "x  = '#a'"))["helper"] != _meanings(quoted)["helper"]


def test_line_moves_maps_the_lines_of_parts_that_mean_the_same():
    before = _digests(COMMON)
    after = _digests("# one\n# two\n" + COMMON.replace("def _sft_common():\n", "def _sft_common():\n    # x\n"))
    moves = line_moves(before, after)
    lines = COMMON.splitlines()
    sft = lines.index("def _sft_common():") + 1
    assert moves[sft] == sft + 2 and moves[sft + 1] == sft + 4  # the comment line inside moves what follows
    assert line_moves({"f": "0" * 32 + " 1,x"}, {"f": "0" * 32 + " 1"}) is None  # a damaged layout


def _findings(root: Path, paths: list[str], cache: bool) -> list[tuple]:
    result = check(paths, CheckOptions(root=root, mcore_version="0.20.0", cache=cache, workers=1))
    assert not result.errors
    return sorted((f.code, str(f.location), f.message, f.unit, f.shared_with,
                   tuple(str(r.location) for r in f.related)) for f in result.findings)


@pytest.fixture
def tree(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'tree'\n")  # file arguments: changed-files mode
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "__init__.py").write_text("")
    (tmp_path / "recipes" / "common.py").write_text(COMMON)
    (tmp_path / "recipes" / "pretrain.py").write_text(PRETRAIN)
    (tmp_path / "recipes" / "sft.py").write_text(SFT)
    (tmp_path / "recipes" / "registered.py").write_text(REGISTERED)
    return tmp_path


def _reads(monkeypatch) -> list[str]:
    """The files read into units from now on (one worker: read_one runs in this process)."""
    read: list[str] = []
    original = file_outcomes.read_one

    def recording(file, *args):
        read.append(file.path)
        return original(file, *args)

    monkeypatch.setattr(file_outcomes, "read_one", recording)
    return read


def test_an_edit_of_one_base_builder_re_reads_only_the_recipes_that_ran_it(tree, monkeypatch):
    cold = _findings(tree, ["."], cache=True)
    assert {(code, location.split(":")[0]) for code, location, *_ in cold} >= \
           {("OFL102", "recipes/pretrain.py"), ("OFL102", "recipes/sft.py"), ("OFL102", "recipes/registered.py")}
    read = _reads(monkeypatch)
    common = tree / "recipes" / "common.py"
    common.write_text(COMMON.replace("pipeline_model_parallel_size=2", "pipeline_model_parallel_size=1"))
    cached = _findings(tree, ["recipes/common.py"], cache=True)
    assert read == ["recipes/common.py", "recipes/sft.py"]  # pretrain.py never ran _sft_common
    assert cached == _findings(tree, ["recipes/common.py"], cache=False)
    read.clear()
    incremental = _findings(tree, ["."], cache=True)
    assert read == []  # the pre-commit run refreshed every entry the edit concerned
    read.clear()
    assert incremental == _findings(tree, ["."], cache=False)
    assert "recipes/sft.py" not in {location.split(":")[0] for _, location, *_ in incremental}


@pytest.mark.parametrize("edit", [
    lambda text: text + "\n# only a comment\n",
    lambda text: text.replace("pipeline_model_parallel_size=4", "pipeline_model_parallel_size=1", 1),
    lambda text: text.replace("LAYERS = 8", "LAYERS = 6"),
    lambda text: "# a new first line moves every location below\n" + text,
    lambda text: text.replace("def _sft_common():\n", "def _sft_common():\n    layers = 3\n"),
    lambda text: text.replace("def _pretrain_common", "def _renamed_common"),
    lambda text: text.replace("def _sft_common():", "def _sft_common(:"),  # no longer parses
    lambda text: text[:text.index("@register")] + text[text.index("@register"):].replace("size=4", "size=1"),
    lambda text: text.replace("@register\n", ""),
    lambda text: text.replace("def _pretrain_common():\n", "def _pretrain_common():\n    # a note\n"),
    lambda text: text.replace("def _sft_common():\n", "def _sft_common():  # a note\n"),
    lambda text: text.replace("def register(func):\n", "def register(func):\n    names = 1\n"),
    lambda text: text.replace("def _pretrain_common():\n", 'def _pretrain_common():\n    """Doc."""\n'),
    lambda text: text.replace("size=4),\n", "size=4),  # offload\n", 1),
    lambda text: text.replace("num_layers=LAYERS, pipeline", "num_layers=LAYERS * 2, pipeline", 1),
], ids=["comment", "value", "constant", "moved", "longer", "renamed", "broken", "registered", "unregistered",
        "comment-inside", "comment-on-def", "above-registered", "docstring", "comment-in-call", "same-lines"])
def test_after_an_edit_a_cached_check_answers_what_an_uncached_one_does(tree, edit):
    _findings(tree, ["."], cache=True)
    common = tree / "recipes" / "common.py"
    common.write_text(edit(common.read_text()))
    for paths in (["recipes/pretrain.py"], ["recipes/registered.py"], ["."]):  # dependents alone, the whole tree
        cached = check(paths, CheckOptions(root=tree, mcore_version="0.20.0", workers=1))
        uncached = check(paths, CheckOptions(root=tree, mcore_version="0.20.0", workers=1, cache=False))
        assert sorted(map(repr, cached.findings)) == sorted(map(repr, uncached.findings))
        assert sorted(map(repr, cached.errors)) == sorted(map(repr, uncached.errors))


GENERATOR = Path(__file__).resolve().parent.parent / "fixtures" / "generate_bridge_tree.py"


def test_function_edits_in_a_generated_bridge_tree_give_the_uncached_findings(tmp_path, monkeypatch):
    """Every module-level function of the generated tree's shared modules edited in turn (a value doubled in place,
    then a line added at its top), each followed by a cached and an uncached check of the whole tree."""
    root = tmp_path / "tree"
    subprocess.run([sys.executable, str(GENERATOR), str(root), "--python-files", "60", "--seed", "3"], check=True,
                   capture_output=True, text=True)
    monkeypatch.chdir(root)
    first = _findings(root, ["."], cache=True)
    assert first == _findings(root, ["."], cache=False)
    imported = sorted({path for path in _imported_modules(root)})
    assert imported, "the generated tree has modules other files import"
    edits = 0
    for path in imported[:4]:
        file = root / path
        text = file.read_text()
        for fn in [s for s in ast.parse(text).body if isinstance(s, ast.FunctionDef)][:3]:
            lines = text.splitlines(keepends=True)
            body = fn.body[0].lineno - 1
            doubled = _double_a_number(lines[fn.lineno - 1:fn.end_lineno])
            if doubled is not None:
                edited = lines[:fn.lineno - 1] + doubled + lines[fn.end_lineno:]
                file.write_text("".join(edited))
                assert _findings(root, ["."], cache=True) == _findings(root, ["."], cache=False), (path, fn.name)
                edits += 1
            file.write_text("".join(lines[:body] + [" " * fn.body[0].col_offset + "_edited = 1\n"] + lines[body:]))
            assert _findings(root, ["."], cache=True) == _findings(root, ["."], cache=False), (path, fn.name)
            file.write_text(text)
            edits += 1
    assert edits >= 4


def _imported_modules(root: Path) -> list[str]:
    """The tree's Python files some other file imports a name from (`from a.b import c`)."""
    files = {p.relative_to(root).with_suffix("").as_posix().replace("/", "."): p.relative_to(root).as_posix()
             for p in root.rglob("*.py")}
    found = []
    for path in root.rglob("*.py"):
        try:
            module = ast.parse(path.read_text())
        except SyntaxError:
            continue
        for node in ast.walk(module):
            if isinstance(node, ast.ImportFrom) and node.module:
                for dotted, file in files.items():
                    if dotted.endswith(node.module) and file != path.relative_to(root).as_posix():
                        found.append(file)
    return found


def _double_a_number(lines: list[str]) -> list[str] | None:
    import re

    for index, line in enumerate(lines):
        match = re.search(r"=\s*(\d+)\b", line)
        if match:
            doubled = line[:match.start(1)] + str(int(match.group(1)) * 2) + line[match.end(1):]
            return lines[:index] + [doubled] + lines[index + 1:]
    return None


def test_an_edit_outside_every_definition_reuses_the_file_s_units_and_reads_its_suppressions_again(tree, monkeypatch):
    _findings(tree, ["."], cache=True)
    read = _reads(monkeypatch)
    pretrain = tree / "recipes" / "pretrain.py"
    pretrain.write_text(PRETRAIN + "\n\n# a note at the end\n")
    assert _findings(tree, ["recipes/pretrain.py"], cache=True) == _findings(tree, ["recipes/pretrain.py"], cache=False)
    assert read.count("recipes/pretrain.py") == 1  # the uncached run's
    read.clear()
    pretrain.write_text(PRETRAIN + "\n\n# offlint: ignore[OFL102]\n")  # suppresses nothing: read again
    cached = check(["recipes/pretrain.py"], CheckOptions(root=tree, mcore_version="0.20.0", workers=1))
    uncached = check(["recipes/pretrain.py"], CheckOptions(root=tree, mcore_version="0.20.0", workers=1, cache=False))
    assert sorted(map(repr, cached.findings)) == sorted(map(repr, uncached.findings))
    lines = PRETRAIN.splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if "cpu_offloading = True" in line)
    lines[at] = lines[at].rstrip("\n") + "  # offlint: ignore[OFL102]\n"  # inside the function: re-read
    pretrain.write_text("".join(lines))
    assert _findings(tree, ["recipes/pretrain.py"], cache=True) == _findings(tree, ["recipes/pretrain.py"], cache=False)
    assert "recipes/pretrain.py" not in {location.split(":")[0] for _, location, *_ in
                                         _findings(tree, ["recipes/pretrain.py"], cache=True)}


TWO = '''
from recipes.common import _pretrain_common, _sft_common


def first_config():
    cfg = _pretrain_common()
    cfg.model.cpu_offloading = True
    cfg.model.cpu_offloading_num_layers = 2
    return cfg


def second_config():
    cfg = _sft_common()
    cfg.model.cpu_offloading = True
    cfg.model.cpu_offloading_num_layers = 1
    return cfg
'''


def _units_read(monkeypatch) -> list[str]:
    """The functions read into units from now on (one worker: in this process)."""
    from offlint.sources.python import PythonReader

    read: list[str] = []
    original = PythonReader._function_unit

    def recording(self, name, node):
        read.append(name)
        return original(self, name, node)

    monkeypatch.setattr(PythonReader, "_function_unit", recording)
    return read


@pytest.mark.parametrize("edit, again", [
    (lambda text: text.replace("cpu_offloading_num_layers = 1", "cpu_offloading_num_layers = 3"), ["second_config"]),
    (lambda text: text.replace("def second_config():\n", "def second_config():\n    layers = 2\n"), ["second_config"]),
    (lambda text: text.replace("def first_config():\n", "def first_config():\n    layers = 2\n"),
     ["first_config"]),  # the second one's lines moved: its locations move with them
    (lambda text: text.replace("import _pretrain_common,", "import _pretrain_common as _p, _pretrain_common,"),
     ["first_config", "second_config"]),  # module-level statements changed: every unit
], ids=["value", "longer-last", "longer-first", "imports"])
def test_an_edit_of_one_recipe_re_reads_only_the_units_it_concerns(tree, monkeypatch, edit, again):
    two = tree / "recipes" / "two.py"
    two.write_text(TWO)
    _findings(tree, ["."], cache=True)
    read = _units_read(monkeypatch)
    two.write_text(edit(TWO))
    cached = _findings(tree, ["recipes/two.py"], cache=True)
    assert read == again
    assert cached == _findings(tree, ["recipes/two.py"], cache=False)
    read.clear()
    assert _findings(tree, ["."], cache=True) == _findings(tree, ["."], cache=False)


def test_an_edit_of_a_base_builder_re_reads_only_the_units_that_ran_it(tree, monkeypatch):
    (tree / "recipes" / "two.py").write_text(TWO)
    _findings(tree, ["."], cache=True)
    read = _units_read(monkeypatch)
    common = tree / "recipes" / "common.py"
    common.write_text(COMMON.replace("pipeline_model_parallel_size=2", "pipeline_model_parallel_size=1"))
    cached = _findings(tree, ["recipes/common.py"], cache=True)
    # the edited function's own unit, and the two recipes that ran it; common.py's other units are reused
    assert sorted(read) == ["_sft_common", "llama_sft_config", "second_config"]
    assert cached == _findings(tree, ["recipes/common.py"], cache=False)
    assert _findings(tree, ["."], cache=True) == _findings(tree, ["."], cache=False)


def test_entries_that_worker_processes_encoded_are_read_back_as_the_same_findings(tmp_path, monkeypatch):
    root = tmp_path / "tree"
    subprocess.run([sys.executable, str(GENERATOR), str(root), "--python-files", "60", "--seed", "5"], check=True,
                   capture_output=True, text=True)
    monkeypatch.chdir(root)
    parallel = check(["."], CheckOptions(root=root, mcore_version="0.20.0", workers=2))
    for last in project_cache_dir(root).glob("last-*"):
        last.unlink()  # no whole-run answer: every file's entry is looked up
    read = _reads(monkeypatch)
    again = check(["."], CheckOptions(root=root, mcore_version="0.20.0", workers=1))
    assert read == []
    assert sorted(map(repr, again.findings)) == sorted(map(repr, parallel.findings))


@pytest.mark.parametrize("unit_used", [{"llama_pretrain_config": [5]}, {"llama_pretrain_config": ["99:x"]},
                                       {"llama_pretrain_config": ["0:<module>", None]}])
def test_a_damaged_record_of_what_units_used_costs_a_re_read_not_an_answer(tree, unit_used):
    from offlint.api import CheckResult
    from offlint.cache import Cache

    _findings(tree, ["."], cache=True)
    [entries] = project_cache_dir(tree).glob("check-*.jsonl")
    cache = Cache(tree, entries.stem.removeprefix("check-"), result_classes=(CheckResult,)).load()
    stored = cache.previous("recipes/pretrain.py")
    stored.unit_used = unit_used
    cache.store(stored)
    cache.save(None)
    cache.close()
    pretrain = tree / "recipes" / "pretrain.py"
    pretrain.write_text(PRETRAIN.replace("cpu_offloading_num_layers = 2", "cpu_offloading_num_layers = 3"))
    assert _findings(tree, ["recipes/pretrain.py"], cache=True) == \
        _findings(tree, ["recipes/pretrain.py"], cache=False)


BRANCHED = '''
from recipes.common import _pretrain_common, _sft_common


def first_config():
    cfg = _pretrain_common()
    cfg.model.cpu_offloading = True
    return cfg


def second_config(fast: bool = False):
    cfg = _sft_common()
    cfg.model.cpu_offloading = True
    if fast:
        cfg.model.cpu_offloading_num_layers = 1
    else:
        cfg.model.cpu_offloading_num_layers = 2
    # where the layers go
    cfg.model.pipeline_model_parallel_size = 2
    return cfg
'''


@pytest.mark.parametrize("steps", [
    [lambda t: t.replace("    return cfg\n\n\ndef second", "    # a note\n    return cfg\n\n\ndef second"),
     lambda t: t.replace("# a note", "# another note"),
     lambda t: t.replace("    # another note\n", "")],
    [lambda t: t.replace("def first_config():\n", "def first_config():\n    layers = 2\n"),
     lambda t: t.replace("    # where the layers go\n", "")],
    [lambda t: "# a header\n" + t, lambda t: t.replace("def second_config(fast: bool = False):",
                                                      "def second_config(fast: bool = False):  # fast or not")],
    [lambda t: t.replace('def second_config(fast: bool = False):\n',
                         'def second_config(fast: bool = False):\n    """Second."""\n'),
     lambda t: t.replace('"""Second."""', '"""The second."""')],
    [lambda t: t.replace("num_layers = 1", "num_layers = 3"), lambda t: t.replace("fast: bool = False", "fast=True")],
], ids=["comment-added-changed-removed", "line-above-then-comment-gone", "header-then-def-comment", "docstring",
        "same-line-count"])
def test_edits_of_a_recipe_file_answer_what_an_uncached_check_does_after_each_step(tree, steps):
    """Every step of an edit sequence (a recipe with a branch: its values carry `(line N)` in their reasons) is
    followed by a cached and an uncached check of the file and of the tree: the same findings, locations
    included."""
    recipe = tree / "recipes" / "branched.py"
    recipe.write_text(BRANCHED)
    (tree / "recipes" / "two.py").write_text(TWO)
    _findings(tree, ["."], cache=True)
    text = BRANCHED
    for step in steps:
        text = step(text)
        recipe.write_text(text)
        for paths in (["recipes/branched.py"], ["."]):
            cached = check(paths, CheckOptions(root=tree, mcore_version="0.20.0", workers=1))
            uncached = check(paths, CheckOptions(root=tree, mcore_version="0.20.0", workers=1, cache=False))
            assert [repr(f) for f in cached.findings] == [repr(f) for f in uncached.findings]
            assert cached.errors == uncached.errors


def test_a_comment_or_moved_lines_reuse_the_units_and_move_their_findings(tree, monkeypatch):
    (tree / "recipes" / "two.py").write_text(TWO)
    before = _findings(tree, ["."], cache=True)
    read = _units_read(monkeypatch)
    common = tree / "recipes" / "common.py"
    common.write_text("# a new first line\n" + COMMON.replace("def _sft_common():\n", "def _sft_common():  # note\n"))
    after = _findings(tree, ["recipes/common.py"], cache=True)
    assert read == []  # nothing that any unit used means something else
    assert after == _findings(tree, ["recipes/common.py"], cache=False)
    moved = [f for f in after if f[1].startswith("recipes/common.py")] + \
        [f for f in after if any(r.startswith("recipes/common.py") for r in f[5])]
    assert moved, "findings located in common.py (or related to it), whose lines moved"
    read.clear()
    two = tree / "recipes" / "two.py"
    two.write_text(TWO.replace("def first_config():\n", "def first_config():\n    # first\n\n"))
    cached = _findings(tree, ["recipes/two.py"], cache=True)
    assert read == []
    assert cached == _findings(tree, ["recipes/two.py"], cache=False)
    assert _findings(tree, ["."], cache=True) == _findings(tree, ["."], cache=False)
    assert before != _findings(tree, ["."], cache=False)  # the lines did move


def test_a_cache_of_the_previous_format_is_refused_and_replaced(tree, monkeypatch):
    from offlint import cache as cache_module

    current = cache_module.FORMAT
    monkeypatch.setattr(cache_module, "FORMAT", current - 1)
    _findings(tree, ["."], cache=True)
    old = sorted(p.name for p in project_cache_dir(tree).iterdir())
    monkeypatch.setattr(cache_module, "FORMAT", current)
    read = _reads(monkeypatch)
    assert _findings(tree, ["."], cache=True) == _findings(tree, ["."], cache=False)
    assert "recipes/pretrain.py" in read  # read again, not taken from the other format's entries
    new = sorted(p.name for p in project_cache_dir(tree).iterdir())
    assert not set(old) & set(new) - {"CACHEDIR.TAG"}  # the old files are gone


@pytest.mark.parametrize("damage", ["", "1,x", "0*5", "-3", "abc def"])
def test_a_damaged_layout_costs_a_re_read_not_an_answer(tree, damage):
    from offlint.api import CheckResult
    from offlint.cache import Cache

    _findings(tree, ["."], cache=True)
    [entries] = project_cache_dir(tree).glob("check-*.jsonl")
    cache = Cache(tree, entries.stem.removeprefix("check-"), result_classes=(CheckResult,)).load()
    for path in ("recipes/pretrain.py", "recipes/common.py"):
        stored = cache.previous(path)
        for parts in stored.parts.values():
            for name in parts:
                parts[name] = f"{meaning(parts[name])} {damage}"
        cache.store(stored)
    cache.save(None)
    cache.close()
    for last in project_cache_dir(tree).glob("last-*"):
        last.unlink()
    common = tree / "recipes" / "common.py"
    common.write_text("# moved\n" + COMMON)
    assert _findings(tree, ["recipes/common.py"], cache=True) == _findings(tree, ["recipes/common.py"], cache=False)
    assert _findings(tree, ["."], cache=True) == _findings(tree, ["."], cache=False)


def test_relocate_moves_locations_and_texts_and_refuses_a_line_named_without_its_file():
    from dataclasses import replace

    from offlint.cache import FileOutcome
    from offlint.relocation import Unmovable, relocate
    from offlint.cache_format import VALUE_CLASSES, Codec
    from offlint.types import Assignment, Finding, Layer, Location, Severity, Source, Unit, UnitKind

    codec = Codec(VALUE_CLASSES + (FileOutcome,))
    here = Location("a.py", 10, 5)
    unit = Unit("u", UnitKind.RECIPE, Location("a.py", 3, 1), layers=[Layer("recipe", [
        Assignment("k", 1, here, Source.PYTHON, via=("by f() at a.py:10",)),
        Assignment("j", 2, Location("b.py", 11, 1), Source.PYTHON)])])
    finding = Finding("OFL102", "s", Severity.ERROR, "set at a.py:10:5 (line 2)", here, unit="u",
                      written=(("k", here),))
    moves = {"a.py": {3: 3, 10: 12}}
    [moved], [found] = relocate(codec, [unit], [finding], moves)
    # a.py:10 is now below b.py:11: the reader's sort by line puts it second
    assert [(a.key, a.location.line, a.via) for a in moved.layers[0].assignments] == \
        [("j", 11, ()), ("k", 12, ("by f() at a.py:12",))]
    assert (found.location.line, found.message, found.written) == (12, "set at a.py:12:5 (line 2)",
                                                                    (("k", Location("a.py", 12, 5)),))
    assert unit.layers[0].assignments[0].location.line == 10 and finding.location.line == 10  # copies
    assert moved.location is unit.location  # what holds nothing moved is not copied
    for unmovable in (replace(finding, message="depending on `if x` (line 10)"),  # which file's line 10?
                      replace(finding, location=Location("a.py", 7, 1))):  # a line no part keeps
        with pytest.raises(Unmovable):
            relocate(codec, [unit], [unmovable], moves)
    # what the Python reader writes names the file: "`if x` (a.py:10)", "via f() at a.py:10", an absolute path
    quoted = replace(finding, message="on the path where `if x` (a.py:10) is true, via f() at /t/a.py:10")
    [_], [found] = relocate(codec, [unit], [quoted], {**moves, "/t/a.py": {10: 11}})
    assert found.message == "on the path where `if x` (a.py:12) is true, via f() at /t/a.py:11"
    elsewhere = replace(finding, message="at a.py:10", location=Location("b.py", 1, 1), written=())
    with pytest.raises(Unmovable):  # a shortened path that may be src/a.py's
        relocate(codec, [None], [elsewhere], {"src/a.py": {10: 12}})
    assert relocate(codec, [None], [elsewhere], {"src/b.py": {10: 12}}) == ([None], [elsewhere])
    assert relocate(codec, [unit], [finding], {"a.py": {3: 3, 10: 10}}) == ([unit], [finding])


def test_relocate_moves_a_records_steps_and_keeps_the_module_of_its_class():
    """A record kept in a unit (a workload, `cfg.mixed_precision = bf16_mixed()`) names the `replace` calls its
    fields came from: they move with their lines, and the record stays what it was otherwise."""
    from offlint.cache import FileOutcome
    from offlint.cache_format import VALUE_CLASSES, Codec
    from offlint.relocation import relocate
    from offlint.sources.python_values import Record
    from offlint.types import Assignment, Layer, Location, Source, Unit, UnitKind

    codec = Codec(VALUE_CLASSES + (FileOutcome,))
    record = Record("WorkloadBaseConfig", {"tp": 2}, True, "w.py", {"tp": ("from replace(...) at w.py:9",)})
    unit = Unit("u", UnitKind.RECIPE, Location("a.py", 3, 1), layers=[Layer("recipe", [
        Assignment("mixed_precision", record, Location("a.py", 4, 1), Source.PYTHON)])])
    [moved], _ = relocate(codec, [unit], [], {"w.py": {9: 11}})
    back = moved.layers[0].assignments[0].value
    assert (back.fields, back.plain, back.origin, back.made) == (
        {"tp": 2}, True, "w.py", {"tp": ("from replace(...) at w.py:11",)})


SHARED = '''
from recipes.common import _pretrain_common


def _other_common():
    cfg = _pretrain_common()
    cfg.model.num_layers = 4
    return cfg


def _base():
    return _pretrain_common()


def _branchy_common(fast: bool):
    cfg = _base()
    if fast:
        cfg.model.cpu_offloading = True
        cfg.model.cpu_offloading_num_layers = 2
    return cfg
'''
FAST = '''
from recipes.common import _pretrain_common
from recipes.shared import _branchy_common


def first_config():
    cfg = _pretrain_common()
    cfg.model.cpu_offloading_num_layers = 2
    return cfg


def fast_config(fast: bool):
    cfg = _branchy_common(fast)
    cfg.model.cpu_offloading_num_layers = 2
    return cfg


def own_branch_config(fast: bool):
    cfg = _pretrain_common()
    if fast:
        cfg.model.cpu_offloading = True
    return cfg
'''
INSERTED = "    _inserted = 1\n"


@pytest.mark.parametrize("edited, function, again", [
    ("recipes/fast.py", "first_config", ["first_config"]),
    ("recipes/shared.py", "_other_common", ["_other_common"]),
], ids=["recipe-file", "base-builder-file"])
def test_a_line_inserted_above_a_unit_that_quotes_a_branch_condition_moves_it(tree, monkeypatch, edited, function,
                                                                             again):
    """The reader names each line it quotes with its file ("`if fast` (recipes/shared.py:17)", "via _base() at
    recipes/shared.py:16"): a statement inserted in a function above moves the units below, their findings'
    texts included, instead of reading them again."""
    (tree / "recipes" / "shared.py").write_text(SHARED)
    (tree / "recipes" / "fast.py").write_text(FAST)
    before = _findings(tree, ["."], cache=True)
    quoted = [message for _, _, message, *_ in before if "(on the path where `if fast` (recipes/" in message]
    assert {message.split("`if fast` (")[1].split(")")[0] for message in quoted} == \
        {f"recipes/shared.py:{SHARED.splitlines().index('    if fast:') + 1}",
         f"recipes/fast.py:{FAST.splitlines().index('    if fast:') + 1}"}
    read = _units_read(monkeypatch)
    path = tree / edited
    text = path.read_text().replace(f"def {function}():\n", f"def {function}():\n{INSERTED}")
    path.write_text(text)
    cached = _findings(tree, [edited], cache=True)
    assert read == again  # the units below it moved with their lines, texts included
    assert cached == _findings(tree, [edited], cache=False)
    line = text.splitlines().index("    if fast:") + 1
    assert any(f"`if fast` ({edited}:{line}) is true" in message for _, _, message, *_ in cached)
    read.clear()
    incremental = _findings(tree, ["."], cache=True)
    assert read == []
    assert incremental == _findings(tree, ["."], cache=False) != before


# What _dirty marks, as regular expressions over the module's text: the line holding a `#`, a blank before a line
# end (the line of the blank), a line end after a line end (the line of the second: a blank line), a text starting
# with a line end, a blank ending the text.
_MARKS_AS_WRITTEN = [(re.compile(rb"#"), 0), (re.compile(rb"(?=[ \t\f\r]\n)"), 0), (re.compile(rb"(?=\n\n)"), 1)]


@given(st.lists(st.binary(max_size=8) | st.lists(st.sampled_from([b"x", b" ", b"\t", b"\f", b"\r", b"#", b"="]),
                                                 max_size=6).map(b"".join), max_size=10))
def test_the_lines_to_look_at_are_exactly_those_with_a_comment_or_a_blank_to_leave_out(texts):
    lines = [line for text in texts for line in (text + b"\n").splitlines(keepends=True)]
    if texts and lines:
        lines[-1] = lines[-1].removesuffix(b"\n")  # the last line as a file may end: without a line end
    text = b"".join(lines)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    expected = set()
    for pattern, after in _MARKS_AS_WRITTEN:
        for match in pattern.finditer(text):
            expected.add(bisect.bisect_right(starts, match.start()) + after)
    if text[:1] == b"\n":
        expected.add(1)
    if text[-1:] in (b" ", b"\t", b"\f", b"\r"):
        expected.add(len(lines))
    assert _dirty(lines) == (sorted(expected), {number for number, line in enumerate(lines, 1) if b"#" in line})


def test_a_payload_leaves_its_call_records_to_the_records_section_and_a_decoded_outcome_reads_them_there(tree):
    import json

    from offlint.api import CheckResult
    from offlint.cache import Cache

    _findings(tree, ["."], cache=True)
    [entries] = project_cache_dir(tree).glob("check-*.jsonl")
    cache = Cache(tree, entries.stem.removeprefix("check-"), result_classes=(CheckResult,)).load()
    recorded = [path for path, entry in cache.entries.items() if entry.calls]
    assert recorded  # the recipes' calls into common.py were recorded
    for path in recorded:
        payload = json.loads(cache._payload(cache.entries[path]))
        assert payload["v"][-1] == {"@": "d", "v": []}  # FileOutcome.calls, the last field: written empty
        outcome = cache.previous(path)
        for rid in cache.entries[path].calls:
            record = outcome.calls[rid]
            assert isinstance(record, list) and record[:2] == cache.calls.get(rid)[:2]
    cache.close()
    # and a run that keeps units through those records answers as a run without the cache (an edit above them)
    common = tree / "recipes" / "common.py"
    common.write_text("# moved\n" + COMMON)
    assert _findings(tree, ["recipes/common.py"], cache=True) == _findings(tree, ["recipes/common.py"], cache=False)
