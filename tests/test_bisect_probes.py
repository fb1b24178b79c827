"""The probes at work on generated histories: lint (YAML, inherited base builder, launch script), validate
with the real installed megatron-core, command across submodule bumps, replay from a stand-in's result file;
then --resume after a kill, and the reports (JSON fields, config diff, git bisect log)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from offlint.bisect.probes import Probe
from offlint.bisect.runner import LocalRunner
from offlint.outcomes import Outcome
from tests.bisect_helpers import bisect, history, read_json, repo_state

LINT_CASES = {
    "config": ["--config", "conf/offload.yaml"],
    "base-builder": ["--config", "src/megatron/bridge/recipes/llama.py", "--recipe", "llama_8b_config"],
    "launch": ["--config", "launch/train.sh", "--select", "OFL107"],  # OFL112 (NVTE env) fires at every commit
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(LINT_CASES))
def test_lint_probe_finds_each_kind_of_configuration_culprit(tmp_path, kind):
    h = history(tmp_path, kind, commits=24, culprit=15, merge_every=8)
    out, md = tmp_path / "r.json", tmp_path / "r.md"
    result = bisect(h["repo"], "--good", h["good"], "--bad", h["bad"], "--probe", "lint", *LINT_CASES[kind],
                    "--report-json", str(out), "--report", str(md))
    assert result.returncode == 0, result.stderr
    report = read_json(out)
    assert report["first_bad_commit"] == h["culprit"]
    culprit_runs = next(t["runs"] for t in report["tested"] if t["commit"]["sha"] == h["culprit"])
    assert "OFL107" in culprit_runs[0]["rules"]
    if kind != "launch":  # the launch script's override is not part of the unit read from recipes/YAML
        diff = {d["key"]: d for d in report["config_diff"]}
        assert diff["model.offload_modules"]["culprit"] == "['attn_proj']"


@pytest.mark.slow
def test_lint_probe_300_commit_history_within_the_bound(tmp_path):
    import math

    h = history(tmp_path, "config", commits=300, culprit=123)
    out = tmp_path / "r.json"
    result = bisect(h["repo"], "--good", h["good"], "--bad", h["bad"], "--probe", "lint", "--config",
                    "conf/offload.yaml", "--report-json", str(out))
    assert result.returncode == 0, result.stderr
    report = read_json(out)
    assert report["first_bad_commit"] == h["culprit"]
    assert report["probe_runs"] <= math.ceil(math.log2(report["candidate_count"] + 1)) + 2


@pytest.mark.slow
def test_unreadable_commits_are_skipped_not_blamed(tmp_path):
    h = history(tmp_path, "config", commits=20, culprit=14, broken=(6, 9), merge_every=0)
    out = tmp_path / "r.json"
    result = bisect(h["repo"], "--good", h["good"], "--bad", h["bad"], "--probe", "lint", "--config",
                    "conf/offload.yaml", "--report-json", str(out))
    assert result.returncode == 0, result.stderr
    assert read_json(out)["first_bad_commit"] == h["culprit"]


@pytest.mark.slow
def test_validate_probe_with_the_real_megatron_core(tmp_path):
    h = history(tmp_path, "config", commits=3, culprit=2, merge_every=0)
    out = tmp_path / "r.json"
    result = bisect(h["repo"], "--good", h["good"], "--bad", h["bad"], "--probe", "validate", "--config",
                    "conf/offload.yaml", "--report-json", str(out))
    assert result.returncode == 0, result.stderr
    report = read_json(out)
    assert report["first_bad_commit"] == h["culprit"]
    bad = next(t["runs"][0] for t in report["tested"] if t["commit"]["sha"] == h["culprit"])
    assert bad["outcome"] == "crash" and bad["signature"].startswith("ValueError: attn_proj cannot be set")
    assert "OFL107" in bad["rules"]


@pytest.mark.slow
def test_command_probe_follows_submodule_bumps(tmp_path):
    h = history(tmp_path, "submodule", commits=12, culprit=8, merge_every=0)
    out = tmp_path / "r.json"
    result = bisect(h["repo"], "--good", h["good"], "--bad", h["bad"], "--probe", "command", "--command",
                    f"{sys.executable} {{worktree}}/3rdparty/Megatron-LM/check.py", "--report-json", str(out))
    assert result.returncode == 0, result.stderr
    assert read_json(out)["first_bad_commit"] == h["culprit"]


STAND_IN = """
import json, sys
args = sys.argv[1:]
out = args[args.index("--result-json") + 1]
peak = int(open(args[0]).read().split("peak:")[1].split()[0])
json.dump({"outcome": "pass", "signature": None, "peak_allocated_bytes": [peak, peak - 1], "loss": [3.0, 2.5]},
          open(out, "w"))
