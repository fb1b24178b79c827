"""The entries file grows by blocks: a run that changed a few entries appends them (cache.Cache._append) instead of
writing the whole file again, and a reader takes the blocks in order (Cache._read_blocks); the call records are read
on first use. Whatever happens to the blocks (cut short, written by another run, too many), the answer is the one
without a cache."""

import json
from pathlib import Path

import pytest

from offlint import cache as cache_module
from offlint.api import CheckOptions, CheckResult, check
from offlint.cache import Cache, digest
from offlint.cache_files import project_cache_dir
from tests.cache_helpers import digests_now

BASE = '''
from megatron.bridge.training.config import ConfigContainer, OptimizerConfig
from megatron.bridge.models import GPTModelProvider


def _pretrain_common():
    return ConfigContainer(model=GPTModelProvider(num_layers=8, pipeline_model_parallel_size=4),
                           optimizer=OptimizerConfig(optimizer="adam"))
'''
RECIPE = '''
from recipes.common import _pretrain_common


def {name}_offload_config():
    cfg = _pretrain_common()
    cfg.model.cpu_offloading = {offload}
    cfg.model.cpu_offloading_num_layers = 2
    return cfg
'''


@pytest.fixture()
def tree(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "__init__.py").write_text("")
    (tmp_path / "recipes" / "common.py").write_text(BASE)
    for name in ("llama", "qwen", "gemma"):
        (tmp_path / "recipes" / f"{name}.py").write_text(RECIPE.format(name=name, offload=True))
    return tmp_path


def _answer(root: Path, paths=(".",), cache: bool = True) -> list[str]:
    result = check(list(paths), CheckOptions(root=root, select=["OFL102"], cache=cache))
    assert not result.errors
    return sorted(f"{f.code} {f.location.path}:{f.location.line}" for f in result.findings)


def _entries_file(root: Path) -> Path:
    [found] = project_cache_dir(root).glob("check-*.jsonl")
    return found


def _forget_last(root: Path) -> None:
    """Without the whole-run answer, a run looks its files' entries up."""
    for path in project_cache_dir(root).glob("last-*"):
        path.unlink()


def _blocks(data: bytes) -> list[dict]:
    """The blocks after the payloads of an entries file (checked whole)."""
    header, _, rest = data.partition(b"\n")
    position = json.loads(header)["size"]
    blocks = []
    while position < len(rest):
        line, _, _ = rest[position:].partition(b"\n")
        block = json.loads(line)
        blocks.append(block)
        position += len(line) + 1 + block["size"]
    assert position == len(rest)
    return blocks


def _edit(root: Path, name: str, offload: bool) -> None:
    (root / "recipes" / f"{name}.py").write_text(RECIPE.format(name=name, offload=offload))


def test_a_run_that_changed_one_file_appends_its_entry_and_a_reader_takes_it(tree):
    assert _answer(tree) == ["OFL102 recipes/gemma.py:7", "OFL102 recipes/llama.py:7", "OFL102 recipes/qwen.py:7"]
    before = _entries_file(tree).read_bytes()
    assert _blocks(before) == []
    _edit(tree, "llama", offload=False)
    _forget_last(tree)
    assert _answer(tree) == _answer(tree, cache=False) == ["OFL102 recipes/gemma.py:7", "OFL102 recipes/qwen.py:7"]
    after = _entries_file(tree).read_bytes()
    assert after.startswith(before) and len(after) > len(before)  # appended, nothing before it rewritten
    [block] = _blocks(after)
    assert list(block["entries"]) == ["recipes/llama.py"] and block["drop"] == []
    text = (tree / "recipes" / "llama.py").read_text()
    stored = Cache(tree, _entries_file(tree).stem.removeprefix("check-"), result_classes=(CheckResult,)).load()
    assert stored.entries["recipes/llama.py"].digest == digest(text)
    now = digests_now(tree)
    outcome = stored.lookup("recipes/llama.py", digest(text), now)
    assert outcome is not None and outcome.findings == []
    stored.close()
    # a pre-commit run on the edited file, and another edit of it: read from the blocks, answers as without a cache
    assert _answer(tree, ["recipes/llama.py"]) == _answer(tree, ["recipes/llama.py"], cache=False) == []
    _edit(tree, "llama", offload=True)
    _forget_last(tree)
    assert _answer(tree) == _answer(tree, cache=False)
    assert len(_blocks(_entries_file(tree).read_bytes())) == 2
    assert _answer(tree, ["recipes/common.py"]) == _answer(tree, ["recipes/common.py"], cache=False)


def test_a_block_cut_short_is_ignored_and_the_file_is_written_whole_again(tree):
    _answer(tree)
    _edit(tree, "qwen", offload=False)
    _forget_last(tree)
    _answer(tree)
    entries = _entries_file(tree)
    data = entries.read_bytes()
    assert len(_blocks(data)) == 1
    entries.write_bytes(data[:-10])  # a run stopped while appending
    _forget_last(tree)
    assert _answer(tree) == _answer(tree, cache=False) == ["OFL102 recipes/gemma.py:7", "OFL102 recipes/llama.py:7"]
    assert _blocks(_entries_file(tree).read_bytes()) == []  # the qwen entry stored again, with the file whole


def test_a_file_appended_to_by_another_run_since_it_was_read_is_written_whole(tree):
    _answer(tree)
    key = _entries_file(tree).stem.removeprefix("check-")
    first = Cache(tree, key, result_classes=(CheckResult,)).load()
    assert first.entries  # read now: what it appends must follow what it read
    _edit(tree, "gemma", offload=False)
    _forget_last(tree)
    _answer(tree)  # another run appends its block
    assert len(_blocks(_entries_file(tree).read_bytes())) == 1
    now = digests_now(tree)
    outcome = first.lookup("recipes/qwen.py", now["recipes/qwen.py"], now)
    assert outcome is not None
    first.store(outcome)
    first.save(None)
    first.close()
    assert _blocks(_entries_file(tree).read_bytes()) == []
    _forget_last(tree)
    assert _answer(tree) == _answer(tree, cache=False)


def test_after_so_many_blocks_the_file_is_written_whole(tree, monkeypatch):
    monkeypatch.setattr(cache_module, "MAX_BLOCKS", 2)
    _answer(tree)
    counts = []
    for offload in (False, True, False):
        _edit(tree, "llama", offload=offload)
        _forget_last(tree)
        assert _answer(tree) == _answer(tree, cache=False)
        counts.append(len(_blocks(_entries_file(tree).read_bytes())))
    assert counts == [1, 2, 0]


def test_call_records_are_read_when_used_and_a_damaged_one_costs_a_read_again(tree):
    _answer(tree)
    data = _entries_file(tree).read_bytes()
    header, _, rest = data.partition(b"\n")
    index = json.loads(header)
    assert index["calls"]  # the recipes' followed calls of _pretrain_common
    for offset, length, _ in index["calls"].values():
        rest = rest[:offset] + b"[" * length + rest[offset + length:]
    _entries_file(tree).write_bytes(header + b"\n" + rest)
    (tree / "recipes" / "common.py").write_text(BASE + "\n\ndef _unused():\n    return 1\n")
    assert _answer(tree, ["recipes/common.py"]) == _answer(tree, ["recipes/common.py"], cache=False)
    _forget_last(tree)
    assert _answer(tree) == _answer(tree, cache=False)
