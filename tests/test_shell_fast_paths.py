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
    from offlint.sources.shell_commands import _SHELLS, _shell_c_payload

    assert all(shell.endswith("sh") for shell in _SHELLS)
    assert _shell_c_payload(["srun", "/bin/bash", "-lc", "x"]) == 3 and _shell_c_payload(["fish", "-c", "x"]) is None
