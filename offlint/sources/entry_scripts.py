"""Whether a Megatron-LM style launch trains, read from its entry script in the linted tree.

Megatron-LM's text-generation servers, sample generators and quantization scripts take training flags too
(`--micro-batch-size`, `--save-interval`), so the flags alone cannot tell a training launch from one that only
loads a model; advice about training launches (OFL301) must not be given for the latter. Where the entry script
is in the tree, its code decides: it trains when it reaches a training entry point (`TRAINING_CALLS`: megatron's
`pretrain`, Bridge's `pretrain` / `finetune` / `distill`, a `train` or `fit` loop, `.backward()`) through its own
functions and the tree's. Megatron's own packages start training only through those names (Megatron-LM: only
`megatron/training/training.py`'s `pretrain` calls its `train`; Megatron Bridge: `finetune` and `distill` call
`training/pretrain.py`'s `pretrain`, which calls `training/train.py`'s `train`; its `pretrain_megatron_mimo` is one
of those names with a suffix), so a call into `megatron.*` is judged by its name and not followed. A call into
other code that is not in the tree (a third-party package) leaves the answer open (None): then the flags decide,
as before.

Read with `ast` only; nothing is imported or run.
"""

from __future__ import annotations

import ast
import collections
import itertools
import os
import posixpath
import re
import sys
from typing import Callable, NamedTuple

from offlint.sources import python_inputs
from offlint.sources.python_roles import OTHER_FRAMEWORKS, PYTEST_FILE
from offlint.sources.python_syntax import _call_name, _nodes, main_block
from offlint.sources.shell_paths import tree_copy
from offlint.sources.yaml_keys_taken import taken_keys
from offlint.types import Unknown

# Names whose call starts or runs training (a function or a method).
# (`train_batch`: DeepSpeed's pipeline engine runs a whole training step in it, forward, backward and the optimizer's.)
TRAINING_CALLS = frozenset({"pretrain", "finetune", "distill", "train", "fit", "train_step", "train_batch", "backward"})
_TRAINING_PREFIXES = ("pretrain_", "finetune_", "distill_")  # megatron's variants of them
# Packages not in the tree whose functions do not start training: the standard library, and the array, model
# and quantization libraries an inference or conversion script calls (their training loops go through a method
# named in TRAINING_CALLS, which is found by name). DeepSpeed's `deepspeed.initialize` builds an engine and trains
# nothing: the engine trains in `backward`, `step` after it, or `train_batch` (a Megatron-DeepSpeed fork's weight
# converter calls `deepspeed.initialize(..., optimizer=None)` and saves a checkpoint: 7 OFL301 findings called it
# a training launch).
_NOT_TRAINING = frozenset(sys.stdlib_module_names) | {
    "megatron", "torch", "numpy", "transformers", "deepspeed", "modelopt", "datasets", "tqdm", "yaml", "safetensors",
    "flask",
    "flask_restful", "requests", "PIL", "einops", "omegaconf", "hydra", "tokenizers", "sentencepiece",
    "tiktoken", "transformer_engine", "apex", "accelerate", "wandb", "huggingface_hub",
    "lm_eval", "clip",  # (lm-evaluation-harness scores a model; OpenAI's CLIP package loads one)
    "psutil", "h5py", "pandas", "scipy", "matplotlib", "nltk",  # system, data and plotting libraries
    # Megatron-LM's own top-level modules, imported by scripts run from its checkout for their model providers and
    # step functions (a converter's `from pretrain_gpt import model_provider`): an entry script `pretrain_*.py`
    # trains only as `__main__` (see _imported_trains), the builders not at all
    "gpt_builders", "mamba_builders", "hybrid_builders", "model_provider"}
# Megatron's calls that validate the parsed arguments (training runs them too)
_CHECKING_CALLS = TRAINING_CALLS | {"initialize_megatron", "validate_args"}
# Names whose call builds the optimizer: training does, and Megatron-LM's setup and megatron-core's builder (a
# checkpoint converter may call them to load an optimizer's state)
OPTIMIZER_CALLS = TRAINING_CALLS | {"setup_model_and_optimizer", "get_megatron_optimizer"}
_MAX_FUNCTIONS = 400  # past this many functions followed the answer stays open

TreeText = Callable[[str, str], "str | None"]


# `trains`' answer for a script whose arguments choose what runs, training on some paths only (tasks/main.py's
# `--task`): a launch of it trains where it gives a flag only training reads (launch.TRAINING_ONLY_FLAGS)
ARGUMENTS_CHOOSE = "arguments choose"


def trains(script: str, launch_path: str, tree_text: TreeText, parsed: dict | None = None) -> bool | str | None:
    """True / False where the entry `script` (as the launch writes it) is in the tree and decides, ARGUMENTS_CHOOSE
    where it trains on some of the paths its arguments choose, else None.

    `launch_path`: the file that launches it (a relative script path is tried from its folder, then from each
    folder above it: scripts often `cd` to the repository root first). `tree_text(path, near)`: a file's text,
    None outside the project or unreadable. `parsed`: path -> parsed module, shared by the calls of one run (many
    launches run the same script), which also keeps each script's answer (_per_script): the tree's texts are the
    run's (`tree_text` gives a path the same text whoever asks), so a script's reach is followed once (Bridge
    067f987: 18 launches of MIMO scripts, each following hundreds of functions).
    """
    return _per_script(_Reach.module_trains, script, launch_path, tree_text, parsed, None)


def trains_given(script: str, launch_path: str, tree_text: TreeText, argument: Callable[[str], object],
                 parsed: dict | None = None) -> bool | str | None:
    """`trains` for one launch whose own arguments are known (`argument(dest)`: its literal value, None where it
    gives none or offlint cannot read it): a name imported on branches testing an argument (tasks/main.py's
    `if args.task == 'RACE': from race.finetune import main` / `elif args.task in [...]: from zeroshot_gpt...`)
    is the import the launch's value reaches. Asked where `trains` answers ARGUMENTS_CHOOSE; the answer is the
    launch's, not kept (the parsed modules are)."""
    path = _find_script(script, launch_path, tree_text)
    if path is None:
        return None
    reach = _Reach(launch_path, tree_text, parsed)
    reach.argument = argument
    return reach.module_trains(path)


class Write(NamedTuple):
    """An attribute the entry script's code sets on the parsed arguments, where it first does, and its value where
    offlint knows what the run has (`UNREAD` otherwise). `choices`, where the value is UNREAD but each place sets a
    literal: (path, line, literal) for each; a run has one of them, or the command line's value where it reaches
    none (LoongForge's validator turns fine-grained offloading off with `if args.x: args.x = False`)."""

    attribute: str
    path: str
    line: int
    value: object
    choices: tuple[tuple[str, int, object], ...] = ()


UNREAD = object()  # Write.value: what the run's code sets is not known


def builds_optimizer(script: str, launch_path: str, tree_text: TreeText, parsed: dict | None = None) -> bool | None:
    """As `trains`, for the calls that build the optimizer (OPTIMIZER_CALLS): False where the entry script's code
    reaches none (a checkpoint converter passed a training job's flags, optimizer offloading among them: what the
    optimizer's build and steps would do does not happen), None where it does not decide."""
    answer = _per_script(_Reach.module_builds_optimizer, script, launch_path, tree_text, parsed, None)
    return None if answer == ARGUMENTS_CHOOSE else answer


def namespace_writes(script: str, launch_path: str, tree_text: TreeText,
                     parsed: dict | None = None) -> tuple[Write, ...]:
    """A Write for each attribute the tree's code reached from the entry `script` sets on the parsed arguments
    (`args.use_distributed_optimizer = True`, `setattr(args, "bf16", ...)`), the first place each; () where the
    script is not in the tree. A script that changes the parsed arguments before Megatron-LM validates them runs
    with its code's values, not its command line's: THUDM/slime's `_set_default_megatron_args` turns the
    distributed optimizer on whatever the launch says, and OFL116 had said 5 launches would be refused without it.
    The value is known where the attribute is set in one place only, to a literal, by a statement every run of the
    script reaches (`_certain_nodes`: from the script's top level or its `__main__` block, through calls made by
    statements of their own, none after a statement that may return or raise); it may depend on other arguments
    otherwise. Which name holds the arguments is not traced: Megatron's convention names it (`_stored_attributes`).
    Megatron's own code is not followed (its rewrites are the rules' to model), nor past `_MAX_FUNCTIONS`
    functions."""
    return _per_script(_Reach.module_writes, script, launch_path, tree_text, parsed, ())


