"""OFL004 on launch commands: a flag given twice with different values is a slip when both were written together,
on the command itself or in one variable's assignment, and layering when not (engine._written_together).

THUDM/slime's run scripts give `--moe-token-dispatcher-type alltoall` in a model's array (often from a sourced
`scripts/models/*.sh`) and `--moe-token-dispatcher-type flex` in the run's own array, to use DeepEP: argparse keeps
the last, as meant, and OFL004 had warned on 8 scripts. Fixtures of our own, in that shape.
"""

from __future__ import annotations

import pytest

from tests.check_helpers import check_json, write_tree

MODEL = "MODEL_ARGS=(\n   --num-layers 4 --hidden-size 256 --num-attention-heads 4\n   --moe-token-dispatcher-type alltoall\n)\n"


@pytest.mark.parametrize("script, reported", [
    # two arrays: a model's defaults, the run's overrides
    (MODEL + "PERF_ARGS=(\n   --moe-enable-deepep\n   --moe-token-dispatcher-type flex\n)\n"
     "torchrun --nproc-per-node 8 pretrain_gpt.py --train-iters 10 ${MODEL_ARGS[@]} ${PERF_ARGS[@]}\n", False),
    # a variable, then the command itself
    (MODEL + "torchrun --nproc-per-node 8 pretrain_gpt.py --train-iters 10 ${MODEL_ARGS[@]} "
             "--moe-token-dispatcher-type flex\n", False),
    # a sourced file's array, then the run's own
    ("source models/moe.sh\nPERF_ARGS=(--moe-token-dispatcher-type flex)\n"
     "torchrun --nproc-per-node 8 pretrain_gpt.py --train-iters 10 ${MODEL_ARGS[@]} ${PERF_ARGS[@]}\n", False),
    # twice in one array
    ("ARGS=(\n   --num-layers 4\n   --moe-token-dispatcher-type alltoall\n   --moe-token-dispatcher-type flex\n)\n"
     "torchrun --nproc-per-node 8 pretrain_gpt.py --train-iters 10 ${ARGS[@]}\n", True),
    # twice on the command itself
    ("torchrun --nproc-per-node 8 pretrain_gpt.py --train-iters 10 --moe-token-dispatcher-type alltoall \\\n"
     "   --num-layers 4 --moe-token-dispatcher-type flex\n", True),
    # a string variable, split where it is expanded, then the command (MindSpeed-LLM's longcat scripts, a helper's
    # sweep: its words all stand at `$GPT_ARGS`, which had made them the command's own)
    ('GPT_ARGS="\n   --num-layers 4\n   --moe-token-dispatcher-type alltoall\n"\n'
     "torchrun --nproc-per-node 8 pretrain_gpt.py --train-iters 10 $GPT_ARGS --moe-token-dispatcher-type flex\n",
     False),
    # two string variables
    ('GPT_ARGS="--num-layers 4 --moe-token-dispatcher-type alltoall"\nRUN_ARGS="--moe-token-dispatcher-type flex"\n'
     "torchrun --nproc-per-node 8 pretrain_gpt.py --train-iters 10 $GPT_ARGS $RUN_ARGS\n", False),
])
def test_a_flag_given_twice_is_reported_only_where_written_together(tmp_path, script, reported):
    write_tree(tmp_path, {"run.sh": "#!/bin/bash\n" + script, "models/moe.sh": MODEL})
    found = [f for f in check_json(tmp_path, "--select", "OFL004") if f["filename"] == "run.sh"]
    assert bool(found) == reported, found
