"""Launch commands linked to the tree: a command that names a recipe (`--recipe NAME`, Bridge's alias layout,
a performance launch) or a YAML file (`--config-file`) of the linted tree is checked on top of it, a
performance launcher's environment is read from the tree's own scripts (perf_env), and whether a Megatron-LM
style command trains is read from its entry script (entry_scripts), as are the flags its parser has (mlm_arguments;
a functional test case's script is the one its CI recipe runs it with: mlm_ci_recipes).

Runs after every file is read (the recipes a command names may be anywhere in the tree) and before the
commands are resolved and checked.
"""

from __future__ import annotations

import difflib
import os
import posixpath
import re
from pathlib import Path

from offlint import keys, scope
from offlint.reading import text_or_error
from offlint.source_files import FileRead
from offlint.sources import bridge_precision, bridge_recipe_lookup
from offlint.sources import (entry_scripts, entry_writes, mlm_arguments, mlm_ci_recipes, mlm_flags, perf_env,
                             script_flags)
from offlint.sources.launch import (TRAINING_ONLY_FLAGS, flags_accelerator, last_value, take_recipe_sections,
                                    takes_no_iteration)
from offlint.sources.launch_env import opened, opened_because
from offlint.sources.launch_torch import (definition_torch, dockerfile_torch, image_torch, requirements_new_torch,
                                          requirements_torch)
from offlint.types import (BELOW, UNREAD_SPLIT, YAML_LAYER, YAML_LAYER_MAYBE_PYYAML, Assignment, Defaults, FileError,
                           Layer, Location, OneOf, Source, Unit, UnitKind, Unknown)


# `X as Y`; Y is matched in a lookahead so that `a as b as c` gives both pairs, as a search for each Y did.
_IMPORTED_AS = re.compile(r"\b([A-Za-z_]\w*)\s+as\s+(?=([A-Za-z_]\w*)\b)")
_AS = re.compile(r"as\s")  # (a literal first: searched fast; the whitespace before it is tested by hand)
_WORD_CHAR = re.compile(r"\w")


