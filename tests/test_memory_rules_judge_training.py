"""The memory rules (OFL303, OFL304, OFL305) size a training step on a CUDA GPU: weights, gradients, the
optimizer's state and the activations kept for the backward pass. A launch that builds no optimizer (a text
generation or conversion script given a model's flags) or that runs on another accelerator is outside that model,
and is not judged. MindSpeed-LLM's `generate_*_ptd.sh` (torchrun inference.py, on Ascend NPUs) had eight OFL303
counting an optimizer on an H100 once every flag of their model was read."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from offlint.api import CheckOptions, check
from offlint.cli import main
from tests.check_helpers import write_tree

# A 34B-sized Llama at TP8 on 8 GPUs: as a training run its optimizer state alone is 32 GiB per GPU, and the
# calibrated floor is over an H100's usable memory.
LAUNCH = """\
#!/bin/bash
{exports}
torchrun --nproc_per_node 8 {script} \\
    --tensor-model-parallel-size 8 --pipeline-model-parallel-size 1 \\
    --num-layers 48 --hidden-size 8192 --ffn-hidden-size 22016 --num-attention-heads 64 \\
    --group-query-attention --num-query-groups 8 --position-embedding-type rope \\
    --seq-length 4096 --max-position-embeddings 4096 --micro-batch-size 2 --global-batch-size 16 \\
    --vocab-size 32000 --make-vocab-size-divisible-by 1 --swiglu --normalization RMSNorm \\
    --untie-embeddings-and-output-weights --disable-bias-linear --fp16
"""

TRAINER = """\
from megatron.training import pretrain


def model_provider(pre_process=True, post_process=True):
    return None


if __name__ == "__main__":
    pretrain(None, model_provider, None, None)
"""

GENERATOR = """\
from megatron.training import get_args
from megatron.training.initialize import initialize_megatron


def main():
    initialize_megatron()
    args = get_args()
    print(args.load)


if __name__ == "__main__":
    main()
"""

NPU_PACKAGE = {"npu_llm/__init__.py": "", "npu_llm/adaptor.py": "import torch\nimport torch_npu\n"}


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    write_tree(tmp_path, files)
    return tmp_path


def _memory_findings(tree: Path, strict: bool = False) -> list[tuple[str, str, bool]]:
    result = check([str(tree)], CheckOptions(mcore_version="0.16.1", root=tree, select=["OFL303", "OFL305"],
                                             cache=False, strict=strict))
    assert not result.errors, result.errors
    return sorted((Path(f.location.path).name, f.code, f.possible) for f in result.findings)


def test_a_training_launch_of_the_model_is_judged(tmp_path):
    """The baseline the other tests turn off one fact at a time."""
    tree = _tree(tmp_path, {"train.sh": LAUNCH.format(exports="", script="pretrain_gpt.py"),
                            "pretrain_gpt.py": TRAINER})
    assert _memory_findings(tree) == [("train.sh", "OFL303", False)]


@pytest.mark.parametrize("strict", [False, True])
def test_a_launch_whose_code_builds_no_optimizer_is_not_judged(tmp_path, strict):
    tree = _tree(tmp_path, {"generate.sh": LAUNCH.format(exports="", script="inference.py"),
                            "inference.py": GENERATOR,
                            "train.sh": LAUNCH.format(exports="", script="pretrain_gpt.py"),
                            "pretrain_gpt.py": TRAINER})
    assert _memory_findings(tree, strict) == [("train.sh", "OFL303", False)]


def test_a_generation_script_outside_the_tree_is_judged_by_its_name_and_flags(tmp_path):
    """Megatron-LM's own tools/run_text_generation_server.py, launched from a tree that does not hold it: its name
    says it does not train (launch.trains_by_flags)."""
    server = "$MEGATRON/tools/run_text_generation_server.py"
    tree = _tree(tmp_path, {"serve.sh": LAUNCH.format(exports="", script=server),
                            "train.sh": LAUNCH.format(exports="", script="$MEGATRON/pretrain_gpt.py")})
    assert _memory_findings(tree) == [("train.sh", "OFL303", False)]


@pytest.mark.parametrize("npu", ["variable", "import"])
def test_a_launch_on_another_accelerator_is_not_judged(tmp_path, npu):
    """The device the estimate is told against is a CUDA GPU (`[tool.offlint] gpu`, default h100-80gb); an Ascend
    NPU's memory, allocator and kernels are not what the model was calibrated on."""
    files = {"train_npu.sh": LAUNCH.format(exports="export PYTORCH_NPU_ALLOC_CONF=expandable_segments:True"
                                           if npu == "variable" else "", script="pretrain_npu.py"),
             "pretrain_npu.py": ("from npu_llm import adaptor\n" if npu == "import" else "") + TRAINER,
             "train.sh": LAUNCH.format(exports="", script="pretrain_gpt.py"), "pretrain_gpt.py": TRAINER,
             **NPU_PACKAGE}
    assert _memory_findings(_tree(tmp_path, files)) == [("train.sh", "OFL303", False)]


def test_estimate_refuses_a_launch_that_does_not_train(tmp_path, monkeypatch):
    """`offlint estimate` says why it has no verdict, in one line, exit 2, rather than size an optimizer that is
    never built."""
    tree = _tree(tmp_path, {"generate.sh": LAUNCH.format(exports="", script="inference.py"),
                            "inference.py": GENERATOR})
    monkeypatch.chdir(tree)
    result = CliRunner().invoke(main, ["estimate", "generate.sh", "--mcore-version", "0.16.1"])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "generate.sh" in lines[0] and "does not train" in lines[0], result.output


def test_estimate_of_a_launch_on_another_accelerator_says_whose_figures_they_are(tmp_path, monkeypatch):
    npu = "export PYTORCH_NPU_ALLOC_CONF=expandable_segments:True"
    tree = _tree(tmp_path, {"train_npu.sh": LAUNCH.format(exports=npu, script="pretrain_gpt.py"),
                            "pretrain_gpt.py": TRAINER})
    monkeypatch.chdir(tree)
    result = CliRunner().invoke(main, ["estimate", "train_npu.sh", "--mcore-version", "0.16.1"])
    assert result.exit_code == 0, result.output
    assert ("note: it runs on Ascend NPUs: the launch sets PYTORCH_NPU_ALLOC_CONF; these figures are for h100-80gb, "
            "a CUDA GPU, the device the memory model sizes") in result.output
