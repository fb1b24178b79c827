"""Read bash that tree-sitter-bash misparses: re-parse with the misread constructs masked.

tree-sitter-bash (0.25) rejects some valid bash, and its error recovery can swallow a whole function or file:
a `]` in an expansion's pattern (`${v%%]*}`, upstream issues 274 and 285), an operator character in an
expansion's word (`${s:+$s;}`, `${L:-a|b}`, issue 267), arithmetic in a substring offset (`${A:$N+1}`) or in an
expansion's word (`${N:-$(( (A + 1) / 2 ))}`, LLaVA-OneVision-2's launch scripts), an array subscript in a C-style
`for ((...))` header (NeMo RL's tools), a base prefix in arithmetic (`$((10#$N))`), globs with quoted spaces
or extglobs in `[[ ]]` (issues 321, 246), the root directory as a test's operand (`[ -w / ]`, read as a
division: radixark/miles' CI host setup), an empty command substitution on lines of its own ("`" twice: a
MindSpeed-LLM conversion script) or holding a comment alone (`` `# note` `` after an option of a continued
command), a word at a line's start that begins with `{` or `[` (a Slurm template's `{{ sbatch_cmds }}`, a
licence script's `[your installation directory]/bin/lmgrd`), a group opening a group (`((cmd) || true)`, groups to
bash as the `((` never closes with `))`: the inner parentheses blanked), a line continuation ending the file,
`NAME=` closing a backtick substitution, an escaped less-than in a single-bracket test, a template's
`<placeholder>` as an assignment's value and a here-string after another redirection (`_odd_shapes`). Each, seen
on real scripts, would otherwise make the whole script unreadable.
One misreading comes with no error at all: a word split at an unbraced expansion (`[1.0,$DIR/x]`, `$D/a,$D/b`),
which is masked wherever the tree shows it (`_split_expansions`).

When the parse has errors, the construct around each innermost error (a `${...}`, `$((...))` / `((...))` or
`[[ ... ]]`, found by a small lexer) is replaced by a neutral one of exactly the same byte length (`${___}`,
`$((0  ))`, `[[ x  ]]`), so every position stays right, and the text is parsed again; a base prefix `B#` is
blanked instead and remembered, so `$((10#$N))` keeps its value. The masked parse is used only when it is
clean; otherwise the original errors stand (a script offlint cannot read in full is still an error). The walker
gives a masked expansion an unknown value and leaves a masked test undecided.
"""

from __future__ import annotations

import bisect
import re

from offlint.sources.bash_tree import query

_ROUNDS = 8  # parse, mask what the errors point into, parse again: a few rounds, each one parse

_BASE = re.compile(r"(?<![\w$#])(\d+)#(?=[\w${@])")
_LONE_SLASH = re.compile(rb"(?<=[ \t])/(?=[ \t\n;&|)])")  # a word that is `/` alone
# `$()`, `$( )`, "``", "`" on two lines, and a backtick substitution holding a comment alone (`# note`), which
# comments one line of a command continued over several (bash reads the comment inside the substitution; its `#`
# hides the closing backtick from tree-sitter-bash 0.25: NVIDIA's GenerativeAIExamples, a helper's sweep)
_EMPTY_SUBSTITUTION = re.compile(r"\$\([ \t]*\)|`[ \t\n]*`|`[ \t]*#[^`\n]*`")
# A word at a line's start beginning with `{` and more than it (a template's `{{ sbatch_cmds }}`, `{x`), or with `[[`
# or `[` and no blank after it (a job template's `[[EXTRA_SBATCH_ARGS]]`, a licence script's `[your installation
# directory]/bin/lmgrd -c ...`): a command name to bash, which reserves `{` alone and opens a test at `[[` or `[` only
# before a blank; tree-sitter-bash (0.25) opens a group or a test and refuses the script
_BRACE_WORD = re.compile(rb"(?m)^[ \t]*(\{(?=\S)\{*|\[\[?(?=[^\s\[]))")
# `[ "$v" \< "3.0.0" ]`: a single-bracket test comparing strings with an escaped `<` or `>`
_ESCAPED_COMPARISON = re.compile(rb"(?<![\[\w])\[[ \t][^\]\n]*?\\[<>][^\]\n]*?[ \t]\](?!\])")
# A template's placeholder as an assignment's value (`TOKENIZER=<path to tokenizer>/vocab.json`, `DATA=<path> cmd`):
# bash reads a redirection there (`bash -n` accepts it, the run fails); its value is unknown
# (only where bash reads it: `<` and `>` then redirect from and to words; `X=<Specify path>` alone bash refuses)
_PLACEHOLDER_VALUE = re.compile(rb"(?m)(?:^|(?<=[ \t;]))[A-Za-z_]\w*=(<[\w.,/-][\w .,/-]*>)"
                                rb"(?=[\w./-]|[ \t]+[^\s;&|<>()#])")
