"""`offlint bisect`: the click command. Parses options, checks input, wires the rooms together, exits.

Exit codes (git bisect run's spirit, documented in docs/bisect.md): 0 a first bad commit was found;
1 no single answer (ambiguous: only skipped commits left; aborted: an end did not verify); 2 usage error
(unknown revision, not a repository, unknown class, missing configuration); 130 interrupted (the journal is
kept: rerun with --resume).
"""

from __future__ import annotations

import signal
import sys
from dataclasses import asdict
from pathlib import Path

import click
import git

from offlint.bisect import history, report as reports
from offlint.bisect.configdiff import config_diff
from offlint.bisect.history import HistoryError
from offlint.bisect.journal import Journal, JournalError
from offlint.bisect.plan import plan_callback
from offlint.bisect.prescreen import Prescreen
from offlint.bisect.probes import PROBES, Probe, make_terms
from offlint.bisect.search import search
from offlint.bisect.state import RunRecord, StateError, open_state, recover
from offlint.bisect.tester import CommitTester, StaticTester
from offlint.bisect.worktree import Worktrees
from offlint.config import ConfigError
from offlint.slurm import SlurmError, SlurmOptionsError
from offlint.slurm.launchers import LAUNCHERS, bisect_launch
from offlint.slurm.options import slurm_click_options
from offlint.usage import fail as _fail
from offlint.options import Size, alias_of, color_option, deprecated, iters_option, mcore_version_option
from offlint.terminal import Status, plural
from offlint.versions import VersionError, parse_version


def _terminate(signum, frame):  # SIGTERM (a scheduler, `kill`) unwinds like Ctrl-C, so cleanup runs
    raise KeyboardInterrupt


@click.command("bisect")
@click.option("--plan", default=None, is_eager=True, expose_value=False, callback=plan_callback, metavar="FILE",
              help="A saved plan (bisect/NAME.yaml): every option of this command by name; flags typed here win.")
@click.option("--good", required=True, help="A revision where the configuration is in the old state.")
@click.option("--bad", required=True, help="A revision where it is in the new state.")
@click.option("--repo", default=".", show_default=True, help="The repository to search.")
@click.option("--probe", "probe_kind", type=click.Choice(PROBES), required=True, help="How each commit is tested.")
@click.argument("config", required=False, callback=alias_of())
@deprecated("--config", "config", "CONFIG (the first argument)")
@click.option("--recipe", default=None, help="The recipe (unit) in CONFIG.")
@click.option("--override", multiple=True, help="KEY=VALUE on top of the configuration (repeatable).")
@click.option("--select", multiple=True, help="lint: rule codes or prefixes that count (default: errors).")
@click.option("--bad-on", default=None, help="Outcome classes that mean the new state (default: every failure).")
@click.option("--good-on", default=None, help="Outcome classes that mean the old state (default: pass).")
@click.option("--jobs", default=1, type=click.IntRange(1, 64), show_default=True, help="Commits tested at once.")
@click.option("--gpu-ids", default=None, callback=alias_of(), metavar="IDS",
              help="GPU ids, e.g. 0,1,2,3; each job gets its own CUDA_VISIBLE_DEVICES slice.")
@deprecated("--gpus", "gpu_ids", "--gpu-ids (--gpus is a count of GPUs in offlint estimate)")
@click.option("--retries", default=0, type=click.IntRange(0, 100), show_default=True,
              help="Extra runs of a commit that looked good (a failure is certain, a pass is not).")
@click.option("--timeout", "timeout_s", default=600.0, type=click.FloatRange(0.1), show_default=True,
              help="Seconds per probe run.")
@iters_option("replay: training iterations.")
@click.option("--memory-threshold", default=0.10, type=click.FloatRange(0), show_default=True,
              help="replay: peak memory this fraction above the good end's is a memory regression.")
