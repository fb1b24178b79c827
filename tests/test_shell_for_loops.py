"""`for` loops over words offlint can read are unrolled, and `read -r A B <<< "$X"` splits a here-string: launch
scripts sweep parallelism settings so (Megatron Bridge's examples loop over "EP,TP,PP,CP" strings and split each),
and with the loop variable unknown every launch in the sweep had its sizes unknown. A finding of some passes says
which; one of every pass is reported once, as a launch outside a loop would be."""

from __future__ import annotations

import shutil
import subprocess
from textwrap import dedent

import pytest

from offlint import loop_passes
from offlint.api import CheckOptions, check
from offlint.sources.shell_parse import parse_shell
from offlint.sources.shell_walker import MAX_PASSES
from offlint.sources.shell_words import TooManyWords, brace_expand

LAUNCH = ("torchrun --nproc_per_node=8 /opt/Megatron-LM/pretrain_gpt.py --num-layers 4 --hidden-size 256 "
          "--num-attention-heads 8 --seq-length 128 --max-position-embeddings 128 --micro-batch-size 1 "
          "--global-batch-size 8 --cpu-offloading")


def _values(text: str, name: str = "python") -> list[list]:
    result = parse_shell(dedent(text))
    assert result.errors == [], result.errors
    return [[w.value for w in c.argv[1:]] for c in result.commands if c.argv[0].value == name]


def _findings(tmp_path, monkeypatch, script: str) -> list:
    (tmp_path / "sweep.sh").write_text(dedent(script))
    monkeypatch.chdir(tmp_path)
    result = check(["sweep.sh"], CheckOptions(mcore_version="0.20.0", root=tmp_path, cache=False))
    assert not result.errors, result.errors
    return result.findings


def test_a_sweep_over_an_array_split_by_read():
    assert _values("""\
        CONFIGS=("2,1" "4,2")
        for c in "${CONFIGS[@]}"; do
          IFS=',' read -r TP PP <<< "$c"
          python train.py --tp "$TP" --pp "$PP"
        done
        """) == [["train.py", "--tp", "2", "--pp", "1"], ["train.py", "--tp", "4", "--pp", "2"]]


def test_nested_loops_run_every_combination_in_order():
    assert _values("""\
        for tp in 1 2; do
          for mbs in 4 8; do python train.py $tp $mbs; done
        done
        """) == [["train.py", "1", "4"], ["train.py", "1", "8"], ["train.py", "2", "4"], ["train.py", "2", "8"]]


@pytest.mark.parametrize("loop", ["for tp in 1 $UNKNOWN; do", "for tp in $(ls configs); do", "for tp; do",
                                  "for tp in ${SIZES:-1 2}; do",
                                  "for tp in 1 2; do [ $tp = 2 ] && continue;", "for tp in 1 2; do break;"])
def test_a_loop_it_cannot_unroll_is_read_once_with_its_variable_unknown(loop):
    found = _values(f"{loop}\n python train.py $tp\ndone\n")
    assert found == [["train.py", None]]


def test_a_loop_over_seq_is_unrolled():
    # (a sweep written `for tp in $(seq 1 4)`: `seq` prints known integers)
    assert _values("for tp in $(seq 2 2 6); do\n python train.py $tp\ndone\n") == [
        ["train.py", "2"], ["train.py", "4"], ["train.py", "6"]]


def test_loops_unrolled_together_stay_bounded():
    side = MAX_PASSES // 4 + 1  # the outer loop is unrolled; inside it, the inner one would pass MAX_PASSES
    words = " ".join(str(k) for k in range(side))
    found = _values(f"for a in {words}; do\n for b in {words}; do python t.py $a $b; done\ndone\n")
    assert len(found) == side and all(row[1] is not None and row[2] is None for row in found)


@pytest.mark.parametrize(("line", "expected"), [
    ('IFS=, read -r A B <<< "1,2"', ["1", "2"]),
    ('IFS=, read -r A B C <<< "1,2"', ["1", "2", ""]),  # (too few fields: the rest are empty)
    ('read -r A B <<< "  1   2 "', ["1", "2"]),  # (blanks: runs trimmed)
    ('IFS=, read -r A B <<< "1,2,3"', [None, None]),  # (bash gives B "2,3": not read)
    ('IFS=, read A B <<< "1,2"', [None, None]),  # (no -r: backslashes would be escapes)
    ('IFS=", " read -r A B <<< "1, 2"', [None, None]),  # (blanks and other separators mixed)
    ('IFS=, read -r -a A B <<< "1,2"', [None, None]),
])
def test_a_here_string_read(line, expected):
    names = ["A", "B", "C"] if " C " in line else ["A", "B"]
    found = _values(line + "\npython t.py " + " ".join(f'"${name}"' for name in names) + "\n")
    assert found == [["t.py", *expected]]


