"""Whether a Megatron-LM style launch trains is read from its entry script in the tree (sources/entry_scripts.py).

Megatron-LM's text-generation servers, sample generators and quantization scripts take `--micro-batch-size` and
`--save-interval` too; on Megatron-LM d98e8a6 OFL301 called 11 of them "this training launch" (and a PTQ
quantization step of a functional test). The shapes below are our own, written the way those scripts are: a
launcher in `examples/<model>/` running `../../tools/<server>.py`, a server whose `main` builds a model with
megatron's helpers and serves it, a training script that calls `pretrain`, and one that delegates to a module of
the tree.
"""

from __future__ import annotations

import posixpath
import textwrap
from pathlib import Path

import pytest

from offlint.api import CheckOptions, check
from offlint.sources import entry_modules, entry_scripts, python_syntax

LAUNCH = """\
#!/bin/bash
export CUDA_DEVICE_MAX_CONNECTIONS=1
torchrun --nproc_per_node 1 {script} \\
    --tensor-model-parallel-size 1 \\
    --pipeline-model-parallel-size 1 \\
    --num-layers 4 --hidden-size 256 --num-attention-heads 4 \\
    --seq-length 512 --max-position-embeddings 512 \\
    --micro-batch-size 1 \\
    --bf16
"""

SERVER = """\
import sys
from megatron.training import get_args, initialize_megatron
from megatron.training.checkpointing import load_checkpoint
from megatron.core.inference.text_generation_server import run_server

from .server_args import add_server_args


def model_provider():
    return None


def main():
    initialize_megatron(extra_args_provider=add_server_args)
    model = model_provider()
    load_checkpoint(model, None, None)
    run_server(model, port=get_args().port)


if __name__ == "__main__":
    main()
"""

SERVER_ARGS = """\
def add_server_args(parser):
    parser.add_argument("--port", type=int, default=5000)
    return parser
"""

TRAINER = """\
from functools import partial
from megatron.training import pretrain


def forward_step(data_iterator, model):
    return model(data_iterator)


if __name__ == "__main__":
    pretrain(None, None, None, partial(forward_step), args_defaults={})
"""

DELEGATING = """\
from launcher.main import run

if __name__ == "__main__":
    run()
"""

DELEGATE = """\
from megatron.training import pretrain


def run():
    _start()


def _start():
    pretrain(None, None, None, None)
"""

THIRD_PARTY = """\
from some_private_package import run

if __name__ == "__main__":
    run()
"""


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'lm'\n")
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return tmp_path


def _ofl301(tree: Path) -> list[str]:
    result = check([str(tree)], CheckOptions(mcore_version="0.16.1", root=tree, select=["OFL301"], cache=False))
    assert not result.errors, result.errors
    return sorted(Path(f.location.path).name for f in result.findings)


def test_a_text_generation_server_is_not_a_training_launch(tmp_path):
    tree = _tree(tmp_path, {"examples/gpt/serve.sh": LAUNCH.format(script="../../tools/run_server.py"),
                            "tools/run_server.py": SERVER, "tools/server_args.py": SERVER_ARGS,
                            "tools/__init__.py": ""})
    assert _ofl301(tree) == []


def test_a_script_that_calls_pretrain_is_one(tmp_path):
    tree = _tree(tmp_path, {"examples/gpt/serve.sh": LAUNCH.format(script="../../tools/run_server.py"),
                            "tools/run_server.py": SERVER, "tools/server_args.py": SERVER_ARGS,
                            "examples/gpt/train.sh": LAUNCH.format(script="my_model.py"),
                            "my_model.py": TRAINER})
    assert _ofl301(tree) == ["train.sh"]


MXNET_TRAINER = """\
import argparse
import mxnet as mx
from common import fit


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--num-layers", type=int)
    args = parser.parse_args()
    fit.fit(args, mx.gpu())


if __name__ == "__main__":
    main()
"""


@pytest.mark.parametrize("helper, found", [("import mxnet as mx\n\ndef fit(args, ctx):\n    pass\n", []),
                                           ("import torch\n\ndef fit(args, ctx):\n    pass\n", ["train.sh"])])
def test_a_script_training_with_another_framework_is_no_pytorch_launch(tmp_path, helper, found):
    """MLPerf v3.1's MXNet ResNet takes `--num-layers 50 --lr ... --optimizer ...`, flags a Megatron-LM launch has
    too: PyTorch's allocator option means nothing there. A script of the tree that imports another framework and no
    torch (nor do the tree's files it imports) does not train a PyTorch job."""
    tree = _tree(tmp_path, {"train.sh": LAUNCH.format(script="train_imagenet.py"), "train_imagenet.py": MXNET_TRAINER,
                            "common/__init__.py": "", "common/fit.py": helper})
    assert _ofl301(tree) == found


CONVERTER_FROM_CHECKOUT = """\
import torch
from megatron.training import get_args
from megatron.training.initialize import initialize_megatron
from {module} import {name}


def main():
    initialize_megatron()
    model = {name}()
    torch.save(model.state_dict(), get_args().save)


if __name__ == "__main__":
    main()
"""


@pytest.mark.parametrize("module, name, trains", [
    ("pretrain_gpt", "model_provider", False), ("gpt_builders", "gpt_builder", False),
    ("pretrain_gpt", "pretrain", True),  # (a training call by its name, wherever it comes from)
    ("my_training_lib", "model_provider", None),  # (a package offlint knows nothing of: the flags decide, and
    # --train-iters is a training flag)
])
def test_a_converter_using_megatron_lm_s_own_modules_does_not_train(tmp_path, module, name, trains):
    """A helper's sweep (a MoE model zoo's DeepSeek checkpoint converters): a script run from a Megatron-LM checkout
    imports `model_provider` from its pretrain_gpt.py, which trains only when run as `__main__`; the converter
    builds the model and saves it. OFL301 had called it a training launch (its flags say so)."""
    launch = LAUNCH.format(script="hf_to_mcore.py").replace("--bf16", "--bf16 --train-iters 1")
    tree = _tree(tmp_path, {"convert.sh": launch,
                            "hf_to_mcore.py": CONVERTER_FROM_CHECKOUT.format(module=module, name=name)})
    assert entry_scripts.trains("hf_to_mcore.py", "convert.sh", lambda path, near: _text(tree, path)) is trains
    assert _ofl301(tree) == ([] if trains is False else ["convert.sh"])


def _text(tree: Path, path: str) -> str | None:
    file = tree / path
    return file.read_text() if file.is_file() else None


def test_training_reached_through_a_module_of_the_tree(tmp_path):
    """The entry script's name says nothing; the function it calls, in another module, calls pretrain."""
    tree = _tree(tmp_path, {"run.sh": LAUNCH.format(script="go.py"), "go.py": DELEGATING,
                            "launcher/__init__.py": "", "launcher/main.py": DELEGATE})
    assert _ofl301(tree) == ["run.sh"]


