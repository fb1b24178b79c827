"""megatron-core's custom pipeline layout (`pipeline_model_parallel_layout`): read as megatron-core parses it, and
checked as TransformerConfig does when it builds the config (PipelineParallelLayerLayout.__init__ and
validate_layer_layout; the same code in 0.16.1 and 0.20.0, pipeline_parallel_layer_layout.py), so that a layout the
run would refuse is found before the queue wait. Used by the OFL221 condition; pure data, nothing imported."""

from __future__ import annotations

import re

CHARS = {"E": "embedding", "L": "loss", "t": "decoder", "m": "mtp"}  # parse_str_to_list's char2layer_type
NAMES = frozenset(CHARS.values())
_GROUP = re.compile(r"\(([^()]*)\)\*(\d+)")
MAX_CHARS = 100_000  # far more than any model's layers, bounded for hostile input


def parse(text: str) -> list[list[str]] | None:
    """The stages of a layout string ("Et*3|(tt|)*29,m|L": `|` separates stages, `x*n` and `(...)*n` repeat,
    commas are cosmetic), each a list of layer names; None when it is not one (a character megatron-core does not
    know, which it refuses too) or would unroll into more than MAX_CHARS characters."""
    text = text.replace(",", "")
    budget = [MAX_CHARS - len(text)]  # characters the unrolling may still add, over all repetitions

    def unroll(match: re.Match) -> str:
        budget[0] -= len(match.group(1)) * (int(match.group(2)) - 1)
        if budget[0] < 0:
            raise ValueError("layout too long")
        return match.group(1) * int(match.group(2))

    try:
        while _GROUP.search(text):
            text = _GROUP.sub(unroll, text)
        text = re.sub(r"(.)\*(\d+)", unroll, text)
    except ValueError:  # too long, or a count too large for int()
        return None
    if any(c not in CHARS and c != "|" for c in text):
        return None
    return [[CHARS[c] for c in stage] for stage in text.split("|")]


def stages_of(value: object) -> list[list[str]] | None:
    """A layout as written (a string, or a list of lists of names as Bridge's recipes write it) as stages of
    lower-case names; None when offlint cannot read it as one."""
    stages = parse(value) if isinstance(value, str) else value
    if not isinstance(stages, (list, tuple)) or not stages or not all(isinstance(row, (list, tuple)) for row in stages):
        return None  # an empty list is more likely a list offlint saw before the code that fills it
    names = [[str(x).strip().lower() for x in row] for row in stages]
    return names if all(name in NAMES for row in names for name in row) else None


def refusal(stages: list[list[str]], pp: int, vpp: int | None, num_layers: int | None,
            mtp_num_layers: int | None, counts: bool = True) -> tuple[str, str]:
    """(megatron-core's message when it refuses this layout, what offlint counted), ("", "") when it accepts it;
    checked in megatron-core's order. `counts` False: only what does not depend on num_layers and mtp_num_layers
    (the stages against PP and VPP, one embedding first, one loss last)."""
    if not stages or len(stages) % pp:
        return ("pipeline_model_parallel_layout must be divisible by pipeline_model_parallel_size",
                f"{len(stages)} stages over PP{pp}")
    per_rank = len(stages) // pp  # the virtual pipeline size the layout gives
    if vpp is not None and vpp != per_rank:
        return ("virtual_pipeline_model_parallel_size conflicts with pipeline_model_parallel_layout",
                f"VPP{vpp} set, the layout gives {per_rank} stages per pipeline rank")
    # stage k * pp + r is virtual stage k of pipeline rank r; megatron-core flattens in that order
    layout = [[stages[v * pp + r] for v in range(per_rank)] for r in range(pp)]
    flat = [name for row in stages for name in row]
    if not flat:  # stages without layers ("|"): megatron-core's check fails on an IndexError, not a message
        return "", ""
    if flat[0] != "embedding":
        return f"The first layer must be embedding, but got LayerType.{flat[0]}", ""
    if flat[-1] != "loss":
        return f"The last layer must be loss, but got LayerType.{flat[-1]}", ""
    if flat.count("embedding") != 1:
        return "Embedding must be specified exactly once", f"{flat.count('embedding')} embeddings"
    if flat.count("loss") != 1:
        return "Loss must be specified exactly once", f"{flat.count('loss')} losses"
    if not counts:
        return "", ""
    if flat.count("decoder") != num_layers:
        return f"Number of decoder layers {flat.count('decoder')}must match num_layers {num_layers}", ""
    mtp = flat.count("mtp")
    if not (mtp == mtp_num_layers or (mtp_num_layers is None and mtp == 0)):
        return (MTP_COUNT, f"the layout has {mtp} MTP layers, mtp_num_layers={mtp_num_layers}")
    if mtp and "decoder" in flat[flat.index("mtp"):]:
        return MTP_AFTER_DECODERS, ""
    if any("mtp" in row[v] for row in layout for v in range(per_rank - 1)):
        return MTP_LAST_VIRTUAL_STAGE, ""
    if any("mtp" in row[-1] and row[-1].count("mtp") != mtp_num_layers for row in layout):
        return MTP_ONE_STAGE, ""
    return "", ""


# megatron-core's refusals of a layout's MTP layers (validate_layer_layout, from Megatron-LM d7bf5aaaa8, 2025-08-26;
# a checkout from before refuses any MTP layer in a layout with NotImplementedError instead)
MTP_COUNT = "Number of mtp layers in layout must match mtp_num_layers"
MTP_AFTER_DECODERS = "decoder layers must be placed before MTP layers"
MTP_LAST_VIRTUAL_STAGE = ("Currently we restrict that the MTP should be always in the last virtual pipeline stage of "
                          "that rank.")
MTP_ONE_STAGE = "All of the MTP layers must be in the same one virtual pipeline stage"
MTP_REFUSALS = frozenset({MTP_COUNT, MTP_AFTER_DECODERS, MTP_LAST_VIRTUAL_STAGE, MTP_ONE_STAGE})
