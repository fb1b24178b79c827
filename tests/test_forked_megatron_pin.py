"""A tree that pins its own fork of Megatron-LM and has not checked it out (offlint/versions.py).

BochunZhang/Megatron-Bridge-Scale-Down pins `core_v0.19.0_scale_down` of its own Megatron-LM fork, whose
TransformerConfig adds `mlp_act` to the modules fine-grained offloading accepts; its launch scripts offload
`[mlp_norm, mlp_act]`. Checked against a release's list, OFL107 called that an error megatron-core raises. A fork
may allow names no release does, so where its code is not there no name is called invalid; a pin of NVIDIA's own
Megatron-LM keeps the release's lists. The fixture is our own, in that shape.
"""

from __future__ import annotations

from offlint.versions import detect_version
from tests.check_helpers import check_json, write_tree

RECIPE = """\
from megatron.bridge.training.config import ConfigContainer
from megatron.bridge.recipes.common import _pretrain_common


def text_9b_offload_config() -> ConfigContainer:
    cfg = _pretrain_common()
    cfg.model.transformer_impl = "transformer_engine"
    cfg.model.fine_grained_activation_offloading = True
    cfg.model.offload_modules = ["mlp_norm", "mlp_act"]
    cfg.env_vars = {"NVTE_CPU_OFFLOAD_V1": "1"}
    return cfg
"""


def _gitmodules(url: str, branch: str = "") -> str:
    return ('[submodule "3rdparty/Megatron-LM"]\n\tpath = 3rdparty/Megatron-LM\n'
            f"\turl = {url}\n" + (f"\tbranch = {branch}\n" if branch else ""))


FORK = _gitmodules("https://github.com/someone/Megatron-LM-Scale-Down.git", "core_v0.19.0_scale_down")


def _codes(tmp_path, gitmodules: str) -> list[str]:
    write_tree(tmp_path, {".gitmodules": gitmodules, "recipes/offload.py": RECIPE})
    (tmp_path / "3rdparty" / "Megatron-LM").mkdir(parents=True)
    return [f["code"] for f in check_json(tmp_path)]


def test_a_name_only_the_fork_may_allow_is_not_an_error(tmp_path):
    assert "OFL107" not in _codes(tmp_path, FORK)


def test_nvidias_own_megatron_lm_keeps_the_releases_lists(tmp_path):
    assert "OFL107" in _codes(tmp_path, _gitmodules("https://github.com/NVIDIA/Megatron-LM.git"))


def test_the_version_is_the_release_the_forks_branch_names_and_the_note_says_why(tmp_path):
    (tmp_path / ".gitmodules").write_text(FORK)
    (tmp_path / "3rdparty" / "Megatron-LM").mkdir(parents=True)
    detected = detect_version(None, None, tmp_path)
    assert str(detected.version) == "0.19.0" and "core_v0.19.0_scale_down" in detected.origin
    assert detected.version.lists_unknown.startswith("3rdparty/Megatron-LM pins a fork of Megatron-LM")
    assert "none is called invalid" in detected.note and "git submodule update --init" in detected.note
    named = detect_version("0.20.0", None, tmp_path)  # a version named: that one, and the lists still unknown
    assert str(named.version) == "0.20.0" and named.version.lists_unknown
    without_branch = tmp_path / "plain"
    (without_branch / "3rdparty" / "Megatron-LM").mkdir(parents=True)
    (without_branch / ".gitmodules").write_text(_gitmodules("git@github.com:someone/Megatron-LM.git"))
    assert detect_version(None, None, without_branch).version.lists_unknown


def test_a_checked_out_fork_is_read_as_any_checkout(tmp_path):
    (tmp_path / ".gitmodules").write_text(FORK)
    info = tmp_path / "3rdparty" / "Megatron-LM" / "megatron" / "core"
    info.mkdir(parents=True)
    (info / "package_info.py").write_text("MAJOR = 0\nMINOR = 19\nPATCH = 0\n")
    detected = detect_version(None, None, tmp_path)
    assert not detected.version.lists_unknown and "package_info.py" in detected.origin


MHC_RECIPE = """\
from megatron.bridge.training.config import ConfigContainer
from megatron.bridge.models import GPTModelProvider


def v4_pretrain_config() -> ConfigContainer:
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8))
    cfg.model.recompute_granularity = "selective"
    cfg.model.recompute_modules = ["moe_act", "mhc"]
    return cfg
"""


