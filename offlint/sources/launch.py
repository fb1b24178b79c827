"""Launch commands: one argv (from a shell script or a YAML card) becomes one unit.

A command that runs a Bridge entry point (`run_recipe.py`, `train.sh`, ...) or carries Hydra overrides is a
Hydra unit: its base is the named recipe (linked later by `api` when the recipe is in the linted tree), then
`--config-file` YAML, then the overrides. A command that runs `pretrain_*.py` or carries Megatron-LM flags is
a Megatron-LM unit, whose unset keys take argparse defaults. The launch environment is the last layer
(a shell value beats `cfg.env_vars`).

Beside it: launch_words (the words: Arg, EnvArg), launch_env (the environment a launcher's own words give the ranks),
launch_torch (which PyTorch the launch runs).
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import replace

from offlint import keys
from offlint.sources import entry_scripts, hydra, mlm_flags, perf_env, perf_flags, perf_scripts, python_roles
from offlint.sources.launch_env import (deepspeed_ranks_environment, launcher_environment, layout_needs_several_nodes,
                                        opened, opened_because, ray_job, srun_environment)
from offlint.sources.launch_torch import conda_interpreter, container_image, old_interpreter
from offlint.sources.launch_words import Arg, EnvArg, program
from offlint.types import (BELOW, KEY_DEFAULT, Assignment, Defaults, InputError, Layer, Location, OneOf, Source, Unit,
                           UnitKind, Unknown)

# Megatron Bridge entry points: each runs a recipe (named by --recipe or the perf scripts' own flags).
HYDRA_ENTRY_POINTS = ("run_recipe.py", "train.sh", "setup_experiment.py", "run_script.py", "bootstrap.py")
# Megatron Bridge's scripts' YAML override option; argparse takes no other spelling of it (`--config_file` is another
# program's: an HLLM recommender's `run.py --config_file a.yaml b.yaml` had been read as a Bridge recipe's override)
_CONFIG_FILE_FLAGS = ("--config-file",)
# Commands that run their arguments: a launch line starts with one of these, python*, or the script itself.
# (ft_launcher: nvidia-resiliency-ext's fault-tolerant torchrun, with torchrun's options and its own --ft-*)
LAUNCHERS = ("torchrun", "ft_launcher", "uv", "uvx", "srun", "mpirun", "deepspeed", "accelerate", "env", "exec",
             "nohup", "time", "numactl", "nsys", "timeout", "stdbuf", "taskset", "ray", "sudo", "singularity",
             "apptainer", "nice", "jsrun")  # (`nice -10 python ...`: an option of its own before the command)
# (jsrun: IBM LSF's launcher, Summit's; `jsrun --nrs 12 --tasks_per_rs 1 python pretrain_gpt.py ...`)
# Commands that print or inspect their words rather than run them: a launcher named after one is no launch. Any
# other first word before a launcher (`numarun torchrun ...`, a cluster's own wrapper; `$WRAPPER python ...`) is
# taken to run the rest (_script_index).
_NOT_RUNNERS = frozenset(("echo", "printf", "print", "which", "type", "hash", "help", "man", "whatis", "whereis",
                          "command", "cat", "grep", "egrep", "fgrep", "rg", "pgrep", "pkill", "killall", "kill", "ps",
                          "ls", "rm", "cp", "mv", "ln", "tee", "logger", "sed", "awk", "head", "tail", "wc", "sort",
                          "find", "git", "scp", "rsync", "test", "[", "[[", "alias", "declare", "local", "export",
                          "readonly", "unset", "set", "source", ".", "read", "let", "eval"))


class CommandProblem(InputError):
    """An override the launch tool itself will refuse (Hydra syntax error): the file's own fault, reported as its
    one-line error, not as offlint's (source_files.read_files)."""


def command_unit(argv: list[Arg], env: dict[str, EnvArg], location: Location, env_known: bool,
                 needs_arguments: bool = False, project=None, inside: str = "", env_open: str = "",
                 image: str = "", default_hostfiles: frozenset[str] = frozenset()) -> Unit | None:
    """Return the unit for a training launch command, or None when the command is not one.

    `needs_arguments`: only a script run with arguments counts (YAML strings also hold prose and file lists).
    `project` (a PythonProject): the tree's Python files, where the performance scripts' own code gives their
    flags a meaning and names the recipe a launch builds (perf_scripts). `inside`: the undecided branch the
    command itself is in (shell_values.Command.inside; its own words carry that mark). `env_open`: why its
    environment may hold more than its script shows (Command.env_open): the variables it does not set are unknown.
    `image`: the PyTorch container image an enclosing command runs it in (Command.image), else its own launcher's.
    `default_hostfiles`: the launchers whose default hostfile the script addresses the hosts of (default_hostfiles).
    """
    argv = _module_as_script(argv)
    values = [a.value for a in argv]
    if not runs_script(values, needs_arguments):
        return None
    script_index = _script_index(values, wrapped=not needs_arguments)
    if _other_framework_launcher(values[:script_index]):
        return None
    environment = srun_environment([a.value for a in argv[:script_index]], [a.text for a in argv[:script_index]])
    image = image or container_image(values[:script_index])
    old = old_interpreter(values[:script_index]) or conda_interpreter(values[:script_index], env)
    ray, ray_env = ray_job(argv[:script_index])
    given, withheld = launcher_environment(argv[:script_index], "mpirun" in default_hostfiles)
    env = {**env, **given}
    ranks, env = deepspeed_ranks_environment(argv[:script_index], env, "deepspeed" in default_hostfiles,
                                             layout_needs_several_nodes(argv[script_index + 1:]))
    ranks = ranks or withheld
    env_open = env_open or (opened_because(environment or ray or ranks) if environment or ray or ranks else "")
    env = {**env, **ray_env}
    script = program(values[script_index])
    rest = argv[script_index + 1:]
    name = f"{script} at line {location.line}"
    if script.startswith("pretrain_") or _megatron_lm_flags(rest):
        if not any(a.value and hydra.looks_like_override(a.value) for a in rest):
            unit = mlm_unit(name, rest, env, location, trains_by_flags(script, rest), inside)
            unit.expanded_at = _expanded_at(rest)
            unit.entry_script = values[script_index] or ""
            unit.script_args = tuple((a.value, a.location, a.flags) for a in rest)
            unit.launch_gpus = launcher_world_size(argv[:script_index])
            return _runs_in(opened(unit, env_open), image, old)
    if script in HYDRA_ENTRY_POINTS or any(a.value and hydra.looks_like_override(a.value) for a in rest):
        hydra_syntax, own_config = _hydra_reading(project, location.path, values[script_index] or "", script, rest)
        unit = _hydra_unit(name, script, rest, env, location, env_known,
                           _perf_launch(project, location, values[script_index], script, rest), inside,
                           hydra_syntax, own_config)
        unit.expanded_at = _expanded_at(rest)
        if script in perf_env.LAUNCHERS:
            unit.launch_args = (values[script_index], *(a.value for a in rest))
        elif not unit.launch_gpus:  # (a performance launch's is its -ng)
            unit.launch_gpus = launcher_world_size(argv[:script_index])
        if unit.recipe:
            unit.recipe_loader = values[script_index] or ""
        if script not in HYDRA_ENTRY_POINTS and script not in perf_flags.PERF_SCRIPTS:
            # a script of the tree's own taking `key=value` arguments (NeMo RL's `run_grpo.py --config ... k=v`):
            # whether it trains in Ray's workers is read from its code when linking (entry_scripts.ray_driver)
            unit.entry_script = values[script_index] or ""
        return _runs_in(opened(unit, env_open), image, old)
    if script.endswith(".py") and any(a.value in _CONFIG_FILE_FLAGS or (a.value or "").startswith("--config-file=")
                                      for a in rest):
        # A project's own Bridge entry script given a YAML override (geodesic-megatron's `pipeline_training_run.py
        # --config-file "$CONFIG_FILE" --model nano`): the recipe it builds is its own choice, so neither the model
        # nor the environment is known; whether it trains is read from the script when linking (entry_scripts).
        unit = _hydra_unit(name, script, rest, env, location, env_known=False, context=inside)
        unit.launches_training = False
        unit.entry_script = values[script_index] or ""
        return _runs_in(opened(unit, env_open), image, old)
    return None