class EnvironmentWrite(NamedTuple):
    """An environment variable the entry script's code sets in its own process (`os.environ["NAME"] = "v"`), where
    it first does, its value where offlint knows what the run has (`UNREAD` otherwise), and whether only where the
    launch left it unset (`os.environ.setdefault`)."""

    name: str
    path: str
    line: int
    value: object
    only_if_unset: bool


def environment_writes(script: str, launch_path: str, tree_text: TreeText,
                       parsed: dict | None = None) -> tuple[EnvironmentWrite, ...]:
    """The environment variables the tree's code reached from the entry `script` sets for its own process (as
    namespace_writes finds the arguments it sets; () where the script is not in the tree): `os.environ["NAME"] = v`,
    `os.environ.setdefault("NAME", v)`, `os.putenv("NAME", v)`, and PyTorch's
    `torch.cuda.memory._set_allocator_settings(v)`, which sets the CUDA caching allocator's options as
    PYTORCH_CUDA_ALLOC_CONF does (read as that variable). PyTorch reads the allocator's options when it first
    allocates on the GPU, so a script that sets them before training runs with them, whatever its launch exports."""
    return _per_script(_Reach.module_run_facts, script, launch_path, tree_text, parsed, ("", ()))[1]


def ray_driver(script: str, launch_path: str, tree_text: TreeText, parsed: dict | None = None) -> str:
    """Where the tree's code reached from the entry `script` starts Ray (`ray.init(...)`, "path:line"); "" where it
    does not, or the script is not in the tree. Such a script is a Ray driver: its training runs in Ray's worker
    processes, whose environment its code builds (NVIDIA-NeMo/RL's `init_ray` passes the driver's variables on in
    the runtime environment, then each policy's workers take the `env_vars` of the run's YAML, which its performance
    recipes use to set `expandable_segments:False` on purpose). What the launch does not set is then not known to be
    unset (launch.opened)."""
    return _per_script(_Reach.module_run_facts, script, launch_path, tree_text, parsed, ("", ()))[0]


# How many module-level imports deep, and in how many of the tree's files at most, what a script's start runs is
# looked for (_Reach._imports_reached: a backend package's import, a patch of Megatron-LM's parser)
_IMPORT_DEPTH = 4
_IMPORTED_FILES = 64
# ... and from an import the `__main__` block makes (tasks/main.py's of the task's module: Megatron's
# race/finetune.py -> tasks/finetune_utils.py -> megatron/training.py -> megatron/optimizer/__init__.py ->
# optimizer.py -> clip_grads.py)
_DISPATCH_DEPTH = 6
# Megatron-LM's parse_args replaced: named to a patch registry (`"megatron.training.arguments.parse_args"`), assigned,
# or set with setattr
_PARSER_PATCH = re.compile(r"[\"']megatron(?:\.training)?\.arguments\.parse_args[\"']"
                           r"|\.parse_args[ \t]*=(?!=)|setattr\([^)\n]*[\"']parse_args[\"']")
# Deep-learning frameworks other than PyTorch: a script training with one is no Megatron (or PyTorch) job
# Libraries whose objects have training-named methods that fit no PyTorch model: a faiss index's `train` (k-means of
# its codebooks: Megatron-LM's Retro preprocessing), scikit-learn's `fit`, a tokenizer's or SentencePiece's `train`.
_FITS_NO_MODEL = frozenset({"faiss", "sklearn", "sentencepiece", "tokenizers", "gensim"})
_TORCH_IMPORT = re.compile(r"^[ \t]*(?:import|from)[ \t]+torch\b", re.MULTILINE)
# PyTorch backends of other accelerators, by the package a program imports to use one: each reads its own
# allocator options (torch_npu PYTORCH_NPU_ALLOC_CONF, torch_musa PYTORCH_MUSA_ALLOC_CONF), not CUDA's.
BACKEND_PACKAGES = {"torch_npu": "Ascend NPUs", "torch_musa": "Moore Threads GPUs (MUSA)",
                    "habana_frameworks": "Intel Gaudi HPUs"}
# A module-level import of one (at the line's start: not under an `if`, a `try` or a `def`)
_BACKEND_IMPORT = re.compile(r"^(?:import|from)[ \t]+(" + "|".join(BACKEND_PACKAGES) + r")\b", re.MULTILINE)
# One as the first statement of a module-level `try` (HabanaAI's Megatron-LM: `try:\n    import habana_frameworks
# .torch.core as htcore\nexcept:\n    pass`): the program runs on that accelerator where the package is installed
_BACKEND_TRY_IMPORT = re.compile(r"^try[ \t]*:[ \t]*(?:#[^\n]*)?\n(?:[ \t]*(?:#[^\n]*)?\n)*[ \t]+(?:import|from)[ \t]+("
                                 + "|".join(BACKEND_PACKAGES) + r")\b", re.MULTILINE)


# Variables only another accelerator's runtime reads (Huawei's and Habana's collective libraries are both HCCL; the
# CANN runtime's ASCEND_*; Gaudi's PT_HPU_* and HABANA_*): a launch exporting one may run there (MindSpeed's system
# tests export HCCL_DETERMINISTIC or ASCEND_LAUNCH_BLOCKING for NPU runs of a pretrain_gpt.py outside the tree).
# Not a decision, as a backend's import or allocator options are: a script copied from its twin for another device
# keeps such exports (MUSA_VISIBLE_DEVICES in a CUDA script of MT-MegatronLM).
RUNTIME_VARIABLE_PREFIXES = {"HCCL_": "Ascend NPUs or Intel Gaudi HPUs", "ASCEND_": "Ascend NPUs",
                             "PT_HPU_": "Intel Gaudi HPUs", "HABANA_": "Intel Gaudi HPUs"}


def runtime_variables_accelerator(names) -> Unknown | str:
    """An Unknown naming the accelerator a launch setting the environment variable `names` may run on, where one is
    only another accelerator's runtime's (RUNTIME_VARIABLE_PREFIXES); "" where none is."""
    for name in names:
        for prefix, device in RUNTIME_VARIABLE_PREFIXES.items():
            if name.startswith(prefix):
                return Unknown(f"the launch may run on {device}: it sets {name}")
    return ""


ENV_UNKNOWN = object()  # `accelerator`'s `env`: the launch's value of a variable is not known


def accelerator(script: str, launch_path: str, tree_text: TreeText, parsed: dict | None = None,
                env: Callable[[str], object] | None = None) -> str | Unknown:
    """The accelerator other than a CUDA GPU that the entry `script` runs on, where its code says so: it, or a module
    of the tree its top-level imports reach (four imports deep), imports a backend package (BACKEND_PACKAGES) at its
    own top level, as "Ascend NPUs: FILE:LINE imports torch_npu" (Ascend's MindSpeed-LLM: pretrain_gpt.py imports
    `pretrain` from mindspeed_llm/training/training.py, which imports torch_npu). An import under a top-level `if` that
    compares an environment variable with a literal counts on the branch the launch's value takes (`env(name)`:
    its value, None where the launch leaves it unset, ENV_UNKNOWN): MT-MegatronLM's scripts import their MUSA
    patches under `if os.getenv("ACCELERATOR_BACKEND") == "musa":`, which their launches set. An Unknown where
    the only such import is the first statement of a top-level `try` (it runs on that accelerator where the package
    is installed: HabanaAI's Megatron-LM, whose upstream example launches got OFL301). "" otherwise: an import under
    another condition does not decide, nor does a script outside the tree. The modules a script imports are
    searched as text."""
    path = _find_script(script, launch_path, tree_text)
    if path is None:
        return ""
    reach = _Reach(launch_path, tree_text, parsed)
    module = reach._module(path)
    if module is None:
        return ""
    # (one answer per script and values of the variables its top-level tests read: most launches run a few scripts)
    tested = dict.fromkeys(found[0] for node in module.top_level if isinstance(node, ast.If)
                           for found in [_environment_test(node.test)] if found)
    read = tuple(env(name) if env is not None else ENV_UNKNOWN for name in tested)
    key = ("accelerator", path, read)
    if parsed is None:
        return reach.module_accelerator(path, env)
    if key not in parsed:
        parsed[key] = reach.module_accelerator(path, env)
    return parsed[key]


