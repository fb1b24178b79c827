"""Kill a bisect's probe process groups when the bisect itself dies, even by SIGKILL.

    python -I offlint/bisect/watchdog.py      (started by LocalRunner; reads its stdin)

Each probe runs in its own process group, so a timeout, Ctrl-C or SIGTERM kills the whole tree a probe
started. A SIGKILL of the bisect runs no cleanup at all, and PR_SET_PDEATHSIG would only reach a probe's
first process, not the children it started. So the runner starts this small process once, in a session of
its own, and tells it on a pipe which groups are running ("+PGID START" and "-PGID" lines). When the pipe
reaches end-of-file, the bisect has exited (normally or not): every group still listed gets SIGTERM, then
SIGKILL after a short grace period. Stdlib only, so it starts in a few milliseconds with `python -I`.

The helpers below are also used to recover what a dead run left (offlint/bisect/state.py): a group is killed
only when its leader is gone or is still the very process that was recorded (same start time), never a
process that merely reused the number.
"""

from __future__ import annotations

import os
import signal
import sys
import time

GRACE_S = 2.0


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (Linux /proc), or None when it is not running."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[19]) if len(fields) > 19 and fields[0] != b"Z" else None


def boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as handle:
            return handle.read().strip()
    except OSError:
        return ""


def have_proc() -> bool:
    return os.path.exists("/proc/self/stat")


def is_ours(pgid: int, started: int | None, unverified: bool = False) -> bool:
    """Whether killing group `pgid` can only hit the probe that was recorded with leader start time `started`.

    A live leader must be the same process (same start time). A gone leader is fine: Linux does not hand out
    a number again while a process group of that number still has members, so killpg then reaches only our
    leftover members, or nothing. Without /proc nothing can be verified: `unverified` decides.
    """
    if not have_proc():
        return unverified
    now = start_time(pgid)
    return now is None or (started is not None and now == started)


def group_alive(pgid: int) -> bool:
    """Whether group `pgid` has a member that is not a zombie (a zombie only waits for its parent to reap it)."""
    if not have_proc():
        try:
            os.killpg(pgid, 0)
            return True
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
    with os.scandir("/proc") as entries:  # (closed on the early return: an open directory per call otherwise)
        for entry in entries:
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as handle:
                    fields = handle.read().rsplit(b")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if len(fields) > 2 and fields[2] == str(pgid).encode() and fields[0] != b"Z":
                return True
    return False


def kill_groups(groups: dict[int, int | None], grace_s: float = GRACE_S, unverified: bool = False) -> list[int]:
    """SIGTERM every live group that `is_ours`, SIGKILL what is left after `grace_s`; the groups signalled."""
    targets = [pgid for pgid, started in groups.items() if is_ours(pgid, started, unverified) and group_alive(pgid)]
    for pgid in targets:
        _signal(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while any(group_alive(p) for p in targets) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pgid in targets:
        _signal(pgid, signal.SIGKILL)
    return targets


def _signal(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


TOKEN_VARIABLE = "OFFLINT_BISECT_PROBE"  # in every probe's environment: this run's random token


def carrying_token(token: str) -> list[int]:
    """The processes whose environment holds this run's token: a probe and everything it started (inherited),
    including one the bisect had no time to announce before it died. Linux /proc; empty elsewhere."""
    if not token or not have_proc():
        return []
    marker = f"{TOKEN_VARIABLE}={token}".encode()
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as handle:
                if marker in handle.read().split(b"\0"):
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


def kill_token_holders(token: str, grace_s: float = GRACE_S) -> None:
    """SIGTERM every process carrying the token, SIGKILL what is left after `grace_s`."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        holders = carrying_token(token)
        for pid in holders:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + (grace_s if sig == signal.SIGTERM else 0)
        while holders and carrying_token(token) and time.monotonic() < deadline:
            time.sleep(0.05)


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # only the end of the pipe ends the watch
    token = sys.argv[1] if len(sys.argv) > 1 else ""
    groups: dict[int, int | None] = {}
    for line in sys.stdin.buffer:
        parts = line.split()
        if len(parts) == 2 and parts[0].startswith(b"+"):
            groups[int(parts[0][1:])] = None if parts[1] == b"-" else int(parts[1])
        elif len(parts) == 1 and parts[0].startswith(b"-"):
            groups.pop(int(parts[0][1:]), None)
    if groups:  # the bisect told us these were running: kill them even where /proc cannot confirm it
        kill_groups(groups, unverified=True)
    # A probe started just before the bisect died may not have been announced yet: its environment names it.
    kill_token_holders(token)
    return 0


if __name__ == "__main__":
    sys.exit(main())