_NAME_EQUALS_END = re.compile(rb"(?:^|[ \t;])[A-Za-z_]\w*=\Z")
# `for arg do` (no `in` list: the positional parameters, POSIX) where a command starts: tree-sitter-bash (0.25) wants
# a `;` or a line break before `do`, so the blank before it becomes one
_FOR_WITHOUT_IN = re.compile(rb"(?m)(?:^|[;&|({]|\b(?:then|do|else))[ \t]*for[ \t]+[A-Za-z_]\w*[ \t]+(do)(?=[ \t\n;])")
# An associative array's key holding an operator character in a compound assignment (`declare -A T=( [llama|90]=0.4
# )`): bash reads the subscript whole up to `]=`, tree-sitter-bash (0.25) a pipe there, and its recovery may take the
# whole file for one error (a MLPerf launcher's step-time table); the characters are masked as `_`
_OPERATOR_SUBSCRIPT = re.compile(rb"(?<=[(\s])\[([^\]\s]*?[|&;<>][^\]\s]*)\]=")
_WORD_END = " \t\n;&|()<>"
_SEPARATOR = re.compile(r"(?<![|&<>])&(?![&>])|;")  # what ends a command on a here-document's line: `;`, a lone `&`
# What else on a here-document's line, after its delimiter, tree-sitter-bash (0.25) refuses and bash runs: another
# redirection and then a pipe (`$GDB -batch <<EOF 2>&1 |`, dlrover's pstack; `cat <<EOF >/dev/null | sed`), or a
# second here-document (`cat <<EOF <<EOG`). (Two searches, each linear, not one pattern that would scan the rest of
# the line again from every redirection.)
_REDIRECTION = re.compile(r"(?:^|[ \t])[0-9]*&?(?:>|<(?!<))")
_PIPE = re.compile(r"(?<![|>])\|(?!\|)")
_SECOND_DOCUMENT = re.compile(r"(?<!<)<<(?!<)")


def _refused_after_document(rest: str) -> bool:
    """Whether the rest of a here-document's line (after its delimiter) holds what tree-sitter-bash refuses there."""
    if _SEPARATOR.search(rest) is not None or _SECOND_DOCUMENT.search(rest) is not None:
        return True
    redirection = _REDIRECTION.search(rest)
    return redirection is not None and _PIPE.search(rest, redirection.end()) is not None
_PLAIN = re.compile(r"[^\\'$`\"}()#\[\]<\n]+")  # what _Spans._lex looks at: everything else it steps over


class Masked:
    """What was masked in one text: byte spans (start -> (end, kind)) and blanked base prefixes."""

    def __init__(self):
        self.spans: dict[int, tuple[int, str]] = {}
        self.bases: dict[int, int] = {}  # byte offset of an arithmetic operand -> its base (`10#$N`: 10)
        # start -> the construct with only its troublesome literal characters replaced: the walker reads the
        # original text, so the value is kept (`${L:-a|b}` is still "a|b")
        self.literal: dict[int, bytes] = {}
        self._starts: list[int] = []

    def __bool__(self) -> bool:
        return bool(self.spans or self.bases or self.literal)

    def freeze(self) -> None:
        self._starts = sorted(self.spans)

    def inside(self, start: int, end: int) -> tuple[int, int] | None:
        """The first masked span lying within [start, end), if any."""
        i = bisect.bisect_left(self._starts, start)
        while i < len(self._starts) and self._starts[i] < end:
            s = self._starts[i]
            if self.spans[s][0] <= end:
                return s, self.spans[s][0]
            i += 1
        return None


def parse_masked(data: bytes, parse) -> tuple[object, Masked]:
    """`parse(bytes)` -> tree. The tree of `data`, or of a masked copy when only that one parses cleanly (or,
    where tree-sitter-bash splits a word at an expansion without an error, reads it whole)."""
    tree, masked = _parse_masked(data, parse)
    for _ in range(_ROUNDS):
        whole = Masked()
        whole.spans, whole.bases, whole.literal = dict(masked.spans), dict(masked.bases), dict(masked.literal)
        if not _split_expansions(tree, data, whole):
            break
        current = parse(_apply(data, whole))
        if current.root_node.has_error and not tree.root_node.has_error:
            break
        whole.freeze()
        tree, masked = current, whole
    return tree, masked


