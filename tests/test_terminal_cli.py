"""The terminal side of the CLI, through real subprocesses: progress and colour on a pseudo-terminal only
(never in pipes, CI or machine formats), --color / NO_COLOR / FORCE_COLOR, one usage-error style, plurals,
--stdin-filename, sizes, and ruff's --exclude / --extend-exclude / --force-exclude semantics."""

from __future__ import annotations

import errno
import json
import re
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bisect_helpers import bisect, history

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
ESC = "\x1b["
CLEAN = {k: v for k, v in os.environ.items() if k not in ("CI", "NO_COLOR", "FORCE_COLOR", "GITHUB_ACTIONS")}


def env(**extra: str) -> dict:
    return {**CLEAN, "TERM": "xterm", **extra}


def in_terminal(*args: str, cwd: Path = FIXTURES, extra_env: dict | None = None, timeout: float = 120):
    """Run `python -m offlint ARGS` with standard output and error on one pseudo-terminal; (exit code, text)."""
    master, slave = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "offlint", *args], cwd=cwd, stdin=subprocess.DEVNULL,
                               stdout=slave, stderr=slave, env=env(**(extra_env or {})))
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError as exc:  # EIO: the child closed the terminal
            if exc.errno != errno.EIO:
                raise
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    return process.wait(timeout=timeout), b"".join(chunks).decode("utf-8", "replace")


def piped(*args: str, cwd: Path = FIXTURES, extra_env: dict | None = None, stdin: str | None = None):
    return subprocess.run([sys.executable, "-m", "offlint", *args], cwd=cwd, capture_output=True, text=True,
                          input=stdin, env=env(**(extra_env or {})), timeout=120)


@pytest.mark.slow
def test_check_on_a_terminal_shows_progress_and_colour():
    code, text = in_terminal("check", "bad", "--no-cache")
    assert code == 1
    assert "Reading files" in text and "\r\x1b[K" in text  # the bar, erased when reading ends
    assert f"{ESC}31m{ESC}1mOFL102" in text or f"{ESC}1m{ESC}31mOFL102" in text or "\x1b[31m\x1b[1mOFL1" in text
    assert f"{ESC}1mbad/" in text  # paths bold
    assert "Found " in text


@pytest.mark.slow
def test_check_in_a_pipe_has_neither_progress_nor_colour():
    result = piped("check", "bad", "--no-cache")
    assert result.returncode == 1
    assert ESC not in result.stdout + result.stderr and "Reading files" not in result.stderr
    assert result.stdout.count("\n") == len([line for line in result.stdout.splitlines() if ": OFL" in line])


@pytest.mark.slow
@pytest.mark.parametrize("extra, progress, colour", [
    ({"CI": "true"}, False, True),  # CI logs are files: no bar, but a terminal still gets colour
    ({"NO_COLOR": "1"}, True, False),
    ({"NO_COLOR": "1", "FORCE_COLOR": "1"}, True, False),  # NO_COLOR wins over FORCE_COLOR
    ({"TERM": "dumb"}, False, False),
])
def test_environment_on_a_terminal(extra, progress, colour):
    code, text = in_terminal("check", "bad", "--no-cache", extra_env=extra)
    assert code == 1
    assert ("Reading files" in text) is progress
    assert (f"{ESC}1mbad/" in text) is colour


@pytest.mark.slow
def test_color_flag_beats_the_environment_and_machine_formats_stay_plain():
    assert f"{ESC}1mbad/" in piped("check", "bad", "--no-cache", "--color", "always").stdout
    assert f"{ESC}1mbad/" in piped("check", "bad", "--no-cache", "--color", "always",
                                   extra_env={"NO_COLOR": "1"}).stdout
    assert f"{ESC}1mbad/" in piped("check", "bad", "--no-cache", extra_env={"FORCE_COLOR": "1"}).stdout
    assert ESC not in piped("check", "bad", "--no-cache", extra_env={"FORCE_COLOR": "0"}).stdout
    assert ESC not in piped("check", "bad", "--no-cache", "--color", "never", extra_env={"FORCE_COLOR": "1"}).stdout
    code, text = in_terminal("check", "bad", "--no-cache", "--output-format", "json")
    assert code == 1 and ESC not in text and "Reading files" not in text
    json.loads(text[text.index("["):text.rindex("]") + 1])
    code, text = in_terminal("rules", "--color", "never")
    assert code == 0 and ESC not in text and "OFL102" in text
    code, text = in_terminal("rules")
    assert f"{ESC}31m{ESC}1mOFL102" in text


