"""`cfg.env_vars["NAME"] = value` in a Bridge recipe: the entry is the launch environment's, as `cfg.env_vars.update`
and `cfg.env_vars = {...}` give theirs. A recall study's recipe turning fine-grained offloading on with exactly the fix
OFL112 names, `cfg.env_vars["NVTE_CPU_OFFLOAD_V1"] = "1"`, was an error saying the variable was unset. Fixtures of our
own, in the shape of Bridge's recipes."""

from __future__ import annotations

import pytest

from offlint.api import CheckOptions, check

RECIPE = """\
from megatron.bridge.models import GPTModelProvider
from megatron.bridge.training.config import ConfigContainer, OptimizerConfig


def offload_pretrain_config():
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8, hidden_size=1024, num_attention_heads=16),
                          optimizer=OptimizerConfig())
    cfg.env_vars = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    cfg.model.fine_grained_activation_offloading = True
    cfg.model.offload_modules = ["core_attn"]
    WRITE
    return cfg
"""


def _ofl112(tmp_path, write: str):
    (tmp_path / "recipes.py").write_text(RECIPE.replace("WRITE", write))
    options = dict(mcore_version="0.20.0", root=tmp_path, cache=False, select=["OFL112"])
    return check([str(tmp_path)], CheckOptions(**options)).findings


def test_the_entry_a_recipe_writes_is_its_environment(tmp_path):
    assert _ofl112(tmp_path, 'cfg.env_vars["NVTE_CPU_OFFLOAD_V1"] = "1"') == []
    [found] = _ofl112(tmp_path, 'cfg.env_vars["NVTE_CPU_OFFLOAD_V1"] = "0"')
    assert "NVTE_CPU_OFFLOAD_V1='0'" in found.message


@pytest.mark.parametrize("write", ['del cfg.env_vars["PYTORCH_CUDA_ALLOC_CONF"]', "pass"])
def test_an_entry_removed_or_never_written_is_unset(tmp_path, write):
    [found] = _ofl112(tmp_path, write)
    assert "NVTE_CPU_OFFLOAD_V1 unset" in found.message and found.severity.value == "error"


def test_an_entry_offlint_cannot_name_leaves_the_environment_unknown(tmp_path):
    [found] = _ofl112(tmp_path, 'cfg.env_vars[name] = "1"')
    assert found.severity.value != "error" and "cannot see" in found.message


@pytest.mark.parametrize("write, unset", [
    ('cfg.env_vars.update(NVTE_CPU_OFFLOAD_V1="1")', False),
    ('cfg.env_vars.update({"NCCL_ALGO": "Tree"}, NVTE_CPU_OFFLOAD_V1="1")', False),
    ('cfg.env_vars.update(NCCL_ALGO="Tree")', True),
    ('cfg.env_vars.setdefault("NVTE_CPU_OFFLOAD_V1", "1")', False),
    ('cfg.env_vars["NVTE_CPU_OFFLOAD_V1"] = "1"\n    cfg.env_vars.pop("NVTE_CPU_OFFLOAD_V1", None)', True),
    ('cfg.env_vars["NVTE_CPU_OFFLOAD_V1"] = "1"\n    cfg.env_vars.clear()', True),
])
def test_the_dict_methods_that_change_the_environment(tmp_path, write, unset):
    """dict.update's named form, setdefault, pop and clear: round 5 of the recall study wrote the fix OFL112 names as
    `cfg.env_vars.update(NVTE_CPU_OFFLOAD_V1="1")` and was told the variable was unset (a false error)."""
    found = _ofl112(tmp_path, write)
    assert [f.severity.value for f in found] == (["error"] if unset else [])


def test_an_update_from_entries_offlint_cannot_list_leaves_the_environment_unknown(tmp_path):
    [found] = _ofl112(tmp_path, "cfg.env_vars.update(**extra)")
    assert found.severity.value != "error" and "cannot see" in found.message


@pytest.mark.parametrize("kept, unset", [('k != "NVTE_CPU_OFFLOAD_V1"', True), ('not k.startswith("NCCL_")', False)])
def test_a_dict_comprehension_over_the_environment_filters_it(tmp_path, kept, unset):
    """`cfg.env_vars = {k: v for k, v in cfg.env_vars.items() if ...}`: round 5 of the recall study dropped
    NCCL_GRAPH_REGISTER from a recipe's environment so; the comprehension had left it unknown."""
    write = (f'cfg.env_vars["NVTE_CPU_OFFLOAD_V1"] = "1"\n'
             f'    cfg.env_vars = {{k: v for k, v in cfg.env_vars.items() if {kept}}}')
    assert [f.severity.value for f in _ofl112(tmp_path, write)] == (["error"] if unset else [])