def link_commands(reads: list[FileRead], errors: list[FileError], aliases: Aliases | None = None,
                  callers: dict[Location, list[Unit]] | None = None) -> list[Unit]:
    """A launch command naming a recipe (or a YAML file) of the linted tree is checked on top of it. `aliases`: the
    reads' `import X as Y`, when the caller looked at them already. Returns the YAML units that took the
    environment of the launches that run them (_take_launch_environment), or lost keys their scripts take out
    (_strip_taken_keys): their files' findings are checked again.
    `callers`: launch_callers(reads), when the caller worked it out already."""
    recipes: dict[str, list[Unit]] = {}
    recipes_in: dict[str, list[Unit]] = {}  # by file
    for read in reads:
        for unit in read.units:
            if unit.kind == UnitKind.RECIPE:
                recipes.setdefault(unit.name, []).append(unit)
                recipes_in.setdefault(posixpath.normpath(unit.location.path), []).append(unit)
    originals_of = (aliases or Aliases(reads)).get
    tree_text = _tree_reader(reads)
    entry_modules: dict = {}  # the entry scripts' modules, parsed once for every launch that runs them
    parsers: dict[str, dict] = {}  # an entry script's own parser's options (script_flags), read once

    yaml_layers = {}
    for read in reads:
        for unit in read.units:
            if unit.kind == UnitKind.YAML:
                yaml_layers[Path(read.file.path).resolve()] = unit
    launched_by: dict[int, list[Unit]] = {}  # id(YAML unit) -> the launches that name it
    at_run_time: list[Unit] = []  # launches whose YAML file is chosen when they run
    callers = launch_callers(reads) if callers is None else callers
    pins: dict[str, str] = {}  # launch file -> the PyTorch before 2.1 pinned or built beside it (Unit.pinned_torch)
    newer: dict[str, str] = {}  # launch file -> the PyTorch of 2.1 or later pinned beside it (Unit.newer_torch)
    not_megatron: set[int] = set()  # ids of launches of a script whose own command line they are (_own_command_line)
    taken_by: dict[int, list[frozenset[str]]] = {}  # id(YAML unit) -> the keys each launch's script takes out
    maybe_pyyaml: set[int] = set()  # ids of YAML units a launch's script may load with PyYAML before Bridge does
    for read in reads:
        for unit in read.units:
            if unit.kind != UnitKind.COMMAND:
                continue
            if unit.entry_script and unit.defaults == Defaults.MLM_CLI and _own_command_line(
                    unit, read.file.path, tree_text, parsers, recipes_in):
                not_megatron.add(id(unit))
                continue
            if unit.written_at is None and unit.location in callers and not unit.env_open:
                # a script the tree's scripts run: it runs in their environment (and container), and each call's
                # reading of it is judged there; read alone, what it does not set is unknown
                call = callers[unit.location][0].location
                opened(unit, opened_because(f"{call.path} line {call.line} runs this script in its own environment"))
            base_layers: list[Layer] = []
            matches = recipes.get(unit.recipe, []) if unit.recipe else []
            if unit.recipe and not matches:
                # Bridge's alias layout: `from .h100.llama3 import llama3_8b_pretrain_2gpu_config as
                # llama3_8b_pretrain_config` makes the legacy name run the real recipe.
                originals = originals_of(unit.recipe)
                matches = [r for name in originals for r in recipes.get(name, [])]
            if len(matches) > 1:  # several trees side by side define the name: the one nearest the launch
                closest = scope.nearest([r.location.path for r in matches], read.file.path)
                matches = [r for r in matches if r.location.path in closest]
            if len(matches) == 2 and unit.recipe_loader:  # a library and a benchmark recipe: the one the tree loads
                matches = _settled(unit, matches, read.file.path, tree_text)
            if len(matches) == 1:
                recipe = matches[0]
                base_layers = [Layer(f"recipe {recipe.name}", [a for layer in recipe.layers
                                                               for a in layer.assignments], inherited=True)]
                bridge_precision.inherit(unit, recipe)
                take_recipe_sections(unit, recipe)
            for name, where in unit.config_files:
                target = _find_yaml(name, read.file.path, yaml_layers)
                if target is not None:
                    taken = entry_scripts.yaml_keys_taken(unit.entry_script, read.file.path, tree_text,
                                                          entry_modules) if unit.entry_script else frozenset()
                    base_layers.append(Layer(f"--config-file {name}", [a for a in target.all_assignments()
                                                                       if not _taken(a.key, taken)], inherited=True))
                    bridge_precision.inherit(unit, target)
                    launched_by.setdefault(id(target), []).append(unit)
                    taken_by.setdefault(id(target), []).append(taken)
                    if unit.entry_script and entry_scripts.reads_yaml_with_pyyaml(unit.entry_script, read.file.path,
                                                                                  tree_text, entry_modules):
                        maybe_pyyaml.add(id(target))
            if unit.config_file_at_run_time:
                at_run_time.append(unit)
            unit.layers = base_layers + unit.layers
            if unit.launches_training and image_torch(unit.container_image) is None:  # (else the image's tag decides)
                here = read.file.path  # (the environment the tree builds beside the launch, whatever its script)
                beside = lambda path, here=here: tree_text(path, here)  # noqa: E731
                if here not in pins:  # (a file's launches share it: looked up once)
                    pins[here] = requirements_torch(here, beside) or dockerfile_torch(here, beside)
                    newer[here] = requirements_new_torch(here, beside)
                unit.pinned_torch = definition_torch(unit.container_image, here, beside) or pins[here]
                unit.newer_torch = newer[here]
            if unit.entry_script:  # an entry script in the tree shows whether it trains, and whether in Ray's workers
                trains = entry_scripts.trains(unit.entry_script, read.file.path, tree_text, entry_modules)
                if trains == entry_scripts.ARGUMENTS_CHOOSE:  # the launch's own values choose, else its flags
                    trains = entry_scripts.trains_given(unit.entry_script, read.file.path, tree_text,
                                                        lambda dest, unit=unit: _literal_argument(unit, dest),
                                                        entry_modules)
                if trains == entry_scripts.ARGUMENTS_CHOOSE:
                    trains = any(flag in TRAINING_ONLY_FLAGS for flag, *_ in unit.launch_flags)
                if trains is False and unit.launches_training and unit.defaults != Defaults.MLM_CLI:
                    # a script taking `key=value` overrides, taken to train: its code is read for Ray, not for this.
                    # Methods are judged by their names, and a framework's launcher dispatches through its own
                    # classes (Pai-Megatron-Patch's ChatLearn entry point runs `ChatlearnLauncher().run()`, which
                    # loads its training algorithm by name): reaching no training call is no answer there.
                    trains = None
                if trains is not None:
                    unit.launches_training = trains
                if unit.launches_training:  # on which accelerator, where its code (or its environment) says
                    unit.accelerator = entry_scripts.accelerator(unit.entry_script, read.file.path, tree_text,
                                                                 entry_modules, _environment(unit)) or \
                        flags_accelerator(unit.script_args) or \
                        entry_scripts.runtime_variables_accelerator(a.key[4:] for layer in unit.layers
                                                                    for a in layer.assignments if a.key[:4] == "env.")
                    _take_entry_script_environment(unit, entry_scripts.environment_writes(
                        unit.entry_script, read.file.path, tree_text, entry_modules))
                    imports = entry_scripts.needs_old_torch(unit.entry_script, read.file.path, tree_text,
                                                            entry_modules)
                    if imports:  # (else what the launch's interpreter says, if anything)
                        unit.old_torch = f"its code imports torch._six ({imports}), which PyTorch 2.0 removed"
                driver = unit.launches_training and entry_scripts.ray_driver(unit.entry_script, read.file.path,
                                                                             tree_text, entry_modules)
                if driver:
                    opened(unit, opened_because(f"{posixpath.basename(unit.entry_script)} trains in Ray's workers, "
                                                f"whose environment its code builds (`ray.init` at {driver})"))
                script = entry_scripts.script_path(unit.entry_script, read.file.path, tree_text)
                unit.checkout = _checkout(script, read.file.path, tree_text)
                if unit.launch_flags:  # and which flags its parser has (none known where a module its code
                    # imports replaces that parser)
                    if not entry_scripts.patches_parser(unit.entry_script, read.file.path, tree_text, entry_modules):
                        unit.unknown_flags, unit.missing_required, unit.unrecognized = _parser_misses(
                            unit, script, read.file.path, tree_text, entry_modules)
                    unit.checkout_flags = _checkout_flags(unit, script, read.file.path, tree_text, entry_modules)
                    unit.before_2023_flag = _before_2023_flag(unit, script, read.file.path, tree_text)
                if unit.defaults == Defaults.MLM_CLI and script:  # a script of the tree's that reads its own flags
                    own = script_flags.script_unit(recipes_in.get(script, []))
                    if own is not None:
                        if script not in parsers:
                            parsers[script] = script_flags.options(tree_text(script, read.file.path))
                        _run_own_script(unit, own, parsers[script], script)
                if unit.defaults == Defaults.MLM_CLI:  # whether its code builds an optimizer at all (training does)
                    unit.builds_optimizer = True if trains is True else entry_scripts.builds_optimizer(
                        unit.entry_script, read.file.path, tree_text, entry_modules)
                if unit.defaults == Defaults.MLM_CLI:  # and which arguments its code sets itself
                    _take_entry_script_writes(unit, entry_scripts.namespace_writes(
                        unit.entry_script, read.file.path, tree_text, entry_modules))
                    if not script:
                        _unread_entry_script(unit)
            elif unit.ci_test_case and unit.launch_flags:
                # a functional test case: the CI recipe listing it names its script (whether it trains stays with
                # the case's MODE and flags)
                script = mlm_ci_recipes.entry_script(read.file.path, tree_text, entry_modules)
                # (the checkout whose harness runs the case: its script's, else the one holding the case)
                unit.checkout = _checkout(script or read.file.path, read.file.path, tree_text)
                if script:
                    unit.entry_script = script
                    unit.unknown_flags, unit.missing_required, unit.unrecognized = _parser_misses(
                        unit, script, read.file.path, tree_text, entry_modules)
            if unit.launch_args:  # a performance launcher builds the job's environment itself
                near = read.file.path
                perf_env.add_launcher_env(unit, near, lambda path, near=near: tree_text(path, near))
            unit.evaluates_only = unit.launches_training and _evaluates_only(unit)
    if not_megatron:
        for read in reads:
            read.units = [unit for unit in read.units if id(unit) not in not_megatron]
    stripped = {id(target) for target in yaml_layers.values() if _strip_taken_keys(target, taken_by.get(id(target)))}
    marked = {id(target) for target in yaml_layers.values() if id(target) in maybe_pyyaml
              and _maybe_read_by_pyyaml(target)}
    return [target for target in yaml_layers.values()
            if _take_launch_environment(target, launched_by.get(id(target)) or at_run_time)
            or id(target) in stripped or id(target) in marked]


