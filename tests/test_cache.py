"""The content-hash cache: reused when nothing changed, invalidated through every file a result depended on,
kept outside the checked tree, and never able to run code or change an answer when planted or damaged."""

import json
import os
import pickle
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from offlint.api import CheckOptions, CheckResult, check
from offlint.cache import FORMAT, Cache, digest
from offlint.cache_files import cache_home, project_cache_dir
from offlint.sources.module_index import ModuleIndex, lookup_state, module_lookup
from tests.cache_helpers import digests_now

BASE = '''
from megatron.bridge.training.config import ConfigContainer, OptimizerConfig
from megatron.bridge.models import GPTModelProvider


def _pretrain_common():
    return ConfigContainer(model=GPTModelProvider(num_layers=8, pipeline_model_parallel_size={pp}),
                           optimizer=OptimizerConfig(optimizer="adam"))
'''
RECIPE = '''
from recipes.common import _pretrain_common


def llama_offload_config():
    cfg = _pretrain_common()
    cfg.model.cpu_offloading = True
    cfg.model.cpu_offloading_num_layers = 2
    return cfg
'''


def _tree(root: Path, pp: int) -> None:
    (root / "recipes").mkdir(parents=True, exist_ok=True)
    (root / "recipes" / "__init__.py").write_text("")
    (root / "recipes" / "common.py").write_text(BASE.format(pp=pp))
    (root / "recipes" / "llama.py").write_text(RECIPE)


def _codes(root: Path, **options) -> list[str]:
    result = check(["."], CheckOptions(root=root, select=["OFL102"], **options))
    assert not result.errors
    return [f"{f.code} {f.location.path}" for f in result.findings]


def _cache_dir(root: Path) -> Path:
    return project_cache_dir(root)


def _cache(root: Path) -> Cache:
    [cache_file] = _cache_dir(root).glob("check-*.jsonl")
    return Cache(root, cache_file.stem.removeprefix("check-"), result_classes=(CheckResult,)).load()


def test_warm_run_reuses_entries_and_gives_the_same_findings(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _tree(tmp_path, pp=4)
    cold = _codes(tmp_path)
    assert cold == ["OFL102 recipes/llama.py"]
    assert (cache_home() / "CACHEDIR.TAG").read_text().startswith("Signature: 8a477f597d28d172789f06886806bc55")
    assert not (tmp_path / ".offlint_cache").exists()  # nothing is written into the checked tree
    cache = _cache(tmp_path)
    digests = {path: digest((tmp_path / path).read_text()) for path in ("recipes/llama.py", "recipes/common.py")}
    # the imports' lookups of the set of files too: an added module that either name resolves to re-reads it
    index = ModuleIndex(["recipes/__init__.py", "recipes/common.py", "recipes/llama.py"], lambda path: None)
    lookups = [module_lookup(name) for name in ("recipes.common", "megatron.bridge.models",
                                                "megatron.bridge.utils.cuda_graph",  # (Bridge's validate: OFL223
                                                "megatron.bridge.training.config")]  # and OFL217)
    digests.update({key: lookup_state(key, index) for key in lookups})
    assert cache.dependencies()["recipes/llama.py"] == {path: digests[path] for path in ("recipes/common.py",
                                                                                          *lookups)}
    stored = cache.lookup("recipes/llama.py", digests["recipes/llama.py"], digests)
    assert [f.code for f in stored.findings] == ["OFL102"]
    # Poison the stored findings: a warm run must hand back exactly what the cache holds.
    stored.findings = []
    cache.store(stored)
    cache.last = None  # no whole-run answer: the per-file entries are used
    cache.save(None)
    cache.close()
    assert _codes(tmp_path) == []


def test_an_unchanged_tree_gets_the_previous_whole_run_answer_and_any_edit_invalidates_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _tree(tmp_path, pp=4)
    assert _codes(tmp_path) == ["OFL102 recipes/llama.py"]
    cache = _cache(tmp_path)
    previous = cache.last_result(cache.last[0], {})
    assert [f.code for f in previous.findings] == ["OFL102"]
    cache.remember_result(cache.last[0], replace(previous, findings=[]), covered=set())  # poison the stored answer
    cache.close()
    assert _codes(tmp_path) == []  # nothing changed: the stored answer is returned as it is
    (tmp_path / "notes.py").write_text("X = 1\n")  # any new or edited file: recomputed
    assert _codes(tmp_path) == ["OFL102 recipes/llama.py"]


def test_editing_the_base_builder_re_reads_the_recipe_that_inherits_from_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _tree(tmp_path, pp=4)
    assert _codes(tmp_path) == ["OFL102 recipes/llama.py"]
    (tmp_path / "recipes" / "common.py").write_text(BASE.format(pp=1))  # only the other file changes
    assert _codes(tmp_path) == []
    (tmp_path / "recipes" / "common.py").write_text(BASE.format(pp=2))
    assert _codes(tmp_path) == ["OFL102 recipes/llama.py"]


def test_no_cache_writes_nothing_and_a_damaged_cache_is_ignored(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _tree(tmp_path, pp=4)
    assert _codes(tmp_path, cache=False) == ["OFL102 recipes/llama.py"]
    assert not _cache_dir(tmp_path).exists()
    _codes(tmp_path)
    for cache_file in _cache_dir(tmp_path).iterdir():
        cache_file.write_bytes(b"not json\n{]\t\x00")
    assert _codes(tmp_path) == ["OFL102 recipes/llama.py"]


def test_worker_processes_give_the_same_findings_as_one_process(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for index in range(130):
        package = tmp_path / f"pkg{index}"
        _tree(package, pp=4 if index % 3 == 0 else 1)
        (package / "recipes" / "llama.py").write_text(RECIPE.replace("from recipes.common",
                                                                    f"from pkg{index}.recipes.common"))
    serial = check(["."], CheckOptions(root=tmp_path, cache=False, workers=1))
    parallel = check(["."], CheckOptions(root=tmp_path, cache=False, workers=2))
    assert [str(f.location) + f.code for f in serial.findings] == \
           [str(f.location) + f.code for f in parallel.findings]
    assert len([f for f in serial.findings if f.code == "OFL102"]) == 44


# What the cache trusts: nothing from the checked tree, only private files of this user, and only as data.

HF_RECIPE = '''
from megatron.bridge import AutoBridge
from megatron.bridge.training.config import ConfigContainer, OptimizerConfig, TrainingConfig
from megatron.core.distributed import DistributedDataParallelConfig


def big_pretrain_config():
    cfg = ConfigContainer(
        model=AutoBridge.from_hf_pretrained("models/big").to_megatron_provider(),
        train=TrainingConfig(global_batch_size=8, micro_batch_size=1),
        optimizer=OptimizerConfig(optimizer="adam", bf16=True, use_distributed_optimizer=True),
        ddp=DistributedDataParallelConfig(use_distributed_optimizer=True),
    )
    cfg.model.tensor_model_parallel_size = 1
    cfg.model.pipeline_model_parallel_size = 1
    cfg.model.seq_length = 4096
    return cfg
'''


def _hf_config(layers: int) -> str:
    return json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 8192,
                       "intermediate_size": 28672, "num_attention_heads": 64, "num_key_value_heads": 8,
                       "num_hidden_layers": layers, "vocab_size": 128256, "max_position_embeddings": 8192,
                       "rms_norm_eps": 1e-5, "tie_word_embeddings": False})


def _cli(root: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "offlint", "check", *args], cwd=root, capture_output=True,
                          text=True, timeout=120, env={**os.environ, **(env or {})})