def _per_script(answer: Callable, script: str, launch_path: str, tree_text: TreeText, parsed: dict | None,
                absent: object):
    """`answer(reach, path)` for the entry `script`'s file, `absent` where it is not in the tree; kept in `parsed`
    under (the answer's name, path), so each script's reach is followed once per run."""
    path = _find_script(script, launch_path, tree_text)
    if path is None:
        return absent
    if parsed is None:
        return answer(_Reach(launch_path, tree_text), path)
    key = (answer.__name__, path)
    if key not in parsed:
        parsed[key] = answer(_Reach(launch_path, tree_text, parsed), path)
    return parsed[key]


# A module-level import of torch._six (at the line's start: not under a `try`, an `if` or a `def`), which PyTorch 2.0
# removed: Megatron-LM's optimizer/clip_grads.py took `inf` from it until 2023
_TORCH_SIX_IMPORT = re.compile(r"^(?:from[ \t]+torch\._six[ \t]+import|import[ \t]+torch\._six)\b", re.MULTILINE)


def needs_old_torch(script: str, launch_path: str, tree_text: TreeText, parsed: dict | None = None) -> str:
    """Where the entry `script`'s code runs only on a PyTorch before 2.0: it, or a module of the tree its top-level
    imports reach (four imports deep), or the imports its `__main__` block makes on every path (six deep: a task's
    module, tasks/main.py), imports torch._six at its own top level ("FILE:LINE imports torch._six"); ""
    otherwise (Megatron-DeepSpeed's forks import it in a `try`, with `from torch import inf` as the fallback).
    Zenodia's and TurkuNLP's Megatron-LM copies (a helper's sweep) import it so: on PyTorch 2 their launches stop
    at the import, and on PyTorch 1.x OFL301's fix stops them at the first allocation."""
    return _per_script(_Reach.module_needs_old_torch, script, launch_path, tree_text, parsed, "")


def patches_parser(script: str, launch_path: str, tree_text: TreeText, parsed: dict | None = None) -> bool:
    """Whether a module of the tree that the entry `script`'s top-level imports reach replaces Megatron-LM's
    parse_args (MindSpeed-LLM's megatron_adaptor registers a decorator for "megatron.training.arguments.parse_args"
    that adds some 300 options; a plain `megatron.training.arguments.parse_args = ...` does the same): the options the
    script's parser has are then not the checkout's and its own provider's alone (two MindSpeed-LLM forks' inference
    and evaluation launches had 2,961 OFL007 findings on options the patch adds)."""
    return bool(_per_script(_Reach.module_patches_parser, script, launch_path, tree_text, parsed, False))


def yaml_keys_taken(script: str, launch_path: str, tree_text: TreeText,
                    parsed: dict | None = None) -> frozenset[str]:
    """The keys of its YAML override file the entry `script` takes out before Megatron Bridge reads the file
    (sources/yaml_keys_taken.py), from the script's own module; none where it is not in the tree."""
    return _per_script(_Reach.module_yaml_keys_taken, script, launch_path, tree_text, parsed, frozenset())


def script_path(script: str, launch_path: str, tree_text: TreeText) -> str | None:
    """The tree's file of the entry `script` as a launch in `launch_path` writes it (see `trains`); None if none."""
    return _find_script(script, launch_path, tree_text)


def _find_script(script: str, launch_path: str, tree_text: TreeText) -> str | None:
    if not script or not script.endswith(".py"):
        return None
    if posixpath.isabs(script):
        # a path the launch built from its own folder (`WORKSPACE=$(dirname "$(readlink -f "$0")")`): shell_paths
        # made it absolute against the working directory, where the tree's paths start (or the tree was named by
        # an absolute path, and its paths are absolute too)
        here = os.getcwd().rstrip("/") + "/"
        # (the tree's own path first: a place named in a message is the tree's, not this machine's)
        candidates = [posixpath.normpath(script[len(here):])] * script.startswith(here) + [posixpath.normpath(script)]
        found = next((c for c in candidates if tree_text(c, launch_path) is not None), None)
        # else the tree's copy of a script in another checkout (THUDM/slime's `python3 /personal/slime/slime/train.py`)
        return found or tree_copy(script, lambda path: tree_text(path, launch_path))[0]
    folder = posixpath.dirname(launch_path)
    while True:
        candidate = posixpath.normpath(posixpath.join(folder, script))
        if not candidate.startswith("../") and tree_text(candidate, launch_path) is not None:
            return candidate
        if posixpath.dirname(folder) == folder:
            return None
        folder = posixpath.dirname(folder)