@click.option("--memory-budget", default=None, type=Size(legacy_bytes=True), metavar="SIZE",
              help="replay: peak memory budget, a size such as 70GiB or 500MB; a plain number is GiB.")
@mcore_version_option("megatron-core version whose defaults lint, validate and replay probes read the configuration "
                      "with, e.g. 0.16.1 (default: the installed one).")
@color_option
@click.option("--report", "report_md", type=click.Path(dir_okay=False), default=None,
              help="Write a Markdown report here.")
@click.option("--report-json", type=click.Path(dir_okay=False), default=None, help="Write a JSON report here.")
@click.option("--bisect-log", type=click.Path(dir_okay=False), default=None,
              help="Write a `git bisect replay` file here (default: in the state dir).")
@click.option("--resume", is_flag=True, help="Reuse the finished runs of an interrupted bisect.")
@click.option("--full-history", is_flag=True, help="Search every commit, not only first-parent ones.")
@click.option("--mcore-from-checkout", default=None, is_flag=False, flag_value="",
              help="Import megatron-core from the commit under test (optionally from SUBDIR, e.g. "
                   "3rdparty/Megatron-LM).")
@click.option("--prescreen", is_flag=True, help="Lint every candidate statically (git archive, no checkout) first and "
              "test its predicted culprit first; with --probe lint, the pre-screen is the probe.")
@click.option("--command", "user_command", default=None, help="command probe: a shell command; {worktree} is replaced.")
@click.option("--launcher", type=click.Choice(LAUNCHERS), default="local", show_default=True,
              help="Where probe steps run: local processes, or one Slurm job each (command and replay probes).")
