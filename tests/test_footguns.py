"""The silent footguns (OFL2xx) shown on the real megatron-core, on CPU, next to the rule that reports each.

HybridDeviceOptimizer cannot be constructed without CUDA, so its real parameter split
(`_get_sub_optimizer_param_groups`) runs on stand-in parameters that report `is_cuda`, and the real
`_get_megatron_optimizer_based_on_param_groups` runs with a recorder in place of HybridDeviceOptimizer.
"""

from __future__ import annotations

import pytest

from offlint.api import CheckOptions, check

mcore_optimizer = pytest.importorskip("megatron.core.optimizer", reason="megatron-core is not installed")
hybrid = pytest.importorskip("megatron.core.optimizer.cpu_offloading.hybrid_optimizer")
torch = pytest.importorskip("torch")


class FakeCudaParam:
    """Just what the split reads: numel, is_cuda, dtype, and the copy chain that moves it to the host."""

    def __init__(self, numel: int, on_gpu: bool = True):
        self._numel, self.is_cuda, self.dtype = numel, on_gpu, torch.float32

    def numel(self) -> int:
        return self._numel

    def detach(self):
        return self

    def clone(self):
        return FakeCudaParam(self._numel, self.is_cuda)

    def cpu(self):
        return FakeCudaParam(self._numel, on_gpu=False)

    def pin_memory(self):
        return self


def offloaded_share(fraction: float, sizes=(100, 100, 100, 100)) -> float:
    optimizer = object.__new__(hybrid.HybridDeviceOptimizer)
    optimizer.param_groups = [{"params": [FakeCudaParam(n) for n in sizes]}]
    optimizer.param_update_in_fp32 = False
    cpu_groups = optimizer._get_sub_optimizer_param_groups(fraction)[0]
    return sum(p.numel() for g in cpu_groups for p in g["params"]) / sum(sizes)


def lint(tmp_path, body: str, code: str) -> list[str]:
    path = tmp_path / "recipe.py"
    path.write_text("def recipe():\n    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8), "
                    "optimizer=OptimizerConfig(), ddp=DistributedDataParallelConfig())\n"
                    + "".join(f"    {line}\n" for line in body.splitlines()) + "    return cfg\n")
    result = check([str(path)], CheckOptions(select=[code], root=tmp_path))
    return [f.message for f in result.findings]


def test_f1_default_fraction_offloads_nothing(tmp_path):
    assert mcore_optimizer.OptimizerConfig(optimizer_cpu_offload=True).optimizer_offload_fraction == 0.0
    assert offloaded_share(0.0) == 0.0
    assert offloaded_share(0.5) == 0.5 and offloaded_share(1.0) == 1.0
    assert lint(tmp_path, "cfg.optimizer.optimizer_cpu_offload = True", "OFL201")
    assert not lint(tmp_path, "cfg.optimizer.optimizer_cpu_offload = True\n"
                              "cfg.optimizer.optimizer_offload_fraction = 0.5", "OFL201")


def test_f5_out_of_range_fractions_are_clamped_silently(tmp_path):
    assert offloaded_share(-0.5) == 0.0 and offloaded_share(1.5) == 1.0
    assert offloaded_share(0.5, sizes=(10, 10, 10, 1000)) == 1.0  # greedy over whole parameters
    assert lint(tmp_path, "cfg.optimizer.optimizer_cpu_offload = True\n"
                          "cfg.optimizer.optimizer_offload_fraction = 1.5", "OFL203")


class Recorded(Exception):
    pass


def built_with(monkeypatch, **config) -> dict:
    """Run the real optimizer builder; record what it would hand HybridDeviceOptimizer, then stop."""
    calls: dict = {}

    def record(*args, **kwargs):
        calls.update(kwargs)
        raise Recorded

    monkeypatch.setattr(mcore_optimizer, "HybridDeviceOptimizer", record)
    module = torch.nn.Linear(4, 4)
    with pytest.raises(Recorded):
        mcore_optimizer._get_megatron_optimizer_based_on_param_groups(
            mcore_optimizer.OptimizerConfig(lr=1e-3, **config), [module], [{"params": list(module.parameters())}])
    return calls


