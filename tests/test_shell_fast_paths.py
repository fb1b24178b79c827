"""The shell reader's shortcuts give what the plain computation gives: origins from the shared per-line rows
(shell_parse._origins), a word of one unsplit piece (shell_values._unsplit), literal text read from backslash to
backslash (shell_words.lit), and byte offsets of non-ASCII text (the walker's ci)."""

from __future__ import annotations

from itertools import product

from offlint.sources import shell_parse
from offlint.sources.shell_parse import _origins, parse_shell
from offlint.sources.shell_values import _Field, _P, _split


def _counted(text: str) -> list[tuple[int, int, str]]:
    return [(ln, c, "") for ln, line in enumerate(text.split("\n"), 1) for c in range(1, len(line) + 2)]


def test_origins_are_each_characters_line_and_column():
    long_line = "x" * (shell_parse._ROW_COLS + 50)
    many = "\n".join("ab"[: k % 3] for k in range(shell_parse._ROW_LINES + 40))
    texts = ["", "a", "\n", "ab\ncd\n", "abc\n" * 3, "a\nabcdef\nab", long_line, f"a\n{long_line}\nb", many,
             "é\tx\n\n" + "y" * 30, "abcdef\nabcdefghij\n"]
    for text in texts + texts[::-1]:  # shorter lines after longer ones reuse a row, longer ones extend it
        assert _origins(text) == _counted(text), text[:20]


def test_one_piece_words_split_as_any_other():
    """`_split` of one piece takes a shortcut; with an empty second piece (which adds nothing) it takes the general
    path: both must give the same fields."""
    elem = _Field("elem", ((7, 3, ""),) * 4, 7, 3, "A[1]", "inside if at line 6")
    texts = ["", "a", "abc", "a\udb80\udc00b"]  # (a hole character inside)
    for text, quoted, split, with_elem, cond, ctx, short in product(texts, (False, True), (False, True),
                                                                     (False, True), ("", "inside case at line 2"),
                                                                     ("", "inside loop at line 9"), (False, True)):
        org = [(2, 5 + k, "after && at line 1" if k == 1 else "") for k in range(len(text) - short)]
        p = _P(text, org, split=split, quoted=quoted, elem=elem if with_elem else None, cond=cond)
        one = _split([p], 3, 4, "$TOKEN", ctx)
        general = _split([p, _P()], 3, 4, "$TOKEN", ctx)
        assert one == general, (text, quoted, split, with_elem, cond, ctx, short)


def test_backslashes_in_literal_text():
    script = parse_shell('echo a\\ b "c\\"d\\e" \\\\x e \\\n f \'g\\h\' "\\$i" "k\\\nl" \\m\\\\ j\\\n')
    assert [w.value for w in script.commands[0].argv] == ["echo", "a b", 'c"d\\e', "\\x", "e", "f", "g\\h", "$i", "kl",
                                                          "m\\", "j"]


def test_byte_offsets_of_non_ascii_text_are_characters():
    script = parse_shell('X="ü—€😀"\necho "$X" ő${X}ő --k=😀\n')
    argv = script.commands[0].argv
    assert [w.value for w in argv] == ["echo", "ü—€😀", "őü—€😀ő", "--k=😀"]
    assert [(w.line, w.col, w.text) for w in argv] == [(2, 1, "echo"), (2, 6, '"$X"'), (2, 11, "ő${X}ő"),
                                                      (2, 18, "--k=😀")]


# token()'s shortcuts for literal words, numbers, '...' and "..." (shell_commands.Commands.fast_tokens) against the
# general exp() + _split(): generated scripts of every kind of token, in conditional and nested places.
_PIECES = ["a", "~", "~/x", "0", "42", "-7", "1e3", "16#ff", "x\\ y", "\\$a", "é", "*", "a=b", "--k=v", "$A", "${A}",
           "${B:-d}", "$(echo x)", "`echo y`", "$((1+2))", "'raw'", "''", "'a b'", "'a\\b'", "'open", '"q"', '""',
           '"a b"', '"$A"', '"x${A}y"', '"\\"e"', '"$(echo z)"', '"open', '$"tr"', "$'ansi'", "{a,b}", "A[0]"]
_FRAMES = ["{}", "if true; then {}; fi", "if [[ $Z == 1 ]]; then {}; else {}; fi", "for i in 1 2; do {}; done",
           "f() {{ {}; }}; f", "( {} )", "X=$( {} )", "a && {}", "case $Z in x) {};; *) {};; esac", "eval '{}'",
           "bash -c '{}'", "{}", "if [[ $Z == 1 ]]; then P='{}'; fi; bash -c \"$P\"",  # (payload words: marked)
           "[[ $Z ]] && P=\"{}\"; eval \"$P\""]


def _script(r) -> str:
    def command() -> str:
        words = ["python", "train.py"] if r.random() < 0.5 else [r.choice(["echo", "run", "X=1", "A=(p q)"])]
        return " ".join(words + ["".join(r.choice(_PIECES) for _ in range(r.randint(1, 2)))
                                 for _ in range(r.randint(0, 5))])
    lines = [r.choice(["A='v w'", "A=val", "export A=1", "B=(1 2)", "unset A", ""])]
    for _ in range(r.randint(1, 4)):
        frame = r.choice(_FRAMES)
        lines.append(frame.format(*(command() for _ in range(frame.count("{}")))))
    return "\n".join(lines) + "\n"


