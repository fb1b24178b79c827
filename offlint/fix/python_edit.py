"""Python edits with libcst: the exact assignment, keyword argument or dict entry a finding points to.

offlint reads Python with `ast` (fast, but it cannot write a file back); libcst keeps every byte it is not
asked to change (comments, quotes, trailing commas, line breaks), so an edit is a node swapped in its tree and
the module printed back. Sites are found by position: the (line, column) the reader recorded for the
assignment is where libcst's node (the statement's target, the keyword, the dict key) starts.
"""

from __future__ import annotations

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from offlint.fix.edits import Change, FixError, field_name, with_option


def edit(text: str, changes: list[Change]) -> str:
    """`text` with `changes` made (all of one fix, in one file); FixError when one cannot be made."""
    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError as exc:
        raise FixError(f"file: libcst cannot parse it ({str(exc).splitlines()[0]}), so it is not fixed") from None
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(PositionProvider)
    sites: dict[tuple[int, int], list[Change]] = {}
    for change in changes:
        sites.setdefault((change.line, change.col - 1), []).append(change)
    transformer = _Editor(positions, sites)
    result = wrapper.module.visit(transformer)
    missing = [c for site, cs in sites.items() if site not in transformer.done for c in cs]
    if missing:
        raise FixError(f"no assignment of {field_name(missing[0].key or missing[0].name)} at line "
                       f"{missing[0].line}, column {missing[0].col}")
    return result.code


def _start(positions, node) -> tuple[int, int]:
    pos = positions[node].start
    return (pos.line, pos.column)