def test_a_guessed_version_calls_no_name_invalid_that_a_newer_release_allows(tmp_path, monkeypatch):
    """NVIDIA's pin not checked out: the installed 0.16.1 is only a guess, and Bridge's DeepSeek-V4 recipes name
    'mhc', which 0.19 allows (LLaVA-OneVision-2: 4 false OFL222 errors; Bridge 067f987 at the installed 0.16.1: 14
    OFL222/OFL107 on 'mhc', 'fused_group_mlp', 'gdn_norm_out'). A name no release allows is still one."""
    from offlint import versions
    from offlint.api import CheckOptions, check

    monkeypatch.setattr(versions, "_installed_version", lambda: versions.parse_version("0.16.1"))
    write_tree(tmp_path, {"recipes/v4.py": MHC_RECIPE, "recipes/typo.py": MHC_RECIPE.replace('"mhc"', '"mhx"')})
    monkeypatch.chdir(tmp_path)

    def refused() -> list[str]:
        found = check(["recipes"], CheckOptions(root=tmp_path, cache=False, select=["OFL222"])).findings
        return sorted(f.location.path for f in found)

    assert refused() == ["recipes/typo.py", "recipes/v4.py"]  # 0.16.1 installed, and nothing says otherwise
    (tmp_path / ".gitmodules").write_text(_gitmodules("https://github.com/NVIDIA/Megatron-LM.git"))
    (tmp_path / "3rdparty" / "Megatron-LM").mkdir(parents=True)
    assert refused() == ["recipes/typo.py"]
    assert detect_version(None, None, tmp_path).version.guessed


EP_OVERLAP_RECIPE = """\
from megatron.bridge.training.config import ConfigContainer, OptimizerConfig
from megatron.bridge.models import GPTModelProvider


def moe_pretrain_config() -> ConfigContainer:
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8, num_moe_experts=16),
                          optimizer=OptimizerConfig(bf16=True))
    cfg.model.bf16 = True
    cfg.model.expert_model_parallel_size = 8
    cfg.model.moe_token_dispatcher_type = "alltoall"
    cfg.model.cuda_graph_impl = "local"
    cfg.comm_overlap.overlap_moe_expert_parallel_comm = True
    return cfg
"""


def test_a_guessed_version_claims_no_assert_the_newest_release_does_not_make(tmp_path, monkeypatch):
    """megatron-core 0.16 asserts against any CUDA graph but Transformer Engine's with EP overlap; from 0.18 only
    against Transformer Engine graphs of moe or mlp. With the tree's pin not checked out the installed 0.16.1 is a
    guess: Bridge 067f987 had 5 such OFL224 errors its pin (0.20) does not raise."""
    from offlint import versions
    from offlint.api import CheckOptions, check

    monkeypatch.setattr(versions, "_installed_version", lambda: versions.parse_version("0.16.1"))
    write_tree(tmp_path, {"recipes/moe.py": EP_OVERLAP_RECIPE})
    monkeypatch.chdir(tmp_path)

    def refused() -> list[str]:
        return [f.code for f in check(["recipes"], CheckOptions(root=tmp_path, cache=False, select=["OFL224"])).findings]

    assert refused() == ["OFL224"]  # 0.16.1 installed, and nothing says otherwise
    (tmp_path / ".gitmodules").write_text(_gitmodules("https://github.com/NVIDIA/Megatron-LM.git"))
    (tmp_path / "3rdparty" / "Megatron-LM").mkdir(parents=True)
    assert refused() == []


def test_a_pin_whose_folder_names_its_date_is_a_pin(tmp_path):
    """Pai-Megatron-Patch's layout names each Megatron-LM submodule by its date (`backends/megatron/Megatron-LM-
    260226`, `PAI-Megatron-LM-240718`); a fork of it pinned so (genggui001's) had been no pin at all, its module
    names judged by a release's lists."""
    modules = ('[submodule "backends/megatron/Megatron-LM-260226"]\n'
               "\tpath = backends/megatron/Megatron-LM-260226\n"
               "\turl = https://github.com/someone/Megatron-LM.git\n\tbranch = 260226\n")
    write_tree(tmp_path, {".gitmodules": modules, "recipes/offload.py": RECIPE})
    (tmp_path / "backends" / "megatron" / "Megatron-LM-260226").mkdir(parents=True)
    assert "OFL107" not in [f["code"] for f in check_json(tmp_path)]
    assert detect_version(None, None, tmp_path).version.lists_unknown.startswith(
        "backends/megatron/Megatron-LM-260226 pins a fork")


def test_a_tree_pinning_several_releases_says_how_many_are_not_checked_out(tmp_path):
    modules = "".join(f'[submodule "backends/megatron/Megatron-LM-{date}"]\n\tpath = backends/megatron/Megatron-LM-'
                      f"{date}\n\turl = https://github.com/NVIDIA/Megatron-LM.git\n" for date in ("240126", "250624"))
    (tmp_path / ".gitmodules").write_text(modules)
    note = detect_version(None, None, tmp_path).note
    assert note.startswith("backends/megatron/Megatron-LM-240126 and 1 more Megatron-LM submodules (the tree's "
                           "megatron-core) are not checked out")
