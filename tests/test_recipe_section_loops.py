"""A recipe's `for` loop over its config's sections, named in the loop itself (`for section in (cfg.optimizer,
cfg.ddp): section.use_distributed_optimizer = False`): it runs once per section, each write landing there. Read as a
loop that may not run, with its name bound to nothing, the writes had been dropped and the values before them stayed
known: a recall study's recipe turning the distributed optimizer off so kept it on, and its OFL206 (optimizer offload
in bf16 without the distributed optimizer) went unreported. Fixtures of our own."""

from __future__ import annotations

import pytest

from offlint.api import CheckOptions, check

RECIPES = """\
from megatron.bridge.models import GPTModelProvider
from megatron.bridge.training.config import ConfigContainer, DistributedDataParallelConfig, OptimizerConfig


def base_config():
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8, hidden_size=512, num_attention_heads=8, bf16=True),
                          optimizer=OptimizerConfig(bf16=True, use_distributed_optimizer=True),
                          ddp=DistributedDataParallelConfig(use_distributed_optimizer=True))
    cfg.optimizer.optimizer_cpu_offload = True
    cfg.optimizer.optimizer_offload_fraction = 1.0
    cfg.optimizer.overlap_cpu_optimizer_d2h_h2d = True
    return cfg


def loop_config():
    cfg = base_config()
    for section in LOOPED:
        BODY
    return cfg
"""


def _ofl206(tmp_path, looped: str, body: str = "section.use_distributed_optimizer = False") -> list[str]:
    (tmp_path / "recipes.py").write_text(RECIPES.replace("LOOPED", looped).replace("BODY", body))
    result = check([str(tmp_path)], CheckOptions(mcore_version="0.20.0", root=tmp_path, cache=False,
                                                 select=["OFL206"]))
    assert not result.errors
    return [f.unit for f in result.findings]


def test_a_loop_over_named_sections_writes_each(tmp_path):
    assert _ofl206(tmp_path, "(cfg.optimizer, cfg.ddp)") == ["loop_config"]


def test_a_loop_over_one_of_them_leaves_the_other_on(tmp_path):
    assert _ofl206(tmp_path, "[cfg.optimizer]") == []


def test_a_loop_that_may_leave_early_is_read_as_before(tmp_path):
    assert _ofl206(tmp_path, "(cfg.optimizer, cfg.ddp)",
                   "section.use_distributed_optimizer = False\n        break") == []


OFFLOAD = """\
from megatron.bridge.models import GPTModelProvider
from megatron.bridge.training.config import ConfigContainer, OptimizerConfig

OFFLOAD = {"cpu_offloading": True, "cpu_offloading_num_layers": 40}
NAMES = ["cpu_offloading", "cpu_offloading_num_layers"]


def offload_config():
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=32, hidden_size=1024, num_attention_heads=16),
                          optimizer=OptimizerConfig())
    LOOP
    return cfg
"""


def _ofl101(tmp_path, loop: str) -> list[tuple[str, bool]]:
    (tmp_path / "recipes.py").write_text(OFFLOAD.replace("LOOP", loop))
    result = check([str(tmp_path)], CheckOptions(mcore_version="0.20.0", root=tmp_path, cache=False,
                                                 select=["OFL101"]))
    assert not result.errors
    return [(f.unit, f.possible) for f in result.findings]


@pytest.mark.parametrize("loop", [
    'for attr, val in [("cpu_offloading", True), ("cpu_offloading_num_layers", 40)]:\n'
    '        setattr(cfg.model, attr, val)',
    "for attr, val in OFFLOAD.items():\n        setattr(cfg.model, attr, val)",
    "for attr in OFFLOAD.keys():\n        setattr(cfg.model, attr, OFFLOAD[attr])",
    "for attr in NAMES:\n        setattr(cfg.model, attr, OFFLOAD[attr])",
])
def test_a_loop_over_values_offlint_knows_runs_once_per_item(tmp_path, loop):
    """Round 5 of the recall study turned layer offloading on for 40 of 32 layers through a loop over literal pairs,
    and through a module-level dict's `.items()`, each into `setattr`: read as a loop that may not run, with its
    names bound to nothing, nothing was reported, not even with --strict."""
    assert _ofl101(tmp_path, loop) == [("offload_config", False)]


@pytest.mark.parametrize("loop", [
    "for attr, val in OFFLOAD.items():\n        setattr(cfg.model, attr, val)\n        break",  # (leaves early)
    "for attr, val in load_overrides().items():\n        setattr(cfg.model, attr, val)",  # (not known)
])
def test_a_loop_offlint_cannot_run_pass_by_pass_is_read_as_before(tmp_path, loop):
    assert _ofl101(tmp_path, loop) == []


@pytest.mark.parametrize("depth, reported", [(2, True), (3, False)])
def test_loops_in_loops_run_pass_by_pass_two_deep(tmp_path, depth, reported):
    """Loops run pass by pass inside one another multiply their passes (16 x 16 x 16 ...): past two deep, a loop is
    read as one that may not run, so hostile input stays linear."""
    loops = ["for a in [1, 2]:", "    for b in [1, 2]:", "        for c in [1, 2]:"][:depth - 1]
    loop = "\n    ".join([*loops, " " * 4 * (depth - 1) + 'for attr in ["cpu_offloading"]:',
                          " " * 4 * depth + "setattr(cfg.model, attr, True)"]) + \
        "\n    cfg.model.cpu_offloading_num_layers = 40"
    assert bool(_ofl101(tmp_path, loop)) is reported
