"""Helper functions about how a unit sets its keys: known fields and did-you-mean suggestions (OFL003), defaults and
written values, which of two writes wins, the megatron-core version and the checks the tree's checkout makes."""

from __future__ import annotations

import re

from offlint import keys
from offlint.conditions.scope import UNKNOWN, Scope, needs_scope, truth
from offlint.estimate.oom import expandable_segments_entries
from offlint.sources.launch_torch import image_torch
from offlint.sources.mcore_source import CHECKS, GRAPHS_REFUSE_EXPANDABLE, LACKED
from offlint.sources.mlm_flags import BEFORE_2023_FLAGS
from offlint.types import Assignment, Defaults, OneOf, Unknown
from offlint.versions import parse_version


@needs_scope
def version_at_least(scope: Scope, text: str) -> bool:
    return scope.version >= parse_version(text)


@needs_scope
def checkout_checks(scope: Scope, name: str) -> bool:
    """Whether the checkout's own megatron-core makes the check `name` (sources/mcore_source.CHECK_TEXTS): checks
    added between releases, which no version number tells apart. False where no checkout source was read."""
    return name in (scope.version.names_from_source(CHECKS) or ())


@needs_scope
def checkout_lacks(scope: Scope, name: str) -> bool:
    """Whether the Megatron-LM checkout offlint read does not make the check `name` (mcore_source.REFUSAL_TEXTS): a
    fork that removed or changed it, or a commit from before it. False where no checkout was read (a release's
    checks apply)."""
    return name in (scope.version.names_from_source(LACKED) or ())


@needs_scope
def graphs_refuse_expandable(scope: Scope) -> object:
    """Whether the launch's CUDA graphs rule expandable_segments:True out: a Megatron-LM launch with graphs on, on a
    checkout whose validate_args refuses the option beside any graph whatever NCCL_GRAPH_REGISTER says
    (mcore_source.GRAPHS_REFUSE_EXPANDABLE: up to 0.15, and main snapshots labelled 0.16.0 until 2025-12-31).
    OFL301's advice, and its fix, would stop such a job at its start. Bridge does not run validate_args."""
    if scope.names.get("defaults") != Defaults.MLM_CLI.value or \
            GRAPHS_REFUSE_EXPANDABLE not in (scope.version.names_from_source(CHECKS) or ()):
        return False
    impl = scope.key("model.cuda_graph_impl")
    graphs = [UNKNOWN if impl is UNKNOWN else impl not in ("none", None),
              truth(scope.key("model.enable_cuda_graph")), truth(scope.key("model.external_cuda_graph"))]
    return True if True in graphs else UNKNOWN if UNKNOWN in graphs else False


@needs_scope
def malformed_expandable_segments(scope: Scope) -> object:
    """The `expandable_segments:VALUE` entry of the launch's allocator options that PyTorch refuses ("" where there is
    none): its option parser takes `True` or `False` there and nothing else, and stops the job when CUDA first
    allocates (torch 2.13: ValueError "Expected 'True' or 'False' at index 2 in ConfigTokenizer but got 'true'";
    earlier releases a RuntimeError). Blanks around it are allowed. Options offlint cannot read give "": a value
    is refused as written, never guessed (not even as possible under --strict: every launch with an open
    environment would be)."""
    for key in ("env.PYTORCH_CUDA_ALLOC_CONF", "env.PYTORCH_ALLOC_CONF"):
        for setting, entry in expandable_segments_entries(scope.key(key)):
            if setting not in ("True", "False"):
                return entry
    return ""


# The allocator options of other accelerators' PyTorch backends: a launch that sets one configures that backend's
# caching allocator, not CUDA's (torch_npu reads PYTORCH_NPU_ALLOC_CONF, Ascend's environment variable reference;
# torch_musa PYTORCH_MUSA_ALLOC_CONF, its MUSAAllocatorConfig). A device-visibility variable is no such sign: an
# MT-MegatronLM script for CUDA exports MUSA_VISIBLE_DEVICES, copied from its MUSA twin, and its code runs on CUDA.
OTHER_ACCELERATOR_VARIABLES = {"PYTORCH_NPU_ALLOC_CONF": "Ascend NPUs",
                               "PYTORCH_MUSA_ALLOC_CONF": "Moore Threads GPUs (MUSA)"}