@slurm_click_options
def bisect_command(good, bad, repo, probe_kind, config, recipe, override, select, bad_on, good_on, jobs, gpu_ids,
                   retries, timeout_s, iters, memory_threshold, memory_budget, report_md, report_json, bisect_log,
                   resume, full_history, mcore_from_checkout, prescreen, user_command, launcher, mcore_version,
                   **slurm_values) -> None:
    """Find the first commit where a configuration's outcome changed (an OOM, a crash, a rejection, a fix)."""
    try:
        repository = history.open_repo(repo)
        span = history.bisect_range(repository, good, bad, full_history)
        terms = make_terms(bad_on, good_on)
    except (HistoryError, ValueError) as exc:
        _fail(str(exc))
    if mcore_version:
        try:
            parse_version(mcore_version)
        except VersionError as exc:
            _fail(f"--mcore-version: {exc}")
    probe = _probe(repository, span, probe_kind, config, recipe, override, select, mcore_from_checkout,
                   user_command, iters, memory_threshold, memory_budget, timeout_s, mcore_version)
    state = Path(repository.git.rev_parse("--git-common-dir"))
    state = (state if state.is_absolute() else Path(repository.working_dir) / state).resolve() / "offlint-bisect"
    status = Status()  # on a terminal: a status line with the rounds left and a clock, under the progress lines
    progress = status.echo
    try:
        # What a killed run left: worktrees, probe groups (its Slurm jobs' worktrees stay for --resume to re-attach)
        recover(open_state(state), repository, progress, keep_worktrees=resume and launcher == "slurm")
        journal = Journal(state / "journal.jsonl", resume)
        journal.append({"type": "start", "good": span.good.sha, "bad": span.bad.sha, "probe": asdict(probe),
                        "resume": resume})
    except (StateError, JournalError) as exc:
        _fail(str(exc))
    try:
        launch = bisect_launch(launcher, slurm_values, Path(repository.working_dir), state, journal, probe_kind,
                               _split(gpu_ids), progress)
    except (SlurmOptionsError, ConfigError) as exc:
        _fail(str(exc))
    if prescreen and probe.config_in_repo is None:
        _fail(f"{config}: --prescreen reads the configuration at each commit, so CONFIG must be inside the "
              f"repository")
    previous = signal.signal(signal.SIGTERM, _terminate)
    commits = [span.good, *span.candidates]
    progress(f"Bisecting {plural(len(span.candidates), 'commit')} ({'full history' if full_history else 'first-parent'}) "
             f"with the {probe_kind} probe, {jobs} at a time")
    status.__enter__()
    status.set(f"bisect: {plural(len(span.candidates), 'commit')} to search")
    try:
        with RunRecord(state) as record, Worktrees(repository, launch.worktree_base, record) as worktrees:
            if hasattr(launch.runner, "tracker"):  # local probes: their process groups go into the record
                launch.runner.tracker = record
            screen, hint = None, None
            if prescreen:
                screen = Prescreen(repository, commits, probe)
                screen.run(progress)
                hint = screen.prediction(terms)
                progress(f"pre-screen: {screen.lints} distinct file sets linted; predicted first bad commit: "
                         + (commits[hint].short if hint is not None else "none"))
            tester_type, extra = (StaticTester, {"static": screen.verdicts}) if screen and probe_kind == "lint" \
                else (CommitTester, {})
            tester = tester_type(commits, probe, terms, launch.runner, worktrees, journal,
                                 launch.log_dir, jobs, retries, _rule_errors(), progress, **extra)
            result = search(len(span.candidates), tester, jobs, hint=hint, on_round=lambda left, steps: _round(
                status, left, steps))
            report = _report(result, tester, span, probe, terms, journal)
            if screen is not None:
                report.prescreen = {"lints": screen.lints,
                                    "predicted": commits[hint].sha if hint is not None else None}
            if result.status == "found" and probe.config:
                report.config_diff = config_diff(repository, probe, commits[result.first_bad - 1].sha,
                                                 commits[result.first_bad].sha)
    except KeyboardInterrupt:
        status.echo(f"offlint: interrupted; finished runs are kept in {journal.path}; rerun the same command with "
                    f"--resume to continue")  # above the status line, which the finally clause removes
        sys.exit(130)
    except (SlurmError, JournalError, StateError) as exc:  # the runner has cancelled its jobs already
        _fail(str(exc))
    finally:
        status.__exit__(None, None, None)
        signal.signal(signal.SIGTERM, previous)
    journal.append({"type": "end", "status": report.status,
                    "first_bad": report.first_bad.sha if report.first_bad else None})
    log_path = bisect_log or str(state / "bisect.log")
    unwritten = [f"{path}: cannot write it ({exc.strerror or exc})" for path, exc in (
        (report_md, reports.write(report_md, reports.to_markdown(report))),
        (report_json, reports.write_json(report_json, report)),
        (log_path, reports.write(log_path, reports.bisect_log(report, first_parent=not full_history))))
        if exc is not None]
    _summary(report, log_path)
    if unwritten:  # (after the summary: the answer is on the screen; `--resume` gives the files again, no run)
        _fail(f"{'; '.join(unwritten)}; `--resume` writes them again without running a probe")
    sys.exit(0 if report.status == "found" else 1)


def _round(status: Status, left: int, steps: int) -> None:
    text = f"{plural(left, 'commit')} left to test (roughly {plural(steps, 'more round')})"
    status.echo(f"Bisecting: {text}")
    status.set(f"bisect: {text}")


def _split(text: str | None) -> list[str]:
    return [part.strip() for part in (text or "").split(",") if part.strip()]


def _rule_errors():
    from offlint.rules import load_rules
    from offlint.validate import rules_for_error

    rules = load_rules()
    return lambda signature: rules_for_error(signature, rules)


