"""Launches of Megatron Bridge's performance entry scripts (`setup_experiment.py` / `run_script.py`), read from
the scripts in the linted tree.

What a flag of these scripts means is the tree's code, and it changes from commit to commit (until Bridge
3853c34cf, `-ol 0` turned CPU offloading on). So when the linted tree holds the scripts, offlint reads them:

- the flags are bound by the tree's own argument parser (`parse_cli_args`, imported by the run script): every
  `add_argument` call's option strings, dest, action, nargs, default and type, the type's conversion run by the
  Python reader when it is a function of the tree (`bool_arg`, `list_of_strings`, a lambda);
- the recipe the launch builds is the one the tree's selection code names: the run script's first call that
  passes `args.model_recipe_name` is evaluated with the bound flags, and the recipe-function name its code
  builds (an f-string such as `f"{model_recipe_name}_{task}_{num_gpus}gpu_{gpu}_{precision}_config"`) is the
  recipe `api` links the launch to;
- the config writes are those of the tree's `set_user_overrides(recipe, args)`, run by the Python reader one
  top-level statement at a time, each change attributed to the given flags its statement reads (a write no
  given flag causes, such as a default the script always applies, points at the command).

`setup_experiment.py` hands its arguments to `run_script.py` in the same folder (or `run_recipe.py` with
`--use_recipes`), which builds the config; `bootstrap.py`, which the launchers start in the container, parses them
too, applies the recipe's environment and execs the same script with the same arguments. Where the tree does not
hold these scripts (a project that installs Bridge), `perf_flags` keeps the built-in model of today's scripts.
"""

from __future__ import annotations

import ast
import posixpath
from dataclasses import dataclass, field

from offlint.sources import python_calls
from offlint.sources.mlm_flags import is_number
from offlint.sources.perf_env import script_candidates
from offlint.sources.python_values import ConfigObj, Frame, Record
from offlint.types import Assignment, Layer, Location, Source, Unknown

ENTRY_SCRIPTS = ("setup_experiment.py", "run_script.py", "bootstrap.py")
RUN_SCRIPT = "run_script.py"
RECIPES_RUN_SCRIPT = "run_recipe.py"  # setup_experiment.py --use_recipes runs the library recipe path
PARSER_FUNCTION = "parse_cli_args"
OVERRIDES_FUNCTION = "set_user_overrides"
RECIPE_DEST = "model_recipe_name"
NUM_GPUS_DEST, GPUS_PER_NODE_DEST, GPU_DEST = "num_gpus", "gpus_per_node", "gpu"  # `-ng`, `-gn`, `-g`
GPUS_PER_NODE_TABLE = "NUM_GPUS_PER_NODE_MAP"  # the parser module's GPUs per node of each `-g` choice
NAMESPACE = "argparse.Namespace"


@dataclass
class PerfLaunch:
    recipe: str  # the recipe function the launch builds, "" when the tree's code does not name one
    layer: Layer  # the config writes of the scripts' own flags
    used: set[int] = field(default_factory=set)  # argument indexes the scripts' parser takes (the rest: Hydra)
    scripts: str = ""  # the folder of the scripts that were read
    refused: str = ""  # why argparse would refuse the command (then nothing else is read)
    recipe_unit: object = None  # the recipe's configuration as the selection code built it (a Unit), or None
    gpus: int = 0  # the job's GPUs (`-ng`), where the launcher runs exactly that many (_world_size); else 0


@dataclass
class _Option:
    dest: str
    action: str  # store, store_true, store_false, store_const, append, count, or "?" (a custom Action)
    nargs: object
    const: object
    default: object
    convert: object  # (reader, type node) or None
    required: bool = False


@dataclass
class _Given:
    dest: str
    option: object  # the Arg of the option string
    values: list  # the Args of its values


