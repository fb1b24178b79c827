"""OFL216 and OFL218 quote the check that refuses a layout (Megatron-LM's validate_args, megatron-core's
TransformerBlock): in a Megatron-LM checkout the check is read from the checkout's own files
(mcore_source.REFUSAL_TEXTS), and where the checkout does not make it the finding is not claimed. A helper's
third-party sweep: OpenSQZ/MegatronApp comments out validate_args' world-size assert, and its launches pass
`--forward-backward-disaggregating`, an option of its own parser that takes a rank out of the layout (OFL216 on 6
processes for TP2 x PP2, false); mTuner checks the layers' split only under virtual pipelining and its
TransformerBlock floor-divides them (OFL218 quoting an assert it does not make). An example passing upstream's
options only still meets megatron-core's initialize_model_parallel, which refuses the world size. Fixtures of our
own, in the shape of a Megatron-LM checkout."""

from __future__ import annotations

import pytest

from offlint.api import CheckOptions, check
from offlint.sources.mcore_source import refusals_lacked
from tests.check_helpers import check_json

PACKAGE_INFO = "MAJOR = 0\nMINOR = 20\nPATCH = 0\n"  # (check_json checks with 0.20.0: the checkout is read)
ARGUMENTS = '''
import argparse


def add_megatron_arguments(parser):
    parser.add_argument("--tensor-model-parallel-size", type=int, default=1)
    parser.add_argument("--pipeline-model-parallel-size", type=int, default=1)
    parser.add_argument("--num-layers", type=int)
    parser.add_argument("--hidden-size", type=int)
    parser.add_argument("--num-attention-heads", type=int)
    parser.add_argument("--micro-batch-size", type=int)
    parser.add_argument("--global-batch-size", type=int)
    parser.add_argument("--seq-length", type=int)
    parser.add_argument("--max-position-embeddings", type=int)
    parser.add_argument("--train-iters", type=int)
    parser.add_argument("--split-ranks-otherwise", action="store_true")
    return parser


def parse_args(extra_args_provider=None, ignore_unknown_args=False):
    parser = argparse.ArgumentParser(allow_abbrev=False)
    parser = add_megatron_arguments(parser)
    return parser.parse_args()


def validate_args(args, defaults={}):
    total_model_size = args.tensor_model_parallel_size * args.pipeline_model_parallel_size
    assert args.world_size % total_model_size == 0, (
        f"world size ({args.world_size}) is not divisible by total_model_size ({total_model_size=})"
    )
    if args.num_layers_per_virtual_pipeline_stage is None:
        assert args.num_layers % args.pipeline_model_parallel_size == 0, \\
            'Number of layers should be divisible by the pipeline-model-parallel size'
'''
BLOCK = '''
def get_num_layers_to_build(config):
    assert (
        config.num_layers % config.pipeline_model_parallel_size == 0
    ), f"{num_layers=} should be divisible by {config.pipeline_model_parallel_size=}"
    return config.num_layers // config.pipeline_model_parallel_size
'''
TRAINER = '''
from megatron.training import pretrain


def forward_step(data_iterator, model):
    return model(data_iterator)


if __name__ == "__main__":
    pretrain(None, None, None, forward_step)
'''
FLAGS = ("--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --num-layers 5 --hidden-size 256 "
         "--num-attention-heads 8 --micro-batch-size 1 --global-batch-size 8 --seq-length 128 "
         "--max-position-embeddings 128 --train-iters 10")


def _checkout(tmp_path, arguments: str = ARGUMENTS, block: str = BLOCK, folder: str = ""):
    (tmp_path / ".git").mkdir(exist_ok=True)
    tmp_path = tmp_path / folder if folder else tmp_path
    core = tmp_path / "megatron" / "core"
    (core / "transformer").mkdir(parents=True)
    (core / "package_info.py").write_text(PACKAGE_INFO)
    (core / "transformer" / "transformer_config.py").write_text("class TransformerConfig:\n    pass\n")
    (core / "transformer" / "transformer_block.py").write_text(block)
    (tmp_path / "megatron" / "training").mkdir()
    (tmp_path / "megatron" / "training" / "__init__.py").write_text("")
    (tmp_path / "megatron" / "training" / "arguments.py").write_text(arguments)
    (tmp_path / "pretrain_gpt.py").write_text(TRAINER)
    return tmp_path


def _layout(root, launch: str) -> list[tuple[str, str]]:
    (root / "train.sh").write_text(f"torchrun --nproc_per_node 6 pretrain_gpt.py {FLAGS} {launch}\n")
    return [(f["code"], f["message"].partition(": ")[2]) for f in check_json(root, "--no-cache")
            if f["code"] in ("OFL216", "OFL218")]