def _parse_masked(data: bytes, parse) -> tuple[object, Masked]:
    tree = parse(data)
    masked = Masked()
    if not tree.root_node.has_error:
        # (a command that only assigns, and redirects, takes the next line's command as its own: no error is seen)
        if not _assignment_ends(tree.root_node, data, masked):
            return tree, masked
        current = parse(_apply(data, masked))
        if not current.root_node.has_error:
            masked.freeze()
            return current, masked
        return tree, Masked()
    spans = None
    current = tree
    for _ in range(_ROUNDS):
        if spans is None:
            spans = _Spans(data)
            if spans.early_ends:
                # A document that tree-sitter-bash ends early is first read to its end alone: the rest of the
                # misread tree (the document's lines taken for commands) suggests masks that would spoil it
                for start in spans.early_ends:  # a document line starting with its delimiter: its first character
                    masked.literal[start] = b"x" if data[start:start + 1] != b"x" else b"y"
                current = parse(_apply(data, masked))
                if not current.root_node.has_error:
                    masked.freeze()
                    return current, masked
            basis = current  # (the tree whose constructs the masks below are taken from)
            slashes = [m.start() for m in _LONE_SLASH.finditer(data) if not spans.in_arithmetic(m.start())]
            empty = [(start, end) for start, end in spans.empty if _blankable(data, start, end)]
            for start, end in empty:  # blanked, as the nothing they expand to (a line break inside kept)
                masked.literal[start] = re.sub(rb"[^\n]", b" ", data[start:end])
            braces = [m.span(1) for m in _BRACE_WORD.finditer(data)]
            for start, end in braces:  # `{{ cmds }}`, `[[NAME]]`: a command word, not a group or a test
                masked.literal[start] = b"_" * (end - start)
            for operator, start, end in spans.separated:  # `cat <<EOF; echo`: its document unread, the rest read
                masked.literal[operator] = b"< "  # (a redirect from a file; each line of the document a comment)
                for line in re.finditer(rb"(?m)^.", data[start:end]):
                    masked.literal[start + line.start()] = b"#"
            for start, n in spans.blank_lines:  # a document's line of blanks after an expansion, in a compound
                masked.literal[start] = b"_" * n
            for opening, closing in spans.nested_groups:  # `((cmd) || x)`: ` (cmd  || x)`, the outer group kept
                masked.literal[opening] = masked.literal[closing] = b" "
            starts = set(_error_points(basis.root_node)[0])
            read_write = [m.start() for m in _READ_WRITE.finditer(data) if {m.start(), m.start() + 1} & starts]
            for start in read_write:  # `exec 3<>/dev/tcp/...`: the same word's redirection, read as `<`
                masked.literal[start] = b"< "
            odd = _odd_shapes(data, masked)
            ends = _assignment_ends(basis.root_node, data, masked, screen=False)  # `X=1 2>&1`, `A=1 B=2`
            patterns = _case_patterns(basis.root_node, data, masked)
            if slashes or empty or spans.blank_lines or ends or patterns or braces or odd or spans.separated or \
                    read_write or spans.nested_groups:
                for start in slashes:  # `[ -w / ]`: the root directory, read as a division
                    masked.literal[start] = b"."
                current = parse(_apply(data, masked))
                if not current.root_node.has_error:
                    masked.freeze()
                    return current, masked
        touched: set[int] = set()  # one step per construct per round: the gentlest first
        points, regions = _error_points(current.root_node)
        located = [spans.misread(spans.innermost(point), data) for point in points]
        if not any(i is not None for i in located):
            # the recovery put the error where it sees it (often the start of a long ERROR node): take the
            # constructs of a known troublesome shape inside the unreadable regions instead
            regions.sort()
            located = [i for i, (start, end, kind) in enumerate(spans.items)
                       if end is not None and _inside(regions, start, end) and _troublesome(data[start:end], kind)]
        for i in located:
            # an error still inside a construct masked already: the construct around it is the misread one
            # (`for (( i < reps[${p}] ))`: masking `${p}` leaves the subscript tree-sitter-bash refuses there)
            while i is not None and (spans.items[i][0] in masked.spans or spans.items[i][0] in touched):
                i = spans.parent[i] if spans.parent[i] >= 0 else None
            if i is None:
                continue
            start, end, kind = spans.items[i]
            if kind != "expansion" and not _troublesome(data[start:end], kind):
                continue  # bash checks a test's syntax itself: mask only the shapes tree-sitter-bash misreads
            touched.add(start)
            if kind in ("arith", "arith-command") and _blank_bases(data, start, end, masked):
                continue  # (`for (( n=10#$a; ... ))` too: a neutral `((0 ))` is no for header)
            if start not in masked.literal:
                literal = _literal_mask(data[start:end], kind)
                if literal is not None:
                    masked.literal[start] = literal
                    continue
            if _neutral(kind, end - start):
                masked.spans[start] = (end, kind)
            else:
                touched.discard(start)
        if not touched:
            break
        current = parse(_apply(data, masked))
        if not current.root_node.has_error:
            masked.freeze()
            return current, masked
    return tree, Masked()


# bash's read-write redirection (`exec 3<>file`, `cat <>f`), which tree-sitter-bash 0.25 does not have: masked where
# an error of the tree stands at it, so one inside a string, which parses, is left alone
_READ_WRITE = re.compile(rb"(?<![<>])<>(?![>&])")
_ASSIGNMENT = rb"[A-Za-z_]\w*=(?:\$\([^\n()]*\)|\"[^\"\n]*\"|'[^'\n]*'|[^\s;&|<>()]*)"
# A line that may start a command that only assigns and redirects (`GPUS=$(nvidia-smi -L | wc -l) 2>/dev/null`)
_ASSIGNMENT_REDIRECT = re.compile(rb"(?m)^[ \t]*(?:" + _ASSIGNMENT + rb"[ \t]+)+[0-9]*&?[<>]")
# A line of two assignments or more and nothing else (a comment aside): the command it is may be glued to the next
_ASSIGNMENTS_LINE = re.compile(rb"(?m)^[ \t]*(?:" + _ASSIGNMENT + rb"[ \t]+)+" + _ASSIGNMENT
                               + rb"(?=[ \t]*(?:#[^\n]*)?\n)")


# tree-sitter-bash (0.25) ends a word at an unbraced expansion inside some words, with no error: `[1.0,$DIR/x]` and
# `$D/a,$D/b` become two words, `...,$` and `DIR/x]` (after an assignment, `X=$D/a,$D/b`, the second is taken for a
# command's name); a NeMo launch script's Hydra list `model.data.data_prefix=[1.0,$DATA_DIR/x]` then failed to
# parse. The character after the name is masked as `:` (the walker reads the original text), which it reads whole.
_SPLIT_QUERY = '(concatenation "$" @dollar .)'
_NAME_AFTER = re.compile(rb"[A-Za-z_]\w*|\d")
_NOT_MASKABLE = frozenset(b" \t\n;&|()<>$'\"\\`{}#")


def _split_expansions(tree, data: bytes, masked: Masked) -> bool:
    """Mask where a word is split at a lone `$` that ends one word while the next one goes on with a name."""
    from tree_sitter import QueryCursor

    found = False
    for dollar in QueryCursor(query(_SPLIT_QUERY)).captures(tree.root_node).get("dollar", ()):
        name = _NAME_AFTER.match(data, dollar.end_byte)
        end = name.end() if name else -1
        if 0 <= end < len(data) and data[end] not in _NOT_MASKABLE and end not in masked.literal:
            masked.literal[end] = b":"
            found = True
    return found