"""


def test_replay_probe_memory_regression_against_the_good_end(tmp_path):
    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN)
    config = tmp_path / "cfg.yaml"
    probe = Probe("replay", str(config), None, replay_program=(sys.executable, str(script)), memory_threshold=0.1)
    verdicts = []
    for peak in (40 * 2**30, 42 * 2**30, 48 * 2**30):
        config.write_text(f"# peak: {peak}\n")
        step = probe.step(tmp_path, f"p{peak}", tmp_path / "logs")
        assert "--iters" in step.argv and step.gpus == 1
        [result] = LocalRunner().run([step])
        verdicts.append(probe.classify(result))
    baseline = verdicts[0]
    assert [probe.against_baseline(v, baseline).outcome for v in verdicts] == [
        Outcome.PASS, Outcome.PASS, Outcome.MEMORY_REGRESSION]
    assert probe.against_baseline(verdicts[2], baseline).signature == (
        "peak 48.00 GiB is 20% above the good end's 40.00 GiB")
    budget = Probe("replay", str(config), None, memory_budget=44 * 2**30)
    over = budget.against_baseline(verdicts[2], None)
    assert over.outcome is Outcome.MEMORY_REGRESSION and over.signature == "peak 48.00 GiB above the budget of 44.00 GiB"


@pytest.mark.slow
def test_resume_after_kill_gives_the_same_answer_without_repeating_runs(tmp_path):
    h = history(tmp_path, "command", commits=40, culprit=29, merge_every=0)
    runs_log = tmp_path / "runs.txt"
    command = f"echo $(git rev-parse HEAD) >> {runs_log}; sleep 0.5; {sys.executable} probe.py"
    args = ["--good", h["good"], "--bad", h["bad"], "--probe", "command", "--command", command]
    before = repo_state(h["repo"])
    process = subprocess.Popen([sys.executable, "-m", "offlint", "bisect", "--repo", h["repo"], *args],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    while not runs_log.exists() or len(runs_log.read_text().split()) < 4:
        time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    process.communicate(timeout=60)
    assert process.returncode == 130
    assert repo_state(h["repo"]) == before
    journal = Path(h["repo"], ".git", "offlint-bisect", "journal.jsonl")
    finished = {r["sha"] for r in map(json.loads, journal.read_text().splitlines()) if r["type"] == "run"}
    assert len(finished) >= 3
    runs_log.write_text("")
    out = tmp_path / "r.json"
    result = bisect(h["repo"], *args, "--resume", "--report-json", str(out))
    assert result.returncode == 0, result.stderr
    report = read_json(out)
    assert report["first_bad_commit"] == h["culprit"]
    rerun = set(runs_log.read_text().split())
    assert not rerun & finished  # nothing that finished before the kill ran again
    assert report["cached_runs"] == len(finished)
    assert repo_state(h["repo"]) == before


@pytest.mark.slow
def test_reports_and_bisect_log_replay_with_git(tmp_path):
    h = history(tmp_path, "config", commits=10, culprit=6, merge_every=0)
    out, md, log = tmp_path / "r.json", tmp_path / "r.md", tmp_path / "bisect.log"
    result = bisect(h["repo"], "--good", h["good"], "--bad", h["bad"], "--probe", "lint", "--config",
                    "conf/offload.yaml", "--report-json", str(out), "--report", str(md), "--bisect-log", str(log))
    assert result.returncode == 0, result.stderr
    report = read_json(out)
    assert report["status"] == "found" and len(report["first_bad_commit"]) == 40
    assert {t["commit"]["sha"] for t in report["tested"]} >= {h["good"], h["bad"], h["culprit"]}
    text = md.read_text()
    assert "# offlint bisect: found" in text and h["culprit"] in text and "model.offload_modules" in text
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", h["repo"], str(clone)], check=True)
    replay = subprocess.run(["git", "bisect", "replay", str(log)], cwd=clone, capture_output=True, text=True)
    assert f"{h['culprit']} is the first bad commit" in replay.stdout, replay.stdout + replay.stderr


@pytest.mark.slow
def test_a_report_that_cannot_be_written_is_one_line_after_the_answer_and_resume_writes_it(tmp_path):
    """--report into a folder that cannot be made ended a finished bisect in an internal error (FileNotFoundError):
    every probe run done for nothing. Now the answer is shown, the other reports written (their folders made), the
    one error is one line, and --resume writes the report from the journal without a probe run."""
    h = history(tmp_path, "config", commits=12, culprit=7)
    (tmp_path / "file").write_text("")
    out, md = tmp_path / "new" / "r.json", tmp_path / "file" / "r.md"
    args = ["conf/offload.yaml", "--good", h["good"], "--bad", h["bad"], "--probe", "lint"]
    result = bisect(h["repo"], *args, "--report-json", str(out), "--report", str(md))
    assert result.returncode == 2 and h["culprit"][:10] in result.stdout, result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith(f"offlint: error: {md}: cannot write it (") and "`--resume` writes" in lines[-1]
    assert "Traceback" not in result.stderr and read_json(out)["first_bad_commit"] == h["culprit"]
    md = tmp_path / "r.md"
    again = bisect(h["repo"], *args, "--resume", "--report-json", str(out), "--report", str(md))
    assert again.returncode == 0, again.stderr
    report = read_json(out)
    assert report["first_bad_commit"] == h["culprit"] and h["culprit"] in md.read_text()
    assert report["probe_runs"] == 0 and report["cached_runs"] > 0


@pytest.mark.parametrize("option", ["--report", "--report-json", "--bisect-log"])
def test_a_report_path_that_is_a_folder_is_refused_before_any_run(tmp_path, option):
    h = history(tmp_path, "config", commits=4, culprit=2)
    result = bisect(h["repo"], "conf/offload.yaml", "--good", h["good"], "--bad", h["bad"], "--probe", "lint",
                    option, str(tmp_path))
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip() == (f"offlint: error: invalid value for '{option}': File '{tmp_path}' is a "
                                     f"directory; see 'offlint bisect --help'")
