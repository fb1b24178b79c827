"""Every test gets a cache directory of its own, so that no test reads another's cache or the user's; the tests that
build real megatron-core models share one parallel-state fixture."""

import pytest


@pytest.fixture(autouse=True)
def _private_cache_home(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("OFFLINT_CACHE_DIR", str(tmp_path_factory.mktemp("offlint-cache")))


@pytest.fixture(scope="module")
def model_parallel():
    """megatron-core's parallel state on CPU (gloo, world size 1, a free port: other test sessions may hold a
    fixed one), for the tests that build real megatron-core models to check the estimate's counts against."""
    pytest.importorskip("torch", reason="torch is needed to build real megatron-core models")
    pytest.importorskip("megatron.core", reason="megatron-core is not installed (pip install '.[conformance]')")
    import socket

    import torch.distributed as dist
    from megatron.core import parallel_state
    from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed

    started = not dist.is_initialized()
    if started:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=1, pipeline_model_parallel_size=1)
    try:
        model_parallel_cuda_manual_seed(1234)
    except Exception:  # CPU torch: the CUDA RNG tracker is not needed with use_cpu_initialization
        pass
    yield
    parallel_state.destroy_model_parallel()
    if started:
        dist.destroy_process_group()
