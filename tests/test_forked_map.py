"""The launch commands' rules, shared with a forked child once linking is done (workers.forked_map): the answers
are those one process gives, in the same order; the parent's come from the front and the child's from the back, the
child's really from another process; a child that fails is made up for in the parent; a small list, or a run of
one worker, forks nothing."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import threading
import time

import pytest

from offlint import api, workers
from offlint.api import CheckOptions, check
from tests.check_helpers import write_tree

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="forked_map forks")


def _pid_and_square(item: int) -> tuple[int, int]:
    return os.getpid(), item * item


def _slow_pid_and_square(item: int) -> tuple[int, int]:
    time.sleep(0.005)  # (long enough for the forked child to start while the parent works through its first items)
    return os.getpid(), item * item


def test_answers_in_order_the_front_here_the_back_from_a_child():
    items = list(range(workers.MIN_FORKED_ITEMS + 9))
    answers = workers.forked_map(_slow_pid_and_square, items, workers=2)
    assert [square for _, square in answers] == [i * i for i in items]
    pids = [pid for pid, _ in answers]
    here = pids.count(os.getpid())
    assert pids[:here] == [os.getpid()] * here and here >= 1  # a run from the front...
    children = set(pids[here:])
    assert len(children) == 1 and os.getpid() not in children  # ...and the rest, from the back, by one child


def test_the_child_takes_more_where_the_parent_is_slower():
    parent = os.getpid()

    def slow_here(item: int) -> int:
        time.sleep(0.02 if os.getpid() == parent else 0.002)
        return os.getpid()

    pids = workers.forked_map(slow_here, list(range(workers.MIN_FORKED_ITEMS * 2)), workers=2)
    assert pids.count(parent) < len(pids) // 2  # (fixed halves would have given the parent half)


@pytest.mark.parametrize("count, processes", [(workers.MIN_FORKED_ITEMS - 1, 2), (workers.MIN_FORKED_ITEMS * 2, 1)])
def test_forks_nothing_for_few_items_or_one_worker(count, processes):
    answers = workers.forked_map(_pid_and_square, list(range(count)), workers=processes)
    assert {pid for pid, _ in answers} == {os.getpid()}
    assert [square for _, square in answers] == [i * i for i in range(count)]


def test_a_child_that_fails_is_made_up_for_here():
    parent = os.getpid()

    def only_here(item: int) -> int:
        if os.getpid() != parent:
            raise RuntimeError("the child stops")
        return item + 1

    items = list(range(workers.MIN_FORKED_ITEMS * 2))
    assert workers.forked_map(only_here, items, workers=2) == [i + 1 for i in items]


def test_a_child_that_exits_without_answering_is_made_up_for_here():
    parent = os.getpid()

    def leaves(item: int) -> int:
        if os.getpid() != parent:
            os._exit(0)  # (a child killed after an empty write: status 0, nothing to unpickle)
        return -item

    items = list(range(workers.MIN_FORKED_ITEMS * 2))
    assert workers.forked_map(leaves, items, workers=2) == [-i for i in items]


LAUNCH = """#!/bin/bash
torchrun --nproc_per_node=8 pretrain_gpt.py --tensor-model-parallel-size 2 --pipeline-model-parallel-size {pp} \\
    --num-layers 8 --hidden-size 1024 --num-attention-heads 16 --micro-batch-size 1 --global-batch-size 64 \\
    --seq-length 2048 --max-position-embeddings 2048 --bf16 --optimizer-cpu-offload