# Variables only a PyTorch from some release on reads (PyTorch's "Miscellaneous Environment Variables" page lists
# TORCH_FORCE_WEIGHTS_ONLY_LOAD from 2.4 and TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD from 2.6): a launch exporting one was
# written for that PyTorch or a later one. Pai-Megatron-Patch exports the second, "for PyTorch >= 2.6", in launches of
# a Megatron-LM of 2023-05, whose torch.load calls fail on 2.6's default without it.
NEWER_TORCH_VARIABLES = {"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": (2, 6), "TORCH_FORCE_WEIGHTS_ONLY_LOAD": (2, 4)}


@needs_scope
def allocator_without_expandable_segments(scope: Scope) -> object:
    """Why the launch's PyTorch has no `expandable_segments` allocator option: its container image's tag says a
    release before 2.1 (NGC's up to 22.12 ship 1.x), whose CUDA caching allocator stops the job at its first
    allocation on any option but `max_split_size_mb` ("Unrecognized CachingAllocator option"). Megatron-DeepSpeed
    forks' functional tests run in NGC 21.12 (a helper's third-party sweep): OFL301's safe fix would have broken
    them. "" where its PyTorch has the option. Unknown where the tag says a 2023 NGC release before 23.10 (PyTorch
    2.0 or a 2.1 preview); and, where no image is named or its name says nothing, where the tree builds it or the
    environment from a PyTorch before 2.1 (Unit.pinned_torch: a Singularity image file's definition file of its
    name, launch_torch.definition_torch; the requirements.txt or Dockerfile nearest the launch), or where it loads a
    PyTorch environment module of such a version (`module load pytorch/1.12.1`), or the launch passes an
    option only a Megatron-LM from before 2023-09 runs with (before_2023_flag; Megatron-DeepSpeed, `--deepspeed`,
    still takes them in 2024) and exports no variable only a newer PyTorch reads (NEWER_TORCH_VARIABLES), nor does
    the tree pin a newer one for it (Unit.newer_torch). Where the launch's code imports torch._six, or its
    interpreter is a Python before 3.8 (Unit.old_torch), it runs on PyTorch 1.x only, whatever the image."""
    old = scope.names.get("old_torch") or ""
    if old:
        return f"it runs on PyTorch 1.x only: {old}"
    image = scope.names.get("container_image") or ""
    torch = image_torch(image) if image else None
    if isinstance(torch, Unknown):
        scope.unknown_because.append(f"its container image's PyTorch: {torch.reason}")
        return UNKNOWN
    if torch is not None:
        return "" if torch >= (2, 1) else f"its container image {image} ships PyTorch {torch[0]}.{torch[1]} or older"
    # no image, or one whose name says nothing: what the tree builds it or the environment from, or the launch's age
    pinned = scope.names.get("pinned_torch") or ""
    if pinned:  # (the environment the launch activates is built from it, most likely: not known for sure)
        scope.unknown_because.append(f"its PyTorch: {pinned}, before the option (2.1)")
        return UNKNOWN
    module = _torch_module(scope)
    if module and module[1] < (2, 1):  # (a virtual environment activated after it may hold another PyTorch)
        scope.unknown_because.append(f"its PyTorch: the launch loads the environment module {module[0]}, before the "
                                     f"option (2.1)")
        return UNKNOWN
    flag = before_2023_flag(scope) if not scope.names.get("deepspeed_pipeline") else ""
    # (a Megatron-LM of 2023-09 or older ran on PyTorch 2.0 or 1.x, most likely: not for sure; what says the PyTorch
    # is newer is looked up only for such a launch, as the finding names what its verdict read)
    if flag and not (module or _newer_torch_variable(scope) or scope.names.get("newer_torch")):
        scope.unknown_because.append(f"its PyTorch: the launch passes {flag}, which only a Megatron-LM from "
                                     f"before 2023-09 runs with ({BEFORE_2023_FLAGS[flag]}), of the time of "
                                     f"PyTorch 2.0 and older")
        return UNKNOWN
    return ""