def read_launch(project, launch_file: str, script_word: str, args: list, command: Location) -> PerfLaunch | None:
    """A launch of the performance entry script `script_word` (as written) with `args` (launch_words.Arg), written in
    `launch_file` at `command`: what the tree's scripts make of it. None when the tree does not hold them."""
    script = _find_script(project, launch_file, script_word)
    if script is None:
        return None
    folder = posixpath.dirname(script)
    runner = project.reader(posixpath.join(folder, RUN_SCRIPT)) if project.knows(
        posixpath.join(folder, RUN_SCRIPT)) else project.reader(script)
    if runner is None:
        return None
    parser = _definition(project, runner, PARSER_FUNCTION)
    if parser is None:
        return None
    options = _options(parser)
    namespace, given, used = _parse(options, args)
    if namespace.get("use_recipes") is True and project.knows(posixpath.join(folder, RECIPES_RUN_SCRIPT)):
        runner = project.reader(posixpath.join(folder, RECIPES_RUN_SCRIPT)) or runner
    ns = Record(NAMESPACE, namespace)
    missing = sorted({min(s for s, o in options.items() if o is option) for option in options.values()
                      if option.required and option.dest not in given})
    if missing:  # argparse refuses the command (an illustration in a card, not a launch): no recipe is built
        return PerfLaunch("", Layer("performance-script flags"), used, folder,
                          f"the command lacks the required flags {', '.join(missing)}")
    recipe, built = _selected_recipe(project, runner, ns)
    layer = Layer("performance-script flags")
    overrides = _definition(project, runner, OVERRIDES_FUNCTION)
    base = built.copy() if built is not None else _recipe_config(project, recipe, script)
    if overrides is not None:
        _apply_overrides(overrides, ns, given, base, recipe, command, layer)
    # The recipe as the selection code built it (with the flags' precision and variant), when the reader could
    # follow it to the end; else `api` links the named recipe function (run at its parameters' defaults).
    recipe_unit = runner.recipe_unit(recipe or "the recipe the performance scripts build", command, built) \
        if built is not None else None
    return PerfLaunch(recipe, layer, used, folder, recipe_unit=recipe_unit, gpus=_world_size(parser[0], namespace))


def _find_script(project, launch_file: str, script_word: str) -> str | None:
    """The tree's file for the script as the command names it (perf_env.script_candidates)."""
    return next((c for c in script_candidates(launch_file, script_word) if project.knows(c)), None)


def _definition(project, reader, name: str):
    """(reader, function) of a function the run script defines or imports (at module level or inside a
    function), as the tree defines it."""
    found = reader.definition_of(name)
    if found is None:
        return None
    defining = project.reader(found[0])
    return (defining, defining.functions[found[1]]) if defining is not None and found[1] in defining.functions \
        else None


def _world_size(parser_module, namespace: dict) -> int:
    """The GPUs the job runs on: `-ng/--num_gpus`, when it fills whole nodes. The launcher asks the executor for
    ceil(num_gpus / gpus_per_node) nodes of `gpus_per_node` tasks each (setup_experiment.py: `nodes=-(num_gpus //
    -gpus_per_node)`), gpus_per_node being `-gn` or the parser module's NUM_GPUS_PER_NODE_MAP entry for `-g`; a
    count that does not fill its nodes, or a node size offlint cannot read, gives 0 (not known)."""
    gpus = namespace.get(NUM_GPUS_DEST)
    per_node = namespace.get(GPUS_PER_NODE_DEST)
    if per_node is None:
        table = parser_module.constants.get(GPUS_PER_NODE_TABLE)
        per_node = python_calls._plain(table.get(namespace.get(GPU_DEST))) if isinstance(table, dict) else None
    if not all(type(n) is int and n > 0 for n in (gpus, per_node)) or gpus % per_node:
        return 0
    return gpus


# ---- the argument parser ------------------------------------------------------------------------------------


def _options(parser) -> dict[str, _Option]:
    """Option string -> what argparse does with it, from every `add_argument` call of the parser's module."""
    reader, _ = parser
    constants = Frame(names=dict(reader.constants))
    options: dict[str, _Option] = {}
    if reader.project is not None:
        reader.project.touched.add(reader.path)  # read from the whole module, not one function of it
    for call in ast.walk(reader.module):
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and
                call.func.attr == "add_argument"):
            continue
        strings = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        if not strings or not all(s.startswith("-") for s in strings):
            continue  # a positional argument: the perf scripts have none
        keywords = {k.arg: k.value for k in call.keywords if k.arg}
        literal = {k: reader._eval(v, constants) for k, v in keywords.items() if k in ("dest", "action", "nargs",
                                                                                        "const", "default",
                                                                                        "required")}
        longest = next((s for s in strings if s.startswith("--")), strings[0])
        dest = literal.get("dest") if isinstance(literal.get("dest"), str) else longest.lstrip("-").replace("-", "_")
        action = literal.get("action", "store") if "action" in keywords else "store"
        action = action if isinstance(action, str) else "?"
        default = literal["default"] if "default" in keywords else (
            False if action == "store_true" else True if action == "store_false" else None)
        option = _Option(dest, action, literal.get("nargs"), literal.get("const"), default,
                         (reader, keywords["type"]) if "type" in keywords else None, literal.get("required") is True)
        for string in strings:
            options[string] = option
    return options