def _expanded_at(args: list[Arg]) -> tuple[Location, ...]:
    """Where the words an unquoted expansion splits into stand (Unit.expanded_at): a word whose flag or key its text
    at that place does not spell (`--transformer-impl` at `$MODEL_ARGS`)."""
    return tuple(dict.fromkeys(a.location for a in args if a.value and a.text
                               and a.value.split("=", 1)[0] not in a.text))


def _runs_in(unit: Unit, image: str, old_torch: str) -> Unit:
    """The launch unit with what it runs on: its container image, and why its PyTorch is 1.x (its interpreter)."""
    unit.container_image, unit.old_torch = image, old_torch
    return unit


# The sections a Megatron-LM launch gives every setting of: its argparse parser has a default for each flag it leaves
# out (the training and evaluation batch flags OFL217 reads among them), and the environment is the script's.
MLM_SECTIONS = frozenset({"model", "optimizer", "ddp", "train", "validation", "env"})
# torchrun's (and torch.distributed.launch's, ft_launcher's) options for the processes it starts
_NPROC = ("--nproc-per-node", "--nproc_per_node")
_NNODES = ("--nnodes",)
_DISTRIBUTED_MODULES = ("torch.distributed.run", "torch.distributed.launch")


def launcher_world_size(words: list[Arg]) -> int:
    """The processes a torchrun-style launcher starts, `--nproc-per-node N` times `--nnodes M` (1 when it gives none),
    from the words before the script; 0 where they do not say: no such launcher, no stated count (torchrun's
    default of one process is rarely what a script means), a count that is not a number (`gpu`, `$GPUS`), an
    elastic range of nodes (`--nnodes 1:4`), a count the environment chooses (`--nnodes ${SLURM_NNODES:-1}`, PAI's
    `${WORLD_SIZE:-1}`), or a word offlint cannot read that may hold either option (`$DIST_ARGS`; not the value
    of `--master_addr $MASTER_ADDR`)."""
    launcher = next((i for i, word in enumerate(words)
                     if program(word.value) in ("torchrun", "ft_launcher") or word.value in _DISTRIBUTED_MODULES),
                    None)
    if launcher is None:
        return 0
    found: dict[str, str] = {}
    i = launcher + 1
    while i < len(words):
        word = words[i].value
        name = (word if word is not None else words[i].text).partition("=")[0]
        if name in _NPROC + _NNODES:
            if word is None or "=" in word:  # `--nnodes=2` (or a word offlint cannot read)
                given, value = words[i], word.partition("=")[2] if word is not None else None
            elif i + 1 < len(words):  # `--nnodes 2`: the next word
                i += 1
                given, value = words[i], words[i].value
            else:
                return 0
            if value is None or given.assumed:
                return 0
            found["nproc" if name in _NPROC else "nnodes"] = value
        elif word is None and not name.lstrip("\"'").startswith("--"):
            return 0  # a variable's words
        elif word is not None and word.startswith("--") and "=" not in word and i + 1 < len(words) \
                and words[i + 1].value is None and not words[i + 1].text.lstrip("\"'").startswith("-"):
            i += 1  # an option's value offlint cannot read (`--master_addr $MASTER_ADDR`)
        i += 1
    nproc, nnodes = found.get("nproc", ""), found.get("nnodes", "1")
    return int(nproc) * int(nnodes) if nproc.isdigit() and nnodes.isdigit() and int(nproc) > 0 else 0


def flags_accelerator(words) -> str:
    """The accelerator other than a CUDA GPU a Megatron-LM style command's own flags choose (`words`: its words
    after the script, Unit.script_args), as "Intel Gaudi HPUs: the launch passes --use_hpu"; "" where none does.
    Habana's Megatron-DeepSpeed takes `--use_hpu`; HCCL, Habana's and Ascend's collective library, is a
    `--distributed-backend` only their PyTorch builds have (MLPerf v3.1's Gaudi Llama launches, code outside the tree,
    had been given OFL301). MCCL is Moore Threads' (torch_musa), and FlagScale's `--device-type mthreads` names their
    GPUs (FlagPerf's Aquila2 launches on them had been given OFL301: torch_musa reads PYTORCH_MUSA_ALLOC_CONF)."""
    switch = next((value for value, *_ in words if value in ("--use_hpu", "--use-hpu")), None)
    if switch is not None:
        return f"Intel Gaudi HPUs: the launch passes {switch}"
    backend = last_value(words, "--distributed-backend")  # (argparse keeps the last)
    if backend == "hccl":
        return "Intel Gaudi HPUs or Ascend NPUs: the launch passes --distributed-backend hccl"
    if backend == "mccl" or last_value(words, "--device-type") == "mthreads":
        shown = "--distributed-backend mccl" if backend == "mccl" else "--device-type mthreads"
        return f"Moore Threads GPUs (MUSA): the launch passes {shown}"
    return ""


