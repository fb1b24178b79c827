"""A pre-commit run decodes only the stored outcomes it needs: of a file read for context (it imports a changed
one, and its stored outcome is valid as stored), it decodes the outcome only when a finding of it points into a
changed file, it has launch commands or YAML layers or suppression comments, or a launch command of the run names
one of its recipes (directly or through an `X as Y` re-export). The answer is always the uncached one."""

import json
from pathlib import Path

import pytest

from offlint.api import CheckOptions, check
from offlint.cache import Cache
from offlint.cache_files import project_cache_dir
from tests.test_cache_parts import _reads

COMMON = '''from megatron.bridge.training.config import ConfigContainer, OptimizerConfig
from megatron.bridge.models import GPTModelProvider


def _pretrain_common():
    return ConfigContainer(model=GPTModelProvider(num_layers=8, pipeline_model_parallel_size=4),
                           optimizer=OptimizerConfig(optimizer="adam"))


def _sft_common():
    return ConfigContainer(model=GPTModelProvider(num_layers=8, pipeline_model_parallel_size=2),
                           optimizer=OptimizerConfig(optimizer="adam"))
'''
LLAMA = '''from recipes.common import _pretrain_common


def llama_offload_config():
    cfg = _pretrain_common()
    cfg.model.cpu_offloading = True
    cfg.model.cpu_offloading_num_layers = 2
    return cfg
'''
QUIET = '''from recipes.common import _pretrain_common


def quiet_config():
    cfg = _pretrain_common()
    cfg.model.num_layers = 16
    return cfg
'''
UNUSED = QUIET.replace("quiet_config", "unused_config").replace("= 16", "= 12")
# A re-export, in a module whose own recipe runs the base builder (so the cache's dependencies choose it)
LEGACY = "from recipes.quiet import quiet_config as legacy_quiet_config\n" + \
    UNUSED.replace("unused_config", "legacy_own_config").replace("= 12", "= 24")  # 24 layers divide over PP 4 and 8
LAUNCH = '''#!/bin/bash
python scripts/training/run_recipe.py --recipe {name} model.cpu_offloading=True model.cpu_offloading_num_layers={n}
'''
EDITS = {
    "comment": lambda text: text + "\n# a comment\n",
    "unused-value": lambda text: text.replace("pipeline_model_parallel_size=2", "pipeline_model_parallel_size=1"),
    "used-value": lambda text: text.replace("pipeline_model_parallel_size=4", "pipeline_model_parallel_size=8"),
    "unused-insert": lambda text: text.replace("def _sft_common():\n", "def _sft_common():\n    layers = 3\n"),
    "used-insert": lambda text: text.replace("def _pretrain_common():\n", "def _pretrain_common():\n    x = 3\n"),
    "def-comment": lambda text: text.replace("def _pretrain_common():", "def _pretrain_common():  # note"),
}


@pytest.fixture
def tree(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OFFLINT_CACHE_DIR", str(tmp_path.parent / f"{tmp_path.name}-cache"))
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'tree'\n")
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "__init__.py").write_text("")
    for name, text in [("common", COMMON), ("llama", LLAMA), ("quiet", QUIET), ("unused", UNUSED),
                       ("legacy", LEGACY)]:
        (tmp_path / "recipes" / f"{name}.py").write_text(text)
    (tmp_path / "launch").mkdir()
    (tmp_path / "launch" / "train_quiet.sh").write_text(LAUNCH.format(name="quiet_config", n=3))
    (tmp_path / "launch" / "train_legacy.sh").write_text(LAUNCH.format(name="legacy_quiet_config", n=1))
    return tmp_path


def _answer(root: Path, paths: list[str], cache: bool) -> tuple:
    result = check(paths, CheckOptions(root=root, mcore_version="0.20.0", cache=cache, workers=1))
    shown = {f.location.path for f in result.findings} | {r.location.path for f in result.findings
                                                          for r in f.related}
    return (sorted(map(repr, result.findings)), sorted(map(repr, result.errors)), result.files_checked,
            result.units, {path: text for path, text in result.sources.items() if path in shown}, result.notes)


def _forget_linked(root: Path) -> None:
    """Removes the launch commands' findings kept by earlier runs (Cache.linked_findings)."""
    [linked] = list(project_cache_dir(root).glob("linked-*.json"))
    linked.unlink()


