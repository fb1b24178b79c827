#!/usr/bin/env python3
"""Write offlint/data/bridge-provider-fields.json: the field names Megatron Bridge's own config dataclasses add, by
section, read from a Bridge checkout as OFL003 reads a linted tree's (offlint.sources.tree_config_fields).

    python3 scripts/dump_bridge_provider_fields.py BRIDGE_CHECKOUT --source "Megatron-Bridge git <sha> (<date>)" \
        [--out offlint/data/bridge-provider-fields.json]

Why: a recipe repository that imports Megatron Bridge (a user's, not a Bridge checkout) writes provider fields
that no megatron-core release has (Qwen3's `yarn_rotary_scaling_factor`, a VLM's `vision_cuda_graph_impl`); without
this list OFL003 would call them near misses of megatron-core's fields. Only names are kept (no code is copied).
Reads with `ast`; runs nothing of the checkout.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from offlint.sources.tree_config_fields import fields_by_section  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkout")
    parser.add_argument("--source", required=True, help="what the checkout is: repository, commit and its date")
    parser.add_argument("--out", default="offlint/data/bridge-provider-fields.json")
    args = parser.parse_args()
    package = Path(args.checkout) / "src" / "megatron" / "bridge"
    if not package.is_dir():
        print(f"dump_bridge_provider_fields.py: error: {package}: not a folder; give a Megatron Bridge checkout",
              file=sys.stderr)
        return 2
    texts = ((str(path), path.read_text(encoding="utf-8", errors="replace")) for path in sorted(package.rglob("*.py")))
    sections = fields_by_section(texts)
    data = {"source": args.source, "sections": {name: sorted(fields) for name, fields in sorted(sections.items())}}
    Path(args.out).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    print(f"{args.out}: " + ", ".join(f"{name} {len(fields)}" for name, fields in data["sections"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
