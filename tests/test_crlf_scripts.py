"""OFL009: a launch script with CRLF line endings. bash keeps each carriage return, so a `\\` ending a line escapes it
instead of the newline and the command stops there (a Megatron-LM fork checked out with CRLF, a helper's sweep: 26
findings about flags its launches never get, and not a word of the real problem). Each launch of such a file is
reported at its line; the rest of what offlint reads is the run the file gives once converted."""

from __future__ import annotations

import subprocess

from offlint.api import CheckOptions, check

LAUNCH = "#!/bin/bash\ntorchrun --nproc-per-node 8 pretrain_gpt.py \\\n    --num-layers 8 --train-iters 10\n" \
         "python pretrain_gpt.py --num-layers 8\n"


def _found(tmp_path, text: str, name: str = "run.sh") -> list[tuple[int, str]]:
    (tmp_path / name).write_bytes(text.encode())
    options = CheckOptions(mcore_version="0.20.0", root=tmp_path, cache=False, select=["OFL009"])
    return [(f.location.line, f.message) for f in check([str(tmp_path)], options).findings]


def test_each_launch_of_a_crlf_script_is_reported(tmp_path):
    found = _found(tmp_path, LAUNCH.replace("\n", "\r\n"))
    assert [line for line, _ in found] == [2, 4]
    assert found[0][1].startswith("this script has CRLF line endings (line 1 is the first to end in a carriage "
                                  "return): bash keeps each `\\r`, so a `\\` ending a line does not continue the "
                                  "command")


def test_bash_reads_such_a_script_as_the_rule_says(tmp_path):
    """The claim itself, on this machine's bash: the line after `\\` CRLF is a command of its own."""
    script = "printf '<%s>' a \\\r\n    b\r\n"
    (tmp_path / "t.sh").write_bytes(script.encode())
    done = subprocess.run(["bash", str(tmp_path / "t.sh")], capture_output=True)
    assert done.stdout == b"<a><\r>" and b"b" in done.stderr  # (`b\r`: command not found)


def test_lf_scripts_and_a_lone_carriage_return_are_not(tmp_path):
    assert _found(tmp_path, LAUNCH) == []
    assert _found(tmp_path, LAUNCH.replace("--num-layers 8\n", "--num-layers 8 # \r note\n")) == []