def _settled(unit: Unit, matches: list[Unit], launch_path: str, tree_text) -> list[Unit]:
    """Of a library recipe and a benchmark recipe of the name the launch runs, the one its entry script loads as the
    tree's recipe_metadata.py settles it (bridge_recipe_lookup); both where it does not."""
    packages = ["/" + r.location.path for r in matches]
    if not (any(bridge_recipe_lookup.PERF in p for p in packages) and
            any(bridge_recipe_lookup.LIBRARY in p and bridge_recipe_lookup.PERF not in p for p in packages)):
        return matches
    script = entry_scripts.script_path(unit.recipe_loader, launch_path, tree_text)
    settled = bridge_recipe_lookup.settled_package(unit.recipe, script, lambda path: tree_text(path, launch_path)) \
        if script else None
    if settled is None:
        return matches
    perf = settled == bridge_recipe_lookup.PERF
    return [r for r, p in zip(matches, packages) if (bridge_recipe_lookup.PERF in p) == perf]


def _maybe_read_by_pyyaml(target: Unit) -> bool:
    """A YAML override file a launch passes to a script that loads YAML with PyYAML itself (entry_scripts.
    reads_yaml_with_pyyaml: a Bridge fork's tutorial launcher reads its file, pops keys of its own and hands Bridge
    the copy PyYAML wrote): a key repeated in one of its mappings may reach Bridge once, the last value, rather than
    stop OmegaConf.load (OFL004's verdict, by its layer's name). True where a layer was marked."""
    marked = False
    for layer in target.layers:
        if layer.name == YAML_LAYER:
            layer.name = YAML_LAYER_MAYBE_PYYAML
            marked = True
    return marked