_TORCH_MODULE = re.compile(r"(?i)(?:^|:)((?:py)?torch/v?(\d+)\.(\d+)[^:]*)")


def _torch_module(scope: Scope) -> tuple[str, tuple[int, int]] | None:
    """The PyTorch environment module the launch has loaded (`pytorch/1.12.1-cuda-11.7.0`, EasyBuild's
    `PyTorch/1.12.0-foss-2022a-CUDA-11.7.0`), from LOADEDMODULES (sources/shell_commands.environment_modules), and
    the version its name says; None where none is loaded."""
    loaded = scope.key("env.LOADEDMODULES")
    found = _TORCH_MODULE.search(loaded) if isinstance(loaded, str) else None
    return (found.group(1), (int(found.group(2)), int(found.group(3)))) if found else None


def _newer_torch_variable(scope: Scope) -> str:
    """A variable the launch exports that only a PyTorch with `expandable_segments` reads (NEWER_TORCH_VARIABLES);
    "" where it exports none."""
    return next((name for name in NEWER_TORCH_VARIABLES if scope.key(f"env.{name}") not in (None, UNKNOWN)), "")


def before_2023_flag(scope: Scope) -> str:
    """An option the launch passes on every path that only a Megatron-LM from before 2023-09 runs with
    (mlm_flags.BEFORE_2023_FLAGS), where no checkout was read (one read decides what it takes); "" otherwise."""
    return "" if scope.version.source_names else scope.names.get("before_2023_flag") or ""


@needs_scope
def other_accelerator(scope: Scope) -> object:
    """Where the launch runs on an accelerator other than a CUDA GPU, why ("Ascend NPUs: the launch sets
    PYTORCH_NPU_ALLOC_CONF"): its entry script's code imports that backend's package (Unit.accelerator), or its
    environment sets that backend's allocator options (OTHER_ACCELERATOR_VARIABLES); "" where neither says so,
    unknown where one of those variables is unknown, the code imports the package only where it is installed, or
    the launch sets a variable only another accelerator's runtime reads
    (entry_scripts.runtime_variables_accelerator)."""
    accelerator = scope.names.get("accelerator")
    if accelerator and not isinstance(accelerator, Unknown):
        return accelerator
    unknown = isinstance(accelerator, Unknown)  # (an allocator variable below still decides)
    for name, device in OTHER_ACCELERATOR_VARIABLES.items():
        value = scope.key(f"env.{name}")
        if value is UNKNOWN:
            unknown = True
        elif value is not None:
            return f"{device}: the launch sets {name}"
    if isinstance(accelerator, Unknown):
        scope.unknown_because.append(f"the accelerator: {accelerator.reason}")
    return UNKNOWN if unknown else ""


@needs_scope
def distributed_optimizer(scope: Scope) -> object:
    """Whether the run uses the distributed optimizer. In Megatron Bridge either flag turns it on (BR-4 syncs
    optimizer.use_distributed_optimizer and ddp.use_distributed_optimizer); in a plain megatron-core program
    get_megatron_optimizer decides from the OptimizerConfig alone (the DDP config's flag only lays out buffers)."""
    optimizer = truth(scope.key("optimizer.use_distributed_optimizer"))
    if scope.names.get("framework") == "megatron-core" or optimizer is True:
        return optimizer
    ddp = truth(scope.key("ddp.use_distributed_optimizer"))
    return True if ddp is True else UNKNOWN if UNKNOWN in (optimizer, ddp) else False


@needs_scope
def is_known_key(scope: Scope, key: str) -> bool:
    """Whether `key` may be a field of its section (OFL003). A section built from its own `_target_` (a config
    Megatron Bridge wrote out, `run_config.yaml`) takes its keys as that class's constructor arguments: offlint
    cannot list every class's fields (a Bridge provider from outside the tree, a newer megatron-core), and a key
    the class lacks fails loudly when the file is loaded, so its keys are not judged."""
    if not keys.unknown_field(key):
        return True
    target = scope.key(f"{key.partition('.')[0]}._target_")
    return isinstance(target, str) and target != ""


