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
as before. The questions themselves are entry_scripts' (`trains`, `trains_given`, `builds_optimizer`).

Read with `ast` only; nothing is imported or run.
"""

from __future__ import annotations

import ast
import posixpath
import re
import sys
from typing import Callable

from offlint.sources.entry_modules import (MAX_FUNCTIONS, ModuleReach, ScriptModule, calls_in, dotted_module,
                                          imported_names)
from offlint.sources.python_roles import OTHER_FRAMEWORKS, PYTEST_FILE
from offlint.sources.python_syntax import _nodes

# Names whose call starts or runs training (a function or a method).
# (`train_batch`: DeepSpeed's pipeline engine runs a whole training step in it, forward, backward and the optimizer's.)
TRAINING_CALLS = frozenset({"pretrain", "finetune", "distill", "train", "fit", "train_step", "train_batch", "backward"})
TRAINING_PREFIXES = ("pretrain_", "finetune_", "distill_")  # megatron's variants of them
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
# Names whose call builds the optimizer: training does, and Megatron-LM's setup and megatron-core's builder (a
# checkpoint converter may call them to load an optimizer's state)
OPTIMIZER_CALLS = TRAINING_CALLS | {"setup_model_and_optimizer", "get_megatron_optimizer"}
# Libraries whose objects have training-named methods that fit no PyTorch model: a faiss index's `train` (k-means of
# its codebooks: Megatron-LM's Retro preprocessing), scikit-learn's `fit`, a tokenizer's or SentencePiece's `train`.
_FITS_NO_MODEL = frozenset({"faiss", "sklearn", "sentencepiece", "tokenizers", "gensim"})
_TORCH_IMPORT = re.compile(r"^[ \t]*(?:import|from)[ \t]+torch\b", re.MULTILINE)
# `trains`' answer for a script whose arguments choose what runs, training on some paths only (tasks/main.py's
# `--task`): a launch of it trains where it gives a flag only training reads (launch.TRAINING_ONLY_FLAGS)
ARGUMENTS_CHOOSE = "arguments choose"


class TrainingReach(ModuleReach):
    """Follows calls from an entry script's top level through the functions the tree defines to a training call."""

    def __init__(self, launch_path, tree_text, parsed: dict | None = None) -> None:
        super().__init__(launch_path, tree_text, parsed)
        self.followed: set[tuple[str, str]] = set()
        self.chosen = False  # a name imported on several branches, one of which trains, left the answer open
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

    def _other_framework(self, module: ScriptModule) -> bool:
        """Whether the script trains with another framework than PyTorch: its top level imports one (OTHER_FRAMEWORKS)
        and neither it nor a file of the tree its imports name imports torch (MLPerf v3.1's MXNet ResNet takes
        `--num-layers 50 --lr ... --optimizer ...`, flags a Megatron-LM launch has too)."""
        names = {name.split(".")[0] for node in module.top_level for name in imported_names(node)}
        if "torch" in names or not names & OTHER_FRAMEWORKS:
            return False
        return not any(_TORCH_IMPORT.search(self.tree_text(path, self.launch_path) or "")
                       for path in self._imported_files(module, module.top_level, every=True))

    def module_builds_optimizer(self, path: str) -> bool | str | None:
        self.calls = OPTIMIZER_CALLS
        return self.module_trains(path)

    def _calls_train(self, module: ScriptModule, body: list[ast.stmt], stack: tuple) -> bool | None:
        """True if `body` reaches a training call; None if it calls code whose reach is unknown."""
        open_ = False
        for call in calls_in(body):
            func = call.func
            if isinstance(func, ast.Name):
                answer = True if func.id in self.calls else self._function_trains(module, func.id, stack)
            elif isinstance(func, ast.Attribute):
                if func.attr in self.calls:
                    if self._method_trains(module, body, func, stack) is False:
                        continue
                    return True
                # `module.function(...)` of an imported module is followed; a method only by its name
                dotted = dotted_module(func.value, module.module_imports)
                answer = False if dotted is None else self._imported_trains(module, dotted, func.attr, stack)
            else:
                continue
            if answer:
                return True
            open_ = open_ or answer is None
        return None if open_ else False

    def _function_trains(self, module: ScriptModule, name: str, stack: tuple, hops: int = 0) -> bool | None:
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

    def _imported_trains(self, module: ScriptModule, source: str, original: str, stack: tuple,
                         hops: int = 0) -> bool | None:
        if original in self.calls:
            return True
        if source.split(".")[0] == "megatron":
            # megatron's packages train only through TRAINING_CALLS and their variants (Bridge's
            # `pretrain_megatron_mimo`): judged by name, not followed
            return original.startswith(TRAINING_PREFIXES)
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

    def _method_trains(self, module: ScriptModule, body: list[ast.stmt], func: ast.Attribute,
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
            if len(self.followed) >= MAX_FUNCTIONS:
                return None
            self.followed.add((m.path, key))
            answers.add(self._calls_train(m, node.body, stack + ((m.path, key),)))
        return True if True in answers else None if None in answers else False

    def _follow(self, module: ScriptModule, name: str, stack: tuple) -> bool | None:
        key = (module.path, name)
        if key in self.followed or key in stack:
            return False  # already answered False (a True ends the search) or recursion
        if len(self.followed) >= MAX_FUNCTIONS:
            return None
        self.followed.add(key)
        return self._calls_train(module, module.functions[name].body, stack + (key,))


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
