"""A finding's message names what offlint knows: a part it cannot know is left out, never printed as "?".

The rules' messages are templates evaluated in three-valued logic (offlint/conditions/language.py), where an unknown part renders as
"?". Seen on real trees: a Bridge fork's PEFT recipe, whose provider comes from AutoBridge (its fine-grained
sub-settings unknown), gave OFL202 "...have no effect:???? fine_grained_offloading_max_inflight_offloads=2";
LLaVA-OneVision-2's launches gave OFL206 "? training" where fp16 and bf16 could not be told apart.
"""

from __future__ import annotations

from pathlib import Path

from offlint.api import CheckOptions, check
from offlint.types import Finding

HEAD = '''from megatron.bridge.models import AutoBridge
from megatron.bridge.training.config import ConfigContainer, OptimizerConfig, DistributedDataParallelConfig


def _provider():
    return AutoBridge.from_hf_pretrained("org/some-model").to_megatron_provider()
'''


def _findings(tmp_path: Path, monkeypatch, body: str, code: str) -> list[Finding]:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "recipes.py").write_text(HEAD + body)
    monkeypatch.chdir(tmp_path)
    result = check(["."], CheckOptions(mcore_version="0.20.0", root=tmp_path, cache=False, select=[code]))
    assert not result.errors, result.errors
    return result.findings


def test_inert_fine_grained_settings_are_listed_without_the_unknown_ones(tmp_path, monkeypatch):
    body = '''

def sft_config():
    cfg = ConfigContainer(model=_provider(), optimizer=OptimizerConfig(), ddp=DistributedDataParallelConfig())
    cfg.model.fine_grained_activation_offloading = True
    cfg.model.fine_grained_offloading_max_inflight_offloads = 2
    cfg.model.min_offloaded_tensor_size = tuned_size()  # not known here
    return cfg


def peft_config():
    cfg = sft_config()
    cfg.model.fine_grained_activation_offloading = False
    return cfg
'''
    (finding,) = _findings(tmp_path, monkeypatch, body, "OFL202")  # (peft_config's: sft_config turns it on)
    assert "?" not in finding.message, finding.message
    assert ("fine-grained settings have no effect: fine_grained_offloading_max_inflight_offloads=2; "
            in finding.message), finding.message
    # it points at the setting it lists (line 12), not at the first of its keys the recipe sets (13, not known)
    assert finding.location.line == 12, finding.location


def test_inert_optimizer_settings_are_listed_with_commas(tmp_path, monkeypatch):
    body = '''

def recipe_config():
    cfg = ConfigContainer(model=_provider(), optimizer=OptimizerConfig(), ddp=DistributedDataParallelConfig())
    cfg.optimizer.optimizer_offload_fraction = 0.5
    cfg.optimizer.overlap_cpu_optimizer_d2h_h2d = True
    return cfg
'''
    (finding,) = _findings(tmp_path, monkeypatch, body, "OFL202")
    assert ("optimizer offload settings have no effect: optimizer_offload_fraction=0.5, "
            "overlap_cpu_optimizer_d2h_h2d=True; the optimizer keeps all its state on the GPU") in finding.message


def test_moe_recompute_named_by_what_is_known(tmp_path, monkeypatch):
    # GeodesicResearch/geodesic-megatron's override YAMLs set recompute_modules [moe, shared_experts] and leave
    # moe_layer_recompute to an unknown base: OFL108 said "recomputed (?)" though 'moe' in recompute_modules is known
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "override.yaml").write_text(
        "model:\n  fine_grained_activation_offloading: true\n  offload_modules: [core_attn, expert_fc1]\n"
        "  recompute_granularity: selective\n  recompute_modules: [moe, shared_experts]\n")
    monkeypatch.chdir(tmp_path)
    result = check(["."], CheckOptions(mcore_version="0.20.0", root=tmp_path, cache=False, select=["OFL108"]))
    (finding,) = result.findings
    assert "?" not in finding.message, finding.message
    assert "recomputed ('moe' in recompute_modules)" in finding.message, finding.message