def _parse(options: dict[str, _Option], args: list) -> tuple[dict, dict[str, _Given], set[int]]:
    """argparse's reading of the launch's words: dest -> value (defaults for what is not given), the flags given
    (dest -> its words), and the indexes of the words the parser takes; the rest are Hydra overrides."""
    namespace = {o.dest: _default(o) for o in options.values()}
    given: dict[str, _Given] = {}
    used: set[int] = set()
    longs = [s for s in options if s.startswith("--")]
    i = 0
    while i < len(args):
        word = args[i].value
        name, eq, inline = (word or "").partition("=") if (word or "").startswith("--") else (word or "", "", "")
        if name not in options and name.startswith("--"):
            prefixed = [s for s in longs if s.startswith(name)]  # argparse accepts a unique prefix
            name = prefixed[0] if len(prefixed) == 1 else name
        option = options.get(name) if word else None
        if option is None:
            i += 1
            continue
        used.add(i)
        taken: list = []
        if option.action in ("store_true", "store_false", "store_const", "count"):
            value = {"store_true": True, "store_false": False, "store_const": option.const}.get(
                option.action, (namespace.get(option.dest) or 0) + 1 if option.action == "count" else None)
        elif eq:
            value = _convert(option, inline, args[i])
        else:
            many = option.nargs in ("+", "*") or isinstance(option.nargs, int)
            while i + 1 < len(args) and (not taken or many) and not _is_option(args[i + 1].value, options):
                if isinstance(option.nargs, int) and len(taken) == option.nargs:
                    break
                i += 1
                used.add(i)
                taken.append(args[i])
            if not taken:
                value = option.const if option.nargs == "?" else Unknown(f"{name} is given no value")
            elif many:
                value = [_convert(option, a.value, a) for a in taken]
                value = next((v for v in value if isinstance(v, Unknown)), value)
            else:
                value = _convert(option, taken[0].value, taken[0])
        if option.action == "append":
            value = Unknown(f"{name} collects values")
        elif option.action == "?":
            value = Unknown(f"{name} has a custom argparse action")
        namespace[option.dest] = value
        given[option.dest] = _Given(option.dest, args[used_start(i, taken)], taken)
        i += 1
    return namespace, given, used


def used_start(i: int, taken: list) -> int:
    """The index of the option string of a flag whose last word is at `i`."""
    return i - len(taken)


def _is_option(word: str | None, options: dict) -> bool:
    return bool(word) and word.startswith("-") and not is_number(word)


def _default(option: _Option) -> object:
    """argparse runs a string default through the type; any other default is used as it is."""
    if isinstance(option.default, str) and option.convert is not None:
        return _convert(option, option.default, None)
    return option.default


def _convert(option: _Option, raw: str | None, arg) -> object:
    """A flag's value as its argparse `type` turns it into one (run by the Python reader when the type is a
    function of the tree or a lambda)."""
    if raw is None:
        return Unknown(arg.unknown or f"`{arg.text}` cannot be resolved statically") if arg is not None else \
            Unknown("the flag's value is not known")
    if option.convert is None:
        return raw
    reader, node = option.convert
    name = node.id if isinstance(node, ast.Name) else ""
    try:
        if name in ("int", "float", "str"):
            return {"int": int, "float": float, "str": str}[name](raw)
        if isinstance(node, ast.Lambda) and len(node.args.args) == 1:
            frame = Frame(names={**reader.constants, node.args.args[0].arg: raw})
            value = reader._eval(node.body, frame)
        elif name in reader.functions:
            value = reader.run_function(reader.functions[name], [raw], {}, 1)
        else:
            return Unknown(f"the type of a performance-script flag (`{ast.unparse(node)}`) is not in the tree")
    except (ValueError, TypeError, RecursionError):
        return Unknown(f"argparse rejects {raw!r}")
    return value if not isinstance(value, (ConfigObj,)) else Unknown("not a value")


# ---- the recipe the launch builds ---------------------------------------------------------------------------


def _selected_recipe(project, runner, ns: Record) -> tuple[str, ConfigObj | None]:
    """The recipe the tree's selection code builds from the flags: the run script's first call passing
    `args.model_recipe_name`, evaluated with the bound flags. Its name: of the strings its code formats, the one
    that is a function name; its config: what the call returns, when the reader follows it to the end
    (`getattr(importlib.import_module(...), name)(precision=..., config_variant=...)`)."""
    project.touched.add(runner.path)  # found in the whole module, not one function of it
    call, variable = _selection_call(runner.module)
    if call is None:
        return "", None
    project.string_probe = []
    try:
        result = runner._eval(call, Frame(names={**runner.constants, variable: ns}, depth=1))
        formatted = project.string_probe
    finally:
        project.string_probe = None
    names = list(dict.fromkeys(s for s in formatted if s.isidentifier() and not s.startswith("_")))
    defined = [n for n in names if project.function_paths(n, runner.path)]  # a recipe is a function
    configs = [n for n in names if "config" in n]
    chosen = defined or configs or names
    name = chosen[-1] if len(chosen) == 1 else ""
    built = result if isinstance(result, ConfigObj) and result.kind == "container" else None
    return name, built