class _Editor(cst.CSTTransformer):
    def __init__(self, positions, sites: dict[tuple[int, int], list[Change]]):
        super().__init__()
        self.positions = positions
        self.sites = sites
        self.done: set[tuple[int, int]] = set()
        self._pending: dict[int, list[Change]] = {}  # id(original statement line) -> its changes

    # --- statements: `cfg.optimizer.x = value` (also `x: T = value`, `cfg.env_vars = {...}`) ---------------------
    def leave_IndentedBlock(self, original, updated):
        return updated.with_changes(body=self._statements(original.body, updated.body))

    def leave_Module(self, original, updated):
        return updated.with_changes(body=self._statements(original.body, updated.body))

    def _statements(self, originals, updated):
        out: list = []
        carry = None  # the leading comments and blank lines of a removed statement, kept for the next one
        for original, new in zip(originals, updated):
            changes = self._statement_changes(original)
            removed = False
            inserts = []
            for change in changes:
                if change.op == "remove":
                    removed = True
                elif change.op == "insert":
                    inserts.append(self._sibling_statement(original, new, change))
            if carry is not None and not removed:
                new = new.with_changes(leading_lines=[*carry, *new.leading_lines])
                carry = None
            if removed:
                carry = [*(carry or []), *new.leading_lines]
            else:
                out.append(new)
            out.extend(inserts)
        if not out:  # a body left empty needs a statement
            out.append(cst.SimpleStatementLine([cst.Pass()], leading_lines=carry or []))
        return out

    def _statement_changes(self, node) -> list[Change]:
        if not isinstance(node, cst.SimpleStatementLine) or len(node.body) != 1:
            return []
        small = node.body[0]
        if not isinstance(small, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
            return []
        target = small.targets[0].target if isinstance(small, cst.Assign) else small.target
        site = _start(self.positions, target)
        changes = [c for c in self.sites.get(site, []) if c.op in ("remove", "insert")]
        if changes:
            self.done.add(site)
        return changes

    def _sibling_statement(self, original, new, change: Change):
        small = new.body[0]
        target = small.targets[0].target if isinstance(small, cst.Assign) else small.target
        if not isinstance(target, cst.Attribute):
            raise FixError("the assignment next to which the setting belongs is not an attribute assignment")
        new_target = target.with_changes(attr=cst.Name(field_name(change.key)))
        value = _expression(change.value, _quote_of(small.value))
        return cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(new_target)], value)])

    def leave_Assign(self, original, updated):
        site = _start(self.positions, original.targets[0].target)
        return self._set_value(site, self._renamed_target(site, updated), "value")

    def _renamed_target(self, site, updated):
        """`cfg.model.cpu_offloading_num_layer = 2` with the attribute's name corrected (OFL003's rename)."""
        renames = [c for c in self.sites.get(site, []) if c.op == "rename"]
        if not renames:
            return updated
        target = updated.targets[0].target
        if len(updated.targets) != 1 or not isinstance(target, cst.Attribute):
            raise FixError("the key to rename is not the one attribute this assignment writes")
        self.done.add(site)
        renamed = target.with_changes(attr=cst.Name(field_name(renames[-1].new_key)))
        return updated.with_changes(targets=[updated.targets[0].with_changes(target=renamed)])

    def leave_AnnAssign(self, original, updated):
        return self._set_value(_start(self.positions, original.target), updated, "value")

    # --- keyword arguments: `OptimizerConfig(optimizer_cpu_offload=True, ...)` -------------------------------------
    def leave_Call(self, original, updated):
        return updated.with_changes(args=self._elements(original.args, updated.args, "keyword"))

    # --- dict entries: `{"optimizer_cpu_offload": True}`, `cfg.env_vars = {...}` ---------------------------------
    def leave_Dict(self, original, updated):
        return updated.with_changes(elements=self._elements(original.elements, updated.elements, "key"))

    def _elements(self, originals, updated, name_attr: str):
        out = []
        changed = False
        for original, new in zip(originals, updated):
            anchor = getattr(original, name_attr, None)
            site = _start(self.positions, anchor if anchor is not None else original)
            changes = self.sites.get(site, [])
            if name_attr == "key" and not changes:
                site = _start(self.positions, original)
                changes = self.sites.get(site, [])
            if not changes:
                out.append(new)
                continue
            self.done.add(site)
            changed = True
            keep = True
            for change in changes:
                if change.op == "set":
                    new = new.with_changes(value=self._new_value(new.value, change))
                elif change.op == "remove":
                    keep = False
                elif change.op == "rename" and name_attr == "keyword":
                    new = new.with_changes(keyword=cst.Name(field_name(change.new_key)))
                elif change.op == "env":
                    new = new.with_changes(value=self._env_value(new.value, change))
            if keep:
                out.append(new)
            inserts = [c for c in changes if c.op == "insert"]
            if inserts:
                # The new element goes right after its sibling, in the layout of the list: a sibling that is not
                # last keeps its comma (and comment) and the new element gets a plain copy; a last sibling passes
                # its trailing comma (the closing bracket's line break) on and takes the separator of the
                # element before it, keeping its own comment.
                position = list(originals).index(original)
                own = new.comma
                if position < len(originals) - 1:
                    sibling_comma, trailing = own, _first_line(own, None)
                else:
                    before = updated[position - 1].comma if position > 0 else None
                    if isinstance(before, cst.Comma):
                        sibling_comma = _first_line(before, _trailing_line(own))
                    else:
                        sibling_comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
                    trailing = _first_line(own, None)
                if keep:
                    out[-1] = new.with_changes(comma=sibling_comma)
                for index, change in enumerate(inserts):
                    element = self._sibling_element(new, change, name_attr)
                    last = index == len(inserts) - 1
                    out.append(element.with_changes(comma=trailing if last else _first_line(sibling_comma, None)))
            if not keep and original is originals[-1] and out:
                # the comma of a removed last element moves to the one before it (trailing-comma style kept)
                out[-1] = out[-1].with_changes(comma=new.comma)
        if not changed:
            return updated
        return _commas(out)

    def _sibling_element(self, sibling, change: Change, name_attr: str):
        value = _expression(change.value, _quote_of(sibling.value))
        if name_attr == "keyword":
            return cst.Arg(value=value, keyword=cst.Name(field_name(change.key)),
                           equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                                 whitespace_after=cst.SimpleWhitespace("")),
                           comma=sibling.comma)
        key = sibling.key if isinstance(sibling, cst.DictElement) else None
        quote = _quote_of(key) if key is not None else '"'
        return cst.DictElement(cst.SimpleString(f"{quote}{field_name(change.key)}{quote}"), value,
                               comma=sibling.comma)

    def _set_value(self, site, updated, attribute: str):
        changes = [c for c in self.sites.get(site, []) if c.op in ("set", "env")]
        if not changes:
            return updated
        self.done.add(site)
        value = getattr(updated, attribute)
        for change in changes:
            value = self._new_value(value, change) if change.op == "set" else self._env_value(value, change)
        return updated.with_changes(**{attribute: value})

    def _new_value(self, old, change: Change):
        if change.transform:
            raise FixError("a spelling transform does not apply to Python (its literals are typed)")
        return _expression(change.value, _quote_of(old))

    def _env_value(self, old, change: Change):
        """An environment variable's value: a string literal gets the option appended; a dict literal (the
        whole `cfg.env_vars = {...}`) gets the entry added or its string value appended to."""
        if isinstance(old, cst.SimpleString):
            return _appended(old, change)
        if not isinstance(old, cst.Dict):
            raise FixError("the environment is not a dict or string literal here")
        elements = list(old.elements)
        for index, element in enumerate(elements):
            if isinstance(element, cst.DictElement) and isinstance(element.key, cst.SimpleString) \
                    and element.key.evaluated_value == change.name:
                if not isinstance(element.value, cst.SimpleString):
                    raise FixError(f"{change.name} is not a string literal here")
                elements[index] = element.with_changes(value=_appended(element.value, change))
                return old.with_changes(elements=elements)
        keys = [e.key for e in elements if isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString)]
        quote = _quote_of(keys[0]) if keys else '"'
        entry = cst.DictElement(cst.SimpleString(f"{quote}{change.name}{quote}"),
                                cst.SimpleString(f"{quote}{change.option}{quote}"))
        if not elements:
            return old.with_changes(elements=[entry])
        last = elements[-1]
        before = elements[-2].comma if len(elements) > 1 else None
        if isinstance(before, cst.Comma):
            separator = _first_line(before, _trailing_line(last.comma))
        else:
            separator = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        elements[-1] = last.with_changes(comma=separator)
        return old.with_changes(elements=[*elements, entry.with_changes(comma=_first_line(last.comma, None))])


