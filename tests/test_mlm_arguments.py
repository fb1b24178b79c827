"""OFL007: a Megatron-LM launch flag its entry script's parser does not have, with the parser read from the checkout
(sources/mlm_arguments.py): literal add_argument calls, BooleanOptionalAction's --no- twin, config-dataclass groups
(ArgumentGroupFactory: inherited fields, exclude, init=False, bool fields' store_true/store_false names,
argparse_meta's arg_names), the entry script's extra_args_provider (beside it, on both sides of a conditional), and
silence wherever the parser cannot be read whole. The trees are our own, in the shapes Megatron-LM writes them; the
derivation was checked against the real parser at six Megatron-LM commits (session 24)."""

from __future__ import annotations

import textwrap

import pytest

from offlint.api import CheckOptions, check
from offlint.sources.mlm_arguments import base_options, entry_options

ARGUMENTS = '''
import argparse
from dataclasses import dataclass, field

from megatron.training.argument_utils import ArgumentGroupFactory
from megatron.core.transformer.transformer_config import TransformerConfig


def add_megatron_arguments(parser):
    parser = _add_network_size_args(parser)
    parser = _add_transformer_args(parser)
    parser = _add_kitchen_args(parser)
    return parser


def _add_network_size_args(parser):
    group = parser.add_argument_group(title="network size")
    group.add_argument("--num-layers", type=int, default=None)
    group.add_argument("--hidden-size", "--model-dim", type=int)
    group.add_argument("--use-flash", action=argparse.BooleanOptionalAction)
    return parser


def _add_transformer_args(parser):
    exclude = ["hidden_dropout"]
    factory = ArgumentGroupFactory(TransformerConfig, exclude=exclude)
    factory.build_group(parser, "transformer")
    return parser


def _add_kitchen_args(parser):
    try:
        from megatron.core.extensions.kitchen import HAVE_KITCHEN
    except ImportError:
        HAVE_KITCHEN = False
    if HAVE_KITCHEN:
        parser.add_argument("--kitchen-recipe-number", type=int)
    return parser


def parse_and_validate_args(extra_args_provider=None, ignore_unknown_args=False):
    parser = argparse.ArgumentParser(allow_abbrev=False)
    parser = add_megatron_arguments(parser)
    if extra_args_provider is not None:
        parser = extra_args_provider(parser)
    return parser.parse_known_args()[0] if ignore_unknown_args else parser.parse_args()
'''

CONFIGS = '''
from dataclasses import dataclass, field
from typing import Optional


@dataclass
class ModelParallelConfig:
    tensor_model_parallel_size: int = 1
    sequence_parallel: bool = False


@dataclass
class TransformerConfig(ModelParallelConfig):
    hidden_dropout: float = 0.1
    add_bias_linear: bool = field(default=True, metadata={"argparse_meta": {"arg_names": ["--disable-bias-linear"]}})
    recompute_granularity: Optional[str] = None
    apply_rope_fusion: bool = True
    moe_layer_recompute: bool | None = field(default=False, metadata={"argparse_meta": {"default": None}})
    pipeline_dtype: object = field(init=False, default=None)
'''

PRETRAIN = '''
from megatron.training.arguments import parse_and_validate_args

try:
    from megatron.post_training.arguments import add_modelopt_args
    has_nvidia_modelopt = True
except ImportError:
    has_nvidia_modelopt = False

if __name__ == "__main__":
    args = parse_and_validate_args(extra_args_provider=add_modelopt_args if has_nvidia_modelopt else None)
'''

MODELOPT = '''
def add_modelopt_args(parser):
    group = parser.add_argument_group(title="modelopt")
    group.add_argument("--export-te-mcore-model", action="store_true")
    return parser
'''

SIBLING = '''
from multimodal_args import add_multimodal_extra_args
from megatron.training.arguments import parse_and_validate_args

args = parse_and_validate_args(add_multimodal_extra_args)
'''