def test_literal_tokens_read_as_the_general_path_reads_them(monkeypatch):
    import random

    from offlint.sources.shell_commands import Commands

    r = random.Random(78)
    scripts = [_script(r) for _ in range(600)]
    scripts += ["echo $(" * k + "echo a 1 'b' \"c\"" + ")" * k for k in range(46, 51)]  # at and past the nesting bound
    fast = [repr(parse_shell(s, "run.sh", ("run.sh", 3))) for s in scripts]
    calls = []
    original = Commands.token
    monkeypatch.setattr(Commands, "token", lambda self, n: calls.append(n.type) or original(self, n))
    monkeypatch.setattr(Commands, "fast_tokens", False)
    general = [repr(parse_shell(s, "run.sh", ("run.sh", 3))) for s in scripts]
    for script, a, b in zip(scripts, fast, general):
        assert a == b, script
    assert sum(t in ("word", "number", "string", "raw_string") for t in calls) > 5000  # the shortcuts' kinds met



def test_every_shell_whose_payload_is_read_ends_in_sh():
    """_shell_c_payload skips a word not ending in "sh" before splitting off its directory."""
    from offlint.sources.shell_launchers import _SHELLS, _shell_c_payload

    assert all(shell.endswith("sh") for shell in _SHELLS)
    assert _shell_c_payload(["srun", "/bin/bash", "-lc", "x"]) == 3 and _shell_c_payload(["fish", "-c", "x"]) is None


def _prints(command) -> bool:
    return command.argv[0].value in ("echo", "printf") and not command.calls_function


def test_a_reader_of_launches_drops_only_the_commands_that_print():
    """parse_shell(printing=False), as read_shell asks: the same commands but those that only print (`echo`, `printf`),
    and the same effects of those: `printf -v` sets its variable, `echo ... > FILE` writes the file a later `sbatch`
    runs, a function of the script named `echo` is still called."""
    import random

    r = random.Random(79)
    scripts = [_script(r).replace("run ", r.choice(["echo ", "printf "])) for _ in range(400)]
    scripts += [
        'printf -v TP "%s" 4\nprintf "%s\\n" "$TP"\npython pretrain_gpt.py --tensor-model-parallel-size $TP\n',
        'echo "#!/bin/bash" > job.sh\necho "python pretrain_gpt.py --bf16" >> job.sh\nsbatch job.sh\n',
        'echo() { python pretrain_gpt.py --fp16 "$@"; }\necho --bf16\n',
        'for TP in 1 2; do echo "TP=$TP"; torchrun pretrain_gpt.py --tensor-model-parallel-size $TP; done\n',
        'echo ${X:=4}\npython pretrain_gpt.py --pipeline-model-parallel-size $X\n',
    ]
    dropped = 0
    for script in scripts:
        kept = parse_shell(script, "run.sh", ("run.sh", 3))
        launches = parse_shell(script, "run.sh", ("run.sh", 3), printing=False)
        assert repr([c for c in kept.commands if not _prints(c)]) == repr(launches.commands), script
        assert kept.errors == launches.errors and kept.assignments == launches.assignments, script
        assert not any(_prints(c) for c in launches.commands), script
        dropped += sum(_prints(c) for c in kept.commands)
    assert dropped > 300  # (the generated scripts print)
    (launch,) = parse_shell(scripts[-5], "run.sh", printing=False).commands  # TP: unknown, as printf -v leaves it
    assert launch.argv[-1].value is None and "printf -v" in launch.argv[-1].unknown
    flags = [[w.value for w in c.argv] for c in parse_shell(scripts[-1], "run.sh", printing=False).commands]
    assert flags == [["python", "pretrain_gpt.py", "--pipeline-model-parallel-size", "4"]]  # (echo's `:=` set X)
    job = [[w.value for w in c.argv] for c in parse_shell(scripts[-4], "run.sh", printing=False).commands]
    assert ["python", "pretrain_gpt.py", "--bf16"] in job
    called = [[w.value for w in c.argv] for c in parse_shell(scripts[-3], "run.sh", printing=False).commands]
    assert ["python", "pretrain_gpt.py", "--fp16", "--bf16"] in called


def test_read_shell_gives_the_units_it_gave_with_the_printing_commands(monkeypatch):
    """read_shell reads a script file without its printing commands: the units are the ones it made with them."""
    import random

    from offlint.sources import shell

    r = random.Random(80)
    scripts = [_script(r).replace("run ", "echo ").replace("train.py", "pretrain_gpt.py --bf16") for _ in range(1200)]
    scripts = [s for s in scripts if not parse_shell(s).errors]  # (a script bash rejects gives an error, no units)
    scripts.append('for TP in 1 2; do echo "TP=$TP"; torchrun pretrain_gpt.py --tensor-model-parallel-size $TP; done\n')

    def units(script):
        try:
            return repr(shell.read_shell("run.sh", script))
        except shell.ShellError as exc:
            return str(exc)

    without = [units(s) for s in scripts]
    original = shell.parse_shell
    monkeypatch.setattr(shell, "parse_shell", lambda *a, **k: original(*a, **{**k, "printing": True}))
    with_them = [units(s) for s in scripts]
    assert without == with_them
    assert sum("Unit(" in u and "pretrain_gpt.py" in u for u in without) > 300  # (launches read, not only errors)
