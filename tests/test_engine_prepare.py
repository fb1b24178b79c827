"""engine.prepare: what a process's first unit check works out once (the plan, the version's data and Megatron-LM
flag tables, the configured GPU), done ahead. It only fills memos: the findings are those of a process that did
not call it, in the directory each check runs in."""

from __future__ import annotations

import pytest

from offlint import engine, te_support
from offlint.estimate import devices
from offlint.resolve import resolve
from offlint.rules import load_rules
from offlint.types import Assignment, Defaults, Layer, Location, Source, Unit, UnitKind
from offlint.versions import parse_version

V = parse_version("0.20.0")
RULES = list(load_rules().values())
SECTIONS = frozenset({"model", "optimizer", "ddp", "env", "checkpoint", "train", "dataset", "logger"})


def _units() -> list[Unit]:
    fp8 = {"model.num_layers": 32, "model.hidden_size": 4096, "model.num_attention_heads": 32,
           "model.fp8": "hybrid", "model.fp8_recipe": "tensorwise"}
    recipe = Unit("qwen3_8b_pretrain_config", UnitKind.RECIPE, Location("recipe.py", 1, 1),
                  layers=[Layer("recipe", [Assignment(k, v, Location("recipe.py", i, 5), Source.PYTHON, text=repr(v))
                                           for i, (k, v) in enumerate(fp8.items(), start=2)])],
                  default_sections=SECTIONS, launches_training=True, env_known=True)
    flags = {"model.num_layers": 4, "model.cpu_offloading": True, "model.cpu_offloading_num_layers": 8}
    mlm = Unit("pretrain_gpt.sh", UnitKind.COMMAND, Location("run.sh", 1, 1),
               layers=[Layer("command line", [Assignment(k, v, Location("run.sh", i, 1), Source.MLM, text=str(v))
                                              for i, (k, v) in enumerate(flags.items(), start=2)])],
               defaults=Defaults.MLM_CLI, default_sections=SECTIONS, launches_training=True, env_known=True,
               unread_flags=("--use-distributed-optimizer", "--optimizer-cpu-offload"), framework="megatron-lm")
    return [recipe, mlm]


def _forget(monkeypatch):
    monkeypatch.setattr(engine, "_LAST_PLAN", ((), None, None))
    te_support._configured_gpu.cache_clear()
    devices.configured_device.cache_clear()


def _findings() -> list[list[str]]:
    return [[f"{f.code} {f.location.path}:{f.location.line} {f.message}"
             for f in engine.check_unit(resolve(unit, V), RULES, True)] for unit in _units()]


@pytest.fixture
def trees(tmp_path):
    a100, plain = tmp_path / "a100", tmp_path / "plain"
    a100.mkdir()
    plain.mkdir()
    (a100 / "pyproject.toml").write_text('[project]\nname = "x"\n\n[tool.offlint]\ngpu = "a100-80gb"\n')
    (plain / "pyproject.toml").write_text('[project]\nname = "y"\n')
    return a100, plain


def test_prepared_checks_find_what_unprepared_ones_find(trees, monkeypatch):
    a100, plain = trees
    monkeypatch.chdir(a100)
    _forget(monkeypatch)
    cold = _findings()
    assert any(f.startswith("OFL117") for f in cold[0])  # the configured A100 refuses FP8: the GPU was read
    _forget(monkeypatch)
    engine.prepare(RULES, V)
    assert engine._LAST_PLAN[2] is not None and te_support._configured_gpu.cache_info().currsize == 1
    assert _findings() == cold


def test_a_prepared_gpu_is_the_directorys_where_the_checks_run(trees, monkeypatch):
    a100, plain = trees
    monkeypatch.chdir(plain)
    _forget(monkeypatch)
    expected = _findings()
    assert not any(f.startswith("OFL117") for f in expected[0])  # no GPU configured: no verdict
    _forget(monkeypatch)
    monkeypatch.chdir(a100)
    engine.prepare(RULES, V)
    monkeypatch.chdir(plain)
    assert _findings() == expected