def _tree(root, extra: dict[str, str] | None = None) -> None:
    files = {"pyproject.toml": "", "megatron/training/arguments.py": ARGUMENTS,
             "megatron/core/transformer/transformer_config.py": CONFIGS, "pretrain_gpt.py": PRETRAIN,
             "megatron/post_training/arguments.py": MODELOPT, "examples/multimodal/train.py": SIBLING,
             "examples/multimodal/multimodal_args.py":
                 "def add_multimodal_extra_args(parser):\n    parser.add_argument('--vision-model-type')\n"
                 "    return parser\n", **(extra or {})}
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))


def _reader_in(root):
    """path -> its text under `root`, None where there is no such file (as linking's tree reader gives)."""
    def read(path):
        try:
            return (root / path).read_text()
        except OSError:
            return None
    return read


def _options(root, entry="pretrain_gpt.py"):
    return entry_options(entry, _reader_in(root), {})


def test_the_option_strings_are_derived_as_argparse_builds_them(tmp_path):
    _tree(tmp_path)
    assert _options(tmp_path) == {
        "-h", "--help", "--num-layers", "--hidden-size", "--model-dim", "--use-flash", "--no-use-flash",
        "--tensor-model-parallel-size", "--sequence-parallel", "--disable-bias-linear", "--recompute-granularity",
        "--no-apply-rope-fusion", "--disable-apply-rope-fusion", "--moe-layer-recompute",
        "--kitchen-recipe-number", "--export-te-mcore-model"}  # (hidden_dropout excluded, pipeline_dtype init=False)


FORK_PARSE_ARGS = '''

def add_loader_arguments(parser):
    group = parser.add_argument_group(title="the fork's data loader")
    group.add_argument("--loader-server-ip", type=str)
    return parser


def parse_args(extra_args_provider=None, ignore_unknown_args=False):
    parser = argparse.ArgumentParser(allow_abbrev=False)
    parser = add_megatron_arguments(parser)
    parser = add_loader_arguments(parser)
    if extra_args_provider is not None:
        parser = extra_args_provider(parser)
    return parser.parse_args()
'''


def test_a_fork_s_own_group_added_in_parse_args_is_part_of_the_base(tmp_path):
    """pigeon23's Megatron-mixtera adds its `--mixtera-*` group in parse_args, beside add_megatron_arguments: its
    launches' flags had been OFL007 "unrecognized arguments" (4, a helper's sweep). Where parse_args hands the
    parser to code offlint cannot read, add_megatron_arguments' set stands as before."""
    _tree(tmp_path, {"megatron/training/arguments.py": ARGUMENTS + FORK_PARSE_ARGS})
    assert "--loader-server-ip" in _options(tmp_path) and "--num-layers" in _options(tmp_path)
    unreadable = FORK_PARSE_ARGS.replace("    parser = add_loader_arguments(parser)\n",
                                         "    parser = add_loader_arguments(parser)\n    plugin.extend(parser)\n")
    _tree(tmp_path, {"megatron/training/arguments.py": ARGUMENTS + unreadable})
    assert "--loader-server-ip" not in _options(tmp_path) and "--num-layers" in _options(tmp_path)


CONFIG_PRE_PARSER = '''

def _note(message):
    warnings.warn(message)


def parse_args(extra_args_provider=None, ignore_unknown_args=False):
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--config", type=str, default=None)
    known, rest = pre.parse_known_args()
    parser = argparse.ArgumentParser(allow_abbrev=False)
    parser = add_megatron_arguments(parser)
    _note("parsed")
    return parser.parse_args(rest)
'''


def test_a_helper_parse_args_calls_without_the_parser_hands_it_nothing(tmp_path):
    """A Megatron-LM fork's parse_args reads `--config` with a pre-parser of its own and calls a warning helper
    (`warn_rank_0(message)`, which calls `warnings.warn(message)`). The helper's first parameter had been taken for
    the parser, so its `warnings.warn` call handed "the parser" to code offlint cannot read: parse_args read in
    part, its `--config` dropped, and a launch's `--config spec.yaml` reported OFL007 (2, a helper's sweep). A
    helper is given the parser only where the call passes it one."""
    _tree(tmp_path, {"megatron/training/arguments.py": "import warnings\n" + ARGUMENTS + CONFIG_PRE_PARSER})
    assert "--config" in _options(tmp_path) and "--num-layers" in _options(tmp_path)
    handed = CONFIG_PRE_PARSER.replace('_note("parsed")', '_note(parser)')
    _tree(tmp_path, {"megatron/training/arguments.py": "import warnings\n" + ARGUMENTS + handed})
    assert "--config" not in _options(tmp_path) and "--num-layers" in _options(tmp_path)


