"""Records of followed calls, and whether each still holds in the tree now.

A reading that runs a function of another module (a recipe calling its base builder) stores a record of that run
with the file's outcome (FileOutcome.calls): what the run used (files and module parts, with their digests), what
it gave, on which lines, and the records of the calls it made in turn. A later run keeps the outcome while each
record holds: what its run used means the same (its lines perhaps moved), or, run again (`RecordCheck.verify`), it
gives the same result at lines that map one to one. Apart from cache.py, which stores the records with the entries,
so that "is this stored reading still right" has one home.
"""

from __future__ import annotations

import hashlib
import json

from offlint.cache_format import record_json, str_list, str_map
from offlint.part_digests import line_moves, same_meaning

# The state of a dependency that did not exist or could not be read (file_state)
ABSENT_FILE = "absent"


def file_state(digests, path: str) -> str:
    """What a dependency is now: its digest, or ABSENT_FILE when it does not exist or cannot be read (a reading
    that looked for a file and did not find it changes when the file appears)."""
    return digests.get(path) or ABSENT_FILE


class Records:
    """Call records by ID (RecordCheck's table): those of the entries file read and decoded on first use (`spans`:
    where each lies, and the IDs of the calls it nests), those of this run or of blocks as given (`values`). A
    record that is not there or does not decode is None: the entries that recorded it are read again."""

    def __init__(self, read=None):
        self.values: dict[str, list] = {}
        self.spans: dict[str, tuple[int, int, list[str]]] = {}
        self._read = read  # (offset, length) -> the bytes there, or None

    def get(self, rid: str, default=None):
        found = self.values.get(rid)
        if found is None:
            span = self.spans.get(rid)
            if span is None or self._read is None:
                return default
            data = self._read(span[0], span[1])
            try:
                found = json.loads(data) if data is not None else None
            except ValueError:
                found = None
            if not (isinstance(found, list) and len(found) == 11 and found[10] == span[2]):
                del self.spans[rid]  # damaged: as if not there
                return default
            self.values[rid] = found
        return found

    def __contains__(self, rid: object) -> bool:
        return rid in self.values or rid in self.spans

    def holds_all(self, rids: list[str]) -> bool:
        """Whether every one of `rids` (texts) is in the table (`in`, with one look at the spans for all)."""
        return not rids or all(rid in self.values for rid in set(rids).difference(self.spans))

    def __getitem__(self, rid: str) -> list:
        found = self.get(rid)
        if found is None:
            raise KeyError(rid)
        return found

    def update(self, more) -> None:
        self.values.update(more)


class RecordCheck:
    """Whether followed calls recorded in stored outcomes (FileOutcome.calls) still give the same in the tree now,
    each record judged once per run (`held`).

    A record is [path, function, arguments, depth, reach, refused, {file: digest}, {file: {part: digest}}, digest of
    the result, its lines [[file, [line, ...]], ...], [ID of a call its run made and recorded, ...]]: the files and
    parts are what the run itself used (the function's own part and its module's included), the nested calls
    stand for what theirs used. It holds when what the run itself used means the same (its lines perhaps moved)
    and every nested call holds: then the run would go as it went, its result's lines moved with theirs. Else the
    call is run again (`verify(path, function, arguments, depth)`: (ID, {ID: record}) of its record now, or None),
    and must have used the same files, gone as deep, refused as many calls and given the same result but for the
    lines of those files: each line of the old result at a place of the new one moves to that line, in order."""

    def __init__(self, digests, definitions, verify, now: bool = True):
        """`now`: also give each record as it is now (a file read again stores its units' records so)."""
        self.digests, self.definitions, self.verify, self.now = digests, definitions, verify, now
        self.held: dict[int, tuple] = {}  # id of a stored record -> (the record, the answer of `held`)
        self._moves: dict[tuple, dict[int, int] | None] = {}  # (file, parts recorded) -> line_moves

    def holds(self, rid: str, table: dict) -> tuple | None:
        """(line moves of the files the record's result names: {file: {old line: new line}}, its ID now, {ID:
        record} of it and its nested records now; both None unless `now`) or None when it may not hold."""
        record = table.get(rid)
        if not isinstance(record, list):
            return None
        known = self.held.get(id(record))
        if known is not None and known[0] is record:
            return known[1]
        self.held[id(record)] = (record, None)  # a record nested in itself (damaged) holds nothing
        answer = self._holds(record, table)
        self.held[id(record)] = (record, answer)
        return answer

    def _holds(self, record: list, table: dict) -> tuple | None:
        if not (len(record) == 11 and str_map(record[6]) and isinstance(record[7], dict)
                and all(str_map(parts) for parts in record[7].values()) and str_list(record[10])):
            return None
        path, function, args, depth, reach, refused, files, parts, result, lines, nested = record
        if not isinstance(lines, list):
            return None
        moves: dict[str, dict[int, int]] = {}
        now_table: dict[str, list] = {}
        now_nested: list[str] = []
        again = False
        for rid in nested:
            found = self.holds(rid, table)
            if found is None or not merge_moves(moves, found[0]):
                again = True
                break
            if self.now:
                now_nested.append(found[1])
                now_table.update(found[2])
        now_files: dict[str, str] = {}
        now_parts: dict[str, dict[str, str]] = {}
        if not again:
            for file, recorded in files.items():
                state = now_files[file] = file_state(self.digests, file)
                used = parts.get(file)
                if state == recorded:
                    if used is not None:
                        now_parts[file] = used
                    continue
                now = self.definitions(file) if used and self.definitions is not None else None
                if now is None or not same_meaning(used, now):
                    again = True
                    break
                now_parts[file] = {name: now[name] for name in used}
                found = self.line_moves(file, used, now)  # every line of its parts, moved or not: the file changed
                if found is None or not merge_moves(moves, {file: found}):
                    again = True
                    break
        if not again and not self.now:
            try:
                if all(run[0] not in moves or set(run[1]) <= moves[run[0]].keys() for run in lines):
                    return moves, None, None
            except (TypeError, IndexError, KeyError):
                return None  # not what offlint writes
            again = True  # a line of the result its parts' moves do not give
        old_lines = _flat_lines(lines)
        if old_lines is None:
            return None
        if not again:
            runs: list[list] = []
            for file, line in old_lines:
                mapping = moves.get(file)
                if mapping is not None:
                    line = mapping.get(line)
                    if line is None:
                        again = True  # a line of the result its parts' moves do not give
                        break
                if runs and runs[-1][0] == file:
                    runs[-1][1].append(line)
                else:
                    runs.append([file, [line]])
        if not again:
            now = [path, function, args, depth, reach, refused, now_files, now_parts, result, runs, now_nested]
            rid = record_id(now)
            now_table[rid] = now
            return moves, rid, now_table
        found = self.verify(path, function, args, depth) if self.verify is not None else None
        if found is None:
            return None
        rid, now_table = found
        new = now_table.get(rid)
        if not (isinstance(new, list) and len(new) == 11) or new[4:6] != [reach, refused] or new[8] != result \
                or new[6].keys() != files.keys() or new[7].keys() != parts.keys() \
                or any(new[7][file].keys() != names.keys() for file, names in parts.items()) \
                or _files_of(new, now_table) != _files_of(record, table):
            return None
        new_lines = _flat_lines(new[9])
        if new_lines is None or len(old_lines) != len(new_lines):
            return None
        moves = {}
        for (file, old), (file_now, line) in zip(old_lines, new_lines):
            if file != file_now or moves.setdefault(file, {}).setdefault(old, line) != line:
                return None
        recorded = _states_of(record, table, {})
        for file, lines_of in list(moves.items()):
            pairs = sorted(lines_of.items())
            if any(a[1] >= b[1] for a, b in zip(pairs, pairs[1:])):
                return None  # the result's lines not in their order: not moved, changed
            if file_state(self.digests, file) == recorded.get(file):  # unchanged: every line stays, not only these
                if any(old != line for old, line in pairs):
                    return None
                del moves[file]
        return moves, rid, now_table

    def line_moves(self, file: str, recorded: dict[str, str], now: dict[str, str]) -> dict[int, int] | None:
        """part_digests.line_moves, once per file and parts (the same are asked for by many records and entries)."""
        key = (file, tuple(sorted(recorded.items())))
        if key not in self._moves:
            self._moves[key] = line_moves(recorded, now)
        return self._moves[key]