def _trailing_line(comma):
    """The comment and line break after a comma (None: it is on one line)."""
    if isinstance(comma, cst.Comma) and isinstance(comma.whitespace_after, cst.ParenthesizedWhitespace):
        return comma.whitespace_after.first_line
    return None


def _first_line(comma, first_line):
    """A comma with its comment line replaced (None: a bare line break), blank lines dropped."""
    if isinstance(comma, cst.Comma) and isinstance(comma.whitespace_after, cst.ParenthesizedWhitespace):
        return comma.with_changes(whitespace_after=comma.whitespace_after.with_changes(
            first_line=first_line or cst.TrailingWhitespace(), empty_lines=[]))
    return comma


def _commas(elements: list) -> list:
    """After an insertion or a removal every element but the last needs a comma; the last keeps whatever
    comma it has (a trailing comma stays, a missing one stays missing)."""
    out = []
    for index, element in enumerate(elements):
        last = index == len(elements) - 1
        if not last and not isinstance(element.comma, cst.Comma):
            element = element.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        out.append(element)
    return out


def _appended(string: cst.SimpleString, change: Change) -> cst.SimpleString:
    value = string.evaluated_value
    if not isinstance(value, str) or string.prefix.lower() not in ("", "r", "u"):
        raise FixError("the variable's value is not a plain string literal")
    new = with_option(value, change.option) if change.append else change.option
    if new == value:
        return string
    quote = string.quote
    if quote in new or "\\" in new:
        raise FixError("the new value needs escaping")
    return string.with_changes(value=f"{string.prefix}{quote}{new}{quote}")


def _quote_of(node) -> str:
    if isinstance(node, cst.SimpleString) and node.quote in ('"', "'"):
        return node.quote
    return '"'


def _expression(value: object, quote: str) -> cst.BaseExpression:
    if value is None or isinstance(value, (bool, int, float)):
        return cst.parse_expression(repr(value))
    if isinstance(value, str):
        if quote in value or "\\" in value or "\n" in value:
            return cst.parse_expression(repr(value))
        return cst.SimpleString(f"{quote}{value}{quote}")
    if isinstance(value, (list, tuple)):
        return cst.parse_expression(repr(list(value)).replace("'", quote))
    raise FixError(f"cannot write {value!r} as Python")
