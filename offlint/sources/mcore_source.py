"""The module names a megatron-core source tree in the linted checkout allows, read from its own
`transformer/transformer_config.py` (never imported): a Megatron-LM checkout, or Bridge's 3rdparty/Megatron-LM
submodule, is the megatron-core its jobs run, and its lists move between releases. Megatron-LM PR 6365 added "mhc"
to the recompute modules at 0.19.0's version number, and offlint's table of the 0.19 release called it invalid
(OFL222, an error) on the PR's own test case.

The CUDA-graph module names too: TransformerConfig turns each name of `cuda_graph_modules` (`cuda_graph_scope`) into a
member of `CudaGraphModule` (`CudaGraphScope` before 0.18) by name, so the names are that enum's members in the
checkout's `transformer/enums.py`, "full", and the deprecated spellings it migrates (the keys of
`CUDA_GRAPH_MODULES_DEPRECATIONS` in `transformer/cuda_graph_config.py`). Megatron-LM PR 6541 added `shortcut_block`
and offlint's table called it invalid (OFL220, an error).

What is read: each `set(self.<field>) - NAME` (the check that asserts "Invalid choices for <field>") and the
assignment to NAME nearest before it, when that is a set literal of strings (`NAME = {"core_attn", ...}`). The text
is searched, not parsed whole: every run of a Megatron-LM checkout reads this 3,000-line file, and parsing it took
two hundred times as long as the search; the literal itself is read with `ast.literal_eval`. A list offlint cannot read this way
is not given, and offlint's table for the version applies.
"""

from __future__ import annotations

import ast
import re

# the field a check reads -> the list name the rules ask for (offlint/data "..._names", keys.names_known)
CHECKED_FIELDS = {"recompute_modules": "recompute_module_names", "offload_modules": "offload_module_names"}
_CHECK = re.compile(r"set\(\s*self\.(recompute_modules|offload_modules)(?:\s+or\s+\[\])?\s*\)\s*-\s*([A-Za-z_]\w*)")
_ASSIGNED = re.compile(r"\s*=(?!=)\s*")
_MAX_LITERAL = 4096  # characters of a set literal: a module list is a few hundred


def allowed_names(text: str | None) -> dict[str, frozenset[str]]:
    """{list name: the names the source allows} for each list in CHECKED_FIELDS the source checks readably."""
    if not text or "Invalid choices for" not in text:
        return {}
    found: dict[str, frozenset[str]] = {}
    at = text.find("set(self.")
    while at >= 0 and len(found) < len(CHECKED_FIELDS):
        check = _CHECK.match(text, at)
        if check is not None and CHECKED_FIELDS[check[1]] not in found:
            names = _nearest_set(text, at, check[2])
            if names is not None:
                found[CHECKED_FIELDS[check[1]]] = names
        at = text.find("set(self.", at + 1)
    return found


def _nearest_set(text: str, before: int, variable: str) -> frozenset[str] | None:
    """The set literal of strings last assigned to `variable` in text[:before]; None when the last assignment is
    anything else."""
    at = before
    while True:
        at = text.rfind(variable, 0, at)
        if at < 0:
            return None
        if at > 0 and (text[at - 1].isalnum() or text[at - 1] in "_."):
            continue  # part of another name, or an attribute
        assigned = _ASSIGNED.match(text, at + len(variable))
        if assigned is not None:
            break
    start = assigned.end()
    if text[start:start + 1] != "{":
        return None
    end = text.find("}", start, min(before, start + _MAX_LITERAL))
    if end < 0:
        return None
    try:
        value = ast.literal_eval(text[start:end + 1])
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    if not isinstance(value, set) or not value or not all(isinstance(v, str) for v in value):
        return None
    return frozenset(value)


GRAPH_NAMES = "cuda_graph_names"
_MEMBER = re.compile(r"(?m)^    ([A-Za-z_]\w*)\s*=")
_KEY = re.compile(r"""^\s*['"]([A-Za-z_]\w*)['"]\s*:""", re.M)
_UNINDENTED = re.compile(r"(?m)^\S")


