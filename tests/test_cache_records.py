"""Records of followed calls (offlint/sources/python_records.py): after an edit of a base builder, a cached check
re-reads only the units whose call of the builder now gives something else, and answers what a check without the
cache answers."""

import re

import pytest

from offlint.api import CheckOptions, check
from offlint.sources.python_records import CallRecord, call_args, encode
from offlint.types import Assignment, Location, Source, Unknown

from test_cache_parts import _reads

BASE = '''
from megatron.bridge.training.config import ConfigContainer, OptimizerConfig
from megatron.bridge.models import GPTModelProvider


def _helper(offload):
    return GPTModelProvider(num_layers=8, pipeline_model_parallel_size=4, cpu_offloading=offload)


def _pretrain_common(layers=2):
    cfg = ConfigContainer(model=_helper(True), optimizer=OptimizerConfig(optimizer="adam"))
    cfg.model.cpu_offloading_num_layers = layers
    return cfg


def _other_common():
    return ConfigContainer(model=GPTModelProvider(num_layers=8, pipeline_model_parallel_size=2),
                           optimizer=OptimizerConfig(optimizer="adam"))
'''
# The reader sorts a recipe's assignments by line, whatever their file (offlint.relocation._same_order): the recipes'
# lines lie below the base module's, so that moving those never makes two of them tie.
PAD = "# a recipe module\n" * 30
ALPHA = PAD + '''
from recipes.base import _pretrain_common


def alpha_pretrain_config():
    cfg = _pretrain_common()
    cfg.model.recompute_granularity = "selective"
    return cfg


def alpha_long_pretrain_config():
    cfg = _pretrain_common()
    cfg.model.recompute_method = "uniform"
    return cfg
'''
BETA = PAD + '''
from recipes.base import _pretrain_common, _other_common


def beta_pretrain_config():
    cfg = _pretrain_common(3)
    cfg.model.recompute_granularity = "selective"
    return cfg


def beta_other_config():
    cfg = _other_common()
    cfg.model.cpu_offloading = True
    cfg.model.cpu_offloading_num_layers = 1
    return cfg
'''


@pytest.fixture
def tree(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OFFLINT_CACHE_DIR", str(tmp_path.parent / f"{tmp_path.name}-cache"))
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'tree'\n")
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "__init__.py").write_text("")
    (tmp_path / "recipes" / "base.py").write_text(BASE)
    (tmp_path / "recipes" / "alpha.py").write_text(ALPHA)
    (tmp_path / "recipes" / "beta.py").write_text(BETA)
    return tmp_path


def _answer(root, paths, cache: bool, strict: bool = False) -> list[str]:
    result = check(paths, CheckOptions(root=root, mcore_version="0.20.0", cache=cache, workers=1, strict=strict))
    assert not result.errors
    return sorted(repr(f) for f in result.findings)


def _lines_apart(findings: list[str]) -> list[str]:
    return sorted(re.sub(r"(recipes/base\.py(?:', line=|:))\d+", r"\1#", f) for f in findings)


def _edit(root, old: str, new: str) -> None:
    path = root / "recipes" / "base.py"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def _same_as_uncached(root) -> None:
    for paths in (["recipes/base.py"], ["."]):
        for strict in (False, True):
            assert _answer(root, paths, True, strict) == _answer(root, paths, False, strict), (paths, strict)


def test_a_line_inserted_into_a_base_builder_that_gives_the_same_result_re_reads_no_unit(tree, monkeypatch):
    before = _answer(tree, ["."], cache=True)
    assert any("recipes/base.py:" in finding for finding in before)  # findings point into the builder
    read = _reads(monkeypatch)
    _edit(tree, "def _pretrain_common(layers=2):\n", "def _pretrain_common(layers=2):\n    unused = 1\n")
    cached = _answer(tree, ["recipes/base.py"], cache=True)
    assert read == ["recipes/base.py"]  # alpha.py and beta.py are kept, their locations moved
    read.clear()
    assert cached == _answer(tree, ["recipes/base.py"], cache=False)
    assert cached != before and _lines_apart(cached) == _lines_apart(before)  # the same, some lines moved
    _same_as_uncached(tree)