def _decoded(monkeypatch) -> list[str]:
    """The files whose stored outcome is decoded from now on."""
    decoded: list[str] = []
    original = Cache._decoded

    def recording(self, path, entry):
        decoded.append(path)
        return original(self, path, entry)

    monkeypatch.setattr(Cache, "_decoded", recording)
    return decoded


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_a_pre_commit_run_answers_what_an_uncached_one_does(tree, edit):
    _answer(tree, ["."], cache=True)
    common = tree / "recipes" / "common.py"
    common.write_text(EDITS[edit](common.read_text()))
    for paths in (["recipes/common.py"], ["recipes/quiet.py"], ["launch/train_legacy.sh"], ["recipes/legacy.py"],
                  ["recipes/common.py", "recipes/unused.py"], ["."]):
        assert _answer(tree, paths, cache=True) == _answer(tree, paths, cache=False), paths
    # and again, the cache now refreshed by those runs
    assert _answer(tree, ["recipes/common.py"], cache=True) == _answer(tree, ["recipes/common.py"], cache=False)


def test_only_the_outcomes_the_run_needs_are_decoded(tree, monkeypatch):
    _answer(tree, ["."], cache=True)
    common = tree / "recipes" / "common.py"
    common.write_text(EDITS["unused-value"](COMMON))
    _forget_linked(tree)  # the launches' findings are not kept (test_cache_linked): their recipes are decoded
    decoded, read = _decoded(monkeypatch), _reads(monkeypatch)
    answer = _answer(tree, ["recipes/common.py"], cache=True)
    assert read == ["recipes/common.py"]  # nothing ran _sft_common
    # llama.py's finding points into common.py; a launch runs quiet_config; nothing runs unused_config or
    # legacy_own_config (the launch's legacy_quiet_config is found in legacy.py's text, not in its units)
    assert sorted(set(decoded)) == ["launch/train_legacy.sh", "launch/train_quiet.sh", "recipes/llama.py",
                                    "recipes/quiet.py"]
    assert answer == _answer(tree, ["recipes/common.py"], cache=False)
    assert len(answer[0]) == 3  # the recipe's finding and the two launches', each drawing PP=4 from common.py


def test_a_recipe_named_only_through_a_re_export_is_decoded_for_the_launch(tree, monkeypatch):
    (tree / "launch" / "train_quiet.sh").unlink()
    _answer(tree, ["."], cache=True)
    common = tree / "recipes" / "common.py"
    common.write_text(EDITS["comment"](COMMON))
    _forget_linked(tree)
    decoded = _decoded(monkeypatch)
    answer = _answer(tree, ["recipes/common.py"], cache=True)
    assert "recipes/quiet.py" in decoded and "recipes/unused.py" not in decoded
    assert answer == _answer(tree, ["recipes/common.py"], cache=False)
    assert any("legacy_quiet_config" in finding for finding in answer[0])


def test_a_stored_outcome_that_does_not_decode_when_needed_is_read_again(tree, monkeypatch):
    _answer(tree, ["."], cache=True)
    [entries] = list(project_cache_dir(tree).glob("check-*.jsonl"))
    data = entries.read_bytes()
    header, _, payloads = data.partition(b"\n")
    _, _, _, offset, length, summary, _, _ = json.loads(header)["entries"]["recipes/quiet.py"]
    assert summary[0] == ["quiet_config"] and summary[1:5] == [False, [], False, False]
    damaged = payloads[:offset] + b"[" * length + payloads[offset + length:]
    entries.write_bytes(header + b"\n" + damaged)
    common = tree / "recipes" / "common.py"
    common.write_text(EDITS["unused-value"](COMMON))
    read = _reads(monkeypatch)
    answer = _answer(tree, ["recipes/common.py"], cache=True)
    assert "recipes/quiet.py" in read
    assert answer == _answer(tree, ["recipes/common.py"], cache=False)


def test_a_launch_running_a_recipe_through_a_pure_re_export_is_checked(tree):
    # the module re-exporting the recipe records where its name leads (NameLookup.note_reexports): a pre-commit
    # run with a cache chooses it, and the launch running the recipe by that name, as one without a cache does
    (tree / "recipes" / "legacy.py").write_text("from recipes.quiet import quiet_config as legacy_quiet_config\n")
    _answer(tree, ["."], cache=True)
    answer = _answer(tree, ["recipes/common.py"], cache=True)
    assert answer == _answer(tree, ["recipes/common.py"], cache=False)
    assert any("--recipe legacy_quiet_config" in finding for finding in answer[0])