class _Reach:
    """Follows calls from an entry script's top level through the functions the tree defines."""

    def __init__(self, launch_path: str, tree_text: TreeText, parsed: dict | None = None) -> None:
        self.launch_path = launch_path
        self.tree_text = tree_text
        self.modules: dict[str, _Module | None] = {} if parsed is None else parsed
        self.followed: set[tuple[str, str]] = set()
        self.search_paths: list[str] = []  # folders the modules read so far add to sys.path (_Module.search_paths)
        self.chosen = False  # a name imported on several branches, one of which trains, left the answer open
        self.checking: dict[tuple[_Module, str], bool] = {}  # a function of the tree -> _checks_arguments
        self.calls = TRAINING_CALLS  # the names looked for (module_builds_optimizer: OPTIMIZER_CALLS)
        # the launch's value of an argument by its dest (a literal, else None), where the launch is known
        # (trains_given): it decides between a name's imports on branches testing it
        self.argument: Callable[[str], object] | None = None

    def module_trains(self, path: str) -> bool | str | None:
        module = self._module(path)
        if module is None:
            return None
        if self._other_framework(module) or PYTEST_FILE.match(posixpath.basename(path)):
            # (a test, by pytest's naming, checks code, with a backward pass and an optimizer step perhaps: apex's
            # SyncBN `two_gpu_unit_test.py`, run by torch.distributed.launch with `--fp16`; no training job)
            return False
        answer = self._calls_train(module, module.top_level, ())
        return ARGUMENTS_CHOOSE if answer is None and self.chosen else answer

    def _other_framework(self, module: _Module) -> bool:
        """Whether the script trains with another framework than PyTorch: its top level imports one (OTHER_FRAMEWORKS)
        and neither it nor a file of the tree its imports name imports torch (MLPerf v3.1's MXNet ResNet takes
        `--num-layers 50 --lr ... --optimizer ...`, flags a Megatron-LM launch has too)."""
        names = {name.split(".")[0] for node in module.top_level for name in _imported_names(node)}
        if "torch" in names or not names & OTHER_FRAMEWORKS:
            return False
        return not any(_TORCH_IMPORT.search(self.tree_text(path, self.launch_path) or "")
                       for path in self._imported_files(module, module.top_level, every=True))

    def module_patches_parser(self, path: str) -> bool:
        module = self._module(path)
        if module is None:
            return False
        return any(_patches_parser(self.tree_text(found, self.launch_path) or "")
                   for found in [path, *self._imports_reached(module, module.top_level)])

    def module_needs_old_torch(self, path: str) -> str:
        module = self._module(path)
        if module is None:
            return ""
        found = self._torch_six_in([path, *self._imports_reached(module, module.top_level)])
        for node in module.top_level:
            if not found and main_block(node):
                found = self._every_path_imports_torch_six(module, node.body)
        return found

    def _torch_six_in(self, paths) -> str:
        """"FILE:LINE imports torch._six" for the first of the tree's files `paths` importing it at its top level."""
        for found in paths:
            text = self.tree_text(found, self.launch_path) or ""
            match = _TORCH_SIX_IMPORT.search(text) if "torch._six" in text else None
            if match:
                return f"{found}:{text.count(chr(10), 0, match.start()) + 1} imports torch._six"
        return ""

    def _every_path_imports_torch_six(self, module: _Module, body: list[ast.stmt]) -> str | None:
        """Where every path through `body` (a `__main__` block, an `if` branch of it) runs an import whose reach
        imports torch._six (tasks/main.py imports the module of the task `--task` names there, each reaching
        megatron/optimizer/clip_grads.py), where (as _torch_six_in); None where every path raises before one does;
        "" otherwise."""
        for node in body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found = self._torch_six_in(self._reach(module, [node], _DISPATCH_DEPTH, _IMPORTED_FILES))
                if found:
                    return found
            elif isinstance(node, ast.If):
                branches = [self._every_path_imports_torch_six(module, branch) for branch in (node.body, node.orelse)]
                if all(found is None for found in branches):
                    return None
                if all(found != "" for found in branches) and any(branches):  # (each found, or raises)
                    return next(found for found in branches if found)
            elif isinstance(node, ast.Raise) or isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) \
                    and _call_name(node.value.func) in _EXITS:
                return None  # (the path ends: `raise NotImplementedError(task)`, `exit()`)
        return ""

    def module_yaml_keys_taken(self, path: str) -> frozenset[str]:
        module = self._module(path)
        return frozenset() if module is None else taken_keys(module.functions, module.top_level)

    def module_builds_optimizer(self, path: str) -> bool | str | None:
        self.calls = OPTIMIZER_CALLS
        return self.module_trains(path)

    def module_writes(self, path: str) -> tuple[Write, ...]:
        # attribute -> its places -> (the literal set there or UNREAD, whether every run sets it there)
        sites: dict[str, dict[tuple[str, int], tuple[object, bool]]] = {}
        for module, node, certain in self._reached(path):
            for attribute in _stored_attributes(node):
                places = sites.setdefault(attribute, {})
                _, before = places.get((module.path, node.lineno), (UNREAD, False))
                places[(module.path, node.lineno)] = (_literal(node), certain or before)  # (walked as certain, then not)
        writes = []
        for attribute, places in sites.items():
            first, (literal, certain) = next(iter(places.items()))
            known = literal if len(places) == 1 and certain else UNREAD
            choices = () if known is not UNREAD or any(held is UNREAD for held, _ in places.values()) else \
                tuple((*where, held) for where, (held, _) in places.items())
            writes.append(Write(attribute, *first, known, choices))
        return tuple(writes)

    def module_run_facts(self, path: str) -> tuple[str, tuple[EnvironmentWrite, ...]]:
        """(ray_driver's answer, environment_writes' answer), from one walk of the code the script reaches."""
        ray = ""
        sites: dict[tuple[str, bool], dict[tuple[str, int], object]] = {}  # (name, setdefault) -> places -> value
        for module, node, certain in self._reached(path):
            if not ray and isinstance(node, ast.Call) and _starts_ray(module, node.func):
                ray = f"{module.path}:{node.lineno}"
            for name, value, only_if_unset in _environment_stores(node):
                places = sites.setdefault((name, only_if_unset), {})
                if places.get((module.path, node.lineno), UNREAD) is UNREAD:
                    places[(module.path, node.lineno)] = value if certain else UNREAD
        return ray, tuple(EnvironmentWrite(name, *next(iter(places)),
                                           next(iter(places.values())) if len(places) == 1 else UNREAD, only_if_unset)
                          for (name, only_if_unset), places in sites.items())

    def module_accelerator(self, path: str, env: Callable[[str], object] | None) -> str | Unknown:
        module = self._module(path)
        if module is None:
            return ""
        maybe: list[str] = []
        found = self._backend_in(module, module.top_level, [path], maybe)
        if found:
            return found
        for node in module.top_level:
            taken = _environment_branch(node, env) if isinstance(node, ast.If) else None
            found = self._backend_in(module, node.body if taken else node.orelse, [], []) if taken is not None else ""
            if found:
                return f"{found}, where `if {ast.unparse(node.test)}` ({path}:{node.lineno}) is " \
                       f"{'true' if taken else 'false'} for this launch"
        if maybe:
            return Unknown(f"{maybe[0]} in a `try` block: the launch runs there where that package is installed")
        return ""

    def _backend_in(self, module: _Module, body: list[ast.stmt], texts: list[str], maybe: list[str]) -> str:
        """Where `body` (statements of `module`), one of the files `texts` or a file its imports name imports a
        backend package at its top level: "DEVICE: FILE:LINE imports PACKAGE"; "". One imported as the first
        statement of a top-level `try` is added to `maybe` instead."""
        for node in body:
            for name in _imported_names(node):
                top = name.split(".")[0]
                if top in BACKEND_PACKAGES:
                    return f"{BACKEND_PACKAGES[top]}: {module.path}:{node.lineno} imports {name}"
            if isinstance(node, ast.Try) and node.body and not maybe:
                first = node.body[0]
                top = next((name.split(".")[0] for name in _imported_names(first)
                            if name.split(".")[0] in BACKEND_PACKAGES), None)
                if top is not None:
                    maybe.append(f"{BACKEND_PACKAGES[top]}: {module.path}:{first.lineno} imports {top}")
        for found_path in [*texts, *self._imports_reached(module, body)]:
            text = self.tree_text(found_path, self.launch_path) or ""
            if not any(name in text for name in BACKEND_PACKAGES):
                continue
            match = _BACKEND_IMPORT.search(text)
            if match:
                line = text.count("\n", 0, match.start()) + 1
                return f"{BACKEND_PACKAGES[match[1]]}: {found_path}:{line} imports {match[1]}"
            match = _BACKEND_TRY_IMPORT.search(text) if not maybe else None
            if match:
                line = text.count("\n", 0, match.start(1)) + 1
                maybe.append(f"{BACKEND_PACKAGES[match[1]]}: {found_path}:{line} imports {match[1]}")
        return ""

    def _imports_reached(self, module: _Module, body: list[ast.stmt]) -> list[str]:
        """The tree's files that the imports among `body` name and, in turn, the module-level imports of those files
        (_IMPORT_DEPTH deep, _IMPORTED_FILES files at most): each runs when the script starts. MindSpeed-LLM's
        posttrain_gpt.py imports `mindspeed_llm`, whose `__init__` imports `mindspeed_llm.tasks.megatron_adaptor`,
        which imports torch_npu (two of its forks' NPU launches had been given the CUDA allocator's advice); a fork's
        posttrain_gpt.py reaches it four imports deep (launcher -> sft -> sft_trainer -> training.utils). A module
        reached so is parsed for its top level; its whole tree is walked only if a call is followed into it. A
        module's top level's are kept with the parsed modules: three questions of each script ask them."""
        key = ("imports reached", module.path) if body is module.top_level else None
        if key is not None and key in self.modules:
            found, added = self.modules[key]
            self.search_paths.extend(p for p in added if p not in self.search_paths)  # (as reading them adds)
            return found
        before = list(self.search_paths)
        found = self._reached_files(module, body)
        if key is not None:
            self.modules[key] = found, [p for p in self.search_paths if p not in before]
        return found

    def _reached_files(self, module: _Module, body: list[ast.stmt]) -> list[str]:
        return list(self._reach(module, body, _IMPORT_DEPTH, _IMPORTED_FILES))

    def _reach(self, module: _Module, body: list[ast.stmt], depth: int, most: int):
        """The tree's files the imports among `body` name, then theirs, `depth` levels deep and `most` files at most,
        each once, level by level (a generator: a search may stop at the first file it wants)."""
        found = self._imported_files(module, body, every=True)  # (all of the first level: the cap is on the rest)
        yield from found
        level, seen = found, set(found)
        for _ in range(depth - 1):
            deeper: list[str] = []
            for path in level:
                if len(seen) >= most:
                    break
                inner = self._module(path)
                for p in self._imported_files(inner, inner.top_level, every=True) if inner is not None else ():
                    if p not in seen and len(seen) < most:
                        seen.add(p)
                        deeper.append(p)
                        yield p
            level = deeper

    def _imported_files(self, module: _Module, body: list[ast.stmt], every: bool = False) -> list[str]:
        """The tree's files the imports among `body` (statements of `module`) name (`from a.b import c`: a/b.py,
        a/b/__init__.py or a/b/c.py), looked for from the module's folder and each folder above it, then on the
        paths it adds to sys.path; each once. `every`: each of those files that exists, not the first.

        A module's top level's are kept with the parsed modules, by what they depend on besides the tree's texts
        (the paths on sys.path): every script whose imports reach a module asks again (Pai-Megatron-Patch a098ca5:
        1,024 asks for 364 answers, 0.3 s of its linking)."""
        key = ("imported files", module.path, every, tuple(self.search_paths)) if body is module.top_level else None
        if key is not None:
            held = self.modules.get(key)
            if held is not None:
                return list(held)
        found = self._imported_files_of(module, body, every)
        if key is not None:
            self.modules[key] = tuple(found)
        return found

    def _imported_files_of(self, module: _Module, body: list[ast.stmt], every: bool) -> list[str]:
        names: list[tuple[str, str]] = []  # (module as written, a name imported from it or "")
        for node in body:
            if isinstance(node, ast.ImportFrom):
                source = "." * node.level + (node.module or "")
                names.extend((source, alias.name) for alias in node.names)
            elif isinstance(node, ast.Import):
                names.extend((alias.name, "") for alias in node.names)
        found: list[str] = []
        for source, name in names:
            if source.lstrip(".").split(".")[0] in BACKEND_PACKAGES:
                continue  # (the module's own text says so)
            for path in self._candidates(module.path, source, name):
                if path not in found and self.tree_text(path, self.launch_path) is not None:
                    found.append(path)
                    if not every:
                        break
        return found

    def _candidates(self, importer: str, source: str, name: str) -> list[str]:
        parts = [part for part in source.lstrip(".").split(".") if part]
        out = []
        for base in self._bases(importer, source):
            stem = posixpath.join(base, *parts) if parts else base
            tails = [stem + ".py", posixpath.join(stem, "__init__.py")]
            if name:
                tails.append(posixpath.join(stem, name + ".py"))
            out.extend(posixpath.normpath(path) for path in tails if _inside(path))
        return out

    def _reached(self, path: str) -> list[tuple[_Module, ast.AST, bool]]:
        """(module, node, certain) for every node of the module's top level and of the tree's functions its calls
        reach, each function once (twice where a call every run makes reaches it after another did), at most
        `_MAX_FUNCTIONS` of them. `certain`: every run of the script reaches the node (`_certain_nodes`). Kept with
        the parsed modules: module_writes and module_run_facts each walk a script's reach from the same start (a
        reader of their own), and a launch of a Megatron-LM style script asks both."""
        key = ("reached", path)
        if key not in self.modules:
            self.modules[key] = list(self._walk(path))
        return self.modules[key]

    def _walk(self, path: str):
        module = self._module(path)
        bodies = [] if module is None else [(module, module.top_level, True)]
        followed: set[tuple[str, str, bool]] = set()
        while bodies:
            module, body, certain = bodies.pop()
            for node, sure in _certain_nodes(body, certain, lambda call: self._checks_arguments(module, call)):
                yield module, node, sure
                if not isinstance(node, ast.Call):
                    continue
                callees = self._callees(module, node.func)
                sure = sure and len(callees) == 1  # (a name imported on several branches: the arguments choose)
                for callee in callees:
                    key = (callee[0].path, callee[1], sure)
                    if key not in followed and len(followed) < _MAX_FUNCTIONS:
                        followed.add(key)
                        bodies.append((callee[0], callee[0].functions[callee[1]].body, sure))

    def _checks_arguments(self, module: _Module, call: ast.Call) -> bool:
        """Whether `call` runs Megatron's validation of the parsed arguments (`initialize_megatron`, `validate_args`,
        or training, which runs them), itself or in the tree's functions it calls: a value the code sets after it is
        not the one Megatron checked (Megatron-LM's `export.py` sets `args.use_cpu_initialization` after
        `initialize_megatron`). Open past `_MAX_FUNCTIONS` functions: then it may."""
        name = _call_name(call.func).rsplit(".", 1)[-1]
        if name in _CHECKING_CALLS or name.startswith(_TRAINING_PREFIXES):
            return True
        for callee in self._callees(module, call.func):
            if callee not in self.checking:
                if len(self.checking) >= _MAX_FUNCTIONS:
                    return True
                self.checking[callee] = False  # (recursion)
                body = callee[0].functions[callee[1]].body
                self.checking[callee] = any(self._checks_arguments(callee[0], inner) for inner in _calls(body))
            if self.checking[callee]:
                return True
        return False

    def _callees(self, module: _Module, func: ast.expr) -> list[tuple[_Module, str]]:
        """The tree's functions a call of `func` may run (each a name imported on several branches may be)."""
        if isinstance(func, ast.Name):
            if func.id in module.functions:
                return [(module, func.id)]
            sources = module.several_imports.get(func.id) or \
                ([module.imports[func.id]] if func.id in module.imports else [])
        elif isinstance(func, ast.Attribute):
            dotted = _dotted(func.value, module.module_imports)
            if dotted is None and isinstance(func.value, ast.Name) and func.value.id in module.imports:
                # `from rl import setup` then `setup.defaults(args)`: a function of a submodule of the tree
                submodule = self._resolve(module.path, *module.imports[func.value.id])
                found = submodule is not None and submodule[1] is None and func.attr in submodule[0].functions
                return [(submodule[0], func.attr)] if found else []
            sources = [] if dotted is None else [(dotted, func.attr)]
        else:
            return []
        found = (self._imported_function(module, source, original) for source, original in sources)
        return [callee for callee in found if callee is not None]

    def _imported_function(self, module: _Module, source: str, original: str,
                           hops: int = 0) -> tuple[_Module, str] | None:
        """The tree's function `from source import original` names in `module` (through re-exports), else None."""
        if source.split(".")[0] == "megatron":
            return None
        target = self._resolve(module.path, source, original)
        if target is None or target[1] is None:
            return None
        target_module, name = target
        if name in target_module.functions:
            return target_module, name
        if name in target_module.imports and hops < 8:
            return self._imported_function(target_module, *target_module.imports[name], hops=hops + 1)
        return None

    def _module(self, path: str) -> _Module | None:
        if path not in self.modules:
            text = self.tree_text(path, self.launch_path)
            try:
                self.modules[path] = None if text is None else _Module(path, ast.parse(text))
            except (SyntaxError, ValueError, RecursionError):
                self.modules[path] = None
        module = self.modules[path]
        if module is not None:  # its top level ran on import: what it adds to sys.path is there from now on
            self.search_paths.extend(p for p in module.search_paths if p not in self.search_paths)
        return module

    def _calls_train(self, module: _Module, body: list[ast.stmt], stack: tuple) -> bool | None:
        """True if `body` reaches a training call; None if it calls code whose reach is unknown."""
        open_ = False
        for call in _calls(body):
            func = call.func
            if isinstance(func, ast.Name):
                answer = True if func.id in self.calls else self._function_trains(module, func.id, stack)
            elif isinstance(func, ast.Attribute):
                if func.attr in self.calls:
                    if self._method_trains(module, body, func, stack) is False:
                        continue
                    return True
                # `module.function(...)` of an imported module is followed; a method only by its name
                dotted = _dotted(func.value, module.module_imports)
                answer = False if dotted is None else self._imported_trains(module, dotted, func.attr, stack)
            else:
                continue
            if answer:
                return True
            open_ = open_ or answer is None
        return None if open_ else False

    def _function_trains(self, module: _Module, name: str, stack: tuple, hops: int = 0) -> bool | None:
        if name in module.functions:
            return self._follow(module, name, stack)
        if name in module.classes or name not in module.imports:
            return False  # a class of this module (its methods are judged by name), a builtin, a local
        if name in module.several_imports:  # the run's arguments choose which
            imports = module.several_imports[name]
            taken = [binding for binding, tests in imports.items() if self._may_take(tests)]
            answers = {self._imported_trains(module, source, original, stack, hops)
                       for source, original in taken or imports}
            if len(answers) == 1:
                return answers.pop()
            self.chosen = self.chosen or True in answers
            return None
        source, original = module.imports[name]
        return self._imported_trains(module, source, original, stack, hops)

    def _may_take(self, places: list[tuple]) -> bool:
        """Whether a run of this launch may reach one of the places an import stands (the `if` tests on the way to
        each): False only where each place lies under a test the launch's own argument decides against
        (`args.task == 'RACE'` for `--task WIKITEXT2`)."""
        if self.argument is None:
            return True
        return any(all(_decided(test, self.argument) in (taken, None) for test, taken in tests) for tests in places)

    def _imported_trains(self, module: _Module, source: str, original: str, stack: tuple,
                         hops: int = 0) -> bool | None:
        if original in self.calls:
            return True
        if source.split(".")[0] == "megatron":
            # megatron's packages train only through TRAINING_CALLS and their variants (Bridge's
            # `pretrain_megatron_mimo`): judged by name, not followed
            return original.startswith(_TRAINING_PREFIXES)
        target = self._resolve(module.path, source, original)
        if target is None and "." in source.lstrip(".") and not source.startswith(".") and \
                self._resolve(module.path, source.split(".")[0], "") is not None:
            # a module the tree's own package does not have (Pai-Megatron-Patch's evaluation examples import
            # megatron_patch.data.evaluate_dataset, long gone): the import fails, the call never runs
            return False
        if target is None and source.startswith(".") and source.lstrip(".") and not any(
                self.tree_text(path, self.launch_path) is not None
                for path in self._candidates(module.path, source, "")):
            # the same for a module its own package lacks, imported relatively (a Pai-Megatron-Patch fork's tokenizer
            # package imports `.icetk_glm130b_tokenizer`, a file it dropped); one that is there and does not parse
            # stays open
            return False
        if target is None:  # not in the tree: a class is built (its methods are judged by name when called)
            top = source.split(".")[0]
            known = not source.startswith(".") and (top in _NOT_TRAINING | _FITS_NO_MODEL or
                                                    top.startswith("pretrain_"))
            return False if known or original[:1].isupper() else None
        target_module, target_name = target
        if target_name is None:
            return False  # a submodule, called as a function? nothing to follow
        if target_name in target_module.functions:
            return self._follow(target_module, target_name, stack)
        if target_name in target_module.imports and hops < 8:  # a re-export
            return self._function_trains(target_module, target_name, stack, hops + 1)
        if target_name in target_module.classes:
            return False
        return None if "*" in target_module.imports or hops >= 8 else False  # a star import hides it

    def _method_trains(self, module: _Module, body: list[ast.stmt], func: ast.Attribute,
                       stack: tuple) -> bool | None:
        """A method named like training (`x.train()`), by what `x` is where `body` binds it once
        (`x = A.b(...)`): False for an object of a library that fits no PyTorch model (_FITS_NO_MODEL); for one
        the tree's classes build, their methods of that name, followed (Megatron-LM's Retro preprocessing calls
        `IndexFactory.get_index(...).train()`, whose `train` fits a faiss index); True (by its name) otherwise.
        `A(...)` looks in class A only; a factory `A.b(...)` in the classes of the tree that A's methods name."""
        built = _bound_call(func.value, body)
        root = _root_name(built.func if built is not None else func.value)
        if root is None:
            return True
        source = module.module_imports.get(root) or module.imports.get(root, ("",))[0]
        if source.lstrip(".").split(".")[0] in _FITS_NO_MODEL:
            return False
        found = self._tree_class(module, root) if built is not None else None
        if found is None:
            return True
        cls_module, cls = found
        if isinstance(built.func, ast.Name):
            owners = [(cls_module, cls)]
        else:  # the classes a factory's methods name (`{"flat": FlatIndex}[kind]()`)
            names = sorted({node.id for method in cls_module.methods[cls].values() for node in ast.walk(method)
                            if isinstance(node, ast.Name)})
            owners = [found for found in (self._tree_class(cls_module, name) for name in names) if found]
        methods = [(m, f"{name}.{func.attr}", m.methods[name][func.attr]) for m, name in owners
                   if func.attr in m.methods[name]]
        if not methods:
            return True  # inherited (torch.nn.Module.train sets the training mode): by its name
        answers = set()
        for m, key, node in methods:
            if (m.path, key) in self.followed or (m.path, key) in stack:
                continue
            if len(self.followed) >= _MAX_FUNCTIONS:
                return None
            self.followed.add((m.path, key))
            answers.add(self._calls_train(m, node.body, stack + ((m.path, key),)))
        return True if True in answers else None if None in answers else False

    def _tree_class(self, module: _Module, name: str, hops: int = 0) -> tuple[_Module, str] | None:
        """(module, class) where `name` in `module` is a class of the tree (through re-exports), else None."""
        if name in module.classes:
            return module, name
        if name not in module.imports or name in module.several_imports or hops >= 8:
            return None
        target = self._resolve(module.path, *module.imports[name])
        if target is None or target[1] is None:
            return None
        return self._tree_class(target[0], target[1], hops + 1)

    def _follow(self, module: _Module, name: str, stack: tuple) -> bool | None:
        key = (module.path, name)
        if key in self.followed or key in stack:
            return False  # already answered False (a True ends the search) or recursion
        if len(self.followed) >= _MAX_FUNCTIONS:
            return None
        self.followed.add(key)
        return self._calls_train(module, module.functions[name].body, stack + (key,))

    def _resolve(self, importer: str, source: str, original: str) -> tuple[_Module, str | None] | None:
        """(module, name in it) for `from source import original` when the tree holds it, else None.

        Which file `source` is, is kept with the parsed modules, by the paths on sys.path it depends on: the calls of
        every script a launch runs resolve the same imports again (Pai-Megatron-Patch a098ca5: 10,542 for 942)."""
        key = ("module of", importer, source, tuple(self.search_paths))
        if key not in self.modules:
            self.modules[key] = self._module_of(importer, source)
        found = self.modules[key]
        if found is None:
            return None
        stem, path = found
        module = self._module(path)  # (read again: what its top level adds to sys.path, as the search added it)
        sub = None if _defines(module, original) else \
            self._module(posixpath.normpath(posixpath.join(stem, original + ".py")))
        return (sub, None) if sub is not None else (module, original)

    def _module_of(self, importer: str, source: str) -> tuple[str, str] | None:
        """(the folder or file stem, the path) of the first of the tree's files `source` may be that parses."""
        dotted = source.lstrip(".")
        parts = dotted.split(".") if dotted else []
        for base in self._bases(importer, source):
            stem = posixpath.join(base, *parts) if parts else base
            for path in (stem + ".py", posixpath.join(stem, "__init__.py")):
                if _inside(path) and self._module(posixpath.normpath(path)) is not None:
                    return stem, posixpath.normpath(path)
        return None

    def _bases(self, importer: str, source: str) -> list[str]:
        """The folders `from source import ...` in `importer` is looked for in: a relative import's package; else the
        script's own folder first (it is first on sys.path), then the folders above it up to the repository root,
        then what the modules read added to sys.path."""
        level = len(source) - len(source.lstrip("."))
        if level:
            base = posixpath.dirname(importer)
            for _ in range(level - 1):
                base = posixpath.dirname(base)
            return [base]
        bases, folder = [], posixpath.dirname(importer)
        while True:
            bases.append(folder)
            if posixpath.dirname(folder) == folder:
                break
            folder = posixpath.dirname(folder)
        return bases + [path for path in self.search_paths if path not in bases]


