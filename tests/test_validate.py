"""`offlint check --validate`: megatron-core's own verdict on fully known units, as OFL900."""

from __future__ import annotations

from dataclasses import replace

import pytest

from offlint import api, rules as rules_module, validate
from offlint.api import CheckOptions, check

RECIPE = """\
def recipe():
    cfg = ConfigContainer(model=TransformerConfig(num_layers=4, hidden_size=64, num_attention_heads=4),
                          optimizer=OptimizerConfig(), ddp=DistributedDataParallelConfig())
    cfg.model.cpu_offloading = True
    cfg.model.cpu_offloading_num_layers = 1
    cfg.model.pipeline_model_parallel_size = PP
    cfg.model.recompute_granularity = GRANULARITY
    return cfg


def from_elsewhere(cfg):
    cfg.model.pipeline_model_parallel_size = 2
"""

needs_mcore = pytest.mark.skipif(not validate.environments(), reason="megatron-core is not installed")


def run(tmp_path, pp=1, granularity=None):
    path = tmp_path / "recipe.py"
    path.write_text(RECIPE.replace("PP", str(pp)).replace("GRANULARITY", repr(granularity)))
    return check([str(path)], CheckOptions(validate=True, root=tmp_path))


@pytest.mark.slow
@needs_mcore
def test_megatron_core_error_reported_next_to_the_rule(tmp_path):
    result = run(tmp_path, pp=2)
    ofl900 = [f for f in result.findings if f.code == "OFL900"]
    assert len(ofl900) == 1  # the helper unit is not fully known: not validated
    assert "Currently there is no support for Pipeline parallelism with CPU offloading" in ofl900[0].message
    assert "OFL102 reports the same" in ofl900[0].message
    assert ofl900[0].location.line == 4


@pytest.mark.slow
@needs_mcore
def test_an_error_no_rule_predicts_is_shown(tmp_path):
    result = run(tmp_path, granularity="block")  # with offloading on, AO-3 runs before RC-1
    messages = [f.message for f in result.findings if f.code == "OFL900"]
    assert any("CPU offloading does not work when activation recomputation is enabled" in m for m in messages)
    path = tmp_path / "plain.py"
    path.write_text("def r():\n    return TransformerConfig(num_layers=4, hidden_size=64, num_attention_heads=4,"
                    " recompute_granularity='block')\n")
    result = check([str(path)], CheckOptions(validate=True, root=tmp_path))
    (finding,) = [f for f in result.findings if f.code == "OFL900"]
    assert "recompute_granuarlity: block" in finding.message and "no offlint rule predicted this" in finding.message


@pytest.mark.slow
@needs_mcore
def test_a_rule_megatron_core_contradicts_is_shown(tmp_path, monkeypatch):
    real = rules_module.load_rules()
    broken = dict(real)
    check_ = real["OFL102"].checks[0]
    broken["OFL102"] = replace(real["OFL102"], checks=(replace(check_, condition="model.cpu_offloading"),))
    monkeypatch.setattr(api, "load_rules", lambda *args, **kwargs: broken)
    result = run(tmp_path, pp=1)
    (finding,) = [f for f in result.findings if f.code == "OFL900"]
    assert "accepts this configuration, but offlint's OFL102 says it fails" in finding.message


def test_validate_without_megatron_core_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(validate, "environments", lambda **_: [])
    with pytest.raises(ValueError, match="--validate needs megatron-core"):
        run(tmp_path)


@pytest.mark.slow
@needs_mcore
def test_what_this_environment_cannot_judge_is_not_reported_as_a_refusal(tmp_path):
    """A Bridge provider's own field (no TransformerConfig field: left out, not a TypeError) and a setting that needs
    Transformer Engine, absent on this CPU machine (an ImportError: no verdict), give no OFL900; the uneven split
    megatron-core refuses is reported."""
    path = tmp_path / "recipes.py"
    path.write_text(
        "def bridge_field():\n"
        "    cfg = ConfigContainer(model=TransformerConfig(num_layers=4, hidden_size=64, num_attention_heads=4),\n"
        "                          optimizer=OptimizerConfig(), ddp=DistributedDataParallelConfig())\n"
        "    cfg.model.vision_cuda_graph_impl = 'none'\n"
        "    return cfg\n\n\n"
        "def needs_te():\n"
        "    cfg = ConfigContainer(model=TransformerConfig(num_layers=4, hidden_size=64, num_attention_heads=4,\n"
        "                                                  num_moe_experts=4, moe_permute_fusion=True),\n"
        "                          optimizer=OptimizerConfig(), ddp=DistributedDataParallelConfig())\n"
        "    return cfg\n\n\n"
        "def uneven():\n"
        "    cfg = ConfigContainer(model=TransformerConfig(num_layers=40, hidden_size=64, num_attention_heads=4),\n"
        "                          optimizer=OptimizerConfig(), ddp=DistributedDataParallelConfig())\n"
        "    cfg.model.num_layers_in_first_pipeline_stage = 17\n"
        "    cfg.model.num_layers_in_last_pipeline_stage = 23\n"
        "    return cfg\n")
    result = check([str(path)], CheckOptions(validate=True, root=tmp_path))
    by_unit = {f.unit: f.message for f in result.findings if f.code == "OFL900"}
    assert set(by_unit) == {"uneven"}, by_unit
    assert "Mismatch: 0 middle layers remaining but -1 middle PP stages available." in by_unit["uneven"]


@pytest.mark.slow
@needs_mcore
def test_a_probe_once_closed_holds_no_pipe_open():
    """MegatronCore.close ends the probe and closes the pipe of its answers as well as the one of its questions (the
    answers' pipe had been left to the collector: an open file per probe, with a ResourceWarning)."""
    with validate.MegatronCore(validate.environments()[0]) as core:
        assert core.version_text
    assert core.process.returncode is not None
    assert core.process.stdin.closed and core.process.stdout.closed