def test_f6_a_non_adam_optimizer_name_becomes_sgd(tmp_path, monkeypatch):
    calls = built_with(monkeypatch, optimizer="lion", optimizer_cpu_offload=True, optimizer_offload_fraction=1.0)
    assert calls["cpu_optimizer_cls"] is torch.optim.SGD and "momentum" in calls
    adam = built_with(monkeypatch, optimizer="adam", optimizer_cpu_offload=True, optimizer_offload_fraction=1.0)
    assert adam["cpu_optimizer_cls"] is torch.optim.AdamW
    assert lint(tmp_path, "cfg.optimizer.optimizer_cpu_offload = True\n"
                          "cfg.optimizer.optimizer_offload_fraction = 1.0\n"
                          "cfg.optimizer.optimizer = 'lion'", "OFL204")


def test_f6_needs_the_config_built_precision_aware_asserts_adam_first(tmp_path, monkeypatch):
    """With the precision-aware optimizer on (which the Megatron-LM command line requires for offload), the config
    itself refuses any optimizer but adam (OC-2): no hybrid device optimizer is built, nothing trains with SGD.
    OFL116 says so; OFL204 must not add that the job trains (three Pai-Megatron-Patch launches with `--optimizer
    dist_muon` had both)."""
    monkeypatch.setattr(mcore_optimizer, "HybridDeviceOptimizer", lambda *a, **k: pytest.fail("HDO was built"))
    with pytest.raises(AssertionError, match="only supported with adam"):
        mcore_optimizer.OptimizerConfig(lr=1e-3, optimizer="lion", optimizer_cpu_offload=True,
                                        optimizer_offload_fraction=1.0, use_precision_aware_optimizer=True,
                                        use_distributed_optimizer=True)
    body = ("cfg.optimizer.optimizer_cpu_offload = True\n"
            "cfg.optimizer.optimizer_offload_fraction = 1.0\n"
            "cfg.optimizer.use_distributed_optimizer = True\n"
            "cfg.optimizer.use_precision_aware_optimizer = True\n"
            "cfg.optimizer.optimizer = 'lion'")
    assert lint(tmp_path, body, "OFL116")
    assert not lint(tmp_path, body, "OFL204")


def test_f4_use_torch_optimizer_for_cpu_offload_changes_nothing(tmp_path, monkeypatch):
    plain = built_with(monkeypatch, optimizer_cpu_offload=True, optimizer_offload_fraction=1.0)
    flagged = built_with(monkeypatch, optimizer_cpu_offload=True, optimizer_offload_fraction=1.0,
                         use_torch_optimizer_for_cpu_offload=True)
    assert plain["gpu_optimizer_cls"] is flagged["gpu_optimizer_cls"]
    assert plain["cpu_optimizer_cls"] is flagged["cpu_optimizer_cls"]
    assert lint(tmp_path, "cfg.optimizer.optimizer_cpu_offload = True\n"
                          "cfg.optimizer.optimizer_offload_fraction = 1.0\n"
                          "cfg.optimizer.use_torch_optimizer_for_cpu_offload = True", "OFL205")


def test_f4_without_offloading_the_flag_is_one_finding_ofl202s(tmp_path):
    """With optimizer_cpu_offload off, megatron-core never reaches the branch OFL205 describes: OFL202 reports the
    inert flag alone (a Megatron-LM fork's launches had both, sweep 41)."""
    body = "cfg.optimizer.use_torch_optimizer_for_cpu_offload = True"
    assert lint(tmp_path, body, "OFL202") and not lint(tmp_path, body, "OFL205")


def test_f2_fraction_without_the_master_switch_is_ignored(tmp_path, monkeypatch):
    module = torch.nn.Linear(4, 4)
    monkeypatch.setattr(mcore_optimizer, "HybridDeviceOptimizer",
                        lambda *a, **k: pytest.fail("HybridDeviceOptimizer built with offload off"))
    try:
        mcore_optimizer._get_megatron_optimizer_based_on_param_groups(
            mcore_optimizer.OptimizerConfig(lr=1e-3, optimizer_offload_fraction=0.5), [module],
            [{"params": list(module.parameters())}])
    except Exception as exc:  # the non-offload path goes on to need process groups; it never reached HDO
        assert "HybridDeviceOptimizer built" not in str(exc)
    assert lint(tmp_path, "cfg.optimizer.optimizer_offload_fraction = 0.5", "OFL202")