def test_code_outside_the_tree_leaves_it_to_the_flags(tmp_path):
    """A third-party function may train: the training flag decides, as for a script not in the tree."""
    tree = _tree(tmp_path, {"run.sh": LAUNCH.format(script="go.py"), "go.py": THIRD_PARTY,
                            "other.sh": LAUNCH.format(script="missing_script.py")})
    assert _ofl301(tree) == ["other.sh", "run.sh"]


def test_sampling_flags_mark_a_generation_command_whose_script_is_missing(tmp_path):
    """Megatron-LM's detxoify generate script is launched by a path that no longer exists; its sampling
    flags (--out-seq-length, --temperature, --top_p) say it generates text."""
    launch = LAUNCH.format(script="examples/gone/generate_samples.py").replace(
        "--bf16", "--bf16 --out-seq-length 20 --temperature 1.0 --top_p 0.9")
    # a training-only flag outweighs the sampling flags (for a script whose name does not say it generates, which
    # decides first: test_a_script_named_for_evaluation_or_conversion_whose_code_cannot_decide)
    trains_anyway = launch.replace("--bf16 ", "--bf16 --train-iters 10 ").replace("generate_samples.py", "run.py")
    tree = _tree(tmp_path, {"generate.sh": launch, "tune.sh": trains_anyway})
    # (possible only: run.py takes --top_p, an option of its own parser, and is not in the tree, so what it sets is
    # not known: linking._unread_entry_script)
    assert _ofl301_strict(tree) == [("tune.sh", True)]


def test_an_evaluation_task_whose_script_is_missing_does_not_train(tmp_path):
    """Megatron-LM's tasks/main.py scored a guess file against an answer file (`--task MSDP-EVAL-F1`, its
    evaluate.py); an example launched it after the script was deleted (PR 5410): with --micro-batch-size and no
    training-only flag, it is not a training launch."""
    launch = LAUNCH.format(script="tasks/main.py").replace(
        "--bf16", "--bf16 --task MSDP-EVAL-F1 --guess-file g.txt --answer-file a.txt")
    tree = _tree(tmp_path, {"eval.sh": launch, "tune.sh": launch.replace("--bf16 ", "--bf16 --train-iters 10 ")})
    assert _ofl301_strict(tree) == [("tune.sh", True)]  # (possible only: --task is main.py's own option)


@pytest.mark.parametrize("script", ["evaluate_sat_glm.py", "hf2megablocks_qwen1.5.py", "convert_ckpt.py",
                                    "tools/mcore2hf_llama.py", "run_eval.py", "tools/retro/preprocess_data.py"])
def test_a_script_named_for_evaluation_or_conversion_whose_code_cannot_decide(tmp_path, script):
    """Pai-Megatron-Patch evaluates GLM-130B through SwissArmyTransformer and converts Qwen1.5 through a module it
    no longer has: their code leaves the answer open, and --micro-batch-size alone made them training launches.
    A fork of Pai-Megatron-Patch (lkk12014402's) copied Megatron-LM's Retro example, whose launch runs
    tools/retro/preprocess_data.py (it builds a database and a Faiss index), without the tools folder.
    The name decides before the flags, a training-only flag included: a tool built on Megatron's argument parser
    takes every training flag, and aws-samples' Megatron-DeepSpeed job passes its common arguments (--train-iters,
    --lr) to its `hf2megads_weight_converter.py` step too, which never trains (until session 38 a training-only
    flag decided first, and that launch got OFL301). A name that starts with training still trains, and a script
    with no such word still trains on a training-only flag."""
    folder = posixpath.dirname(script)
    with_training_flag = LAUNCH.replace("--bf16", "--bf16 --train-iters 10")
    tree = _tree(tmp_path, {"a.sh": LAUNCH.format(script=script), script: THIRD_PARTY,
                            "b.sh": with_training_flag.format(script=script),
                            "c.sh": LAUNCH.format(script=posixpath.join(folder, "train_and_evaluate.py")),
                            posixpath.join(folder, "train_and_evaluate.py"): THIRD_PARTY,
                            "d.sh": with_training_flag.format(script=posixpath.join(folder, "go.py")),
                            posixpath.join(folder, "go.py"): THIRD_PARTY})
    assert _ofl301(tree) == ["c.sh", "d.sh"]


@pytest.mark.parametrize("script, expected", [("tools/run_server.py", False), ("my_model.py", True),
                                              ("go.py", None), ("absent.py", None)])
def test_trains_answers(tmp_path, script, expected):
    tree_text = _scripts(tmp_path)
    assert entry_scripts.trains(script, "launch.sh", tree_text) is expected


def _scripts(root):
    """The server, its arguments, a trainer and a third-party caller written under `root`; their tree_text."""
    files = {"tools/run_server.py": SERVER, "tools/server_args.py": SERVER_ARGS, "my_model.py": TRAINER,
             "go.py": THIRD_PARTY}
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)

    def tree_text(path: str, near: str) -> str | None:
        target = root / path
        return target.read_text() if target.is_file() else None

    return tree_text


def test_a_scripts_answer_is_worked_out_once_per_run(tmp_path, monkeypatch):
    """Launches sharing a run's memo share each entry script's answer: a second launch of a script follows none of
    its functions again (Bridge's MIMO launches each followed hundreds of functions of the same scripts)."""
    tree_text = _scripts(tmp_path)
    followed: list[tuple[str, str]] = []
    follow = entry_scripts._Reach._follow
    monkeypatch.setattr(entry_scripts._Reach, "_follow",
                        lambda self, module, name, stack: followed.append((module.path, name))
                        or follow(self, module, name, stack))
    memo: dict = {}
    assert entry_scripts.trains("tools/run_server.py", "launch.sh", tree_text, memo) is False
    assert entry_scripts.trains("my_model.py", "launch.sh", tree_text, memo) is True
    first = list(followed)
    assert ("tools/run_server.py", "main") in first
    assert entry_scripts.trains("tools/run_server.py", "other.sh", tree_text, memo) is False
    assert entry_scripts.trains("my_model.py", "other.sh", tree_text, memo) is True
    assert followed == first


def test_recursion_and_re_export_cycles_end(tmp_path):
    files = {"a.py": "from b import f\n\ndef g():\n    g()\n\nif __name__ == '__main__':\n    g()\n    f()\n",
             "b.py": "from c import f\n", "c.py": "from b import f\n"}
    for name, text in files.items():
        (tmp_path / name).write_text(text)

    def tree_text(path: str, near: str) -> str | None:
        target = tmp_path / path
        return target.read_text() if target.is_file() else None

    assert entry_scripts.trains("a.py", "run.sh", tree_text) is None  # the cycle never says where f is