def test_an_edit_that_changes_the_builder_s_result_re_reads_the_units_and_their_findings_change(tree, monkeypatch):
    before = _answer(tree, ["."], cache=True)
    read = _reads(monkeypatch)
    _edit(tree, "    cfg.model.cpu_offloading_num_layers = layers\n",
          "    cfg.model.cpu_offloading_num_layers = layers\n    cfg.model.recompute_granularity = \"full\"\n")
    cached = _answer(tree, ["recipes/base.py"], cache=True)
    assert sorted(set(read)) == ["recipes/alpha.py", "recipes/base.py", "recipes/beta.py"]
    read.clear()
    assert cached == _answer(tree, ["recipes/base.py"], cache=False)
    assert _lines_apart(cached) != _lines_apart(before)  # recompute_granularity "full": other findings
    _same_as_uncached(tree)


@pytest.mark.parametrize("old, new, reread", [
    # a default argument: beta passes its own, alpha's calls change
    ("def _pretrain_common(layers=2):", "def _pretrain_common(layers=4):", {"recipes/alpha.py"}),
    # a helper the builder calls: every unit running the builder
    ("cpu_offloading=offload)", "cpu_offloading=not offload)", {"recipes/alpha.py", "recipes/beta.py"}),
    # a helper's lines moved only: nothing
    ("def _helper(offload):\n", "def _helper(offload):\n    # a note\n\n", set()),
    # the builder's text changed, its result not: nothing
    ("    return cfg\n", "    unused = cfg\n    return unused\n", set()),
])
def test_edits_re_read_exactly_the_units_whose_call_gives_something_else(tree, monkeypatch, old, new, reread):
    _answer(tree, ["."], cache=True)
    read = _reads(monkeypatch)
    _edit(tree, old, new)
    _answer(tree, ["recipes/base.py"], cache=True)
    assert set(read) - {"recipes/base.py"} == reread
    read.clear()
    _same_as_uncached(tree)


def test_edits_in_sequence_answer_what_an_uncached_check_does(tree):
    _answer(tree, ["."], cache=True)
    steps = [("def _pretrain_common(layers=2):\n", "def _pretrain_common(layers=2):\n    unused = 1\n"),
             ("    unused = 1\n", "    unused = 1\n    other = 2\n"),
             ("    other = 2\n", "    cfg_unused = _helper(False)\n"),
             ("def _helper(offload):\n", "def _helper(offload):\n    extra = _other_common()\n"),
             ("cpu_offloading=offload)", "cpu_offloading=False)"),
             ("    unused = 1\n", "")]
    for old, new in steps:
        _edit(tree, old, new)
        _same_as_uncached(tree)


def test_a_result_is_encoded_with_the_lines_of_the_run_s_files_apart():
    at = Location("recipes/base.py", 12, 4)
    first = Assignment("model.num_layers", 8, at, Source.PYTHON, "8", ("via _helper() at recipes/base.py:11",))
    moved = Assignment("model.num_layers", 8, Location("recipes/base.py", 13, 4), Source.PYTHON, "8",
                       ("via _helper() at recipes/base.py:12",))
    digest, lines = encode((first, Unknown("x")), {"recipes/base.py"})
    assert lines == [["recipes/base.py", 12], ["recipes/base.py", 11]]  # in field order: location, then via
    assert encode((moved, Unknown("x")), {"recipes/base.py"}) == (digest, [["recipes/base.py", 13],
                                                                          ["recipes/base.py", 12]])
    assert encode((first, Unknown("y")), {"recipes/base.py"})[0] != digest
    assert encode((first, Unknown("x")), set())[0] != encode((moved, Unknown("x")), set())[0]  # other files' lines
    assert encode(object(), set()) is None  # nothing it can describe exactly: no record
    assert call_args([1, "a", None, 2.5, True], {"k": "v"}) is not None
    assert call_args([[1]], {}) is None and call_args(["at x.py:3"], {}) is None and call_args([1e999], {}) is None
    inner = CallRecord("c.py", "h", "[[],[]]", 0, 0, frozenset({"d.py"}), (), None)
    outer = CallRecord("a.py", "f", "[[],[]]", 0, 0, frozenset({("b.py", "g")}), ((2, inner),), None)
    assert outer.files() == {"a.py", "b.py", "c.py", "d.py"}  # a nested call's lines are the run's too
    assert outer.all_deps() == {("b.py", "g"), "d.py"}
