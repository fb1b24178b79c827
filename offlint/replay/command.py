"""`offlint replay`: the click command. Reads the unit as `offlint check` does, maps it, runs, reports."""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path

import click

from offlint.outcomes import Outcome
from offlint.replay import launch, sweep, verify
from offlint.replay.mapping import MappingError, ReplaySpec, Shrink, map_unit
from offlint.replay.result import exit_code_for, outcome_of, peak_bytes, write_json
from offlint.slurm.options import given_options, slurm_click_options
from offlint.units import UnitSelectionError, load_unit
from offlint.usage import fail as _fail
from offlint.options import Size, color_option, iters_option, mcore_version_option, plot_option
from offlint.terminal import Status, plural
from offlint.versions import VersionError


@click.command("replay")
@click.argument("config")
@click.option("--recipe", default=None, help="The recipe (unit) in CONFIG to replay, when it holds several.")
@click.option("--override", "overrides", multiple=True, metavar="KEY=VALUE",
              help="A Hydra-style override applied last, e.g. optimizer.optimizer_offload_fraction=0.5.")
@iters_option()
@click.option("--result-json", type=click.Path(dir_okay=False), default=None,
              help="Where to write the result (default: RUN-DIR/result.json).")
@click.option("--gpu-memory", type=Size(), default=None, metavar="SIZE",
              help="Cap each process's GPU memory through the allocator's per-process memory fraction: a size such "
                   "as 40GiB or 500MB; a plain number is GiB.")
@click.option("--num-layers", type=click.IntRange(1), default=None, help="Shrink: number of layers.")
@click.option("--hidden-size", type=click.IntRange(1), default=None, help="Shrink: hidden size.")
@click.option("--seq-length", type=click.IntRange(1), default=None, help="Shrink: sequence length.")
@click.option("--micro-batch-size", type=click.IntRange(1), default=None, help="Micro batch size (default 1).")
@click.option("--global-batch-size", type=click.IntRange(1), default=None,
              help="Global batch size (default: micro batch x data-parallel size).")
@click.option("--data-parallel-size", type=click.IntRange(1), default=None,
              help="Data-parallel replicas (default: the fewest the parallel layout allows).")
@click.option("--verify", "do_verify", is_flag=True,
              help="Also run the baseline (offloading off) and check the success criteria.")
@click.option("--fractions", default=None, metavar="LIST",
              help="With --verify: sweep optimizer_offload_fraction over LIST, e.g. 0,0.25,0.5,0.75,1.")
@plot_option("With --fractions: write a PNG plot.")
@click.option("--run-dir", type=click.Path(file_okay=False), default=None,
              help="Where specs, rank results and logs go (default: .offlint/replay/<time>).")
@click.option("--timeout", default=1800.0, show_default=True, type=click.FloatRange(min=1), help="Seconds per run.")
@click.option("--dry-run", is_flag=True, help="Print the effective configuration and the launch command; run nothing.")
@click.option("--launcher", type=click.Choice(["local", "slurm"]), default="local", show_default=True,
              help="local: this machine's GPUs; slurm: one Slurm job over --nodes x --gpus-per-node GPUs.")
@slurm_click_options
@mcore_version_option("megatron-core version whose defaults the configuration is read with, e.g. 0.16.1 "
                      "(default: as offlint check finds it); the run itself uses the installed megatron-core.")