def _recipe_config(project, recipe: str, near: str) -> ConfigObj | None:
    """The selected recipe's config as its function builds it (at its parameters' defaults), so that the
    overrides' tests of recipe values (`if recipe.ddp.use_megatron_fsdp and recipe.ddp.nccl_ub`) are decided;
    None when the tree does not define it once."""
    paths = project.function_paths(recipe, near) if recipe else []
    reader = project.reader(paths[0]) if len(paths) == 1 else None
    if reader is None or recipe not in reader.functions:
        return None
    built = reader.run_function(reader.functions[recipe], [], {}, 1)
    return built.copy() if isinstance(built, ConfigObj) and built.kind == "container" else None


def _selection_call(module: ast.Module) -> tuple[ast.Call | None, str]:
    """The first call (in source order) with an argument `X.model_recipe_name`, and the name X."""
    for node in sorted((n for n in ast.walk(module) if isinstance(n, ast.Call)), key=lambda n: (n.lineno,
                                                                                                n.col_offset)):
        for value in [*node.args, *(k.value for k in node.keywords)]:
            if isinstance(value, ast.Attribute) and value.attr == RECIPE_DEST and isinstance(value.value, ast.Name):
                return node, value.value.id
    return None, ""


# ---- the config writes of the flags ---------------------------------------------------------------------------


def _apply_overrides(overrides, ns: Record, given: dict[str, _Given], config: ConfigObj | None, recipe: str,
                     command: Location, layer: Layer) -> None:
    """Run `set_user_overrides(recipe, args)` statement by statement on the recipe's config (or on one whose
    keys are unknown; `api` layers the recipe below), and keep what each statement changed."""
    reader, fn = overrides
    params = [p.arg for p in (*fn.args.posonlyargs, *fn.args.args)]
    if len(params) < 2:
        return
    if config is None:
        config = ConfigObj("container", Unknown(f"set by the recipe `{recipe}`" if recipe else
                                                "set by the recipe this command runs"))
    _mark_seen(config)
    where = f"{fn.name}()"
    for statement in reader.run_stepwise(fn, [config, ns], {}):
        changed = _changes(config)
        if not changed:
            continue
        flags = [given[d] for d in _dests_read(statement, params[1]) if d in given]
        for key, assignment in changed:
            layer.assignments.append(_attributed(key, assignment, flags, command, where))
        _mark_seen(config)


def _changes(config: ConfigObj) -> list[tuple[str, Assignment]]:
    """Assignments made since `_mark_seen` (each object keeps the ids of the assignments it already had)."""
    out = []
    for section, child in config.children.items():
        seen = getattr(child, "_seen", set())
        out += [(f"{section}.{k}", a) for k, a in child.values.items() if id(a) not in seen]
    seen = getattr(config, "_seen", set())
    out += [(a.key, a) for a in (config.env or {}).values() if id(a) not in seen]
    out += [(a.key, a) for a in config.top.values() if id(a) not in seen]
    return out


def _mark_seen(config: ConfigObj) -> None:
    for child in config.children.values():
        child._seen = {id(a) for a in child.values.values()}
    config._seen = {id(a) for a in [*(config.env or {}).values(), *config.top.values()]}


def _dests_read(statement: ast.stmt, namespace: str) -> list[str]:
    """The flags a statement reads: `args.X` and `getattr(args, "X", ...)`, in order."""
    out = []
    for node in ast.walk(statement):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == namespace:
            out.append(node.attr)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" and \
                len(node.args) >= 2 and isinstance(node.args[0], ast.Name) and node.args[0].id == namespace and \
                isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
            out.append(node.args[1].value)
    return list(dict.fromkeys(out))


def _attributed(key: str, assignment: Assignment, flags: list[_Given], command: Location, where: str) -> Assignment:
    """A write of the scripts, placed at the flag that caused it (the first one its statement reads), with the
    code that wrote it in its provenance; a write no given flag caused is placed at the command."""
    code = f"{assignment.location.path}:{assignment.location.line}"
    if flags:
        flag = flags[0]
        words = " ".join(w.value or w.text for w in [flag.option, *flag.values])
        via = (f"by `{words}`", f"({where} at {code})", *assignment.via)
        return Assignment(key, assignment.value, flag.option.location, Source.PERF, assignment.text, via)
    via = (f"by the performance scripts whatever the flags ({where} at {code})", *assignment.via)
    return Assignment(key, assignment.value, command, Source.PERF, assignment.text, via)