def graph_names(enums_text: str | None, config_text: str | None) -> frozenset[str] | None:
    """The CUDA-graph module names the checkout's megatron-core takes by name; None when its enum is not read."""
    members = _enum_members(enums_text, "CudaGraphModule") or _enum_members(enums_text, "CudaGraphScope")
    if not members:
        return None
    return frozenset(members | {"full"} | _dict_keys(config_text, "CUDA_GRAPH_MODULES_DEPRECATIONS"))


def _enum_members(text: str | None, cls: str) -> set[str]:
    """The member names of `class <cls>(...)`: its body's `    name = ...` lines, up to the next unindented line."""
    at = text.find(f"\nclass {cls}(") if text else -1
    if at < 0:
        return set()
    body_start = text.find("\n", at + 1)
    end = _UNINDENTED.search(text, body_start + 1)
    body = text[body_start:end.start() if end else len(text)]
    return {name for name in _MEMBER.findall(body) if not name.startswith("_")}


def _dict_keys(text: str | None, variable: str) -> set[str]:
    """The string keys of the dict literal assigned to `variable` at the top level (one key per line)."""
    at = text.find(f"\n{variable}") if text else -1
    if at < 0:
        return set()
    start = text.find("{", at)
    end = text.find("\n}", start)
    return set(_KEY.findall(text[start + 1:end])) if 0 <= start < end else set()


# Checks megatron-core makes only from some commit on, between releases (no version number tells them apart), known by
# the words they raise: name -> the text the checkout's transformer_config.py holds when it makes the check.
CHECKS = "checks"
CHECK_TEXTS = {
    # Megatron-LM main d98e8a6 (transformer_config.py:2044-2051): not in Bridge 067f987's pin 2a75ac12
    "mhc-recompute-with-offloading": "'mhc' in recompute_modules + fine_grained_activation_offloading is",
    # Megatron-LM PR 6553 (transformer_config.py:2154-2163 at d98e8a6)
    "gdp-qkv-offload-with-in-proj-recompute": "gdp_qkv cannot be set in offload_modules together with gdp_in_proj",
}


def checks_made(text: str | None) -> frozenset[str]:
    """The CHECK_TEXTS checks the checkout's transformer_config.py makes (the text is searched, not parsed)."""
    return frozenset(name for name, words in CHECK_TEXTS.items() if text and words in text)


# Checks the checkout's validate_args makes (its training/arguments.py, or arguments.py before 2024), by words on one
# line of code. Megatron-LM up to 0.15, and main until 2b343d739f (2025-12-31, whose package_info said 0.16.0
# already), refuses expandable_segments:True whenever CUDA graphs are on, whatever NCCL_GRAPH_REGISTER says; 0.16
# takes it with NCCL_GRAPH_REGISTER=0 (OFL301's advice for graphs).
GRAPHS_REFUSE_EXPANDABLE = "mlm-graphs-refuse-expandable"
ARGUMENT_CHECK_TEXTS = {GRAPHS_REFUSE_EXPANDABLE: ("expandable_segments:True may not be safe when using CUDA Graphs",)}


def argument_checks_made(text: str | None) -> frozenset[str]:
    """The ARGUMENT_CHECK_TEXTS checks the checkout's validate_args makes."""
    return frozenset(name for name, words in ARGUMENT_CHECK_TEXTS.items() if text and _on_a_code_line(text, words))


