"""Models and GPUs offlint cannot size: no OOM finding without a number (not even "possible" under --strict),
and --strict says once per run which models and GPUs were left without an estimate (issue 14, clarifications:
"say so once per model"). Fixtures in the shapes Bridge writes: recipes loading a model by Hugging Face id, and
benchmark recipes named for a GPU offlint has no capacity for."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from offlint.api import CheckOptions, check

RECIPES = textwrap.dedent('''
    from megatron.bridge.models import AutoBridge
    from megatron.bridge.training.config import ConfigContainer


    def brandnew_70b_pretrain_8gpu_h100_bf16_config() -> ConfigContainer:
        cfg = ConfigContainer(model=AutoBridge.from_hf_pretrained("someorg/Brand-New-70B").to_megatron_provider())
        cfg.model.tensor_model_parallel_size = 1
        return cfg


    def brandnew_70b_pretrain_16gpu_h100_bf16_config() -> ConfigContainer:
        cfg = ConfigContainer(model=AutoBridge.from_hf_pretrained("someorg/Brand-New-70B").to_megatron_provider())
        cfg.model.recompute_granularity = "full"
        return cfg


    def llama31_405b_pretrain_128gpu_vr200_bf16_config() -> ConfigContainer:
        cfg = ConfigContainer(model=AutoBridge.from_hf_pretrained("meta-llama/Meta-Llama-3.1-405B")
                              .to_megatron_provider())
        cfg.model.cpu_offloading = True
        cfg.model.cpu_offloading_num_layers = 40
        return cfg
''')


def _check(tmp_path, strict: bool):
    (tmp_path / "recipes.py").write_text(RECIPES)
    return check([str(tmp_path)], CheckOptions(strict=strict, root=tmp_path, cache=False))


def test_no_possible_oom_without_an_estimate(tmp_path):
    result = _check(tmp_path, strict=True)
    assert not [f for f in result.findings if f.code in ("OFL303", "OFL304", "OFL305")], result.findings


def test_strict_notes_each_unsized_model_and_gpu_once(tmp_path):
    notes = _check(tmp_path, strict=True).notes
    assert len(notes) == 2, notes
    model, gpu = notes
    assert "2 units that load someorg/Brand-New-70B" in model and "recipes.py:7" in model
    assert "offlint/data/hf_models.json" in model and "someorg/Brand-New-70B/config.json" in model
    assert "1 unit named for vr200" in gpu and "offlint/estimate/devices.py" in gpu
    # Llama-3.1-405B is in the table now: its recipe is not an unsized model (only its GPU is)
    assert not any("405B" in note for note in notes)


def test_notes_stay_out_of_the_default_output(tmp_path):
    assert _check(tmp_path, strict=False).notes == []
    (tmp_path / "recipes.py").write_text(RECIPES)
    run = subprocess.run([sys.executable, "-m", "offlint", "check", "--no-cache", "."], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert "note:" not in run.stderr
    run = subprocess.run([sys.executable, "-m", "offlint", "check", "--no-cache", "--strict", "."], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert run.stderr.count("offlint: note: no memory estimate") == 2, run.stderr


def test_the_405b_layer_count_is_known_so_ofl101_judges_it(tmp_path):
    # 40 offloaded layers of 126 is a valid range: no OFL101, not even "possible" (it was unknown before)
    result = _check(tmp_path, strict=True)
    assert not [f for f in result.findings if f.code == "OFL101"], result.findings
