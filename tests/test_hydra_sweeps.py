"""A list key given values between commas without brackets (`model.recompute_modules=core_attn,mlp`) is a Hydra
sweep, which Megatron Bridge's parse_hydra_overrides refuses at launch ("Error merging override": OmegaConf cannot
hold the sweep object) and a Hydra application refuses without --multirun. OFL002 had reported it with the sweep
object's repr as the "string" megatron-core would iterate (a recall study's seed, session 65)."""

from __future__ import annotations

import pytest

from offlint.api import CheckOptions, check
from offlint.sources.hydra import is_sweep, parse_override

LAUNCH = ("#!/bin/bash\ntorchrun --nproc-per-node 8 scripts/training/run_recipe.py --recipe llama3_8b_pretrain_config "
          "model.recompute_granularity=selective '{override}'\n")


def _bridge_refuses(override: str) -> bool:
    """Megatron Bridge's parse_hydra_overrides, as it applies the override: OmegaConf in struct mode, Hydra's
    parser and ConfigLoaderImpl._apply_overrides_to_config."""
    omegaconf = pytest.importorskip("omegaconf")
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra.core.override_parser.overrides_parser import OverridesParser

    cfg = omegaconf.OmegaConf.create({"model": {"recompute_modules": None, "recompute_granularity": "selective"}})
    omegaconf.OmegaConf.set_struct(cfg, True)
    try:
        ConfigLoaderImpl._apply_overrides_to_config(OverridesParser.create().parse_overrides([override]), cfg)
    except Exception:  # noqa: BLE001 (Bridge wraps any exception as OverridesError)
        return True
    return False


@pytest.mark.parametrize("override", ["model.recompute_modules=core_attn,mlp",
                                      "model.recompute_modules=choice(core_attn,mlp)"])
def test_a_sweep_on_a_list_key_is_named_a_sweep(tmp_path, override):
    assert _bridge_refuses(override)
    (tmp_path / "run.sh").write_text(LAUNCH.format(override=override))
    findings = check([str(tmp_path)], CheckOptions(root=tmp_path, cache=False, select=["OFL002"])).findings
    assert [f.code for f in findings] == ["OFL002"], findings
    message = findings[0].message
    assert "is a Hydra sweep" in message and "Error merging override" in message, message
    assert "Sweep(" not in message and findings[0].severity.value == "error"


@pytest.mark.parametrize("override", ["model.recompute_modules=[core_attn,mlp]", "model.recompute_modules=[mlp]"])
def test_a_list_is_no_sweep(tmp_path, override):
    assert not _bridge_refuses(override)
    (tmp_path / "run.sh").write_text(LAUNCH.format(override=override))
    assert check([str(tmp_path)], CheckOptions(root=tmp_path, cache=False, select=["OFL002"])).findings == []


def test_a_sweep_keeps_its_text_as_its_value():
    """Not the sweep object's repr, in any rule's message."""
    [override] = parse_override("model.num_layers=1,2")
    assert override.value == "1,2"
    assert is_sweep("1,2") and is_sweep("range(1,3)") and not is_sweep("[1,2]") and not is_sweep("'a,b'")
    assert not is_sweep("core_attn") and not is_sweep(None)


def test_a_plain_list_is_told_from_a_sweep_without_hydras_parser():
    """Making Hydra's ANTLR parser costs a process 0.15 s (1.4% more calls in a cold check of Megatron Bridge,
    whose launches pass `model.recompute_modules=[core_attn,mlp]`-like lists): the plain shapes are read without it."""
    from offlint.sources import hydra

    hydra._parser.cache_clear()
    hydra._sweep.cache_clear()
    assert not is_sweep("[core_attn,mlp]") and not is_sweep("[1,2]") and not is_sweep("{a:1,b:2}")
    assert hydra._parser.cache_info().currsize == 0
