"""The reader takes Bridge's WanDatasetConfig(...) as the dataset section (offlint/sources/python_configs.py), so
the Wan memory estimate (tests/test_estimate_diffusion.py) sees the mock batch's packing settings. A recipe in the
shape of Bridge's Wan recipes, written here."""

from __future__ import annotations

from offlint.units import load_unit

RECIPE = '''
from megatron.bridge.diffusion.data.wan.wan_energon_datamodule import WanDatasetConfig
from megatron.bridge.training.config import ConfigContainer, TrainingConfig


def wan_tiny_pretrain_config(micro_batch_size: int = 1) -> ConfigContainer:
    dataset = WanDatasetConfig(
        path=None,
        seq_length=1024,
        packing_buffer_size=150,
        micro_batch_size=micro_batch_size,
        global_batch_size=8,
    )
    return ConfigContainer(train=TrainingConfig(train_iters=10), dataset=dataset)
'''


def test_a_wan_dataset_config_is_the_dataset_section(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "wan.py").write_text(RECIPE)
    resolved = load_unit("wan.py", "wan_tiny_pretrain_config", mcore_version="0.20.0").resolved
    assert resolved.get("dataset.packing_buffer_size").value == 150
    assert resolved.get("dataset.seq_length").value == 1024
    assert resolved.get("dataset.path").state == "known" and resolved.get("dataset.path").value is None
