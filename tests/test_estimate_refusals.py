"""`offlint estimate` on a configuration that cannot run: `offlint check`'s refusing findings are the verdict
(estimate/refusals.py), in text and JSON, instead of a memory figure for a job that never trains. Recipes in Megatron
Bridge's shapes, fixtures of our own."""

from __future__ import annotations

import json

from click.testing import CliRunner

from offlint.cli import main
from offlint.estimate.refusals import refusing_rules
from offlint.rules import load_rules
from offlint.types import Severity

HEADER = ("from megatron.bridge.models import GPTModelProvider\n"
          "from megatron.bridge.training.config import ConfigContainer\n\n\n")


def _recipe(name: str, body: str) -> str:
    lines = "".join(f"    {line.strip()}\n" for line in body.strip().splitlines())
    return (f"def {name}():\n"
            f"    cfg = ConfigContainer(model=GPTModelProvider(num_layers=30, hidden_size=1024, "
            f"num_attention_heads=8, vocab_size=32000, seq_length=4096))\n{lines}    return cfg\n\n\n")


def _estimate(tmp_path, monkeypatch, body: str, *args: str):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "recipes.py").write_text(HEADER + _recipe("dense_pretrain_8gpu_h100_bf16_config", body))
    return CliRunner().invoke(main, ["estimate", "recipes.py", *args])


def test_layers_that_do_not_divide_over_the_pipeline_are_refused_when_the_model_is_built(tmp_path, monkeypatch):
    result = _estimate(tmp_path, monkeypatch, "cfg.model.pipeline_model_parallel_size = 4")  # 30 layers over PP4
    assert result.exit_code == 0 and "Traceback" not in result.output, result.output
    assert "error[OFL218] recipes.py:" in result.output and "30 layers do not divide over PP4" in result.output
    assert "verdict: cannot run: megatron-core refuses it when the model is built (OFL218)" in result.output
    assert "help: " in result.output and "peak GPU memory" not in result.output
    data = json.loads(_estimate(tmp_path, monkeypatch, "cfg.model.pipeline_model_parallel_size = 4",
                                "--output-format", "json").output)
    assert data["verdict_state"] == "cannot run" and "peak_bytes" not in data
    (refusal,) = data["refusals"]
    assert refusal["code"] == "OFL218" and refusal["stage"] == "model-build" and refusal["path"] == "recipes.py"
    assert refusal["line"] > 0 and refusal["fix"]


def test_an_override_that_fixes_the_split_gets_a_memory_verdict(tmp_path, monkeypatch):
    result = _estimate(tmp_path, monkeypatch, "cfg.model.pipeline_model_parallel_size = 4",
                       "--override", "model.pipeline_model_parallel_size=2")
    assert result.exit_code == 0 and "OFL218" not in result.output and "peak GPU memory" in result.output, \
        result.output
    assert "\nverdict: fits" in result.output


def test_a_warning_or_a_silent_error_leaves_the_estimate_to_speak(tmp_path, monkeypatch):
    # OFL213 (recompute_modules without selective recompute: inert, a warning) does not stop the estimate
    result = _estimate(tmp_path, monkeypatch, 'cfg.model.recompute_modules = ["mlp"]')
    assert result.exit_code == 0 and "peak GPU memory" in result.output and "cannot run" not in result.output, \
        result.output


def test_the_refusing_rules_are_the_error_checks_the_real_stack_acts_on():
    refusing = {rule.code for rule in refusing_rules()}
    catalog = load_rules()
    for code, rule in catalog.items():
        acts = any(c.severity is Severity.ERROR and c.stage != "silent" for c in rule.checks)
        assert (code in refusing) == (acts and rule.scope == "unit"), code
    # the crash rules of the catalog say where the job stops; the memory and inert-setting rules do not
    assert {"OFL102", "OFL113", "OFL117", "OFL216", "OFL218", "OFL219", "OFL221", "OFL222"} <= refusing
    assert not {"OFL201", "OFL202", "OFL303", "OFL304", "OFL305", "OFL001"} & refusing