class _RunsCode:
    """A pickle that runs a shell command when loaded."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def test_a_planted_cache_runs_nothing_and_changes_no_finding(tmp_path):
    tree = tmp_path / "tree"
    _tree(tree, pp=4)
    (tree / ".git").mkdir()
    expected = _cli(tree, "--no-cache", "--select", "OFL102")
    assert expected.returncode == 1 and "OFL102" in expected.stdout
    marker = tmp_path / "ran"
    evil = pickle.dumps(_RunsCode(marker))
    assert _cli(tree, "--select", "OFL102").stdout == expected.stdout
    cache_dir = project_cache_dir(tree)
    files = sorted(p for p in cache_dir.iterdir() if p.name.startswith(("check-", "last-")))
    assert files
    # The key is the same for every copy of the tree, so a pull request can ship files of the right names where
    # the old cache lived (in the tree): they are never read.
    planted = tree / ".offlint_cache"
    planted.mkdir()
    for name in [p.name for p in files] + [p.stem + ".pickle" for p in files]:
        (planted / name).write_bytes(evil)
    first = _cli(tree, "--select", "OFL102")
    # The real cache: overwrite every file with code, then with JSON naming a class offlint does not store.
    for path in files:
        path.write_bytes(evil)
    second = _cli(tree, "--select", "OFL102")
    # A well-formed index whose entry matches the recipe's digest, so that the payload is really decoded.
    payload = '{"@":"system","v":["touch ' + str(marker) + '"]}'
    recipe = digest((tree / "recipes" / "llama.py").read_text())
    index = {"format": FORMAT, "key": files[0].stem.split("-", 1)[1],
             "entries": {"recipes/llama.py": [recipe, {}, 0, len(payload)]}}
    for path in files:
        path.write_text(json.dumps(index) + "\n" + payload)
    third = _cli(tree, "--select", "OFL102")
    assert not marker.exists()
    for run in (first, second, third):
        assert (run.returncode, run.stdout) == (expected.returncode, expected.stdout), run.stderr


def _poisoned_cache(tree: Path) -> Path:
    """A valid cache for `tree` whose stored answers say "no findings"; returns its folder."""
    assert _codes(tree) == ["OFL102 recipes/llama.py"]
    cache = _cache(tree)
    for path in list(cache.entries):
        stored = cache.lookup(path, cache.entries[path].digest, digests_now(tree))
        stored.findings = []
        cache.store(stored)
    previous = cache.last_result(cache.last[0], {})
    cache.remember_result(cache.last[0], replace(previous, findings=[]), covered=set())
    cache.close()
    assert _codes(tree) == []  # the poison works when the cache is trusted
    return _cache_dir(tree)


def test_a_cache_directory_inside_the_checked_project_is_never_used(tmp_path, monkeypatch):
    tree = tmp_path / "tree"
    _tree(tree, pp=4)
    monkeypatch.chdir(tree)
    poisoned = _poisoned_cache(tree)
    # The same poisoned files, shipped inside the checkout as its cache home: not read, and nothing written there.
    inside = tree / ".cache" / "offlint"
    inside.mkdir(parents=True)
    poisoned.rename(inside / poisoned.name)
    monkeypatch.setenv("OFFLINT_CACHE_DIR", str(inside))
    assert project_cache_dir(tree) is None
    before = sorted(p.name for p in (inside / poisoned.name).iterdir())
    assert _codes(tree) == ["OFL102 recipes/llama.py"]
    assert sorted(p.name for p in (inside / poisoned.name).iterdir()) == before


def test_a_cache_others_can_write_is_not_trusted(tmp_path, monkeypatch):
    tree = tmp_path / "tree"
    _tree(tree, pp=4)
    monkeypatch.chdir(tree)
    poisoned = _poisoned_cache(tree)
    poisoned.chmod(0o777)
    assert _codes(tree) == ["OFL102 recipes/llama.py"]
    poisoned.chmod(0o700)
    assert _codes(tree) == []  # the untrusted run neither read nor rewrote it: the poison is still there
    for path in poisoned.iterdir():
        path.chmod(0o666)
    assert _codes(tree) == ["OFL102 recipes/llama.py"]


def test_a_cache_file_that_is_a_link_is_not_followed(tmp_path, monkeypatch):
    tree = tmp_path / "tree"
    _tree(tree, pp=4)
    monkeypatch.chdir(tree)
    poisoned = _poisoned_cache(tree)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for path in poisoned.iterdir():
        target = elsewhere / path.name
        path.rename(target)
        path.symlink_to(target)
    assert _codes(tree) == ["OFL102 recipes/llama.py"]


def _hf_tree(root: Path, layers: int) -> None:
    (root / "models" / "big").mkdir(parents=True, exist_ok=True)
    (root / "recipes").mkdir(exist_ok=True)
    (root / ".git").mkdir(exist_ok=True)
    (root / "recipes" / "big.py").write_text(HF_RECIPE)
    (root / "models" / "big" / "config.json").write_text(_hf_config(layers))


@pytest.mark.slow
def test_editing_a_local_hf_config_changes_the_cached_verdict_both_ways(tmp_path):
    _hf_tree(tmp_path, layers=4)
    for args in ([], ["recipes/big.py"]):  # a whole-tree run and a pre-commit run on the recipe
        for layers, verdict in ((4, 0), (32, 1), (4, 0), (32, 1)):
            (tmp_path / "models" / "big" / "config.json").write_text(_hf_config(layers))
            run = _cli(tmp_path, "--select", "OFL303", *args)
            assert run.returncode == verdict, (args, layers, run.stdout, run.stderr)
            assert run.returncode == _cli(tmp_path, "--select", "OFL303", "--no-cache", *args).returncode


def test_a_local_hf_config_that_appears_later_is_read(tmp_path):
    _hf_tree(tmp_path, layers=32)
    config = tmp_path / "models" / "big" / "config.json"
    config.unlink()
    assert _cli(tmp_path, "--select", "OFL303").returncode == 0  # unknown model: no verdict
    config.write_text(_hf_config(32))
    assert _cli(tmp_path, "--select", "OFL303").returncode == 1


@pytest.mark.slow
def test_concurrent_checks_sharing_a_cache_give_the_no_cache_answer(tmp_path):
    for index in range(12):
        _tree(tmp_path / f"pkg{index}", pp=4 if index % 2 else 1)
    (tmp_path / ".git").mkdir()
    expected = _cli(tmp_path, "--no-cache", "--select", "OFL102")
    for _ in range(3):
        runs = [subprocess.Popen([sys.executable, "-m", "offlint", "check", "--select", "OFL102"], cwd=tmp_path,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
        for run in runs:
            out, err = run.communicate(timeout=120)
            assert (run.returncode, out) == (expected.returncode, expected.stdout), err


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads this process's open files from /proc")
def test_a_check_leaves_no_cache_file_open(tmp_path, monkeypatch):
    """The entries file stays open while a check runs (payloads are read on first use) and is closed when it ends:
    a program that checks again and again had kept one open per check until the collector found its cache."""
    monkeypatch.chdir(tmp_path)
    _tree(tmp_path, pp=4)
    home = str(cache_home().resolve())

    def open_in_cache() -> list[str]:
        found = []
        for fd in os.listdir("/proc/self/fd"):
            try:
                target = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                continue
            if target.startswith(home):
                found.append(target)
        return found

    assert _codes(tmp_path) == ["OFL102 recipes/llama.py"]  # (cold: the entries file written)
    (tmp_path / "recipes" / "common.py").write_text(BASE.format(pp=1))  # (warm: the entries read, one re-read)
    assert _codes(tmp_path) == []
    assert open_in_cache() == []