def launch_callers(reads: list[FileRead]) -> dict[Location, list[Unit]]:
    """The launches written in a script that other scripts of the tree run (`srun --container-image IMG bash
    ci/train.sh`, `export X=1; bash train.sh`): where each is written -> the units of the calls reaching it, as
    the callers' readings of it record (Unit.written_at). OpenGPTX's functional tests run their launch scripts only
    from an sbatch whose container holds PyTorch 1.11; read alone, each got OFL301, whose fix would stop the job at
    its first allocation (helpers' sweeps, sessions 41-44: 64 findings on 16 trees)."""
    callers: dict[Location, list[Unit]] = {}
    for read in reads:
        for unit in read.units:
            if unit.written_at is not None:
                callers.setdefault(unit.written_at, []).append(unit)
    return callers


def _own_command_line(unit: Unit, launch_path: str, tree_text, parsers: dict[str, dict],
                      recipes_in: dict[str, list[Unit]]) -> bool:
    """Whether a launch read as Megatron-LM's, by options spelt as Megatron-LM's, runs a script of the tree whose own
    parser declares every such option, whose text never names Megatron and that builds no recipe from its flags
    (script_flags.script_unit): the options are that script's, and the launch is none of Megatron's (DeepSpeedExamples'
    CIFAR MoE passes `--num-experts 2` to its own argparse parser, beside DeepSpeed's options)."""
    script = entry_scripts.script_path(unit.entry_script, launch_path, tree_text)
    text = tree_text(script, launch_path) if script else None
    if not text or "megatron" in text.lower() or script_flags.script_unit(recipes_in.get(script, [])) is not None:
        return False
    if script not in parsers:
        parsers[script] = script_flags.options(text)
    megatron_spelt = {flag for flag, _, path in unit.launch_flags if not path and mlm_flags.is_mlm_flag(flag)}
    return bool(megatron_spelt) and all(flag in parsers[script] for flag in megatron_spelt)


def _run_own_script(unit: Unit, script: Unit, parser: dict, path: str) -> None:
    """A Megatron-LM style launch of a script of the tree (`path`) that parses its own flags and builds a recipe from
    them (script_flags): the launch runs that configuration with its flags; its environment is the launch's."""
    if script_flags.bind(unit, script, parser, path):
        bridge_precision.inherit(unit, script)
        take_recipe_sections(unit, script)


