"""The command line as a user runs it: real subprocesses, exit codes, one-line errors, formats, configuration."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from offlint.cli import main
from tests.hostile_cases import PP_OFFLOAD_RECIPE

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
SCHEMA = Path(__file__).resolve().parent / "data" / "sarif-schema-2.1.0.json"



def run(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "offlint", *args], cwd=cwd, input=stdin, capture_output=True,
                          text=True, timeout=120)


def assert_one_line_errors(stderr: str, count: int) -> None:
    errors = [line for line in stderr.splitlines() if line.startswith("offlint: error:")]
    assert len(errors) == count, stderr
    assert "Traceback" not in stderr


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (tmp_path / "bad.py").write_text(PP_OFFLOAD_RECIPE)
    return tmp_path


def test_findings_exit_1_and_concise_format(project):
    result = run("check", "bad.py", "--mcore-version", "0.16.1", cwd=project)
    assert result.returncode == 1
    assert result.stdout.splitlines()[0].startswith("bad.py:4:5: OFL102 ")
    assert "megatron-core 0.16.1 from --mcore-version" in result.stderr


def test_clean_exit_0(project):
    (project / "bad.py").write_text(PP_OFFLOAD_RECIPE.replace("= 2", "= 1"))
    result = run("check", ".", cwd=project)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "All checks passed!" in result.stderr


@pytest.mark.parametrize(("name", "content", "message"), [
    ("blob.py", b"\x00\x01\x02binary", "binary file"),
    ("broken.yaml", b"model: [unclosed\n", "invalid YAML"),
    ("broken.py", b"def f(:\n    pass\n", "Python syntax error"),
    ("latin1.py", "x = '\u00e9'\n".encode("latin-1"), "not UTF-8"),
    ("huge.yaml", b"model:\n" + b"  # padding padding padding padding padding padding padding padding\n" * 80000,
     "limit"),
    ("data.bin", b"whatever", "not a Python, YAML or shell file"),
], ids=["blob.py", "broken.yaml", "broken.py", "latin1.py", "huge.yaml", "data.bin"])  # (a content id would
# put megabytes into PYTEST_CURRENT_TEST, and the subprocess's environment would be too large to start it)
def test_garbage_gives_one_line_error_exit_2_and_other_files_still_checked(project, name, content, message):
    (project / name).write_bytes(content)
    result = run("check", name, "bad.py", cwd=project)
    assert result.returncode == 2
    assert_one_line_errors(result.stderr, 1)
    assert message in result.stderr and name in result.stderr
    assert "OFL102" in result.stdout  # the good file was still checked and reported


@pytest.mark.parametrize("name, comment", [
    ("groups.py", "# r\u00e9partition des groupes\n".encode("latin-1")),
    ("parallel_state.py", "# \u8fdb\u7a0b\u7ec4\n".encode("gbk")),
    ("launch.sh", "#!/bin/bash\n# r\u00e9glages\n".encode("latin-1")),
])
def test_a_comment_in_another_encoding_is_read(project, name, comment):
    """SynerFuse's parallel_state.py has GBK comments (a helper's sweep): CPython compiles the module when it imports
    it, and bash never decodes a comment, but offlint refused the file as not UTF-8 and the tree's check ended with
    exit 2. Such bytes in comments alone are read (as U+FFFD); in a string, or in a YAML file, they are still an
    error (above; PyYAML refuses them anywhere)."""
    (project / name).write_bytes(comment + b"x = 1\n")
    result = run("check", name, "bad.py", cwd=project)
    assert result.returncode == 1 and "error" not in result.stderr
    assert "OFL102" in result.stdout
    (project / "notes.yaml").write_bytes("# r\u00e9glages\nmodel: {}\n".encode("latin-1"))
    result = run("check", "notes.yaml", "bad.py", cwd=project)
    assert result.returncode == 2 and "not UTF-8" in result.stderr


NEWER_F_STRING = b"""from megatron.bridge.training.config import ConfigContainer


def caption(i):
    cfg = ConfigContainer()
    return f"{'\\n' if i else ''}Image-{i}"