def test_a_provider_beside_the_entry_script_is_read(tmp_path):
    _tree(tmp_path)
    assert "--vision-model-type" in _options(tmp_path, "examples/multimodal/train.py")


def test_each_entry_script_keeps_its_own_providers(tmp_path):
    """A checkout's reader keeps each script's extra_args_providers (asked once per launch of it): two scripts of one
    checkout asked in turn, through one memo, give each its own options, as a reader of their own does."""
    _tree(tmp_path)

    read = _reader_in(tmp_path)
    memo: dict = {}
    scripts = ["pretrain_gpt.py", "examples/multimodal/train.py"]
    for entry in [*scripts, *reversed(scripts)]:
        assert entry_options(entry, read, memo) == entry_options(entry, read, {})
    assert "--vision-model-type" in entry_options(scripts[1], read, memo)
    assert "--vision-model-type" not in entry_options(scripts[0], read, memo)
    (reader,) = [held for key, held in memo.items() if key[0] == "mlm-arguments"]
    assert set(reader.provided) == set(scripts)


@pytest.mark.parametrize("change", [
    ("pretrain_gpt.py", "extra_args_provider=add_modelopt_args if has_nvidia_modelopt else None",
     "extra_args_provider=unknown_provider"),  # a provider offlint cannot find
    ("pretrain_gpt.py", "extra_args_provider=add_modelopt_args if has_nvidia_modelopt else None",
     "ignore_unknown_args=True"),  # unknown flags are ignored, not refused
    ("pretrain_gpt.py", "extra_args_provider=add_modelopt_args if has_nvidia_modelopt else None",
     "None, True"),  # the same, by position
    ("pretrain_gpt.py", "args = parse", "import argparse\n    argparse.ArgumentParser()\n    args = parse"),
    ("megatron/training/arguments.py", 'group.add_argument("--num-layers"', 'group.add_argument(NUM_LAYERS'),
    ("megatron/training/arguments.py", "exclude=exclude", "exclude=excluded()"),
    ("megatron/training/arguments.py", "    parser = _add_kitchen_args(parser)\n",
     "    parser = _add_kitchen_args(parser)\n    add_more(parser)\n"),  # handed the parser, not the tree's
    ("megatron/core/transformer/transformer_config.py", '{"argparse_meta": {"arg_names": ["--disable-bias-linear"]}}',
     "META"),
])
def test_a_parser_offlint_cannot_read_whole_gives_no_option_set(tmp_path, change):
    _tree(tmp_path)
    path, old, new = change
    text = (tmp_path / path).read_text()
    assert old in text
    (tmp_path / path).write_text(text.replace(old, new))
    assert _options(tmp_path) is None


def test_an_unknown_flag_of_a_launch_is_reported_where_it_is(tmp_path, monkeypatch):
    _tree(tmp_path, {"run.sh": "torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 8 --recompute-granularty "
                               "full \\\n    --sequence-parallel --no-apply-rope-fusion --hidden-dropout 0.0\n"})
    monkeypatch.chdir(tmp_path)
    result = check(["run.sh"], CheckOptions(select=["OFL007"], root=tmp_path, cache=False))
    assert not result.errors
    found = [(f.location.line, f.location.col, f.message.split(":")[0]) for f in result.findings]
    assert found == [
        (1, 60, "--recompute-granularty is not an option of pretrain_gpt.py's argument parser in this checkout "
                "(did you mean --recompute-granularity?)"),
        (2, 48, "--hidden-dropout is not an option of pretrain_gpt.py's argument parser in this checkout")]
    # (argparse names every word left over in one message, each flag with the words after it: a helper's sweep,
    # session 68, found `--attn-attention unfused` quoted as `--attn-attention`)
    assert {f.message.partition("argparse stops the job with ")[2] for f in result.findings} == {
        '"unrecognized arguments: --recompute-granularty full --hidden-dropout 0.0" when it starts'}


