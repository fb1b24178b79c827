"""Command-line edits: only the bytes of one override token or flag, in a shell script or a card's command.

A Hydra override (`model.x=None`), a Megatron-LM flag (`--flag VALUE`) or an environment assignment
(`VAR=value`, `export VAR=value`) is one shell word starting where the reader recorded it. The word's byte
range is found with a small quote-aware scan (quotes, backslashes, `$(...)`), which works the same in a `.sh`
file and in a command held in a YAML card; only that range (or the whitespace before it, for a removal) is
rewritten, so quoting elsewhere and line continuations stay as they were. In a `.sh` file tree-sitter-bash must
see the same word at the site (else the edit is refused), and the result is parsed again: an edit that adds a
parse error is refused.
"""

from __future__ import annotations

import posixpath
import re
from functools import lru_cache

from offlint.fix.edits import Change, FixError, field_name, plain_text, transformed, with_option
from offlint.keys import KEYS
from offlint.sources.bash_tree import parse_bash
from offlint.sources.mlm_flags import SWITCHES

_BREAK = set(" \t\n;|&<>()")


def edit_script(text: str, changes: list[Change]) -> str:
    """A shell script: the edits, each on the word tree-sitter-bash also sees at the site (a word whose range the
    two disagree on is refused), and refused when the result has more bash parse errors than the original."""
    before = _errors(text)
    for change in sorted(changes, key=lambda c: c.position, reverse=True):
        start = _offset(text, change.line, change.col)
        if _bash_word_end(text, start) != word_end(text, start) and not \
                (change.op == "env" and _evaluated_string(text, start)):
            raise FixError(f"tree-sitter-bash reads the word at line {change.line}, column {change.col} differently")
        text = _one(text, change, in_script=True)
    if _errors(text) > before:
        raise FixError("the edited script would not parse as bash")
    return text


def edit_command_text(text: str, changes: list[Change]) -> str:
    """A command inside another file (a YAML card): the same token edits, checked by the caller's parser."""
    for change in sorted(changes, key=lambda c: c.position, reverse=True):
        text = _one(text, change)
    return text


@lru_cache(maxsize=4)
def _parse(data: bytes):
    """The tree of a script's text (the last few kept: each fix of a file checks the same text's words and errors,
    and `[*] N fixable` tries every fix; trees are not edited)."""
    return parse_bash(data)


# Node types that make up one shell word (an argument, an assignment, a command name), as tree-sitter-bash names
# them; climbing stops at the command, array or statement holding the word.
_WORD_PARTS = frozenset({"word", "concatenation", "string", "raw_string", "ansi_c_string", "simple_expansion",
                         "expansion", "command_substitution", "number", "variable_name", "variable_assignment",
                         "command_name"})


def _bash_word_end(text: str, start: int) -> int | None:
    """Where tree-sitter-bash says the word starting at character `start` ends (None: no word starts there)."""
    data = text.encode("utf-8")
    offset = len(text[:start].encode("utf-8"))
    node = _parse(data).root_node.named_descendant_for_byte_range(offset, offset)
    end = None
    while node is not None and node.start_byte == offset and node.type in _WORD_PARTS:
        end = node.end_byte
        node = node.parent
    if end is None and node is not None and node.child_count and node.children[0].start_byte == offset:
        end = node.children[0].end_byte  # a keyword such as `export`, which tree-sitter does not name
    return None if end is None else len(data[:end].decode("utf-8", "replace"))


def _evaluated_string(text: str, start: int) -> bool:
    """Whether `start` is inside the quoted value of `VAR="..."` that the script runs only through `eval` (Pai-
    Megatron-Patch: `run_cmd="torchrun ..."` then `eval ${run_cmd}`): eval parses the string as a command line, so
    an assignment prefixed to the command there is the command's environment. A string also run as a command
    itself (`${run_cmd}`: no assignment prefix is parsed there) or never eval'd is not one."""
    data = text.encode("utf-8")
    offset = len(text[:start].encode("utf-8"))
    root = _parse(data).root_node
    node = root.named_descendant_for_byte_range(offset, offset)
    while node is not None and node.type not in ("string", "raw_string", "command", "program"):
        node = node.parent
    assignment = node.parent if node is not None and node.type in ("string", "raw_string") else None
    if assignment is None or assignment.type != "variable_assignment":
        return False
    name = assignment.child_by_field_name("name")
    if name is None:
        return False
    used = re.compile(r"\$\{?" + re.escape(name.text.decode("utf-8", "replace")) + r"\b(?!\[)\}?")
    evaluated = False
    stack = [root]
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        if node.type != "command":
            continue
        words = [child.text.decode("utf-8", "replace") for child in node.named_children
                 if child.type not in ("variable_assignment", "file_redirect", "heredoc_redirect")]
        if words and used.search(words[0]):
            return False  # `${run_cmd}` run as a command: its words are not parsed again
        if words and words[0] == "eval" and any(used.search(word) for word in words[1:]):
            evaluated = True
    return evaluated