def test_the_checkouts_own_checks_are_quoted(tmp_path):
    assert _layout(_checkout(tmp_path), "") == [
        ("OFL216", 'Megatron-LM\'s validate_args asserts "world size (6) is not divisible by total_model_size '
                   '(total_model_size=4)"'),
        ("OFL218", 'Megatron-LM\'s validate_args asserts "Number of layers should be divisible by the '
                   'pipeline-model-parallel size" when the job starts')]


PARTS = ARGUMENTS.replace("({total_model_size=})", "({encoder_model_size=} + {decoder_model_size=})")


def test_a_checkout_asserting_the_world_size_in_other_words_is_not_misquoted(tmp_path):
    """Megatron-LM 0.10 to 0.13 print "(encoder_model_size=0 + decoder_model_size=128)"; OFL216 had quoted today's
    "(total_model_size=128)" against such checkouts (three helpers' sweeps, session 63). It says what the assert
    checks, unquoted."""
    assert PARTS != ARGUMENTS
    assert _layout(_checkout(tmp_path, arguments=PARTS), "")[0] == (
        "OFL216", "its checkout's validate_args asserts that the world size (6) is divisible by TP x PP x CP (4)")


COMMENTED = ARGUMENTS.replace("    assert args.world_size % total_model_size == 0, (\n"
                              '        f"world size ({args.world_size}) is not divisible by total_model_size '
                              '({total_model_size=})"\n    )\n',
                              "    # assert args.world_size % total_model_size == 0, (\n"
                              '    #     f"world size ({args.world_size}) is not divisible by total_model_size '
                              '({total_model_size=})"\n    # )\n')


def test_a_fork_without_the_world_size_assert_and_an_option_of_its_own_is_not_judged(tmp_path):
    assert COMMENTED != ARGUMENTS
    root = _checkout(tmp_path, arguments=COMMENTED)
    assert [code for code, _ in _layout(root, "--split-ranks-otherwise")] == ["OFL218"]


def test_a_fork_without_the_world_size_assert_still_meets_megatron_cores_refusal(tmp_path):
    root = _checkout(tmp_path, arguments=COMMENTED)
    assert _layout(root, "")[0] == ("OFL216", 'megatron-core raises "world_size (6) is not divisible by 4"')


VPP_ONLY = ARGUMENTS.replace("    if args.num_layers_per_virtual_pipeline_stage is None:\n",
                             "    if args.num_layers_per_virtual_pipeline_stage is not None:\n").replace(
    "Number of layers should be divisible by the pipeline-model-parallel size",
    "number of layers should be divisible by the pipeline parallel size")


@pytest.mark.parametrize("block, expected", [
    (BLOCK, [("OFL218", 'megatron-core\'s TransformerBlock asserts "num_layers=5 should be divisible by '
                        'config.pipeline_model_parallel_size=2" when it builds the model')]),
    ("def get_num_layers_to_build(config):\n    return config.num_layers // config.pipeline_model_parallel_size\n",
     []),
])
def test_a_fork_checking_the_split_otherwise_is_judged_by_its_transformer_block(tmp_path, block, expected):
    root = _checkout(tmp_path, arguments=VPP_ONLY, block=block)
    assert [f for f in _layout(root, "") if f[0] == "OFL218"] == expected


FLOOR_DIVIDES = ("def get_num_layers_to_build(config):\n"
                 "    return config.num_layers // config.pipeline_model_parallel_size\n")


@pytest.mark.parametrize("launch", ["vendor/Megatron-LM/examples/train.sh", "train.sh"])
def test_a_vendored_checkout_is_judged_by_its_own_checks(tmp_path, launch):
    """A tree holding copies of Megatron-LM side by side (MLPerf's training results: submitters' 0.9 and 0.12
    checkouts): a launch is judged by the checkout its entry script lies in, as if that were the tree, whether the
    launch lies inside it or runs its script from outside. The old copy checks the layers' split only under virtual
    pipelining and floor-divides them; the newer one asserts it."""
    _checkout(tmp_path, arguments=VPP_ONLY, block=FLOOR_DIVIDES, folder="vendor/Megatron-LM")
    _checkout(tmp_path, folder="submitter/Megatron-LM")
    script = "pretrain_gpt.py" if launch.startswith("vendor/") else "vendor/Megatron-LM/pretrain_gpt.py"
    (tmp_path / launch).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / launch).write_text(f"torchrun --nproc_per_node 4 {script} {FLAGS}\n")
    (tmp_path / "submitter" / "train.sh").write_text(
        f"torchrun --nproc_per_node 4 Megatron-LM/pretrain_gpt.py {FLAGS}\n")
    found = [(f["code"], f["filename"]) for f in check_json(tmp_path, "--no-cache") if f["code"] == "OFL218"]
    assert found == [("OFL218", "submitter/train.sh")]


