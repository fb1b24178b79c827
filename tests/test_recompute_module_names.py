"""OFL222: a recompute_modules name megatron-core does not allow under selective recompute (RC-7). The allowed
set per version is generated data (offlint/data, recompute_module_names), checked here against the installed
megatron-core; the rule examples are checked against megatron-core itself by tests/test_conformance.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from offlint import keys
from offlint.api import CheckOptions, check
from offlint.versions import parse_version

ROOT = Path(__file__).resolve().parent.parent


def test_the_allowed_set_of_the_installed_megatron_core_is_the_generated_data():
    pytest.importorskip("megatron.core")
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import dump_mcore_fields
    finally:
        sys.path.pop(0)
    from megatron.core import package_info

    data = keys.version_data(parse_version(package_info.__version__))
    assert data["version"] == package_info.__version__
    assert data["recompute_module_names"] == dump_mcore_fields.dump_recompute_module_names()


def _findings(tmp_path, monkeypatch, version: str, name: str, text: str) -> list:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / name).write_text(text)
    result = check([name], CheckOptions(select=["OFL222", "OFL002"], mcore_version=version, root=tmp_path,
                                        cache=False))
    return result.findings


MLM = "torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 8 --recompute-granularity {g} --recompute-modules {m}\n"


@pytest.mark.parametrize(("version", "granularity", "modules", "claimed"), [
    ("0.20.0", "selective", "layernorm,mla_up_proj,moe_act", "'layernorm,mla_up_proj,moe_act'"),  # one argument
    ("0.20.0", "selective", "layernorm mla_up_proj moe_act", None),
    ("0.20.0", "full", "layernorm,mlp", None),  # not checked under full recompute (OFL213's)
    ("0.16.1", "selective", "core_attn gdn_norm_out", "'gdn_norm_out'"),  # 0.19 added it
    ("0.18.0", "selective", "core_attn gdn_norm_out", None),  # 0.19.1 allows it: 0.18 may too
    ("0.20.0", "selective", "core_attn mhc", None),
])
def test_a_name_is_claimed_only_where_every_release_it_may_behave_as_refuses_it(tmp_path, monkeypatch, version,
                                                                                 granularity, modules, claimed):
    found = [f for f in _findings(tmp_path, monkeypatch, version, "run.sh", MLM.format(g=granularity, m=modules))
             if f.code == "OFL222"]
    if claimed is None:
        assert found == []
    else:
        assert len(found) == 1 and claimed in found[0].message and "Invalid choices for recompute_modules" in \
            found[0].message


def test_a_string_in_a_hydra_override_is_reported_once_by_ofl002(tmp_path, monkeypatch):
    launch = ("python scripts/training/run_recipe.py --recipe llama3_8b_pretrain_config "
              "model.recompute_granularity=selective model.recompute_modules=core_attn\n")
    assert [f.code for f in _findings(tmp_path, monkeypatch, "0.20.0", "run.sh", launch)] == ["OFL002"]


def test_a_string_in_a_recipe_is_iterated_as_megatron_core_does(tmp_path, monkeypatch):
    recipe = ("from megatron.bridge.models.gpt_provider import GPTModelProvider\n"
              "from megatron.bridge.training.config import ConfigContainer\n\n\n"
              "def llama_pretrain_config():\n"
              "    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8, hidden_size=64, num_attention_heads=4))\n"
              "    cfg.model.recompute_granularity = 'selective'\n"
              "    cfg.model.recompute_modules = 'mlp'\n"
              "    return cfg\n")
    found = _findings(tmp_path, monkeypatch, "0.20.0", "recipe.py", recipe)
    assert [f.code for f in found] == ["OFL222"] and "'m', 'p'" in found[0].message
