"""Models offlint cannot size: no OOM finding without a number (not even "possible" under --strict), and --strict
says once per run which models were left without an estimate (issue 14, clarifications: "say so once per model").
Fixtures in the shapes Bridge writes: recipes loading a model by Hugging Face id, and a benchmark recipe named for
Rubin, whose capacity is stated, not measured (judged only where both ends of its bracket agree)."""

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
    memory = [f for f in result.findings if f.code in ("OFL303", "OFL304", "OFL305")]
    assert not [f for f in memory if "brandnew" in f.unit], memory


def test_a_rubin_recipe_is_judged_at_the_end_its_claim_holds(tmp_path):
    """Llama-3.1-405B at TP1 PP1: its model state alone is over 288 GiB, the high end of VR200's bracket, so
    activation offloading cannot make it fit at any capacity in the bracket (OFL304), and the message names that end."""
    found = [f for f in _check(tmp_path, strict=False).findings if f.code == "OFL304"]
    assert [f.unit for f in found] == ["llama31_405b_pretrain_128gpu_vr200_bf16_config"], found
    assert "287.0 GiB usable" in found[0].message and "vr200 (at most 288 GiB)" in found[0].message


def test_strict_notes_each_unsized_model_once(tmp_path):
    notes = _check(tmp_path, strict=True).notes
    assert len(notes) == 1, notes
    model = notes[0]
    assert "2 units that load someorg/Brand-New-70B" in model and "recipes.py:7" in model
    assert "offlint/data/hf_models.json" in model and "someorg/Brand-New-70B/config.json" in model
    # Llama-3.1-405B is in the table: its recipe is not an unsized model, and its GPU has a stated capacity
    assert not any("405B" in note or "vr200" in note for note in notes)


def test_the_note_about_one_unit_says_it_loads_the_model(tmp_path):
    one = RECIPES.replace('"someorg/Brand-New-70B"', '"meta-llama/Meta-Llama-3.1-405B"').replace(
        '"meta-llama/Meta-Llama-3.1-405B"', '"someorg/Brand-New-70B"', 1)  # the second recipe loads a sized model
    (tmp_path / "recipes.py").write_text(one)
    (note,) = check([str(tmp_path)], CheckOptions(strict=True, root=tmp_path, cache=False)).notes
    assert "for 1 unit that loads someorg/Brand-New-70B (first at" in note, note


def test_notes_stay_out_of_the_default_output(tmp_path):
    assert _check(tmp_path, strict=False).notes == []
    (tmp_path / "recipes.py").write_text(RECIPES)
    run = subprocess.run([sys.executable, "-m", "offlint", "check", "--no-cache", "."], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert "note:" not in run.stderr
    run = subprocess.run([sys.executable, "-m", "offlint", "check", "--no-cache", "--strict", "."], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert run.stderr.count("offlint: note: no memory estimate") == 1, run.stderr


def test_the_405b_layer_count_is_known_so_ofl101_judges_it(tmp_path):
    # 40 offloaded layers of 126 is a valid range: no OFL101, not even "possible" (it was unknown before)
    result = _check(tmp_path, strict=True)
    assert not [f for f in result.findings if f.code == "OFL101"], result.findings
