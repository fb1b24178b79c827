"""The static pre-screen: lint every candidate from `git archive` (no checkout), one lint per distinct set
of configuration files; with --probe lint it is the probe, otherwise its prediction is tested first."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from offlint.bisect import history as hist
from offlint.bisect.prescreen import Prescreen
from offlint.bisect.probes import Probe, make_terms
from offlint.bisect.search import search
from offlint.outcomes import Outcome
from tests.bisect_helpers import bisect, history, read_json, repo_state


@pytest.mark.slow
def test_prescreen_lints_each_distinct_file_set_once_and_predicts_the_culprit(tmp_path):
    h = history(tmp_path, "base-builder", commits=120, culprit=77, broken=(30, 31))
    repo = hist.open_repo(h["repo"])
    span = hist.bisect_range(repo, h["good"], h["bad"])
    commits = [span.good, *span.candidates]
    probe = Probe("lint", str(Path(h["repo"], "src/megatron/bridge/recipes/llama.py")),
                  "src/megatron/bridge/recipes/llama.py", recipe="llama_8b_config")
    screen = Prescreen(repo, commits, probe)
    verdicts = screen.run()
    # initial, broken (yaml unreadable, recipe still fine), repaired, culprit, culprit + later broken-free states
    assert screen.lints <= 4
    assert commits[screen.prediction(make_terms(None, None))].sha == h["culprit"]
    assert verdicts[0].outcome is Outcome.PASS and verdicts[len(commits) - 1].outcome is Outcome.CRASH
    assert "OFL107" in verdicts[len(commits) - 1].rules


@pytest.mark.slow
def test_lint_probe_with_prescreen_needs_no_checkout(tmp_path):
    h = history(tmp_path, "config", commits=300, culprit=251)
    before = repo_state(h["repo"])
    out = tmp_path / "r.json"
    result = bisect(h["repo"], "--good", h["good"], "--bad", h["bad"], "--probe", "lint", "--config",
                    "conf/offload.yaml", "--prescreen", "--report-json", str(out))
    assert result.returncode == 0, result.stderr
    report = read_json(out)
    assert report["first_bad_commit"] == h["culprit"] and report["prescreen"]["predicted"] == h["culprit"]
    assert all(run["log"] == "" for t in report["tested"] for run in t["runs"])  # no probe process, no worktree
    assert repo_state(h["repo"]) == before


@pytest.mark.slow
def test_prediction_is_tested_first_by_a_real_probe(tmp_path):
    h = history(tmp_path, "config", commits=60, culprit=37, merge_every=0)
    out = tmp_path / "r.json"
    result = bisect(h["repo"], "--good", h["good"], "--bad", h["bad"], "--probe", "command", "--command",
                    "grep -q core_attn conf/offload.yaml", "--config", "conf/offload.yaml", "--prescreen",
                    "--report-json", str(out))
    assert result.returncode == 0, result.stderr
    report = read_json(out)
    assert report["first_bad_commit"] == h["culprit"]
    assert report["probe_runs"] == 4 < math.ceil(math.log2(61)) + 2  # both ends, then the predicted pair
    tested = {t["commit"]["sha"] for t in report["tested"]}
    assert tested == {h["good"], h["bad"], h["culprit"], h["main_line"][36]}


def test_a_wrong_prediction_costs_two_runs_and_still_finds_the_culprit():
    for n in (10, 57, 200):
        for culprit in (1, n // 3, n):
            for hint in (1, n // 2, n):
                runs = []
                result = search(n, lambda ps: runs.extend(ps) or ["bad" if p >= culprit else "good" for p in ps],
                                hint=hint)
                assert result.first_bad == culprit
                assert len(runs) <= math.ceil(math.log2(n + 1)) + 4


def test_prescreen_needs_a_configuration_inside_the_repository(tmp_path):
    h = history(tmp_path, "config", commits=3, culprit=2, merge_every=0)
    outside = tmp_path / "cfg.yaml"
    outside.write_text("model:\n  num_layers: 4\n")
    result = bisect(h["repo"], "--good", h["good"], "--bad", h["bad"], "--probe", "lint", str(outside),
                    "--prescreen")
    assert result.returncode == 2 and "--prescreen" in result.stderr and result.stderr.count("\n") == 1