GENERATION = """
from megatron.training.arguments import parse_and_validate_args


def add_generation_args(parser):
    group = parser.add_argument_group(title="generation")
    group.add_argument("--output-path", type=str, required=True)
    group.add_argument("-i", "--input-image-path", type=str, required=True)
    group.add_argument("--gt-path", type=str)
    return parser


args = parse_and_validate_args(extra_args_provider=add_generation_args)
"""


@pytest.mark.parametrize("more, stop", [
    ("", '"the following arguments are required: -i/--input-image-path" when it starts, before it would name the '
         'unrecognized arguments'),
    ("--input-image-path /images", '"unrecognized arguments: --input-path /in" when it starts'),
    ("$EXTRA", '"unrecognized arguments: --input-path" when it starts'),  # (it may give the option)
])
def test_a_required_option_left_out_stops_the_job_first(tmp_path, monkeypatch, more, stop):
    """Pai-Megatron-Patch's examples/multimodal/text_generation_8b.sh passes `--input-path` where
    run_text_generation.py requires `--input-image-path` (a helper's sweep, session 68): argparse reports the
    missing required option before the unknown one, and the suggestion is the option left out, not the nearer
    `--output-path` the launch gives."""
    _tree(tmp_path, {"generate.py": GENERATION,
                     "run.sh": f"torchrun --nproc-per-node 1 generate.py --num-layers 8 --output-path /out "
                               f"--input-path /in {more}\n"})
    monkeypatch.chdir(tmp_path)
    result = check(["run.sh"], CheckOptions(select=["OFL007"], root=tmp_path, cache=False))
    assert not result.errors
    assert [f.message for f in result.findings] == [
        "--input-path is not an option of generate.py's argument parser in this checkout (did you mean "
        + ("--input-image-path" if not more else "--output-path") + f"?): argparse stops the job with {stop}"]


ADAPTOR = {  # MindSpeed-LLM's shape: the package registers a patch of parse_args, applied at import
    "npu_llm/__init__.py": "from npu_llm.tasks import megatron_adaptor\n",
    "npu_llm/tasks/__init__.py": "",
    "npu_llm/tasks/megatron_adaptor.py": "from npu_llm.training.arguments import parse_args_decorator\n"
                                         "PATCHES = {'megatron.training.arguments.parse_args': parse_args_decorator}\n",
    "npu_llm/training/arguments.py": "def parse_args_decorator(fn):\n    return fn\n",
}


@pytest.mark.parametrize("adaptor", [ADAPTOR, {
    "npu_llm/__init__.py": "from megatron.training import arguments as _arguments\n\n\ndef _parse_args(*a, **k):\n"
                           "    return None\n\n\n_arguments.parse_args = _parse_args\n"}])
def test_no_finding_where_a_module_the_entry_imports_replaces_the_parser(tmp_path, monkeypatch, adaptor):
    """MindSpeed-LLM forks' inference.py imports `mindspeed_llm`, whose megatron_adaptor replaces
    megatron.training.arguments.parse_args with a decorator adding some 300 options: 2,961 OFL007 on them."""
    entry = "import npu_llm  # noqa: F401\n" + PRETRAIN
    _tree(tmp_path, {"inference.py": entry, **adaptor,
                     "run.sh": "torchrun inference.py --num-layers 8 --tokenizer-name-or-path /tok\n"})
    monkeypatch.chdir(tmp_path)
    result = check(["run.sh"], CheckOptions(select=["OFL007"], root=tmp_path, cache=False))
    assert not result.errors and result.findings == []
    (tmp_path / "npu_llm" / "__init__.py").write_text("")  # (the package alone patches nothing)
    result = check(["run.sh"], CheckOptions(select=["OFL007"], root=tmp_path, cache=False))
    assert [f.message.split(" is ")[0] for f in result.findings] == ["--tokenizer-name-or-path"]


