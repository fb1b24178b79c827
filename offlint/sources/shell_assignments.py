"""Assignments in the walker: `X=...`, `X+=...`, `A[i]=...`, and the declarations `export`, `declare`, `typeset`,
`local` and `readonly` (their flags, and `local` scoping). Each value keeps the defaults it took and the decisions
it rests on.
"""

from __future__ import annotations

import re
from dataclasses import replace

from offlint.sources.shell_values import OPENED, _Field, _join, Org, Pos, _Unknown, _Var


_SHELL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # a variable's name (ASCII, as bash's)
_ELEMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\[(.+)\]", re.S)  # `NAME[index]`, as unset takes an element


class Assignments:
    """Assignments and declarations; part of the walker."""

    def set_unknown(self, name: str, reason: str, pos: Pos, exported: bool = False) -> None:
        """`name` set to a value not known here (`exported`: and exported, whether it was before or not)."""
        old = self.st.env.get(name)
        self.st.env[name] = _Var(s=self.st.holes.char(reason), org=((*pos, ""),), lines=(pos[0],), pos=pos,
                                 exported=exported or bool(old and old.exported))

    def unset(self, n) -> None:
        """`unset NAME` (`-v`), and `unset 'NAME[i]'` (or `unset NAME[i]`, the same to bash where no file matches the
        pattern): the element goes, and `"${NAME[@]}"` gives the others (round 5 of the recall study took a launch's
        `--use-distributed-optimizer` out so; the whole array had stayed, or with the unquoted form gone). The array's
        later elements move down an index here, where bash leaves a gap: only `NAME[k]` read after it differs. An
        index offlint cannot read leaves the array unknown; `unset -f` (functions) changes no variable."""
        kids = [c for c in n.named_children if c.type != "comment"]
        pos = (n.start_point[0] + 1, n.start_point[1] + 1)
        names: list[str] = []
        i = 0
        while i < len(kids):
            c, raw = kids[i], self.raw(kids[i])
            if raw.startswith("-"):
                if "f" in raw:
                    return
                i += 1
                continue
            after = kids[i + 1] if i + 1 < len(kids) else None
            if c.type == "variable_name" and after is not None and after.start_byte == c.end_byte and \
                    self.raw(after).startswith("["):  # (unquoted `NAME[i]`: two nodes to the parser)
                names.append(raw + self.raw(after))
                i += 2
                continue
            value = self.scalar(c)[0]
            # (an index offlint cannot read, `unset "A[$j]"`: the array's name is in the text as written)
            names.append(raw.strip("'\"") if self.why(value) else value)
            i += 1
        for text in names:
            element = _ELEMENT.fullmatch(text)
            if element is None:
                self.st.env.pop(text, None)
                continue
            name, index = element.groups()
            var = self.st.env.get(name)
            if var is None or var.unset:
                continue
            if index in ("@", "*"):
                self.st.env.pop(name, None)
                continue
            k = self._index_value(index)
            size = len(var.arr) if var.arr is not None else 1
            if k is None or not -size <= k < size:
                if k is None:
                    self.set_unknown(name, f"an element unset by `unset {text}`", pos)
                continue
            if var.arr is None:
                self.st.env.pop(name, None)
            else:
                self.st.env[name] = replace(var, arr=var.arr[:k % size] + var.arr[k % size + 1:])

    def _index_value(self, index: str) -> int | None:
        """An array index as `unset` gets it: a whole number, or a variable holding one; None otherwise."""
        index = index.strip()
        if re.fullmatch(r"-?\d+", index):
            return int(index)
        var = self.st.env.get(index.lstrip("$")) if _SHELL_NAME.fullmatch(index.lstrip("$")) else None
        value = var.scalar()[0] if var is not None and not var.unset else ""
        return int(value) if re.fullmatch(r"-?\d+", value) else None

    def set_exported(self, name: str, value: str, pos: Pos) -> None:
        """`name` set to `value` by the command at `pos` and exported (what a tool such as `module` or `conda` sets)."""
        self.st.env[name] = _Var(s=value, org=((*pos, ""),) * len(value), lines=(pos[0],), pos=pos, exported=True)

    def scalar(self, val) -> tuple[str, list[Org], str]:
        if val is None:
            return "", [], ""
        self.tok = self.ci(val.start_byte)
        return _join(self.exp(val, False), self.o(val.start_byte))

    def assign(self, n, export: bool = False, declared: str = "") -> None:
        """An assignment, or (`declared`: the declaration's keyword) a declaration's argument written as a quoted
        word (_assign_word); the new value remembers the defaults it took and the decisions it rests on."""
        seen, noted = self.st.seen, self.st.noted
        self.st.seen, self.st.noted = {}, {}
        try:
            if declared:
                name = self._assign_word(n, declared, export)
            else:
                self._assigned_at(n)
                self._assign(n, export)
                name_n = n.child_by_field_name("name")
                name = self.raw(name_n.child_by_field_name("name") or name_n) if name_n is not None else ""
            var = self.st.env.get(name)
            notes = tuple(dict.fromkeys([*self.st.control, *self.st.noted]))
            if var is not None and (self.st.seen or notes):
                self.st.env[name] = replace(var, defaults=tuple(self.st.seen) or var.defaults,
                                            notes=tuple(dict.fromkeys([*notes, *var.notes])))
        finally:
            self.st.seen, self.st.noted = {**seen, **self.st.seen}, {**noted, **self.st.noted}

    def _assigned_at(self, n) -> None:
        if not self.st.sourcing:  # (a sourced file's lines are another file's)
            self.st.out.assignments.append((self.pos(n.start_byte), self.pos(max(n.end_byte - 1, n.start_byte))))

    def _assign_word(self, n, declared: str, export: bool) -> str:
        """`export 'X=v'`, `export "X=$Y"`, `declare "A"=1`: bash assigns the word as written unquoted, NAME=VALUE,
        the value not split. The name assigned; "" for a word whose expansion gives no NAME= (an unknown name, no
        `=`), left alone as before."""
        text, org, cond = self.scalar(n)
        name, eq, value = text.partition("=")
        if not eq or not _SHELL_NAME.fullmatch(name):
            if eq and export and self._computed_name(name):
                # `export "${KEY}"="${VALUE}"` in a loop over a config's variables: any variable may be set, the
                # launch's among them
                pos = self.pos(n.start_byte)
                self.st.env[OPENED] = _Var(s=f"`export {self.raw(n)}` (line {pos[0]}) sets a variable whose name it "
                                             f"reads at run time", exported=True, pos=pos, every_path=True)
            return ""
        self._assigned_at(n)
        self._scope_local(declared, name)
        pos, old = self.pos(n.start_byte), self.st.env.get(name)
        self.st.env[name] = _Var(s=value, org=tuple(org[len(name) + 1:]), cond=cond, lines=(pos[0],), pos=pos,
                                 exported=export or bool(old and old.exported))
        return name

    def _computed_name(self, text: str) -> bool:
        """Whether `text` is a variable's name with parts unknown until run time (`${KEY}`, `GPU_${I}`): holes and
        name characters only, a hole among them."""
        known = "".join(c for c in text if not self.why(c))
        return len(known) < len(text) and _SHELL_NAME.fullmatch(f"A{known}A") is not None

    def _scope_local(self, declared: str, name: str) -> None:
        """`local NAME`: the function's frame keeps the value the name had, for its return."""
        if declared == "local" and self.st.locals and name not in self.st.locals[-1]:
            self.st.locals[-1][name] = self.st.env.get(name)

    def _element(self, node) -> list[_Field]:
        """The words of one element of an array literal, each with the defaults that element's own expansion took
        (_Field.defaults): a launcher's `--nproc_per_node $GPUS` beside `--node_rank $NODE_RANK` (NODE_RANK from
        `${NODE_RANK:-0}`) is a stated count (launch.launcher_world_size)."""
        seen, self.st.seen = self.st.seen, {}
        try:
            fields = self.token(node)
            took = tuple(self.st.seen)
        finally:
            self.st.seen = {**seen, **self.st.seen}
        return [replace(f, defaults=took) for f in fields]  # (a nested array's element's are among them: st.seen)

    def _assign(self, n, export: bool) -> None:
        name_n, val = n.child_by_field_name("name"), n.child_by_field_name("value")
        if name_n is None:
            return
        pos, append = self.pos(n.start_byte), "+=" in [c.type for c in n.children]
        if name_n.type == "subscript":
            return self.assign_elem(name_n, val, pos)
        name = self.raw(name_n)
        old = self.st.env.get(name)
        exported = export or bool(old and old.exported)
        old = None if old is not None and old.unset else old
        if val is not None and val.type == "array":
            elems = tuple(f for el in val.named_children if el.type != "comment" for f in self._element(el))
            if append and old is not None:
                elems = (old.arr if old.arr is not None else (_Field(old.s, old.org, *old.pos, f"${name}"),)) + elems
            var = _Var(arr=elems, lines=(pos[0],), pos=pos, exported=exported)
        else:
            s, org, cond = self.scalar(val)
            if append and old is not None:
                if old.arr is not None:
                    s, org = self.st.holes.char("appended to an array"), [(*pos, "")]
                else:
                    s, org = old.s + s, list(old.org) + org
            var = _Var(s=s, org=tuple(org), cond=cond, lines=(pos[0],), pos=pos, exported=exported)
        self.st.env[name] = var

    def assign_elem(self, sub, val, pos: Pos) -> None:
        name = self.raw(sub.child_by_field_name("name") or sub)
        old = self.st.env.get(name)
        try:
            idx = self.arith(sub.child_by_field_name("index"))
        except _Unknown:
            idx = -1
        if old is None or old.arr is None or not 0 <= idx <= len(old.arr) or val is None:
            return self.set_unknown(name, f"element assignment {self.raw(sub)}=", pos)
        s, org, cond = self.scalar(val)
        f = _Field(s, tuple(org), *self.pos(val.start_byte), self.raw(val), cond or self.st.ctx)
        arr = old.arr[:idx] + (f,) + old.arr[idx + 1 :]
        self.st.env[name] = replace(old, arr=arr, lines=(pos[0],), pos=pos)

    def declare(self, n) -> None:
        """export / declare / typeset / local / readonly: assignments, export flags, `local` scoping."""
        kw, flags = n.children[0].type, ""
        for c in n.children[1:]:
            if c.type == "word" and self.raw(c)[:1] in "-+":
                flags += self.raw(c)[1:] if self.raw(c)[0] == "-" else ""
                if "f" in flags or "p" in flags:
                    return
                continue
            export = kw == "export" and "n" not in flags or "x" in flags
            if c.type in ("string", "raw_string", "concatenation", "word"):
                self.assign(c, export, declared=kw)  # `export 'X=v'`
                continue
            if c.type not in ("variable_name", "variable_assignment"):
                continue
            name_n = c.child_by_field_name("name") if c.type == "variable_assignment" else c
            name = self.raw(name_n.child_by_field_name("name") or name_n) if name_n is not None else ""
            if not name:
                continue
            self._scope_local(kw, name)
            old, p = self.st.env.get(name), self.pos(c.start_byte)
            if c.type == "variable_assignment":
                self.assign(c, export)
            elif kw == "export" and "n" in flags and old is not None:
                self.st.env[name] = replace(old, exported=False)
            elif old is not None:
                self.st.env[name] = replace(old, exported=old.exported or export)
            elif export:
                why = self.st.holes.char(f"${name} is exported but not set in this script")
                self.st.env[name] = _Var(s=why, org=((*p, ""),), unset=True, exported=True, pos=p, lines=(p[0],))
            elif "a" in flags or "A" in flags:
                self.st.env[name] = _Var(arr=(), pos=p, lines=(p[0],))