# Refusals (and warnings) offlint's rules quote, by the words the Megatron-LM checkout's files hold when it makes
# them: name -> (the files, under the checkout's `megatron/`, any of which may hold them; words that all stand on one
# line of code). Where a checkout is read and no line of those files holds them (commented out, a fork that checks
# otherwise, or a commit from before the check), the rule does not claim it: OpenSQZ/MegatronApp comments out
# validate_args' world-size assert (its forward-backward disaggregation runs on other world sizes), mTuner checks the
# layers' split only under virtual pipelining and its TransformerBlock floor-divides them, and a checkout of
# 0.16.0rc0 documents "full" as the CUDA-graph scope of whole layers, which 0.16.1 made a deprecated spelling of []
# (OFL215 had told its inference test to write [], which its parser's choices refuse).
LACKED = "lacked_checks"
REFUSAL_TEXTS = {
    # (any assert on the world size: before 0.14 it divides by TP, then by TP x PP, in other words)
    # (megatron/arguments.py: a checkout from before megatron/training/, 2024)
    "mlm-world-size": (("training/arguments.py", "arguments.py"), ("assert args.world_size %",)),
    # (the words OFL216 quotes, since Megatron-LM 0.14; 0.10-0.13 print the encoder's and decoder's sizes)
    "mlm-world-size-words": (("training/arguments.py", "arguments.py"),
                             ("is not divisible by total_model_size ({total_model_size=})",)),
    # (validate_args divides the evaluation batch sizes, which default to the training ones, from Megatron-LM
    # d85365bd23, 2026-04-13: 0.18.0 on; OFL217 quotes it before the micro-batch calculator's assert)
    "mlm-eval-batch": (("training/arguments.py", "arguments.py"),
                       ("eval_global_batch_size ({args.eval_global_batch_size}) must be divisible by",)),
    "mlm-layers-split": (("training/arguments.py", "arguments.py"),
                         ("Number of layers should be divisible by the pipeline-model-parallel size",)),
    "mlm-layers-split-vpp": (("training/arguments.py", "arguments.py"),
                             ("number of layers of the model must be divisible pipeline model parallel size",)),
    "block-layers-split": (("core/transformer/transformer_block.py",),
                           ("should be divisible by", "pipeline_model_parallel_size")),
    # (PipelineParallelLayerLayout.validate_layer_layout, from Megatron-LM d7bf5aaaa8, 2025-08-26: before, a layout
    # holding an MTP layer raised NotImplementedError and MTP layers went to the last stage whatever the layout)
    "layout-mtp-count": (("core/transformer/pipeline_parallel_layer_layout.py",),
                         ("Number of mtp layers in layout must match mtp_num_layers",)),
    # (CLI-5: from the fine-grained offloading's merge to main, 2026-01-16; the dev branch had the feature before)
    "mlm-fine-grained-nvte": (("training/arguments.py", "arguments.py"), ("NVTE_CPU_OFFLOAD_V1",)),
    # (TransformerConfig's __post_init__, or from 0.18 cuda_graph_config.py's normalize_cuda_graph_modules)
    "full-graph-scope-deprecated": (("core/transformer/transformer_config.py", "core/transformer/cuda_graph_config.py"),
                                    ("full scope is deprecated",)),
}


# A layout larger than the world size is refused (the world-size assert) from Megatron-LM 8af3dae (2024-08) on; before,
# validate_args clamped TP to the world size and PP to what TP leaves of it, and ran the layout smaller: a checkout
# whose arguments hold that clamp lacks the refusal OVERSIZED names
OVERSIZED = "mlm-oversized-layout"
_CLAMP = (("training/arguments.py", "arguments.py"), ("args.pipeline_model_parallel_size = min(",))


def refusals_lacked(read: dict[str, str | None]) -> frozenset[str]:
    """The REFUSAL_TEXTS refusals the checkout's files do not make, and OVERSIZED where they clamp the layout; `read`:
    file (under `megatron/`) -> its text, None where it is absent (a refusal none of whose files is present is not
    judged). The text is searched, not parsed."""
    lacked = set()
    for name, (paths, words) in REFUSAL_TEXTS.items():
        texts = [text for text in (read.get(path) for path in paths) if text is not None]
        if texts and not any(_on_a_code_line(text, words) for text in texts):
            lacked.add(name)
    paths, words = _CLAMP
    if any(_on_a_code_line(text, words) for text in (read.get(path) for path in paths) if text is not None):
        lacked.add(OVERSIZED)
    return frozenset(lacked)


def _on_a_code_line(text: str, words: tuple[str, ...]) -> bool:
    """Whether one line of `text` that is not a comment holds all of `words`."""
    at = text.find(words[0])
    while at >= 0:
        start = text.rfind("\n", 0, at) + 1
        end = text.find("\n", at)
        line = text[start:end if end >= 0 else len(text)]
        if not line.lstrip().startswith("#") and all(word in line for word in words[1:]):
            return True
        at = text.find(words[0], at + 1)
    return False