def takes_no_iteration(words) -> bool:
    """Whether a Megatron-LM style command's own flags (`words`: its words after the script, Unit.script_args) leave
    it no training iteration: `--train-iters 0` last, and `--train-samples` not given or 0. pretrain trains only
    `if args.do_train and args.train_iters > 0`, and update_train_iters counts iterations from samples only where
    train_iters is 0 (with neither, the learning-rate scheduler raises 'either train-iters or train-samples should
    be provided.'): a Megatron-DeepSpeed fork's loss evaluations pass `--train-iters 0 --eval-iters 4`. A word
    offlint cannot read that may give either flag leaves it open (False)."""
    return _count(last_value(words, "--train-iters")) == 0 and _count(last_value(words, "--train-samples")) in (None, 0)


def _count(value: str | None | Unknown) -> int | None | Unknown:
    """A count flag's value as argparse's `type=int` gives it: None where the flag is not given, Unknown where its
    value is unknown or no plain integer."""
    if value is None or isinstance(value, Unknown):
        return value
    return int(value) if value.isdigit() else Unknown(f"{value!r} is no plain integer")


def last_value(words, flag: str) -> str | None | Unknown:
    """The text the last `flag` among a command's `words` (Unit.script_args) gives it (None where none does; Unknown
    where its value cannot be read, or a word that may give the flag is unreadable)."""
    opaque: list[int] = []  # the unreadable words that are no flag's value (`--load ${LOAD}`'s is one), as mlm_unit
    mlm_flags.read_flags([word for word, *_ in words], opaque)  # reads them for Unit.opaque_words
    value: str | None | Unknown = None
    for i, (word, _, flags) in enumerate(words):
        if word is None:
            if i in opaque and (flags is None or flag in flags):
                value = Unknown(f"a word of the launch offlint cannot read may give {flag}")
            continue
        name, equals, inline = word.partition("=")
        if name != flag:
            continue
        text = inline if equals else words[i + 1][0] if i + 1 < len(words) else None
        value = text if text is not None else Unknown(f"{flag}'s value cannot be read")
    return value


# Megatron-LM flags other trainers spell the same way (Hugging Face's TrainingArguments' `--bf16`, and the CLIs built
# on it: LLaMA-Factory, ROLL's mcore_adapter, ms-swift; MLPerf's PyTorch references' `--optimizer sgd`; a ResNet's
# `--num-layers 50`): alone, beside underscore options, they do not make a Megatron-LM launch.
_SHARED_WITH_OTHERS = frozenset({"--bf16", "--fp16", "--optimizer", "--num-layers", "--hidden-size", "--seq-length"})
_UNDERSCORE_OPTION = re.compile(r"--[a-z0-9]+(?:_[a-z0-9]+)+(?:=|$)")


def _megatron_lm_flags(args: list[Arg]) -> bool:
    """Whether a command's arguments are Megatron-LM's: some flag its parser has, other than one other trainers share
    (`--bf16`, `--optimizer`: _SHARED_WITH_OTHERS) beside underscore options (`--do_train
    --per_device_train_batch_size=1`: ROLL's mcore_adapter examples, read as a Megatron-LM launch of argparse
    defaults; MLPerf's RNN-T reference, `--optimizer sgd --batch_size 2`). Megatron-LM spells its options with dashes
    (2 of its 876 have an underscore, after a dash)."""
    found = {a.value.split("=", 1)[0] for a in args if a.value and mlm_flags.is_mlm_flag(a.value)}
    if not found:
        return False
    if found - _SHARED_WITH_OTHERS:
        return True
    return not any(a.value and _UNDERSCORE_OPTION.match(a.value) for a in args)


def env_string(key: str, value: object) -> object:
    """Bridge applies env_vars with str(): an override `+env_vars.X=1` is the string '1'."""
    if key.startswith("env.") and not isinstance(value, (str, Unknown)) and value is not None:
        return str(value)
    return value


def _other_framework_launcher(launcher: list[str | None]) -> bool:
    """Whether the script is started by another framework's launcher module (`python3 -m oneflow.distributed.launch`,
    `-m paddle.distributed.launch`): its ranks run that framework, not PyTorch (OneFlow's LiBai launches had been
    possible OFL301 findings; a helper's sweep, session 47)."""
    return any(word == "-m" and (after or "").split(".")[0] in python_roles.OTHER_FRAMEWORKS
               for word, after in zip(launcher, launcher[1:]))


def _module_as_script(argv: list[Arg]) -> list[Arg]:
    """`python -m scripts.performance.setup_experiment ...` as `python scripts/performance/setup_experiment.py ...`
    when the module is a Bridge entry point (Bridge PR 4824's launch script runs the launcher so); any other module
    (`-m torch.distributed.run`) is left as written, its script comes later."""
    index = _entry_module(argv and [a.value for a in argv])
    if index is None:
        return argv
    module = argv[index + 1]
    path = _module_path(module.value)
    return [*argv[:index], Arg(path, module.location, path), *argv[index + 2:]]


def _entry_module(values: list[str | None]) -> int | None:
    """The index of `-m` where a python command runs a Bridge entry point as a module."""
    if not values or not program(values[0]).startswith("python"):
        return None
    for i, value in enumerate(values[1:3], 1):  # (an interpreter flag or two before it: `-u -m ...`)
        if value == "-m" and i + 1 < len(values):
            module = values[i + 1] or ""
            return i if posixpath.basename(_module_path(module)) in HYDRA_ENTRY_POINTS else None
    return None


def _module_path(module: str) -> str:
    return module.replace(".", "/") + ".py"