def _evaluates_only(unit: Unit) -> bool:
    """Whether a launch bypasses the training loop on every path: Megatron-LM's `--skip-train` or `--train-iters 0`
    (launch.takes_no_iteration; neither with `--perform-rl-step`, whose RL loop still runs) or
    `--ckpt-convert-format` (setup_model_and_optimizer saves the loaded checkpoint in that format and exits: a
    fork's conversion job runs pretrain_gpt.py so), or Megatron
    Bridge's `validation.skip_train` True where the deprecated `train.skip_train` is unset, or that one True
    (ConfigContainer.validate copies a TrainingConfig field that is not None onto ValidationConfig's); the last
    assignment of each over the recipe, YAML and command line."""
    if unit.defaults == Defaults.MLM_CLI:
        given = {flag for flag, _, path in unit.launch_flags if not path}
        return "--perform-rl-step" not in given and ("--skip-train" in given or takes_no_iteration(unit.script_args)) \
            or "--ckpt-convert-format" in given
    last = {a.key: a.value for a in unit.all_assignments() if a.key in ("train.skip_train", "validation.skip_train")}
    train = last.get("train.skip_train")
    return train is True or train is None and last.get("validation.skip_train") is True


def _environment(unit: Unit):
    """A launch's value of an environment variable, for its entry script's code (entry_scripts.accelerator): what
    it exports, None where it leaves the variable unset, ENV_UNKNOWN where that is not known."""
    values: dict[str, object] | None = None  # (made when first asked: only a script whose top level tests one)
    unset = None if unit.env_known and not unit.env_open else entry_scripts.ENV_UNKNOWN

    def value(name: str) -> object:
        nonlocal values
        if values is None:
            values = {a.key[4:]: a.value for a in unit.all_assignments() if a.key.startswith("env.")}
        held = values.get(name, unset)
        return entry_scripts.ENV_UNKNOWN if isinstance(held, Unknown) else held

    return value


def _take_entry_script_environment(unit: Unit, writes: tuple[entry_writes.EnvironmentWrite, ...]) -> None:
    """A launch whose entry script's code sets environment variables for its own process
    (entry_scripts.environment_writes): the run has those values over what the launch exports; a `setdefault` only
    where the launch leaves the variable unset. A value the code computes, or sets on some paths only, is unknown."""
    if not writes:
        return
    exported = {a.key for a in unit.all_assignments() if a.key.startswith("env.")}
    known = unit.env_known and not unit.env_open
    assignments = []
    for w in writes:
        key, where = f"env.{w.name}", f"{w.path}:{w.line}"
        if w.only_if_unset and key in exported:
            continue
        if w.value is entry_writes.UNREAD or (w.only_if_unset and not known):
            value: object = Unknown(f"set by the entry script's code at {where}" +
                                    (", where the launch leaves it unset" if w.only_if_unset else ""))
        else:
            value = w.value
        assignments.append(Assignment(key, value, Location(w.path, w.line, 1), Source.PYTHON,
                                      f"{w.name}={w.value}" if w.value is not entry_writes.UNREAD else w.name))
    if assignments:
        unit.layers.append(Layer("the entry script's code", assignments))


def _literal_argument(unit: Unit, dest: str) -> str | None:
    """The text a Megatron-LM style launch gives the argument `dest` by its flag (`--task WIKITEXT2`), None where it
    gives none or offlint cannot read it."""
    value = last_value(unit.script_args, "--" + dest.replace("_", "-"))
    return value if isinstance(value, str) else None


def _unread_entry_script(unit: Unit) -> None:
    """A Megatron-LM style launch of a script offlint cannot read (not in the tree, or not where the launch runs it
    from) that has a parser of its own: it takes flags no Megatron-LM release has (slime's `--actor-num-gpus-per-node`,
    `--colocate`), and its code may set any argument before Megatron-LM reads them (slime's train.py turns the
    distributed optimizer on), so what the command line leaves unset is unknown, not argparse's default. A
    scripts-only repository of slime's launches, and one running a nested checkout's train.py, had false OFL116 and
    OFL206 errors. A script taking Megatron-LM's flags alone (an upstream example outside the tree), or a Megatron-LM
    fork's `pretrain_*.py` (Pai-Megatron-Patch's launches run `$MEGATRON_PATH/pretrain_gpt.py` of its fork, whose
    options its extra_args_provider adds), takes argparse's defaults."""
    if posixpath.basename(unit.entry_script).startswith("pretrain_") or \
            all(flag in keys.known_mlm_flags() for flag, *_ in unit.launch_flags):
        return
    why = f"not given; {posixpath.basename(unit.entry_script)}, which offlint cannot read, may set it"
    for section in ("model", "optimizer", "ddp"):
        unit.unknown_sections.setdefault(section, why)
    unit.default_sections = unit.default_sections - {"model", "optimizer", "ddp"}


