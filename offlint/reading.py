"""Opening files of the linted tree: regular files only, never more than the size limit, never blocking.

offlint reads whatever a pull request contains. `open()` on a named pipe blocks until a writer comes; a link to
`/dev/zero` has `st_size` 0 and never ends; a link can point anywhere. So every file of the linted tree is opened
here, and only here: `lstat` first (a special file is never opened, since opening a device can itself do
something), then a non-blocking open that does not follow a final symbolic link (unless the caller asks), an
`fstat` of what was opened (so the check and the read concern the same file), and at most MAX_BYTES + 1 bytes
read, whatever the file claims its size is.
"""

from __future__ import annotations

import errno
import os
import stat

MAX_BYTES = 2 * 1024 * 1024
_CHUNK = 256 * 1024
_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
_FLAGS_NOFOLLOW = _FLAGS | getattr(os, "O_NOFOLLOW", 0)  # a final symbolic link is refused
BOM = b"\xef\xbb\xbf"  # UTF-8's byte order mark


class ReadError(Exception):
    """A one-line reason why a file cannot be read (what is wrong, and what to do where that helps)."""


def kind_of_mode(mode: int) -> str:
    """What a non-regular file is, in words."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    return "not a regular file"


def not_regular(mode: int) -> str:
    return f"not a regular file ({kind_of_mode(mode)}); offlint reads only regular files"


def read_bytes(path: str | os.PathLike, limit: int = MAX_BYTES, follow_links: bool = False) -> bytes:
    """The file's bytes; ReadError when it is not a regular file, cannot be opened, or holds more than `limit`.

    `follow_links`: a final symbolic link is followed (to a regular file only); otherwise it is refused.
    """
    fd, size = _open_regular(path, follow_links)
    try:
        return read_fd(fd, limit, size)
    finally:
        os.close(fd)


def read_head(path: str | os.PathLike, size: int) -> bytes:
    """At most the first `size` bytes of a regular file (to sniff a #! line or NUL bytes); ReadError otherwise."""
    fd, _ = _open_regular(path, False)
    try:
        return os.read(fd, size)
    except OSError as exc:
        raise ReadError(_os_problem(exc)) from None
    finally:
        os.close(fd)


def _open_regular(path: str | os.PathLike, follow_links: bool) -> tuple[int, int]:
    """A descriptor of the regular file at `path`, opened without blocking, and its size as it was when opened."""
    try:
        info = os.stat(path) if follow_links else os.lstat(path)
    except OSError as exc:
        raise ReadError(_os_problem(exc)) from None
    except ValueError:  # a NUL in the name (module_index's lookups, a damaged cache's paths): no file has it
        raise ReadError("no such file or directory") from None
    if stat.S_ISLNK(info.st_mode):
        raise ReadError("a symbolic link; offlint does not follow links inside the linted tree")
    if not stat.S_ISREG(info.st_mode):
        raise ReadError(not_regular(info.st_mode))
    try:
        fd = os.open(path, _FLAGS if follow_links else _FLAGS_NOFOLLOW)
    except OSError as exc:
        raise ReadError(_os_problem(exc)) from None
    try:
        opened = os.fstat(fd)
    except OSError as exc:
        os.close(fd)
        raise ReadError(_os_problem(exc)) from None
    if not stat.S_ISREG(opened.st_mode):  # replaced between the lstat and the open
        os.close(fd)
        raise ReadError(not_regular(opened.st_mode))
    return fd, opened.st_size


def read_fd(fd: int, limit: int = MAX_BYTES, size: int = 0) -> bytes:
    """At most `limit` bytes from an open descriptor (a file or standard input); ReadError past that.

    `size`: a regular file's size when it was opened. One read asks for a byte more than that, and when it gives
    exactly `size` bytes the file has ended where its size said: no second read to find the end (one system call
    fewer per file). Otherwise (it grew, shrank, or a read gave less) the reads go on until one gives nothing."""
    chunks: list[bytes] = []
    total = 0
    if 0 < size <= limit:
        try:
            chunk = os.read(fd, size + 1)
        except OSError as exc:
            raise ReadError(_os_problem(exc)) from None
        if len(chunk) == size:
            return chunk
        chunks.append(chunk)
        total = len(chunk)
    while total <= limit:
        try:
            chunk = os.read(fd, min(_CHUNK, limit + 1 - total))
        except OSError as exc:
            raise ReadError(_os_problem(exc)) from None
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    if total > limit:
        raise ReadError(f"more than {_size(limit)}, over offlint's size limit (generated?); exclude it or split it")
    return b"".join(chunks)


def decode(data: bytes, other_comments: bool = False) -> str:
    """The text of a file's bytes: UTF-8 (a BOM is dropped); ReadError for binary or other encodings.
    `other_comments`: bytes of another encoding in comments alone are taken, each as U+FFFD (see read_text)."""
    if b"\0" in data:
        raise ReadError("binary file (contains NUL bytes); not a Python, YAML or shell file")
    data = data[3:] if data.startswith(BOM) else data  # ("utf-8-sig", without that codec's Python-level function)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        text = data.decode("utf-8", "replace") if other_comments else ""
        if text and all("#" in line[:line.index("\ufffd")] for line in text.splitlines() if "\ufffd" in line):
            return text
        raise ReadError(f"not UTF-8 text (invalid byte at offset {exc.start}); save it as UTF-8") from None


# Files whose own readers refuse bytes that are not UTF-8 anywhere (PyYAML, tomllib, json): the others, Python and
# shell, are taken with such bytes in their comments (decode)
_STRICTLY_UTF8 = frozenset({".yaml", ".yml", ".toml", ".json"})


def read_text(path: str | os.PathLike, limit: int = MAX_BYTES, follow_links: bool = False) -> str:
    """A file's text. A Python or shell file whose comments alone hold bytes of another encoding (a fork's GBK or
    Latin-1 comments) is read, those bytes each U+FFFD: CPython compiles such a module when it imports it, and bash
    never decodes a comment (SynerFuse's parallel_state.py, a helper's sweep: exit 2 for the whole tree)."""
    return decode(read_bytes(path, limit, follow_links),
                  other_comments=os.path.splitext(path)[1].lower() not in _STRICTLY_UTF8)


def text_or_error(path: str) -> tuple[str, str]:
    """(text, "") or ("", why not): for callers that report an unreadable file and go on."""
    try:
        return read_text(path), ""
    except ReadError as exc:
        return "", str(exc)


class OnFirstUse(dict):
    """path -> a value computed the first time it is asked for; None where there is none (get() then gives
    its default). A pre-commit run touches few of a tree's files, so nothing is read or hashed ahead."""

    def __init__(self, compute):
        super().__init__()
        self._compute = compute

    def __missing__(self, path: str):
        value = self[path] = self._compute(path)
        return value

    def get(self, path: str, default=None):
        value = self[path]
        return default if value is None else value


def _os_problem(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "a symbolic link (or a loop of them); offlint does not follow links inside the linted tree"
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return "no such file or directory"
    return f"cannot read: {exc.strerror or exc}"


def _size(limit: int) -> str:
    return f"{limit // (1024 * 1024)} MiB" if limit % (1024 * 1024) == 0 else f"{limit} bytes"