def test_error_labels_are_coloured_on_a_terminal_only():
    code, text = in_terminal("check", "no/such/path", "--no-cache")
    assert code == 2 and f"offlint: {ESC}31m{ESC}1merror:{ESC}0m no/such/path" in text
    result = piped("check", "no/such/path", "--no-cache")
    assert result.stderr.startswith("offlint: error: no/such/path")


@pytest.mark.parametrize("args, message", [
    (["chek"], "no such command 'chek' (did you mean 'check'?); see 'offlint --help'"),
    (["check", "--bogus"], "no such option '--bogus'; see 'offlint check --help'"),
    (["check", "--fail-on", "never"], "invalid value for '--fail-on'"),
    (["check", "--color", "sometimes"], "invalid value for '--color'"),
    (["estimate"], "missing argument 'CONFIG'; see 'offlint estimate --help'"),
    (["estimate", "estimate/llama31_8b.py", "--gpus", "0"], "invalid value for '--gpus'"),
    (["replay", "replay/tiny_gpt_recipes.py", "--iters", "0"], "invalid value for '--iters'"),
    (["replay", "replay/tiny_gpt_recipes.py", "--gpu-memory", "lots"], "'lots' is not a size"),
    (["bisect", "--good", "HEAD"], "missing option '--bad'; see 'offlint bisect --help'"),
    (["rule"], "missing argument 'CODE'"),
    (["rule", "OFL999"], "unknown rule code"),
    (["check", "bad", "--stdin-filename", "x.py"], "--stdin-filename names the text read from '-'"),
    (["check", "-"], "reading from '-' needs --stdin-filename"),
])
def test_every_usage_error_is_one_line_with_a_hint_and_exit_2(args, message):
    result = piped(*args, stdin="")
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("offlint: error: ") and message in line, line
    assert "Usage:" not in result.stderr and "Try '" not in result.stderr


def test_plurals_in_the_summary(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "one.yaml").write_text("model:\n  cpu_offloading: true\n  pipeline_model_parallel_size: 2\n")
    result = piped("check", "one.yaml", "--no-cache", cwd=tmp_path)
    assert result.returncode == 1
    assert "Found 1 finding (1 file, 1 unit, megatron-core" in result.stderr, result.stderr


@pytest.mark.slow
def test_bisect_progress_and_plurals(tmp_path):
    h = history(tmp_path, "command", commits=6, culprit=4, merge_every=0)
    args = ("bisect", "--repo", h["repo"], "--good", h["good"], "--bad", h["bad"], "--probe", "command",
            "--command", f"{sys.executable} probe.py")
    code, text = in_terminal(*args, cwd=tmp_path)
    assert code == 0, text
    assert "bisect: " in text and "\r\x1b[K" in text  # the status line, redrawn and cleared
    assert re.search(r"Bisecting \d+ commits \(first-parent\)", text)
    result = subprocess.run([sys.executable, "-m", "offlint", *args, "--resume"], cwd=tmp_path, capture_output=True,
                            text=True, env=env(), timeout=170)
    assert result.returncode == 0 and ESC not in result.stderr and "bisect: " not in result.stderr
    assert " in 1 rounds" not in result.stderr and " 1 commits" not in result.stderr


@pytest.mark.slow
def test_bisect_config_is_the_first_argument_and_the_old_spellings_still_work(tmp_path):
    h = history(tmp_path, "config", commits=8, culprit=5, merge_every=0)
    base = ["--good", h["good"], "--bad", h["bad"], "--probe", "lint", "--report-json"]
    new = bisect(h["repo"], "conf/offload.yaml", *base, str(tmp_path / "new.json"))
    old = bisect(h["repo"], *base, str(tmp_path / "old.json"), "--config", "conf/offload.yaml", "--gpus", "0")
    assert new.returncode == old.returncode == 0, new.stderr + old.stderr
    assert "deprecated" not in new.stderr
    assert "--config is deprecated" in old.stderr and "--gpus is deprecated" in old.stderr
    first = [json.loads((tmp_path / f"{n}.json").read_text())["first_bad"]["sha"] for n in ("new", "old")]
    assert first[0] == first[1] == h["culprit"]


@pytest.mark.slow
def test_sizes_accept_units_and_plain_numbers_are_gib():
    def gib(*size: str) -> float:
        result = piped("replay", "replay/tiny_gpt_recipes.py", "--recipe", "tiny_gpt_optimizer_offload_config",
                       "--dry-run", "--gpu-memory", *size)
        assert result.returncode == 0, result.stderr
        spec = json.loads(result.stdout[:result.stdout.rindex("}") + 1])
        (value,) = [section["gpu_memory_gb"] for section in [spec, *spec.values()]
                    if isinstance(section, dict) and "gpu_memory_gb" in section]
        return value

    assert gib("40GiB") == gib("40") == gib("40G") == 40.0
    assert gib("500MiB") == pytest.approx(500 / 1024)
    assert gib("1TB") == pytest.approx(1e12 / 2**30)


