"""Turn a finished step into an outcome class: exit status, signal, log patterns, or a result file.

Order matters: a timeout or a kill says more than the text the process left behind; a CUDA OOM or NCCL
message says more than the generic exception that carried it; an import failure means "cannot test here"
(a skip, like git's 125), never a verdict. A crash's signature is its last exception line ("Type: message",
addresses scrubbed), mapped to the offlint rules whose mirrored megatron-core error text it starts with.
"""

from __future__ import annotations

import json
import re
import signal
from dataclasses import dataclass, field
from pathlib import Path

from offlint.outcomes import REPLAY_EXIT_CODES, Outcome
from offlint.slurm.states import scheduler_outcome
from offlint.steps import StepResult

LOG_TAIL_BYTES = 64 * 1024
SKIP_EXIT_CODE = 125  # git bisect run's "cannot test this commit"
USAGE_EXIT_CODE = 2  # offlint replay: usage error or no CUDA

CUDA_OOM = re.compile(r"CUDA out of memory|torch\.(cuda\.)?OutOfMemoryError|CUDA error: out of memory")
NCCL = re.compile(r"NCCL (error|WARN|INFO.*[Tt]imeout)|ncclInternalError|ncclSystemError|ncclUnhandledCudaError|"
                  r"ProcessGroupNCCL.*(Watchdog|timeout|Timeout)|DistBackendError")
IMPORT_FAILURE = re.compile(r"^(ModuleNotFoundError|ImportError)\b")
EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Failure|Fault))(?::\s?(.*))?$")
ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
SEGFAULT_SIGNALS = {signal.SIGSEGV, signal.SIGBUS, signal.SIGABRT, signal.SIGILL, signal.SIGFPE}
# offlint replay's exit codes; 2 (usage error, no CUDA) means this commit cannot be tested here.
REPLAY_OUTCOME_BY_CODE = {**{code: outcome for outcome, code in REPLAY_EXIT_CODES.items()},
                          USAGE_EXIT_CODE: Outcome.BUILD_FAILURE}


@dataclass
class Classified:
    outcome: Outcome
    signature: str | None = None
    rules: list[str] = field(default_factory=list)
    detail: str = ""  # one line: why this class
    peak_allocated_bytes: list[int] | None = None
    loss: list[float] | None = None


def read_tail(path: Path, limit: int = LOG_TAIL_BYTES) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, 2)
            size = handle.tell()
            handle.seek(max(0, size - limit))
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return ""


def exception_signature(text: str) -> str | None:
    """The last exception line of the last traceback in `text` ("ValueError: message"), or None."""
    lines = text.splitlines()
    start = max((i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")),
                default=-1)
    candidates = lines[start + 1:] if start >= 0 else lines
    found = None
    for line in candidates:
        match = EXCEPTION_LINE.match(line.strip()) if not line.startswith((" ", "\t")) else None
        if match:
            found = match
    if found is None:
        return None
    name, message = found.group(1), (found.group(2) or "").strip()
    return ADDRESS.sub("0x…", f"{name}: {message}" if message else name)


def from_result_file(data: dict) -> Classified | None:
    """A probe's own verdict (offlint replay, the lint/validate child): {"outcome", "signature", ...}."""
    try:
        outcome = Outcome(data["outcome"])
    except (KeyError, ValueError, TypeError):
        return None
    return Classified(outcome, data.get("signature"), list(data.get("rules") or []), str(data.get("detail") or ""),
                      data.get("peak_allocated_bytes"), data.get("loss"))


def read_result_file(path: Path | None) -> dict | None:
    if path is None:
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def classify(result: StepResult, result_file: Path | None = None, rule_errors=None,
             exit_codes: dict[int, Outcome] | None = None) -> Classified:
    """The outcome of one step.

    `result_file`: the probe's JSON verdict, preferred when readable. `exit_codes`: a probe's own exit code
    meanings (offlint replay's). `rule_errors(signature) -> rule codes` maps crash messages onto offlint rules.
    """
    scheduled = scheduler_outcome(result)  # a Slurm state that decides by itself (NODE_FAIL, OUT_OF_MEMORY, ...)
    if scheduled is not None:
        return Classified(scheduled, result.scheduler_state,
                          detail=f"Slurm job {result.job_id} ended {result.scheduler_state}")
    if result.timed_out:
        return Classified(Outcome.TIMEOUT, None, detail=f"killed after the {result.step.timeout_s:g} s timeout")
    if result.exit_code is None and result.signal is None:
        return Classified(Outcome.BUILD_FAILURE, None, detail=result.scheduler_state or "the step did not run")
    data = read_result_file(result_file)
    verdict = from_result_file(data) if data else None
    if verdict is not None:
        return _with_rules(verdict, rule_errors)
    log = read_tail(result.step.log)
    verdict = _from_status(result, log, exit_codes or {})
    return _with_rules(verdict, rule_errors)


def _from_status(result: StepResult, log: str, exit_codes: dict[int, Outcome]) -> Classified:
    sig, code = result.signal, result.exit_code
    if sig == signal.SIGKILL or code == 128 + signal.SIGKILL:
        return Classified(Outcome.HOST_OOM_KILL, "SIGKILL", detail="killed by SIGKILL (the kernel's OOM killer?)")
    if sig in SEGFAULT_SIGNALS or (code is not None and code - 128 in SEGFAULT_SIGNALS):
        number = sig if sig is not None else code - 128
        name = signal.Signals(number).name
        return Classified(Outcome.SEGFAULT, name, detail=f"ended by {name}")
    if sig is not None:
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        return Classified(Outcome.ABORTED, name, detail=f"ended by {name}")
    if code == 0:
        return Classified(Outcome.PASS, detail="exit code 0")
    signature = exception_signature(log)
    if code in exit_codes:
        return Classified(exit_codes[code], signature, detail=f"exit code {code}")
    if CUDA_OOM.search(log):
        return Classified(Outcome.CUDA_OOM, signature, detail="CUDA out of memory in the log")
    if NCCL.search(log):
        return Classified(Outcome.NCCL_ERROR, signature, detail="NCCL error in the log")
    if signature and signature.startswith("MemoryError"):
        return Classified(Outcome.HOST_OOM_KILL, signature, detail="MemoryError: host memory exhausted")
    if signature and IMPORT_FAILURE.match(signature):
        return Classified(Outcome.BUILD_FAILURE, signature, detail="cannot import at this commit")
    if code == SKIP_EXIT_CODE:
        return Classified(Outcome.BUILD_FAILURE, signature, detail="exit code 125: cannot test this commit")
    return Classified(Outcome.CRASH, signature or f"exit code {code}", detail=f"exit code {code}")


def _with_rules(verdict: Classified, rule_errors) -> Classified:
    if verdict.outcome is Outcome.CRASH and verdict.signature and rule_errors and not verdict.rules:
        verdict.rules = sorted(rule_errors(verdict.signature))
    return verdict