@color_option
def replay_command(config, recipe, overrides, iters, result_json, gpu_memory, num_layers, hidden_size, seq_length,
                   micro_batch_size, global_batch_size, data_parallel_size, do_verify, fractions, plot_path, run_dir,
                   timeout, dry_run, launcher, mcore_version, **slurm_values) -> None:
    """Run a short real megatron-core training job of CONFIG and record outcome, loss, memory and time."""
    if (fractions or plot_path) and not do_verify:
        _fail("--fractions and --plot go with --verify")
    if plot_path and not fractions:
        _fail("--plot needs --fractions (it plots the sweep)")
    if plot_path and importlib.util.find_spec("matplotlib") is None:  # known before the sweep's runs, not after
        _fail("--plot needs matplotlib: pip install 'offlint[estimate]'")
    try:
        fraction_list = sweep.parse_fractions(fractions) if fractions else None
    except ValueError as exc:
        _fail(str(exc))
    try:
        loaded = load_unit(config, recipe, overrides, mcore_version)
        shrink = Shrink(num_layers, hidden_size, seq_length, micro_batch_size, global_batch_size, data_parallel_size)
        label = config if loaded.unit.name == config else f"{config}: {loaded.unit.name}"
        spec = map_unit(loaded.resolved, shrink, iters, gpu_memory / 2**30 if gpu_memory else None, label=label)
    except (UnitSelectionError, VersionError) as exc:
        _fail(str(exc))
    except MappingError as exc:
        _fail(str(exc))
    if launcher == "slurm":
        _slurm(spec, run_dir, result_json, timeout, dry_run, do_verify, slurm_values)
    if given_options(slurm_values):
        _fail(f"{', '.join(given_options(slurm_values))}: Slurm options need --launcher slurm")
    run_root = Path(run_dir or Path(".offlint") / "replay" / time.strftime("%Y%m%d-%H%M%S"))
    if dry_run:
        plan = launch.launch_plan(spec, run_root, spec.world_size)
        click.echo(json.dumps(spec.to_json(), indent=2))
        click.echo(" ".join(f"{k}={v}" for k, v in sorted(plan.env.items())) + " " + " ".join(plan.argv))
        return
    if do_verify and fraction_list is None and not verify.offloads_anything(spec):
        _fail(f"{spec.unit}: the configuration enables no offloading, nothing to verify; add --override "
              f"optimizer.optimizer_cpu_offload=true --override optimizer.optimizer_offload_fraction=1.0, "
              f"or --fractions")
    gpus = available_gpus()
    try:
        launch.launch_plan(spec, run_root, gpus)
    except launch.LaunchError as exc:
        _fail(str(exc))
    if not do_verify:
        _replay(spec, run_root, gpus, timeout, result_json)
    elif fraction_list is None:
        _verify(spec, run_root, gpus, timeout, result_json)
    else:
        _sweep(spec, fraction_list, run_root, gpus, timeout, result_json, plot_path)


def _slurm(spec, run_dir, result_json, timeout, dry_run, do_verify, slurm_values) -> None:
    """The replay as one Slurm job (offlint/slurm/replay.py); --dry-run writes the spec and the sbatch script
    into the run directory and prints the script's path."""
    from offlint.slurm import replay as slurm_replay

    if do_verify:
        _fail("--verify runs locally; --launcher slurm replays one configuration")
    try:
        job = slurm_replay.plan(spec, run_dir, timeout, slurm_values)
        click.echo(f"offlint: note: {job.note}", err=True)
        if dry_run:  # stdout: the script's path only, so that `sbatch "$(offlint replay ... --dry-run)"` works
            path = slurm_replay.write_job(job, spec)
            click.echo(f"offlint: wrote {path} and the configuration it runs, "
                       f"{job.run_dir / launch.SPEC_NAME}; submit it with: sbatch {path}", err=True)
            click.echo(str(path))
            sys.exit(0)
        result = slurm_replay.run(job, spec, lambda m: click.echo(m, err=True))
    except slurm_replay.errors() as exc:
        _fail(str(exc))
    click.echo(f"  {summary(result)}", err=True)
    path = Path(result_json or job.run_dir / "result.json")
    _save(path, result, job.run_dir)
    click.echo(f"{result['outcome']}: result in {path}")
    sys.exit(exit_code_for(outcome_of(result)))


def available_gpus() -> int:
    """The CUDA devices this process sees; exit 2 with one line when there are none or torch is missing."""
    if importlib.util.find_spec("torch") is None or importlib.util.find_spec("megatron") is None:
        _fail("replay needs torch and megatron-core installed (pip install 'offlint[replay]')")
    import torch

    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        _fail("replay needs a CUDA GPU and torch sees none (torch.cuda.is_available() is False); run it on a "
              "GPU machine (see docs/replay.md)")
    return torch.cuda.device_count()


def _run(spec: ReplaySpec, run_dir: Path, gpus: int, timeout: float, status: Status | None = None) -> dict:
    echo = status.echo if status is not None else (lambda m: click.echo(m, err=True))
    result = launch.run_local(spec, run_dir, gpus, timeout, echo=echo)
    for note in spec.notes + _activation_notes(result):
        echo(f"  note: {note}")
    echo(f"  {summary(result)}")
    return result


