"""OFL218's uneven split: first/last-stage layer counts megatron-core's TransformerConfig refuses
(conditions/layout.py uneven_split_refusal). Each case is built with the installed megatron-core and checked by
offlint as a Bridge recipe function of our own: offlint reports megatron-core's own message exactly where it
raises."""

from __future__ import annotations

import warnings

import pytest

from offlint.api import CheckOptions, check

# (num_layers, PP, VPP, first, last, account_for_embedding_in_pipeline_split)
CASES = [
    (40, 1, None, 17, 23, False),  # PP1 keeps a PP2 recipe's counts (Bridge's GB200 functional Qwen3.5-VL SFT)
    (40, 2, None, 17, 23, False),
    (40, 3, None, 17, 23, False),  # nothing left for the middle stage
    (40, 4, None, 10, 10, False),
    (40, 4, None, 9, 10, False),  # 21 middle layers over 2 stages
    (40, 4, 2, 10, 10, False),
    (40, 4, 2, 9, 11, False),  # first not divisible by VPP
    (40, 4, 2, 10, 11, False),  # last not divisible by VPP
    (48, 4, 4, 12, 12, False),  # 12 per middle rank / VPP4: fine
    (44, 4, 4, 12, 12, False),  # 10 per middle rank: not divisible by VPP4
    (40, 2, None, 0, 40, False),
    (40, 2, None, None, 15, False),  # 25 layers on the first stage (one middle-less split)
    (40, 3, None, None, 16, False),
    (40, 2, None, 20, 20, True),  # counts with an embedding counted in the split
]


def _megatron_core(layers, pp, vpp, first, last, embedding) -> str:
    transformer = pytest.importorskip("megatron.core.transformer")
    torch = pytest.importorskip("torch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            transformer.TransformerConfig(
                num_layers=layers, hidden_size=64, num_attention_heads=4, pipeline_model_parallel_size=pp,
                virtual_pipeline_model_parallel_size=vpp, num_layers_in_first_pipeline_stage=first,
                num_layers_in_last_pipeline_stage=last, account_for_embedding_in_pipeline_split=embedding,
                pipeline_dtype=torch.bfloat16)
        except ValueError as exc:
            return str(exc)
    return ""


def _write_recipe(tmp_path, monkeypatch, layers: int, **settings) -> None:
    """recipe.py with one Bridge recipe function, `vlm_sft_config`, setting `settings` on its model."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("")
    lines = "".join(f"    cfg.model.{key} = {value!r}\n" for key, value in settings.items())
    (tmp_path / "recipe.py").write_text(
        "from megatron.bridge.models.gpt_provider import GPTModelProvider\n"
        "from megatron.bridge.training.config import ConfigContainer\n\n\n"
        "def vlm_sft_config():\n"
        f"    cfg = ConfigContainer(model=GPTModelProvider(num_layers={layers}, hidden_size=64, num_attention_heads=4))\n"
        f"{lines}    return cfg\n")


def _offlint(tmp_path, monkeypatch, layers, pp, vpp, first, last, embedding) -> list[str]:
    _write_recipe(tmp_path, monkeypatch, layers, pipeline_model_parallel_size=pp,
                  virtual_pipeline_model_parallel_size=vpp, num_layers_in_first_pipeline_stage=first,
                  num_layers_in_last_pipeline_stage=last, account_for_embedding_in_pipeline_split=embedding)
    result = check(["recipe.py"], CheckOptions(select=["OFL218"], mcore_version="0.20.0", root=tmp_path, cache=False))
    return [f.message for f in result.findings if f.code == "OFL218"]


@pytest.mark.parametrize("case", CASES, ids=[str(c) for c in CASES])
def test_offlint_refuses_an_uneven_split_exactly_where_megatron_core_does(case, tmp_path, monkeypatch):
    expected = _megatron_core(*case)
    found = _offlint(tmp_path, monkeypatch, *case)
    if expected:
        assert len(found) == 1 and f'"{expected}"' in found[0], (expected, found)
    else:
        assert found == [], found


def test_a_launch_that_changes_pp_without_the_counts_is_not_judged(tmp_path, monkeypatch):
    """Bridge's runner drops counts that no longer fit after a PP/VP override on the command line, unless the command
    line sets the counts too (scripts/training/recipe_runner.py sync_model_pipeline_layout)."""
    _write_recipe(tmp_path, monkeypatch, 40, pipeline_model_parallel_size=2, num_layers_in_first_pipeline_stage=17,
                  num_layers_in_last_pipeline_stage=23)
    run = "python scripts/training/run_recipe.py --recipe vlm_sft_config "
    (tmp_path / "dropped.sh").write_text(run + "model.pipeline_model_parallel_size=1\n")
    (tmp_path / "kept.sh").write_text(run + "model.pipeline_model_parallel_size=1 "
                                            "model.num_layers_in_first_pipeline_stage=17 "
                                            "model.num_layers_in_last_pipeline_stage=23\n")
    result = check(["recipe.py", "dropped.sh", "kept.sh"], CheckOptions(
        select=["OFL218"], mcore_version="0.20.0", root=tmp_path, cache=False))
    found = [(f.unit_path or f.location.path, f.message) for f in result.findings if f.code == "OFL218"]
    assert [path for path, _ in found] == ["kept.sh"], found
    assert "Mismatch: 0 middle layers remaining but -1 middle PP stages available." in found[0][1]
