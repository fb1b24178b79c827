"""OFL220: a CUDA-graph module name megatron-core does not know (KeyError when it builds the config, or in
Megatron-LM's argument parser). The names per version are generated data (offlint/data, cuda_graph_names), checked
here against the installed megatron-core; the rule examples are checked against megatron-core itself by
tests/test_conformance.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from offlint import keys
from offlint.api import CheckOptions, check
from offlint.versions import parse_version

ROOT = Path(__file__).resolve().parent.parent


def test_the_names_of_the_installed_megatron_core_are_the_generated_data():
    core = pytest.importorskip("megatron.core")
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import dump_mcore_fields
    finally:
        sys.path.pop(0)
    from megatron.core import package_info

    data = keys.version_data(parse_version(package_info.__version__))
    assert data["version"] == package_info.__version__, core.__file__
    assert data["cuda_graph_names"] == dump_mcore_fields.dump_cuda_graph_names()
    from megatron.core.transformer.enums import CudaGraphScope

    for name in data["cuda_graph_names"]:
        assert name == "full" or CudaGraphScope[name]
    with pytest.raises(KeyError):
        CudaGraphScope["mamba attn moe_router"]


def test_a_claim_between_two_releases_holds_for_both_and_none_is_made_past_the_newest():
    names = {str(d["version"]): d for d in (keys.version_data(parse_version(v)) for v in ("0.16.1", "0.20.0"))}
    assert [d["version"] for d in keys.bracketing_data(parse_version("0.18.0"))] == ["0.16.1", "0.19.1"]
    assert [d["version"] for d in keys.bracketing_data(parse_version("0.20.0"))] == ["0.20.0"]
    assert keys.bracketing_data(parse_version("0.21.0")) == []
    assert "full_iteration_inference" not in names["0.16.1"]["cuda_graph_names"]
    assert "full_iteration_inference" in names["0.20.0"]["cuda_graph_names"]


def _findings(tmp_path, monkeypatch, version: str, scope: str) -> list:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "run.sh").write_text(
        "#!/bin/bash\n"
        "python scripts/training/run_recipe.py --recipe llama3_8b_pretrain_config "
        f"model.cuda_graph_impl=transformer_engine 'model.cuda_graph_scope={scope}'\n")
    result = check(["run.sh"], CheckOptions(select=["OFL220"], mcore_version=version, root=tmp_path, cache=False))
    return [f for f in result.findings if f.code == "OFL220"]


@pytest.mark.parametrize(("version", "scope", "claimed"), [
    ("0.20.0", "[attn,moe_routr]", "moe_routr"),
    ("0.20.0", "[attn,moe_router]", None),
    ("0.20.0", "attn\\,mlp_layers", "mlp_layers"),  # a string is split on commas, as megatron-core does
    ("0.16.1", "[full_iteration_inference]", "full_iteration_inference"),  # 0.16.1's CudaGraphScope has none
    ("0.18.0", "[full_iteration_inference]", None),  # 0.19.1 knows it: 0.18 may too, so no claim
    ("0.18.0", "[attn,bogus]", "bogus"),  # known to neither release around 0.18
])
def test_a_name_is_claimed_only_where_every_release_it_may_behave_as_refuses_it(tmp_path, monkeypatch, version,
                                                                                 scope, claimed):
    found = _findings(tmp_path, monkeypatch, version, scope)
    if claimed is None:
        assert found == []
    else:
        assert len(found) == 1 and f"names {claimed!r}" in found[0].message and "KeyError" in found[0].message