def runs_script(values: list[str | None], needs_arguments: bool = False) -> bool:
    """Whether a command of these argument values can be a launch: False where command_unit gives None at once
    (a reader asks first, and builds the command's Args only for the one command in eight that can)."""
    index = _entry_module(values)
    if index is not None:
        values = [*values[:index], _module_path(values[index + 1] or ""), *values[index + 2:]]
    script_index = _script_index(values, wrapped=not needs_arguments)
    return script_index is not None and not (needs_arguments and script_index == len(values) - 1)


def _script_index(values: list[str | None], wrapped: bool = True) -> int | None:
    """The index of the training script, when the command runs one (not `echo ... run_recipe.py`): its first word
    starts a launch, or (`wrapped`: not in a YAML string, which may be prose) a word that runs its arguments
    (_NOT_RUNNERS) comes before one."""
    if not values or not (_starts_launch(values[0]) or wrapped and len(values) > 1 and _starts_launch(values[1])
                          and _may_run_its_arguments(values[0])):
        return None
    if len(values) == 2 and values[0] is not None and not _starts_launch(values[0]) \
            and program(values[1]).endswith(".py"):
        return None  # (`touch X.py`, `md5sum X.py`, a stage-in tool handle one file; a wrapper runs a launch)
    if "-m" in values[1:3] and _checks_its_argument(values):
        return None
    for i, value in enumerate(values):
        if value is None or "=" in value:  # (`data.custom_cls.path=recipe/rl_dataset.py`: an override, no script)
            continue
        base = program(value)
        if base.endswith(".py") or base in HYDRA_ENTRY_POINTS:
            return i
    return None


# Python modules that read the files they are given and run none of them (`python -m py_compile pretrain_gpt.py`)
_FILE_TOOLS = frozenset({"py_compile", "compileall", "pylint", "flake8", "black", "isort", "mypy", "ruff", "pyflakes",
                         "yapf", "autopep8", "pycodestyle", "pydoc", "tabnanny", "dis", "tokenize", "pytest", "pip"})


def _checks_its_argument(values: list[str | None]) -> bool:
    """Whether a python command runs a module of _FILE_TOOLS (`python -m py_compile X.py`): no launch of X."""
    if not program(values[0]).startswith("python"):
        return False
    at = next((i for i, value in enumerate(values[1:3], 1) if value == "-m"), None)
    return at is not None and at + 1 < len(values) and (values[at + 1] or "").split(".")[0] in _FILE_TOOLS


def _starts_launch(value: str | None) -> bool:
    """Whether a command whose first word this is can be a launch: python, a launcher, a script, an entry point."""
    first = program(value)
    return first.startswith("python") or first in LAUNCHERS or first.endswith((".py", ".sh")) \
        or first in HYDRA_ENTRY_POINTS


def _may_run_its_arguments(value: str | None) -> bool:
    """Whether a first word may be a wrapper that runs the rest (`numarun`, `$WRAPPER`): not one of _NOT_RUNNERS, nor
    a tool that checks the files it is given (`mypy pkg/*.py --config-file pyproject.toml`: _FILE_TOOLS)."""
    return value is None or program(value) not in _NOT_RUNNERS and program(value) not in _FILE_TOOLS


def _unknown(arg: Arg) -> Unknown:
    return Unknown(arg.unknown or f"`{arg.text}` cannot be resolved statically")


def _env_layer(env: dict[str, EnvArg]) -> Layer:
    layer = Layer("environment")
    for setting in env.values():
        value = setting.value if setting.value is not None else Unknown(setting.unknown or "not resolvable")
        layer.assignments.append(Assignment(f"env.{setting.name}", value, setting.location, Source.ENV,
                                            setting.value or ""))
    return layer


# Megatron-LM flags only a training loop reads. A command with other Megatron-LM flags alone (a parity check, a
# conversion or an inference script given `--bf16` or `--tensor-model-parallel-size`) sets a model up but does
# not train, so advice about training launches (OFL301) does not apply to it. Inference scripts take some of
# these flags too: where the entry script is in the linted tree its code decides instead (linking, entry_scripts).
_TRAINING_FLAGS = frozenset({"--train-iters", "--train-samples", "--global-batch-size", "--micro-batch-size",
                             "--lr", "--lr-decay-iters", "--lr-warmup-iters", "--save-interval"})
# Flags only training reads, never a generation script (which may take the batch and save flags above).
TRAINING_ONLY_FLAGS = frozenset({"--train-iters", "--train-samples", "--lr", "--lr-decay-iters",
                                  "--lr-warmup-iters"})
# Sampling flags of Megatron-LM's text-generation tools (their own argument groups): a command with these and
# no training-only flag generates text.
_GENERATION_FLAGS = frozenset({"--out-seq-length", "--temperature", "--top_p", "--top-p", "--top_k", "--top-k",
                               "--sample-input-file", "--sample-output-file", "--max-tokens-to-oom",
                               # tasks/main.py's evaluation tasks score a guess file against an answer file
                               # (MSDP-EVAL-F1: tasks/msdp/evaluate.py, Megatron-LM before fb13c1de21)
                               "--guess-file", "--answer-file"})


# Words of an entry script's name that say it evaluates, converts, serves or exports a model, where its code
# cannot say (not in the tree, or it calls into code the tree does not have: Pai-Megatron-Patch's GLM-130B
# evaluation through SwissArmyTransformer, its `hf2megablocks_qwen1.5.py` conversion, Megatron-LM's Retro
# `tools/retro/preprocess_data.py` in a fork that copied the example without the tools). Such scripts take
# --micro-batch-size too. A word counts between separators or the name's ends (`run_eval.py`, not `evaluator`).
_NOT_TRAINING_WORDS = re.compile(
    r"(?:^|[_.-])(?:eval|evaluate|evaluation|convert|convertor|converter|conversion|inference|infer|generate|"
    r"generation|export|quantize|quantization|serve|server|preprocess|preprocessing)(?=[_.-]|$)"
    r"|^(?:hf|mg|mcore|megatron)2[a-z]|[a-z]2(?:hf|mg|mcore|megatron)(?=[_.-]|$)")
_TRAINING_NAMES = ("pretrain_", "train", "finetune")


