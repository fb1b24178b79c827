"""The convenience flags of Megatron Bridge's performance scripts (`scripts/performance/run_script.py -pp 2 -ol 4`):
the built-in model, for trees that do not hold those scripts (a project that installs Bridge). Where the tree
holds them, perf_scripts reads their parser and `set_user_overrides` instead, so each commit is judged by its
own scripts (before Bridge 3853c34cf, `-ol 0` turned CPU offloading on; this model is today's scripts).

They are not Hydra overrides: `set_user_overrides` (scripts/performance/utils/overrides.py) turns each into
config writes, after the Hydra overrides of the same command line, so they win. Their meaning is not one key
per flag: `-ol N` with N > 0 turns on layer-level activation offloading of N layers (weights off), `-rl N`
selects full block recompute of N layers, `--recompute_modules` selects selective recompute, and
`--cuda_graph_scope` goes through `set_cuda_graph_modules` / `set_full_iteration_cuda_graph`.
"""

from __future__ import annotations

from offlint.sources import bridge_mutators
from offlint.types import Assignment, Layer, Source, Unknown

PERF_SCRIPTS = ("run_script.py", "setup_experiment.py", "bootstrap.py")  # (bootstrap.py execs run_script.py)

_PARALLELISM = {
    "-tp": "model.tensor_model_parallel_size", "--tensor_model_parallel_size": "model.tensor_model_parallel_size",
    "-pp": "model.pipeline_model_parallel_size", "--pipeline_model_parallel_size": "model.pipeline_model_parallel_size",
    "-cp": "model.context_parallel_size", "--context_parallel_size": "model.context_parallel_size",
    "-ep": "model.expert_model_parallel_size", "--expert_model_parallel_size": "model.expert_model_parallel_size",
    "-vp": "model.virtual_pipeline_model_parallel_size",
    "--virtual_pipeline_model_parallel_size": "model.virtual_pipeline_model_parallel_size",
}
_ALIASES = {"-ol": "--activation_offload_layers", "-rl": "--recompute_num_layers"}
FLAGS = frozenset({*_PARALLELISM, *_ALIASES, *_ALIASES.values(), "--recompute_modules", "--cuda_graph_impl",
                   "--cuda_graph_scope"})


def perf_layer(args: list) -> tuple[Layer, set[int]]:
    """The performance-script flags among a command's arguments (launch_words.Arg), and the argument indexes they use."""
    given: dict[str, tuple[object, object]] = {}  # canonical flag -> (value, Arg)
    used: set[int] = set()
    i = 0
    while i < len(args):
        flag, value_arg = args[i].value, None
        if flag and "=" in flag and flag.split("=", 1)[0] in FLAGS:
            flag, inline = flag.split("=", 1)
            value = inline
            used.add(i)
        elif flag in FLAGS and i + 1 < len(args):
            value_arg = args[i + 1]
            value = value_arg.value
            used.update((i, i + 1))
            i += 1
        else:
            i += 1
            continue
        given[_ALIASES.get(flag, flag)] = (value, args[i if value_arg is None else i - 1], value_arg)
        i += 1
    return _layer(given), used


def _layer(given: dict) -> Layer:
    layer = Layer("performance-script flags")

    def put(key: str, value: object, flag: str) -> None:
        raw, arg, value_arg = given[flag]
        text = f"{arg.value} {value_arg.value}" if value_arg is not None and value_arg.value is not None else \
            (arg.value or flag)
        layer.assignments.append(Assignment(key, value, arg.location, Source.PERF, text, (f"by {flag}",)))

    for flag, key in _PARALLELISM.items():
        if flag in given:
            raw = given[flag][0]
            if flag in ("-vp", "--virtual_pipeline_model_parallel_size") and raw == "None":
                put(key, None, flag)
            elif _int(raw) != -1 or flag not in ("-vp", "--virtual_pipeline_model_parallel_size"):
                put(key, _int(raw), flag)
    # _set_cuda_graph_overrides, then _set_recompute_overrides, in set_user_overrides' order.
    impl = given.get("--cuda_graph_impl", (None,))[0]
    if "--cuda_graph_impl" in given:
        put("model.cuda_graph_impl", _text(impl), "--cuda_graph_impl")
        if isinstance(impl, str) and impl != "none":
            put("model.use_te_rng_tracker", True, "--cuda_graph_impl")
    if "--cuda_graph_scope" in given and impl != "none":
        scope = given["--cuda_graph_scope"][0]
        names = bridge_mutators.member_names(scope if isinstance(scope, str) else _text(scope))
        mutator = "set_full_iteration_cuda_graph" if names == ["full_iteration"] else "set_cuda_graph_modules"
        for key, value in bridge_mutators.effects(mutator, names):
            put(key, value, "--cuda_graph_scope")
    layers = given.get("--activation_offload_layers", (None,))[0]
    if "--activation_offload_layers" in given:
        count = _int(layers)
        if isinstance(count, Unknown) or count > 0:
            for key, value in (("model.cpu_offloading", True if not isinstance(count, Unknown) else count),
                               ("model.cpu_offloading_weights", False), ("model.cpu_offloading_num_layers", count)):
                put(key, value, "--activation_offload_layers")
    if "--recompute_num_layers" in given:
        for key, value in (("model.recompute_granularity", "full"), ("model.recompute_method", "block"),
                           ("model.recompute_num_layers", _int(given["--recompute_num_layers"][0]))):
            put(key, value, "--recompute_num_layers")
    if "--recompute_modules" in given:
        modules = given["--recompute_modules"][0]
        put("model.recompute_modules", modules.split(",") if isinstance(modules, str) else _text(modules),
            "--recompute_modules")
        put("model.recompute_granularity", "selective", "--recompute_modules")
    return layer


def _int(value: object) -> int | Unknown:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return Unknown(f"performance-script flag value {value!r} is not a literal number")


def _text(value: object) -> str | Unknown:
    return value if isinstance(value, str) else Unknown("performance-script flag value is not a literal")
