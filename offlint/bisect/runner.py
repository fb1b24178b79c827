"""`LocalRunner`: run probe steps as local subprocesses (the `StepRunner` of offlint/steps.py).

Each step runs in its own session (process group), so a timeout or a cancel kills the whole tree that a
probe started (torchrun and its workers, a shell and its children): SIGTERM first, SIGKILL after a grace
period, as tritonparse does; what a probe leaves running when its first process exits is killed too. If the
bisect itself is killed (SIGKILL runs no cleanup), the watchdog (watchdog.py, one small process per batch,
told of every group on a pipe) kills the groups still running; should the watchdog die too, each step's first
process still gets SIGTERM from the kernel (PR_SET_PDEATHSIG, Linux). A `tracker` (the run's record in the state
directory, state.py) hears of every group too, so a later run can verify and kill what is left. stdout and
stderr go to the step's log file. With `gpus`, concurrent steps get disjoint CUDA_VISIBLE_DEVICES slices.
The runner never interprets outcomes; classify.py does.
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Protocol, Sequence

from offlint.bisect import watchdog
from offlint.steps import Step, StepResult

GRACE_S = 5.0
POLL_S = 0.05


class GroupTracker(Protocol):
    def started(self, pgid: int, start: int | None) -> None: ...

    def ended(self, pgid: int) -> None: ...


class LocalRunner:
    def __init__(self, gpus: Sequence[str] = (), grace_s: float = GRACE_S, tracker: GroupTracker | None = None):
        self.gpus = list(gpus)
        self.grace_s = grace_s
        self.tracker = tracker
        self._running: dict[int, subprocess.Popen] = {}
        self._watchdog: subprocess.Popen | None = None
        # Marks this runner's probes in their environment (watchdog.py). os.urandom, not secrets: that imports random,
        # which imports bisect, which a bisect driver script named bisect.py would shadow.
        self._token = os.urandom(8).hex()

    def gpu_slices(self, count: int) -> list[str | None]:
        """CUDA_VISIBLE_DEVICES for `count` concurrent steps: the GPU list split into equal, disjoint slices."""
        if not self.gpus:
            return [None] * count
        size = max(1, len(self.gpus) // count)
        return [",".join(self.gpus[i * size:(i + 1) * size]) or None for i in range(count)]

    def run(self, steps: Sequence[Step]) -> list[StepResult]:
        started: list[tuple[Step, subprocess.Popen | None, float, str | None]] = []
        try:
            for step, devices in zip(steps, self.gpu_slices(len(steps))):
                started.append((step, *self._start(step, devices)))
            return self._collect(started)
        except BaseException:
            self.cancel_all()
            raise
        finally:
            self._stop_watchdog()

    def _start(self, step: Step, devices: str | None) -> tuple[subprocess.Popen | None, float, str | None]:
        self._guard()  # running before the probe starts: a probe is never unwatched, however slow the machine
        env = {**os.environ, **step.env, watchdog.TOKEN_VARIABLE: self._token}
        if devices is not None:
            env["CUDA_VISIBLE_DEVICES"] = devices
        step.log.parent.mkdir(parents=True, exist_ok=True)
        with open(step.log, "wb") as log:
            try:
                process = subprocess.Popen(step.argv, cwd=step.cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                           stdin=subprocess.DEVNULL, start_new_session=True,
                                           preexec_fn=_die_with_parent(os.getpid()))
            except OSError as exc:  # the program does not exist or cannot run: the step never ran
                log.write(f"offlint: cannot start {step.argv[0]}: {exc}\n".encode())
                return None, time.monotonic(), str(exc)
        self._running[process.pid] = process
        self._announce(process.pid, started=True)
        return process, time.monotonic(), None

    def _collect(self, started) -> list[StepResult]:
        results: dict[int, StepResult] = {}
        while len(results) < len(started):
            for index, (step, process, start, error) in enumerate(started):
                if index in results:
                    continue
                elapsed = time.monotonic() - start
                if process is None:
                    results[index] = StepResult(step, None, None, False, 0.0, scheduler_state=f"not started: {error}")
                elif process.poll() is not None:
                    results[index] = self._result(step, process, False, elapsed)
                elif elapsed > step.timeout_s:
                    self._kill(process)
                    results[index] = self._result(step, process, True, time.monotonic() - start)
            time.sleep(POLL_S)
        return [results[i] for i in range(len(started))]

    def _result(self, step: Step, process: subprocess.Popen, timed_out: bool, duration: float) -> StepResult:
        self._end(process)
        code = process.returncode
        if code is not None and code < 0:
            return StepResult(step, None, -code, timed_out, duration)
        return StepResult(step, code, None, timed_out, duration)

    def _kill(self, process: subprocess.Popen) -> None:
        """SIGTERM the step's process group, then SIGKILL what is left after the grace period."""
        for sig, wait in ((signal.SIGTERM, self.grace_s), (signal.SIGKILL, None)):
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                break
            try:
                process.wait(timeout=wait)
                if sig == signal.SIGTERM:
                    _killpg_quietly(process.pid)  # children that outlived their leader
                break
            except subprocess.TimeoutExpired:
                continue
        process.wait()

    def cancel_all(self) -> None:
        for process in list(self._running.values()):
            if process.poll() is None:
                self._kill(process)
            self._end(process)

    def _stop_watchdog(self) -> None:
        """After a batch nothing of ours runs, so the watchdog has nothing to kill: end of its pipe, it exits."""
        if self._watchdog is not None and not self._running:
            try:
                self._watchdog.stdin.close()
                self._watchdog.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
            self._watchdog = None

    def _end(self, process: subprocess.Popen) -> None:
        """The step's leader has exited: kill what it left in its group, then forget the group."""
        if self._running.pop(process.pid, None) is None:
            return
        _killpg_quietly(process.pid)
        self._announce(process.pid, started=False)

    def _announce(self, pgid: int, started: bool) -> None:
        """Tell the tracker and the watchdog that group `pgid` started (with its leader's start time) or ended."""
        if started:
            start = watchdog.start_time(pgid)
            line = f"+{pgid} {'-' if start is None else start}"
            if self.tracker is not None:
                self.tracker.started(pgid, start)
        else:
            line = f"-{pgid}"
            if self.tracker is not None:
                self.tracker.ended(pgid)
        guard = self._guard() if started else self._watchdog  # no watchdog is started to hear of an end
        if guard is not None:
            try:
                guard.stdin.write(line.encode() + b"\n")
                guard.stdin.flush()
            except OSError:  # the watchdog died: the tracker's record still lets a later run clean up
                self._watchdog = None

    def _guard(self) -> subprocess.Popen | None:
        """The watchdog process, started on first use (its own session: a Ctrl-C or a group kill misses it)."""
        if self._watchdog is None:
            try:
                self._watchdog = subprocess.Popen([sys.executable, "-I", str(Path(watchdog.__file__)), self._token],
                                                  stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                                  stderr=subprocess.DEVNULL, start_new_session=True)
            except OSError:
                return None
        return self._watchdog


def _die_with_parent(parent: int):
    """Linux: the step's first process gets SIGTERM when the bisect dies, should the watchdog be gone too (a
    `pkill` of both). Only that process: its children are the watchdog's and the next run's (state.py) job."""
    prctl = _prctl()
    if prctl is None:
        return None

    def arm() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # the bisect died before the signal was armed
            os._exit(1)

    return arm


@functools.cache
def _prctl():
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


PR_SET_PDEATHSIG = 1


def _killpg_quietly(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
