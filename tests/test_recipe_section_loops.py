"""A recipe's `for` loop over its config's sections, named in the loop itself (`for section in (cfg.optimizer,
cfg.ddp): section.use_distributed_optimizer = False`): it runs once per section, each write landing there. Read as a
loop that may not run, with its name bound to nothing, the writes had been dropped and the values before them stayed
known: a recall study's recipe turning the distributed optimizer off so kept it on, and its OFL206 (optimizer offload
in bf16 without the distributed optimizer) went unreported. Fixtures of our own."""

from __future__ import annotations

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
