"""LocalRunner and classification on real subprocesses: timeout, SIGKILL, segfault, MemoryError, CUDA OOM
and NCCL text, import failure, exit 125, concurrent steps with GPU slices, crash signatures mapped to rules,
and a probe's leftover children killed when it exits."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from offlint.bisect.classify import classify, exception_signature
from offlint.bisect.runner import LocalRunner
from offlint.outcomes import Outcome
from offlint.rules import load_rules
from offlint.steps import Step
from offlint.validate import rules_for_error


def step(tmp_path: Path, name: str, code: str, timeout: float = 30, env=None) -> Step:
    return Step(name, (sys.executable, "-c", textwrap.dedent(code)), tmp_path, tmp_path / f"{name}.log", timeout,
                env or {})


CASES = {
    "pass": ("print('fine')", Outcome.PASS, None),
    "sigkill": ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", Outcome.HOST_OOM_KILL, "SIGKILL"),
    "exit137": ("import sys; sys.exit(137)", Outcome.HOST_OOM_KILL, "SIGKILL"),
    "segfault": ("import ctypes; ctypes.string_at(0)", Outcome.SEGFAULT, "SIGSEGV"),
    "memoryerror": ("x = bytearray(1 << 62)", Outcome.HOST_OOM_KILL, "MemoryError"),
    "cuda-oom": ("raise RuntimeError('CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.1 GiB total)')",
                 Outcome.CUDA_OOM, "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.1 GiB "
                                   "total)"),
    "nccl": ("import sys; print('NCCL WARN Call to ibv_reg_mr failed'); "
             "raise RuntimeError('NCCL error in: ProcessGroupNCCL.cpp:1275, unhandled system error')",
             Outcome.NCCL_ERROR, "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1275, unhandled system error"),
    "import": ("import megatron_core_that_does_not_exist", Outcome.BUILD_FAILURE,
               "ModuleNotFoundError: No module named 'megatron_core_that_does_not_exist'"),
    "skip125": ("import sys; sys.exit(125)", Outcome.BUILD_FAILURE, None),
    "crash": ("raise ValueError('bad value at 0x7f00dead')", Outcome.CRASH, "ValueError: bad value at 0x…"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_outcome_classes_from_real_processes(tmp_path, name):
    code, outcome, signature = CASES[name]
    [result] = LocalRunner().run([step(tmp_path, name, code)])
    verdict = classify(result)
    assert verdict.outcome is outcome, (verdict, result.step.log.read_text())
    if signature is not None:
        assert verdict.signature == signature


def test_timeout_kills_the_whole_process_group(tmp_path):
    pidfile = tmp_path / "child.pid"
    code = f"""
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        open({str(pidfile)!r}, "w").write(str(child.pid))
        time.sleep(60)
    """
    [result] = LocalRunner(grace_s=1).run([step(tmp_path, "hang", code, timeout=2)])
    assert result.timed_out and classify(result).outcome is Outcome.TIMEOUT
    child = int(pidfile.read_text())
    assert not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text().split()[2]


def test_concurrent_steps_get_disjoint_gpu_slices_and_keep_order(tmp_path):
    code = "import os; print(os.environ['CUDA_VISIBLE_DEVICES'])"
    steps = [step(tmp_path, f"s{i}", code) for i in range(2)]
    results = LocalRunner(gpus=["0", "1", "2", "3"]).run(steps)
    assert [r.step.name for r in results] == ["s0", "s1"]
    assert [r.step.log.read_text().strip() for r in results] == ["0,1", "2,3"]


def test_a_program_that_cannot_start_is_a_skip(tmp_path):
    bad = Step("missing", ("/nonexistent/program",), tmp_path, tmp_path / "missing.log", 5)
    [result] = LocalRunner().run([bad])
    assert classify(result).outcome is Outcome.BUILD_FAILURE


def test_crash_signature_maps_to_the_rule_that_mirrors_it():
    log = textwrap.dedent("""\
        Traceback (most recent call last):
          File "train.py", line 3, in <module>
        ValueError: attn_proj cannot be set to offload_modules alone without core_attn because the input of attn_proj is the output of core_attn, which is needed in core_attn.backward().
    """)
    signature = exception_signature(log)
    assert signature.startswith("ValueError: attn_proj cannot be set")
    assert "OFL107" in rules_for_error(signature, load_rules())


def test_replay_result_file_wins_over_exit_status(tmp_path):
    result_json = tmp_path / "r.json"
    code = f"""
        import json, sys
        json.dump({{"outcome": "cuda-oom", "signature": "torch.OutOfMemoryError: CUDA out of memory",
                   "peak_allocated_bytes": [10, 12], "loss": [2.0]}}, open({str(result_json)!r}, "w"))
        sys.exit(3)
    """
    [result] = LocalRunner().run([step(tmp_path, "replay", code)])
    verdict = classify(result, result_json)
    assert verdict.outcome is Outcome.CUDA_OOM and verdict.peak_allocated_bytes == [10, 12]


def test_what_a_probe_leaves_running_is_killed_when_it_exits(tmp_path):
    pidfile = tmp_path / "child.pid"
    code = f"""
        import subprocess, sys
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        open({str(pidfile)!r}, "w").write(str(child.pid))
    """
    [result] = LocalRunner().run([step(tmp_path, "leaves-a-child", code)])
    assert classify(result).outcome is Outcome.PASS
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 20
    while Path(f"/proc/{child}").exists() and "Z" not in Path(f"/proc/{child}/stat").read_text().split()[2]:
        assert time.monotonic() < deadline, "the probe's child outlived it"
        time.sleep(0.05)


def test_the_tracker_hears_of_every_group(tmp_path):
    class Tracker:
        def __init__(self):
            self.events = []

        def started(self, pgid, start):
            self.events.append(("+", pgid, start))

        def ended(self, pgid):
            self.events.append(("-", pgid))

    tracker = Tracker()
    # (each step outlives its announcement: a leader already gone when the runner reads its start time is announced
    # with None, as GroupTracker allows; a bare print(1) did so on a loaded machine, in CI)
    code = "import time; time.sleep(1); print(1)"
    results = LocalRunner(tracker=tracker).run([step(tmp_path, f"s{i}", code) for i in range(2)])
    assert all(classify(r).outcome is Outcome.PASS for r in results)
    started = [e[1] for e in tracker.events if e[0] == "+"]
    assert len(started) == 2 and sorted(started) == sorted(e[1] for e in tracker.events if e[0] == "-")
    assert all(isinstance(e[2], int) for e in tracker.events if e[0] == "+")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG and /proc are Linux's")
def test_a_steps_first_process_dies_when_the_bisect_and_its_watchdog_are_killed(tmp_path):
    """`pkill -9` of the bisect and its watchdog together: the kernel still ends the step's first process."""
    script = tmp_path / "bisect.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from offlint.bisect.runner import LocalRunner
        from offlint.steps import Step
        LocalRunner().run([Step("hang", ("sleep", "300"), Path({str(tmp_path)!r}), Path({str(tmp_path)!r}) / "h.log",
                                 600)])
    """))
    bisect = subprocess.Popen([sys.executable, str(script)])
    step = None
    try:
        def children():
            return [int(p) for p in Path(f"/proc/{bisect.pid}/task/{bisect.pid}/children").read_text().split()]

        def named(word: bytes) -> list[int]:  # (a child between fork and exec still has the parent's name)
            return [p for p in children() if word in Path(f"/proc/{p}/cmdline").read_bytes()]

        deadline = time.monotonic() + 60
        while len(named(b"sleep")) != 1 or len(named(b"watchdog")) != 1:
            assert time.monotonic() < deadline and bisect.poll() is None, "the step or the watchdog never started"
            time.sleep(0.05)
        [step], [guard] = named(b"sleep"), named(b"watchdog")
        os.kill(guard, signal.SIGKILL)
        bisect.kill()
        bisect.wait(timeout=30)
        deadline = time.monotonic() + 20
        while Path(f"/proc/{step}").exists() and "Z" not in Path(f"/proc/{step}/stat").read_text().split()[2]:
            assert time.monotonic() < deadline, "the step outlived the bisect and its watchdog"
            time.sleep(0.05)
    finally:
        if bisect.poll() is None:
            bisect.kill()
            bisect.wait()
        if step is not None and _cmdline(step) == b"sleep\x00300\x00":  # a failed run must not leave it behind
            os.kill(step, signal.SIGKILL)


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def test_watchdog_kills_a_probe_it_was_never_told_of_by_its_environment_token():
    """The bisect may die between starting a probe and announcing its group (a loaded machine): the watchdog
    still finds the probe and what it started by the run's token in their environment."""
    import secrets
    import subprocess
    import sys
    import time
    from pathlib import Path

    from offlint.bisect import watchdog

    token = secrets.token_hex(8)
    env = {**os.environ, watchdog.TOKEN_VARIABLE: token}
    probe = subprocess.Popen(["sh", "-c", "sleep 300 & wait"], env=env, start_new_session=True)
    stranger = subprocess.Popen(["sleep", "300"], start_new_session=True)  # no token: left alone
    guard = subprocess.Popen([sys.executable, "-I", str(Path(watchdog.__file__)), token], stdin=subprocess.PIPE)
    try:
        time.sleep(0.3)
        guard.stdin.close()  # the bisect is gone, having announced nothing
        guard.wait(timeout=30)
        probe.wait(timeout=10)
        assert not watchdog.carrying_token(token)  # the probe's own child is gone too
        assert stranger.poll() is None
    finally:
        for process in (probe, stranger):
            if process.poll() is None:
                process.kill()
                process.wait()
