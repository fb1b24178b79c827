#!/usr/bin/env python3
"""Dump megatron-core config fields and Megatron-LM CLI flags to JSON.

Why: offlint checks offload/recompute/CUDA-graph settings statically and
must know, per Megatron version, which TransformerConfig / OptimizerConfig /
DistributedDataParallelConfig fields and which ``pretrain_*.py`` flags exist
and what their defaults are.  Hand-copied tables drift, so this script asks
the real code: it imports ``megatron.core`` (installed wheel, or a Megatron-LM
checkout on PYTHONPATH), walks ``dataclasses.fields`` and, when
``megatron.training.arguments`` is importable (source trees only), builds
Megatron-LM's own argparse parser via ``add_megatron_arguments`` without
parsing anything.  Output is sorted JSON indented by 1 space (diff-friendly).

Only generated data is shipped in offlint/data; no Megatron code is copied.
See offlint/data/README.md for the regeneration commands.
"""

import argparse
import dataclasses
import enum
import json
import math
import os
import re
import sys
import typing
import warnings

_ADDR = re.compile(r" at 0x[0-9a-fA-F]+")


def _qualname(obj):
    mod = getattr(obj, "__module__", None) or ""
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    if name is None:
        return None
    return name if mod in ("builtins", "") else f"{mod}.{name}"


def to_json(value):
    """Convert a default value into something JSON-able and stable across runs."""
    import torch

    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"repr": repr(value)}
    if isinstance(value, torch.dtype):
        return str(value)  # e.g. "torch.float32"
    if isinstance(value, enum.Enum):
        return value.name  # what a user types on the CLI, e.g. AttnBackend.auto -> "auto"
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((to_json(v) for v in value), key=repr)
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, type) or callable(value):
        name = _qualname(value)
        if name:
            return {"repr": name}
    return {"repr": _ADDR.sub("", repr(value))}


def type_str(tp):
    if isinstance(tp, str):
        return tp
    if isinstance(tp, type) and not typing.get_args(tp):
        return _qualname(tp)
    return _ADDR.sub("", repr(tp))


def field_default(f):
    if f.default is not dataclasses.MISSING:
        return to_json(f.default)
    if f.default_factory is not dataclasses.MISSING:
        return to_json(f.default_factory())
    return {"required": True}


def dump_dataclass(cls):
    return {
        f.name: {"default": field_default(f), "type": type_str(f.type)}
        for f in dataclasses.fields(cls)
    }


def dump_sections():
    from megatron.core.distributed import DistributedDataParallelConfig
    from megatron.core.optimizer import OptimizerConfig
    from megatron.core.transformer.transformer_config import (
        MLATransformerConfig,
        TransformerConfig,
    )

    model = dump_dataclass(TransformerConfig)
    for name, entry in dump_dataclass(MLATransformerConfig).items():
        if name not in model:
            entry["mla_only"] = True
            model[name] = entry
        elif entry["default"] != model[name]["default"]:
            model[name]["mla_default"] = entry["default"]
    return {
        "model": model,
        "optimizer": dump_dataclass(OptimizerConfig),
        "ddp": dump_dataclass(DistributedDataParallelConfig),
    }


def dump_flags():
    """Build Megatron-LM's real parser (as parse_args does) and list its actions."""
    try:
        from megatron.training import arguments as mlm_args
    except ImportError as exc:  # the megatron-core wheel ships no megatron/training
        print(f"megatron.training.arguments not importable ({exc}); no mlm_flags",
              file=sys.stderr)
        return None
    parser = argparse.ArgumentParser(description="Megatron-LM Arguments", allow_abbrev=False)
    parser = mlm_args.add_megatron_arguments(parser)
    names = {cls: name for name, cls in parser._registries["action"].items()
             if isinstance(cls, type) and name is not None}
    flags = []
    for act in parser._actions:
        if isinstance(act, argparse._HelpAction):
            continue
        tp = act.type
        flags.append({
            "option_strings": list(act.option_strings),
            "dest": act.dest,
            "default": to_json(act.default),
            "type": None if tp is None else (getattr(tp, "__name__", None) or type_str(tp)),
            "action": names.get(type(act), type(act).__name__),
            "nargs": act.nargs,
            "const": to_json(act.const),
            "required": act.required,
            "choices": None if act.choices is None else to_json(list(act.choices)),
        })
    flags.sort(key=lambda d: (d["dest"], d["option_strings"]))
    return flags