def _errors(text: str) -> int:
    tree = _parse(text.encode("utf-8"))
    if not tree.root_node.has_error:  # (most scripts: no walk)
        return 0
    count = 0
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        if node.is_error or node.is_missing:
            count += 1
        stack.extend(node.children)
    return count


def _offset(text: str, line: int, col: int) -> int:
    lines = text.splitlines(keepends=True)
    if line < 1 or line > len(lines) or col < 1 or col > len(lines[line - 1]):
        raise FixError(f"line {line}, column {col} is not in the file")
    return sum(len(x) for x in lines[:line - 1]) + col - 1


def word_end(text: str, start: int) -> int:
    """Where the shell word starting at `start` ends (quote-aware; `$(...)` and `${...}` nest)."""
    i = start
    depth = 0
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "'":
            end = text.find("'", i + 1)
            if end < 0:
                raise FixError("unterminated quote")
            i = end + 1
            continue
        if c == '"':
            i += 1
            while i < len(text) and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            if i >= len(text):
                raise FixError("unterminated quote")
            i += 1
            continue
        if c == "$" and i + 1 < len(text) and text[i + 1] in "({":
            depth += 1
            i += 2
            continue
        if depth and c in ")}":
            depth -= 1
            i += 1
            continue
        if not depth and c in _BREAK:
            break
        i += 1
    return i


def _one(text: str, change: Change, in_script: bool = False) -> str:
    start = _offset(text, change.line, change.col)
    if change.op == "env":
        return _env(text, start, change, in_script)
    end = word_end(text, start)
    word = text[start:end]
    if word.lstrip("'\"").startswith("-"):
        return _flag(text, start, end, change)
    return _override(text, start, end, change)


def _split(word: str) -> tuple[int, int, int, str]:
    """(where the key starts, where `=` is, where the value ends, the quote around the whole word or '')."""
    quote = word[0] if word[:1] in ("'", '"') and word.endswith(word[0]) and len(word) > 1 else ""
    body_start = 1 if quote else 0
    eq = word.find("=", body_start)
    if eq < 0:
        raise FixError("not a key=value override")
    return body_start, eq, len(word) - (1 if quote else 0), quote


def _unquote(value: str) -> tuple[str, str]:
    if len(value) > 1 and value[0] in ("'", '"') and value.endswith(value[0]):
        return value[1:-1], value[0]
    return value, ""


def _override(text: str, start: int, end: int, change: Change) -> str:
    word = text[start:end]
    key_start, eq, value_end, quote = _split(word)
    key_text = word[key_start:eq]
    if change.op != "insert" and field_name(key_text.lstrip("+~")) != field_name(change.key):
        raise FixError(f"the word at line {change.line} sets {key_text}, not {field_name(change.key)}")
    if change.op == "set":
        raw, inner_quote = _unquote(word[eq + 1:value_end])
        if "$" in raw or "`" in raw:
            # the value is the script's variable (a parameter of the script): writing a literal over it would
            # drop the parameter, so the variable's default (where the value offlint read comes from) is set
            return _variable_default(text, raw, change)
        new = transformed(change.transform, raw) if change.transform else plain_text(change.value)
        new = f"{inner_quote}{new}{inner_quote}"
        if not quote and not inner_quote and any(c in new for c in "[]{}*?,$ "):
            # unquoted brackets are a glob to bash: quote the whole word, as Hydra's documentation does
            return text[:start] + "'" + word[:eq + 1] + new + "'" + text[end:]
        return text[:start] + word[:eq + 1] + new + word[value_end:] + text[end:]
    if change.op == "rename":
        prefix = key_text[:len(key_text) - len(key_text.lstrip("+~"))]
        new_key = prefix + _dotted_like(key_text.lstrip("+~"), change.new_key)
        return text[:start] + word[:key_start] + new_key + word[eq:] + text[end:]
    if change.op == "remove":
        return _remove_word(text, start, end)
    if change.op == "insert":
        new_key = _dotted_like(key_text.lstrip("+~"), change.key)
        value = plain_text(change.value)
        token = f"{new_key}={value}"
        if quote or any(c in value for c in "[]{}*?,$ "):
            token = f"'{token}'"
        return text[:end] + " " + token + text[end:]
    raise FixError(f"cannot {change.op} an override")


