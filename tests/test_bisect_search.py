"""Search on generated histories with real probe subprocesses: the probe-count bounds of the issue
(binary: <= ceil(log2(N+1)) + 2 runs; k-ary: <= ceil(log_{K+1}(N)) + 1 rounds), flaky failures with
retries, ambiguity when skips surround the culprit, and --bad-on pass (searching for a fix)."""

from __future__ import annotations

import math
import sys

import pytest

from offlint.bisect.search import search
from tests.bisect_helpers import bisect, history, read_json

PROBE = f"{sys.executable} probe.py"


def test_search_bounds_on_every_culprit_position():
    for n in (1, 2, 3, 7, 8, 9, 31, 100, 311):
        for culprit in range(1, n + 1, max(1, n // 13)):
            for jobs in (1, 2, 3):
                runs = []
                result = search(n, lambda ps: runs.extend(ps) or ["bad" if p >= culprit else "good" for p in ps],
                                jobs)
                assert result.status == "found" and result.first_bad == culprit
                if jobs == 1:
                    assert len(runs) <= math.ceil(math.log2(n + 1)) + 2
                assert result.rounds <= math.ceil(round(math.log(n, jobs + 1), 9)) + 1


@pytest.mark.slow
def test_binary_search_on_a_300_commit_history(tmp_path):
    h = history(tmp_path, "command", commits=300, culprit=217)
    out = tmp_path / "r.json"
    result = bisect(h["repo"], "--good", h["good"], "--bad", h["bad"], "--probe", "command", "--command", PROBE,
                    "--report-json", str(out))
    assert result.returncode == 0, result.stderr
    report = read_json(out)
    n = report["candidate_count"]
    assert n == len(h["main_line"]) - 1 and n >= 300
    assert report["status"] == "found" and report["first_bad_commit"] == h["culprit"]
    assert report["probe_runs"] == len(report["tested"]) <= math.ceil(math.log2(n + 1)) + 2


@pytest.mark.slow
@pytest.mark.parametrize("jobs", [2, 3])
def test_k_ary_rounds(tmp_path, jobs):
    h = history(tmp_path, "command", commits=60, culprit=41, merge_every=0)
    out = tmp_path / "r.json"
    result = bisect(h["repo"], "--good", h["good"], "--bad", h["bad"], "--probe", "command", "--command", PROBE,
                    "--jobs", str(jobs), "--report-json", str(out))
    assert result.returncode == 0, result.stderr
    report = read_json(out)
    assert report["first_bad_commit"] == h["culprit"]
    assert report["rounds"] <= math.ceil(math.log(60, jobs + 1)) + 1


@pytest.mark.slow
def test_flaky_failure_found_with_retries(tmp_path):
    h = history(tmp_path, "flaky", commits=16, culprit=9, merge_every=0)
    counters = tmp_path / "counters"
    counters.mkdir()
    command = f"OFFLINT_BISECT_COMMIT=$(git rev-parse HEAD) {PROBE}"
    env = {"FLAKY_COUNTER_DIR": str(counters)}
    out = tmp_path / "r.json"
    result = bisect(h["repo"], "--good", h["good"], "--bad", h["bad"], "--probe", "command", "--command", command,
                    "--retries", "2", "--report-json", str(out), "--report", str(tmp_path / "r.md"), env=env)
    assert result.returncode == 0, result.stderr
    report = read_json(out)
    assert report["first_bad_commit"] == h["culprit"]
    assert "confidence" in report["confidence"]


def test_skips_around_the_culprit_make_the_result_ambiguous(tmp_path):
    h = history(tmp_path, "command", commits=20, culprit=11, broken=(10, 12), merge_every=0)
    out = tmp_path / "r.json"
    result = bisect(h["repo"], "--good", h["good"], "--bad", h["bad"], "--probe", "command", "--command", PROBE,
                    "--report-json", str(out))
    assert result.returncode == 1
    report = read_json(out)
    assert report["status"] == "ambiguous" and report["first_bad_commit"] is None
    candidates = [c["sha"] for c in report["candidates"]]
    assert h["culprit"] in candidates and candidates == h["main_line"][10:14]
    assert "only skipped commits" in result.stdout


def test_bad_on_pass_finds_where_a_failure_went_away(tmp_path):
    h = history(tmp_path, "command", commits=12, culprit=7, merge_every=0)
    out = tmp_path / "r.json"
    # reversed roles: the newest commit passes (`probe.py` inverted), the old one fails
    command = f"! {PROBE}"
    result = bisect(h["repo"], "--good", h["good"], "--bad", h["bad"], "--probe", "command", "--command", command,
                    "--bad-on", "pass", "--report-json", str(out))
    assert result.returncode == 0, result.stderr
    assert read_json(out)["first_bad_commit"] == h["culprit"]


def test_ends_that_do_not_verify_abort(tmp_path):
    h = history(tmp_path, "command", commits=5, culprit=99, merge_every=0)
    out = tmp_path / "r.json"
    result = bisect(h["repo"], "--good", h["good"], "--bad", h["bad"], "--probe", "command", "--command", PROBE,
                    "--report-json", str(out))
    assert result.returncode == 1
    report = read_json(out)
    assert report["status"] == "aborted" and "bad end is not bad" in report["reason"]
