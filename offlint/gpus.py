"""The GPU a unit is meant for, where the tree says it: a recipe's name (`..._8gpu_b200_bf16_config`), the folder of
its file (Megatron Bridge keeps a recipe tuned for a GPU in `recipes/<family>/<gpu>/` and
`perf_recipes/<family>/<gpu>/`), or the hardware section of a model card a launch command sits in
(`GB200: {command: ...}`). A unit none of these name is sized against the configured GPU ([tool.offlint] gpu,
else the default). Kept light: the rule engine asks for every unit.
"""

from __future__ import annotations

import posixpath
import re

# GPU names in Bridge recipe names, folders and cards, and offlint's device for each (Rubin's: a stated capacity,
# estimate/devices.stated_range).
NAMED_GPUS = {"h100": "h100-80gb", "h200": "h200", "b200": "b200", "gb200": "gb200", "b300": "b300",
              "gb300": "gb300", "a100": "a100-80gb", "r100": "r100", "vr200": "vr200"}


def named_gpu(unit_name: str) -> str | None:
    """The GPU a unit's name names (`..._8gpu_b200_bf16_config`: "b200"; a launch's name holds its `--recipe`, as
    in "(recipe llama3_70b_lora_config_gb200, chosen by ...)"); None when it names none. A name's words are its
    runs of letters and digits."""
    for token in _WORD.split(unit_name.lower()):
        if token in NAMED_GPUS:
            return token
    return None


_WORD = re.compile(r"[^a-z0-9]+")


def folder_gpu(path: str) -> str | None:
    """The GPU the folder of a file names, nearest first; None when none does."""
    for part in reversed(posixpath.dirname(path.replace("\\", "/")).lower().split("/")):
        if part in NAMED_GPUS:
            return part
    return None


def unit_gpu(unit_name: str, card_gpu: str = "", path: str = "") -> tuple[str | None, str]:
    """(the GPU token, where it was named: "the card's <GPU> section", "the recipe name", "the recipe's folder"),
    in that order; (None, "") when nothing names one. A launch command is judged by its own card section, name
    and folder: the folder of a recipe it runs does not say where the launch runs, and a card's hardware section
    says where its command runs whatever GPU the recipe's name was written for (Bridge PR 5629's Nemotron 3 Super
    card runs `..._16gpu_h100_bf16_32k_config` under `GB200:`)."""
    if card_gpu:
        return card_gpu, f"the card's {card_gpu.upper()} section"
    token = named_gpu(unit_name)
    if token:
        return token, "the recipe name"
    token = folder_gpu(path)
    return (token, f"the recipe's folder ({token}/)") if token else (None, "")