CONVERTER = """\
from megatron.training import get_args, initialize_megatron
from megatron.training.checkpointing import save_checkpoint


def main():
    initialize_megatron()
    save_checkpoint(1, [get_args()], None, None, 0)


if __name__ == "__main__":
    main()
"""


@pytest.mark.parametrize("workspace", ['$(dirname "$(readlink -f "$0")")', '$(dirname "$(realpath "$0")")',
                                       '$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)', '$(dirname "$0")'])
@pytest.mark.parametrize("from_root", [True, False])
def test_a_script_named_through_the_launchers_own_folder_is_read(tmp_path, monkeypatch, workspace, from_root):
    """Megatron-LM PR 5837's checkpoint converters run `python ${WORKSPACE}/..._hf_to_mg.py` with WORKSPACE the
    launcher's folder: an absolute path once resolved, which was not looked up, so the flags alone made them
    training launches (OFL301)."""
    launch = "#!/bin/bash\nWORKSPACE=" + workspace + "\n" + LAUNCH.split("\n", 2)[2].replace(
        "torchrun --nproc_per_node 1 {script}", "python ${WORKSPACE}/hf_to_mg.py")
    tree = _tree(tmp_path, {"examples/conv/convert.sh": launch, "examples/conv/hf_to_mg.py": CONVERTER,
                            "examples/conv/train.sh": launch.replace("hf_to_mg.py", "my_model.py"),
                            "examples/conv/my_model.py": TRAINER})
    if from_root:
        monkeypatch.chdir(tree)
    assert _ofl301(tree) == ["train.sh"]


def test_a_megatron_training_entry_point_with_a_suffix_trains(tmp_path, monkeypatch):
    """Bridge's MIMO examples train through `megatron.bridge.training.pretrain_megatron_mimo` (launched as
    `"${SCRIPT_DIR}/..."`): found once the absolute path is looked up, it must still count as training (six real
    OFL301 findings on Bridge 067f987 were lost when it did not)."""
    mimo = "from megatron.bridge.training.pretrain_megatron_mimo import pretrain_megatron_mimo\n\n\n" \
           "def main():\n    pretrain_megatron_mimo(None)\n\n\nif __name__ == '__main__':\n    main()\n"
    launch = '#!/bin/bash\nSCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)\n' + LAUNCH.split("\n", 2)[2].replace(
        "{script}", '"${SCRIPT_DIR}/mimo_training.py"')
    tree = _tree(tmp_path, {"examples/mimo/run.sh": launch, "examples/mimo/mimo_training.py": mimo})
    monkeypatch.chdir(tree)
    assert _ofl301(tree) == ["run.sh"]


CONVERTOR = """\
import os
import sys

path_dir = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
sys.path.append(os.path.join(path_dir, "examples"))
from mymodel.pretrain_mymodel import model_provider
from megatron.training.initialize import initialize_megatron


def main():
    initialize_megatron()
    model = model_provider()
    save(model)


def save(model):
    pass


if __name__ == "__main__":
    main()
"""

PROVIDER = """\
from megatron.training import pretrain


def model_provider(pre_process=True, post_process=True):
    return build()


def build():
    return None


if __name__ == "__main__":
    pretrain(model_provider)
"""


def test_a_module_found_through_the_folders_the_script_adds_to_sys_path(tmp_path):
    """Pai-Megatron-Patch's checkpoint convertors (toolkits/.../hf2mcore_*.py) import their model's provider from
    `examples/` after adding it to sys.path from their own file's path; the provider builds a model and trains only
    when run as a script: the convertor does not train. Where the added folder cannot be known (the working
    directory's), the import stays open and the flags decide, as before (for a script whose name does not say
    it converts: `tool.py`)."""
    tree = _tree(tmp_path, {"toolkits/convertor/convert.sh": LAUNCH.format(script="hf2mcore.py"),
                            "toolkits/convertor/hf2mcore.py": CONVERTOR,
                            "examples/mymodel/pretrain_mymodel.py": PROVIDER,
                            "examples/mymodel/pretrain.sh": LAUNCH.format(script="pretrain_mymodel.py"),
                            "toolkits/other/convert.sh": LAUNCH.format(script="tool.py"),
                            "toolkits/other/tool.py": CONVERTOR.replace(
                                "os.path.join(path_dir, \"examples\")", "os.path.join(os.getcwd(), \"examples\")")})
    assert _ofl301(tree) == ["convert.sh", "pretrain.sh"]
    assert entry_modules.sys_path_entries("a/b/x.py", __import__("ast").parse(CONVERTOR).body) == ["examples"]
    # a folder above the tree's root is none of the tree's
    climbing = CONVERTOR.replace("os.path.dirname(os.path.dirname(os.path.dirname(",
                                 "os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(")
    climbing = climbing.replace("realpath(__file__))))", "realpath(__file__)))))")
    assert entry_modules.sys_path_entries("a/b/x.py", __import__("ast").parse(climbing).body) == []


EVALUATOR = """\
from megatron.training import get_args
from mypatch.data.evaluate_dataset import build_evaluation_dataset
from mypatch.training import get_model


def main():
    model = get_model()
    evaluate(build_evaluation_dataset(get_args()), model)


def evaluate(data, model):
    pass


if __name__ == "__main__":
    main()
"""


def test_a_module_the_trees_own_package_lacks_makes_no_training_launch(tmp_path):
    """Pai-Megatron-Patch's evaluation examples import `megatron_patch.data.evaluate_dataset`, which the tree no
    longer has: the import fails before anything runs, so the launch (`--micro-batch-size`, no training-only flag)
    does not train. Where the package itself is not in the tree, the call stays open and the flags decide (for
    a script whose name does not say it evaluates: `run_n.py`)."""
    tree = _tree(tmp_path, {"examples/m/run_evaluate.sh": LAUNCH.format(script="evaluate_m.py"),
                            "examples/m/evaluate_m.py": EVALUATOR,
                            "mypatch/__init__.py": "", "mypatch/training.py": "def get_model():\n    return None\n",
                            "mypatch/data/__init__.py": "",
                            "examples/n/run.sh": LAUNCH.format(script="run_n.py"),
                            "examples/n/run_n.py": EVALUATOR.replace("mypatch.", "otherpatch.")})
    assert [Path(f.location.path).parent.name for f in check(
        [str(tree)], CheckOptions(mcore_version="0.16.1", root=tree, select=["OFL301"], cache=False)).findings] == ["n"]


REPORTER = """\
from megatron.training import get_args
from megatron.training.initialize import initialize_megatron
from mytools.tokens import build_tokenizer

if __name__ == "__main__":
    initialize_megatron(allow_no_cuda=True, skip_mpu_initialization=True)
    build_tokenizer(get_args())
"""

