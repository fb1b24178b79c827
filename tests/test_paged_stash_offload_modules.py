"""MoE paged stashing refuses the expert activations it stashes itself in offload_modules (megatron-core 0.18 on,
FG-14), whether fine-grained activation offloading is on or not. A recall study's seed (session 66: a perf helper
that turns paged stash on, given `offload_modules = ["expert_fc1"]`) had been OFL202's warning that the list has no
effect, where megatron-core stops the run: OFL106 reports it, and OFL202 leaves such a list alone."""

from __future__ import annotations

import pytest

from offlint.api import CheckOptions, check

RECIPE = '''from megatron.bridge.training.config import ConfigContainer, OptimizerConfig, DistributedDataParallelConfig
from megatron.bridge.models import GPTModelProvider


def _enable_paged_stash(cfg):
    cfg.model.moe_paged_stash = True
    cfg.model.moe_expert_rank_capacity_factor = 1.5
    cfg.model.offload_modules = {modules}


def moe_pretrain_config() -> ConfigContainer:
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=4, hidden_size=256, num_attention_heads=4,
                                                 num_moe_experts=8, moe_router_topk=2),
                          optimizer=OptimizerConfig(bf16=True), ddp=DistributedDataParallelConfig())
    _enable_paged_stash(cfg)
    return cfg
'''


def _findings(tmp_path, modules: str, version: str = "0.20.0"):
    (tmp_path / "recipe.py").write_text(RECIPE.format(modules=modules))
    options = CheckOptions(root=tmp_path, cache=False, mcore_version=version, select=["OFL106", "OFL202"])
    return check([str(tmp_path)], options).findings


@pytest.mark.parametrize("modules, refused", [
    ('["expert_fc1"]', ["expert_fc1"]), ('["core_attn", "moe_act", "fused_group_mlp"]', ["fused_group_mlp", "moe_act"]),
])
def test_expert_modules_beside_paged_stash_are_an_error_not_inert(tmp_path, modules, refused):
    findings = _findings(tmp_path, modules)
    assert [(f.code, f.severity.value) for f in findings] == [("OFL106", "error")], findings
    message = findings[0].message
    assert f"offload_modules has [{', '.join(refused)}]" in message, message
    assert "whether fine-grained activation offloading is on" in message
    assert findings[0].location.line == 8  # the offload_modules write, in the helper


def test_a_list_paged_stash_does_not_refuse_stays_inert(tmp_path):
    findings = _findings(tmp_path, '["core_attn"]')
    assert [f.code for f in findings] == ["OFL202"] and "no effect" in findings[0].message, findings


def test_before_paged_stash_existed_nothing_is_refused(tmp_path):
    """0.17 has no moe_paged_stash (a TypeError of its own, not this rule's): OFL106 is for 0.18 on."""
    assert not any(f.code == "OFL106" for f in _findings(tmp_path, '["expert_fc1"]', version="0.17.0"))


def test_a_possible_finding_says_the_switch_is_unknown_and_names_the_modules(tmp_path):
    # --strict on an override file whose recipe offlint does not see: the paged stash is the unknown value, not the
    # list (round 4 of the recall study: the message had read "moe_paged_stash is on and offload_modules has ?")
    (tmp_path / "override.yaml").write_text("model:\n  offload_modules: [expert_fc1]\n")
    options = CheckOptions(root=tmp_path, cache=False, mcore_version="0.20.0", select=["OFL106"], strict=True)
    (found,) = check([str(tmp_path / "override.yaml")], options).findings
    assert found.possible
    assert found.message.startswith("moe_paged_stash may be on and offload_modules has [expert_fc1]: ")
