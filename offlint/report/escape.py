"""Text from linted files made safe to print: every reporter's paths, messages and source lines pass through here.

A key, value or file name comes from whoever wrote the linted tree. Printed raw, an escape sequence in it
(`cpu_offloading\\x1b[2J`) drives the reader's terminal or CI log, a carriage return overwrites what came before
it, a newline splits one finding into two lines that line-based tools then misread, a bidirectional control
reorders what a reviewer sees, and a file name that is not UTF-8 (a lone surrogate in Python) cannot even be
written. `printable` writes each such character as a visible escape (`\\x1b`, `\\n`, `\\u202e`, `\\udcff`);
tabs and every ordinary character, non-ASCII included, are kept. `json_dumps` does the same for the JSON formats
in JSON's own `\\uXXXX` notation, so a parser still reads the exact original string.
"""

from __future__ import annotations

import json
import unicodedata

_NAMED = {"\n": "\\n", "\r": "\\r"}
_CATEGORIES = {"Cc", "Cf", "Cs", "Zl", "Zp"}  # controls, format (bidi, zero-width), surrogates, line separators


def _unsafe(char: str, keep: str = "\t") -> bool:
    return char not in keep and (unicodedata.category(char) in _CATEGORIES or char in "\ufffe\uffff")


def printable(text: str, keep: str = "\t") -> str:
    """`text` with control, format and separator characters written as backslash escapes, except those in
    `keep` (a format whose own syntax carries line breaks, such as XML, keeps them)."""
    if text.isprintable():
        return text
    return "".join(_escape(c) if _unsafe(c, keep) else c for c in text)


def _escape(char: str) -> str:
    code = ord(char)
    if char in _NAMED:
        return _NAMED[char]
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def json_dumps(value: object) -> str:
    """json.dumps (indented, non-ASCII kept) with the characters `printable` escapes written as \\uXXXX, which
    JSON itself leaves raw (DEL, C1 controls, bidi controls, lone surrogates): the same data, safe to print."""
    text = json.dumps(value, indent=2, ensure_ascii=False)
    if text.isprintable() or all(c in "\n" or not _unsafe(c) for c in text):
        return text
    # Outside strings a JSON document holds only ASCII punctuation, digits, letters and whitespace, so every
    # such character is inside a string, where \uXXXX means the same character.
    return "".join(_json_escape(c) if c != "\n" and _unsafe(c) else c for c in text)


def _json_escape(char: str) -> str:
    code = ord(char)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