TOKENS = """\
def build_tokenizer(args):
    if args.kind == "glm":
        from .glm_tokenizer import _GlmTokenizer
        return _GlmTokenizer()
    return None
"""


@pytest.mark.parametrize("module, trains", [(None, False), ("def _GlmTokenizer(:\n", None),
                                             ("from megatron.training import pretrain\n\n\n"
                                              "def _GlmTokenizer():\n    pretrain(None, None)\n", True)])
def test_a_relative_import_of_a_module_the_package_lacks_makes_no_training_launch(tmp_path, module, trains):
    """A Pai-Megatron-Patch fork's memory-report and auto-config tools build a tokenizer whose GLM branch imports
    `.icetk_glm130b_tokenizer`, a file the fork dropped: a relative import of a module its own package lacks fails
    as the absolute one does, so the call never runs and the tool (a flag set like a training run's) does not
    train. A module that is there but does not parse stays open (the flags decide); one that trains trains."""
    files = {"toolkits/report/run_report.sh": LAUNCH.format(script="report_memory.py"),
             "toolkits/report/report_memory.py": REPORTER,
             "toolkits/report/mytools/__init__.py": "", "toolkits/report/mytools/tokens.py": TOKENS}
    if module is not None:
        files["toolkits/report/mytools/glm_tokenizer.py"] = module
    tree = _tree(tmp_path, files)
    assert entry_scripts.trains("report_memory.py", "toolkits/report/run_report.sh",
                                lambda path, near: (tree / path).read_text() if (tree / path).is_file() else None) \
        is trains
    assert _ofl301(tree) == ([] if trains is False else ["run_report.sh"])


def test_an_evaluation_harness_run_is_not_a_training_launch(tmp_path):
    """lm-evaluation-harness scores a model (Pai-Megatron-Patch's lm_evaluate_megatron_qwen.py): a package known
    not to train, like torch or transformers, and not followed."""
    harness = ("from lm_eval.tasks import initialize_tasks\nfrom lm_eval.utils import make_table\n\n\n"
               "def main():\n    initialize_tasks()\n    print(make_table({}))\n\n\nmain()\n")
    tree = _tree(tmp_path, {"examples/q/run_lm_evaluate.sh": LAUNCH.format(script="lm_evaluate_q.py"),
                            "examples/q/lm_evaluate_q.py": harness})
    assert _ofl301(tree) == []


TASKS_MAIN = """\
import sys
from megatron.training import get_args, initialize_megatron

if __name__ == '__main__':
    initialize_megatron()
    args = get_args()
    if args.task == 'RACE':
        from race.finetune import main
    elif args.task in ['LAMBADA', 'WIKITEXT103']:
        from zeroshot_gpt.evaluate import main
    main()
"""
RACE_FINETUNE = "from finetune_utils import finetune\n\ndef main():\n    finetune(None, None)\n"
ZEROSHOT_EVALUATE = "def main():\n    print('scored')\n"


def test_an_entry_point_imported_on_each_branch_leaves_it_to_the_flags(tmp_path):
    """Megatron-LM's (and Megatron-DeepSpeed's) tasks/main.py imports `main` from the module its `--task` names:
    only the last import had been followed (an evaluation), so the RACE fine-tuning launch was not one. Where the
    branches disagree, the launch's flags decide (--lr: it trains; the zero-shot evaluation passes none)."""
    tuning = LAUNCH.format(script="tasks/main.py").replace("--bf16", "--bf16 --task RACE --lr 1e-5 --epochs 3")
    scoring = LAUNCH.format(script="tasks/main.py").replace("--bf16", "--bf16 --task LAMBADA")
    tree = _tree(tmp_path, {"finetune_race.sh": tuning, "eval_lambada.sh": scoring, "tasks/main.py": TASKS_MAIN,
                            "tasks/race/finetune.py": RACE_FINETUNE, "tasks/finetune_utils.py": "",
                            "tasks/zeroshot_gpt/evaluate.py": ZEROSHOT_EVALUATE})
    assert _ofl301(tree) == ["finetune_race.sh"]


def test_the_tasks_value_chooses_the_branch_before_the_flags(tmp_path):
    """NVlabs/MaskLLM's WIKITEXT2 perplexity launches run tasks/main.py with the training job's leftover --lr and
    --lr-decay-iters (OFL301 x3): the `--task` they give is a literal, and `args.task in [...]` picks the zero-shot
    evaluation, which trains nothing. A task the tests do not name, or one the launch does not give, leaves it to
    the flags as before."""
    files = {"tasks/main.py": TASKS_MAIN.replace("'WIKITEXT103']", "'WIKITEXT103', 'WIKITEXT2']"),
             "tasks/race/finetune.py": RACE_FINETUNE, "tasks/finetune_utils.py": "",
             "tasks/zeroshot_gpt/evaluate.py": ZEROSHOT_EVALUATE}
    # (`--load $CKPT` after it: an unreadable value of its flag, which gives no --task of its own)
    for name, task in (("ppl.sh", "--task WIKITEXT2 --load $CKPT"), ("ppl_eq.sh", "--task=LAMBADA"),
                       ("race.sh", "--task RACE"),
                       ("other.sh", "--task MNLI"), ("unset.sh", "--task $TASK")):
        files[name] = LAUNCH.format(script="tasks/main.py").replace("--bf16", f"--bf16 {task} --lr 1e-4")
    files["race_no_lr.sh"] = LAUNCH.format(script="tasks/main.py").replace("--bf16", "--bf16 --task RACE")
    assert _ofl301(_tree(tmp_path, files)) == ["other.sh", "race.sh", "race_no_lr.sh", "unset.sh"]


def test_an_unreadable_argument_word_leaves_the_launchs_environment_known(tmp_path):
    """`torchrun pretrain_gpt.py $EXTRA_ARGS ...` with `$EXTRA_ARGS` unknown: the word may give any flag, so a key
    the command does not set is unknown, but no argument sets an environment variable of the job (a LUMI
    workdir's three sbatch launches got no OFL301, even under --strict)."""
    launch = LAUNCH.format(script="pretrain_gpt.py").replace("--bf16", "--bf16 $EXTRA_ARGS")
    tree = _tree(tmp_path, {"run.sh": launch, "pretrain_gpt.py": TRAINER})
    result = check([str(tree)], CheckOptions(mcore_version="0.16.1", root=tree, select=["OFL301"], cache=False,
                                             strict=True))
    (finding,) = result.findings  # possible: the word may give --use-nccl-ub, which rules the advice out
    unknown = finding.message.split("depends on unknown values:", 1)[1]
    assert finding.possible and "ddp.nccl_ub" in unknown and "env." not in unknown, finding.message