def _dotted_like(written: str, key: str) -> str:
    """A key spelled as the written token spells its own: the same prefix path (model.x -> model.y)."""
    head = written.rsplit(".", 1)[0] + "." if "." in written else ""
    return head + field_name(key)


def _remove_word(text: str, start: int, end: int) -> str:
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end
    before = text[line_start:start]
    after = text[end:line_end]
    if not before.strip() and after.strip() in ("", "\\"):
        # the word is alone on a continuation line: the whole line goes
        if after.strip() == "" and line_start > 0:
            # the last line of a continued command: drop the previous line's backslash instead
            previous_end = line_start - 1
            previous = text.rfind("\n", 0, previous_end) + 1
            prev_line = text[previous:previous_end]
            if prev_line.rstrip().endswith("\\"):
                trimmed = prev_line.rstrip()[:-1].rstrip()
                return text[:previous] + trimmed + text[line_end:]
        return text[:line_start] + text[min(line_end + 1, len(text)):]
    cut = start
    while cut > line_start and text[cut - 1] in " \t":
        cut -= 1
    return text[:cut] + text[end:]


def _flag(text: str, start: int, end: int, change: Change) -> str:
    word = text[start:end].strip("'\"")
    flag, _, inline = word.partition("=")
    key = KEYS.get(change.key)
    if change.op == "insert":
        new_flag = key.flag if key is not None else ""
        if not new_flag:
            raise FixError(f"no Megatron-LM flag for {change.key}")
        after = _flag_end(text, end, inline)
        if change.value is True:
            return text[:after] + " " + new_flag + text[after:]
        if change.value is False or change.value is None:
            return text  # the store_true default
        return text[:after] + f" {new_flag} {plain_text(change.value)}" + text[after:]
    switch = SWITCHES.get(flag, ())
    if change.op == "set" and any(k == change.key and v != change.value for k, v in switch):
        # a switch that sets the key among others (--recompute-activations): dropping it unsets them all
        if len(switch) > 1:
            raise FixError(f"{flag} sets more than {change.key}")
        return _remove_word(text, start, end)
    if key is None or key.flag != flag:
        raise FixError(f"the flag at line {change.line} is {flag}, not the flag of {change.key}")
    if change.op == "remove" or (change.op == "set" and change.value in (False, None) and key.type == "bool"):
        return _remove_word(text, start, _flag_end(text, end, inline))
    if change.op == "set" and change.value is True and key.type == "bool":
        return text
    if change.op == "set" and change.value is None:
        return _remove_word(text, start, _flag_end(text, end, inline))
    if change.op == "set":
        if inline:
            return text[:start] + f"{flag}={plain_text(change.value)}" + text[end:]
        value_start = end
        while value_start < len(text) and text[value_start] in " \t":
            value_start += 1
        value_end = word_end(text, value_start)
        return text[:value_start] + plain_text(change.value) + text[value_end:]
    raise FixError(f"cannot {change.op} a Megatron-LM flag")


def _flag_end(text: str, end: int, inline: str) -> int:
    """The end of a flag with its value word (`--flag VALUE`), or of the flag alone (a switch, `--flag=V`)."""
    if inline:
        return end
    i = end
    while i < len(text) and text[i] in " \t":
        i += 1
    if i >= len(text) or text[i] in "\n\\-" or text[i] in _BREAK:
        return end
    return word_end(text, i)