def _take_entry_script_writes(unit: Unit, writes: tuple[entry_writes.Write, ...]) -> None:
    """A Megatron-LM style launch whose entry script's code sets parsed arguments itself
    (entry_scripts.namespace_writes): the run has that code's values, whatever the command line or argparse's
    default says. A literal every run sets is that value (THUDM/slime's `args.use_distributed_optimizer = True`);
    literals some runs set are one of those or the command line's value (_some_runs_set); any other is unknown (it
    may depend on other arguments, or keep the command line's)."""
    assignments = [Assignment(key, _some_runs_set(w) if w.choices else Unknown(
                                  f"set by the entry script's code at {w.path}:{w.line}")
                              if w.value is entry_writes.UNREAD else w.value, Location(w.path, w.line, 1),
                              Source.PYTHON, f"args.{w.attribute}" if w.value is entry_writes.UNREAD
                              else f"args.{w.attribute} = {w.value!r}")
                   for w in writes for key in mlm_flags.keys_of("--" + w.attribute.replace("_", "-"))]
    if assignments:
        unit.layers.append(Layer("the entry script's code", assignments))


def _some_runs_set(write: entry_writes.Write) -> OneOf:
    """The value of an argument the entry script's code sets to a literal on some runs (`if args.x: args.x =
    False`): one path per place with its literal, and one with the command line's value (BELOW: the layers under
    the code's). Which runs take which is not read (UNREAD_SPLIT): a rule holding on some of them only is possible;
    one holding on none is no finding (a write of False cannot turn a switch on), one holding on all is."""
    split = f"{UNREAD_SPLIT}args.{write.attribute}"
    sets = [f"args.{write.attribute} = {held!r} ({path}:{line})" for path, line, held in write.choices]
    paths = [(BELOW, ((split, 0, f"the entry script's code runs none of {', '.join(sets)}"),), None, None)]
    paths += [(held, ((split, index, f"the entry script's code sets {shown}"),), Location(path, line, 1),
               f"args.{write.attribute} = {held!r}")
              for index, ((path, line, held), shown) in enumerate(zip(write.choices, sets), start=1)]
    return OneOf(f"set by the entry script's code at {write.path}:{write.line} on some runs: "
                 f"{' or '.join(sets)}, else the command line's", paths=tuple(paths))


def _taken(key: str, taken: frozenset[str]) -> bool:
    """Whether a YAML key is one of `taken` (sources/yaml_keys_taken.py) or under one."""
    key = key.lstrip("+~")
    return bool(taken) and any(key == t or key.startswith(t + ".") for t in taken)


def _strip_taken_keys(target: Unit, taken: list[frozenset[str]] | None) -> bool:
    """A YAML override file whose every launch passes it to a script that takes some of its keys out before Bridge
    reads the file (entry_scripts.yaml_keys_taken): those keys are the script's, and the file is checked without
    them (OFL003 had said Bridge ignores a Bridge fork's tutorial launcher's `checkpoint.enabled`). A key one
    launch's script leaves in stays: Bridge reads it there. True where some key was taken out."""
    common = frozenset.intersection(*taken) if taken else frozenset()
    if not common:
        return False
    stripped = False
    for layer in target.layers:
        kept = [a for a in layer.assignments if not _taken(a.key, common)]
        if len(kept) != len(layer.assignments):
            layer.assignments = kept
            stripped = True
    return stripped


def _take_launch_environment(target: Unit, launches: list[Unit]) -> bool:
    """A YAML override file is run by the launches that name it (or, where none does, by those choosing their file
    when they run): each variable every one of them sets to the same value is set for it too. Bridge reads
    NVTE_CPU_OFFLOAD_V1 from the environment of the process the launch starts, so OFL112 had warned on every YAML
    file whose launcher sets it (geodesic-megatron's 24 Super fine-grained configs). A variable one of them leaves
    unset or unknown stays unknown: the file may be run otherwise."""
    shared: dict[str, Assignment] | None = None
    for launch in launches:
        env = {a.key: a for layer in launch.layers if not layer.inherited for a in layer.assignments
               if a.source == Source.ENV and isinstance(a.value, str)}
        shared = env if shared is None else {k: a for k, a in shared.items() if k in env and env[k].value == a.value}
    if not shared:
        return False
    target.layers.append(Layer("the environment of the launches that run it", list(shared.values()), inherited=True))
    return True


