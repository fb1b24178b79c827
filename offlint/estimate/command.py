"""The `offlint estimate` click command: load one configuration, estimate it, print or plot. No arithmetic here."""

from __future__ import annotations

import json
from pathlib import Path

import click

from offlint.conditions.scope import Scope
from offlint.conditions.settings import other_accelerator
from offlint.config import ConfigError, load_config
from offlint.engine import builds_no_optimizer, unit_names
from offlint.estimate import params
from offlint.estimate.devices import DEFAULT_DEVICE, GIB, DeviceError, parse_device
from offlint.estimate.inputs import read_inputs
from offlint.estimate.overrides import OverrideInputError
from offlint.estimate.overrides import check as check_overrides
from offlint.estimate import oom
from offlint.gpus import unit_gpu
from offlint.named_precision import configured
from offlint.estimate.refusals import refusals
from offlint.estimate.report import (agreed_state, bracket, depends, render_cannot_run_json, render_cannot_run_text,
                                     render_json, render_text, verdict_state)
from offlint.estimate.whatif import what_if
from offlint.units import UnitSelectionError, load_unit
from offlint.usage import fail as _fail
from offlint.options import alias_of, color_option, deprecated, mcore_version_option, plot_option
from offlint.terminal import Status, plural
from offlint.versions import NEWEST_KNOWN, VersionError, parse_version