def record_id(record: list) -> str:
    """The digest of the record's JSON text with sorted keys (cache_format.record_json: the text json.dumps writes)."""
    return hashlib.blake2b(record_json(record), digest_size=16).hexdigest()


def _states_of(record: list, table: dict, states: dict[str, str], depth: int = 0) -> dict[str, str]:
    """The files a record's run used (nested calls' runs included) with their digests then."""
    if isinstance(record, list) and len(record) == 11 and str_map(record[6]) and depth < 64:
        states.update(record[6])
        for rid in record[10] if str_list(record[10]) else ():
            _states_of(table.get(rid), table, states, depth + 1)
    return states


def _files_of(record: list, table: dict, seen: set | None = None) -> set[str] | None:
    """The files a record's run used, its nested calls' runs included (None: a nested record is missing)."""
    seen = set() if seen is None else seen
    files = set(record[6]) if isinstance(record, list) and len(record) == 11 and isinstance(record[6], dict) \
        else None
    if files is None:
        return None
    for rid in record[10] if isinstance(record[10], list) else ():
        if rid in seen:
            continue
        seen.add(rid)
        more = _files_of(table.get(rid), table, seen)
        if more is None:
            return None
        files |= more
    return files


def _flat_lines(lines: object) -> list[tuple[str, int]] | None:
    """A record's lines ([[file, [line, ...]], ...]) as (file, line) pairs in order; None when damaged."""
    if not isinstance(lines, list):
        return None
    out = []
    for run in lines:
        if not (isinstance(run, list) and len(run) == 2 and isinstance(run[0], str) and isinstance(run[1], list)
                and all(type(n) is int for n in run[1])):
            return None
        out.extend((run[0], line) for line in run[1])
    return out


def merge_moves(moves: dict[str, dict[int, int]], more: dict[str, dict[int, int]]) -> bool:
    """Add `more` line moves (each file's one-to-one) to `moves`; False when they disagree (a line moved to two
    places, two lines to one). The dicts of `more` are not changed, and may be those of `moves` after."""
    for file, lines in more.items():
        if not lines:
            continue
        into = moves.get(file)
        if into is None:
            moves[file] = lines  # shared until something is added to it
            continue
        if into is lines or into == lines:
            continue
        # (by whole dicts, not line by line: the moves of a recipe file's parts, thousands of lines, are merged
        # once per call record that ran a function of it)
        merged = {**into, **lines}
        if merged != {**lines, **into}:
            return False  # a line both move, to two places
        if len(set(merged.values())) != len(merged):
            return False  # two lines moved to one
        moves[file] = merged
    return True
