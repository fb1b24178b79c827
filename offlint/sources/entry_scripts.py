"""The questions linking asks of a Megatron-LM style launch's entry script in the linted tree, each answered from the
script's code and the tree's modules it reaches, once per script and run (`parsed`): whether it trains or builds
the optimizer (entry_training), what it sets on the parsed arguments and in its environment before Megatron
validates them, and whether it starts Ray (entry_writes), the accelerator it runs on, whether it needs a PyTorch
before 2.0, whether it replaces Megatron-LM's parse_args, and the YAML keys it takes out of its override file.
Where a module's imports and calls lead is entry_modules'.

Read with `ast` only; nothing is imported or run.
"""

from __future__ import annotations

import ast
import os
import posixpath
import re
from typing import Callable

from offlint.sources import python_inputs
from offlint.sources.entry_modules import EXITS, IMPORTED_FILES, ScriptModule, TreeText, imported_names
from offlint.sources.entry_training import ARGUMENTS_CHOOSE, TrainingReach
from offlint.sources.entry_writes import EnvironmentWrite, Write, WritesReach
from offlint.sources.python_syntax import _call_name, main_block
from offlint.sources.shell_paths import tree_copy
from offlint.sources.yaml_keys_taken import loads_yaml, taken_keys
from offlint.types import Unknown


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
    Megatron's own code is not followed (its rewrites are the rules' to model), nor past `MAX_FUNCTIONS`
    functions."""
    return _per_script(_Reach.module_writes, script, launch_path, tree_text, parsed, ())


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


# ... and from an import the `__main__` block makes (tasks/main.py's of the task's module: Megatron's
# race/finetune.py -> tasks/finetune_utils.py -> megatron/training.py -> megatron/optimizer/__init__.py ->
# optimizer.py -> clip_grads.py)
_DISPATCH_DEPTH = 6
# Megatron-LM's parse_args replaced: named to a patch registry (`"megatron.training.arguments.parse_args"`), assigned,
# or set with setattr
_PARSER_PATCH = re.compile(r"[\"']megatron(?:\.training)?\.arguments\.parse_args[\"']"
                           r"|\.parse_args[ \t]*=(?!=)|setattr\([^)\n]*[\"']parse_args[\"']")
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


def reads_yaml_with_pyyaml(script: str, launch_path: str, tree_text: TreeText, parsed: dict | None = None) -> bool:
    """Whether the entry `script`'s own module loads YAML with PyYAML (sources/yaml_keys_taken.py's loads_yaml);
    False where it is not in the tree."""
    return _per_script(_Reach.module_reads_yaml_with_pyyaml, script, launch_path, tree_text, parsed, False)


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


class _Reach(TrainingReach, WritesReach):
    """An entry script's reach, with every question's way of following it."""

    NOT_FOLLOWED = frozenset(BACKEND_PACKAGES)  # (an import of one is found in the importing module's own text)

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

    def _every_path_imports_torch_six(self, module: ScriptModule, body: list[ast.stmt]) -> str | None:
        """Where every path through `body` (a `__main__` block, an `if` branch of it) runs an import whose reach
        imports torch._six (tasks/main.py imports the module of the task `--task` names there, each reaching
        megatron/optimizer/clip_grads.py), where (as _torch_six_in); None where every path raises before one does;
        "" otherwise."""
        for node in body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found = self._torch_six_in(self._reach(module, [node], _DISPATCH_DEPTH, IMPORTED_FILES))
                if found:
                    return found
            elif isinstance(node, ast.If):
                branches = [self._every_path_imports_torch_six(module, branch) for branch in (node.body, node.orelse)]
                if all(found is None for found in branches):
                    return None
                if all(found != "" for found in branches) and any(branches):  # (each found, or raises)
                    return next(found for found in branches if found)
            elif isinstance(node, ast.Raise) or isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) \
                    and _call_name(node.value.func) in EXITS:
                return None  # (the path ends: `raise NotImplementedError(task)`, `exit()`)
        return ""

    def module_yaml_keys_taken(self, path: str) -> frozenset[str]:
        module = self._module(path)
        return frozenset() if module is None else taken_keys(module.functions, module.top_level)

    def module_reads_yaml_with_pyyaml(self, path: str) -> bool:
        module = self._module(path)
        return module is not None and loads_yaml(module.functions, module.top_level)

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

    def _backend_in(self, module: ScriptModule, body: list[ast.stmt], texts: list[str], maybe: list[str]) -> str:
        """Where `body` (statements of `module`), one of the files `texts` or a file its imports name imports a
        backend package at its top level: "DEVICE: FILE:LINE imports PACKAGE"; "". One imported as the first
        statement of a top-level `try` is added to `maybe` instead."""
        for node in body:
            for name in imported_names(node):
                top = name.split(".")[0]
                if top in BACKEND_PACKAGES:
                    return f"{BACKEND_PACKAGES[top]}: {module.path}:{node.lineno} imports {name}"
            if isinstance(node, ast.Try) and node.body and not maybe:
                first = node.body[0]
                top = next((name.split(".")[0] for name in imported_names(first)
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


def _patches_parser(text: str) -> bool:
    """Whether `text` replaces Megatron-LM's parse_args (_PARSER_PATCH). Each way names `parse_args`: a text without
    it is not searched (the pattern has no literal start, and each script asks of every file its imports reach:
    Pai-Megatron-Patch a098ca5, 1,050 searches, 0.23 s)."""
    return "parse_args" in text and _PARSER_PATCH.search(text) is not None


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
