"""Input an attacker (or an unlucky user) can put in a pull request, through the real command line.

Nothing offlint could not read, or could not parse in full, may pass: it is one `offlint: error:` line and exit 2,
while the other files are still checked. Every run has a timeout, so a hang fails the test instead of CI.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import hostile_cases
from tests.hostile_cases import CASES
from tests.hostile_cases import PP_OFFLOAD_RECIPE

TIMEOUT = 60

BAD_LAUNCH = "python run_recipe.py --recipe x model.cpu_offloading=True model.pipeline_model_parallel_size=2\n"


def run(*args: str, cwd: Path, stdin: bytes | None = None, preexec_fn=None, timeout: int = TIMEOUT,
        stdin_file=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "offlint", *args], cwd=cwd, input=stdin, stdin=stdin_file,
                          capture_output=True, timeout=timeout, preexec_fn=preexec_fn)


def errors_of(result: subprocess.CompletedProcess) -> list[str]:
    stderr = result.stderr.decode("utf-8", "replace")
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr
    return [line for line in stderr.splitlines() if line.startswith("offlint: error:")]


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (tmp_path / "ok.py").write_text(PP_OFFLOAD_RECIPE)
    return tmp_path


# ---------------------------------------------------------------------------------------------- permissions

_without_root_file_access = hostile_cases.drop_root_file_access


@pytest.fixture()
def unprivileged(tmp_path: Path):
    """A preexec_fn under which permissions hold (CI runs as root); skips the test where that cannot be had."""
    probe = tmp_path / "probe-unreadable"
    probe.write_text("x")
    probe.chmod(0)
    try:
        result = subprocess.run([sys.executable, "-c", f"open({str(probe)!r}).read()"], capture_output=True,
                                timeout=TIMEOUT, preexec_fn=_without_root_file_access)
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"cannot run a child without root's file access here: {exc}")
    finally:
        probe.unlink()
    if result.returncode == 0:
        pytest.skip("a child can still read a mode-000 file (running as root, and its capabilities cannot be "
                    "dropped here)")
    return _without_root_file_access


@pytest.fixture()
def unreadable_dir(project: Path):
    folder = project / "unreadable"
    folder.mkdir()
    (folder / "x.py").write_text(PP_OFFLOAD_RECIPE)
    folder.chmod(0)
    yield folder
    folder.chmod(0o755)


# ---------------------------------------------------------------------------------------------- fails open

def test_an_unreadable_directory_is_an_error_not_a_pass(project, unreadable_dir, unprivileged):
    result = run("check", "unreadable", "--no-cache", cwd=project, preexec_fn=unprivileged)
    errors = errors_of(result)
    assert result.returncode == 2, result.stderr
    assert errors == ["offlint: error: unreadable: cannot read directory: Permission denied"]
    assert b"All checks passed" not in result.stderr

    whole = run("check", "--no-cache", cwd=project, preexec_fn=unprivileged)  # found while walking the tree
    assert whole.returncode == 2
    assert errors_of(whole) == ["offlint: error: unreadable: cannot read directory: Permission denied"]
    assert b"ok.py:4:5: OFL102" in whole.stdout


def test_an_unreadable_file_next_to_a_good_one_keeps_the_good_ones_findings(project, unreadable_dir, unprivileged):
    result = run("check", "ok.py", "unreadable/x.py", "--no-cache", cwd=project, preexec_fn=unprivileged)
    assert result.returncode == 2, result.stderr
    assert errors_of(result) == ["offlint: error: unreadable/x.py: cannot read: Permission denied"]
    assert b"ok.py:4:5: OFL102" in result.stdout


def test_an_unreadable_file_in_a_walked_tree_is_an_error(project, unprivileged):
    (project / "secret.py").write_text(PP_OFFLOAD_RECIPE)
    (project / "secret.py").chmod(0)
    (project / "launch").write_text("#!/bin/bash\n" + BAD_LAUNCH)  # extension-less: its #! line decides
    (project / "launch").chmod(0)
    result = run("check", "--no-cache", cwd=project, preexec_fn=unprivileged)
    assert result.returncode == 2
    assert sorted(errors_of(result)) == [
        "offlint: error: launch: cannot read: Permission denied (to tell whether it is a shell script)",
        "offlint: error: secret.py: cannot read: Permission denied",
    ]
    assert b"ok.py:4:5: OFL102" in result.stdout


def _nested_ifs(depth: int) -> str:
    return ("#!/bin/bash\necho start\n" + "".join(f'if [ -n "$X{i}" ]; then\n' for i in range(depth)) + BAD_LAUNCH
            + "fi\n" * depth)


def test_a_script_nested_past_the_bound_is_an_error_not_zero_units(project):
    (project / "deep.sh").write_text(_nested_ifs(250))
    assert subprocess.run(["bash", "-n", "deep.sh"], cwd=project, timeout=TIMEOUT).returncode == 0  # valid bash
    result = run("check", "deep.sh", "ok.py", "--no-cache", cwd=project)
    assert result.returncode == 2, result.stderr
    (error,) = errors_of(result)
    assert error.startswith("offlint: error: deep.sh: cannot parse shell script: line ")
    assert "nested more than 100 levels deep" in error
    assert b"ok.py:4:5: OFL102" in result.stdout  # the other file is still checked


def test_a_script_nested_within_the_bound_is_read_in_full(project):
    (project / "deep.sh").write_text(_nested_ifs(90))
    (project / "chain.sh").write_text("#!/bin/bash\n" + "true && " * 500 + BAD_LAUNCH)  # a long chain costs no depth
    result = run("check", "deep.sh", "chain.sh", "--no-cache", cwd=project)
    assert result.returncode == 1, result.stderr
    assert errors_of(result) == []
    assert b"deep.sh:93:" in result.stdout and b"chain.sh:2:" in result.stdout


def test_unbalanced_quotes_are_an_error_not_a_clean_script(project):
    (project / "quotes.sh").write_text('#!/bin/bash\necho "ok"\npython run_recipe.py --recipe x "unterminated\n')
    assert subprocess.run(["bash", "-n", "quotes.sh"], cwd=project, capture_output=True,
                          timeout=TIMEOUT).returncode != 0  # bash rejects it too
    result = run("check", "quotes.sh", "ok.py", "--no-cache", cwd=project)
    assert result.returncode == 2
    (error,) = errors_of(result)
    assert error.startswith("offlint: error: quotes.sh: cannot parse shell script: line 3: ")
    assert b"ok.py:4:5: OFL102" in result.stdout


def test_a_script_whose_last_line_ends_in_a_backslash_is_still_read(project):
    """tree-sitter marks the dangling continuation as an empty ERROR node; it skips no text, so it is no error."""
    (project / "tail.sh").write_text("#!/bin/bash\n" + BAD_LAUNCH.rstrip("\n") + " \\\n")
    result = run("check", "tail.sh", "--no-cache", cwd=project)
    assert result.returncode == 1, result.stderr
    assert errors_of(result) == []
    assert b"tail.sh:2:" in result.stdout


# ---------------------------------------------------------------------------------------------- special files, stdin

def _memory_capped() -> None:
    """`preexec_fn`: 1 GiB of address space (the issue's memory bound, counted generously: mapped libraries
    included), so that a reader that lost its bound fails here instead of taking the machine's memory (a link to
    /dev/zero never ends)."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def test_a_fifo_anywhere_in_the_project_never_blocks_a_check(project):
    os.mkfifo(project / "pipe.py")
    os.mkfifo(project / "launch")  # extension-less: a walk would open it to look for a #! line
    (project / "other.py").write_text(PP_OFFLOAD_RECIPE)
    for args in (["ok.py"], ["ok.py", "other.py"], ["."], []):  # changed-files mode searches the whole tree
        result = run("check", *args, "--no-cache", cwd=project)
        assert result.returncode == 1, (args, result.stderr)
        assert errors_of(result) == []  # found while walking: skipped, not reported
        assert b"ok.py:4:5: OFL102" in result.stdout