def _probe(repository, span, kind, config, recipe, override, select, mcore_from_checkout, user_command, iters,
           memory_threshold, memory_budget, timeout_s, mcore_version=None) -> Probe:
    if kind == "command" and not user_command:
        _fail("--probe command needs --command CMD (the command to run in each commit's worktree)")
    if kind != "command" and not config:
        _fail(f"--probe {kind} needs CONFIG (the recipe, YAML override file or launch script to test), e.g. "
              f"offlint bisect recipes/llama.py --probe {kind} --good REV --bad REV")
    in_repo, digest = None, ""
    if config:
        root = Path(repository.working_dir).resolve()
        path = Path(config).resolve()
        if not Path(config).is_absolute() and not path.exists() and not path.is_relative_to(root):
            path = (root / config).resolve()  # relative to the repository when the current directory is elsewhere
        if path.is_relative_to(root):
            in_repo = path.relative_to(root).as_posix()
            if not any(_exists_at(repository, rev, in_repo) for rev in (span.bad.sha, span.good.sha)):
                _fail(f"{config}: not in the repository at the good or the bad end; give a file that exists there")
        elif not path.is_file():
            _fail(f"{config}: no such file; give a recipe (.py), a YAML override file or a launch script")
        else:
            import hashlib

            digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
        config = str(path)
    return Probe(kind, config, in_repo, recipe, tuple(override), tuple(_split(",".join(select))),
                 mcore_from_checkout, user_command, iters, memory_threshold, memory_budget, timeout_s=timeout_s,
                 config_digest=digest, mcore_version=mcore_version)


def _exists_at(repository, rev: str, path: str) -> bool:
    try:
        repository.git.cat_file("-e", f"{rev}:{path}")
        return True
    except git.GitCommandError:
        return False


def _report(result, tester: CommitTester, span, probe: Probe, terms, journal: Journal) -> reports.Report:
    commits = tester.commits
    tested = []
    for position in tester.runs:  # in the order they were tested (the bisect log replays in this order)
        runs = []
        for run in tester.runs[position]:
            outcome = tester.outcome_of(run)
            runs.append({"outcome": outcome.outcome.value, "verdict": terms.verdict(outcome.outcome),
                         "signature": outcome.signature, "rules": outcome.rules, "detail": outcome.detail,
                         "peak_allocated_bytes": outcome.peak_allocated_bytes, "duration_s": run.duration_s,
                         "log": run.log, "cached": run.cached, "attempt": run.attempt})
        tested.append(reports.Tested(commits[position], tester.verdict(position), runs))
    cached = sum(1 for runs in tester.runs.values() for r in runs if r.cached)
    report = reports.Report(result.status, span, asdict(probe),
                            {"bad": sorted(o.value for o in terms.bad), "good": sorted(o.value for o in terms.good)},
                            tested, reason=result.reason, rounds=tester.batches, probe_runs=tester.executed,
                            cached_runs=cached, confidence=_confidence(tester))
    if result.status == "found":
        report.first_bad = commits[result.first_bad]
    report.candidates = [commits[p] for p in result.candidates]
    return report


def _confidence(tester: CommitTester) -> str:
    if tester.retries == 0:
        return ""
    rate = tester.failure_rate()
    if rate is None or rate == 0:
        return f"each good verdict rests on up to {tester.retries + 1} passing runs"
    runs = tester.retries + 1
    miss = (1 - rate) ** runs
    return (f"the bad end failed in {rate:.0%} of its runs; a bad commit passes {runs} runs in a row with "
            f"probability {miss:.2%}, so each good verdict holds with {1 - miss:.2%} confidence")


def _summary(report: reports.Report, log_path: str) -> None:
    if report.first_bad:
        c = report.first_bad
        click.echo(f"{c.sha} is the first bad commit")
        click.echo(f"    {c.subject}  ({c.author}, {c.date})")
    elif report.status == "ambiguous":
        click.echo("There are only skipped commits left to test. The first bad commit could be any of:")
        for c in report.candidates:
            click.echo(f"{c.sha}  {c.subject}")
    else:
        click.echo(f"bisect aborted: {report.reason}")
    click.echo(f"{plural(report.probe_runs, 'probe run')} in {plural(report.rounds, 'round')}"
               + (f" ({report.cached_runs} reused)" if report.cached_runs else "") + f"; bisect log: {log_path}",
               err=True)