def _patches_parser(text: str) -> bool:
    """Whether `text` replaces Megatron-LM's parse_args (_PARSER_PATCH). Each way names `parse_args`: a text without
    it is not searched (the pattern has no literal start, and each script asks of every file its imports reach:
    Pai-Megatron-Patch a098ca5, 1,050 searches, 0.23 s)."""
    return "parse_args" in text and _PARSER_PATCH.search(text) is not None


def _imported_names(node: ast.stmt) -> list[str]:
    """The modules an import statement imports (`import a.b` -> a.b; `from a import b` -> a); [] for another."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and not node.level and node.module:
        return [node.module]
    return []


def _environment_test(test: ast.expr) -> tuple[str, ast.expr, str, bool] | None:
    """(variable, its read, the literal, whether `==`) for a test comparing an environment variable with a string
    literal (`os.getenv("NAME"[, "default"]) == "x"`, `!=`, `os.environ.get`, `os.environ["NAME"]`); None else."""
    if not isinstance(test, ast.Compare) or len(test.ops) != 1 or not isinstance(test.ops[0], (ast.Eq, ast.NotEq)):
        return None
    read, literal = test.left, test.comparators[0]
    if isinstance(read, ast.Constant):
        read, literal = literal, read
    name = python_inputs.environment_variable(read)
    if name is None or not isinstance(literal, ast.Constant) or not isinstance(literal.value, str):
        return None
    return name, read, literal.value, isinstance(test.ops[0], ast.Eq)


def _environment_branch(node: ast.If, env: Callable[[str], object] | None) -> bool | None:
    """Whether the launch takes the body of an `if` on an environment variable (_environment_test), by the value
    `env` gives the variable; None where the test is another or the value is not known."""
    found = _environment_test(node.test) if env is not None else None
    if found is None:
        return None
    name, read, literal, equal = found
    value = env(name)
    if value is ENV_UNKNOWN:
        return None
    if value is None:
        if isinstance(read, ast.Subscript):
            return None  # `os.environ["NAME"]` raises KeyError where it is unset
        default = read.args[1] if len(read.args) > 1 else None
        if default is not None and not (isinstance(default, ast.Constant) and isinstance(default.value, str)):
            return None
        value = default.value if default is not None else None
    return (value == literal) == equal


def _dotted(node: ast.expr, module_imports: dict[str, str]) -> str | None:
    """`a.b` in `a.b.f()` as the imported module it names, or None (an object, not a module)."""
    names: list[str] = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in module_imports:
        return None
    return ".".join([module_imports[node.id], *reversed(names)])


def _bound_call(node: ast.expr, body: list[ast.stmt]) -> ast.Call | None:
    """The call that binds the name `node` in `body` where one assignment `name = call(...)` does, else None."""
    if not isinstance(node, ast.Name):
        return None
    values = [stmt.value for stmt in _nodes(body) if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and
              any(isinstance(target, ast.Name) and target.id == node.id
                  for target in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]))]
    return values[0] if len(values) == 1 and isinstance(values[0], ast.Call) else None


def _root_name(node: ast.expr) -> str | None:
    """`a` in `a`, `a.b.c` or `a.b(...).c`, else None."""
    while isinstance(node, (ast.Attribute, ast.Call)):
        node = node.value if isinstance(node, ast.Attribute) else node.func
    return node.id if isinstance(node, ast.Name) else None


def _starts_ray(module: _Module, func: ast.expr) -> bool:
    """Whether a call of `func` is Ray's `init` (`ray.init`, `import ray as r; r.init`, `from ray import init`)."""
    if isinstance(func, ast.Attribute):
        return func.attr == "init" and _dotted(func.value, module.module_imports) == "ray"
    return isinstance(func, ast.Name) and module.imports.get(func.id) == ("ray", "init")


