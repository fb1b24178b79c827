#!/usr/bin/env python3
"""Time and peak memory of offlint on each hostile input of issue 20 (tests/hostile_cases.py).

    python benchmarks/hostile_inputs.py [--timeout 60] [-k SUBSTRING]

Each case is generated in a fresh temporary project and run as `python -m offlint ARGS` under `/usr/bin/time -v`
(its "Maximum resident set size" is the peak RSS of the offlint process; without /usr/bin/time, the peak of the
waited-for children from `resource.getrusage(RUSAGE_CHILDREN)`, measured in a fresh wrapper process). The cache
goes to a fresh folder per case (OFFLINT_CACHE_DIR), so every run is cold. A case that runs past --timeout is
killed and shown as TIMEOUT. The last column says whether the answer was the expected one (checked normally, or
one `offlint: error:` line per hostile file and exit 2, and ok.py's finding still reported). Cases about
unreadable files run without root's power to read any file (its capabilities dropped, as the tests do). The issue's bound:
every case under 10 s and 1 GB on the machine that runs it; nothing here asserts it. On a shared machine the
wall time depends on the load: the CPU column (user + system seconds of the offlint process) does much less.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.hostile_cases import CASES, OK_FINDING, Case, drop_root_file_access, project  # noqa: E402

TIME = "/usr/bin/time"
# Runs one command; prints wall seconds, CPU seconds and peak RSS (KiB) of its child: the fallback to /usr/bin/time.
_WRAPPER = r"""
import resource, subprocess, sys, time
start = time.perf_counter()
code = subprocess.call(sys.argv[1:])
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(f"wrapper: {time.perf_counter() - start} {usage.ru_utime + usage.ru_stime} {usage.ru_maxrss}", file=sys.stderr)
"""


def verdict(case: Case, code: int, stdout: bytes, stderr: bytes) -> str:
    """'ok', or what differs from the case's expected answer."""
    text = stderr.decode("utf-8", "replace")
    if "Traceback" in text or "internal error" in text:
        return "traceback"
    errors = sorted(line.removeprefix("offlint: error: ") for line in text.splitlines()
                    if line.startswith("offlint: error:"))
    if case.errors:
        if code != 2:
            return f"exit {code}, expected 2"
        if len(errors) != len(case.errors) or not all(p in e for e, p in zip(errors, sorted(case.errors))):
            return f"errors: {errors[:2]}"
    elif errors or code not in (0, 1):
        return f"exit {code}: {errors[:1]}"
    if case.checks_ok and OK_FINDING not in stdout:
        return "ok.py's finding missing"
    return "ok"


def measure(case: Case, timeout: float) -> tuple[str, float, float | None, float | None, str]:
    """(exit code or TIMEOUT, wall seconds, CPU seconds, peak RSS MiB, verdict) of one case, in a fresh folder."""
    with tempfile.TemporaryDirectory(prefix="offlint-hostile-") as scratch:
        root = project(Path(scratch) / "project")
        case.build(root)
        env = {**os.environ, "OFFLINT_CACHE_DIR": str(Path(scratch) / "cache"), "PYTHONPATH": str(ROOT)}
        command = [sys.executable, "-m", "offlint", *case.args]
        if shutil.which(TIME):
            command = [TIME, "-v", *command]
        else:
            command = [sys.executable, "-c", _WRAPPER, *command]
        start = time.perf_counter()
        process = subprocess.Popen(command, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   start_new_session=True,
                                   preexec_fn=drop_root_file_access if case.unprivileged else None)
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            process.communicate()
            return "TIMEOUT", time.perf_counter() - start, None, None, f"no answer in {timeout:.0f} s"
        wall, cpu, peak = time.perf_counter() - start, None, None
        own = []
        for line in stderr.decode("utf-8", "replace").splitlines():
            stripped = line.strip()
            if stripped.startswith("Maximum resident set size (kbytes):"):
                peak = int(stripped.rsplit(":", 1)[1]) / 1024
            elif stripped.startswith(("User time (seconds):", "System time (seconds):")):
                cpu = (cpu or 0.0) + float(stripped.rsplit(":", 1)[1])
            elif stripped.startswith("Elapsed (wall clock) time"):
                wall = _clock(stripped.rsplit(": ", 1)[1])
            elif stripped.startswith("wrapper: "):
                seconds, cpu_seconds, kib = stripped.removeprefix("wrapper: ").split()
                wall, cpu, peak = float(seconds), float(cpu_seconds), int(kib) / 1024
            elif not line.startswith("\t") and not stripped.startswith("Command exited with non-zero status"):
                own.append(line)
        code = process.returncode
        return str(code), wall, cpu, peak, verdict(case, code, stdout, "\n".join(own).encode())


def _clock(text: str) -> float:
    """/usr/bin/time's h:mm:ss or m:ss.ss."""
    seconds = 0.0
    for part in text.split(":"):
        seconds = seconds * 60 + float(part)
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds before a case is killed (default 60)")
    parser.add_argument("-k", dest="select", default="", help="only the cases whose name contains this")
    args = parser.parse_args()
    rows = []
    width = max(len(c.name) for c in CASES)
    print(f"| {'case':<{width}} | exit    | time s | CPU s  | peak MiB | answer")
    print(f"|{'-' * (width + 2)}|---------|--------|--------|----------|-------")
    for case in CASES:
        if args.select not in case.name:
            continue
        code, wall, cpu, peak, answer = measure(case, args.timeout)
        rows.append((case, code, wall, peak, answer))
        shown_cpu = f"{cpu:6.2f}" if cpu is not None else "     ?"
        shown_peak = f"{peak:8.0f}" if peak is not None else "       ?"
        print(f"| {case.name:<{width}} | {code:<7} | {wall:6.2f} | {shown_cpu} | {shown_peak} | {answer}", flush=True)
    worst = max((r[2] for r in rows), default=0.0)
    heaviest = max((r[3] or 0.0 for r in rows), default=0.0)
    wrong = [r[0].name for r in rows if r[4] != "ok"]
    print(f"\n{len(rows)} cases; slowest {worst:.2f} s, largest peak {heaviest:.0f} MiB; "
          f"{len(wrong)} not as expected" + (f": {', '.join(wrong)}" if wrong else ""))
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