def _env(text: str, start: int, change: Change, in_script: bool = False) -> str:
    """`VAR=value` or `export VAR=value` at the site gets the option appended; anything else (the command the
    environment is missing from) gets a `VAR=option ` prefix. In a shell script an appended option's prefix is
    `VAR=${VAR:-option} `: the script does not set VAR, but whoever runs it may have (an `sbatch` passes the
    submitting shell's exports on), and a value chosen there is kept, as the rule's own example does. A card's
    command keeps the plain prefix: a YAML file's reader (OmegaConf) takes `${...}` for an interpolation."""
    end = word_end(text, start)
    word = text[start:end]
    if word == "export":
        i = end
        while i < len(text) and text[i] in " \t":
            i += 1
        start, end = i, word_end(text, i)
        word = text[start:end]
    bare = word.lstrip("\"'")
    if bare in (change.name, change.name + ":") or bare.startswith(change.name + "=") and bare != word:
        # (a YAML file's environment entry: `- name: NAME` with its `value:`, `NAME: value`, `- "NAME=value"`)
        raise FixError(f"{change.name} is set by an entry of the file's environment, not by a command")
    before = _word_before(text, start)
    if word.startswith("-") or before.startswith("-") and before != "-x":
        # (`srun --export=ALL,NAME=...`, `singularity --env NAME=...`, whose commas part variables, `-genv NAME v`)
        raise FixError(f"{change.name} is set in an option of the launcher ({(before + ' ' + word).strip()})")
    if word.startswith(change.name + "="):
        raw, inner_quote = _unquote(word[len(change.name) + 1:])
        if "$" in raw:
            raise FixError(f"{change.name} is built from other variables here")
        new = with_option(raw, change.option) if change.append else change.option
        if new == raw:
            return text
        return text[:start] + f"{change.name}={inner_quote}{new}{inner_quote}" + text[end:]
    if posixpath.basename(_unquote(word)[0]) in _MPI_LAUNCHERS:
        raise FixError(f"{word} passes variables to ranks on other nodes only when told (-x {change.name}): a prefix "
                       f"reaches none of them")
    value = f"${{{change.name}:-{change.option}}}" if in_script and change.append else change.option
    return text[:start] + f"{change.name}={value} " + text[start:]


_MPI_LAUNCHERS = ("mpirun", "mpiexec")


def _word_before(text: str, start: int) -> str:
    """The shell word that ends before `start`, across blanks and line continuations ("" at a command's start)."""
    i = start
    while i > 0 and (text[i - 1] in " \t" or text[i - 1] == "\n" and i > 1 and text[i - 2] == "\\"):
        i -= 2 if text[i - 1] == "\n" else 1
    end = i
    while i > 0 and text[i - 1] not in _BREAK:
        i -= 1
    return text[i:end]


_VARIABLE = re.compile(r"^\$(?:\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)\}|(?P<plain>[A-Za-z_][A-Za-z0-9_]*))$")


def _variable_default(text: str, raw: str, change: Change) -> str:
    """`key="${NAME}"` whose NAME the script assigns once (`NAME=${NAME:-0.0}` or `NAME=0.0`, maybe exported):
    that default or literal is rewritten, and the override keeps reading the variable."""
    match = _VARIABLE.match(raw)
    if match is None:
        raise FixError("the value is built from shell expansions")
    name = match.group("braced") or match.group("plain")
    assignment = re.compile(rf"^[ \t]*(?:(?:export|local|readonly|declare(?:[ \t]+-\w+)*)[ \t]+)?{name}=",
                            re.MULTILINE)
    found = list(assignment.finditer(text))
    anywhere = len(re.findall(rf"(?<![\w$.-]){name}=", text))  # `then NAME=...`, `VAR=... NAME=...` too
    if len(found) != 1 or anywhere != 1:
        raise FixError(f"{name} is assigned {anywhere} times in the script, not once")
    start = found[0].end()
    end = word_end(text, start)
    written, quote = _unquote(text[start:end])
    offset = start + (1 if quote else 0)
    default = re.fullmatch(rf"\$\{{{name}:?-(?P<value>[^}}$`]*)\}}", written)
    if default is not None:
        value_start, value_end = offset + default.start("value"), offset + default.end("value")
        current = default.group("value")
    elif not any(c in written for c in "$`"):
        value_start, value_end, current = offset, offset + len(written), written
    else:
        raise FixError(f"{name} is computed, not given a default")
    new = transformed(change.transform, current) if change.transform else plain_text(change.value)
    if any(c in new for c in "}$`") or (not quote and any(c in new for c in " []{}*?")):
        raise FixError(f"{new!r} cannot be written into {name}'s default as it is")
    return text[:value_start] + new + text[value_end:]


def is_comment(text: str, line: int, col: int) -> bool:
    """Whether tree-sitter-bash reads a comment starting at this place (not a `#` inside a quoted word)."""
    start = _offset(text, line, col)
    offset = len(text[:start].encode("utf-8"))
    node = _parse(text.encode("utf-8")).root_node.descendant_for_byte_range(offset, offset)
    return node is not None and node.type == "comment" and node.start_byte == offset