def _defines(module: _Module, name: str) -> bool:
    return name in module.functions or name in module.imports or name in module.classes


def _inside(path: str) -> bool:
    return not posixpath.normpath(path).startswith("../")


class _Module:
    def __init__(self, path: str, tree: ast.Module) -> None:
        self.path = path
        self.functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        self.classes: set[str] = set()
        self.methods: dict[str, dict[str, ast.FunctionDef | ast.AsyncFunctionDef]] = {}  # class -> name -> def
        self.top_level: list[ast.stmt] = []
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions[node.name] = node
            elif isinstance(node, ast.ClassDef):
                self.classes.add(node.name)
                self.methods[node.name] = {item.name: item for item in node.body
                                           if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))}
            else:
                self.top_level.append(node)
        self.search_paths = _sys_path_entries(path, self.top_level)
        self._tree: ast.Module | None = tree  # (walked for its imports on first use: a module only an import
        self._imports: tuple | None = None   # reaches, looked at for its top level alone, is never walked)

    @property
    def imports(self) -> dict[str, tuple[str, str]]:
        """Local name -> (module as written, name there), for imports anywhere (a function's own lazy import too)."""
        return self._walked()[0]

    @property
    def module_imports(self) -> dict[str, str]:
        """`import a.b as m`: m -> "a.b"; `import a.b`: a -> "a"."""
        return self._walked()[1]

    @property
    def several_imports(self) -> dict[str, dict[tuple[str, str], list[tuple]]]:
        """A name imported from more than one place, each (branches choosing what `main` is: tasks/main.py's
        `if args.task == 'RACE': from race.finetune import main` / `elif ...: from orqa.evaluate import main`),
        with the `if` tests on the way to each import: ((test, True where in its body), ...) per import of it."""
        return self._walked()[2]

    def _walked(self) -> tuple:
        if self._imports is None:
            imports: dict[str, tuple[str, str]] = {}
            module_imports: dict[str, str] = {}
            bindings: dict[str, dict[tuple[str, str], list[tuple]]] = {}  # name -> (module, name) -> their tests
            todo: collections.deque[tuple[ast.AST, tuple]] = collections.deque([(self._tree, ())])
            # (ast.walk's order, keeping the `if` tests each node lies under; only the nodes that can hold a
            # statement are walked: an import is one, and no expression holds one)
            while todo:
                node, tests = todo.popleft()
                if isinstance(node, ast.If):
                    todo.extend((child, tests + ((node.test, True),)) for child in node.body)
                    todo.extend((child, tests + ((node.test, False),)) for child in node.orelse)
                    continue
                todo.extend((child, tests) for child in ast.iter_child_nodes(node)
                            if isinstance(child, _HOLDS_STATEMENTS))
                if isinstance(node, ast.ImportFrom):
                    source = "." * node.level + (node.module or "")
                    for alias in node.names:
                        name = alias.asname or alias.name
                        imports[name] = (source, alias.name)
                        bindings.setdefault(name, {}).setdefault((source, alias.name), []).append(tests)
                elif isinstance(node, ast.Import):
                    for alias in node.names:
                        if alias.asname:
                            module_imports[alias.asname] = alias.name
                        else:
                            top = alias.name.split(".")[0]
                            module_imports.setdefault(top, top)
            several = {name: found for name, found in bindings.items() if len(found) > 1}
            self._imports, self._tree = (imports, module_imports, several), None
        return self._imports