def trains_by_flags(script: str, args: list[Arg]) -> bool:
    """Whether a Megatron-LM style launch trains, judged by its script's name and its flags (where its code
    does not decide: linking asks entry_scripts). A name that says conversion, evaluation and the like (and not
    training) decides before the flags: a tool built on Megatron's argument parser takes every
    training flag, and a launcher passing one array of common arguments to its conversion and its training
    steps gives the conversion --train-iters and --lr too (aws-samples' Megatron-DeepSpeed fine-tuning job runs
    `hf2megads_weight_converter.py`, which never trains, so). Then a training-only flag means training."""
    flags = {(a.value or "").split("=", 1)[0] for a in args}
    if not script.startswith(_TRAINING_NAMES) and _NOT_TRAINING_WORDS.search(script.lower()):
        return False
    if flags & TRAINING_ONLY_FLAGS:
        return True
    if flags & _GENERATION_FLAGS:
        return False
    if script.startswith(_TRAINING_NAMES):
        return True
    return bool(flags & _TRAINING_FLAGS)


def mlm_unit(name: str, args: list[Arg], env: dict[str, EnvArg], location: Location, trains: bool = True,
             context: str = "") -> Unit:
    """A Megatron-LM style launch's unit. `context`: the undecided branch the command itself is in, whose mark its
    own words carry (_by_path)."""
    opaque: list[int] = []
    values, _problems = mlm_flags.read_flags([a.value for a in args], opaque)
    layer = Layer("command line")
    written: list[tuple[Assignment, str]] = []
    alternatives: dict[int, tuple] = {}  # id of a flag's assignment -> the alternative of the branch giving it
    for flag in values:
        arg = args[flag.flag_index]
        value = flag.value
        if value is None:
            source_arg = args[min(flag.flag_index + 1, len(args) - 1)]
            value = _unknown(source_arg if source_arg.value is None else arg)
        written.append((Assignment(flag.key, value, arg.location, Source.MLM, flag.text), arg.conditional))
        if arg.alternative:  # (the flag as the script gives it, for the path's description)
            shown = arg.value if flag.text in ("", arg.value) else \
                flag.text if flag.text.startswith(arg.value) else f"{arg.value} {flag.text}"
            alternatives[id(written[-1][0])] = (*arg.alternative, shown)
    layer.assignments.extend(_by_path(written, context, alternatives, KEY_DEFAULT))
    _derive_virtual_pipeline(layer)
    _sequence_parallel_at_tp(layer)
    _query_groups(layer, args, opaque, location)
    return Unit(name=name, kind=UnitKind.COMMAND, location=location, layers=[layer, _env_layer(env)],
                defaults=Defaults.MLM_CLI, default_sections=MLM_SECTIONS,
                launches_training=trains, env_known=True,
                unread_flags=mlm_flags.unread_flags([a.value for a in args]),
                opaque_words=tuple(dict.fromkeys(_shown(args[i]) for i in opaque if args[i].flags is None)),
                path_flags=tuple(dict.fromkeys(flag for i in opaque for flag in args[i].flags or ())),
                launch_flags=tuple((a.value.split("=", 1)[0], a.location, _given_on(a)) for a in args
                                   if a.value and a.value.startswith("--") and len(a.value) > 2))


def _given_on(arg: Arg) -> str:
    """The path a word is given on, where one alternative of an undecided branch appends it (as a OneOf's path
    names it: _on_alternatives); "" where it is given on every path the command runs on."""
    return f"the script gives {arg.value} ({arg.alternative[0]})" if arg.alternative else ""


def unreadable(words: tuple[str, ...]) -> str:
    """A unit's opaque_words for a message: the first, and how many more."""
    return words[0] + (f" (and {len(words) - 1} more)" if len(words) > 1 else "")


def _shown(arg: Arg) -> str:
    """An unreadable word for a message: as written, where it is, and why offlint cannot read it."""
    written = f"`{arg.text}` " if arg.text and arg.text.isprintable() and len(arg.text) <= 60 else ""
    return f"{written}at line {arg.location.line} ({arg.unknown or 'not resolvable statically'})"


def _by_path(written: list[tuple[Assignment, str]], context: str = "",
             alternatives: dict[int, tuple] | None = None, otherwise: object = KEY_DEFAULT) -> list[Assignment]:
    """The command line's assignments, where the script's branches decide between a key's values: a key given more
    than once, one of them by a word only some paths append (`if ...; then ARGS+=(--num-layers 28); fi`, or each
    alternative of an `if`/`elif` or `case` appending its own, as Pai-Megatron-Patch's scripts choose a model's
    sizes), is no conflict on one command line (OFL004) and has no one value argparse keeps: it is one assignment,
    at its last occurrence, whose value is unknown unless every occurrence gives the same, or each is given by its
    own alternative of one undecided branch (a OneOf of their values: _on_alternatives). `written`: (assignment,
    the branch mark of its word: Arg.conditional); a word whose mark is the command's own (`context`: the command
    is inside that branch) is on the command's path. `alternatives` (by id of the assignment): a key given once, by a
    word one alternative of an undecided branch appended to an array or a string (shell_values.Word.alternative), is
    one value of a OneOf (_on_alternatives) whose other paths hold `otherwise`: KEY_DEFAULT for Megatron-LM flags
    (Megatron-LM's default where a path does not give them), BELOW for Hydra overrides (the recipe's value)."""
    by_key: dict[str, list[tuple[Assignment, str]]] = {}
    for assignment, branch in written:
        by_key.setdefault(assignment.key, []).append((assignment, branch))
    out: list[Assignment] = []
    for assignment, _ in written:
        group = by_key[assignment.key]
        taken = (alternatives or {}).get(id(assignment)) if len(group) == 1 and group[0][1] != context else None
        each = _exclusive_alternatives(group, alternatives or {}) if len(group) > 1 else None
        if taken and assignment.op == "set":
            out.append(_on_alternatives([(assignment, taken)], otherwise))
        elif each is not None:
            if assignment is group[-1][0]:
                out.append(_on_alternatives(each, otherwise))
        elif len(group) == 1 or not any(branch and branch != context for _, branch in group) or \
                any(a.op == "delete" for a, _ in group) or all(a.value == group[0][0].value for a, _ in group):
            out.append(assignment)
        elif assignment is group[-1][0]:
            given = ", ".join(f"{a.text or a.value!r} at line {a.location.line}" for a, _ in group)
            out.append(Assignment(assignment.key, Unknown(f"given {len(group)} times on different paths of the "
                                                          f"script ({given}): which one a run gets depends on the "
                                                          f"path"), assignment.location, assignment.source,
                                  assignment.text, assignment.via, assignment.op))
    return out