def _odd_shapes(data: bytes, masked: Masked) -> bool:
    """Mask the shapes found by their text alone, for the first masked parse: a final line continuation (blanked),
    `for NAME do` (a `;` before `do`),
    an assignment of nothing just before a closing backtick (export D= in backticks inside a string: its `=`
    blanked, the substitution expanding to nothing either way), a single-bracket test with an escaped `<` or `>`
    (a test offlint leaves undecided), a template's `<placeholder>` as an assignment's value (unknown), a
    here-string after another redirection (read from its word), an operator character in an array element's key
    (`_`) and a bare here-document (a comment). Whether any was found."""
    found = False
    body = data.rstrip(b" \t\n")
    if body.endswith(b"\\") and not body.endswith(b"\\\\"):
        masked.literal[len(body) - 1] = b" "  # (a continuation ending the file, a newline after it or not: dropped)
        found = True
    for start in _empty_values_before_backticks(data):
        masked.literal[start] = b" "
        found = True
    for m in _FOR_WITHOUT_IN.finditer(data):
        masked.literal[m.start(1) - 1] = b";"
        found = True
    for m in _ESCAPED_COMPARISON.finditer(data):
        if _neutral("test", m.end() - m.start()):
            masked.spans[m.start()] = (m.end(), "test")
            found = True
    for m in _PLACEHOLDER_VALUE.finditer(data):
        if _neutral("expansion", m.end(1) - m.start(1)):
            masked.spans[m.start(1)] = (m.end(1), "expansion")
            found = True
    for start in _here_strings_after_redirections(data):
        masked.literal[start] = b"<  "
        found = True
    for m in _OPERATOR_SUBSCRIPT.finditer(data):
        for at in range(m.start(1), m.end(1)):
            if data[at:at + 1] in b"|&;<>":
                masked.literal[at] = b"_"
                found = True
    for start, end in _bare_documents(data):  # each line a comment: bash runs none of them
        masked.literal[start] = re.sub(rb"(?m)^[^\n]", b"#", data[start:end])
        found = True
    return found


# A here-document with no command before it on its line (`<<!` ... `!`, `<< 'EOF'`, `<<-END`): bash feeds it to
# nothing, a block-comment idiom (11 scripts of one tree commented out their old launches so); tree-sitter-bash 0.25
# refuses the operator without a command
_BARE_DOCUMENT = re.compile(rb"(?m)^[ \t]*<<(-?)[ \t]*(['\"]?)([^\s'\"<>;&|()]+)\2[ \t]*$")


def _bare_documents(data: bytes) -> list[tuple[int, int]]:
    """The spans of bare here-documents, from their `<<` to the end of their delimiter's line (a `<<-` one's may be
    indented with tabs); one whose delimiter never comes is left alone (bash reads it to the end of the file, with a
    warning)."""
    found = []
    for m in _BARE_DOCUMENT.finditer(data):
        if found and m.start() < found[-1][1]:
            continue  # (a line inside the previous one)
        ending = re.compile(rb"(?m)^" + (rb"\t*" if m.group(1) else b"") + re.escape(m.group(3)) + rb"$")
        end = ending.search(data, m.end() + 1)
        if end is not None:
            found.append((m.start() + m.group(0).index(b"<<"), end.end()))
    return found


_HERE_STRING = re.compile(rb"(?<!<)<<<(?!<)")
_COMMAND_START = re.compile(rb"[;(]|\|\|?|&&|\b(?:then|do|else)\b")
_REDIRECTION_OPERATOR = re.compile(rb"[<>]")


def _here_strings_after_redirections(data: bytes) -> list[int]:
    """The offsets of the `<<<` of here-strings after another redirection of their command on its line (`jq -e .
    >/dev/null <<<"$out"`, which tree-sitter-bash 0.25 refuses and bash runs): masked as `<  `, a redirection from
    the same word, which stays no argument. (Read by its line's text: a `>` inside a quoted word before it counts
    too, which at worst reads that here-string so where the script had a parse error anyway.)"""
    found = []
    for m in _HERE_STRING.finditer(data):
        line = data[data.rfind(b"\n", 0, m.start()) + 1:m.start()]
        starts = [c.end() for c in _COMMAND_START.finditer(line)]
        if _REDIRECTION_OPERATOR.search(line, starts[-1] if starts else 0):
            found.append(m.start())
    return found


def _blankable(data: bytes, start: int, end: int) -> bool:
    """Whether blanking the empty command substitution at [start, end) leaves the words bash reads: it is glued to
    a word on one side at most (`echo``, `X=$()`; `a$()b` is one word, blanked it would be two) and, where it
    spans lines, stands alone at its command's end (blanked, its line break would end the command early)."""
    glued_before = start > 0 and chr(data[start - 1]) not in _WORD_END
    glued_after = end < len(data) and chr(data[end]) not in _WORD_END
    if b"\n" in data[start:end]:
        return not glued_before and re.match(rb"[ \t]*(?:[\n;&|#]|\Z)", data[end:]) is not None
    return not (glued_before and glued_after)


def _empty_values_before_backticks(data: bytes) -> list[int]:
    """The offsets of the `=` of `NAME=` ending a backtick substitution (tree-sitter-bash 0.25 refuses D= there),
    backticks paired in order on lines that hold no single quote or escaped backtick (where pairing is plain)."""
    found = []
    start = 0
    for line in data.split(b"\n"):
        if line.count(b"`") >= 2 and b"'" not in line and b"\\`" not in line:
            ticks = [i for i, c in enumerate(line) if c == 0x60]
            for opening, closing in zip(ticks[::2], ticks[1::2]):
                if _NAME_EQUALS_END.search(line[opening + 1:closing]):
                    found.append(start + closing - 1)
        start += len(line) + 1
    return found