def test_a_flag_one_alternative_of_an_undecided_branch_gives_is_reported_on_that_path(tmp_path, monkeypatch):
    """A flag only the user's choice of an option appends (a Megatron-LM fork's DeepSeek-V3 launcher adds
    `--optimizer-offload` under its `--offload-optim`, parsed with getopt) stops the job on that path only: a
    warning naming it, as for the other rules on such paths (clarifications: a path only user input reaches is at
    most a warning that names the flags); on every path, an error as before."""
    _tree(tmp_path, {"run.sh": 'OPT=false\nwhile true; do case "$1" in\n  --offload-optim) OPT=true; shift ;;\n'
                               '  *) break ;;\nesac; done\nARGS=()\nif [ "$OPT" = true ]; then\n'
                               '    ARGS+=(--optimizer-offload)\nfi\n'
                               'torchrun pretrain_gpt.py --num-layers 8 --recompute-granularty full "${ARGS[@]}"\n'})
    monkeypatch.chdir(tmp_path)
    found = check(["run.sh"], CheckOptions(select=["OFL007"], root=tmp_path, cache=False)).findings
    assert [(f.location.line, f.severity.value, f.message.split(":")[0].split(" is not")[0]) for f in found] == [
        (8, "warning", "--optimizer-offload"), (10, "error", "--recompute-granularty")]
    assert found[0].message.endswith("\n(on the path where the script gives --optimizer-offload (inside if at line "
                                     "7))\n(only with the user's choice of --optimizer-offload)")


def test_no_finding_without_the_entry_script_or_its_parser_in_the_tree(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "run.sh").write_text("torchrun pretrain_gpt.py --recompute-granularty full\n")
    monkeypatch.chdir(tmp_path)
    assert not check(["run.sh"], CheckOptions(select=["OFL007"], root=tmp_path, cache=False)).findings
    (tmp_path / "pretrain_gpt.py").write_text(PRETRAIN)  # the script, but no megatron/training/arguments.py
    assert not check(["run.sh"], CheckOptions(select=["OFL007"], root=tmp_path, cache=False)).findings


def test_a_provider_read_in_part_is_never_taken_for_one_read_whole(tmp_path):
    """One run's entry scripts share what was read (the memo): a provider whose reading failed gives no option set
    for the next script that uses it either, not the options read before the failure."""
    _tree(tmp_path, {"megatron/post_training/arguments.py": MODELOPT.replace(
        "    return parser", "    add_more_args(parser)\n    return parser"),
        "pretrain_hybrid.py": PRETRAIN})

    read = _reader_in(tmp_path)
    memo: dict = {}
    assert entry_options("pretrain_gpt.py", read, memo) is None
    assert entry_options("pretrain_hybrid.py", read, memo) is None


def test_a_pretrain_of_the_trees_own_parses_with_another_parser(tmp_path):
    """fwyc0573's pretrain_llama_scheduling.py calls `pretrain` from its own mg_scheduling.training, whose
    initialize_megatron parses with mg_scheduling/arguments.py (it has --world-size): a false OFL007 had said its
    launch's --world-size is not an option. Megatron-LM's own pretrain keeps the option set."""
    _tree(tmp_path, {"pretrain_own.py": "from scheduling.training import pretrain\n\npretrain(None, None)\n",
                     "pretrain_local.py": "def pretrain(*args):\n    pass\n\npretrain(None)\n",
                     "pretrain_core.py": "from megatron.training import pretrain\n\npretrain(None, None)\n"})
    assert _options(tmp_path, "pretrain_own.py") is None
    assert _options(tmp_path, "pretrain_local.py") is None
    assert "--num-layers" in _options(tmp_path, "pretrain_core.py")


