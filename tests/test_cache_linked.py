"""A launch command's findings, linked to the recipes of the tree, are kept (Cache.linked_findings) keyed by the
stored payloads of the command's file and of the files defining the recipes it may link to: a pre-commit run whose
those files are valid as stored takes them without decoding those recipes or checking the command again. Anything
that changes one of those payloads, or which names the command's recipe stands for, checks it again. The answer is
always the uncached one."""

import json

import pytest

from offlint import api
from offlint.cache_files import project_cache_dir
from tests.test_cache_deferred import COMMON, EDITS, LAUNCH, _answer, _decoded, tree  # noqa: F401 (fixture)


@pytest.fixture
def checked(monkeypatch):
    """The launch commands checked from now on (by the text of their unit's name)."""
    names: list[str] = []
    original = api._linked_kept

    def recording(reads, deferred, cache, targets, *rest):
        keys, kept = original(reads, deferred, cache, targets, *rest)
        names.extend(unit.name for unit, key, _ in keys.values() if key not in kept)
        return keys, kept

    monkeypatch.setattr(api, "_linked_kept", recording)
    return names


def _linked_file(root):
    [linked] = list(project_cache_dir(root).glob("linked-*.json"))
    return linked


def test_a_launch_linked_to_recipes_valid_as_stored_is_not_checked_again(tree, monkeypatch, checked):
    _answer(tree, ["."], cache=True)
    common = tree / "recipes" / "common.py"
    common.write_text(EDITS["comment"](COMMON))
    decoded = _decoded(monkeypatch)
    checked.clear()
    answer = _answer(tree, ["recipes/common.py"], cache=True)
    assert checked == []  # both launches kept
    assert "recipes/quiet.py" not in decoded and "recipes/legacy.py" not in decoded
    assert answer == _answer(tree, ["recipes/common.py"], cache=False)
    assert len(answer[0]) == 3  # the recipe's finding and the two launches', each drawing PP=4 from common.py


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_kept_or_not_the_answer_is_the_uncached_one(tree, edit, checked):
    _answer(tree, ["."], cache=True)
    common = tree / "recipes" / "common.py"
    common.write_text(EDITS[edit](common.read_text()))
    for paths in (["recipes/common.py"], ["recipes/quiet.py"], ["recipes/legacy.py"], ["launch/train_quiet.sh"]):
        assert _answer(tree, paths, cache=True) == _answer(tree, paths, cache=False), paths
    assert _answer(tree, ["recipes/common.py"], cache=True) == _answer(tree, ["recipes/common.py"], cache=False)


def test_a_value_the_launch_draws_from_the_base_builder_changed_checks_it_again(tree, checked):
    _answer(tree, ["."], cache=True)
    common = tree / "recipes" / "common.py"
    common.write_text(EDITS["used-value"](COMMON))  # PP 4 -> 8: quiet.py's units are read again
    checked.clear()
    answer = _answer(tree, ["recipes/common.py"], cache=True)
    assert any("--recipe quiet_config" in name for name in checked)
    assert answer == _answer(tree, ["recipes/common.py"], cache=False)
    assert any("pipeline_model_parallel_size=8" in finding and "--recipe quiet_config" in finding
               for finding in answer[0])


def test_the_launch_file_edited_checks_it_again(tree, checked):
    _answer(tree, ["."], cache=True)
    (tree / "launch" / "train_quiet.sh").write_text(LAUNCH.format(name="quiet_config", n=4))
    (tree / "recipes" / "common.py").write_text(EDITS["comment"](COMMON))
    checked.clear()
    answer = _answer(tree, ["recipes/common.py"], cache=True)
    assert [name for name in checked if "--recipe quiet_config" in name]  # its file read again: a new payload
    assert not [name for name in checked if "legacy_quiet_config" in name]
    assert answer == _answer(tree, ["recipes/common.py"], cache=False)