def _assignment_ends(root, data: bytes, masked: Masked, screen: bool = True) -> bool:
    """Mask where a command that only assigns ends, for tree-sitter-bash (0.25), which reads such a command as the
    assignments (and redirections) of the command on the next line (no error: that command then runs with the
    variables as its own) or, a redirection in a substitution, as one missing its name (an error): its
    redirections are blanked, and a `;` is written where it ends when a line follows (`A=1 B=2<newline>while ...`:
    the `while` had been read as a command's name, its `do` and `done` as commands of their own, and the script
    refused). bash runs the assignments, opens the files, and ends the command at the line's end. With `screen`,
    looked for only where a line may start such a command (regexes; linear). False: nothing masked."""
    found = False
    if not screen or _ASSIGNMENT_REDIRECT.search(data):
        for redirects in _assignment_redirects(root, data):  # `X=1 2>&1`: the redirections of one that only assigns
            for start, end in redirects:
                masked.literal[start] = b" " * (end - start)
            _end_command(data, redirects[-1][1], masked)
            found = True
    for m in _ASSIGNMENTS_LINE.finditer(data):
        end = m.end()
        node = root.descendant_for_byte_range(end - 1, end)
        while node is not None and node.type not in ("command", "variable_assignments", "program"):
            node = node.parent
        name = node.child_by_field_name("name") if node is not None and node.type == "command" else None
        if name is not None and not name.is_missing and name.start_byte > end \
                and b"\n" in data[end:name.start_byte].replace(b"\\\n", b""):
            found = _end_command(data, end, masked) or found
    return found


def _case_patterns(root, data: bytes, masked: Masked) -> bool:
    """Mask each `case` pattern tree-sitter-bash (0.25) refuses, a glob that starts unquoted and has two quoted
    parts (`*"a"*"b"*)`, `*"a"?"b"*)`), as a neutral word of the same length: the walker leaves that pattern
    undecided (Masked.spans). False: none found."""
    found = False
    pending = [root]
    while pending:
        node = pending.pop()
        if not node.has_error:
            continue
        if node.type == "ERROR" and node.parent is not None and node.parent.type == "case_statement" \
                and node.child_count and node.children[0].type == "extglob_pattern":
            end = _pattern_end(data, node.start_byte)
            if end is not None:
                masked.spans[node.start_byte] = (end, "case-pattern")
                found = True
                continue
        pending.extend(node.children)
    return found


_PATTERN_MAX = 4096


def _pattern_end(data: bytes, start: int) -> int | None:
    """Where the case pattern starting at `start` ends: its `)` outside quotes and extglob parentheses (None when
    the line ends first, or past _PATTERN_MAX bytes: a pattern is a few words)."""
    depth, quote, i = 0, 0, start
    while i < min(len(data), start + _PATTERN_MAX):
        c = data[i]
        if quote:
            if c == quote:
                quote = 0
            elif c == 0x5C and quote == 0x22:  # a backslash in double quotes escapes the next character
                i += 1
        elif c in (0x22, 0x27):
            quote = c
        elif c == 0x5C:
            i += 1
        elif c == 0x28:
            depth += 1
        elif c == 0x29:
            if not depth:
                return i
            depth -= 1
        elif c == 0x0A:
            return None
        i += 1
    return None


def _end_command(data: bytes, end: int, masked: Masked) -> bool:
    """Write `;` at `end`, a blank or the line's end after a command that only assigns (`A=1 B=2;`, the same
    command to bash)."""
    if data[end:end + 1] not in (b" ", b"\t", b"\n"):
        return False  # (`out=$(Y=$(cmd) 2>&1)`: the substitution's `)` ends it)
    masked.literal[end] = b";"
    return True


def _assignment_redirects(root, data: bytes) -> list[list[tuple[int, int]]]:
    """The byte ranges of the redirections of each command that only assigns (`X=1 2>&1`,
    `out=$(Y=$(cmd) 2>&1)`): a command whose name tree-sitter-bash took from a later line, or found missing."""
    out: list[list[tuple[int, int]]] = []
    pending = [root]
    while pending:
        node = pending.pop()
        if node.type == "command":
            kids = node.named_children
            name = node.child_by_field_name("name")
            redirects = [c for c in kids if c.type == "file_redirect"]
            head = [c for c in kids if c.type in ("variable_assignment", "file_redirect")]
            if name is not None and redirects and head and head[0].type == "variable_assignment" \
                    and kids[:len(head)] == head and _name_elsewhere(name, redirects[-1], data):
                out.append([(c.start_byte, c.end_byte) for c in redirects])
        pending.extend(node.children)
    return out


def _name_elsewhere(name, redirect, data: bytes) -> bool:
    """Whether a command's name is missing, or on a line after its last redirection (not continued)."""
    if name.is_missing or (name.child_count and name.children[0].is_missing):
        return True
    gap = data[redirect.end_byte:name.start_byte]
    return b"\n" in gap.replace(b"\\\n", b"")


def _error_points(root) -> tuple[list[int], list[tuple[int, int]]]:
    """Byte offsets of the innermost ERROR nodes and of the MISSING tokens, in order, and the byte ranges of the
    outermost ERROR nodes (iteratively: a deeply nested tree must not exhaust the stack)."""
    out: list[int] = []
    regions: list[tuple[int, int]] = []
    pending = [(root, False)]
    while pending:
        n, in_error = pending.pop()
        if n.is_missing:
            out.append(n.start_byte)
        elif n.has_error:
            kids = [c for c in n.children if c.has_error or c.is_missing]
            if n.type == "ERROR" and not in_error:
                regions.append((n.start_byte, n.end_byte))
            if n.type == "ERROR" and not kids:
                out.append(n.start_byte)
            pending.extend((c, in_error or n.type == "ERROR") for c in reversed(kids))
    return out, regions


def _inside(regions: list[tuple[int, int]], start: int, end: int) -> bool:
    """Whether [start, end) lies in one of `regions` (sorted, not overlapping)."""
    i = bisect.bisect_right(regions, (start, float("inf"))) - 1
    return i >= 0 and regions[i][0] <= start and end <= regions[i][1]


