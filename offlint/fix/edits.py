"""The edits a fix is made of, as plain data shared by the planner and the per-language editors."""

from __future__ import annotations

from dataclasses import dataclass


class FixError(Exception):
    """An edit the editor cannot carry out on this text (the site is not what the finding said, or a shape it
    does not rewrite safely); the fix is then left out and the finding stays."""


@dataclass(frozen=True)
class Change:
    path: str
    line: int  # the site: 1-based line and column of the assignment (or command, or comment) to edit
    col: int
    op: str  # "set" | "insert" | "remove" | "rename" | "env" | "drop-suppression"
    key: str = ""  # the dotted key at the site ("set", "remove", "rename"), or the key to insert ("insert")
    value: object = None  # "set" / "insert": the new value
    transform: str = ""  # "set": compute the value from the one written (spec.TRANSFORMS)
    new_key: str = ""  # "rename": the corrected dotted key
    name: str = ""  # "env": the variable
    option: str = ""  # "env": what its value must contain (appended with a comma), or the whole value to set
    append: bool = True  # "env": append `option` to the value (PYTORCH_CUDA_ALLOC_CONF) or set it (NCCL_...=0)

    @property
    def position(self) -> tuple[int, int]:
        return (self.line, self.col)


def field_name(key: str) -> str:
    """The last component of a dotted key: the name written in a recipe, a YAML mapping or a Hydra token."""
    return key.rsplit(".", 1)[-1]


def section(key: str) -> str:
    return key.rsplit(".", 1)[0] if "." in key else ""


def transformed(transform: str, written: str) -> str:
    """The text a transform makes of a value as written (YAML and command-line spelling)."""
    if transform == "null":
        return "null"
    if transform == "bool":
        lowered = written.strip().strip("'\"").lower()  # (a quoted YAML or Hydra string: `"false"`)
        if lowered in ("yes", "on", "y", "true"):
            return "true"
        if lowered in ("no", "off", "n", "false"):
            return "false"
        raise FixError(f"{written!r} is not a yes/no spelling")
    if transform == "list":
        if written.startswith("["):
            raise FixError("already a list")
        return f"[{written}]"
    raise FixError(f"unknown transform {transform!r}")


def plain_text(value: object) -> str:
    """A value in YAML / Hydra spelling."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    return str(value)


def with_option(value: str, option: str) -> str:
    """An allocator-style `a:b,c:d` value with `option` in it: an option of the same name is replaced (the
    case-sensitive `expandable_segments:true` becomes `...:True`), else it is appended with a comma."""
    name = option.split(":", 1)[0]
    parts = [p for p in value.split(",") if p] if value else []
    for index, part in enumerate(parts):
        if part.split(":", 1)[0].strip() == name:
            parts[index] = option
            return ",".join(parts)
    return ",".join([*parts, option])