def _parser_misses(unit: Unit, script: str | None, near: str, tree_text,
                   memo: dict) -> tuple[tuple[tuple[str, object, str, str], ...], tuple[str, ...], str]:
    """The command's flags its entry script's (`script`, the tree's file) Megatron-LM parser does not have, each
    with the option it is closest to (difflib, as OFL003's suggestions) and the path it is given on; and, where
    there are such flags, the options the parser requires that the command gives on no path, as argparse names
    them (it stops on those first: "the following arguments are required: ..."; none claimed where a word offlint
    cannot read may give them). A missing required option close to an unknown flag is the one suggested: Pai's
    multimodal text_generation_8b.sh passes `--input-path` where run_text_generation.py requires
    `--input-image-path` (a helper's sweep, session 68). Third, the words argparse names as unrecognized
    (_unrecognized). ((), (), "") where offlint cannot read that parser."""
    read_text = lambda path: tree_text(path, near)  # noqa: E731
    options = mlm_arguments.entry_options(script, read_text, memo) if script else None
    if options is None:
        return (), (), ""
    unknown = [(flag, where, path) for flag, where, path in unit.launch_flags if flag not in options]
    if not unknown:
        return (), (), ""
    given = {flag for flag, _, _ in unit.launch_flags}
    required = () if unit.opaque_words else mlm_arguments.entry_required(script, read_text, memo) or ()
    missing = [strings for strings in required if not given & set(strings)]
    missing_options = [option for strings in missing for option in strings]

    def closest(flag: str) -> str:
        for candidates in (missing_options, options):
            match = difflib.get_close_matches(flag, candidates, n=1, cutoff=0.8)
            if match:
                return match[0]
        return ""

    return (tuple((flag, where, closest(flag), path) for flag, where, path in unknown),
            tuple("/".join(strings) for strings in missing), _unrecognized(unit, options))


def _unrecognized(unit: Unit, options: frozenset[str]) -> str:
    """The words argparse names in "unrecognized arguments: ...", in order: each flag the parser lacks and the words
    after it up to the next flag (Megatron-LM's parser has no positional arguments: they are left over too; a
    helper's sweep, session 68, found `--attn-attention unfused` quoted as `--attn-attention`); "" where offlint
    cannot tell them all (a word it cannot read, or one the script gives on some paths only)."""
    if unit.opaque_words or unit.path_flags or any(path for _, _, path in unit.launch_flags):
        return ""
    words = [value for value, _, _ in unit.script_args]
    if any(word is None for word in words):
        return ""
    out, left_over = [], False
    for word in words:
        if word.startswith("-") and len(word) > 1 and not mlm_flags.is_number(word):
            left_over = word.partition("=")[0] not in options
        if left_over:
            out.append(word)
    return " ".join(out)


def _before_2023_flag(unit: Unit, script: str | None, near: str, tree_text) -> str:
    """The first option the launch passes on every path that only a Megatron-LM from before 2023-09 runs with, unless
    the arguments file of the checkout holding the entry `script` (either layout) defines it: a Megatron-DeepSpeed
    fork's still does (its examples copied from Megatron-LM pass `--checkpoint-activations` without --deepspeed)."""
    flag = next((flag for flag, _, path in unit.launch_flags if flag in mlm_flags.BEFORE_2023_FLAGS and not path), "")
    if not flag or not script:
        return flag
    layouts = (mlm_arguments.ARGUMENTS, mlm_arguments.OLD_ARGUMENTS)
    root = mlm_arguments.checkout_root(script, lambda path: tree_text(path, near), layouts)
    if root is None:
        return flag
    texts = (tree_text(posixpath.join(root, layout) if root else layout, near) or "" for layout in layouts)
    return "" if any(f"'{flag}'" in text or f'"{flag}"' in text for text in texts) else flag