def _sys_path_entries(path: str, body: list[ast.stmt]) -> list[str]:
    """The folders (relative to the tree's root, "" for the root) a module's top level adds to sys.path from its own
    file's path: `sys.path.append(os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))),
    "examples"))`, through top-level names too (Pai-Megatron-Patch's checkpoint convertors import the model providers
    of its examples so). Other paths (the working directory's, an environment variable's) are not known."""
    names: dict[str, str | None] = {}

    def value(node: ast.expr) -> str | None:
        if isinstance(node, ast.Name):
            return path if node.id == "__file__" else names.get(node.id)
        if not isinstance(node, ast.Call) or node.keywords:
            return None
        function, args = _call_name(node.func), node.args
        if function in ("os.path.abspath", "os.path.realpath", "os.path.normpath") and len(args) == 1:
            return value(args[0])
        if function == "os.path.dirname" and len(args) == 1:
            inner = value(args[0])
            return None if not inner else posixpath.dirname(inner)  # (the root's folder is outside the tree)
        if function == "os.path.join" and args and all(isinstance(a, ast.Constant) and isinstance(a.value, str)
                                                        for a in args[1:]):
            base = value(args[0])
            parts = [a.value for a in args[1:]]
            if base is None or any(part.startswith("/") for part in parts):
                return None
            joined = posixpath.normpath(posixpath.join(base or ".", *parts))
            return None if joined == ".." or joined.startswith("../") else "" if joined == "." else joined
        return None

    found: list[str] = []
    for node in body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            names[node.targets[0].id] = value(node.value)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and node.value.args and \
                _call_name(node.value.func) in ("sys.path.append", "sys.path.insert"):
            entry = value(node.value.args[-1])
            if entry is not None and entry not in found:
                found.append(entry)
    return found