@click.command("estimate")
@click.argument("config")
@click.argument("extra_overrides", nargs=-1, metavar="[KEY=VALUE]...")
@click.option("--recipe", default=None, help="The recipe (unit) in CONFIG to estimate, when it holds several.")
@click.option("--override", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Set a key on top of the configuration, e.g. model.num_layers=32 (repeatable).")
@click.option("--gpu", default=None, help=f"h100-80gb, h200, b200, gb200, b300, gb300, a100-80gb, r100, vr200 or a "
                                          f"capacity in GiB "
                                          f"(default: [tool.offlint] gpu, else {DEFAULT_DEVICE}).")
@click.option("--gpus", type=click.IntRange(min=1), default=None,
              help="Total GPUs of the job (default: from the recipe name, else the fewest the layout needs).")
@plot_option("Also draw the what-if table as stacked bars into this PNG.")
@mcore_version_option("megatron-core version to read defaults from, e.g. 0.16.1.")
@click.option("--output-format", type=click.Choice(["text", "json"]), default=None, callback=alias_of("text"),
              help="How to print the estimate (default: text).")
@deprecated("--format", "output_format", "--output-format", type=click.Choice(["text", "json"]))
@color_option
def estimate_command(config, extra_overrides, recipe, overrides, gpu, gpus, plot_path, mcore_version,
                     output_format) -> None:
    """Estimate one GPU's peak memory for a recipe, YAML override file or launch script, and what each
    memory knob would change. Overrides go in --override KEY=VALUE or, as for run_recipe.py, after CONFIG."""
    overrides = list(overrides) + list(extra_overrides)
    if Path(config).is_dir():
        _fail(f"{config}: is a directory; give one recipe (.py), YAML override file or launch script "
              f"(`offlint check {config}` lints a whole directory)")
    try:
        project = load_config(Path.cwd())
        device = parse_device(gpu or project.gpu or DEFAULT_DEVICE)
        check_overrides(overrides, parse_version(mcore_version or NEWEST_KNOWN))
        with Status(enabled=output_format == "text") as status:  # a tree's imports take a second or two
            status.set(f"estimate: reading {config} and what it imports")
            loaded = load_unit(config, recipe, overrides, mcore_version, project.mcore_version,
                               root=project.root)
        check_overrides(overrides, loaded.version.version, written=loaded.written_keys())
    except (ConfigError, DeviceError, OverrideInputError, UnitSelectionError, VersionError) as exc:
        _fail(str(exc))
    unit = loaded.unit
    notes = [f"megatron-core {loaded.version.version} (from {loaded.version.origin})",
             *([loaded.version.note] if loaded.version.note else []), *loaded.assumed]  # (`check` warns of it)
    precision_from = configured(loaded.resolved.get)[1]  # a precision recipe's name: the tree's, or offlint's table
    notes += [precision_from] if precision_from else []
    # A Bridge recipe's name (`..._8gpu_b200_bf16_config`), a card's section or the recipe's folder names its GPU
    token, named_by = unit_gpu(unit.name, unit.card_gpu, unit.location.path)
    if gpu is None:
        named = oom.device_for(unit.name, token or "")
        if named != device:
            device = named
            notes.append(f"device {device.name}, from {named_by}")
    # The FP8 transpose is the architecture's: the recipe's GPU unless --gpu names one (oom.fp8_transpose)
    transpose = device.fp8_transpose if gpu else oom.fp8_transpose(unit.name, token or "")
    if builds_no_optimizer(unit):  # the memory model sizes a training step (conditions/memory.py)
        _fail(f"{config}: {unit.name}: no verdict: the launch does not train (its entry script builds no "
              f"optimizer, or its name and flags say it generates, converts or evaluates), and the memory model "
              f"sizes a training step")
    accelerator = other_accelerator(Scope(loaded.resolved.get, loaded.resolved.version, names=unit_names(unit)))
    if accelerator and isinstance(accelerator, str):  # (`offlint check` does not judge it: conditions/memory.py)
        notes.append(f"it runs on {accelerator}; these figures are for {device.name}, a CUDA GPU, the device the "
                     f"memory model sizes")
    refused = refusals(loaded.resolved, gpus)
    if refused:  # `offlint check`'s verdict: megatron-core, Bridge or TE refuses it, so its memory is moot
        title = f"{unit.name} ({config})"
        if output_format == "json":
            click.echo(json.dumps(render_cannot_run_json(title, refused, notes), indent=1))
        else:
            click.echo(render_cannot_run_text(title, refused, notes), nl=False)
        return
    inputs = read_inputs(loaded.resolved.get, unit.name, gpus, transpose, launch_gpus=unit.launch_gpus)
    if inputs.unsupported:
        _fail(f"{config}: {unit.name}: no verdict: it uses {', '.join(inputs.unsupported)}, which the memory model "
              f"does not cover (an estimate would be a guess)")
    if inputs.unknown:
        from offlint.estimate.oom import SIZE_KEYS

        keys = [k for k in SIZE_KEYS if k in inputs.unknown] or sorted(inputs.unknown)
        named = ", ".join(keys[:6]) + (f" (and {len(keys) - 6} more)" if len(keys) > 6 else "")
        _fail(f"{config}: {unit.name}: no verdict: cannot estimate without {named}; set them in the configuration "
              f"or pass --override KEY=VALUE")
    p = inputs.parallel
    world = gpus or p.world_size or p.min_world_size()
    if not p.tiles(world, bool(inputs.model.num_moe_experts)):
        # from the recipe's name, the recipe cannot run as named (OFL216; an open ETP is 1 here, inputs._read_parallel)
        named = f", from {inputs.world_size_source}," if not gpus and p.world_size else ""
        _fail(f"{config}: the job's {plural(world, 'GPU')}{named} cannot be divided into TP{p.tp} x PP{p.pp} x "
              f"CP{p.cp}" + (f" with EP{p.ep} x ETP{p.etp}" if inputs.model.num_moe_experts else "")
              + (": megatron-core's initialize_model_parallel raises, so the recipe cannot run as named (OFL216)"
                 if named else "") + "; pass --gpus N")
    if params.layer_ranges(inputs.model, p) is None:
        _fail(f"{config}: {inputs.model.num_layers} layers do not split over PP{p.pp}"
              + (f" x VPP{p.vpp}" if p.vpp else "") + " as configured (layout, first/last stage layers or an "
              "uneven split megatron-core would refuse); fix the split or pass --override")
    notes += [f"{key} is not known: assuming {what}" for key, what in sorted(inputs.assumed.items())]
    if gpus is None and p.world_size is None:
        notes.append(f"assuming {plural(world, 'GPU')}, the fewest this layout needs; pass --gpus N for the real job")
    elif gpus is None:
        notes.append(f"{plural(world, 'GPU')}, from {inputs.world_size_source}")
    with_expandable = oom.expandable(loaded.resolved.get)

    def judge(_, r):
        return agreed_state(r, device, with_expandable)

    what, alternatives = oom.alternatives(inputs, world)
    # The verdict may depend on a fact offlint cannot know (the sequence length the launcher runs, the GPU's
    # architecture, an unmeasured capacity): then one verdict per way it may go, each decided
    depending = depends(what, alternatives, device, with_expandable)
    inputs, result, _, either = oom.judged(inputs, what, alternatives, judge)
    notes += [either + _floor_not_sure(alternatives, device)] if either and not depending else []
    shown = device  # the capacity the verdict is told against; what-if options and fixes use `device`
    if depending:
        first = alternatives[0].label
        notes.append(f"shown {first + ' and ' if first else ''}at {device.total_gib:.1f} GiB, where the what-if "
                     f"options are judged")
    elif device.upper is not None:  # a stated capacity: the verdict holds at both ends of its bracket
        state = judge(None, result)
        shown = device if state == "fits" else device.upper  # the end that decides it
        notes.append(f"{bracket(device)}; the verdict holds at both ends and is shown at {shown.total_gib:.1f} GiB; "
                     f"what-if options are judged at {device.total_gib:.1f} GiB")
    options = what_if(inputs, device, world)
    risk_fix = ""
    if not depending and verdict_state(result, shown, with_expandable) == "at risk":
        risk_fix = oom.cheapest_fix(inputs, device, loaded.resolved.get, with_expandable, result)
    title = f"{unit.name} ({config})"
    if output_format == "json":
        click.echo(json.dumps(render_json(title, result, shown, options, notes, with_expandable, risk_fix,
                                           depending), indent=1))
    else:
        click.echo(render_text(title, result, shown, options, notes, with_expandable, risk_fix, depending),
                   nl=False)
    if plot_path:  # after the estimate: a missing matplotlib costs the picture, not the numbers
        from offlint.estimate.plot import PlotError, plot

        try:
            plot(options, device, title, Path(plot_path))
        except PlotError as exc:
            _fail(str(exc))


def _floor_not_sure(alternatives: list, device) -> str:
    """What the "either way" note must add when the job does not fit either way but its calibrated floor fits on
    some of the ways: then the verdict line's "an OOM even at the floor" holds only for the way shown, and `offlint
    check`, which claims an OOM only where the floor overruns every way (oom.inputs_for), reports none."""
    verdicts = [oom.oom_verdict(a.result, device) for a in alternatives]
    if "oom" not in verdicts or all(v == "oom" for v in verdicts):
        return ""
    fits = [f"{a.label} its calibrated floor ({oom.floor_bytes(a.result) / GIB:.1f} GiB) does not overrun"
            for a, v in zip(alternatives, verdicts) if v != "oom"]
    return f"; but {', '.join(fits)}: an OOM is not sure, and `offlint check` claims none (OFL303)"