def test_special_files_and_links_named_explicitly_are_one_line_errors(project):
    os.mkfifo(project / "pipe.py")
    (project / "zero.py").symlink_to("/dev/zero")
    (project / "passwd.py").symlink_to("/etc/passwd")
    (project / "loop1.py").symlink_to("loop2.py")
    (project / "loop2.py").symlink_to("loop1.py")
    (project / "fifo-link.py").symlink_to("pipe.py")  # inside the project, but not to a regular file
    result = run("check", "pipe.py", "zero.py", "passwd.py", "loop1.py", "fifo-link.py", "ok.py", "--no-cache",
                 cwd=project, preexec_fn=_memory_capped)
    assert result.returncode == 2, result.stderr
    outside = "outside the project ({}); offlint does not follow links out of the project".format(
        os.path.realpath(project))
    assert sorted(errors_of(result)) == [
        "offlint: error: fifo-link.py: not a regular file (a named pipe (FIFO)); offlint reads only regular files",
        "offlint: error: loop1.py: a broken symbolic link, or a loop of them",
        f"offlint: error: passwd.py: a symbolic link to /etc/passwd, {outside}",
        "offlint: error: pipe.py: not a regular file (a named pipe (FIFO)); offlint reads only regular files",
        f"offlint: error: zero.py: a symbolic link to /dev/zero, {outside}",
    ]
    assert b"ok.py:4:5: OFL102" in result.stdout

    whole = run("check", "--no-cache", cwd=project, preexec_fn=_memory_capped)  # walked: links are not followed
    assert whole.returncode == 1 and errors_of(whole) == []