def _decided(test: ast.expr, argument: Callable[[str], object]) -> bool | None:
    """The value of `args.NAME == 'x'`, `!=`, `in [...]` or `not in (...)` with literals, for the launch's value of
    the argument NAME (`argument(NAME)`: a literal, None where the launch's value is not known); None otherwise."""
    if not isinstance(test, ast.Compare) or len(test.ops) != 1 or not isinstance(test.left, ast.Attribute):
        return None
    op, right = type(test.ops[0]), test.comparators[0]
    if op in (ast.Eq, ast.NotEq) and isinstance(right, ast.Constant):
        literals = [right.value]
    elif op in (ast.In, ast.NotIn) and isinstance(right, (ast.List, ast.Tuple, ast.Set)) and \
            all(isinstance(e, ast.Constant) for e in right.elts):
        literals = [e.value for e in right.elts]
    else:
        return None
    value = argument(test.left.attr)
    return None if value is None else (value in literals) == (op in (ast.Eq, ast.In))


def _calls(body: list[ast.stmt]):
    """The calls in `body`, not those inside functions or classes it defines."""
    return (node for node in _nodes(body) if isinstance(node, ast.Call))


def _certain_nodes(body: list[ast.stmt], certain: bool, checks: Callable[[ast.Call], bool]):
    """`_nodes(body)` as (node, certain): whether a run of `body` that is itself certain reaches the node before
    Megatron validates the arguments. Those are its statements that are no compound statement, up to the first one
    that may leave it early (a `return`, a `raise` or an exit inside a compound statement, or one of its own) or
    makes a call that `checks`, and the call each of them makes as its whole value (`main()`,
    `args = parse_args()`, `return _defaults(args)`) with the calls among that call's arguments; a `__main__` block
    counts as the top level it is in (the script is run as a program)."""
    ends = False
    for stmt in body:
        checking = {id(call) for call in _calls([stmt]) if checks(call)} if certain and not ends else set()
        if certain and not ends and main_block(stmt):
            yield from ((node, False) for node in _nodes([stmt.test]))
            yield from _certain_nodes(stmt.body, True, checks)
            yield from _certain_nodes(stmt.orelse, False, checks)
        else:
            sure = certain and not ends and isinstance(stmt, _SIMPLE)
            calls = _calls_before_checks(getattr(stmt, "value", None), checking) if sure else set()
            for node in _nodes([stmt]):
                # (`args.x = 1` is certain unless its own value validates first)
                yield node, sure and (id(node) in calls or node is stmt and not checking)
        ends = ends or not certain or bool(checking) or isinstance(stmt, (ast.Return, ast.Raise)) or \
            not isinstance(stmt, _SIMPLE) and _may_leave(stmt)


_SIMPLE = (ast.Expr, ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Return, ast.Import, ast.ImportFrom, ast.Pass,
           ast.Global, ast.Nonlocal, ast.Delete, ast.Assert)
_EXITS = frozenset({"exit", "sys.exit", "os._exit", "quit"})


def _evaluated_calls(node: ast.expr | None):
    """A call and the calls among its arguments, which Python evaluates before it (`train(parse_args())`)."""
    if isinstance(node, ast.Call):
        yield node
        for argument in (*node.args, *(k.value for k in node.keywords)):
            yield from _evaluated_calls(argument.value if isinstance(argument, ast.Starred) else argument)


def _calls_before_checks(value: ast.expr | None, checking: set[int]) -> set[int]:
    """The ids of the `_evaluated_calls` of a statement's value that run before Megatron validates the arguments:
    those none of whose arguments makes a call in `checking` (`defaults(initialize_megatron())` runs `defaults`
    after it)."""
    calls = list(_evaluated_calls(value))
    return {id(call) for call in calls
            if not any(id(inner) in checking for inner in itertools.islice(_evaluated_calls(call), 1, None))}


def _may_leave(stmt: ast.stmt) -> bool:
    """Whether a compound statement may leave its function (or the program) early."""
    return any(isinstance(node, (ast.Return, ast.Raise)) or isinstance(node, ast.Call) and _call_name(node.func) in _EXITS
               for node in _nodes([stmt]))


def _literal(node: ast.AST) -> object:
    """The constant an assignment sets (`args.x = True`, `args.x: int = 4`, `-1`), else UNREAD."""
    value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
    if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.USub) and isinstance(value.operand, ast.Constant) \
            and type(value.operand.value) in (int, float):
        return -value.operand.value
    if isinstance(value, ast.Constant) and type(value.value) in (bool, int, float, str):
        return value.value
    return UNREAD


_HOLDS_STATEMENTS = (ast.stmt, ast.excepthandler, ast.match_case)  # (what a statement's body, handlers, cases hold)


def _stored_attributes(node: ast.AST) -> list[str]:
    """The attributes a statement or call sets on the parsed arguments: `args.x = ...`, `args.x += ...`, `args.x,
    args.y = ...`, `setattr(args, "x", ...)`, on a name Megatron's convention gives them (`args = get_args()`, a
    parameter `args`, `megatron_args`). Another object's attribute is not one: Megatron Bridge's MIMO example sets
    `cfg.recompute_granularity = "full"` on a TransformerConfig it builds, which is not the command line's."""
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Name) and node.func.id == "setattr" and len(node.args) == 3 and \
                _holds_arguments(node.args[0]) and isinstance(node.args[1], ast.Constant) and \
                isinstance(node.args[1].value, str):
            return [node.args[1].value]
        return []
    if isinstance(node, ast.Assign):
        targets = [t for target in node.targets for t in (target.elts if isinstance(target, ast.Tuple) else [target])]
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        targets = [node.target]
    else:
        return []
    return [t.attr for t in targets if isinstance(t, ast.Attribute) and _holds_arguments(t.value)]


_ENVIRONMENT_CALLS = frozenset({"setdefault", "putenv", "_set_allocator_settings"})  # (_environment_stores)


def _environment_stores(node: ast.AST) -> list[tuple[str, object, bool]]:
    """(variable, its literal value or UNREAD, only where unset) for what a statement or call sets in the process's
    environment (see environment_writes)."""
    def text(value: ast.expr | None) -> object:
        return value.value if isinstance(value, ast.Constant) and isinstance(value.value, str) else UNREAD

    kind = type(node)
    if kind is ast.Assign:
        return [(target.slice.value, text(node.value), False) for target in node.targets
                if type(target) is ast.Subscript and _call_name(target.value) in ("os.environ", "environ")
                and isinstance(target.slice, ast.Constant) and isinstance(target.slice.value, str)]
    if kind is not ast.Call or type(node.func) is not ast.Attribute or node.keywords or \
            node.func.attr not in _ENVIRONMENT_CALLS:
        return []
    name, args = _call_name(node.func), node.args
    if name.endswith("_set_allocator_settings") and len(args) == 1:  # torch.cuda.memory._set_allocator_settings
        return [("PYTORCH_CUDA_ALLOC_CONF", text(args[0]), False)]
    if name in ("os.environ.setdefault", "environ.setdefault", "os.putenv") and len(args) == 2 and \
            isinstance(args[0], ast.Constant) and isinstance(args[0].value, str):
        return [(args[0].value, text(args[1]), name != "os.putenv")]
    return []


def _holds_arguments(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and (node.id == "args" or node.id.endswith("_args"))
