"""The content-hash cache: reused when nothing changed, invalidated through the files a read depended on."""

from dataclasses import replace
from pathlib import Path

from offlint.api import CheckOptions, check
from offlint.cache import CACHE_DIR, Cache, digest

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


def _cache(root: Path) -> Cache:
    [cache_file] = (root / CACHE_DIR).glob("check-*.pickle")
    return Cache(root, cache_file.stem.removeprefix("check-")).load()


def test_warm_run_reuses_entries_and_gives_the_same_findings(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _tree(tmp_path, pp=4)
    cold = _codes(tmp_path)
    assert cold == ["OFL102 recipes/llama.py"]
    assert (tmp_path / CACHE_DIR / "CACHEDIR.TAG").read_text().startswith("Signature: 8a477f597d28d172789f06886806bc55")
    cache = _cache(tmp_path)
    digests = {path: digest((tmp_path / path).read_text()) for path in ("recipes/llama.py", "recipes/common.py")}
    assert cache.dependencies()["recipes/llama.py"] == {"recipes/common.py": digests["recipes/common.py"]}
    stored = cache.lookup("recipes/llama.py", digests["recipes/llama.py"], digests)
    assert [f.code for f in stored.findings] == ["OFL102"]
    # Poison the stored findings: a warm run must hand back exactly what the cache holds.
    stored.findings = []
    cache.store(stored)
    cache.last = None  # no whole-run answer: the per-file entries are used
    cache.save(None)
    assert _codes(tmp_path) == []


def test_an_unchanged_tree_gets_the_previous_whole_run_answer_and_any_edit_invalidates_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _tree(tmp_path, pp=4)
    assert _codes(tmp_path) == ["OFL102 recipes/llama.py"]
    cache = _cache(tmp_path)
    previous = cache.last_result(cache.last[0])
    assert [f.code for f in previous.findings] == ["OFL102"]
    cache.remember_result(cache.last[0], replace(previous, findings=[]))  # poison the stored answer
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
    assert not (tmp_path / CACHE_DIR).exists()
    _codes(tmp_path)
    [cache_file] = (tmp_path / CACHE_DIR).glob("check-*.pickle")
    cache_file.write_bytes(b"not a pickle")
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