def test_a_link_inside_the_project_is_followed(project):
    (project / "sub").mkdir()
    (project / "sub" / "alias.py").symlink_to("../ok.py")
    result = run("check", "sub/alias.py", "--no-cache", cwd=project)
    assert result.returncode == 1, result.stderr
    assert b"ok.py:4:5: OFL102" in result.stdout


def test_a_file_over_the_limit_is_an_error(project):
    (project / "big.py").write_bytes(b"#" * (3 << 20))
    result = run("check", "big.py", "ok.py", "--no-cache", cwd=project)
    assert result.returncode == 2
    assert errors_of(result) == ["offlint: error: big.py: more than 2 MiB, over offlint's size limit (generated?); "
                                 "exclude it or split it"]
    assert b"ok.py:4:5: OFL102" in result.stdout


@pytest.mark.parametrize("source", ["/dev/zero", "3 MB"])
def test_standard_input_is_read_with_the_same_bound(project, source):
    if source == "/dev/zero":
        with open("/dev/zero", "rb") as zero:
            result = run("check", "-", "--stdin-filename", "x.py", cwd=project, stdin_file=zero,
                         preexec_fn=_memory_capped)
    else:
        result = run("check", "-", "--stdin-filename", "x.py", cwd=project, stdin=b"# x\n" * (3_000_000 // 4))
    assert result.returncode == 2, result.stderr
    assert errors_of(result) == ["offlint: error: x.py (standard input): more than 2 MiB, over offlint's size "
                                 "limit (generated?); exclude it or split it"]


def test_standard_input_within_the_bound_is_checked(project):
    padding = b"# padding\n" * 190_000  # 1.9 MB
    result = run("check", "-", "--stdin-filename", "x.py", cwd=project, stdin=padding + PP_OFFLOAD_RECIPE.encode())
    assert result.returncode == 1, result.stderr
    assert b"x.py:190004:5: OFL102" in result.stdout


def test_a_model_config_json_that_is_a_fifo_does_not_block(project):
    (project / "models" / "big").mkdir(parents=True)
    os.mkfifo(project / "models" / "big" / "config.json")
    (project / "hf.py").write_text(
        "from megatron.bridge import AutoBridge\n\n\n"
        "def big_config():\n"
        "    cfg = ConfigContainer(model=AutoBridge.from_hf_pretrained('models/big').to_megatron_provider(),\n"
        "                          optimizer=OptimizerConfig(), ddp=DistributedDataParallelConfig())\n"
        "    cfg.model.cpu_offloading = True\n"
        "    cfg.model.pipeline_model_parallel_size = 2\n"
        "    return cfg\n")
    for args in (["hf.py"], []):
        result = run("check", *args, "--no-cache", cwd=project)
        assert result.returncode == 1, result.stderr
        assert errors_of(result) == []
        assert b"hf.py:7:5: OFL102" in result.stdout


# ---------------------------------------------------------------------------------------------- output

ESCAPE_KEY_YAML = 'model:\n  "cpu_offloading\\e[2J": true\n'  # a key with a raw ESC: clear-screen when printed


@pytest.fixture()
def odd_names(project: Path) -> Path:
    (project / "ok.py").unlink()
    (project / "new\nline.py").write_text(PP_OFFLOAD_RECIPE)
    (project / "back\\slash.py").write_text(PP_OFFLOAD_RECIPE)
    (project / os.fsdecode(b"latin\xe9.py")).write_text(PP_OFFLOAD_RECIPE)  # a name that is not UTF-8
    (project / "esc.yaml").write_text(ESCAPE_KEY_YAML)
    (project / "bad\x1b[2J.yaml").write_text("model: [unclosed\x1b[31m\n")  # an error line: name and content
    return project


@pytest.mark.parametrize("fmt", ["concise", "full", "github", "junit", "json", "sarif"])
def test_control_characters_from_names_and_contents_never_reach_the_output(odd_names, fmt):
    result = run("check", "--no-cache", "--output-format", fmt, cwd=odd_names)
    assert result.returncode == 2, result.stderr
    stdout, stderr = result.stdout.decode("utf-8"), result.stderr.decode("utf-8")  # valid UTF-8, nothing raw
    for text in (stdout, stderr):
        assert not any(c in text for c in "\x1b\r\x00"), text
    (error,) = errors_of(result)
    assert error.startswith("offlint: error: bad\\x1b[2J.yaml: invalid YAML")
    if fmt == "concise":  # one line per finding, each starting with the escaped path
        lines = stdout.splitlines()
        assert len(lines) == 4, stdout
        assert [line.split(":", 1)[0] for line in lines] == ["back\\slash.py", "esc.yaml", "latin\\udce9.py",
                                                             "new\\nline.py"]
        assert "model.cpu_offloading\\x1b[2J is not a config field" in lines[1]
    if fmt == "github":
        assert len(stdout.splitlines()) == 4
        assert "file=new%0Aline.py," in stdout and "cpu_offloading\\x1b[2J" in stdout
    if fmt in ("json", "sarif"):  # the exact strings, in JSON's own escapes
        document = json.loads(stdout)
        text = json.dumps(document)
        assert "\\u001b[2J" in text
    if fmt == "json":
        assert {f["filename"] for f in document} == {"back\\slash.py", "esc.yaml", os.fsdecode(b"latin\xe9.py"),
                                                     "new\nline.py"}


def test_sarif_keeps_a_backslash_in_a_file_name(odd_names):
    result = run("check", "--no-cache", "--output-format", "sarif", cwd=odd_names)
    uris = {result_["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
            for result_ in json.loads(result.stdout)["runs"][0]["results"]}
    # A backslash is part of the name on POSIX (not a directory separator); a name that is not UTF-8 keeps its
    # bytes, percent-encoded.
    assert uris == {"back%5Cslash.py", "esc.yaml", "latin%E9.py", "new%0Aline.py"}


def test_a_python_object_tag_is_an_error_on_a_key_a_section_or_a_value(project):
    tag = "!!python/object/new:os.system"
    cases = {
        "section.yaml": f'model: {tag} ["echo"]\n',  # the `model:` key's own value
        "mapping.yaml": f"model: {tag}\n  cpu_offloading: true\n",
        "key.yaml": f"model:\n  {tag} cpu_offloading: true\n",
        "value.yaml": f'model:\n  cpu_offloading: {tag} ["echo"]\n',
        "document.yaml": f"{tag}\nmodel:\n  cpu_offloading: true\n",
    }
    for name, text in cases.items():
        (project / name).write_text(text)
    result = run("check", *cases, "ok.py", "--no-cache", cwd=project)
    assert result.returncode == 2
    errors = errors_of(result)
    assert sorted(e.split(":", 3)[2].strip() for e in errors) == sorted(cases), errors
    assert all("tag 'tag:yaml.org,2002:python/object/new:os.system' is not plain data" in e for e in errors)
    assert b"ok.py:4:5: OFL102" in result.stdout

    (project / "merge.yaml").write_text("base: &b {cpu_offloading: true}\nmodel:\n  <<: *b\n")  # a merge key is data
    assert errors_of(run("check", "merge.yaml", "--no-cache", cwd=project)) == []


def _reading_stdin(pid: int) -> bool:
    """Whether the process is blocked reading a pipe (Linux /proc)."""
    try:
        return "pipe" in Path(f"/proc/{pid}/wchan").read_text()
    except OSError:
        return False


def test_ctrl_c_during_check_exits_130(project):
    if not Path("/proc/self/wchan").exists():
        pytest.skip("needs Linux /proc to see that offlint is waiting")
    from tests.signals import default_sigint

    process = subprocess.Popen([sys.executable, "-m", "offlint", "check", "-", "--stdin-filename", "x.py"],
                               cwd=project, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               preexec_fn=default_sigint)
    try:
        for _ in range(600):  # until it waits for its input, inside the check command
            if _reading_stdin(process.pid) or process.poll() is not None:
                break
            time.sleep(0.05)
        else:
            pytest.skip("offlint never showed as waiting on its input")
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=TIMEOUT)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 130, err
    assert err.decode().strip() == "offlint: interrupted"  # not click's "Aborted!", no traceback


def test_ctrl_c_while_the_command_line_loads_is_one_line_too(monkeypatch, capsys):
    """The first 0.2-0.5 s of a run import the command line; a Ctrl-C then had been a Python traceback."""
    from offlint.__main__ import main

    class Interrupted:  # what a Ctrl-C during `import offlint.cli` raises there
        @staticmethod
        def find_spec(name, path=None, target=None):
            if name == "offlint.cli":
                raise KeyboardInterrupt

    monkeypatch.delitem(sys.modules, "offlint.cli", raising=False)
    monkeypatch.setattr(sys, "meta_path", [Interrupted(), *sys.meta_path])
    with pytest.raises(SystemExit) as ended:
        main()
    assert ended.value.code == 130 and capsys.readouterr().err == "offlint: interrupted\n"


@pytest.mark.slow
def test_the_workers_end_with_offlint_when_only_it_is_killed(tmp_path):
    """A CI job's time limit sends SIGTERM to offlint alone. Its forked workers stayed, blocked on their task pipe,
    each holding the caller's standard error open: a caller reading it (this test's `communicate`) waited for ever."""
    if (os.cpu_count() or 1) < 2 or not Path("/proc/self/stat").exists():
        pytest.skip("needs two CPUs (for workers) and Linux /proc")
    recipe = Path(__file__).resolve().parent.parent.joinpath("fixtures/bad/recipes/llama_offload.py").read_text()
    for i in range(300):
        (tmp_path / f"recipe_{i}.py").write_text(recipe)
    process = subprocess.Popen([sys.executable, "-m", "offlint", "check", ".", "--no-cache"], cwd=tmp_path,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        for _ in range(600):  # until its workers are forked
            if _group(process.pid) - {process.pid} or process.poll() is not None:
                break
            time.sleep(0.02)
        assert process.poll() is None, "the check ended before its workers could be seen"
        process.terminate()
        process.communicate(timeout=60)  # standard error reaches its end: no worker holds it any more
        for _ in range(100):
            if not _group(process.pid):
                break
            time.sleep(0.1)
        assert not _group(process.pid) - {process.pid}
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)


def _group(group: int) -> set[int]:
    """The live (not zombie) processes of a process group (Linux /proc)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[2]) == group and fields[0] != "Z":
                    found.add(int(entry.name))
    return found


@pytest.mark.parametrize("args", [("check", ".", "--no-cache"), ("rules",)])
def test_output_that_cannot_be_written_is_one_line(project, args):
    """A full disk (/dev/full) had been an internal error, and a closed standard output an AttributeError."""
    if not Path("/dev/full").exists():
        pytest.skip("needs /dev/full")
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "offlint", *args], cwd=project, stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=TIMEOUT)
    assert done.returncode == 2 and done.stderr == ("offlint: error: standard output: cannot write it (No space left "
                                                    "on device); free some space or write elsewhere\n")
    closed = subprocess.run(["sh", "-c", 'exec "$0" -m offlint "$@" >&-', sys.executable, *args], cwd=project,
                            stderr=subprocess.PIPE, text=True, timeout=TIMEOUT)
    assert closed.returncode == 2
    assert closed.stderr == "offlint: error: standard output is closed; send it to a file, a pipe or /dev/null\n"


def test_a_current_directory_that_was_removed_is_one_line(tmp_path):
    """`rm -rf` of the folder a shell is in, then `offlint check .`: it had been an internal FileNotFoundError."""
    gone = tmp_path / "gone"
    gone.mkdir()
    done = subprocess.run(["sh", "-c", 'cd "$1" && rmdir "$1" && exec "$0" -m offlint check .', sys.executable,
                           str(gone)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=TIMEOUT,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)})
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == "offlint: error: the current directory no longer exists; cd into the project again\n"


@pytest.mark.parametrize("output_format", ["concise", "json", "sarif", "junit", "github"])
def test_an_output_encoding_without_the_files_characters(tmp_path, output_format):
    """PYTHONIOENCODING=ascii (or a Windows console) and a finding in `récipé.py`: a UnicodeEncodeError, reported as
    an internal error. Text takes escapes; JSON, SARIF and JUnit are UTF-8 documents whatever the locale."""
    (tmp_path / "récipé.py").write_text(PP_OFFLOAD_RECIPE)
    done = subprocess.run([sys.executable, "-m", "offlint", "check", ".", "--no-cache", "--output-format",
                           output_format], cwd=tmp_path, capture_output=True, timeout=TIMEOUT,
                          env={**os.environ, "PYTHONIOENCODING": "ascii"})
    assert done.returncode == 1 and b"internal error" not in done.stderr, done.stderr
    if output_format == "json":
        assert "récipé.py" in done.stdout.decode("utf-8") and json.loads(done.stdout)
    elif output_format == "sarif":  # (a URI: percent-encoded UTF-8)
        assert "r%C3%A9cip%C3%A9.py" in done.stdout.decode("utf-8") and json.loads(done.stdout)
    elif output_format == "junit":
        assert "récipé.py" in done.stdout.decode("utf-8")
    else:
        assert b"r\\xe9cip\\xe9.py" in done.stdout


def test_without_git_on_path_help_works_and_bisect_says_what_it_needs(project):
    """GitPython raises ImportError at import where there is no git program: `offlint --help` (which lists bisect)
    had been an internal error in such a container."""
    env = {**os.environ, "PATH": str(project / "no-programs-here")}
    env.pop("GIT_PYTHON_REFRESH", None)
    helped = subprocess.run([sys.executable, "-m", "offlint", "--help"], cwd=project, capture_output=True, text=True,
                            env=env, timeout=TIMEOUT)
    assert helped.returncode == 0 and "bisect" in helped.stdout, helped.stderr
    bisected = subprocess.run([sys.executable, "-m", "offlint", "bisect", "ok.py", "--probe", "lint", "--good", "a",
                               "--bad", "b"], cwd=project, capture_output=True, text=True, env=env, timeout=TIMEOUT)
    assert bisected.returncode == 2 and bisected.stderr == ("offlint: error: bisect runs git, and there is no `git` "
                                                            "program on PATH; install git or put it on PATH\n")


# ---------------------------------------------------------------------------------------------- every case of the issue

def _case_param(case):
    return pytest.param(case, id=case.name, marks=[pytest.mark.slow] if case.slow else [])


@pytest.mark.slow
@pytest.mark.parametrize("case", [_case_param(c) for c in CASES])
def test_a_hostile_input_is_checked_or_refused_in_one_line(tmp_path, case, request):
    """Each case of issue 20 (tests/hostile_cases.py), through the real command line: checked normally, or one
    `offlint: error: PATH: ...` line per hostile file and exit 2, the other files still checked. How long each
    takes is measured by benchmarks/hostile_inputs.py, not here; the timeout only turns a hang into a failure."""
    if case.needs_git and shutil.which("git") is None:
        pytest.skip("needs git")
    preexec_fn = _memory_capped
    if case.unprivileged:
        drop = request.getfixturevalue("unprivileged")  # skips where root's file access cannot be dropped

        def preexec_fn():
            _memory_capped()
            drop()
    root = hostile_cases.project(tmp_path / "project")
    case.build(root)
    try:
        result = run(*case.args, cwd=root, preexec_fn=preexec_fn)
    finally:
        for path in root.rglob("*"):  # chmod 0 files and folders: let pytest remove them
            if not path.is_symlink():
                path.chmod(0o755)
    errors = sorted(line.removeprefix("offlint: error: ") for line in errors_of(result))
    if case.errors:
        assert result.returncode == 2, result.stderr
        assert len(errors) == len(case.errors), errors
        for error, expected in zip(errors, sorted(case.errors)):
            assert expected in error, errors
    else:
        assert result.returncode in (0, 1), result.stderr
        assert errors == []
    if case.checks_ok:
        assert hostile_cases.OK_FINDING in result.stdout, result.stdout


@pytest.mark.parametrize("token", [
    "model.a=1", "model.a=0", "model.a=-5", "model.a=-0", "model.a=007", "model.a=1_0", "model.a=1e3",
    "model.a=True", "model.a=FALSE", "model.a=Null", "model.a=None", "model.a=yes", "model.a=Inf", "model.a=inf_x",
    "model.a=nan", "model.a=core_attn", "model.a=a-b", "model.a=_x1", "+model.a=1", "++model.a=x",
    "env_vars.NVTE_CPU_OFFLOAD_V1=1", "model.a_b.c=d9", "model.a=", "model.a=0x10", "x=1",
])
def test_overrides_read_without_hydra_read_as_hydra_reads_them(token):
    """A command of 100,000 overrides took half a minute in Hydra's parser, so plain ones (a dotted key set to an
    integer, a word, true/false/null) are read without it: each must come out as Hydra's own parser reads it."""
    from offlint.sources import hydra

    def shown(overrides):
        return [(o.key, o.value, type(o.value), o.op, o.text) for o in overrides]

    try:
        expected = shown(hydra._parse_with_hydra.__wrapped__(token))
    except hydra.OverrideError as exc:
        expected = str(exc)
    try:
        got = shown(hydra.parse_override(token))
    except hydra.OverrideError as exc:
        got = str(exc)
    if token == "model.a=nan":  # nan is not equal to itself
        assert str(got) == str(expected)
    else:
        assert got == expected


# ---------------------------------------------------------------------------------------------- the cache

BASE_MODULE = """\
def _common():
    return ConfigContainer(model=GPTModelProvider(num_layers=8, pipeline_model_parallel_size={pp}),
                           optimizer=OptimizerConfig(), ddp=DistributedDataParallelConfig())
"""
DERIVED_RECIPE = """\
from pkg.common import _common


def derived_config():
    cfg = _common()
    cfg.model.cpu_offloading = True
    cfg.model.cpu_offloading_num_layers = 2
    return cfg
"""


@pytest.fixture()
def cached_project(project: Path) -> Path:
    """A project whose recipe inherits its pipeline size from an imported module (pp=2: OFL102 at the recipe)."""
    (project / ".git").mkdir()
    (project / "pkg").mkdir()
    (project / "pkg" / "__init__.py").write_text("")
    (project / "pkg" / "common.py").write_text(BASE_MODULE.format(pp=2))
    (project / "pkg" / "derived.py").write_text(DERIVED_RECIPE)
    return project


def _cache_files() -> list[Path]:
    home = Path(os.environ["OFFLINT_CACHE_DIR"])
    return sorted(p for p in home.rglob("*") if p.is_file() and p.name.startswith(("check-", "last-")))


def _same_as_without_cache(project: Path, *args: str, preexec_fn=None) -> subprocess.CompletedProcess:
    expected = run("check", *args, "--no-cache", cwd=project, preexec_fn=preexec_fn)
    got = run("check", *args, cwd=project, preexec_fn=preexec_fn)
    errors_of(got)  # no traceback, no internal error
    assert (got.returncode, got.stdout) == (expected.returncode, expected.stdout), got.stderr
    return got


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty", "binary"])
def test_a_damaged_cache_entry_changes_no_finding(cached_project, damage):
    for args in ([], ["pkg/derived.py"]):
        assert b"derived.py:6:5: OFL102" in _same_as_without_cache(cached_project, *args).stdout
    files = _cache_files()
    assert files
    for path in files:
        data = path.read_bytes()
        path.write_bytes({"truncated": data[:len(data) // 2], "garbage": b'{"format": 5, "entries": [}\n{]\t',
                          "empty": b"", "binary": os.urandom(4096)}[damage])
    for args in ([], ["pkg/derived.py"], ["ok.py"]):
        _same_as_without_cache(cached_project, *args)


@pytest.mark.slow
def test_a_read_only_cache_directory_changes_no_finding(cached_project, unprivileged):
    home = Path(os.environ["OFFLINT_CACHE_DIR"])
    _same_as_without_cache(cached_project, preexec_fn=unprivileged)  # fills it
    folders = [home, *(p for p in home.rglob("*") if p.is_dir())]
    for folder in folders:
        folder.chmod(0o500)
    try:
        (cached_project / "pkg" / "common.py").write_text(BASE_MODULE.format(pp=1))  # the old entries are stale
        for args in ([], ["pkg/derived.py"]):
            result = _same_as_without_cache(cached_project, *args, preexec_fn=unprivileged)
            assert b"derived.py:6:5: OFL102" not in result.stdout
    finally:
        for folder in folders:
            folder.chmod(0o700)


@pytest.mark.slow
def test_a_file_where_the_cache_directory_should_be_changes_no_finding(cached_project, tmp_path_factory,
                                                                      monkeypatch):
    outside = tmp_path_factory.mktemp("cache-home")  # not inside the project, where a cache is never used
    in_the_way = outside / "cache-is-a-file"
    in_the_way.write_text("not a directory\n")
    monkeypatch.setenv("OFFLINT_CACHE_DIR", str(in_the_way))
    for args in ([], ["pkg/derived.py"]):
        _same_as_without_cache(cached_project, *args)
    assert in_the_way.read_text() == "not a directory\n"

    home = outside / "home"  # the cache home is a folder, the project's folder in it is a file
    monkeypatch.setenv("OFFLINT_CACHE_DIR", str(home))
    _same_as_without_cache(cached_project)
    for folder in [p for p in home.iterdir() if p.is_dir()]:
        shutil.rmtree(folder)
        folder.write_text("in the way\n")
    for args in ([], ["pkg/derived.py"]):
        _same_as_without_cache(cached_project, *args)


@pytest.mark.slow
def test_a_stale_entry_is_never_served_after_an_imported_file_changed(cached_project):
    for pp, finds in ((2, True), (1, False), (4, True), (1, False)):
        (cached_project / "pkg" / "common.py").write_text(BASE_MODULE.format(pp=pp))
        for args in ([], ["pkg/derived.py"]):  # the whole tree, and the pre-commit run on the recipe alone
            result = _same_as_without_cache(cached_project, *args)
            assert (b"derived.py:6:5: OFL102" in result.stdout) is finds, (pp, args)


@pytest.mark.slow
def test_two_checks_writing_the_cache_at_once_never_change_the_findings(cached_project):
    """Two processes check the same project at once, round after round, with an edit between rounds so that
    every round writes the cache again; each answer must be the one without a cache."""
    for round_ in range(10):
        pp = 2 if round_ % 2 else 1
        (cached_project / "pkg" / "common.py").write_text(BASE_MODULE.format(pp=pp) + f"# round {round_}\n")
        for args in ([], ["pkg/derived.py"]):
            expected = run("check", *args, "--no-cache", cwd=cached_project)
            processes = [subprocess.Popen([sys.executable, "-m", "offlint", "check", *args], cwd=cached_project,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
            for process in processes:
                out, err = process.communicate(timeout=TIMEOUT)
                assert b"Traceback" not in err and b"internal error" not in err, err
                assert (process.returncode, out) == (expected.returncode, expected.stdout), (round_, args, err)


@pytest.mark.parametrize("section", ["model", "optimizer", "ddp"])
def test_the_did_you_mean_shortlist_gives_difflibs_answer(section):
    """OFL003 tries only the fields whose similarity can reach the cutoff (100,000 misspelt keys in one file asked
    difflib about every field 100,000 times): the suggestion must be the one trying every field gives."""
    import difflib

    from offlint import keys

    fields = sorted(keys.release_fields(section))  # (the fields suggested: keys.closest_field)
    names = ([f[:-1] for f in fields] + [f + "s" for f in fields] + [f.replace("_", "", 1) for f in fields]
             + [f"key_{i}" for i in range(200)] + ["", "a", "x" * 80, "cpu_ofloading", "recompute_granulrity"])
    for name in names:
        expected = difflib.get_close_matches(name, fields, n=1, cutoff=0.8)
        assert difflib.get_close_matches(name, keys.could_be_close(section, name), n=1,
                                         cutoff=0.8) == expected, name


def test_characters_tree_sitter_bash_crashes_on_are_read(tmp_path):
    """tree-sitter-bash (0.25) kills the process (SIGSEGV) on some characters at or above U+80000 next to braces:
    a sagemaker-hyperpod-recipes launch's `bash -c "... > {$results_dir}/hostname"` (a typo for `${results_dir}`)
    put offlint's placeholder for the unknown value there, and the run died (rc 139, or 'internal error:
    BrokenProcessPool' and exit 2 in a larger tree: every other file's findings lost; a helper's sweep, session
    47). The parser gets a harmless character of the same length instead."""
    import subprocess
    import sys

    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "hosts.sh").write_text('#!/bin/bash\nsrun -l bash -c "hostname > {$out}/hosts"\n'
                                       "echo {\U000F0001}/x > {\U000A0000}/y\nx=\U000F0000 {\U0010FFFD}/z\n")
    (tmp_path / "train.sh").write_text("#!/bin/bash\ntorchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 4 "
                                       "--hidden-size 256 --num-attention-heads 8 --micro-batch-size 1 "
                                       "--global-batch-size 8 --seq-length 128 --max-position-embeddings 128\n")
    result = subprocess.run([sys.executable, "-m", "offlint", "check", ".", "--no-cache", "--mcore-version", "0.20.0",
                             "--select", "OFL301"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert (result.returncode, result.stdout.count("OFL301")) == (1, 1), (result.returncode, result.stderr[-500:])
    assert result.stdout.startswith("train.sh:2:1: OFL301")


def test_the_bash_parser_is_never_handed_what_crashes_it():
    """The same at the parser, where a crash is certain enough to test: tree-sitter-bash alone dies on such text in
    about two processes of three; six processes parse it through offlint's parser and none may die."""
    import subprocess
    import sys

    code = ("from offlint.sources.bash_tree import parse_bash\n"
            "text = ''.join('echo {%s}/x > {%s}/y\\n' % (chr(0xF0000 + i), chr(0x80000 + 7 * i)) for i in range(500))\n"
            "assert not parse_bash(text.encode()).root_node.has_error\n")
    codes = [subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120).returncode
             for _ in range(6)]
    assert codes == [0] * 6
