#!/usr/bin/env python3
"""How many public recipe functions of a tree `offlint estimate` gives a verdict for, and why the others get none.

    python benchmarks/estimate_coverage.py TREE [--mcore-version 0.20.0] [--list]

Reads TREE exactly as `offlint check` does and, for every public recipe function (a name ending in `_config`, not
starting with `_`, in a file under `recipes/` or `perf_recipes/`; pretrain recipes counted separately), asks the
memory model for its inputs (`offlint.estimate.oom.inputs_for`, what OFL303 and `offlint estimate` use). A unit
gets a verdict when every input is known and every feature it uses is modelled. The others are grouped by the
first reason: an unsupported feature (named), an unknown model size, another unknown input, or a layout the
model does not split (uneven layers, heads not divisible by TP). A verdict that depends on a fact offlint cannot
know (the GPU's architecture where it is open, the sequence length a launcher runs when model and dataset differ,
the capacity of a GPU never measured: Rubin, the image patches a micro-batch of a VLM whose language model trains
holds: none or every token a vision token) is counted as a verdict, "conditional": `offlint estimate` gives one
verdict per way the fact may go (estimate.report.depends). A unit `offlint check` says cannot run (an error whose
check names a stage where the real stack refuses it: estimate/refusals.py) gets the verdict "cannot run", as
`offlint estimate` answers. Prints the counts; asserts nothing.
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

from offlint.estimate import params
from offlint.estimate.inputs import read_inputs
from offlint.estimate.oom import SIZE_KEYS, alternatives, device_for, expandable, fp8_transpose, open_facts
from offlint.estimate.refusals import refusals, refusing_rules
from offlint.estimate.report import depends
from offlint.resolve import resolve
from offlint.gpus import unit_gpu
from offlint.types import UnitKind
from tree_units import public_recipe, read_tree


def cannot_run(resolved, rules) -> str:
    """"cannot run: CODES" when `offlint check` says the unit cannot run (`offlint estimate`'s verdict then), else
    ''. `rules`: refusals.refusing_rules(), once per run."""
    refused = refusals(resolved, rules=rules)
    return "cannot run: " + ", ".join(sorted({f.code for f in refused})) if refused else ""


def reason(resolved, name: str, gpu: str = "") -> str:
    """'' when the memory estimate has a verdict, else why not (one line). `gpu`: the unit's (gpus.unit_gpu)."""
    inputs = read_inputs(resolved.get, name, fp8_transpose=fp8_transpose(name, gpu))
    if inputs.unsupported:
        return "unsupported: " + inputs.unsupported[0]
    sizes = [k for k in SIZE_KEYS if k in inputs.unknown]
    if sizes:
        return "unknown model size"
    if inputs.unknown:
        return "unknown input: " + sorted(inputs.unknown)[0]
    p, m = inputs.parallel, inputs.model
    if params.layer_ranges(m, p) is None or m.num_attention_heads % p.tp:
        return "layout not modelled (uneven split)"
    world = p.world_size or p.min_world_size()
    if not p.tiles(world, bool(m.num_moe_experts)):
        return "no verdict: the layout cannot run on the GPUs the name gives (no OFL216: a layout it cannot read)"
    dev = device_for(name, gpu)

    what, alts = alternatives(inputs, world)
    depending = depends(what, alts, dev, expandable(resolved.get))  # as `offlint estimate` judges it
    if depending is None:
        return ""
    # `offlint estimate` gives one verdict per way the open fact may go (report.depends): a conditional verdict
    kinds = open_facts(inputs) if what and what in depending[0] else []
    kinds += ["the GPU's unmeasured capacity"] if dev.upper is not None and "capacity" in depending[0] else []
    return "conditional verdict: on " + " and ".join(kinds)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tree", type=Path)
    parser.add_argument("--mcore-version", default=None)
    parser.add_argument("--list", action="store_true", help="print every unit with its reason")
    args = parser.parse_args()
    reads, version = read_tree(args.tree, args.mcore_version)
    groups = {"public recipe functions": collections.Counter(), "public pretrain recipes": collections.Counter()}
    totals, verdicts = collections.Counter(), collections.Counter()
    rules = refusing_rules()
    for read in reads:
        for unit in read.units:
            if unit.kind != UnitKind.RECIPE or not public_recipe(read.file.path, unit.name):
                continue
            resolved = resolve(unit, version.version)
            why = cannot_run(resolved, rules) or reason(
                resolved, unit.name, unit_gpu(unit.name, unit.card_gpu, unit.location.path)[0] or "")
            names = ["public recipe functions"] + (["public pretrain recipes"] if "pretrain" in unit.name else [])
            for group in names:
                totals[group] += 1
                groups[group][why or "verdict"] += 1
                if not why or why.startswith(("conditional verdict", "cannot run")):
                    verdicts[group] += 1
            if args.list:
                print(f"{read.file.path}:{unit.name}: {why or 'verdict'}")
    for group, counter in groups.items():
        total, given = totals[group] or 1, verdicts[group]
        refused = sum(n for why, n in counter.items() if why.startswith("cannot run"))
        conditional = given - counter["verdict"] - refused
        print(f"{group}: {totals[group]} units, verdict {given} ({given / total:.1%})"
              + (f", {conditional} of them conditional (one verdict per way a fact offlint cannot know may go)"
                 if conditional else "") + (f", {refused} \"cannot run\" (offlint check's error)" if refused else ""))
        for why, n in counter.most_common():
            if why != "verdict":
                print(f"  {n:5}  {why}")
    return 0



if __name__ == "__main__":
    sys.exit(main())