OLD_ARGUMENTS = '''
import argparse
import os

import torch


def parse_args(extra_args_provider=None, ignore_unknown_args=False):
    """Parse all arguments."""
    parser = argparse.ArgumentParser(description='Megatron-LM Arguments', allow_abbrev=False)
    parser = _add_network_size_args(parser)
    parser = _add_data_args(parser)
    if extra_args_provider is not None:
        parser = extra_args_provider(parser)
    if ignore_unknown_args:
        args, _ = parser.parse_known_args()
    else:
        args = parser.parse_args()
    args.rank = int(os.getenv('RANK', '0'))
    return args


def _add_network_size_args(parser):
    group = parser.add_argument_group(title='network size')
    group.add_argument('--num-layers', type=int, default=None)
    group.add_argument('--norm-epsilon', type=float, default=1e-5)
    return parser


def _add_data_args(parser):
    group = parser.add_argument_group(title='data and dataloader')
    group.add_argument('--data-path', nargs='*', default=None)
    group.add_argument('--mmap-warmup', action='store_true')
    return parser
'''
OLD_TRAINING = '''
from megatron.initialize import initialize_megatron


def pretrain(train_valid_test_dataset_provider, model_provider, model_type, forward_step_func,
             process_non_loss_data_func=None, extra_args_provider=None, args_defaults={}):
    initialize_megatron(extra_args_provider=extra_args_provider, args_defaults=args_defaults)
'''
OLD_PRETRAIN = '''
from megatron.training import pretrain


def add_task_args(parser):
    group = parser.add_argument_group(title='task')
    group.add_argument('--task', type=str)
    return parser


if __name__ == "__main__":
    pretrain(None, None, None, None, extra_args_provider=add_task_args,
             args_defaults={'tokenizer_type': 'GPT2BPETokenizer'})
'''
OLD_LAUNCH = ("torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 24 --norm-epsilon 1e-5 --task x \\\n"
              "    --data-path /data/x --data-impl mmap --layernorm-epsilon 1e-5\n")


def _old_tree(root, arguments: str = OLD_ARGUMENTS, extra: dict[str, str] | None = None) -> None:
    files = {"pyproject.toml": "", "megatron/arguments.py": arguments, "megatron/training.py": OLD_TRAINING,
             "megatron/initialize.py": "def initialize_megatron(extra_args_provider=None, args_defaults={}):\n"
                                       "    pass\n",
             "pretrain_gpt.py": OLD_PRETRAIN, "run.sh": OLD_LAUNCH, **(extra or {})}
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))


def test_a_checkout_from_before_megatron_training_is_read_from_megatron_arguments(tmp_path, monkeypatch):
    """Megatron-LM kept its parser in megatron/arguments.py until March 2024: `parse_args` adds the `_add_*_args`
    groups itself. A launch of such a checkout passing a flag its parser lacks stops at argparse as any other
    (lvcc2018's Megatron-LM of October 2023: seven pretrain scripts pass `--data-impl mmap`, gone from its parser)."""
    _old_tree(tmp_path)
    assert _options(tmp_path) == {"-h", "--help", "--num-layers", "--norm-epsilon", "--data-path", "--mmap-warmup",
                                  "--task"}
    monkeypatch.chdir(tmp_path)
    result = check(["run.sh"], CheckOptions(select=["OFL007"], root=tmp_path, cache=False))
    assert not result.errors
    assert [(f.location.line, f.message.split(":")[0]) for f in result.findings] == [
        (2, "--data-impl is not an option of pretrain_gpt.py's argument parser in this checkout"),
        (2, "--layernorm-epsilon is not an option of pretrain_gpt.py's argument parser in this checkout "
            "(did you mean --norm-epsilon?)")]


def test_megatron_deepspeeds_parser_is_not_the_trees_to_read(tmp_path):
    """Megatron-DeepSpeed's parse_args hands the parser to `deepspeed.add_config_arguments` (--deepspeed,
    --deepspeed_config, ...), code outside the tree: no option set, so no finding."""
    _old_tree(tmp_path, OLD_ARGUMENTS.replace(
        "    parser = _add_data_args(parser)\n",
        "    parser = _add_data_args(parser)\n    parser = deepspeed.add_config_arguments(parser)\n").replace(
        "import torch\n", "import torch\nimport deepspeed\n"))
    assert _options(tmp_path) is None


def test_the_newer_layout_is_read_where_a_checkout_has_both(tmp_path):
    _old_tree(tmp_path, extra={"megatron/training/arguments.py": ARGUMENTS,
                               "megatron/core/transformer/transformer_config.py": CONFIGS})
    options = _options(tmp_path)
    assert "--hidden-size" in options and "--norm-epsilon" not in options  # (megatron/training/arguments.py's)


def test_an_older_checkouts_flags_are_no_forks_own(tmp_path):
    """base_options (Unit.checkout_flags, which OFL216 takes for a fork's own flags where no release has them) reads
    the newer layout only: every flag of an older checkout is older than the releases offlint knows."""
    _old_tree(tmp_path)

    read = _reader_in(tmp_path)
    assert base_options("pretrain_gpt.py", read, {}) is None
