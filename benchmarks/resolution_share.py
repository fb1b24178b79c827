#!/usr/bin/env python3
"""How much of a tree offlint resolves: the share of (recipe unit, key) pairs with a known or default value.

    python benchmarks/resolution_share.py TREE [--mcore-version 0.20.0]

Reads TREE exactly as `offlint check` does (sources, cross-file following, linking of launch commands), then,
for every recipe unit and every key the rules read (the `keys:` of rules/*.yaml), counts whether the effective
value is known (set and resolved), default (unset in a config the unit built, so megatron-core's default
applies) or unknown. Launch commands are counted separately, and so are the public recipe functions (a name
ending in `_config`, not starting with `_`, in a file under a `recipes/` or `perf_recipes/` directory): the
other recipe units are helpers, tests and examples, whose inputs are often parameters. Prints the counts;
asserts nothing.
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

from offlint.resolve import resolve
from offlint.rules import load_rules
from offlint.types import UnitKind
from tree_units import public_recipe, read_tree


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tree", type=Path)
    parser.add_argument("--mcore-version", default=None)
    args = parser.parse_args()
    reads, version = read_tree(args.tree, args.mcore_version, link=True)
    rule_keys = sorted({k for rule in load_rules().values() for k in rule.keys if "." in k})
    counts = {"recipe": collections.Counter(), "public recipe functions": collections.Counter(),
              "command": collections.Counter()}
    units = collections.Counter()
    for read in reads:
        for unit in read.units:
            units[unit.kind] += 1
            groups = [unit.kind.value] if unit.kind in (UnitKind.RECIPE, UnitKind.COMMAND) else []
            if unit.kind == UnitKind.RECIPE and public_recipe(read.file.path, unit.name):
                groups.append("public recipe functions")
            if not groups:
                continue
            resolved = resolve(unit, version.version)
            for key in rule_keys:
                state = resolved.get(key).state
                for group in groups:
                    counts[group][state] += 1
    print(f"# {len(reads)} files, units: " + ", ".join(f"{k.value} {n}" for k, n in units.items())
          + f"; {len(rule_keys)} rule keys; megatron-core {version.version}")
    for group, counter in counts.items():
        total = sum(counter.values()) or 1
        print(f"{group}: {total // len(rule_keys)} units\n  pairs {total:7}  known {counter['known'] / total:6.1%}  default "
              f"{counter['default'] / total:6.1%}  resolved (known or default) "
              f"{(counter['known'] + counter['default']) / total:6.1%}  unknown {counter['unknown'] / total:6.1%}")
    return 0



if __name__ == "__main__":
    sys.exit(main())