def _exclusive_alternatives(group: list[tuple[Assignment, str]], alternatives: dict[int, tuple]) -> list | None:
    """A key's occurrences as (assignment, its alternative) where each is given by a different alternative of one
    undecided branch (`if [ $AC = full ]; then ac="--recompute-granularity full"; elif [ $AC = sel ]; then
    ac="--recompute-activations"; fi`): no run gets two of them. None where two may meet."""
    given = [(assignment, alternatives.get(id(assignment))) for assignment, _ in group]
    if any(taken is None or assignment.op != "set" for assignment, taken in given):
        return None
    marks = {taken[0] for _, taken in given}
    indices = [taken[1] for _, taken in given]
    if len(marks) != 1 or len(set(indices)) != len(indices):
        return None
    if len(indices) == given[0][1][2] and all(a.value == given[0][0].value for a, _ in given):
        return None  # (every path gives the same: that value, plainly)
    return given


def _on_alternatives(given: list[tuple[Assignment, tuple[str, int, int, str]]], otherwise: object) -> Assignment:
    """A flag or override that alternatives of an undecided branch append, each its own value (`if [ "$OFF" = true
    ]; then ARGS+=(--use-cpu-optimizer-offload --use-precision-aware-optimizer); fi`, OFF read at run time from a
    file the user picks: Pai-Megatron-Patch's cooldown launcher): its value on each of those paths, `otherwise` on
    the others (Megatron-LM's default, or BELOW: what the recipe under a Hydra override gives), so a rule is checked
    on each (engine._by_path) and one holding only where the flag is given is reported with that condition, as what
    the user's choice of it does: a warning, not the certain error it had been. Flags of one alternative go
    together, those of exclusive alternatives never do (the branch's mark and the alternative are the split and its
    branch). At the last occurrence: (assignment, (mark, alternative, count, the flag as shown)) each."""
    mark, _, count, _ = given[0][1]
    paths = [(assignment.value, ((mark, index, f"the script gives {shown} ({mark})", (shown,)),), assignment.location,
              assignment.text) for assignment, (_, index, _, shown) in given]
    shown_all = [shown for _, (_, _, _, shown) in given]
    none = f"the script does not give {shown_all[0]}" if len(given) == 1 else \
        f"the script gives none of {', '.join(shown_all)}"
    taken = {index for _, (_, index, _, _) in given}
    paths += [(otherwise, ((mark, other, none, (), True),), None, None) for other in range(count) if other not in taken]
    where = ", ".join(f"{shown} at line {assignment.location.line}" for assignment, (_, _, _, shown) in given)
    return replace(given[-1][0], value=OneOf(f"given on some paths of the script only ({where}, {mark})",
                                             paths=tuple(paths)))


def _derive_virtual_pipeline(layer: Layer) -> None:
    """Megatron-LM: virtual pipeline size = num_layers / pipeline size / --num-layers-per-virtual-pipeline-stage."""
    values = {a.key: a for a in layer.assignments}
    per_stage = values.pop("model.num_layers_per_virtual_pipeline_stage", None)
    if per_stage is None:
        return
    layer.assignments.remove(per_stage)
    layers = values.get("model.num_layers")
    pipeline = values.get("model.pipeline_model_parallel_size")
    parts = [layers.value if layers else Unknown("--num-layers not given"), pipeline.value if pipeline else 1,
             per_stage.value]
    if all(isinstance(p, int) and not isinstance(p, bool) and p > 0 for p in parts):
        vpp: object = parts[0] // parts[1] // parts[2]
    else:
        vpp = Unknown("--num-layers-per-virtual-pipeline-stage with unknown sizes")
    layer.assignments.append(Assignment("model.virtual_pipeline_model_parallel_size", vpp, per_stage.location,
                                        Source.MLM, f"--num-layers-per-virtual-pipeline-stage {per_stage.text}"))


def _sequence_parallel_at_tp(layer: Layer) -> None:
    """Megatron-LM's validate_args turns `--sequence-parallel` off where the tensor-parallel size is 1 (arguments.py
    at d98e8a6, as in 2023's): on where TP is more, unknown where TP is. A recall study's launches passing it, as
    nearly every Megatron-LM example with TP above 1 does, had no memory estimate."""
    given = next((a for a in layer.assignments if a.key == "model.sequence_parallel"), None)
    if given is None or given.value is not True:
        return
    tensor = next((a.value for a in reversed(layer.assignments) if a.key == "model.tensor_model_parallel_size"), 1)
    if isinstance(tensor, int) and not isinstance(tensor, bool):
        value: object = tensor > 1
    else:
        value = Unknown("--sequence-parallel holds where the tensor-parallel size is above 1, which is not known")
    layer.assignments[layer.assignments.index(given)] = replace(given, value=value)


def _query_groups(layer: Layer, args: list[Arg], opaque: list[int], location: Location) -> None:
    """Megatron-LM builds the model with `num_query_groups=args.num_query_groups` only under --group-query-attention,
    else None: one group per head, whatever --num-query-groups says (core_transformer_config_from_args: arguments.py
    at core_r0.12.0, core_v0.14.0 and core_r0.16.0, argument_utils.py at d98e8a6; its own FLOPs and memory reports
    do the same). Without the flag, the argparse default (1) would size a multi-head model as multi-query (a 48-head
    28.4B model as 23.7B). A word that may give the flag leaves it unknown; with the flag, the value given or
    argparse's 1 stands."""
    given = {a.value for a in args}
    if "--group-query-attention" in given:
        return
    given_groups = [a for a in layer.assignments if a.key == "model.num_query_groups"]
    flag = given_groups[0] if given_groups else None
    layer.assignments[:] = [a for a in layer.assignments if a.key != "model.num_query_groups"]
    wrote = "--num-query-groups without --group-query-attention" if flag is not None else \
        "no --group-query-attention"
    may_give = any(args[i].flags is None or "--group-query-attention" in args[i].flags for i in opaque)
    value: object = Unknown("a word offlint cannot read may give --group-query-attention") if may_give else None
    layer.assignments.append(Assignment("model.num_query_groups", value,
                                        flag.location if flag is not None else location, Source.MLM, wrote))