"""

def _launches(root, monkeypatch) -> int:
    """A tree of MIN_FORKED_ITEMS + 8 launch scripts, the current folder (enough files to fork workers, launches to
    fork a child); how many."""
    count = workers.MIN_FORKED_ITEMS + 8
    write_tree(root, {f"launch{n:02d}.sh": LAUNCH.format(pp=1 + n % 3) for n in range(count)})
    monkeypatch.chdir(root)
    return count


def _two_workers() -> tuple[list, list]:
    """The findings and errors of a check of the current folder with two workers."""
    result = check(["."], CheckOptions(cache=False, mcore_version="0.16.1", workers=2))
    return [(f.location, f.code, f.message) for f in result.findings], result.errors


def test_a_check_splits_its_launches_and_finds_what_one_process_finds(tmp_path, monkeypatch):
    count = _launches(tmp_path, monkeypatch)
    seen = tmp_path.parent / f"{tmp_path.name}-pids"
    checked = api._check_launch

    def noted(unit, *args):
        with open(seen, "a") as out:  # (one short write per launch, from whichever process checks it)
            out.write(f"{os.getpid()}\n")
        return checked(unit, *args)

    monkeypatch.setattr(api, "_check_launch", noted)

    def run(workers: int):
        seen.write_text("")
        result = check(["."], CheckOptions(cache=False, mcore_version="0.16.1", workers=workers))
        return [(f.location, f.code, f.message) for f in result.findings], seen.read_text().split()

    alone, alone_pids = run(1)
    split, split_pids = run(2)
    assert split == alone
    assert {f[1] for f in alone} >= {"OFL115", "OFL218"}
    assert len(alone_pids) == len(split_pids) == count
    assert set(alone_pids) == {str(os.getpid())}
    assert len(set(split_pids)) == 2 and str(os.getpid()) in split_pids



def test_the_ends_meet_once_each_index_was_taken():
    ends = workers._Ends(5, multiprocessing.get_context("fork"))
    taken = [ends.take(from_back=True), ends.take(from_back=False), ends.take(from_back=True),
             ends.take(from_back=False), ends.take(from_back=False)]
    assert taken == [4, 0, 3, 1, 2]
    assert ends.take(from_back=False) is None and ends.take(from_back=True) is None


def test_a_lock_held_too_long_stops_the_taking(monkeypatch):
    """A process killed while it held the lock leaves it held: the other stops taking after LOCK_PATIENCE (the parent
    then works out what is left) instead of waiting for ever."""
    monkeypatch.setattr(workers, "LOCK_PATIENCE", 0.1)
    ends = workers._Ends(8, multiprocessing.get_context("fork"))
    ends.lock.acquire()  # (as a process that died holding it left it)
    started = time.monotonic()
    assert ends.take(from_back=False) is None
    assert time.monotonic() - started < 5


def test_the_child_is_forked_with_no_thread_the_check_started(tmp_path, monkeypatch):
    """The pool's thread that joins its workers is done before forked_map forks (Aside.settle): fork() in a process
    with another thread may leave a lock that thread held locked in the child (Python 3.12 warns of it)."""
    _launches(tmp_path, monkeypatch)
    before = set(threading.enumerate())  # (pytest's own, and xdist's)
    at_fork: list[set] = []  # the threads the check started, alive at each fork (os.fork: multiprocessing's too)
    real_fork = os.fork

    def fork():
        at_fork.append(set(threading.enumerate()) - before)
        return real_fork()

    monkeypatch.setattr(workers.os, "fork", fork)
    check(["."], CheckOptions(cache=False, mcore_version="0.16.1", workers=2))
    assert at_fork == [set(), set(), set()]  # (the pool's two workers, then forked_map's child)




def test_without_posix_semaphores_the_check_runs_in_one_process(tmp_path, monkeypatch):
    """A container without /dev/shm has no POSIX semaphores (multiprocessing's locks raise OSError): the files are
    read and the launches checked in this process, with the findings a run with workers gives. It had ended the
    check with an internal error (exit 2) for any tree of 16 files or more."""
    import multiprocessing.synchronize

    _launches(tmp_path, monkeypatch)
    with_workers = _two_workers()

    def no_semaphores(self, *args, **kwargs):
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(multiprocessing.synchronize.SemLock, "__init__", no_semaphores)
    forks: list[int] = []
    real_fork = os.fork
    monkeypatch.setattr(workers.os, "fork", lambda: forks.append(1) or real_fork())
    assert _two_workers() == with_workers and with_workers[0] and not with_workers[1]
    assert forks == []  # (neither the pool's workers nor forked_map's child)


REFUSED_FORKS = """
import json, multiprocessing, os, sys
from offlint.api import CheckOptions, check

real_fork, calls = os.fork, []


def limited_fork():
    calls.append(1)
    if len(calls) > int(sys.argv[1]):
        raise BlockingIOError(11, "Resource temporarily unavailable")
    return real_fork()


os.fork = limited_fork
result = check(["."], CheckOptions(cache=False, mcore_version="0.16.1", workers=2))
print(json.dumps([[f.location.path, f.location.line, f.code, f.message] for f in result.findings]))
print(len(result.errors), len(multiprocessing.active_children()))
"""


@pytest.mark.parametrize("forks_allowed", [0, 1])
def test_a_fork_refused_leaves_the_reading_to_this_process(tmp_path, monkeypatch, forks_allowed):
    """fork() refused (a process limit; memory the copy would need) for the pool's first worker, or its second: the
    files are read here, a worker forked already is ended, and the findings are those of a run with workers. It had
    ended the check with an internal error, or, with one worker forked, waited for ever (run in a process of its
    own, with a timeout: a hang fails the test)."""
    _launches(tmp_path, monkeypatch)
    result = check(["."], CheckOptions(cache=False, mcore_version="0.16.1", workers=2))
    with_workers = [[f.location.path, f.location.line, f.code, f.message] for f in result.findings]
    assert with_workers and not result.errors
    run = subprocess.run([sys.executable, "-c", REFUSED_FORKS, str(forks_allowed)], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    findings, counts = run.stdout.splitlines()
    assert json.loads(findings) == with_workers
    assert counts == "0 0"  # (no error; no worker left running)



_REAL_TAKE = workers._worker_take
_PARENT: list[int] = []
_TAKES: list[int] = []  # (each worker's own list: forked with it)


def _killed_at_its_second_take():
    """workers._worker_take in a worker the OOM killer ends at its second take (at module level: the pool sends
    the function by name)."""
    _TAKES.append(1)
    if os.getpid() not in _PARENT and len(_TAKES) == 2:
        os._exit(9)
    return _REAL_TAKE()


def test_a_worker_ended_abruptly_leaves_its_files_to_this_process(tmp_path, monkeypatch):
    """A worker killed mid-check (the OOM killer on a small CI runner): the files no worker sent are read here, and
    the findings are those of a run whose workers lived. The check had ended with an internal error
    (BrokenProcessPool, "please report it")."""
    _launches(tmp_path, monkeypatch)

    lived = _two_workers()
    _PARENT[:] = [os.getpid()]
    _TAKES.clear()
    monkeypatch.setattr(workers, "_worker_take", _killed_at_its_second_take)
    assert _two_workers() == lived and lived[0] and not lived[1]