def _checkout(script: str | None, near: str, tree_text) -> str:
    """The Megatron-LM checkout holding the entry `script` (the tree's file), where it is not the working directory's
    own: "" where there is none (Unit.checkout). An old one (megatron/arguments.py) too: a Pai-Megatron-Patch fork
    vendors Megatron-LM of 2024-01, whose validate_args runs a layout larger than the world smaller."""
    layouts = (mlm_arguments.ARGUMENTS, mlm_arguments.OLD_ARGUMENTS)
    folder = mlm_arguments.checkout_root(script, lambda path: tree_text(path, near), layouts) if script else None
    return folder if folder and folder != "." else ""


def _checkout_flags(unit: Unit, script: str | None, near: str, tree_text, memo: dict) -> tuple[str, ...]:
    """The command's flags the base parser of the checkout holding its entry script defines (a fork's own flags
    among them; an example's extra_args_provider's not)."""
    options = mlm_arguments.base_options(script, lambda path: tree_text(path, near), memo) if script else None
    return tuple(dict.fromkeys(flag for flag, *_ in unit.launch_flags if flag in options)) if options else ()


class Aliases:
    """The recipe names imported `as` an alias anywhere in the reads' Python files, found in one pass on first use
    (a search per name cost the size of the tree for each of 10,000 launch commands naming recipes the tree does
    not define) and kept for the next step that looks (a pass over Megatron Bridge's Python files: 0.05 s)."""

    def __init__(self, reads) -> None:
        self._reads = reads
        self._found: dict[str, set[str]] | None = None

    def get(self, alias: str) -> set[str]:
        if self._found is None:
            self._found = aliases_in(self._reads)
        return self._found.get(alias, set())


def aliases_in(reads) -> dict[str, set[str]]:
    """alias -> the names imported `as` it, over every `from m import X as Y` of the reads' Python files."""
    found: dict[str, set[str]] = {}
    for read in reads:
        if read.file.kind == "python":
            for original, alias in _imported_as(read.text):
                found.setdefault(alias, set()).add(original)
    return found


def _imported_as(text: str) -> list[tuple[str, str]]:
    """`_IMPORTED_AS.findall(text)`, four times faster: the regex is tried only at the word before each ` as `
    (trying it at every position of every Python file of Megatron Bridge took 0.7 s, after the workers)."""
    found: list[tuple[str, str]] = []
    end = 0  # findall's matches do not overlap: one starts where the last one ended, or after
    after = 0  # where the last ` as ` ended: the hits are those of finditer(r"\sas\s"), which do not overlap either
    for hit in _AS.finditer(text):
        start = hit.start()  # of `as`; `\sas\s` tried at every position cost 0.2 s on Bridge's Python files, this 0.03
        if start < after + 1 or not text[start - 1].isspace():
            continue
        after = start + 3
        while start > 0 and text[start - 1].isspace():
            start -= 1
        word = start
        while word > 0 and _WORD_CHAR.match(text, word - 1):
            word -= 1
        if word < start and word >= end and (match := _IMPORTED_AS.match(text, word)):
            found.append(match.groups())
            end = match.end()
    return found


def _tree_reader(reads: list[FileRead]):
    """(path, near) -> text for what links launches to the tree: a file read in this run, else one of the project
    `near` lies in, read through the bounded reader (a pre-commit run reads only some files); never one outside."""
    texts: dict[str, str | None] = {posixpath.normpath(read.file.path): read.text for read in reads}
    roots: dict[str, Path | None] = {}

    def tree_text(path: str, near: str) -> str | None:
        path = posixpath.normpath(path)
        if path not in texts and not os.path.isfile(path):
            # (nearly all asked are not there: the places an entry script may be, upward from its launch; one stat
            # each, not the real path's and the project root's lookups: 1,454 of them took 0.056 s on Bridge)
            texts[path] = None
        if path not in texts:
            folder = posixpath.dirname(near) or "."
            if folder not in roots:
                roots[folder] = scope.project_root([folder])
            root, real = roots[folder], Path(os.path.realpath(path))
            inside = root is not None and (real == root or root in real.parents) and real.is_file()
            text, error = text_or_error(path) if inside else ("", "outside the project")
            texts[path] = None if error else text
        return texts[path]

    return tree_text


def _find_yaml(name: str, script: str, yaml_units: dict) -> Unit | None:
    for base in (Path(script).parent, Path.cwd()):
        candidate = (base / name).resolve()
        if candidate in yaml_units:
            return yaml_units[candidate]
    return None