def _save(path: Path, data: dict, run_dir: Path) -> None:
    """The result JSON written once the runs are done; where it cannot be, one line that says where the runs'
    own results and logs are (not an internal error that hides them)."""
    try:
        write_json(path, data)
    except OSError as exc:
        _fail(f"{path}: cannot write the result ({exc.strerror or exc}); each run's rank results and logs are in "
              f"{run_dir}")


def _replay(spec, run_root, gpus, timeout, result_json) -> None:
    result = _run(spec, run_root, gpus, timeout)
    path = Path(result_json or run_root / "result.json")
    _save(path, result, run_root)
    click.echo(f"{result['outcome']}: result in {path}")
    sys.exit(exit_code_for(outcome_of(result)))


def _verify(spec, run_root, gpus, timeout, result_json) -> None:
    with Status() as status:  # on a terminal: which of the two runs is going, and for how long
        status.set("verify: run 1 of 2 (baseline, offloading off)")
        baseline = _run(verify.baseline_spec(spec), run_root / "baseline", gpus, timeout, status)
        status.set("verify: run 2 of 2 (offloaded)")
        offloaded = _run(spec, run_root / "offloaded", gpus, timeout, status)
    criteria = verify.check(baseline, offloaded)
    outcome, code = verify.verdict(criteria)
    click.echo(verify.render_criteria(criteria))
    path = Path(result_json or run_root / "verify.json")
    _save(path, {"verdict": outcome.value, "criteria": [c.__dict__ | {"failure": c.failure and c.failure.value}
                                                        for c in criteria],
                 "baseline": baseline, "offloaded": offloaded}, run_root)
    click.echo(f"verify: {outcome.value}: report in {path}")
    sys.exit(code)


def _sweep(spec, fractions, run_root, gpus, timeout, result_json, plot_path) -> None:
    total = len(fractions) + 1
    with Status() as status:  # on a terminal: which run of the sweep is going, and for how long
        status.set(f"sweep: run 1 of {total} (baseline, offloading off)")
        baseline = _run(verify.baseline_spec(spec), run_root / "baseline", gpus, timeout, status)
        runs = {}
        for number, f in enumerate(fractions, start=2):
            status.set(f"sweep: run {number} of {total} (optimizer_offload_fraction {f:g})")
            runs[f] = _run(verify.fraction_spec(spec, f), run_root / f"fraction-{f:g}", gpus, timeout, status)
    rows = sweep.rows(baseline, runs)
    click.echo(sweep.table(rows))
    path = Path(result_json or run_root / "sweep.json")
    _save(path, {"baseline": baseline, "runs": {f"{f:g}": r for f, r in runs.items()},
                 "rows": [r.__dict__ for r in rows]}, run_root)  # (before the plot: a plot that fails loses no run)
    if plot_path:
        try:
            sweep.plot(rows, Path(plot_path), title=spec.unit)
        except OSError as exc:
            _fail(f"{plot_path}: cannot write the plot ({exc.strerror or exc}); the sweep is in {path}")
        click.echo(f"plot: {plot_path}")
    failed = [r for r in rows[1:] if r.verdict != Outcome.PASS.value]
    outcome = Outcome(failed[0].verdict) if failed else Outcome.PASS
    click.echo(f"sweep: {outcome.value}: report in {path}")
    sys.exit(exit_code_for(outcome))


def summary(result: dict) -> str:
    loss = result.get("loss") or []
    parts = [result["outcome"] + (f" ({result['signature']})" if result.get("signature") else "")]
    if loss:
        parts.append(f"{plural(len(loss), 'iteration')}, loss {loss[0]:.4f} -> {loss[-1]:.4f}")
    peak = peak_bytes(result)
    if peak is not None:
        parts.append(f"peak {peak / 2**30:.2f} GiB allocated (largest rank)")
    step = verify.median_step_s(result)
    if step is not None:
        parts.append(f"median step {step:.3f} s")
    return ", ".join(parts)


def _activation_notes(result: dict) -> list[str]:
    note = ((result.get("offload") or {}).get("activation") or {}).get("note")
    return [note] if note else []