@pytest.mark.parametrize("sets, expected", [
    ('os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"', []),
    ('os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")', []),
    ('torch.cuda.memory._set_allocator_settings("expandable_segments:True")', []),
    # other options the code chose: the info finding, where the code sets them
    ('os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "max_split_size_mb:128"', [("pretrain_gpt.py", 3)]),
    ('os.environ["PYTORCH_CUDA_ALLOC_CONF"] = choose()', []),  # the code's value is not known: nothing claimed
])
def test_an_entry_script_that_sets_the_allocator_options_itself(tmp_path, sets, expected):
    """The allocator reads its options when the run first allocates on the GPU: a script that sets them before
    training runs with them, whatever its launch exports (a helper's repro; ChatLearn turns expandable segments on
    in its code from a YAML switch). Without the line, the same launch is advised (the last assertion)."""
    trainer = "import os\nimport torch\n" + sets + "\n" + TRAINER
    tree = _tree(tmp_path, {"run.sh": LAUNCH.format(script="pretrain_gpt.py"), "pretrain_gpt.py": trainer})
    result = check([str(tree)], CheckOptions(mcore_version="0.16.1", root=tree, select=["OFL301"], cache=False,
                                             strict=True))
    found = [(Path(f.location.path).name, f.location.line) for f in result.findings]
    assert found == expected, found
    assert _ofl301(_tree(tmp_path, {"pretrain_gpt.py": "import os\nimport torch\n" + TRAINER})) == ["run.sh"]


def test_a_setdefault_in_the_entry_script_yields_to_what_the_launch_exports(tmp_path):
    trainer = 'import os\nos.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")\n' + TRAINER
    launch = LAUNCH.format(script="pretrain_gpt.py").replace(
        "export CUDA_DEVICE_MAX_CONNECTIONS=1", "export PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:64")
    tree = _tree(tmp_path, {"run.sh": launch, "pretrain_gpt.py": trainer})
    result = check([str(tree)], CheckOptions(mcore_version="0.16.1", root=tree, select=["OFL301"], cache=False))
    assert [Path(f.location.path).name for f in result.findings] == ["run.sh"]  # (the launch's options: info)


# ---- other accelerators' PyTorch backends --------------------------------------------------------------------
# OFL301 is advice for PyTorch's CUDA caching allocator: a launch that runs on another accelerator's PyTorch backend
# is not given it. torch_npu (Ascend NPUs) reads its allocator options from PYTORCH_NPU_ALLOC_CONF and torch_musa
# (Moore Threads GPUs) from PYTORCH_MUSA_ALLOC_CONF, neither from PYTORCH_CUDA_ALLOC_CONF: Ascend's MindSpeed-LLM got
# OFL301 on 282 launch scripts, 213 of which export PYTORCH_NPU_ALLOC_CONF=expandable_segments:True, and
# MooreThreads' MT-MegatronLM on its 9 MUSA scripts. Where the launch says so (a variable only that backend reads) or
# its entry script's code imports the backend package, the rule stands aside. Shapes of our own, written the way those
# trees write them: a launch exporting the backend's variables, an entry script that imports its training loop from a
# package of the tree whose module imports torch_npu.

NPU_TRAINING = """\
import torch
import torch_npu
from megatron.training import pretrain as megatron_pretrain


def pretrain(*args, **kwargs):
    return megatron_pretrain(*args, **kwargs)
"""

NPU_ENTRY = """\
from functools import partial
from npu_llm.training.training import pretrain


def forward_step(data_iterator, model):
    return model(data_iterator)


if __name__ == "__main__":
    pretrain(None, None, None, partial(forward_step), args_defaults={})
"""


@pytest.mark.parametrize("exports", ["export PYTORCH_NPU_ALLOC_CONF=expandable_segments:True",
                                     "export PYTORCH_MUSA_ALLOC_CONF=expandable_segments:True"])
def test_a_launch_that_configures_another_backends_allocator_is_not_given_cuda_allocator_advice(tmp_path, exports):
    launch = LAUNCH.format(script="pretrain_gpt.py").replace("export CUDA_DEVICE_MAX_CONNECTIONS=1",
                                                              f"export CUDA_DEVICE_MAX_CONNECTIONS=1\n{exports}")
    tree = _tree(tmp_path, {"run_npu.sh": launch, "run_cuda.sh": LAUNCH.format(script="pretrain_gpt.py"),
                            "pretrain_gpt.py": TRAINER})
    assert _ofl301(tree) == ["run_cuda.sh"]


def test_an_entry_script_whose_training_loop_imports_torch_npu_runs_on_npus(tmp_path):
    """MindSpeed-LLM's pretrain_gpt.py imports `pretrain` from mindspeed_llm/training/training.py, which imports
    torch_npu at its top level; 69 of its launch scripts set no NPU variable themselves."""
    files = {"examples/run.sh": LAUNCH.format(script="pretrain_gpt.py"), "pretrain_gpt.py": NPU_ENTRY,
             "npu_llm/__init__.py": "", "npu_llm/training/__init__.py": "",
             "npu_llm/training/training.py": NPU_TRAINING}
    assert _ofl301(_tree(tmp_path, files)) == []


@pytest.mark.parametrize("entry, package_init", [
    ("from npu_llm import megatron_adaptor\n", "from npu_llm.tasks import megatron_adaptor\n"),  # two imports deep
    ("from npu_llm.tasks import megatron_adaptor\n", ""),  # `from package import submodule`: the submodule's file
    # four deep (Mindspeed-AE's posttrain_gpt.py -> tasks.post_train.launcher -> sft -> sft_trainer -> training.utils)
    ("from npu_llm.launcher import Trainer\n", ""),
])
def test_a_backend_imported_by_a_module_the_package_imports_decides(tmp_path, entry, package_init):
    """MindSpeed-LLM forks' posttrain_gpt.py: `from mindspeed_llm import megatron_adaptor`; the package's __init__
    imports mindspeed_llm.tasks.megatron_adaptor, whose top level imports torch_npu (84 NPU launches of two forks
    had been given the CUDA allocator's advice)."""
    files = {"examples/tune.sh": LAUNCH.format(script="posttrain_gpt.py"),
             "posttrain_gpt.py": entry + NPU_ENTRY.replace("from npu_llm.training.training import pretrain",
                                                           "from megatron.training import pretrain"),
             "npu_llm/__init__.py": package_init, "npu_llm/tasks/__init__.py": "",
             "npu_llm/tasks/megatron_adaptor.py": "import torch\nfrom torch_npu.contrib import transfer_to_npu\n",
             "npu_llm/launcher.py": "from npu_llm.sft import SFTTrainer\n",
             "npu_llm/sft/__init__.py": "from .sft_trainer import SFTTrainer\n",
             "npu_llm/sft/sft_trainer.py": "import torch\nfrom npu_llm.tasks.megatron_adaptor import patch\n"}
    assert _ofl301(_tree(tmp_path, files)) == []
    files["npu_llm/tasks/megatron_adaptor.py"] = "import torch\n"
    assert _ofl301(_tree(tmp_path, files)) == ["tune.sh"]