def test_an_alias_that_now_names_another_recipe_checks_the_launch_again(tree, checked):
    _answer(tree, ["."], cache=True)
    legacy = tree / "recipes" / "legacy.py"
    # the legacy name now runs unused_config (12 layers: 4 pipeline stages of 3, cpu_offloading_num_layers=1)
    legacy.write_text(legacy.read_text().replace("from recipes.quiet import quiet_config as",
                                                 "from recipes.unused import unused_config as"))
    (tree / "recipes" / "common.py").write_text(EDITS["comment"](COMMON))
    checked.clear()
    answer = _answer(tree, ["recipes/common.py"], cache=True)
    assert [name for name in checked if "legacy_quiet_config" in name]  # the names it stands for changed
    assert answer == _answer(tree, ["recipes/common.py"], cache=False)
    assert _answer(tree, ["recipes/legacy.py"], cache=True) == _answer(tree, ["recipes/legacy.py"], cache=False)


def test_the_launch_is_kept_through_its_alias(tree, checked):
    (tree / "launch" / "train_quiet.sh").unlink()
    _answer(tree, ["."], cache=True)
    (tree / "recipes" / "common.py").write_text(EDITS["comment"](COMMON))
    checked.clear()
    answer = _answer(tree, ["recipes/common.py"], cache=True)
    assert checked == []
    assert answer == _answer(tree, ["recipes/common.py"], cache=False)
    assert any("legacy_quiet_config" in finding for finding in answer[0])


@pytest.mark.parametrize("damage", ["not json", json.dumps({"format": 0, "key": "x", "commands": {}}), "[]",
                                    "{\"commands\": {\"k\": \"[\"}}"])
def test_a_damaged_file_of_kept_findings_is_ignored(tree, damage, checked):
    _answer(tree, ["."], cache=True)
    _linked_file(tree).write_text(damage)
    (tree / "recipes" / "common.py").write_text(EDITS["comment"](COMMON))
    checked.clear()
    answer = _answer(tree, ["recipes/common.py"], cache=True)
    assert len(checked) == 2
    assert answer == _answer(tree, ["recipes/common.py"], cache=False)


def test_a_damaged_kept_entry_is_checked_again(tree, checked):
    _answer(tree, ["."], cache=True)
    linked = _linked_file(tree)
    data = json.loads(linked.read_text())
    data["commands"] = {key: "[{\"@\": \"Finding\", \"v\": []}]" for key in data["commands"]}
    linked.write_text(json.dumps(data))
    (tree / "recipes" / "common.py").write_text(EDITS["comment"](COMMON))
    checked.clear()
    answer = _answer(tree, ["recipes/common.py"], cache=True)
    assert len(checked) == 2
    assert answer == _answer(tree, ["recipes/common.py"], cache=False)


def test_a_whole_tree_run_keeps_only_the_launches_it_checked(tree):
    _answer(tree, ["."], cache=True)
    first = set(json.loads(_linked_file(tree).read_text())["commands"])
    assert len(first) == 2
    (tree / "launch" / "train_quiet.sh").write_text(LAUNCH.format(name="quiet_config", n=4))
    _answer(tree, ["launch/train_quiet.sh", "recipes/common.py"], cache=True)  # a pre-commit run adds none here
    _answer(tree, ["."], cache=True)
    now = set(json.loads(_linked_file(tree).read_text())["commands"])
    assert len(now) == 2 and len(now & first) == 1  # train_legacy.sh's kept, train_quiet.sh's replaced


def test_a_launch_whose_recipe_only_moved_keeps_its_findings_at_the_new_lines(tree, checked):
    """A line inserted above the base builder moves it, and what the recipes read of it, without changing it: their
    stored outcomes are valid with those lines moved, and so are the findings of the launches linked to them, moved
    the same way (the answer is the uncached one, and no launch is checked again)."""
    _answer(tree, ["."], cache=True)
    before = _answer(tree, ["recipes/common.py"], cache=True)
    common = tree / "recipes" / "common.py"
    text = common.read_text()
    common.write_text(text.replace("\n\ndef _pretrain_common", "\n# the base of the pretrain recipes\n\ndef _pretrain_common"))
    checked.clear()
    answer = _answer(tree, ["recipes/common.py"], cache=True)
    assert checked == []  # both launches kept
    assert answer == _answer(tree, ["recipes/common.py"], cache=False)
    line = 1 + text[:text.index("pipeline_model_parallel_size=4")].count("\n")  # what both launches draw on
    drawn = f"Location(path='recipes/common.py', line={{}},"
    assert [drawn.format(line) in f for f in before[0] if "--recipe" in f] == [True, True]
    assert [drawn.format(line + 1) in f for f in answer[0] if "--recipe" in f] == [True, True]
