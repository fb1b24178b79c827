"""Where offlint keeps its caches, and which of the files there it trusts.

offlint runs as a CI gate on pull requests, so the checked tree is hostile, and a cache file is read back into the
check: this module is the one place that decides what may be read and how files are written (the entries, the
whole-run answer and the linked findings of `cache.py`, the warm start of `warm_start.py`).
- Nothing inside the checked tree: the caches live in the user's cache directory (`OFFLINT_CACHE_DIR`, else
  `$XDG_CACHE_HOME/offlint`, else `~/.cache/offlint`), one folder per project root, and none is used for a
  project the cache home lies inside.
- Only files this user wrote: a folder and its files must belong to the current user, be writable by nobody
  else, and be regular files no bigger than MAX_CACHE_BYTES (symbolic links are not followed, a FIFO does not
  block the open).
- Written whole or not at all: a file is written beside its target and renamed over it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import tempfile
from pathlib import Path

try:
    import fcntl
except ImportError:  # not POSIX: appended blocks are written without a lock
    fcntl = None

ENV_DIR = "OFFLINT_CACHE_DIR"
CACHEDIR_TAG = ("Signature: 8a477f597d28d172789f06886806bc55\n"
                "# This file is a cache directory tag created by offlint.\n"
                "# For information about cache directory tags, see https://bford.info/cachedir/\n")
MAX_CACHE_BYTES = 512 * 1024 * 1024  # a cache file bigger than this is not one offlint wrote for a real tree
_NO_FOLLOW = os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def cache_home() -> Path:
    """Where offlint keeps its caches: OFFLINT_CACHE_DIR, else $XDG_CACHE_HOME/offlint, else ~/.cache/offlint."""
    explicit = os.environ.get(ENV_DIR)
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "offlint"


def project_cache_dir(root: Path) -> Path | None:
    """The cache folder of the project at `root`, or None when the cache must not be used for it (the cache
    home lies inside the project, so the checked tree could have supplied it)."""
    try:
        home = cache_home().resolve()
        project = root.resolve()
    except (OSError, RuntimeError):
        return None
    if home == project or project in home.parents:
        return None
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in project.name)[:40] or "root"
    return home / f"{name}-{hashlib.blake2b(str(project).encode(), digest_size=8).hexdigest()}"


def owned_private_dir(path: Path) -> bool:
    """A real directory (not a link) of the current user that nobody else can write to."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid() and not info.st_mode & 0o022


def make_private_dir(path: Path) -> bool:
    """Create the project cache folder `path` (mode 0700) and tag the cache home as a cache (CACHEDIR.TAG, which
    backup tools skip); whether it is now a folder `owned_private_dir` accepts. OSError when it cannot be made."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not owned_private_dir(path):
        return False
    tag = path.parent / "CACHEDIR.TAG"
    if not tag.exists():
        write_atomically(tag.parent, tag, CACHEDIR_TAG)
    return True


def owned_file(info: os.stat_result) -> bool:
    """Whether an open file's `os.fstat` says it is a regular file of the current user that nobody else can write
    to, and no bigger than MAX_CACHE_BYTES."""
    return stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid() and not info.st_mode & 0o022 \
        and info.st_size <= MAX_CACHE_BYTES


def open_owned(path: Path | None):
    """A file `owned_file` accepts, opened for reading; None for anything else. Opened without following links and
    without blocking (a FIFO planted here must not hang the check)."""
    if path is None:
        return None
    try:
        descriptor = os.open(path, os.O_RDONLY | _NO_FOLLOW)
    except OSError:
        return None
    handle = os.fdopen(descriptor, "rb")
    if not owned_file(os.fstat(handle.fileno())):
        handle.close()
        return None
    return handle


def open_owned_for_append(path: Path, identity: tuple[int, int]):
    """The file `path` opened for appending (unbuffered), when it is still the one read (`identity`: its device and
    inode then) and `owned_file` accepts it; None otherwise."""
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | _NO_FOLLOW)
    except OSError:
        return None
    handle = os.fdopen(descriptor, "wb", buffering=0)
    info = os.fstat(descriptor)
    if not owned_file(info) or (info.st_dev, info.st_ino) != identity:
        handle.close()
        return None
    return handle


def read_owned(path: Path | None) -> bytes | None:
    """The bytes of a file `open_owned` accepts (at most MAX_CACHE_BYTES); None for anything else."""
    handle = open_owned(path)
    if handle is None:
        return None
    with handle:
        data = handle.read(MAX_CACHE_BYTES + 1)
    return data if len(data) <= MAX_CACHE_BYTES else None


def write_atomically(directory: Path, target: Path, data: str | list) -> None:
    """`data`: text, or the bytes-like chunks of the file."""
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".part")
    try:
        with os.fdopen(handle, "wb") as out:
            if isinstance(data, str):
                out.write(data.encode("ascii", "backslashreplace"))
            else:
                out.writelines(data)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def locked(handle, exclusive: bool):
    """An flock on an open file for the block, shared or `exclusive` (nothing where locks are not available)."""
    held = False
    if fcntl is not None:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            held = True
        except OSError:
            pass
    try:
        yield
    finally:
        if held:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
            except OSError:
                pass