@pytest.mark.parametrize("training", [
    NPU_TRAINING.replace("import torch_npu\n", ""),  # no backend package
    NPU_TRAINING.replace("import torch_npu\n", "if False:\n    import torch_npu\n"),  # not on every run
    NPU_TRAINING.replace("import torch_npu\n", "") + "\n\ndef npu():\n    import torch_npu\n",  # only if called
])
def test_an_import_that_may_not_run_does_not_decide(tmp_path, training):
    files = {"examples/run.sh": LAUNCH.format(script="pretrain_gpt.py"), "pretrain_gpt.py": NPU_ENTRY,
             "npu_llm/__init__.py": "", "npu_llm/training/__init__.py": "",
             "npu_llm/training/training.py": training}
    assert _ofl301(_tree(tmp_path, files)) == ["run.sh"]


@pytest.mark.parametrize("test, unset_is_cuda", [('os.getenv("ACCELERATOR_BACKEND", "musa") == "musa"', False),
                                                 ('os.environ.get("ACCELERATOR_BACKEND") != "cuda"', False),
                                                 ('os.getenv("ACCELERATOR_BACKEND") == "musa"', True)])
def test_a_script_choosing_its_backend_by_a_variable_is_judged_by_the_launchs_variables(tmp_path, test,
                                                                                       unset_is_cuda):
    """MT-MegatronLM's entry scripts import their MUSA patches (whose package imports torch_musa) under `if
    os.getenv("ACCELERATOR_BACKEND") == "musa"`: its *_cuda.sh scripts export ACCELERATOR_BACKEND=cuda (and are
    advised, even the one that also exports MUSA_VISIBLE_DEVICES, copied from its MUSA twin), its *_musa.sh
    scripts ACCELERATOR_BACKEND=musa (and are not). A launch that leaves the variable unset takes the default."""
    entry = f"import os\nif {test}:\n    import musa_patch\n" + TRAINER
    cuda = LAUNCH.format(script="pretrain_gpt.py").replace(
        "export CUDA_DEVICE_MAX_CONNECTIONS=1", "export MUSA_VISIBLE_DEVICES=0\nexport ACCELERATOR_BACKEND=cuda")
    musa = cuda.replace("ACCELERATOR_BACKEND=cuda", "ACCELERATOR_BACKEND=musa")
    unset = cuda.replace("export ACCELERATOR_BACKEND=cuda\n", "")
    tree = _tree(tmp_path, {"run_cuda.sh": cuda, "run_musa.sh": musa, "run_unset.sh": unset,
                            "pretrain_gpt.py": entry, "musa_patch/__init__.py": "import torch\nimport torch_musa\n"})
    assert _ofl301(tree) == (["run_cuda.sh", "run_unset.sh"] if unset_is_cuda else ["run_cuda.sh"])


TRY_HABANA = "try:\n    import habana_frameworks.torch\nexcept:\n    pass\n"


def _ofl301_strict(tree: Path) -> list[tuple[str, bool]]:
    result = check([str(tree)], CheckOptions(mcore_version="0.16.1", root=tree, select=["OFL301"], cache=False,
                                             strict=True))
    assert not result.errors, result.errors
    return sorted((Path(f.location.path).name, f.possible) for f in result.findings)


@pytest.mark.parametrize("where", ["entry", "imported"])
def test_a_backend_imported_in_a_try_block_leaves_the_accelerator_unknown(tmp_path, where):
    """HabanaAI's Megatron-LM (Intel Gaudi) starts pretrain_gpt.py with `try: import habana_frameworks.torch /
    except: pass`, and megatron/core/utils.py the same: the program runs on HPUs where the package is installed, on
    CUDA GPUs elsewhere. Its example launches got OFL301 (16, a helper's triage). Which device the launch runs on
    is unknown: no finding by default, a possible one with --strict; an import that always runs still decides."""
    entry = TRY_HABANA + TRAINER if where == "entry" else "from gaudi_utils.helpers import setup\n" + TRAINER
    files = {"run.sh": LAUNCH.format(script="pretrain_gpt.py"), "pretrain_gpt.py": entry,
             "gaudi_utils/__init__.py": "", "gaudi_utils/helpers.py": "import os\n" + TRY_HABANA}
    tree = _tree(tmp_path, files)
    assert _ofl301(tree) == []
    assert _ofl301_strict(tree) == [("run.sh", True)]
    (tmp_path / "gaudi_utils/helpers.py").write_text("import os\n" + TRY_HABANA.replace("import habana", "import os"))
    if where == "imported":  # (the try block imports something else: a CUDA launch again)
        assert _ofl301(tree) == ["run.sh"]
    (tmp_path / "gaudi_utils/helpers.py").write_text("import habana_frameworks.torch\n")
    (tmp_path / "pretrain_gpt.py").write_text(TRY_HABANA + "from gaudi_utils.helpers import setup\n" + TRAINER)
    assert _ofl301_strict(tree) == []


def test_a_launch_exporting_another_accelerator_s_runtime_variables_may_run_there(tmp_path):
    """MindSpeed's system tests (Ascend's Megatron adaptor, a helper's sweep) export HCCL_DETERMINISTIC or
    ASCEND_LAUNCH_BLOCKING and run a pretrain_gpt.py outside the tree on NPUs: OFL301's CUDA advice was a default
    finding there. Such a variable makes the device unknown (a possible finding with --strict), not decided: a script
    copied from its twin for another device may keep the export. A launch exporting none is advised as before."""
    outside = LAUNCH.format(script="/opt/Megatron-LM/pretrain_gpt.py")
    files = {"hccl.sh": outside.replace("export CUDA_DEVICE_MAX_CONNECTIONS=1", "export HCCL_DETERMINISTIC=TRUE"),
             "ascend.sh": "ASCEND_LAUNCH_BLOCKING=1 " + outside.split("\n", 2)[2],
             "branch.sh": outside.replace("export CUDA_DEVICE_MAX_CONNECTIONS=1",
                                          'if [ "$DEVICE" = npu ]; then export HCCL_CONNECT_TIMEOUT=1200; fi'),
             "cuda.sh": outside,
             "npu.sh": outside.replace("export CUDA_DEVICE_MAX_CONNECTIONS=1",
                                       "export HCCL_DETERMINISTIC=TRUE PYTORCH_NPU_ALLOC_CONF=expandable_segments:True")}
    tree = _tree(tmp_path, files)
    assert _ofl301(tree) == ["cuda.sh"]
    # (NPU allocator options still decide: no finding at all)
    assert _ofl301_strict(tree) == [("ascend.sh", True), ("branch.sh", True), ("cuda.sh", False), ("hccl.sh", True)]
    # (a possible finding names what it rests on)
    result = check([str(tree / "hccl.sh")], CheckOptions(mcore_version="0.16.1", root=tree, select=["OFL301"],
                                                         cache=False, strict=True))
    (hccl,) = result.findings
    assert "the accelerator: the launch may run on Ascend NPUs or Intel Gaudi HPUs: it sets HCCL_DETERMINISTIC" in \
        hccl.message.rsplit("(depends on unknown values: ", 1)[1]