_EXTGLOB = re.compile(rb"[@!+*?]\(")
_GLUED = re.compile(rb"\w\$|\}\w")  # a literal glued to an expansion in arithmetic (`0x${HASH:0:4}`, `${X}0`)


def _troublesome(text: bytes, kind: str) -> bool:
    """The shapes tree-sitter-bash is known to misread (see the module docstring)."""
    if kind == "expansion":
        head = _NAME.match(text)
        rest = text[head.end():-1] if head else b""
        return any(c in _SPECIAL for c in rest) or (rest[:1] == b":" and rest[1:2] not in b"-=+?" and b"$" in rest)
    if kind in ("arith", "arith-command"):
        return _BASE.search(text.decode("latin-1")) is not None or (kind == "arith-command" and b"[" in text) \
            or _GLUED.search(text) is not None
    if kind == "test":
        return _EXTGLOB.search(text) is not None or _literal_mask(text, kind) is not None
    return False


def _neutral(kind: str, n: int) -> bytes | None:
    """A construct of the same kind and byte length that tree-sitter-bash reads, or None if none fits."""
    if kind == "expansion":
        return b"${" + b"_" * (n - 3) + b"}" if n >= 4 else None
    if kind == "arith":
        return b"$((0" + b" " * (n - 6) + b"))" if n >= 6 else None
    if kind == "arith-command":
        return b"((0" + b" " * (n - 5) + b"))" if n >= 5 else None
    if kind == "test":
        return b"[[ x" + b" " * (n - 7) + b" ]]" if n >= 7 else None
    if kind == "case-pattern":
        return b"_" * n
    return None


_NAME = re.compile(rb"\$\{(?:[A-Za-z_]\w*|\d+|[@*#?$!-])(?:\[[^\]]*\])?")
_SPECIAL = b" \t;|&()<>[]"  # what tree-sitter-bash stumbles on inside an expansion's word or a test's quotes


def _literal_mask(text: bytes, kind: str) -> bytes | None:
    """`${NAME<op><word>}` whose word is plain text, a `[[ ]]` test whose quoted strings hold blanks, or a C-style
    `for ((...))` header with an array subscript (`i < reps[$p]`, which tree-sitter-bash refuses there): the same
    construct with the troublesome characters replaced by `_` (None when the word is not plain text)."""
    out = bytearray(text)
    if kind == "arith-command":  # each subscript, brackets and what they hold (`[${p}]` too), becomes `_`s
        depth = 0
        for k, c in enumerate(text):
            if c == ord("["):
                depth += 1
            if depth:
                out[k] = ord("_")
            if c == ord("]") and depth:
                depth -= 1
    elif kind == "expansion":
        head = _NAME.match(text)
        if head is None or any(c in text[head.end():-1] for c in b"$`'\"\\{}"):
            return None
        for k in range(head.end(), len(text) - 1):
            if out[k] in _SPECIAL:
                out[k] = ord("_")
    elif kind == "test":
        quote = 0
        for k, c in enumerate(text):
            if quote:
                if c == quote:
                    quote = 0
                elif c in b" \t":
                    out[k] = ord("_")
            elif c in b"'\"":
                quote = c
    else:
        return None
    return bytes(out) if out != text else None


def _blank_bases(data: bytes, start: int, end: int, masked: Masked) -> bool:
    """Blank the `B#` base prefixes of one arithmetic span not yet blanked; False when there are none."""
    text = data[start:end].decode("latin-1")
    found = False
    for m in _BASE.finditer(text):
        operand = start + m.end()
        if operand not in masked.bases:
            masked.bases[operand] = int(m.group(1))
            found = True
    return found


def _apply(data: bytes, masked: Masked) -> bytes:
    out = bytearray(data)
    for start, literal in masked.literal.items():
        out[start:start + len(literal)] = literal
    for operand, base in masked.bases.items():
        width = len(str(base)) + 1
        out[operand - width:operand] = b" " * width
    for start, (end, kind) in sorted(masked.spans.items(), key=lambda item: item[1][0] - item[0]):
        out[start:end] = _neutral(kind, end - start)  # innermost first: an enclosing mask overwrites it
    return bytes(out)


_OPENERS = {"expansion": "${", "arith": "$((", "arith-command": "((", "test": "[["}


def unclosed(data: bytes) -> tuple[int, str] | None:
    """The first `${`, `$((`, `((`, `[[`, quote or backquote of a bash text that is never closed, as (byte offset, the
    opener); None where each is. For the message of a script that does not parse: tree-sitter-bash's error recovery
    puts the error where it gives up (a bigscience Slurm script's `${six_ALL_CCFRWORK/code/...` without its `}` at
    line 32 was reported at line 1, "lines 1-52 not read"), bash at the end of the file."""
    spans = _Spans(data)
    opened = next(((start, _OPENERS[kind]) for start, end, kind in spans.items if end is None and kind in _OPENERS),
                  None)
    quote = spans.open_quote
    return quote if quote is not None and (opened is None or quote[0] < opened[0]) else opened


def placeholder_ending_a_line(data: bytes) -> tuple[int, str] | None:
    """The first template placeholder (`<xxx>`, `<PATH TO DATA>`) ending a line of code, not continued, as (byte offset,
    the placeholder): bash reads `<xxx` and then `>` with no file, and refuses the line, where tree-sitter-bash may
    read on and put its error lines later. None where there is none (quotes and comments aside)."""
    for m in _LINE_END_PLACEHOLDER.finditer(data):
        line = data[data.rfind(b"\n", 0, m.start()) + 1:m.start()]
        if b"#" not in line and line.count(b'"') % 2 == 0 and line.count(b"'") % 2 == 0:
            return m.start(), m.group().decode("latin-1")
    return None