CASE = """\
MODEL_ARGS:
  --num-layers: 5
  --hidden-size: 256
  --num-attention-heads: 8
  --pipeline-model-parallel-size: 2
  --micro-batch-size: 1
  --train-iters: 10
TEST_TYPE: regular
"""


def test_a_vendored_checkouts_functional_test_case_is_judged_by_that_checkout(tmp_path):
    """A functional test case runs in the checkout holding it (MLPerf's vendored copies carry Megatron-LM's
    tests/functional_tests as they are)."""
    _checkout(tmp_path, arguments=VPP_ONLY, block=FLOOR_DIVIDES, folder="vendor/Megatron-LM")
    _checkout(tmp_path, folder="submitter/Megatron-LM")
    for copy in ("vendor", "submitter"):
        case = tmp_path / copy / "Megatron-LM" / "tests" / "functional_tests" / "test_cases" / "gpt" / "case_a"
        case.mkdir(parents=True)
        (case / "model_config.yaml").write_text(CASE)
    found = [f["filename"] for f in check_json(tmp_path, "--no-cache") if f["code"] == "OFL218"]
    assert found == ["submitter/Megatron-LM/tests/functional_tests/test_cases/gpt/case_a/model_config.yaml"]


def test_a_megatron_deepspeed_launch_splits_the_layers_its_own_way(tmp_path):
    """`--deepspeed`: Megatron-DeepSpeed builds a DeepSpeed PipelineModule, which partitions the layers over the
    stages unevenly where they do not divide, and its validate_args does not check the split (LUMI's scaling runs:
    70 layers over PP8, the fork outside the tree). A checkout in the tree that asserts it is still judged."""
    (tmp_path / ".git").mkdir()
    script = "python Megatron-DeepSpeed/pretrain_gpt.py " + FLAGS.replace("--num-layers 5", "--num-layers 70").replace(
        "--pipeline-model-parallel-size 2", "--pipeline-model-parallel-size 8")
    (tmp_path / "ds.sh").write_text(f"deepspeed --num_gpus 8 {script} --deepspeed --deepspeed_config ds.json\n")
    (tmp_path / "plain.sh").write_text(f"torchrun --nproc_per_node 8 {script}\n")
    found = [f["filename"] for f in check_json(tmp_path, "--no-cache") if f["code"] == "OFL218"]
    assert found == ["plain.sh"]


def test_only_a_line_of_code_makes_a_check():
    words = "Number of layers should be divisible by the pipeline-model-parallel size"
    files = {"training/arguments.py": f"x = 1\n# '{words}'\n", "core/transformer/transformer_block.py": None}
    assert "mlm-layers-split" in refusals_lacked(files)
    files["training/arguments.py"] = f"    assert n % pp == 0, '{words}'\n"
    assert "mlm-layers-split" not in refusals_lacked(files)
    assert "block-layers-split" not in refusals_lacked(files)  # (an absent file is not judged)


# Megatron-LM before 8af3dae (2024-08): megatron/arguments.py, whose validate_args runs a layout larger than the world
# smaller (TP clamped to the world size, PP to what TP leaves of it) and asserts the world size over what is left
OLD_ARGUMENTS = '''
def validate_args(args, defaults={}):
    args.tensor_model_parallel_size = min(
        args.tensor_model_parallel_size, args.world_size)
    args.pipeline_model_parallel_size = min(
        args.pipeline_model_parallel_size,
        (args.world_size // args.tensor_model_parallel_size))
    model_parallel_size = args.pipeline_model_parallel_size * args.tensor_model_parallel_size
    assert args.world_size % (model_parallel_size * args.context_parallel_size) == 0, 'world size is not divisible'
    if args.num_layers_per_virtual_pipeline_stage is None:
        assert args.num_layers % args.pipeline_model_parallel_size == 0, \\
            'number of layers should be divisible by the pipeline parallel size'
'''


def _old_checkout(tmp_path, folder: str):
    root = _checkout(tmp_path, folder=folder)
    (root / "megatron" / "training" / "arguments.py").unlink()
    (root / "megatron" / "training" / "__init__.py").unlink()
    (root / "megatron" / "training").rmdir()
    (root / "megatron" / "arguments.py").write_text(OLD_ARGUMENTS)
    (root / "megatron" / "core" / "package_info.py").write_text("MAJOR = 0\nMINOR = 4\nPATCH = 0\n")
    return root


