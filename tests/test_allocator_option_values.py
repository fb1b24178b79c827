"""OFL301 on an `expandable_segments` value PyTorch refuses: its allocator's option parser takes `True` or `False`
and nothing else, and stops the job when CUDA first allocates. A recall study's `expandable_segments:true` had been
reported as fragmentation advice, at info. The values are checked against the installed torch's own parser."""

from __future__ import annotations

import pytest

from offlint.api import CheckOptions, check

LAUNCH = ("#!/bin/bash\nexport PYTORCH_CUDA_ALLOC_CONF={value}\n"
          "torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 8 --hidden-size 1024 --num-attention-heads 16 "
          "--train-iters 10\n")


def _refused_by_torch(value: str) -> bool:
    torch = pytest.importorskip("torch")
    setter = getattr(torch._C, "_accelerator_setAllocatorSettings", None)
    if setter is None:
        pytest.skip("this torch has no allocator-settings parser to ask")
    try:
        setter(value)
    except (ValueError, RuntimeError):
        return True
    return False


@pytest.mark.parametrize("value, refused", [
    ("expandable_segments:true", True),
    ("expandable_segments:1", True),
    ("max_split_size_mb:256,expandable_segments:TRUE", True),
    ("expandable_segments:True", False),
    ("expandable_segments:False", False),
])
def test_a_value_pytorch_refuses_is_an_error(tmp_path, value, refused):
    assert _refused_by_torch(value) == refused
    (tmp_path / "run.sh").write_text(LAUNCH.format(value=value))
    findings = check([str(tmp_path)], CheckOptions(root=tmp_path, cache=False, select=["OFL301"])).findings
    errors = [f for f in findings if f.severity.value == "error"]
    assert bool(errors) == refused, findings
    if refused:
        assert "which PyTorch refuses" in errors[0].message and len(findings) == 1


def test_options_offlint_cannot_read_are_never_called_refused(tmp_path):
    """Not even as possible under --strict: every launch with an open environment would be (268 on Megatron-LM)."""
    (tmp_path / "run.sh").write_text(LAUNCH.format(value="$ALLOC_OPTIONS"))
    findings = check([str(tmp_path)], CheckOptions(root=tmp_path, cache=False, select=["OFL301"], strict=True)).findings
    assert not any("PyTorch refuses" in f.message for f in findings), findings


@pytest.mark.parametrize("value, advised", [
    ('"max_split_size_mb:256, expandable_segments: True"', False),
    ('"expandable_segments : True"', False),
    ('"expandable_segments:True,expandable_segments:False"', True),  # the last entry decides
    ('"max_split_size_mb:256,expandable_segments:False"', True),
])
def test_blanks_around_an_entry_still_turn_expandable_segments_on(tmp_path, value, advised):
    """PyTorch's option tokenizer ignores blanks (c10's ConfigTokenizer; the CUDA allocator's lexArgs before it), so
    `expandable_segments: True` turns the option on: no advice to add it (an info finding had said it was missing)."""
    assert not _refused_by_torch(value.strip('"'))
    (tmp_path / "run.sh").write_text(LAUNCH.format(value=value))
    findings = check([str(tmp_path)], CheckOptions(root=tmp_path, cache=False, select=["OFL301"])).findings
    assert bool(findings) == advised, findings
    assert not any(f.severity.value == "error" for f in findings)