"""


def test_an_f_string_only_python_3_12_accepts_says_which_python_to_run(project):
    """A backslash inside an f-string's braces (PEP 701): a syntax error on Python 3.11, valid from 3.12 on; the
    error says so and what to do (a Megatron Bridge example script, b54cc3625, failed a whole check with no hint)."""
    (project / "caption.py").write_bytes(NEWER_F_STRING)
    result = run("check", "caption.py", "bad.py", cwd=project)
    if sys.version_info >= (3, 12):
        assert result.returncode == 1 and "caption.py" not in result.stderr  # parsed: nothing to say of it
        return
    assert result.returncode == 2
    assert_one_line_errors(result.stderr, 1)
    assert "caption.py: Python syntax error at line 6" in result.stderr
    assert "valid from Python 3.12 on" in result.stderr and "run it with Python 3.12 or later" in result.stderr
    assert "OFL102" in result.stdout


@pytest.mark.parametrize("line", ['    return f"{t.replace("\\n", " ")}"\n',  # the same quotes and a backslash
                                  "    return f'{t.replace(chr(10), \"\\\\n\")}'\n"])  # a backslash alone
def test_a_backslash_in_an_f_strings_braces_says_which_python_to_run_too(project, line):
    """Python 3.11 says "unexpected character after line continuation character" for a backslash inside an
    f-string's braces (not an "f-string: ..." message): Megatron-LM forks' gpt_dynamic_inference.py had exit 2 with
    no hint (a helper's sweep, session 63)."""
    (project / "gen.py").write_text("def show(t):\n" + line)
    result = run("check", "gen.py", cwd=project)
    if sys.version_info >= (3, 12):
        assert result.returncode == 0, result.stderr
        return
    assert result.returncode == 2 and "valid from Python 3.12 on" in result.stderr, result.stderr


REGEX_WITH_AN_INVALID_ESCAPE = """import re

from megatron.bridge.training.config import ConfigContainer

LAYER = re.compile("layers\\.(\\d+)\\.mlp")


def recipe() -> ConfigContainer:
    cfg = ConfigContainer()
    cfg.model.cpu_offloading = True
    cfg.model.pipeline_model_parallel_size = 2
    return cfg
"""


def test_python_s_warnings_about_the_linted_code_are_not_shown(project):
    """`"layers\\.(\\d+)"` in a linted file (an invalid escape sequence, as Pai-Megatron-Patch's checkpoint
    convertors write their regexes): Python 3.12+ printed a SyntaxWarning per place while offlint parsed it (3.11 a
    DeprecationWarning, shown where PYTHONWARNINGS asks for them, as here). Only offlint's own lines are printed."""
    (project / "convert.py").write_text(REGEX_WITH_AN_INVALID_ESCAPE)
    assert "\\." in REGEX_WITH_AN_INVALID_ESCAPE  # (the file holds a backslash and a dot: an invalid escape)
    result = subprocess.run([sys.executable, "-m", "offlint", "check", "convert.py"], cwd=project,
                            capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONWARNINGS": "default"})
    assert result.returncode == 1 and "OFL102" in result.stdout
    assert "Warning" not in result.stderr and "invalid escape" not in result.stderr, result.stderr


def test_missing_path_is_an_error_but_others_are_checked(project):
    result = run("check", "nope.py", "bad.py", cwd=project)
    assert result.returncode == 2
    assert_one_line_errors(result.stderr, 1)
    assert "nope.py: no such file or directory" in result.stderr
    assert "OFL102" in result.stdout
    assert "1 file not checked" in result.stderr


def test_nothing_checked_is_not_reported_as_passing(project):
    result = run("check", "nope.py", cwd=project)
    assert result.returncode == 2
    assert "All checks passed" not in result.stderr and "No findings, 1 file not checked" in result.stderr


def test_empty_files_are_clean(project):
    for name in ("empty.py", "empty.yaml", "empty.sh"):
        (project / name).write_text("")
    result = run("check", "empty.py", "empty.yaml", "empty.sh", cwd=project)
    assert result.returncode == 0, result.stderr


def test_unknown_selector_is_a_usage_error(project):
    result = run("check", "bad.py", "--select", "OFL999", cwd=project)
    assert result.returncode == 2
    assert_one_line_errors(result.stderr, 1)
    assert "OFL999" in result.stderr


@pytest.mark.slow
def test_select_ignore_and_fail_on(project):
    assert run("check", "bad.py", "--ignore", "OFL102", cwd=project).returncode == 0
    assert run("check", "bad.py", "--select", "OFL2", cwd=project).returncode == 0
    assert run("check", "bad.py", "--select", "OFL1", cwd=project).returncode == 1
    (project / "info.py").write_text(
        "def r():\n    o = OptimizerConfig(optimizer_cpu_offload=True, optimizer_offload_fraction=1.0,\n"
        "                        use_distributed_optimizer=True, overlap_cpu_optimizer_d2h_h2d=True)\n    return o\n")
    info = run("check", "info.py", "--select", "OFL207", cwd=project)
    assert "OFL207" in info.stdout and info.returncode == 0  # info never fails by default
    assert run("check", "info.py", "--select", "OFL207", "--fail-on", "info", cwd=project).returncode == 1


def test_stdin(project):
    result = run("check", "-", "--stdin-filename", "recipe.py", cwd=project, stdin=PP_OFFLOAD_RECIPE)
    assert result.returncode == 1
    assert result.stdout.startswith("recipe.py:4:5: OFL102")
    missing = run("check", "-", cwd=project, stdin=PP_OFFLOAD_RECIPE)
    assert missing.returncode == 2 and "--stdin-filename" in missing.stderr


@pytest.mark.slow
def test_json_sarif_github_junit_statistics(project):
    data = json.loads(run("check", "bad.py", "--output-format", "json", cwd=project).stdout)
    assert data[0]["code"] == "OFL102" and data[0]["location"] == {"row": 4, "column": 5}
    sarif = json.loads(run("check", "bad.py", "--output-format", "sarif", cwd=project).stdout)
    jsonschema.Draft7Validator(json.loads(SCHEMA.read_text())).validate(sarif)
    assert sarif["runs"][0]["results"][0]["ruleId"] == "OFL102"
    github = run("check", "bad.py", "--output-format", "github", cwd=project).stdout
    assert github.startswith("::error file=bad.py,line=4,col=5,title=offlint (OFL102)::")
    junit = run("check", "bad.py", "--output-format", "junit", cwd=project).stdout
    assert "<testsuites" in junit and "offlint.OFL102" in junit
    stats = run("check", "bad.py", "--statistics", cwd=project).stdout
    assert stats.splitlines()[0].split("\t")[:2] == ["1", "OFL102"]


@pytest.mark.slow
def test_suppressions_and_unused_suppression(project):
    text = PP_OFFLOAD_RECIPE.replace("cfg.model.cpu_offloading = True",
                              "cfg.model.cpu_offloading = True  # offlint: ignore[OFL102]")
    text += "# offlint: ignore\nX = 1\n"
    (project / "bad.py").write_text(text)
    result = run("check", "bad.py", cwd=project)
    assert "OFL102" not in result.stdout
    assert "OFL006" in result.stdout and "bad.py:8:1:" in result.stdout
    (project / "launch.sh").write_text(
        "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n"
        "# offlint: ignore[OFL102]\n"
        "python run_recipe.py model.cpu_offloading=true model.pipeline_model_parallel_size=2\n")
    assert run("check", "launch.sh", cwd=project).returncode == 0
    (project / "o.yaml").write_text("model:\n  cpu_offloading: true  # offlint: ignore\n"
                                    "  pipeline_model_parallel_size: 2\n")
    assert run("check", "o.yaml", cwd=project).returncode == 0  # the finding points at line 2
    (project / "o.yaml").write_text("model:\n  cpu_offloading: true\n"
                                    "  pipeline_model_parallel_size: 2  # offlint: ignore[OFL102]\n")
    related_only = run("check", "o.yaml", cwd=project)  # line 3 is only a related location: not suppressed
    assert "o.yaml:2:3: OFL102" in related_only.stdout and "o.yaml:3:36: OFL006" in related_only.stdout


@pytest.mark.slow
def test_pyproject_configuration(project):
    (project / "pyproject.toml").write_text(
        "[tool.offlint]\nignore = ['OFL102']\nmegatron-core-version = '0.16'\n")
    result = run("check", "bad.py", cwd=project)
    assert result.returncode == 0 and "0.16.0 from [tool.offlint]" in result.stderr
    (project / "pyproject.toml").write_text("[tool.offlint]\nper-file-ignores = {'bad.py' = ['OFL1']}\n")
    assert run("check", "bad.py", cwd=project).returncode == 0
    (project / "pyproject.toml").write_text("[tool.offlint]\nselct = ['OFL1']\n")
    bad = run("check", "bad.py", cwd=project)
    assert bad.returncode == 2 and "selct" in bad.stderr
    assert_one_line_errors(bad.stderr, 1)


def test_a_gpu_offlint_does_not_know_in_the_configuration_is_a_one_line_error(project):
    """`gpu = "mi300x"` had been the default H100 in `check`, its memory verdicts given against 78.6 GiB without a
    word (a ROCm fork's user would read a false OFL303)."""
    (project / "pyproject.toml").write_text("[tool.offlint]\ngpu = 'mi300x'\n")
    bad = run("check", "bad.py", cwd=project)
    assert bad.returncode == 2 and bad.stdout == ""
    assert_one_line_errors(bad.stderr, 1)
    assert "pyproject.toml: [tool.offlint] gpu: unknown GPU 'mi300x': use one of h100-80gb" in bad.stderr
    (project / "pyproject.toml").write_text("[tool.offlint]\ngpu = '192'\n")
    assert run("check", "bad.py", cwd=project).returncode == 1


def test_rule_and_rules_commands(project):
    listing = run("rules", cwd=project)
    assert listing.returncode == 0 and "OFL102  activation-offload-pipeline" in listing.stdout
    doc = run("rule", "OFL102", cwd=project)
    assert "Currently there is no support for Pipeline parallelism with CPU offloading" in doc.stdout
    assert run("rule", "OFL999", cwd=project).returncode == 2


@pytest.mark.slow
def test_quickstart_on_bundled_fixtures(tmp_path):
    good = run("check", str(FIXTURES / "good"), cwd=tmp_path)
    assert good.returncode == 0, good.stdout
    bad = run("check", str(FIXTURES / "bad"), cwd=tmp_path)
    assert bad.returncode == 1 and len(bad.stdout.splitlines()) >= 10


def test_the_command_ends_without_teardown_yet_loses_no_output(tmp_path, monkeypatch):
    """`offlint check` ends with os._exit once its report is written (cli._end_at_once): what it wrote to a pipe
    arrives whole, and the exit code is the check's."""
    piped = run("check", str(FIXTURES / "bad"), "--output-format", "json", "--no-cache", cwd=tmp_path)
    monkeypatch.chdir(tmp_path)
    in_process = CliRunner().invoke(main, ["check", str(FIXTURES / "bad"), "--output-format", "json", "--no-cache"],
                                    catch_exceptions=False)
    assert piped.returncode == in_process.exit_code == 1
    assert len(piped.stdout) > 3 * io.DEFAULT_BUFFER_SIZE  # more than one buffer's worth
    assert json.loads(piped.stdout) == json.loads(in_process.stdout)


@pytest.mark.parametrize("code, flush_fails, ends_with", [(1, False, 1), (None, False, 0), (0, False, 0),
                                                           (1, True, None), ("a message", False, None)])
def test_the_fast_exit_steps_aside_when_output_cannot_be_flushed(monkeypatch, code, flush_fails, ends_with):
    """Output that cannot be flushed (a closed pipe), or an exit that carries a message, is left to the interpreter's
    ordinary exit, which reports it as it always has."""
    import offlint.cli as cli

    class Stream:
        def flush(self):
            if flush_fails:
                raise BrokenPipeError(32, "Broken pipe")

    ended = []
    monkeypatch.setattr(cli.sys, "stdout", Stream())
    monkeypatch.setattr(cli.sys, "stderr", Stream())
    monkeypatch.setattr(cli.os, "_exit", ended.append)
    cli._end_at_once(code)
    assert ended == ([] if ends_with is None else [ends_with])


@pytest.mark.slow
def test_an_unset_environment_variable_points_at_the_env_vars_assignment(tmp_path):
    result = run("check", str(FIXTURES / "bad" / "recipes" / "llama_offload.py"), "--select", "OFL301", cwd=tmp_path)
    assert result.stdout.splitlines() == [line for line in result.stdout.splitlines() if ":31:5: OFL301" in line]
    assert result.stdout.strip()


# --- launch scripts in Megatron Bridge's shapes ------------------------------------------------------------

OFFLOAD_WITH_PP = "model.cpu_offloading=true model.cpu_offloading_num_layers=2 model.pipeline_model_parallel_size"


def _bash_accepts(path: Path) -> bool:
    return subprocess.run(["bash", "-n", str(path)], capture_output=True, timeout=30).returncode == 0


def test_a_script_tree_sitter_bash_misreads_is_read_in_full(project):
    """The shapes of Bridge's deepseek_v4/conversion.sh and its perf launchers: tree-sitter-bash lost lines 66-177
    (`${entries%%]*}`), `${extra:+$extra;}` and `$((10#$NGPUS))` made other scripts unreadable; bash accepts all."""
    script = project / "conversion.sh"
    script.write_text(
        "#!/usr/bin/env bash\n"
        "_first_host() {\n"
        "    local nodelist=$1 entries\n"
        '    if [[ "${nodelist}" != *"["* ]]; then\n'
        '        echo "${nodelist%%,*}"; return\n'
        "    fi\n"
        '    entries="${nodelist#*[}"\n'
        '    entries="${entries%%]*}"\n'
        '    echo "${nodelist%%[*}${entries%%[,-]*}"\n'
        "}\n"
        'extra="$(_first_host "${SLURM_NODELIST:-localhost}")"\n'
        '[ -n "${QOS:-}" ] && extra="${extra:+$extra;}qos=${QOS}"\n'
        'NGPUS="${NGPUS:-8}"\n'
        "NGPUS=$((10#$NGPUS))\n"
        f'torchrun --nproc_per_node "$NGPUS" scripts/training/run_recipe.py --recipe llama3_8b_pretrain_config '
        f"{OFFLOAD_WITH_PP}=2\n")
    assert _bash_accepts(script)
    result = run("check", "conversion.sh", "--no-cache", cwd=project)
    assert result.returncode == 1, result.stderr
    assert "offlint: error" not in result.stderr
    assert result.stdout.startswith("conversion.sh:15:") and "OFL102" in result.stdout


def test_a_launch_found_through_the_directory_idioms(project):
    """`ROOT_DIR=$(cd "$(dirname "$0")/../.." && pwd -P)` and friends name the entry point and the YAML layer."""
    scripts = project / "examples" / "llama" / "scripts"
    scripts.mkdir(parents=True)
    (project / "examples" / "llama" / "conf").mkdir()
    (project / "examples" / "llama" / "conf" / "offload.yaml").write_text(
        "model:\n  cpu_offloading: true\n  cpu_offloading_num_layers: 2\n")
    (scripts / "pretrain.sh").write_text(
        "#!/bin/bash\nset -euo pipefail\n"
        'ROOT_DIR=$(cd "$(dirname "$0")/../../.." && pwd -P)\n'
        'CONF_DIR="$( cd -- "$( dirname -- "${BASH_SOURCE[0]}" )/../conf" &> /dev/null && pwd )"\n'
        'torchrun --nproc_per_node 8 "${ROOT_DIR}/scripts/training/run_recipe.py" \\\n'
        '    --config-file "${CONF_DIR}/offload.yaml" model.pipeline_model_parallel_size=4\n')
    (scripts / "mlm.sh").write_text(
        '#!/bin/bash\nSCRIPT_DIR=$(dirname "$(realpath "$0")")\n'
        'torchrun "${SCRIPT_DIR}/pretrain_gpt.py" --cpu-offloading --cpu-offloading-num-layers 2 '
        "--pipeline-model-parallel-size 2 --num-layers 8 --train-iters 10\n")
    result = run("check", "examples", "--no-cache", "--select", "OFL102", cwd=project)
    assert result.returncode == 1, result.stderr
    found = sorted(line.split(" ", 2)[:2] for line in result.stdout.splitlines())
    # the Bridge launch layers the YAML file found through CONF_DIR (the finding points at its cpu_offloading);
    # the Megatron-LM launch runs the pretrain_gpt.py found through SCRIPT_DIR
    assert found == [["examples/llama/conf/offload.yaml:2:3:", "OFL102"],
                     ["examples/llama/scripts/mlm.sh:3:59:", "OFL102"]], result.stdout
    assert "pipeline_model_parallel_size=4" in result.stdout


def test_a_preset_branch_is_decided_and_its_assumption_is_in_the_finding(project):
    (project / "launch.sh").write_text(
        "#!/bin/bash\n"
        "PRESET=${PRESET:-small}\n"
        'if [[ "${PRESET}" == large ]]; then\n'
        "    PP=1\n"
        "else\n"
        "    PP=2\n"
        "fi\n"
        'case "${PRESET}" in\n'
        '    large) LAYERS=4 ;;\n'
        '    *) LAYERS=2 ;;\n'
        "esac\n"
        "python scripts/training/run_recipe.py --recipe llama3_8b_pretrain_config model.cpu_offloading=true "
        "model.cpu_offloading_num_layers=$LAYERS model.pipeline_model_parallel_size=$PP\n")
    result = run("check", "launch.sh", "--no-cache", cwd=project)
    assert result.returncode == 1, result.stderr
    (line,) = result.stdout.splitlines()
    assert line.startswith("launch.sh:12:") and "OFL102" in line and "on the path" not in line  # concise: short
    full = run("check", "launch.sh", "--no-cache", "--output-format", "full", cwd=project).stdout
    (head,) = [line for line in full.splitlines() if "on the path where" in line]
    assert head.strip().endswith("(on the path where `[[ \"${PRESET}\" == large ]]` (launch.sh:3) is false, assuming "
                                 "the environment does not set PRESET and case `\"${PRESET}\"` (launch.sh:8) takes `*)`, "
                                 "assuming the environment does not set PRESET)"), full
    # where the tested value is not known (a positional parameter), both paths stay open: PP is unknown
    (project / "launch.sh").write_text((project / "launch.sh").read_text().replace("${PRESET:-small}", "$1"))
    result = run("check", "launch.sh", "--no-cache", cwd=project)
    assert result.returncode == 0 and result.stdout == "", result.stdout + result.stderr


# --- what was checked -------------------------------------------------------------------------------------


def test_a_directory_with_nothing_offlint_reads_is_not_a_pass(project):
    (project / "docs").mkdir()
    (project / "docs" / "README.md").write_text("# notes\n")
    (project / "empty").mkdir()
    result = run("check", "docs", "empty", "--no-cache", cwd=project)
    assert result.returncode == 2
    assert_one_line_errors(result.stderr, 1)
    assert "offlint: error: docs empty: no file offlint reads" in result.stderr and "nothing was checked" in \
        result.stderr
    assert "All checks passed" not in result.stderr and "Nothing checked (0 files" in result.stderr
    json_run = run("check", "docs", "--no-cache", "--output-format", "json", cwd=project)
    assert json_run.returncode == 2 and json.loads(json_run.stdout) == []


@pytest.mark.slow
def test_a_megatron_core_version_offlint_does_not_know(project):
    newer = run("check", "bad.py", "--mcore-version", "9.9", "--no-cache", cwd=project)
    known = run("check", "bad.py", "--mcore-version", "0.20.0", "--no-cache", cwd=project)
    assert newer.returncode == known.returncode == 1 and newer.stdout == known.stdout
    assert ("offlint: warning: megatron-core 9.9.0 (from --mcore-version) is newer than any version offlint knows "
            "(0.16 to 0.20): checking with the rules of 0.20.0") in newer.stderr
    assert "megatron-core 0.20.0 (for 9.9.0) from --mcore-version)." in newer.stderr
    assert "warning" not in known.stderr
    older = run("check", "bad.py", "--mcore-version", "0.9", cwd=project)
    assert older.returncode == 2 and older.stdout == ""
    assert_one_line_errors(older.stderr, 1)
    assert "megatron-core 0.9.0 is older than any version offlint knows (0.16 to 0.20)" in older.stderr
    (project / "pyproject.toml").write_text("[project]\nname = 'x'\n[tool.offlint]\nmegatron-core-version = '0.12'\n")
    configured = run("check", "bad.py", cwd=project)
    assert configured.returncode == 2 and "[tool.offlint] megatron-core-version: megatron-core 0.12.0 is older" in \
        configured.stderr


def test_a_megatron_lm_flag_alone_does_not_make_a_training_launch(project):
    """Bridge's gemma4 slurm_pretrain.sh runs `parity_check_e4b.py --tp 1 --bf16` before training: a model set up
    for a check, which the training-launch advice (OFL301) does not concern; the training run next to it does."""
    (project / "run.sh").write_text(
        '#!/bin/bash\nSCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)\n'
        'torchrun --nproc_per_node 2 "$SCRIPT_DIR/parity_check_e4b.py" --hf-dir /models/x --tp 1 --bf16\n'
        'torchrun --nproc_per_node 2 "$SCRIPT_DIR/pretrain_custom.py" --bf16 --train-iters 10\n'
        'torchrun --nproc_per_node 2 "$SCRIPT_DIR/my_trainer.py" --bf16 --micro-batch-size 1\n')
    result = run("check", "run.sh", "--no-cache", "--select", "OFL301", cwd=project)
    assert result.returncode == 1, result.stderr
    assert [line.split(" ", 1)[0] for line in result.stdout.splitlines()] == ["run.sh:4:1:", "run.sh:5:1:"]
    assert "(1 file, 3 units," in result.stderr