@pytest.mark.parametrize("folder", ["Megatron-LM-240126", "third_party/Megatron-LM"])
def test_an_old_vendored_checkout_runs_a_layout_larger_than_the_world_smaller(tmp_path, folder):
    """A Pai-Megatron-Patch fork vendors Megatron-LM of 2024-01 (megatron/arguments.py, megatron-core 0.4) and its
    upstream examples run TP8 x PP16 on one node of 8 GPUs: that checkout clamps PP to 1 and runs; OFL216 and OFL218
    had quoted 0.16's asserts. A layout the world holds is still judged (6 GPUs for TP2 x PP2)."""
    root = _old_checkout(tmp_path, folder)
    (root / "examples").mkdir()
    (root / "examples" / "big.sh").write_text(
        "torchrun --nproc_per_node 8 --nnodes 1 pretrain_gpt.py " + FLAGS.replace(
            "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --num-layers 5",
            "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 16 --num-layers 24") + "\n")
    (root / "examples" / "small.sh").write_text(f"torchrun --nproc_per_node 6 pretrain_gpt.py {FLAGS}\n")
    # (no --mcore-version: a version named for the run is every checkout's, and their own files are not read)
    options = CheckOptions(root=tmp_path, cache=False, select=["OFL216", "OFL218"])
    found = sorted((f.code, f.location.path.rsplit("/", 1)[-1]) for f in check([str(tmp_path)], options).findings)
    assert found == [("OFL216", "small.sh"), ("OFL218", "small.sh")]


def test_a_checkout_read_decides_over_a_launchs_old_options(tmp_path):
    """A launch passing `--checkpoint-activations` (only a Megatron-LM before 2023-09 runs with it) is judged by the
    checkout the tree holds where there is one: this one asserts the world size, and does not clamp."""
    root = _checkout(tmp_path)
    big = FLAGS.replace("--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --num-layers 5",
                        "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 16 --num-layers 32")
    (root / "train.sh").write_text(f"torchrun --nproc_per_node 8 pretrain_gpt.py {big} --checkpoint-activations\n")
    assert [f["code"] for f in check_json(root, "--no-cache") if f["code"] == "OFL216"] == ["OFL216"]