CONVERTER_BUILDING = """\
from megatron.training import get_args
from megatron.training.initialize import initialize_megatron
from megatron.training.training import {build}


def provider(pre_process=True, post_process=True):
    raise NotImplementedError


if __name__ == "__main__":
    initialize_megatron(args_defaults={{"no_load_optim": True}})
    model = {call}
"""


@pytest.mark.parametrize("build, call, reported", [
    ("get_model", "get_model(provider, wrap_with_ddp=False)", []),
    ("setup_model_and_optimizer", "setup_model_and_optimizer(provider, None)", ["OFL116", "OFL206", "OFL302"]),
])
def test_the_optimizer_s_rules_stand_aside_where_the_entry_script_builds_no_optimizer(tmp_path, build, call,
                                                                                    reported):
    """A checkpoint converter launched with a training job's flags (AIMO3's convert_gpt_oss.sh, LoongForge's round
    trip test; a helper's sweep) got OFL302 and OFL306: what the optimizer's build and steps would do, for a run
    that builds no optimizer (Megatron-LM builds OptimizerConfig and the optimizer only in training's setup). A
    script that does build one (to load its state) is checked as before. OFL115, which validate_args asserts, stays."""
    flags = "--optimizer-cpu-offload --use-precision-aware-optimizer"  # (and no distributed optimizer)
    launch = LAUNCH.format(script="tools/convert.py").replace("--bf16", "--bf16 " + flags)
    tree = _tree(tmp_path, {"convert.sh": launch, "tools/convert.py": CONVERTER_BUILDING.format(build=build, call=call),
                            "bad.sh": launch.replace(" --use-precision-aware-optimizer", "")})
    result = check([str(tree)], CheckOptions(mcore_version="0.16.1", root=tree, cache=False))
    assert not result.errors, result.errors
    assert sorted(f.code for f in result.findings if f.location.path.endswith("convert.sh")) == reported
    assert "OFL115" in {f.code for f in result.findings if f.location.path.endswith("bad.sh")}


def test_the_accelerator_is_named_by_what_the_code_imports(tmp_path):
    files = {"pretrain_gpt.py": NPU_ENTRY, "npu_llm/__init__.py": "", "npu_llm/training/__init__.py": "",
             "npu_llm/training/training.py": NPU_TRAINING}
    root = _tree(tmp_path, files)

    def tree_text(path: str, near: str) -> str | None:
        target = Path(root) / path
        return target.read_text() if target.is_file() else None

    assert entry_scripts.accelerator("pretrain_gpt.py", "run.sh", tree_text) == \
        "Ascend NPUs: npu_llm/training/training.py:2 imports torch_npu"


DEEPSPEED_CONVERTER = """\
import deepspeed
from megatron.checkpointing import save_checkpoint
from megatron.initialize import initialize_megatron


def convert():
    engine, _, _, _ = deepspeed.initialize(model=build(), optimizer=None, config={})
    save_checkpoint(0, [engine], None, None)


initialize_megatron()
convert()
"""

DEEPSPEED_PIPELINE_TRAINER = """\
import deepspeed


def main():
    engine, _, _, _ = deepspeed.initialize(model=build(), model_parameters=params(), config={})
    for _ in range(10):
        engine.train_batch(data_iter)


main()
"""


def test_a_checkpoint_converter_through_deepspeed_is_no_training_launch(tmp_path):
    """`deepspeed.initialize` builds an engine and trains nothing (a Megatron-DeepSpeed fork's weight converter,
    called with training flags, had got OFL301); DeepSpeed's pipeline engine trains in `train_batch`."""
    with_training_flags = LAUNCH.replace("--bf16", "--bf16 --train-iters 1 --lr 1e-5")
    tree = _tree(tmp_path, {"convert.sh": with_training_flags.format(script="tools/convert.py"),
                            "tools/convert.py": DEEPSPEED_CONVERTER,
                            "train.sh": LAUNCH.format(script="train_pipe.py"),
                            "train_pipe.py": DEEPSPEED_PIPELINE_TRAINER})
    assert _ofl301(tree) == ["train.sh"]

    def tree_text(path, near):
        target = tree / path
        return target.read_text() if target.is_file() else None

    assert entry_scripts.trains("train_pipe.py", "train.sh", tree_text) is True
    assert entry_scripts.trains("tools/convert.py", "convert.sh", tree_text) is False


INDEX_MODULE = """\
import torch


class IndexFactory:
    @classmethod
    def get_index(cls, kind):
        return {"flat": FlatIndex}[kind]()


class FlatIndex:
    def train(self):
        if torch.distributed.get_rank() == 0:
            self._fit_codebooks()

    def _fit_codebooks(self):
        return None


class Learner:
    def train(self, batches):
        for batch in batches:
            batch.loss().backward()
"""


@pytest.mark.parametrize("main, expected", [
    # faiss's k-means and scikit-learn's fit train no PyTorch model
    ("import faiss\nindex = faiss.index_factory(768, 'IVF4096,PQ32')\nindex.train(embeddings)\n", False),
    ("from sklearn.cluster import KMeans\nclusters = KMeans(8)\nclusters.fit(points)\n", False),
    ("import faiss, psutil\nif psutil.virtual_memory().available > 2**30:\n    index = faiss.IndexFlatL2(8)\n"
     "    index.train(points)\n", False),  # (psutil's calls train nothing either)
    # Megatron-LM's Retro preprocessing: a factory of the tree builds the index, whose own `train` is followed
    ("from index import IndexFactory\n\ndef build():\n    index = IndexFactory.get_index('flat')\n"
     "    index.train()\n\nbuild()\n", False),
    ("from index import Learner\nlearner = Learner()\nlearner.train(batches)\n", True),
    # by the name where offlint cannot tell what the object is
    ("from index import FlatIndex\nmodel = FlatIndex()\nmodel.fit()\n", True),  # not a method it defines
    ("from transformers import Trainer\ntrainer = Trainer(model)\ntrainer.train()\n", True),
    ("from index import IndexFactory\nindex = IndexFactory.get_index('flat')\nindex = wrap(index)\nindex.train()\n",
     True),  # bound twice
    ("def main(model):\n    model.train()\n\nmain(build())\n", True),
])
def test_a_method_named_like_training_is_judged_by_what_builds_its_object(tmp_path, main, expected):
    files = {"main.py": main, "index.py": INDEX_MODULE}

    def tree_text(path: str, near: str) -> str | None:
        return files.get(path)

    assert entry_scripts.trains("main.py", "launch.sh", tree_text) is expected