@pytest.mark.parametrize(("line", "expected"), [
    ('read -ra A <<< "--bf16 --use-distributed-optimizer"', ["--bf16", "--use-distributed-optimizer"]),
    ('IFS=, read -r -a A <<< "a,b,"', ["a", "b"]),  # (bash drops an empty last field)
    ('IFS=, read -ar A <<< ",a,,b"', ["", "a", "", "b"]),
    ('read -a A <<< "a b"', [None]),  # (no -r: backslashes would be escapes)
    ('read -ra A <<< "$UNSET"', [None]),
])
def test_a_here_string_read_into_an_array(line, expected):
    """`read -ra ARGS <<< "$FLAGS"`: round 5 of the recall study split a launch's flags so, and they had been left
    unknown (no finding, even with --strict)."""
    assert _values(line + '\npython t.py "${A[@]}"\n') == [["t.py", *expected]]


def test_a_finding_of_one_pass_names_it_and_one_of_every_pass_is_reported_once(tmp_path, monkeypatch):
    found = _findings(tmp_path, monkeypatch, f"""\
        for n in 2 4; do
          {LAUNCH} --cpu-offloading-num-layers $n
        done
        """)
    by_code = {f.code: f for f in found}
    assert sorted(f.code for f in found) == ["OFL101", "OFL301"]  # (OFL301 holds in both passes: once)
    assert by_code["OFL101"].message.endswith("(only in the passes where `for n in 2 4` (sweep.sh:1) takes '4')")
    assert "passes" not in by_code["OFL301"].message and by_code["OFL301"].passes == ()


def test_taken_says_which_passes():
    loop_a, loop_b = "`for a in 1 2 3` (x.sh:1)", "`for b in x y` (x.sh:2)"
    a = [(loop_a, "a", w, ("1", "2", "3")) for w in "123"]
    b = [(loop_b, "b", w, ("x", "y")) for w in "xy"]
    every = [(p, q) for p in a for q in b]
    assert loop_passes.taken(every) == ""
    assert loop_passes.taken([(p, q) for p in a[1:] for q in b]) == \
        f"only in the passes where {loop_a} takes '2' or '3'"
    assert loop_passes.taken([(a[0], b[1])]) == f"only in the passes where {loop_a} takes '1' and {loop_b} takes 'y'"
    assert loop_passes.taken([(a[0], b[0]), (a[1], b[1])]) == (
        f"only in the passes where {loop_a} takes '1' and {loop_b} takes 'x'; or where {loop_a} takes '2' and "
        f"{loop_b} takes 'y'")
    assert loop_passes.taken([(a[0], b[0]), ()]) == ""  # (one finding outside any loop)


def test_each_pass_is_a_unit_of_its_own_name_and_findings_name_the_launch(tmp_path, monkeypatch):
    """`offlint estimate --recipe` chooses a pass by its name; a finding names the launch (the passes it holds in
    are in its message), so its passes are no units it is shared with."""
    from offlint.sources.shell import read_shell

    script = f"for n in 2 4; do\n  {LAUNCH} --cpu-offloading-num-layers $n\ndone\n"
    assert [u.name for u in read_shell("sweep.sh", script)] == [
        "pretrain_gpt.py at line 2 [n=2]", "pretrain_gpt.py at line 2 [n=4]"]
    found = _findings(tmp_path, monkeypatch, script)
    assert {(f.unit, f.shared_with) for f in found} == {("pretrain_gpt.py at line 2", ())}


