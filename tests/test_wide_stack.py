"""workers.on_wide_stack: a check's calls kept in one chunk of CPython's frame stack, so that a recursion going up
and down across a chunk's start does not map and unmap a chunk each time (python/cpython#142183; 65,000 mmap/munmap
pairs in a cold check of Megatron Bridge on Python 3.11)."""

from __future__ import annotations

import sys

import pytest

from offlint import api, workers


def _down(depth: int) -> int:
    return _down(depth - 1) + 1 if depth else 0


def _up_and_down(times: int) -> int:
    """Calls whose depth swings between 20 and 420 frames: whatever the depth it starts at, each swing crosses the
    start of a 16 KiB chunk of the frame stack."""
    total = 0
    for i in range(times):
        total += _down(420 if i % 2 else 20)
    return total


def _minor_faults(function, *args) -> int:
    resource = pytest.importorskip("resource")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    function(*args)
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts the page faults Linux reports")
def test_a_recursion_crossing_a_chunk_start_faults_no_pages_in_on_the_wide_stack():
    on_wide = _minor_faults(workers.on_wide_stack, _up_and_down, 4000)
    # Without it, CPython 3.11 maps a new chunk on (at least) every second swing and faults its first page in:
    # 2,000 faults or more; with it, the frames live in pages touched on the first swing.
    assert on_wide < 500, on_wide


def test_its_value_and_its_exceptions_are_the_functions():
    assert workers.on_wide_stack(lambda a, b: a + b, 2, 3) == 5
    with pytest.raises(KeyError, match="x"):
        workers.on_wide_stack({}.__getitem__, "x")
    assert workers.on_wide_stack(_down, 900) == 900  # a recursion near the interpreter's limit still runs


def test_the_check_runs_on_it(tmp_path, monkeypatch):
    """api.check reads the tree on the wide stack (and forked workers inherit it from there)."""
    from offlint.api import CheckOptions, check

    seen = []
    real = api.on_wide_stack
    monkeypatch.setattr(api, "on_wide_stack", lambda function, *args: seen.append(function) or
                        real(function, *args))
    (tmp_path / "run.sh").write_text("echo hi\n")
    check([str(tmp_path)], CheckOptions(root=tmp_path, cache=False))
    assert [f.__name__ for f in seen] == ["_check"]
