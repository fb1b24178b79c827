#!/usr/bin/env python3
"""How much of a tree offlint resolves: the share of (recipe unit, key) pairs with a known or default value.

    python benchmarks/resolution_share.py TREE [--mcore-version 0.20.0]

Reads TREE exactly as `offlint check` does (sources, cross-file following, linking of launch commands), then,
for every recipe unit and every key the rules read (the `keys:` of rules/*.yaml), counts whether the effective
value is known (set and resolved), default (unset in a config the unit built, so megatron-core's default
applies) or unknown. Launch commands are counted separately. Prints the counts; asserts nothing.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
from pathlib import Path

from offlint import api, pipeline
from offlint.discover import discover
from offlint.resolve import resolve
from offlint.rules import load_rules
from offlint.types import UnitKind
from offlint.versions import detect_version


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tree", type=Path)
    parser.add_argument("--mcore-version", default=None)
    args = parser.parse_args()
    os.chdir(args.tree)
    version = detect_version(args.mcore_version, None, Path("."))
    files, _ = discover(["."])
    texts = {f.path: t for f in files if not (t := api._read_text(f.path))[1] and (t := t[0]) is not None}
    job = pipeline.Job(files, texts, sorted(f.path for f in files if f.kind == "python" and f.path in texts), [],
                       version.version, False)
    reads = [api._Read(f, texts[o.path], o.units, o.suppressions)
             for o in pipeline.outcomes(job, None) for f in files if f.path == o.path and o.error is None]
    api._link_commands(reads, [])
    rule_keys = sorted({k for rule in load_rules().values() for k in rule.keys if "." in k})
    counts = {kind: collections.Counter() for kind in (UnitKind.RECIPE, UnitKind.COMMAND)}
    units = collections.Counter()
    for read in reads:
        for unit in read.units:
            units[unit.kind] += 1
            if unit.kind not in counts:
                continue
            resolved = resolve(unit, version.version)
            for key in rule_keys:
                counts[unit.kind][resolved.get(key).state] += 1
    print(f"# {len(reads)} files, units: " + ", ".join(f"{k.value} {n}" for k, n in units.items())
          + f"; {len(rule_keys)} rule keys; megatron-core {version.version}")
    for kind, counter in counts.items():
        total = sum(counter.values()) or 1
        print(f"{kind.value:8} pairs {total:7}  known {counter['known'] / total:6.1%}  default "
              f"{counter['default'] / total:6.1%}  resolved (known or default) "
              f"{(counter['known'] + counter['default']) / total:6.1%}  unknown {counter['unknown'] / total:6.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