_LINE_END_PLACEHOLDER = re.compile(rb"<[\w][\w .,/:-]*>(?=[ \t]*(?:\n|\Z))")


class _Spans:
    """The closed `${...}`, `$((...))`, `((...))` and `[[ ... ]]` of a bash text, with their nesting.

    A light lexer: quotes, escapes, comments, command substitutions and here-document bodies are skipped the way
    bash reads them. It need not be exact: a masked text is used only when tree-sitter then parses it cleanly.
    Linear in the text."""

    def __init__(self, data: bytes):
        self.items: list[list] = []  # [start, end (None while open), kind], in order of start
        self.parent: list[int] = []
        # here-document lines that start with their delimiter without being it (`TRAINING_ARGS=(` in a `<<
        # TRAINING` document): bash reads on, tree-sitter-bash ends the document there; the offsets of their
        # first characters
        self.early_ends: list[int] = []
        # here-document lines of blanks alone (offset, length): after a line with an expansion, inside an `if` or a
        # function, tree-sitter-bash (0.25) ends the document early there and the rest of the script is an error
        self.blank_lines: list[tuple[int, int]] = []
        # here-documents whose operator's line goes on after `;` or `&` (`if cmd <<'PY'; then`, `cat <<EOF; echo`),
        # or to a redirection and a pipe or a second document (_refused_after_document), which tree-sitter-bash (0.25)
        # refuses: (offset of the `<<`, of the body, of the end of its delimiter line)
        self.separated: list[tuple[int, int, int]] = []
        # empty command substitutions outside double quotes, `$()`, `$( )`, "``" (start, end): they expand to
        # nothing; tree-sitter-bash (0.25) refuses one glued to a word (`echo``, `X=$()`) or spanning lines
        self.empty: list[tuple[int, int]] = []
        # the inner group of `((cmd) || true)` or `$((cat f) | wc -l)`, which bash reads as groups (the `((` never
        # closes with `))`) and tree-sitter-bash (0.25) as arithmetic: offsets of its `(` and its `)`
        self.nested_groups: list[tuple[int, int]] = []
        # the first quote or backquote the text never closes (offset, the character): bash reads to the end of the
        # file looking for it, and tree-sitter-bash's error may lie far before it (a function enclosing it)
        self.open_quote: tuple[int, str] | None = None
        s = data.decode("latin-1")  # byte offsets; UTF-8 continuation bytes never look like syntax
        self._lex(s)
        self.starts = [item[0] for item in self.items]

    def innermost(self, point: int) -> int | None:
        i = bisect.bisect_right(self.starts, point) - 1
        while i >= 0:
            start, end, _ = self.items[i]
            if end is not None and start <= point < end:
                return i
            i = self.parent[i]
        return None

    def in_arithmetic(self, point: int) -> bool:
        """Whether `point` lies in arithmetic or an expansion (where a lone `/` divides: `$(( N / 8 ))`)."""
        i = self.innermost(point)
        while i is not None:
            if self.items[i][2] in ("arith", "arith-command", "expansion"):
                return True
            i = self.parent[i] if self.parent[i] >= 0 else None
        return False

    def misread(self, i: int | None, data: bytes) -> int | None:
        """The construct to mask for an error inside construct `i`: `i`, or for plain arithmetic in an expansion's
        word (`${N:-$(( (A + 1) / 2 ))}`, where tree-sitter-bash reads `$((` as a command substitution of a
        subshell and stumbles on what follows a parenthesised operand) the expansion around it."""
        if i is None or self.items[i][2] != "arith" or _troublesome(data[self.items[i][0]:self.items[i][1]], "arith"):
            return i
        outer = self.parent[i]
        return outer if outer >= 0 and self.items[outer][2] == "expansion" else i

    def _open(self, stack: list, kind: str, start: int) -> None:
        parent = next((e[3] for e in reversed(stack) if e[3] >= 0), -1)
        self.items.append([start, None, kind])
        self.parent.append(parent)
        stack.append([kind, start, 0, len(self.items) - 1])

    def _close(self, stack: list, end: int) -> None:
        entry = stack.pop()
        if entry[3] >= 0:
            self.items[entry[3]][1] = end

    def _lex(self, s: str) -> None:  # noqa: C901 - one state machine reads best in one place
        n = len(s)
        stack: list[list] = [["top", 0, 0, -1]]  # [context, start, paren depth, item index or -1]
        heredocs: list[tuple[str, bool, int, bool]] = []  # (delimiter, `<<-`, offset of `<<`, separated)
        i = 0
        while i < n:
            plain = _PLAIN.match(s, i)  # a run of characters that mean nothing in any context: skipped at once
            if plain is not None:
                i = plain.end()
                continue
            ctx = stack[-1][0]
            c = s[i]
            code = ctx in ("top", "sub", "test", "bq")
            if c == "\\":
                i += 2
                continue
            if c == "'" and ctx != "dq" and not (ctx == "expansion" and any(e[0] == "dq" for e in stack)):
                j = s.find("'", i + 1)
                if j < 0:
                    self._note_open_quote(stack, (i, "'"))
                    return
                i = j + 1
                continue
            if c == "$" and i + 1 < n:
                nxt = s[i + 1]
                if s.startswith("$((", i):
                    self._open(stack, "arith", i)
                    i += 3
                    continue
                if nxt == "(":
                    self._note_empty(s, i, ctx)
                    stack.append(["sub", i, 0, -1])
                    i += 2
                    continue
                if nxt == "{":
                    self._open(stack, "expansion", i)
                    i += 2
                    continue
                if nxt == "'" and ctx != "dq":
                    i = self._ansi_c_end(s, i + 2)
                    continue
            if c == "`":
                if ctx == "bq":
                    stack.pop()
                else:
                    end = self._note_empty(s, i, ctx)
                    if end is not None:  # (nothing inside to read: a comment's `'` opens no quote)
                        i = end
                        continue
                    stack.append(["bq", i, 0, -1])
                i += 1
                continue
            if ctx == "dq":
                if c == '"':
                    stack.pop()
                i += 1
                continue
            if c == '"':
                stack.append(["dq", i, 0, -1])
                i += 1
                continue
            at_word = i == 0 or s[i - 1] in " \t\n;&|(!"
            if ctx == "expansion":
                if c == "}":
                    self._close(stack, i + 1)
                i += 1
                continue
            if ctx in ("arith", "arith-command"):
                if c == "(":
                    stack[-1][2] += 1
                elif c == ")":
                    if stack[-1][2] > 0:
                        stack[-1][2] -= 1
                    elif s.startswith("))", i):
                        self._close(stack, i + 2)
                        i += 2
                        continue
                    else:
                        self._not_arithmetic(stack, i)
                i += 1
                continue
            # code: top level, a command substitution, a backquoted command, a [[ ]] test
            if c == "#" and at_word:
                j = s.find("\n", i)
                i = n if j < 0 else j
                continue
            if ctx == "test":
                if s.startswith("]]", i) and at_word and (i + 2 >= n or s[i + 2] in _WORD_END):
                    self._close(stack, i + 2)
                    i += 2
                    continue
            elif code and at_word and s.startswith("[[", i) and i + 2 < n and s[i + 2] in " \t\n":
                self._open(stack, "test", i)
                i += 2
                continue
            elif code and at_word and s.startswith("((", i):
                self._open(stack, "arith-command", i)
                i += 2
                continue
            if ctx == "sub":
                if c == "(":
                    stack[-1][2] += 1
                elif c == ")":
                    if stack[-1][2] > 0:
                        stack[-1][2] -= 1
                    else:
                        stack.pop()
                    i += 1
                    continue
            if c == "<" and s.startswith("<<<", i):  # a here-string, not a here-document
                i += 3
                continue
            if c == "<" and s.startswith("<<", i):
                i = self._heredoc_start(s, i, heredocs)
                continue
            if c == "\n" and heredocs:
                i = self._skip_heredocs(s, i + 1, heredocs, self.early_ends, self.blank_lines, self.separated)
                heredocs.clear()
                continue
            i += 1
        self._note_open_quote(stack, None)

    def _note_open_quote(self, stack: list, single: tuple[int, str] | None) -> None:
        """Note the outermost quote or backquote still open when the text ends (`single`: a `'` with no end)."""
        quotes = [(start, '"' if kind == "dq" else "`") for kind, start, _, _ in stack if kind in ("dq", "bq")]
        self.open_quote = quotes[0] if quotes else single

    def _not_arithmetic(self, stack: list, close: int) -> None:
        """The `((` or `$((` on top of the stack met a `)` of its own alone at `close`: like bash, read it as a group
        opening a group (`((cmd) || true)`, `$((cat f) | wc -l)`), and note the inner group's parentheses."""
        kind, start, _, item = stack.pop()
        if item >= 0:
            self.items[item][2] = "group"  # (never closed as arithmetic: not for `unclosed`)
        opening = start + (2 if kind == "arith" else 1)
        self.nested_groups.append((opening, close))
        if kind == "arith":
            stack.append(["sub", start, 0, -1])  # the `$(` still open
        elif stack[-1][0] == "sub":
            stack[-1][2] += 1  # the outer `(`, still open inside the substitution

    def _note_empty(self, s: str, i: int, ctx: str) -> int | None:
        """Note the empty substitution starting at `i`, if one does: its end, else None."""
        found = _EMPTY_SUBSTITUTION.match(s, i) if ctx != "dq" else None
        if found is None:
            return None
        self.empty.append(found.span())
        return found.end()

    @staticmethod
    def _ansi_c_end(s: str, i: int) -> int:
        while i < len(s):
            if s[i] == "\\":
                i += 2
            elif s[i] == "'":
                return i + 1
            else:
                i += 1
        return i

    @staticmethod
    def _heredoc_start(s: str, i: int, heredocs: list) -> int:
        operator = i
        i += 2
        strip = s.startswith("-", i)
        i += strip
        while i < len(s) and s[i] in " \t":
            i += 1
        word = []
        while i < len(s) and s[i] not in _WORD_END:
            if s[i] in "'\"":
                j = s.find(s[i], i + 1)
                j = len(s) if j < 0 else j
                word.append(s[i + 1:j])
                i = j + 1
            elif s[i] == "\\":
                word.append(s[i + 1:i + 2])
                i += 2
            else:
                word.append(s[i])
                i += 1
        if word:
            end = s.find("\n", i)
            rest = s[i:len(s) if end < 0 else end]
            heredocs.append(("".join(word), strip, operator, _refused_after_document(rest)))
        return i

    @staticmethod
    def _skip_heredocs(s: str, i: int, heredocs: list, early_ends: list[int], blank_lines: list,
                       separated: list) -> int:
        for delimiter, strip, operator, after in heredocs:
            start = i
            while i < len(s):
                j = s.find("\n", i)
                j = len(s) if j < 0 else j
                line = s[i:j]
                body = line.lstrip("\t") if strip else line
                if body == delimiter:
                    i = j + 1
                    break
                if body.startswith(delimiter):
                    early_ends.append(i + len(line) - len(body))
                elif line and not line.strip(" \t"):
                    blank_lines.append((i, len(line)))
                i = j + 1
            if after:
                separated.append((operator, start, min(i, len(s))))
        return i
