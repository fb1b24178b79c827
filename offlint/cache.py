"""The content-hash cache: what reading and checking one file gave, reused while valid.

An entry is keyed by the file's path and the hash of its text, and remembers the hash of every other file
its reading depended on (imported base builders, helpers, constants, a local Hugging Face config.json). Of a
Python module it used only in part, it also remembers which parts and their hashes (`definition_digests`: the
module-level statements, and each module-level function it ran or looked at), by what they mean and on which
lines they lie. It is valid while every other file is unchanged, or changed only in parts it did not use or
only where they mean the same (a comment, lines moved: its locations are moved with them): an edit of a base
builder's function re-reads the recipes that ran that function, not every recipe that imports the module. The same is kept per unit
(`FileOutcome.unit_used`), so a file read again reuses the units whose parts are unchanged (pipeline); a file
edited outside every definition keeps its units. The whole cache is keyed by a fingerprint of everything else
that decides the result: offlint's own code and rules, the options, the megatron-core version and the project's
pyproject.toml. Not the set of Python files: what a reading asked of it (which file an import names, the files of a
package, whether a file exists) is among its dependencies as a lookup (module_index), so an added or removed
module re-reads only the files whose questions it answers differently. Beside the entries, the findings
of each launch command linked to the tree's recipes (`linked_findings`), keyed by the stored payloads of its file and
of the files defining the recipes it may link to: a pre-commit run whose those files are as stored takes them
instead of decoding those recipes and checking the command again.

Where it lives and which of its files it trusts (the checked tree is hostile: nothing inside it, only files this
user wrote and nobody else can write) is cache_files.py's. Entries are only data: JSON (cache_format.py), so a
planted or damaged file can at worst be ignored. Any problem reading it means "no cache", never an error and never
a different answer.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from offlint import cache_files
from offlint.cache_format import (STR_ONLY, VALUE_CLASSES, CacheFormatError, Codec, orjson, plain_json, str_list,
                                  str_map, str_maps)
from offlint.call_records import RecordCheck, Records, file_state, merge_moves
from offlint.part_digests import same_meaning
from offlint.relocation import Unmovable, relocate
from offlint.sources.module_index import LOOKUP
from offlint.suppressions import Suppression
from offlint.types import Finding, Unit, UnitKind

# 13: lookups of the set of files among the dependencies (module_index); 12: payloads without call records
# (Cache.encode); 11: tuples of plain values shared within an entry (cache_format); 10: blocks appended
# (Cache._append), call records read on first use (call_records.Records); 9: records of followed calls
# (FileOutcome.calls); 8: a summary of each outcome in the index (Summary)
FORMAT = 13
MAX_BLOCKS = 64  # blocks appended to an entries file before it is written whole again


@dataclass
class FileOutcome:
    """Everything one file contributes to a check, as computed when it was read."""

    path: str
    digest: str
    units: list[Unit] = field(default_factory=list)
    suppressions: list[Suppression] = field(default_factory=list)
    error: str | None = None
    findings: list[Finding] = field(default_factory=list)  # of its units that need no linking (not commands)
    deps: dict[str, str] = field(default_factory=dict)  # other files read while reading it -> their digest
    # Of those files, the ones read only in part: path -> {MODULE or a function's name: definition_digests'};
    # under its own path, all of a Python file's own parts (its units come from them)
    parts: dict[str, dict[str, str]] = field(default_factory=dict)
    # Per unit a function gave (or did not: no unit of that name), what its reading used: "N" the whole of file N,
    # "N:part" one part of it, N numbering [this file, *sorted(deps)]; an edit re-reads only the units it concerns
    unit_used: dict[str, list[str]] = field(default_factory=dict)
    # The records of followed calls its units' readings noted instead of what those runs used ("cID" in
    # unit_used), and of the calls those runs made: ID -> record (RecordCheck). Not in the stored payload (the
    # entries file holds each record once, in its records section): a decoded outcome's is the cache's table.
    calls: dict[str, list] = field(default_factory=dict)


@dataclass(frozen=True)
class Summary:
    """What a run that reads a file only for context (a pre-commit run's file that imports a changed one) needs to
    know of its stored outcome before decoding it, kept in the index: the names of its recipe units, whether it has
    units that linking needs whatever their names (launch commands, YAML layers), the files its findings point
    to (location and related), and whether it has suppression comments or a read error."""

    recipes: frozenset[str]
    linked: bool
    touches: frozenset[str]
    suppressions: bool
    error: bool
    # Every layer of its units sets each key once (plainly: no `+key`, `~key`): the order of a layer's
    # assignments, which moved lines can change (relocation._same_order), decides nothing
    distinct: bool = False

    @classmethod
    def of(cls, outcome: FileOutcome) -> "Summary":
        return cls(frozenset(u.name for u in outcome.units if u.kind == UnitKind.RECIPE),
                   any(u.kind != UnitKind.RECIPE for u in outcome.units),
                   frozenset(path for f in outcome.findings
                             for path in (f.location.path, *(r.location.path for r in f.related))),
                   bool(outcome.suppressions), outcome.error is not None,
                   all(len({a.key for a in layer.assignments}) == len(layer.assignments)
                       and all(a.op == "set" for a in layer.assignments)
                       for unit in outcome.units for layer in unit.layers))

    def encoded(self) -> list:
        return [sorted(self.recipes), self.linked, sorted(self.touches), self.suppressions, self.error, self.distinct]

    @classmethod
    def decoded(cls, data: object) -> "Summary | None":
        if not (isinstance(data, list) and len(data) == 6 and str_list(data[0]) and str_list(data[2])
                and all(type(flag) is bool for flag in (data[1], data[3], data[4], data[5]))):
            return None
        return cls(frozenset(data[0]), data[1], frozenset(data[2]), data[3], data[4], data[5])


class Deferred:
    """A stored outcome valid as stored (its locations perhaps moved with their lines), not decoded yet: `summary`
    says what it holds, `outcome()` decodes it (or, should the stored payload not decode, reads the file again
    through `read_again`); `outcome(names)`, only the units of those names, and none of its findings (a pre-commit
    run links launch commands to some of its recipes, and its findings concern no target: Summary.touches)."""

    def __init__(self, path: str, digest_: str, summary: Summary, decode, read_again=None):
        self.path, self.digest, self.summary = path, digest_, summary
        self._decode, self.read_again = decode, read_again
        self._outcome: FileOutcome | None = None
        self.again = False  # read again: its outcome is not the stored payload

    def outcome(self, names: set[str] | None = None) -> FileOutcome:
        if self._outcome is None:
            self._outcome = self._decode(names)
            if self._outcome is None:
                if self.read_again is None:
                    raise CacheFormatError(f"cache entry of {self.path} does not decode")
                self.again = True
                self._outcome = self.read_again()
        return self._outcome


def digest(text: str) -> str:
    return digest_bytes(text.encode("utf-8", "surrogatepass"))


def digest_bytes(data: bytes) -> str:
    """`digest` of the text whose UTF-8 is `data`."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def fingerprint(*parts: object) -> str:
    """The cache's key: offlint's code and rules (by name, size and mtime) plus the given option values."""
    h = hashlib.blake2b(digest_size=16)
    h.update(repr((FORMAT, parts)).encode())
    package = Path(__file__).resolve().parent
    roots = [package]
    rules = package.parent / "rules"
    if rules.is_dir():
        roots.append(rules)
    for root in roots:  # scandir, not Path.rglob: a twentieth of the time (every run computes this key, some twice)
        found: list[tuple[list[str], os.DirEntry]] = []
        _code_files(str(root), [], found)
        found.sort(key=lambda pair: pair[0])  # Path's order: by parts
        h.update("".join(f"{os.sep.join(parts)}:{info.st_size}:{info.st_mtime_ns}\n"
                         for parts, info in ((parts, entry.stat()) for parts, entry in found)).encode())
    return h.hexdigest()


def _code_files(folder: str, parts: list[str], found: list) -> None:
    """The .py, .yaml and .json files below `folder` as os.walk finds them (folders named __pycache__ and links to
    folders not entered, unreadable folders skipped): ([the parts of its path below the root], its DirEntry)."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        name = entry.name
        try:
            is_dir = entry.is_dir()
        except OSError:
            is_dir = False
        if not is_dir:
            if name.endswith((".py", ".yaml", ".json")) and os.path.splitext(name)[1] in (".py", ".yaml", ".json"):
                found.append(([*parts, name], entry))
        elif name != "__pycache__" and not entry.is_symlink():
            _code_files(entry.path, [*parts, name], found)


@dataclass
class _Entry:
    """A stored outcome: its key fields in the clear, the outcome itself encoded until someone needs it. An entry
    loaded from disk has no payload yet, only where it lies in the file (`span`: offset past the index, length):
    a pre-commit run reads the index and the few payloads it uses, not the whole file."""

    digest: str
    deps: dict[str, str]
    parts: dict[str, dict[str, str]]
    payload: bytes | None  # (bytes, as written: a cold run's 39 MB on Megatron Bridge neither decoded nor encoded)
    span: tuple[int, int] = (0, 0)
    summary: Summary | None = None
    calls: dict[str, list | None] = field(default_factory=dict)  # FileOutcome.calls (None: in Cache.calls)
    # The files its call records' runs used beyond `deps`, with their digests (`_all_deps`); None: not known yet
    call_deps: dict[str, str] | None = None
    on_disk: bool = True  # its payload is in the entries file as read (at `span`); False: stored by this run
    raw_summary: object = None  # the index's summary as read, decoded into `summary` on first use (`summary_now`)

    def summary_now(self) -> Summary | None:
        if self.raw_summary is not None:
            self.summary, self.raw_summary = Summary.decoded(self.raw_summary), None
        return self.summary


class Cache:
    def __init__(self, root: Path, key: str, result_classes: tuple[type, ...] = ()):
        """`result_classes`: the classes of a whole run's result beyond the values of a file's outcome."""
        self.directory = cache_files.project_cache_dir(root)
        self.key = key
        self.codec = Codec(VALUE_CLASSES + (FileOutcome,) + result_classes)
        self._entries: dict[str, _Entry] | None = None  # read on first use: a warm run needs only `last`
        # The whole previous run: its key (every input's digest), the files beyond those it depended on, and its
        # encoded result (`last`, read on first use: a pre-commit run never asks). An unchanged tree gets the same
        # answer without decoding a single unit.
        self._last: tuple[str, dict[str, str], str] | None = None
        self._last_read = True  # nothing to read before `load`
        self.changed = False  # the entries need writing
        self._write_last = False  # the whole-run result needs writing
        self.trusted = False
        self.calls = Records()  # every call record of the entries by ID (RecordCheck), nested ones too
        self._payloads = None  # the open entries file, for payloads read on first use
        self._payload_start = 0
        # The entries file as read, for appending to it (`_append`): its identity (device, inode), where what was
        # read ends, the blocks appended to it, the records it holds; the entries to write in the next block
        self._identity: tuple[int, int] | None = None
        self._read_end = 0
        self._blocks = 0
        self._disk_calls: set[str] = set()
        self._dirty: set[str] = set()
        self._dropped: set[str] = set()
        # Files whose outcome this run is the stored payload as it is (valid as stored, no line moved; or stored
        # now): a launch command linked to their recipes keeps its findings by that payload (`linked_findings`)
        self.exact: set[str] = set()
        # Files whose stored outcome is valid in this run with its lines moved: path -> the moves (`payload_state`)
        self.shifted: dict[str, dict[str, dict[int, int]]] = {}
        self._linked: dict[str, str] | None = None  # command key -> its findings encoded (linked-KEY.json)
        self._linked_used: set[str] = set()
        self._write_linked = False

    @property
    def entries_file(self) -> Path | None:
        return self.directory / f"check-{self.key}.jsonl" if self.directory else None

    @property
    def last_file(self) -> Path | None:
        return self.directory / f"last-{self.key}.json" if self.directory else None

    @property
    def linked_file(self) -> Path | None:
        return self.directory / f"linked-{self.key}.json" if self.directory else None

    def load(self) -> "Cache":
        self._entries, self._last, self._last_read = None, None, False
        self.trusted = self.directory is not None and cache_files.owned_private_dir(self.directory)
        return self

    @property
    def last(self) -> tuple[str, dict[str, str], str] | None:
        """The previous run's (key, the files beyond those it depended on, its encoded result), or None."""
        if not self._last_read:
            self._last_read = True
            data = cache_files.read_owned(self.last_file) if self.trusted else None
            self._last = self._parse_last(data) if data is not None else None
        return self._last

    @last.setter
    def last(self, value: tuple[str, dict[str, str], str] | None) -> None:
        """A new whole-run answer (None: none), written by the next `save`."""
        self._last, self._last_read, self._write_last = value, True, True

    @property
    def entries(self) -> dict[str, _Entry]:
        if self._entries is None:
            self._entries = {}
            handle = cache_files.open_owned(self.entries_file) if self.trusted else None
            if handle is not None:
                self._payloads = handle
                with cache_files.locked(handle, exclusive=False):  # no block half appended
                    self._entries = self._parse_index(handle.readline(cache_files.MAX_CACHE_BYTES))
                    self._payload_start = handle.tell()
                    if self._identity is not None:
                        self._read_blocks(handle, self._entries)
        return self._entries

    def _parse_index(self, line: bytes) -> dict[str, _Entry]:
        """The first line of the entries file: {"format", "key", "size", "calls": {ID: [offset, length, [ID of a
        call it nests, ...]]}, "entries": {path: [digest, deps, parts, offset, length, summary, [ID of a call record,
        ...], {file its records' runs used beyond deps: digest}]}}; "size" bytes follow it, the call records (each
        once, however many files made the call; read on first use, `Records`) and the payloads, at their offsets
        from the line's end; then the blocks appended (`_read_blocks`)."""
        try:
            header = _index_json(line)
        except ValueError:
            return {}
        if not isinstance(header, dict) or header.get("format") != FORMAT or header.get("key") != self.key \
                or not isinstance(header.get("entries"), dict):
            return {}
        entries: dict[str, _Entry] = {}
        calls = header.get("calls")
        self.calls = calls = Records(self._read_span)
        for rid, span in (header["calls"].items() if isinstance(header.get("calls"), dict) else ()):
            if isinstance(span, list) and len(span) == 3 and type(span[0]) is int and type(span[1]) is int \
                    and span[0] >= 0 and span[1] >= 0 and str_list(span[2]):
                calls.spans[rid] = (span[0], span[1], span[2])
        for path, meta in header["entries"].items():
            entry = _row(meta, calls, 0, cache_files.MAX_CACHE_BYTES)
            if entry is not None:  # a damaged entry costs that file a re-read, nothing more
                entries[path] = entry
        size = header.get("size")
        if type(size) is int and size >= 0 and self._payloads is not None:
            info = os.fstat(self._payloads.fileno())
            self._identity = (info.st_dev, info.st_ino)
            self._read_end = len(line) + size
        self._disk_calls = set(calls.spans)
        return entries

    def _read_blocks(self, handle, entries: dict[str, _Entry]) -> None:
        """The blocks appended to the entries file after its payloads (`_append`), each a line {"size", "calls":
        {ID: record}, "entries": {path: row as in the index}, "drop": [path, ...]} and "size" bytes of payloads; a
        row's offset counts from the block's payloads, or, negative, back from the block's line (a payload the file
        held before). They are read in order, each changing the entries the ones before left;
        reading stops at one not whole (a run stopped while appending it: the next save writes the file whole)."""
        end = os.fstat(handle.fileno()).st_size
        position = self._read_end
        while position < end:
            handle.seek(position)
            line = handle.readline(cache_files.MAX_CACHE_BYTES)
            try:
                block = _index_json(line) if line.endswith(b"\n") else None
            except ValueError:
                block = None
            if not (isinstance(block, dict) and type(block.get("size")) is int and block["size"] >= 0
                    and isinstance(block.get("entries"), dict) and isinstance(block.get("calls"), dict)
                    and str_list(block.get("drop"))):
                break
            start = position + len(line)
            if start + block["size"] > end:
                break
            self.calls.update((rid, record) for rid, record in block["calls"].items() if isinstance(record, list))
            self._disk_calls.update(rid for rid, record in block["calls"].items() if isinstance(record, list))
            for path in block["drop"]:
                entries.pop(path, None)
            for path, meta in block["entries"].items():
                before = isinstance(meta, list) and len(meta) == 8 and type(meta[3]) is int and meta[3] < 0
                entry = _row(meta, self.calls, (position if before else start) - self._payload_start,
                             (position if before else start + block["size"]) - self._payload_start)
                if entry is None:
                    entries.pop(path, None)  # a damaged row: that file is read again
                else:
                    entries[path] = entry
            position = start + block["size"]
            self._blocks += 1
        self._read_end = position

    def close(self) -> None:
        """Close the entries file, kept open for payloads read on first use: once the check is over (a program that
        checks again and again had an open file per check until the collector found it)."""
        if self._payloads is not None:
            self._payloads.close()
            self._payloads = None

    def __enter__(self) -> "Cache":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _read_span(self, offset: int, length: int) -> bytes | None:
        """`length` bytes of the entries file at `offset` from its payloads' start; None when not all are there."""
        if self._payloads is None:
            return None
        try:
            data = os.pread(self._payloads.fileno(), length, self._payload_start + offset)
        except (OSError, ValueError, OverflowError):
            return None
        return data if len(data) == length else None

    def _payload(self, entry: _Entry) -> bytes | None:
        """An entry's encoded outcome, read from the file on first use."""
        if entry.payload is None and self._payloads is not None:
            entry.payload = self._read_span(*entry.span)
        return entry.payload

    def _parse_last(self, data: bytes) -> tuple[str, dict[str, str], str] | None:
        head, tab, payload = data.decode("ascii", "replace").partition("\t")
        try:
            meta = json.loads(head) if tab else None
        except ValueError:
            return None
        if not (isinstance(meta, dict) and meta.get("format") == FORMAT and meta.get("key") == self.key
                and isinstance(meta.get("run"), str) and str_map(meta.get("deps"))):
            return None
        return meta["run"], meta["deps"], payload

    def last_result(self, run_key: str, digests) -> object | None:
        """The previous run's result when its inputs (`run_key`) and every other file it read are unchanged."""
        if self.last is None or self.last[0] != run_key:
            return None
        if any(file_state(digests, path) != recorded for path, recorded in self.last[1].items()):
            return None
        try:
            return self.codec.loads(self.last[2])
        except CacheFormatError:
            return None

    def remember_result(self, run_key: str, result: object, covered: set[str]) -> None:
        """Keep `result` for the run keyed by `run_key`; `covered`: the files the key already hashes, the tree's
        Python files among them (so also every lookup of the set of them, module_index). Every other file an entry
        depended on is kept with its digest, and checked before the result is reused."""
        deps = {path: recorded for entry in self.entries.values()
                for path, recorded in _all_deps(entry, self.calls).items()
                if path not in covered and not path.startswith(LOOKUP)}
        try:
            self.last = (run_key, deps, self.codec.dumps(result))
        except (TypeError, ValueError, RecursionError):
            self.last = None
        self._write_last = True
        self.save(None)

    def files_defining(self, names: set[str]) -> list[str]:
        """The files whose stored outcome defines a recipe of one of `names`, from the index's summaries as read (not
        decoded: a pre-commit run asks this of all 2,097 of Bridge's). A file named wrongly by a damaged index is
        only read, and checked as any read file is."""
        found = []
        for path, entry in self.entries.items():
            summary = entry.summary if entry.raw_summary is None else entry.raw_summary
            recipes = summary.recipes if isinstance(summary, Summary) else \
                summary[0] if isinstance(summary, list) and summary and isinstance(summary[0], list) else ()
            if any(type(name) is str and name in names for name in recipes):
                found.append(path)
        return found

    def dependencies(self) -> dict[str, dict[str, str]]:
        """file -> the files its last reading depended on (with their digests then), through call records too."""
        return {path: _all_deps(entry, self.calls) for path, entry in self.entries.items()}

    def lookup(self, path: str, text_digest: str, digests, definitions=None, defer: bool = False,
               records: "RecordCheck | None" = None) -> FileOutcome | Deferred | None:
        """The stored outcome when the file is unchanged and everything it read is, or changed only in parts it
        did not use, or in parts it used only where they mean the same (comments, lines moved): then its locations
        are moved with their lines (`relocation.relocate`). `definitions(path)`: that file's definition_digests now (None when
        it does not parse). `defer`: an outcome valid as stored comes back undecoded (`Deferred`). A followed call
        its units recorded (FileOutcome.calls) must still give the same (`records`, RecordCheck)."""
        entry = self.entries.get(path)
        if entry is None:
            return None
        if records is None:  # records whose runs used nothing that changed still hold
            records = RecordCheck(digests, definitions, None, now=False)
        moving: dict[str, tuple[dict[str, str], dict[str, str]]] = {}  # file -> (parts recorded, parts now)
        if entry.digest != text_digest:
            # Edited, but maybe only where its definitions mean the same: the caller then reads its suppression
            # comments again (the outcome keeps the digest it was stored with).
            own = entry.parts.get(path)
            now = definitions(path) if own and definitions is not None else None
            if now is None or now.keys() != own.keys() or not same_meaning(own, now):
                return None
            if now != own:
                moving[path] = (own, now)
        moved: dict[str, str] = {}  # files changed only in parts this reading did not use: their digest now
        for dep, dep_digest in entry.deps.items():
            state = file_state(digests, dep)
            if state == dep_digest:
                continue
            used = entry.parts.get(dep)
            now = definitions(dep) if used and definitions is not None else None
            if now is None or not same_meaning(used, now):
                return None
            if any(now[name] != recorded for name, recorded in used.items()):
                moving[dep] = (used, now)
            else:
                moved[dep] = state
                moving[dep] = (used, now)  # its lines stay: so that a call record's moves in it cover them too
        moves: dict[str, dict[int, int]] = {}
        for file, (recorded, now) in moving.items():
            lines = records.line_moves(file, recorded, now)
            if lines is None:
                return None
            moves[file] = lines
        for rid in entry.calls:
            held = records.holds(rid, self.calls)
            if held is None or not merge_moves(moves, held[0]):
                return None
        shifting = any(old != new for lines in moves.values() for old, new in lines.items())
        if entry.digest == text_digest and not shifting:
            self.exact.add(path)
        if entry.digest == text_digest and shifting:
            self.shifted[path] = moves
        summary = entry.summary_now() if defer else None
        if summary is not None and entry.digest == text_digest and (not shifting or summary.distinct):
            if moved:
                entry.deps = {**entry.deps, **moved}
                self._dirty.add(path)
            # Moving locations changes no name nor file a summary holds, nor, with every key set once in each
            # layer (`distinct`), which assignment wins: moved only if decoded (a location it cannot move: the
            # file is read again).
            return Deferred(path, entry.digest, summary,
                            lambda names=None: self._moved(only_units(self._decoded(path, entry), names),
                                                           moves if shifting else None))
        outcome = self._moved(self._decoded(path, entry), moves if shifting else None)
        if outcome is None:
            self.read_again(path)
            return None
        if moved:  # still valid as stored, kept so if the entries are written anyway (not written for this alone)
            entry.deps = outcome.deps = {**entry.deps, **moved}
            self._dirty.add(path)
        return outcome

    def _moved(self, outcome: FileOutcome | None, moves: dict[str, dict[int, int]] | None) -> FileOutcome | None:
        """A decoded outcome with its locations moved (None when one cannot be)."""
        if outcome is None or not moves:
            return outcome
        try:
            outcome.units, outcome.findings = relocate(self.codec, outcome.units, outcome.findings, moves)
        except Unmovable:
            return None
        return outcome

    def _decoded(self, path: str, entry: _Entry) -> FileOutcome | None:
        """The stored outcome of `entry`, decoded; None when it is not what offlint wrote for `path`."""
        payload = self._payload(entry)
        if payload is None:
            return None
        try:
            outcome = self.codec.loads(payload)
        except CacheFormatError:
            return None
        if not isinstance(outcome, FileOutcome) or outcome.path != path or outcome.digest != entry.digest:
            return None
        outcome.calls = self.calls
        return outcome

    def read_again(self, path: str) -> None:
        """`path`'s stored outcome is not its outcome in this run after all (it did not decode or move): no launch
        keeps findings by it (`exact`, `shifted`)."""
        self.exact.discard(path)
        self.shifted.pop(path, None)

    def payload_state(self, path: str) -> tuple[str, dict[str, dict[int, int]] | None] | None:
        """(digest of the stored payload, None) when that payload is `path`'s outcome in this run as it is (`exact`);
        (its digest, the line moves) when it is with its lines moved (`shifted`); else None."""
        if path not in self.exact and path not in self.shifted:
            return None
        entry = self.entries.get(path)
        payload = self._payload(entry) if entry is not None else None
        return None if payload is None else (digest_bytes(payload), None if path in self.exact else self.shifted[path])

    def linked_findings(self, key: str) -> list[Finding] | None:
        """The findings a launch command gave when linked to the tree as `key` says (`remember_linked`)."""
        if self._linked is None:
            self._linked = {}
            data = cache_files.read_owned(self.linked_file) if self.trusted else None
            try:
                header = json.loads(data) if data is not None else None
            except ValueError:
                header = None
            if isinstance(header, dict) and header.get("format") == FORMAT and header.get("key") == self.key \
                    and str_map(header.get("commands")):
                self._linked = header["commands"]
        payload = self._linked.get(key)
        if payload is None:
            return None
        try:
            found = self.codec.loads(payload)
        except CacheFormatError:
            return None
        if not (isinstance(found, list) and all(type(f) is Finding for f in found)):
            return None
        self._linked_used.add(key)
        return found

    def remember_linked(self, key: str, findings: list[Finding]) -> None:
        if self._linked is None:
            self.linked_findings(key)  # loads the stored ones
        try:
            self._linked[key] = self.codec.dumps(list(findings))
        except (TypeError, ValueError, RecursionError):
            return
        self._linked_used.add(key)
        self._write_linked = True

    def save_linked(self, prune: bool) -> None:
        """Write the linked commands' findings when some were added (`prune`: only those this run used)."""
        if not self._write_linked or self._linked is None or self.directory is None:
            return
        kept = {k: v for k, v in self._linked.items() if k in self._linked_used} if prune else self._linked
        try:
            if not cache_files.make_private_dir(self.directory):
                return
            cache_files.write_atomically(self.directory, self.linked_file,
                                         [plain_json({"format": FORMAT, "key": self.key, "commands": kept})])
            self._write_linked = False
        except OSError:
            pass

    def own_parts(self, path: str, text_digest: str) -> dict[str, str] | None:
        """definition_digests of a Python file whose stored outcome is of its text as it is (`text_digest`): its
        reading noted all of them (FileOutcome.parts under its own path); None when not stored so."""
        entry = self.entries.get(path)
        return entry.parts.get(path) if entry is not None and entry.digest == text_digest else None

    def previous(self, path: str) -> FileOutcome | None:
        """The stored outcome of `path` whatever changed since (for the units still valid in it), or None."""
        entry = self.entries.get(path)
        payload = self._payload(entry) if entry is not None else None
        try:
            outcome = self.codec.loads(payload) if payload is not None else None
        except CacheFormatError:
            return None
        if not (isinstance(outcome, FileOutcome) and outcome.path == path and outcome.digest == entry.digest):
            return None
        outcome.calls = self.calls
        return outcome

    def encode(self, outcome: FileOutcome) -> bytes:
        """The payload stored for `outcome`: all of it but its call records, which the entries file holds once
        each, in its records section (on Megatron Bridge they were 9.8 MB of 59.5 MB of payloads, written twice)."""
        return self.codec.dumps_ascii(replace(outcome, calls={}))

    def store(self, outcome: FileOutcome, payload: bytes | None = None, summary: Summary | None = None) -> None:
        """Keep `outcome` (`payload`: its encoding, `encode`, when a worker made it; `summary`: its Summary, when the
        worker made that too, from units it kept: pipeline.Held)."""
        try:
            payload = payload if payload is not None else self.encode(outcome)
        except (TypeError, ValueError, RecursionError):
            self.entries.pop(outcome.path, None)  # a value the format cannot hold: that file is read every time
            return
        used = {key[1:] for keys in outcome.unit_used.values() for key in keys
                if isinstance(key, str) and key[:1] == "c"}
        if outcome.calls is not self.calls:  # (a decoded outcome's records are this table's already)
            self.calls.update(outcome.calls)
        self.entries[outcome.path] = _Entry(outcome.digest, outcome.deps, outcome.parts, payload,
                                            summary=summary if summary is not None else Summary.of(outcome),
                                            calls={rid: outcome.calls[rid] for rid in sorted(used)
                                                   if rid in outcome.calls}, on_disk=False)
        self._dirty.add(outcome.path)
        self.exact.add(outcome.path)
        self.changed = True

    def save(self, keep: set[str] | None) -> None:
        """Write the entries (of the files in `keep`, when given) atomically; other keys' files are removed."""
        stale = set(self.entries) - keep if keep is not None else set()
        if not self.changed and not stale and not self._write_last:
            return
        for path in stale:
            del self.entries[path]
        self._dropped |= stale
        self.changed = self.changed or bool(stale)
        if self.directory is None:
            return
        try:
            if not cache_files.make_private_dir(self.directory):
                return
            for old in self.directory.iterdir():
                if old.name.startswith(("check-", "last-", "linked-")) and \
                    old not in (self.entries_file, self.last_file, self.linked_file):
                    old.unlink(missing_ok=True)
            if self.changed:
                self._save_entries()
            if not self._write_last:
                pass  # the file holds the answer as read (a pre-commit run's save appends entries only)
            elif self._last is not None:
                run_key, deps, payload = self._last
                meta = plain_json({"format": FORMAT, "key": self.key, "run": run_key, "deps": deps})
                cache_files.write_atomically(self.directory, self.last_file, [meta, b"\t", payload.encode("ascii")])
            else:
                self.last_file.unlink(missing_ok=True)
            self.changed = self._write_last = False
        except OSError:
            pass  # no writable cache directory: the check runs, only without a cache

    def _save_entries(self) -> None:
        """The entries file: its index, then the payloads. Those read from the previous file are copied as bytes
        from one read of it. A run that changed a few entries of thousands (a pre-commit run) appends them to the
        file as read instead (`_append`), until the file holds as many bytes of outcomes no longer used as used."""
        if self._append():
            return
        stored = None
        if self._payloads is not None:  # payloads and call records not read yet are copied from it
            try:
                self._payloads.seek(self._payload_start)
                stored = memoryview(self._payloads.read(cache_files.MAX_CACHE_BYTES))
            except (OSError, ValueError):
                stored = None
        index: dict[str, list] = {}
        calls: dict[str, list] = {}
        chunks: list = []
        offset = 0

        def span(start: int, length: int):
            return stored[start:start + length] if stored is not None and start + length <= len(stored) else None

        for path, entry in self.entries.items():
            if entry.payload is not None:
                chunk = entry.payload
            else:
                chunk = span(*entry.span)
                if chunk is None:
                    continue  # unreadable now: that file is read again next time
            summary = entry.summary_now()
            summary = summary.encoded() if summary is not None else None
            index[path] = [entry.digest, entry.deps, entry.parts, offset, len(chunk), summary, sorted(entry.calls),
                           _call_deps(entry, self.calls)]
            chunks.append(chunk)
            offset += len(chunk)
            todo = list(entry.calls)
            while todo:  # the records and the calls nested in them
                rid = todo.pop()
                if rid in calls:
                    continue
                record = self.calls.values.get(rid) or entry.calls.get(rid)
                if isinstance(record, list) and len(record) == 11 and str_list(record[10]):
                    data, nested = plain_json(record), record[10]
                else:
                    found = self.calls.spans.get(rid)
                    data, nested = (span(*found[:2]), found[2]) if found is not None else (None, None)
                if data is None:
                    continue  # unreadable now: the files whose units recorded it are read again next time
                calls[rid] = [offset, len(data), nested]
                chunks.append(data)
                offset += len(data)
                todo.extend(nested)
        header = plain_json({"format": FORMAT, "key": self.key, "size": offset, "calls": calls, "entries": index})
        cache_files.write_atomically(self.directory, self.entries_file, [header, b"\n", *chunks])
        self._identity = None  # the file read is no longer the one on disk: a later save writes it whole too
        self._dirty, self._dropped = set(), set()

    def _append(self) -> bool:
        """Append the entries this run changed (`_dirty`) and dropped to the entries file as read, as one block
        (`_read_blocks`); False when the file must be written whole instead: not read, replaced or appended to by
        another run since, or holding too many blocks or unused bytes. Payloads already in the file are not
        written again: a row names where they lie. Appended under an exclusive lock, in one write."""
        if self._identity is None or self._payloads is None or self._blocks >= MAX_BLOCKS:
            return False
        rows: dict[str, list] = {}
        calls: dict[str, list] = {}
        chunks: list[bytes] = []
        size = 0
        for path in sorted(self._dirty):
            entry = self._entries.get(path) if self._entries is not None else None
            if entry is None:
                continue
            if entry.on_disk and entry.span[1] > 0:  # before this block's line: a negative offset from it
                offset, length = entry.span[0] - (self._read_end - self._payload_start), entry.span[1]
            elif not entry.on_disk and entry.payload is not None:
                chunk = entry.payload
                offset, length = size, len(chunk)
                chunks.append(chunk)
                size += length
            else:
                return False
            summary = entry.summary_now()
            summary = summary.encoded() if summary is not None else None
            rows[path] = [entry.digest, entry.deps, entry.parts, offset, length, summary, sorted(entry.calls),
                          _call_deps(entry, self.calls)]
            todo = list(entry.calls)
            while todo:  # the records not in the file yet, and the calls nested in them (a record in the file
                rid = todo.pop()  # was written with those it nests)
                record = self.calls.values.get(rid) or entry.calls.get(rid)
                if rid not in calls and rid not in self._disk_calls and isinstance(record, list) \
                        and len(record) == 11:
                    calls[rid] = record
                    todo.extend(record[10] if str_list(record[10]) else ())
        header = plain_json({"size": size, "calls": calls, "entries": rows,
                             "drop": sorted(self._dropped - set(rows))}) + b"\n"
        used = sum(entry.span[1] if entry.on_disk else len(entry.payload or b"") for entry in self._entries.values())
        if self._read_end + len(header) + size - self._payload_start > 2 * used + (1 << 20):
            return False  # as many bytes no longer used as used: written whole
        out = cache_files.open_owned_for_append(self.entries_file, self._identity)
        if out is None:
            return False
        with out:
            with cache_files.locked(out, exclusive=True):
                if os.fstat(out.fileno()).st_size != self._read_end:
                    return False  # another run appended, or left a block half written: written whole
                data = b"".join([header, *chunks])
                written = out.write(data)
                if written != len(data):
                    return False
        self._blocks += 1
        self._disk_calls.update(calls)
        start = self._read_end + len(header)
        for path, row in rows.items():
            entry = self._entries[path]
            if not entry.on_disk:
                entry.span, entry.on_disk = (start - self._payload_start + row[3], row[4]), True
        self._read_end = start + size
        self._dirty, self._dropped = set(), set()
        return True


def _row(meta: object, calls: "Records", base: int, limit: int) -> _Entry | None:
    """An entry of the index or of a block ([digest, deps, parts, offset, length, summary, [record ID, ...], {file
    its records used: digest}]; its payload at `base` + offset from the payloads' start, ending before `limit`), or
    None when damaged."""
    if not (isinstance(meta, list) and len(meta) == 8):
        return None
    digest_, deps, parts, offset, length, summary, rids, call_deps = meta
    # (each test's common case first, without a call: an index has thousands of rows)
    if not ((type(digest_) is str or isinstance(digest_, str))
            and (type(deps) is dict and STR_ONLY.issuperset(map(type, deps))
                 and STR_ONLY.issuperset(map(type, deps.values())) or str_map(deps))
            and isinstance(parts, dict) and str_maps(parts.values())
            and type(offset) is int and type(length) is int and 0 <= base + offset and 0 <= length
            and base + offset + length <= limit
            and (type(rids) is list and not rids or str_list(rids) and calls.holds_all(rids))
            and (type(call_deps) is dict and not call_deps or str_map(call_deps))):
        return None
    return _Entry(digest_, deps, parts, None, (base + offset, length), None, dict.fromkeys(rids), call_deps,
                  raw_summary=summary)


def only_units(outcome: FileOutcome | None, names: set[str] | None) -> FileOutcome | None:
    """`outcome` with only the units of `names` and no findings (all of it when `names` is None)."""
    if outcome is not None and names is not None:
        outcome.units = [unit for unit in outcome.units if unit.name in names]
        outcome.findings = []
    return outcome


def _all_deps(entry: _Entry, table: Records) -> dict[str, str]:
    """An entry's dependencies: the files its reading used, and those its call records' runs used (nested calls'
    included; `table`: every record by ID)."""
    extra = _call_deps(entry, table)
    return {**entry.deps, **extra} if extra else entry.deps


def _call_deps(entry: _Entry, table: Records) -> dict[str, str]:
    """The files an entry's call records' runs used (nested calls' included) beyond its own deps, with their digests
    then (the first record's, in the order of a walk from its records); kept with the entry (`call_deps`)."""
    if entry.call_deps is None:
        extra: dict[str, str] = {}
        todo, seen = list(entry.calls), set()
        while todo:
            rid = todo.pop()
            record = table.get(rid)
            if rid in seen or not (isinstance(record, list) and len(record) == 11):
                continue
            seen.add(rid)
            for path, recorded in (record[6].items() if str_map(record[6]) else ()):
                if path not in entry.deps:
                    extra.setdefault(path, recorded)
            todo.extend(record[10] if str_list(record[10]) else ())
        entry.call_deps = extra
    return entry.call_deps


def _index_json(line: bytes) -> object:
    """An index or block line's JSON (ValueError when it is not JSON): orjson's reading where it reads it (2.1 MB for
    Megatron Bridge: 1.4-1.7x faster than json's), json's where it refuses it (NaN, a lone surrogate). orjson reads
    an int past 64 bits as a float, json as an int: either is refused where an index holds ints (offsets, lengths,
    sizes: ints, and below cache_files.MAX_CACHE_BYTES), and compares unequal to FORMAT."""
    if orjson is not None:
        try:
            return orjson.loads(line)
        except orjson.JSONDecodeError:
            pass
    return json.loads(line)