@pytest.mark.parametrize("clamps, named", [(True, ()), (True, ("--mcore-version", "0.20.0")), (False, ())])
def test_a_tree_older_than_megatron_core_is_judged_by_its_own_clamp(tmp_path, clamps, named):
    """Megatron-DeepSpeed forks of 2021-2022 have no megatron/core: their pretrain_gpt.py imports the tree's own
    megatron package, whose validate_args clamps a layout larger than the world (SeekPoint's `pretrain_gpt2.sh` runs
    TP2 x PP2 on 2 GPUs as TP2 x PP1; a helper's sweep, session 49), whatever megatron-core is installed or named (its
    `megatron` package shadows the installed one's). OFL216 had quoted 0.20's assert; without the clamp it stands."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "megatron").mkdir()
    arguments = OLD_ARGUMENTS if clamps else OLD_ARGUMENTS.replace("= min(", "= max(")
    (tmp_path / "megatron" / "arguments.py").write_text(arguments)
    (tmp_path / "megatron" / "training.py").write_text("def pretrain():\n    pass\n")
    (tmp_path / "pretrain_gpt.py").write_text("from megatron.training import pretrain\npretrain()\n")
    flags = FLAGS.replace("--num-layers 5", "--num-layers 4")
    (tmp_path / "train.sh").write_text(f"torchrun --nproc_per_node 2 pretrain_gpt.py {flags}\n")
    options = CheckOptions(root=tmp_path, cache=False, select=["OFL216"], mcore_version=named[-1] if named else None)
    found = [f.code for f in check([str(tmp_path)], options).findings]
    assert found == ([] if clamps else ["OFL216"])


# megatron-core's PipelineParallelLayerLayout.validate_layer_layout, in two shapes: from Megatron-LM d7bf5aaaa8
# (2025-08-26) it counts a layout's MTP layers against mtp_num_layers; before, it refused any MTP layer in a layout
# (NotImplementedError) and the model put mtp_num_layers MTP layers on the last stage whatever the layout said
LAYOUT_WITH_MTP_CHECK = '''
class PipelineParallelLayerLayout:
    def validate_layer_layout(self, num_layers, mtp_num_layers):
        assert self.flatten_layout.count(LayerType.mtp) == mtp_num_layers or (
            mtp_num_layers is None and self.flatten_layout.count(LayerType.mtp) == 0
        ), "Number of mtp layers in layout must match mtp_num_layers"
'''
LAYOUT_BEFORE_MTP_CHECK = '''
class PipelineParallelLayerLayout:
    def validate_layer_layout(self, num_layers):
        if self.flatten_layout.count(LayerType.mtp) > 0:
            raise NotImplementedError("MTP layer is not supported for flexible pipeline layout")
'''
MTP_LAUNCH = ("torchrun --nproc_per_node 2 pretrain_gpt.py --pipeline-model-parallel-size 2 --num-layers 16 "
              "--hidden-size 256 --num-attention-heads 8 --micro-batch-size 1 --global-batch-size 8 --seq-length 128 "
              "--max-position-embeddings 128 --train-iters 10 --pipeline-model-parallel-layout 'Et*3|(tt|)*6tL' "
              "--mtp-num-layers 1\n")


@pytest.mark.parametrize("layout_file, claimed", [(LAYOUT_WITH_MTP_CHECK, True), (LAYOUT_BEFORE_MTP_CHECK, False),
                                                  (None, True)], ids=["counts-them", "before-the-check", "no-file"])
def test_a_layout_without_its_mtp_layer_is_refused_only_where_the_checkout_counts_them(tmp_path, layout_file,
                                                                                      claimed):
    """A Megatron-LM functional test case of July 2025 (db41707430, megatron-core 0.14.0rc2): 16 decoder layers over
    PP2 x VPP4 and --mtp-num-layers 1, no `m` in the layout. Its checkout accepts it (the MTP layer goes to the last
    stage); OFL221 had quoted the later assert. Where the checkout's file is absent, the release's check applies."""
    root = _checkout(tmp_path)
    if layout_file is not None:
        (root / "megatron" / "core" / "transformer" / "pipeline_parallel_layer_layout.py").write_text(layout_file)
    (root / "train.sh").write_text(MTP_LAUNCH)
    found = [f["message"] for f in check_json(root, "--no-cache") if f["code"] == "OFL221"]
    assert bool(found) is claimed
    if claimed:
        assert '"Number of mtp layers in layout must match mtp_num_layers"' in found[0]


FINE_GRAINED = ARGUMENTS + '''
    if args.fine_grained_activation_offloading:
        assert args.transformer_impl == 'transformer_engine', \\
            "Fine-grained activation offloading is only supported with transformer_engine implementation"
        if is_te_min_version("2.10.0"):
            assert os.getenv("NVTE_CPU_OFFLOAD_V1", "0") == "1", \\
                "For fine-grained activation offloading with TE >= 2.10.0, NVTE_CPU_OFFLOAD_V1 should be set to 1."
'''
BEFORE_THE_ASSERT = FINE_GRAINED.split("        if is_te_min_version")[0]


@pytest.mark.parametrize("arguments, refused", [(FINE_GRAINED, True), (BEFORE_THE_ASSERT, False)])
@pytest.mark.parametrize("environment", ["", "export NVTE_CPU_OFFLOAD_V1=0\n"])
def test_the_nvte_offload_refusal_is_claimed_where_the_checkout_makes_it(tmp_path, arguments, refused, environment):
    """OFL112 on a Megatron-LM launch: a checkout of the Megatron-LM dev branch of November 2025 has fine-grained
    activation offloading but not yet validate_args' NVTE_CPU_OFFLOAD_V1 assert (upstream's came with the feature's
    merge to main, 2026-01-16; a helper's sweep, Unakar/Megatron-LM): its jobs start, and the finding says so
    instead of quoting a refusal. The finding stays: the later assert exists to keep TE >= 2.10 from offloading
    the weights too."""
    root = _checkout(tmp_path, arguments=arguments.replace(
        '    parser.add_argument("--train-iters", type=int)\n',
        '    parser.add_argument("--train-iters", type=int)\n'
        '    parser.add_argument("--fine-grained-activation-offloading", action="store_true")\n'
        '    parser.add_argument("--offload-modules", nargs="*")\n'))
    (root / "train.sh").write_text(f"{environment}torchrun --nproc_per_node 4 pretrain_gpt.py {FLAGS} "
                                   "--fine-grained-activation-offloading --offload-modules core_attn\n")
    [message] = [f["message"] for f in check_json(root, "--no-cache") if f["code"] == "OFL112"]
    assert ("refuse" in message or "asserts the same" in message) is refused
    assert ("this checkout's validate_args does not check it" in message) is not refused