def dump_cuda_graph_names():
    """The CUDA-graph module names megatron-core accepts for ``cuda_graph_scope`` / ``cuda_graph_modules``:
    TransformerConfig turns each string into an enum member by name (``CudaGraphModule`` from 0.19,
    ``CudaGraphScope`` before) and raises KeyError on any other, but for ``"full"`` alone and the deprecated
    spellings it migrates (``CUDA_GRAPH_MODULES_DEPRECATIONS``, from 0.19)."""
    from megatron.core.transformer import enums

    cls = getattr(enums, "CudaGraphModule", None) or enums.CudaGraphScope
    names = set(cls.__members__) | {"full"}
    try:
        from megatron.core.transformer.cuda_graph_config import CUDA_GRAPH_MODULES_DEPRECATIONS
    except ImportError:  # before 0.19
        CUDA_GRAPH_MODULES_DEPRECATIONS = {}
    return sorted(names | set(CUDA_GRAPH_MODULES_DEPRECATIONS))


def dump_recompute_module_names():
    """The module names TransformerConfig allows in ``recompute_modules`` under selective recompute: a set literal
    inside ``__post_init__``, so it is asked of megatron-core itself (a config with an unknown module fails with
    "Invalid choices for recompute_modules: ... Allowed modules are: {...}")."""
    import ast

    from megatron.core.transformer.transformer_config import TransformerConfig

    try:
        TransformerConfig(num_layers=2, hidden_size=64, num_attention_heads=4, recompute_granularity="selective",
                          recompute_modules=["__offlint_probe__"])
    except AssertionError as exc:
        found = re.search(r"Allowed modules are: (\{.*\})", str(exc))
        if found:
            return sorted(ast.literal_eval(found.group(1)))
    raise SystemExit("error: TransformerConfig accepted an unknown recompute module; cannot read the allowed set")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="output file (default: stdout)")
    ap.add_argument("--source", help='e.g. "Megatron-LM git core_v0.19.0 <sha> (<date>)"; '
                                     "default for an installed wheel: wheel megatron-core==<ver>")
    ap.add_argument("--mlm-flags-from", metavar="JSON",
                    help="copy mlm_flags from another dump of the same version "
                         "(e.g. wheel dump + flags from the matching source tag)")
    ap.add_argument("--require-flags", action="store_true",
                    help="fail if megatron.training.arguments cannot be imported")
    opts = ap.parse_args()

    os.environ.setdefault("NO_VCS_VERSION", "1")  # no '+<git sha>' suffix on __version__
    # Megatron-LM >= 0.19 declares python>=3.12 and uses typing.override (a no-op
    # decorator); alias the typing_extensions one so the tree imports on 3.11.
    if not hasattr(typing, "override"):
        try:
            import typing_extensions
            typing.override = typing_extensions.override
        except ImportError:
            typing.override = lambda f: f
    warnings.simplefilter("ignore")

    import megatron.core
    from megatron.core import package_info

    version = package_info.__version__
    core_dir = os.path.dirname(os.path.abspath(megatron.core.__file__))
    source = opts.source
    if source is None:
        source = (f"wheel megatron-core=={version}" if "site-packages" in core_dir
                  else f"Megatron-LM source tree {os.path.dirname(os.path.dirname(core_dir))}")

    out = {"version": version, "source": source, "sections": dump_sections(),
           "cuda_graph_names": dump_cuda_graph_names(), "recompute_module_names": dump_recompute_module_names()}
    flags = dump_flags()
    if flags is None and opts.require_flags:
        sys.exit("error: --require-flags but megatron.training.arguments is not importable")
    if flags is not None:
        out["mlm_flags"] = flags
    if opts.mlm_flags_from:
        with open(opts.mlm_flags_from) as fh:
            other = json.load(fh)
        if other["version"] != version:
            sys.exit(f"error: {opts.mlm_flags_from} is version {other['version']}, not {version}")
        out["mlm_flags"] = other["mlm_flags"]
        out["mlm_flags_source"] = other["source"]

    text = json.dumps(out, sort_keys=True, indent=1) + "\n"
    if opts.out:
        with open(opts.out, "w") as fh:
            fh.write(text)
        print(f"wrote {opts.out}: version {version}, "
              f"{sum(len(s) for s in out['sections'].values())} fields, "
              f"{len(out.get('mlm_flags', []))} flags", file=sys.stderr)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