GRADIENT_CHECK = """\
import torch

model = torch.nn.SyncBatchNorm(8).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
model(torch.randn(4, 8, device="cuda")).sum().backward()
optimizer.step()
"""


@pytest.mark.parametrize("script, trains", [("two_gpu_unit_test.py", False), ("test_groups.py", False),
                                            ("sync_bn_check.py", True), ("latest.py", True)])
def test_a_test_script_is_no_training_launch(tmp_path, script, trains):
    """apex's SyncBN tests (vendored by two neuronx trees and an MLPerf submission) run `python -m
    torch.distributed.launch --nproc_per_node=2 two_gpu_unit_test.py --fp16`: a backward pass and an optimizer step
    that check a kernel, named by pytest's convention (test_*.py, *_test.py); no training job to advise."""
    launch = f"python -m torch.distributed.launch --nproc_per_node=2 {script} --fp16\n"
    tree = _tree(tmp_path, {"tests/synced_batchnorm/unit_test.sh": launch,
                            f"tests/synced_batchnorm/{script}": GRADIENT_CHECK})
    assert _ofl301(tree) == (["unit_test.sh"] if trains else [])


CIFAR_MOE = """\
import argparse
import deepspeed
import torch


def add_argument():
    parser = argparse.ArgumentParser(description="CIFAR")
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--moe", action="store_true")
    parser.add_argument("--num-experts", type=int, nargs="+", default=[1])
    parser.add_argument("--top-k", type=int, default=1)
    parser = deepspeed.add_config_arguments(parser)
    return parser.parse_args()


def main(args):
    net = torch.nn.Linear(8, 8){megatron}
    engine, optimizer, _, _ = deepspeed.initialize(args=args, model=net, model_parameters=net.parameters())
    for epoch in range(args.epochs):
        loss = engine(torch.randn(2, 8)).sum()
        engine.backward(loss)
        engine.step()


if __name__ == "__main__":
    main(add_argument())
"""


@pytest.mark.parametrize("flags, megatron, reported", [
    ("--moe --num-experts 2 --top-k 1", "", []),
    # the script's text names Megatron: its flags may be Megatron's
    ("--moe --num-experts 2 --top-k 1", "\n    from megatron.core import mpu", ["run_ds_moe.sh"]),
    # a Megatron-LM flag its own parser does not declare
    ("--moe --num-experts 2 --tensor-model-parallel-size 2", "", ["run_ds_moe.sh"]),
])
def test_a_script_whose_own_parser_declares_the_flags_is_no_megatron_launch(tmp_path, flags, megatron, reported):
    """DeepSpeedExamples' CIFAR MoE launch passes `--num-experts 2`, spelt as Megatron-LM's, to a script whose own
    argparse parser declares it and that never reaches Megatron: it had been read as a Megatron-LM launch (OFL301 on
    run_ds_moe.sh and run_ds_prmoe.sh, while the same script's run_ds.sh, without the option, gave no unit; session
    44's open class NM). Every Megatron-LM option the launch passes declared by the script's own parser, in a script
    whose text never names Megatron and builds no recipe from its flags: its own command line, no unit."""
    tree = _tree(tmp_path, {"run_ds_moe.sh": f"#!/bin/bash\ndeepspeed --num_gpus=2 cifar10_deepspeed.py --deepspeed "
                                              f"{flags}\n",
                            "cifar10_deepspeed.py": CIFAR_MOE.format(megatron=megatron)})
    assert _ofl301(tree) == reported


def test_nodes_walked_again_are_the_nodes_walked_first():
    """`_nodes` keeps each statement's nodes on it (linking's questions walk an entry script's statements several
    times): a second walk gives the same nodes in the same order, a function or class body is left out as on the first
    walk, and a statement inside a compound one walked on its own gives its own nodes, not the enclosing one's."""
    import ast

    module = ast.parse(textwrap.dedent("""\
        import sys
        def helper(x):
            return x + 1
        if __name__ == "__main__":
            args = parse(sys.argv)
            for k in range(3):
                train(k, lambda y: y)
        """))

    def reference(body):  # the preorder the walk is meant to give, computed without any memo
        out = []
        for stmt in body:
            stack = [stmt]
            while stack:
                node = stack.pop()
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                    continue
                out.append(node)
                stack.extend(reversed(list(ast.iter_child_nodes(node))))
        return out

    first = list(python_syntax._nodes(module.body))
    assert first == reference(module.body)
    assert not any(isinstance(n, (ast.FunctionDef, ast.Lambda, ast.Return)) for n in first)
    assert list(python_syntax._nodes(module.body)) == first
    loop = module.body[2].body[1]
    assert list(python_syntax._nodes([loop])) == reference([loop])
    assert [n for n in python_syntax._nodes(module.body) if isinstance(n, ast.Call)] == \
        [n for n in reference(module.body) if isinstance(n, ast.Call)]


IMPORTS_EVERYWHERE = """
import os as system
try:
    from fast_lm.training import pretrain
except ImportError:
    from megatron.training import pretrain
if os.environ.get("TASK") == "eval":
    from tasks.evaluate import main
else:
    from tasks.finetune import main
with open(os.devnull) as sink:
    from tools.sink import report
match os.environ.get("MODE"):
    case "serve":
        from tools.server import serve
def lazy():
    from tools.lazy import helper
    return [x for x in (lambda: 1,)]
"""


def test_a_modules_imports_are_found_in_every_statement_that_holds_one():
    """The imports of an entry script's module, wherever a statement can stand (a handler, a `match` case, a `with`
    body, a function's own lazy import), with the `if` tests above each; expressions hold none and are not walked."""
    import ast

    module = entry_modules.ScriptModule("go.py", ast.parse(IMPORTS_EVERYWHERE))
    assert module.module_imports == {"system": "os"}
    imports = module.imports
    assert imports["pretrain"] == ("megatron.training", "pretrain")  # (the handler's, walked after the `try` body)
    assert imports["report"] == ("tools.sink", "report")
    assert imports["serve"] == ("tools.server", "serve")
    assert imports["helper"] == ("tools.lazy", "helper")
    several = module.several_imports
    assert set(several) == {"pretrain", "main"}
    assert set(several["pretrain"]) == {("fast_lm.training", "pretrain"), ("megatron.training", "pretrain")}
    (evaluate,), (finetune,) = several["main"][("tasks.evaluate", "main")], several["main"][("tasks.finetune", "main")]
    assert [taken for _, taken in evaluate] == [True] and [taken for _, taken in finetune] == [False]