def _project(tmp_path: Path, table: str = "") -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "pyproject.toml").write_text(f"[tool.offlint]\n{table}")
    bad = "model:\n  cpu_offloading: true\n  pipeline_model_parallel_size: 2\n"
    for name in ("conf/a.yaml", "conf/generated/b.yaml", "examples/c.yaml", "build/d.yaml", "conf/e_test.yaml"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(bad)
    return tmp_path


def _checked(result) -> set[str]:
    return {line.split(":", 1)[0] for line in result.stdout.splitlines()}


@pytest.mark.slow
def test_exclude_follows_ruff(tmp_path):
    project = _project(tmp_path)
    everything = {"conf/a.yaml", "conf/generated/b.yaml", "examples/c.yaml", "conf/e_test.yaml"}
    assert _checked(piped("check", "--no-cache", cwd=project)) == everything  # build/ is a default exclusion
    # --extend-exclude adds: a name anywhere (no '/'), or a path from the working directory
    result = piped("check", "--no-cache", "--extend-exclude", "generated,*_test.yaml",
                   "--extend-exclude", "examples/*", cwd=project)
    assert _checked(result) == {"conf/a.yaml"}
    # --exclude replaces the defaults: build/ is checked again
    assert "build/d.yaml" in _checked(piped("check", "--no-cache", "--exclude", "examples", cwd=project))
    # a file named on the command line is checked anyway, unless --force-exclude (pre-commit names files)
    assert _checked(piped("check", "--no-cache", "--extend-exclude", "examples", "examples/c.yaml",
                          cwd=project)) == {"examples/c.yaml"}
    forced = piped("check", "--no-cache", "--extend-exclude", "examples", "--force-exclude", "examples/c.yaml",
                   "conf/a.yaml", cwd=project)
    assert _checked(forced) == {"conf/a.yaml"}
    only_excluded = piped("check", "--no-cache", "--extend-exclude", "examples", "--force-exclude",
                          "examples/c.yaml", cwd=project)
    assert only_excluded.returncode == 0 and only_excluded.stdout == ""
    assert "every path given is excluded (1 path)" in only_excluded.stderr


@pytest.mark.slow
def test_exclude_keys_in_pyproject(tmp_path):
    project = _project(tmp_path, 'extend-exclude = ["examples", "conf/generated"]\nforce-exclude = true\n')
    assert _checked(piped("check", "--no-cache", cwd=project)) == {"conf/a.yaml", "conf/e_test.yaml"}
    # configured patterns are relative to the pyproject.toml, wherever offlint runs from
    assert _checked(piped("check", "--no-cache", ".", cwd=project / "conf")) == {"a.yaml", "e_test.yaml"}
    assert piped("check", "--no-cache", "examples/c.yaml", cwd=project).returncode == 0  # force-exclude = true
    replaced = _project(tmp_path / "r", 'exclude = ["examples"]\n')
    assert "build/d.yaml" in _checked(piped("check", "--no-cache", cwd=replaced))
    bad = _project(tmp_path / "b", 'exclude = "examples"\n')
    result = piped("check", "--no-cache", cwd=bad)
    assert result.returncode == 2 and "exclude must be a list of glob patterns" in result.stderr


def test_mcore_version_on_replay_and_bisect(tmp_path):
    replay = ("replay", "replay/tiny_gpt_recipes.py", "--recipe", "tiny_gpt_optimizer_offload_config", "--dry-run")
    assert piped(*replay, "--mcore-version", "0.16.1").returncode == 0
    wrong = piped(*replay, "--mcore-version", "foo")
    assert wrong.returncode == 2 and wrong.stderr.startswith("offlint: error: ") and wrong.stderr.count("\n") == 1
    h = history(tmp_path, "config", commits=6, culprit=4, merge_every=0)
    report = tmp_path / "report.json"
    result = bisect(h["repo"], "conf/offload.yaml", "--good", h["good"], "--bad", h["bad"], "--probe", "lint",
                    "--mcore-version", "0.20.0", "--report-json", str(report))
    assert result.returncode == 0, result.stderr
    data = json.loads(report.read_text())
    assert data["probe"]["mcore_version"] == "0.20.0" and data["first_bad"]["sha"] == h["culprit"]
    good = [run for tested in data["tested"] for run in tested["runs"] if run["verdict"] == "good"]
    assert good and all("megatron-core 0.20.0" in run["detail"] for run in good)  # not the installed 0.16.1
