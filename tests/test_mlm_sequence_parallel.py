"""`--sequence-parallel` on a Megatron-LM launch: validate_args turns it off where the tensor-parallel size is 1 and
leaves it on elsewhere (arguments.py). offlint had not read the flag at all, so the memory model, which needs to know,
gave no estimate for the launches passing it (nearly every Megatron-LM example with TP above 1): a recall study's
70B model at TP 8 on 8 GPUs, far over an H100, had no OFL303 with the flag and one without it."""

from __future__ import annotations

import pytest

from offlint.api import CheckOptions, check
from offlint.sources.shell import read_shell
from offlint.types import Unknown

MODEL = ("--num-layers 80 --hidden-size 8192 --ffn-hidden-size 28672 --num-attention-heads 64 "
         "--group-query-attention --num-query-groups 8 --seq-length 4096 --max-position-embeddings 4096 "
         "--micro-batch-size 1 --global-batch-size 128 --train-iters 100 --bf16 --swiglu --disable-bias-linear "
         "--normalization RMSNorm --position-embedding-type rope --untie-embeddings-and-output-weights "
         "--vocab-size 128256 --use-distributed-optimizer")


def _sequence_parallel(tp: str):
    [unit] = read_shell("run.sh", f"torchrun --nproc-per-node 8 pretrain_gpt.py {MODEL} {tp} --sequence-parallel\n")
    return next(a.value for a in unit.all_assignments() if a.key == "model.sequence_parallel")


@pytest.mark.parametrize("tp, expected", [("--tensor-model-parallel-size 8", True),
                                          ("--tensor-model-parallel-size 1", False), ("", False)])
def test_the_flag_holds_where_tensor_parallelism_does(tp, expected):
    assert _sequence_parallel(tp) is expected


def test_an_unknown_tensor_parallel_size_leaves_it_unknown():
    assert isinstance(_sequence_parallel("--tensor-model-parallel-size $TP"), Unknown)


def test_a_launch_passing_it_is_sized(tmp_path):
    (tmp_path / "run.sh").write_text("#!/bin/bash\nexport PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n"
                                     f"torchrun --nproc-per-node 8 pretrain_gpt.py {MODEL} "
                                     "--tensor-model-parallel-size 8 --sequence-parallel\n")
    findings = check([str(tmp_path)], CheckOptions(root=tmp_path, cache=False, select=["OFL303"])).findings
    assert [f.code for f in findings] == ["OFL303"] and "on 8 GPUs" in findings[0].message