def _built_recipe(unit: Unit, recipe: Unit) -> None:
    """The recipe as the performance scripts' selection code built it (its arguments included) becomes the
    launch's base, as `api` would link a named recipe; the name is then not linked again."""
    unit.layers.insert(0, Layer(f"recipe {recipe.name}", recipe.all_assignments(), inherited=True))
    take_recipe_sections(unit, recipe)
    unit.recipe = ""


def take_recipe_sections(unit: Unit, recipe: Unit) -> None:
    """A launch run on top of `recipe` (linked by name, or built by the performance scripts): what it leaves unset
    takes the recipe's defaults, or is unknown where the recipe's is. Its environment is the shell's plus the
    recipe's cfg.env_vars: known when the recipe's is, or when the recipe sets none at all; not where its script
    sourced a file offlint cannot read (Unit.env_open)."""
    unit.env_known = not unit.env_open and ("env" in recipe.default_sections or recipe.env_unset)
    unit.default_sections = frozenset(recipe.default_sections - {"env"} | ({"env"} if unit.env_known else set()))
    unit.unknown_sections = {s: r for s, r in recipe.unknown_sections.items() if s not in unit.default_sections}
    unit.overridden_sections = frozenset(s for s in recipe.overridden_sections if s in unit.unknown_sections)
    if unit.env_open:
        unit.unknown_sections["env"] = unit.env_open


def _perf_launch(project, location: Location, script_word: str | None, script: str, args: list[Arg]):
    """What the tree's performance scripts make of a launch of them (perf_scripts); None for another script,
    or when the tree does not hold them (the built-in model of perf_flags applies)."""
    if script not in perf_flags.PERF_SCRIPTS or project is None or not script_word:
        return None
    return perf_scripts.read_launch(project, location.path, script_word, args, location)


# What an entry script of the tree that reads `key=value` arguments with Hydra's grammar shows of it (Bridge's
# parse_hydra_overrides, OmegaConf.from_dotlist, a @hydra.main, NeMo 1's @hydra_runner), outside comments: a NeMo
# script's `# hydra interpolation does not work here` had made a script without Hydra one
_HYDRA_PARSING = re.compile(r"(?m)^[^#\n]*(?:\bhydra\b|\bhydra_runner\b|from_dotlist|parse_hydra_overrides)")


# A Hydra application's entry point naming its own config (`@hydra.main(config_path="conf", config_name="main")`;
# NeMo 1's `@hydra_runner(config_path="conf", config_name="megatron_gpt_config")`, which wraps hydra.main)
_HYDRA_APP = re.compile(r"(?m)^[ \t]*@(?:hydra\.main|hydra_runner)\s*\([^)]*\bconfig_name\s*=")


def _hydra_reading(project, launch_path: str, script_word: str, script: str, args: list[Arg]) -> tuple[bool, str]:
    """How the launched script reads its `key=value` arguments, from its code where it is a script of the tree:

    - whether with Hydra's grammar, so that one Hydra refuses stops the launch: Bridge's entry points, and a script
      of the tree whose code shows it (_HYDRA_PARSING); a script offlint cannot read is taken to, but where its
      arguments are another program's (_others_config). A script of the tree that does not (a NeMo-Run
      `run.cli.main` command line, which splits at the first `=`) had made its launcher 'cannot parse', exit 2;
    - whose config they set, where it is not Megatron Bridge's ConfigContainer ("" where it is): a Hydra
      application's own (`@hydra.main(..., config_name=...)`, or Hydra's options naming one on the command line),
      or, unless the script's code applies them with Bridge's parse_hydra_overrides, another program's by the shape
      of its arguments (_others_config). rllm's cookbooks pass `model.lora_rank=32` to such apps, which OFL003 called
      a misspelt Bridge field."""
    if script in HYDRA_ENTRY_POINTS or script in perf_flags.PERF_SCRIPTS:
        return True, ""
    path = None if project is None else entry_scripts.script_path(
        script_word, launch_path, lambda candidate, near: project.text(candidate))
    text = None if path is None else project.text(path) or ""
    found = _HYDRA_APP.search(text) if text and "hydra" in text else None
    if found:
        return bool(_HYDRA_PARSING.search(text)), \
            f"the script's own Hydra config ({path}:{text.count(chr(10), 0, found.start()) + 1})"
    given = _config_flag(args)
    others = "" if given or (text and "parse_hydra_overrides" in text) else _others_config(args)
    own = f"the script's own Hydra config ({given})" if given else others
    return (bool(_HYDRA_PARSING.search(text)) if text is not None else not others), own


def _others_config(args: list[Arg]) -> str:
    """Why a script's `key=value` arguments set another program's config rather than Megatron Bridge's ("" where
    nothing says so): its first argument is a YAML file it loads itself (Bridge's scripts take `--config-file`), or
    the keys are not shaped like a ConfigContainer's (keys.bridge_shaped). LLM Foundry's `composer train/train.py
    mpt-125m.yaml model.n_layers=12 variables.run_name=x` sets MPT's own config (a helper's sweep: TrustLLM's
    launch repository), where OFL003 had called n_layers a misspelt model.num_layers and exit 1."""
    first = args[0].value if args else None
    if first and first.endswith((".yaml", ".yml")) and not first.startswith("-") and "=" not in first:
        return f"the script's own config (`{args[0].text}`, a YAML file it is given first)"
    words = [_override_key(a.value if a.value is not None else a.text) for a in args
             if (a.value is None and "=" in a.text and not a.text.lstrip("\"'").startswith("-"))
             or (a.value and hydra.looks_like_override(a.value))]
    tops = list(dict.fromkeys(key.partition(".")[0] for key in words if key))
    if not tops or keys.bridge_shaped([tops], words):
        return ""
    theirs = [name for name in tops if name not in keys.CONTAINER_SECTIONS]
    return f"the script's own config ({', '.join(f'`{name}`' for name in theirs[:3])}: no Megatron Bridge sections)"