@needs_scope
def suggestion(scope: Scope, key: str) -> str:
    """The closest known key for a typo, or '' when nothing is close."""
    return keys.closest_field(key)


@needs_scope
def overrides(scope: Scope, key: str, other: str) -> object:
    """Whether `key` was set over `other` by an outer writer: from another file (a derived recipe elsewhere, a
    YAML file, a command line), by a function that calls the one that set `other` (its chain of calls is a
    proper prefix; a Bridge mutator's or a performance flag's own "by ..." step aside), or, where one writer
    copies both from workload records, from a record derived from the one `other` came from. Such a writer
    switching something off is overriding an earlier choice, not contradicting itself. False when either key is at
    its default; unknown when either value is."""
    if scope.key(key) is UNKNOWN or scope.key(other) is UNKNOWN:
        return UNKNOWN
    outer, inner = scope.lookup(key).assignment, scope.lookup(other).assignment
    if outer is None or inner is None:
        return False
    if outer.location.path != inner.location.path:
        return True
    (outer_calls, outer_records), (inner_calls, inner_records) = _writer(outer), _writer(inner)
    if outer_calls != inner_calls:
        return _proper_prefix(outer_calls, inner_calls)
    # One writer, copying both from workload records: `replace(BASE, cuda_graph_impl="none")` overrides what BASE
    # set (the records that passed a field on, outermost first: python_values.Record.made)
    return bool(outer_records) and _proper_prefix(outer_records, inner_records)


def _writer(a: Assignment) -> tuple[list[str], list[str]]:
    """An assignment's chain of calls (a Bridge mutator's or a performance flag's own "by ..." step aside) and the
    workload records its value came from (its "from ..." steps)."""
    calls = [step for step in a.via if not step.startswith(("by ", "from "))]
    return calls, [step for step in a.via if step.startswith("from ")]


def _proper_prefix(outer: list[str], inner: list[str]) -> bool:
    return len(outer) < len(inner) and inner[:len(outer)] == outer


@needs_scope
def written_known(scope: Scope, key: str) -> object:
    """Whether the unit writes `key` with a value offlint reads: False when nothing writes it or what writes it
    cannot be read (copied from an object offlint does not evaluate, say), so a rule about a chosen setting
    does not guess at one, even under --strict; unknown when the value depends on a branch (judged per path)."""
    value = scope.key(key)
    found = scope.lookup(key)
    if found.assignment is None:
        return False
    if value is UNKNOWN:
        return UNKNOWN if isinstance(found.value, OneOf) else False
    return True


@needs_scope
def is_default(scope: Scope, key: str) -> object:
    """Whether the unit leaves `key` unset, so the default applies (an explicit write of the default value is a
    choice, not this); unknown when the value is."""
    if scope.key(key) is UNKNOWN:
        return UNKNOWN
    return scope.lookup(key).state == "default"


@needs_scope
def written_after(scope: Scope, later: str, earlier: str) -> bool:
    """Whether the unit's last write of `later` follows its last write of `earlier` in one stretch of straight code:
    both in the same function of the same file, reached the same way (one call chain, `Assignment.via`), `later` on a
    later line. Across functions or files the order of writes is not told by their lines: False."""
    scope.key(later)
    scope.key(earlier)
    first, then = scope.lookup(earlier).assignment, scope.lookup(later).assignment
    return first is not None and then is not None and first.via == then.via and \
        first.location.path == then.location.path and then.location.line > first.location.line


@needs_scope
def is_written(scope: Scope, key: str) -> bool:
    """Whether some code, flag or file of the unit writes `key` (even with a value offlint cannot read). A key
    no one writes holds its default, or an unknown inherited from code offlint did not follow: a rule about a
    setting someone chose (OFL213) is not about that unit."""
    scope.key(key)
    return scope.lookup(key).assignment is not None