def test_a_loop_whose_passes_would_read_too_much_again_is_read_once(monkeypatch):
    """UNROLL_BUDGET: a 32-word loop around a long body, or around a call of a long function of the script (both
    judged from their text), is read once with its variable unknown; so is one whose first pass read too much (a
    function called through a variable: judged from what that pass read, then undone)."""
    from offlint.sources import shell_commands
    from offlint.sources.shell_values import UNROLL_BUDGET

    words = " ".join(str(k) for k in range(32))
    lines = "".join(f"  echo {k}\n" for k in range(UNROLL_BUDGET // 31 + 1))
    assert _values(f"for tp in {words}; do\n{lines}  python t.py $tp\ndone\n") == [["t.py", None]]
    called = f"big() {{\n{lines}}}\nfor tp in {words}; do big; python t.py $tp; done\n"
    through = f"big() {{\n{lines}}}\nF=big\nfor tp in {words}; do $F; python t.py $tp; done\n"
    for script in (called, through):
        assert _values(script) == [["t.py", None]]
        assert len(_values(script, "echo")) == UNROLL_BUDGET // 31 + 1  # (the body read once)
    # The function's body is not read for a first pass it is then undone: each of its commands read once (a
    # 1.9 MiB function in a 32-word loop had been read twice, 8.8 s)
    read: list = []
    command = shell_commands.Commands.command
    monkeypatch.setattr(shell_commands.Commands, "command",
                        lambda self, *a, **k: read.append(1) or command(self, *a, **k))
    _values(called, "echo")
    assert len(read) == UNROLL_BUDGET // 31 + 1 + 2  # the echoes, `big` and the python command
    read.clear()
    _values(through, "echo")
    assert len(read) > 2 * (UNROLL_BUDGET // 31)  # (a call the text does not show: its first pass read, then undone)
    small = "".join(f"  echo {k}\n" for k in range(UNROLL_BUDGET // 31 - 2))
    assert len(_values(f"for tp in {words}; do\n{small}  python t.py $tp\ndone\n")) == 32


def test_a_loop_over_a_brace_sequence_is_unrolled():
    """`for bs in {1..3}` (a helper's third-party sweep): bash expands the braces before the loop runs; offlint had
    kept `{1..3}` as one word, and a Hydra override built from it (`train.micro_batch_size={1..3}`) made the whole
    script an error (Hydra cannot parse it)."""
    assert _values("for bs in {1..3} x{a,b}; do\n python train.py train.micro_batch_size=$bs\ndone\n") == [
        ["train.py", f"train.micro_batch_size={v}"] for v in ("1", "2", "3", "xa", "xb")]


def test_brace_expansion_in_arguments_and_not_in_assignments():
    """An argument's braces make several words, around its other text; an assignment's value is not expanded (bash
    expands braces in words, not in `NAME=value`); quoted braces are text; past BRACE_WORDS_MAX the word is
    unknown."""
    script = 'A={1..3}\npython train.py key={1,2} $A "{1,2}" {a} {} -{00..2} {1..100000}\n'
    assert _values(script) == [["train.py", "key=1", "key=2", "{1..3}", "{1,2}", "{a}", "{}", "-00", "-01", "-02",
                                None]]


BRACE_WORDS = ["x{a,b}y", "{1..5..2}", "{05..10..3}", "{-05..3..4}", "{3..1}", "{a..e..2}", "{e..a}", "{X..Z}",
               "{a}", "{}", "{x,{y,z}}", "a{1..3}{x,y}", "{1,}", "x{,a}", "{,}", "{a..3}", "{1..2..0}", "{a,b",
               "{1..3}{", "a{b}{1,2}", "{a,b}}", "}{a,b}", "{{a,b},c}d", "pre{1..2}mid{x,y}post", "{1..10..-3}",
               "{{a,b}", "{a,{b}", "{a{b,c}", "a{,{b,c}}", "{a}{b,c}"]


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_brace_expansion_makes_the_words_bash_makes():
    """shell_words.brace_expand against bash itself, word by word (a loop over the word prints each word bash made,
    and nothing where it made none)."""
    for text in BRACE_WORDS:
        printed = subprocess.run(["bash", "-c", f"for w in {text}; do printf '%s\\n' \"$w\"; done"],
                                 capture_output=True, text=True, check=True)
        expected = printed.stdout.splitlines()
        words = brace_expand(text)
        assert (words if words is not None else [text]) == expected, text


def test_a_brace_expansion_too_large_or_too_deep_is_refused_at_once():
    """Past 16 braces in a word, or 256 commas, a word with an expansion's marks is unknown before anything is
    scanned (hostile input: each group is scanned again per level); one without them stays text."""
    for text in ("{1..100000}", "{a,b}" * 9, "{a," * 100 + "b" + "}" * 100, "{" * 3000 + "a,b" + "}" * 3000,
                 "{" + "a," * 300 + "}", "{1..2}" * 17):
        with pytest.raises(TooManyWords):
            brace_expand(text)
    assert brace_expand("{a}" * 2000) is None
    assert brace_expand("{" * 16 + "a,b" + "}" * 16) == ["{" * 15 + w + "}" * 15 for w in "ab"]


def test_brace_expansion_makes_a_bounded_number_of_words_per_script():
    """Past BRACE_BUDGET words in one script, a word that may expand is unknown, without expanding it: a 2 MB
    script of words of 16 nested groups took a third longer to read than before brace expansion."""
    from offlint.sources.shell_values import BRACE_BUDGET

    lines = BRACE_BUDGET // 200 + 1
    result = parse_shell("python a.py {1..200}\n" * lines + "python b.py {1..2} {x}\n")
    (last,) = [c for c in result.commands if c.argv[1].value == "b.py"]
    assert [w.value for w in last.argv[2:]] == [None, "{x}"] and "brace expansion" in last.argv[2].unknown
    assert [w.value for w in result.commands[0].argv[2:5]] == ["1", "2", "3"]