# Hydra's own options choosing the config an application composes (`--config-name`, `--config-path`, `--config-dir`)
_HYDRA_CONFIG_FLAGS = ("--config-name", "-cn", "--config-path", "-cp", "--config-dir", "-cd")


def _config_flag(args: list[Arg]) -> str:
    """Where the command gives one of Hydra's options naming the config the script composes ("`--config-name=x.yaml`
    (line 6)"), "" where it gives none: the script is a Hydra application with a config of its own, whatever
    offlint can read of its code. NeMo 1's `megatron_gpt_pretraining.py --config-name=megatron_gpt_config.yaml
    model.max_position_embeddings=2048` sets its megatron_gpt_config.yaml's keys, which OFL003 had read as a
    misspelt Bridge field (a helper's sweep; Bridge's own scripts take no such option)."""
    given = {(arg.value or "").split("=", 1)[0]: arg for arg in args}
    arg = next((given[flag] for flag in _HYDRA_CONFIG_FLAGS if flag in given), None)  # (the config's name first)
    return f"`{arg.text}` (line {arg.location.line})" if arg is not None else ""


def _override_key(text: str) -> str:
    """The key a `key=value` override sets as the command sees it: `"model.offload_modules=${X}"` quotes it (the quote
    is no part of it), `+key` / `~key` add or delete it."""
    return hydra.canonical_key(text.split("=", 1)[0].replace('"', "").replace("'", "").lstrip("+~"))


def _hydra_unit(name: str, script: str, args: list[Arg], env: dict[str, EnvArg], location: Location,
                env_known: bool, perf_launch=None, context: str = "", hydra_syntax: bool = True,
                own_config: str = "") -> Unit:
    """A launch taking `key=value` overrides. `own_config`: whose config they set where it is not Megatron Bridge's
    (_hydra_reading): its overrides are that config's keys, not read as Megatron Bridge's."""
    layer = Layer("command line")
    recipe = ""
    config_files: list[tuple[str, Location]] = []
    at_run_time = ""
    i = 0
    problems: list[tuple[Location, str]] = []  # Hydra refuses these at launch: reported as file errors
    written: list[tuple[Assignment, str]] = []  # (an override, the branch its word is appended on, if any)
    alternatives: dict[int, tuple] = {}  # id of an override's assignment -> the alternative of the branch giving it
    if perf_launch is not None:  # the tree's scripts: their parser, selection and overrides (perf_scripts)
        perf, perf_used, recipe = perf_launch.layer, perf_launch.used, perf_launch.recipe
    else:
        perf, perf_used = perf_flags.perf_layer(args) if script in perf_flags.PERF_SCRIPTS else (None, set())
    while i < len(args):
        if i in perf_used:
            i += 1
            continue
        arg = args[i]
        value = arg.value
        if value in ("--recipe", *_CONFIG_FILE_FLAGS) and i + 1 < len(args):
            target = args[i + 1]
            if value == "--recipe":
                # An unresolvable name still means "a recipe": its values are unknown, not defaults.
                recipe = target.value or "<unresolved>"
            elif target.value:
                config_files.append((target.value, target.location))
            else:
                at_run_time = target.text
            i += 2
            continue
        if value and value.startswith("--recipe="):
            recipe = value.split("=", 1)[1]
        elif value and value.startswith("--config-file="):
            config_files.append((value.split("=", 1)[1], arg.location))
        elif value is None and "=" in arg.text and not arg.text.lstrip("\"'").startswith("-"):
            # the key as the command sees it: `"model.offload_modules=${X}"` quotes it (the quote is no part of it)
            written.append((Assignment(_override_key(arg.text), _unknown(arg), arg.location, Source.HYDRA, arg.text),
                            arg.conditional))
        elif value and hydra.looks_like_override(value):
            try:
                for override in hydra.parse_override(value):
                    parsed = env_string(override.key, override.value)
                    written.append((Assignment(override.key, parsed, arg.location, Source.HYDRA, override.text, (),
                                               override.op), arg.conditional))
                    if arg.alternative:
                        alternatives[id(written[-1][0])] = (*arg.alternative, value)
            except hydra.OverrideError as exc:
                if hydra_syntax:
                    problems.append((arg.location, str(exc)))
                else:  # the script reads it otherwise: its key, if any, is set to something offlint cannot read
                    unread = Unknown(f"`{value}` is read by the script's own parser")
                    written.append((Assignment(_override_key(value), unread, arg.location, Source.HYDRA, arg.text),
                                    arg.conditional))
        i += 1
    if not own_config:
        layer.assignments.extend(_by_path(written, context, alternatives, BELOW))
    # Bridge entry points run a recipe whose cfg.env_vars may set variables: known only once it is linked.
    env_known = env_known and not recipe and script not in HYDRA_ENTRY_POINTS
    # The perf scripts apply their own flags after the Hydra overrides (set_user_overrides runs last).
    layers = [layer] + ([perf] if perf is not None and perf.assignments else []) + [_env_layer(env)]
    shown = f" (recipe {recipe}, chosen by the performance scripts)" if perf_launch is not None and recipe else \
        f" (--recipe {recipe})" if recipe else ""
    unit = Unit(name=name + shown, kind=UnitKind.COMMAND, location=location,
                layers=layers, launches_training=True, env_known=env_known)
    reason = (f"set by recipe `{recipe}`, which is not in the linted files" if recipe
              else f"{own_config}, not Megatron Bridge's" if own_config
              else "set by the recipe this command runs")
    if perf_launch is not None and perf_launch.refused:
        reason = f"{script} refuses this command: {perf_launch.refused}"
        unit.launches_training = False  # argparse exits before any job is submitted
    unit.unknown_sections = {s: reason for s in ("model", "optimizer", "ddp")}
    if not env_known:
        unit.unknown_sections["env"] = "the launch environment may come from the recipe's env_vars"
    else:
        unit.default_sections = frozenset({"env"})
    unit.recipe = recipe
    unit.launch_gpus = perf_launch.gpus if perf_launch is not None else 0
    if perf_launch is not None and perf_launch.recipe_unit is not None:
        _built_recipe(unit, perf_launch.recipe_unit)
    unit.config_files = config_files
    unit.config_file_at_run_time = at_run_time
    if problems:
        raise CommandProblem("; ".join(f"line {loc.line}: {msg}" for loc, msg in problems))
    return unit
