"""Sources: one reader per input kind. Each turns a file's text into units of assignments with positions."""

from __future__ import annotations

from offlint.types import Unit


def read_source(path: str, kind: str, text: str, explicit: bool = True, project=None) -> list[Unit]:
    """Units of one file. Raises ValueError (one-line message) when the file cannot be parsed.

    `project` (a PythonProject) lets Python recipes follow imports into the other files of the tree.
    """
    if not text.strip():
        return []
    if kind == "python":
        return _python(path, text, explicit, project)
    if kind == "yaml":
        return _yaml(path, text, project)
    if kind == "shell":
        from offlint.sources.shell import read_shell

        return read_shell(path, text, project=project)
    raise ValueError("not a Python, YAML or shell file")


def _python(path: str, text: str, explicit: bool, project) -> list[Unit]:
    from offlint.sources.python import read_python, worth_parsing

    if not explicit and not worth_parsing(text.encode("utf-8", "replace")):
        return []
    try:
        return read_python(path, text, project)
    except SyntaxError as exc:
        raise ValueError(f"Python syntax error at line {exc.lineno}, column {exc.offset or 1}: {exc.msg}") from None


def _yaml(path: str, text: str, project=None) -> list[Unit]:
    from offlint.sources import yaml_file

    roots = yaml_file.compose(text)
    units: list[Unit] = []
    if yaml_file.is_override_file(roots):
        units.append(yaml_file.override_unit(path, roots))
    lines = text.splitlines()
    for shell_text, first_line in yaml_file.command_strings(roots, lines):
        from offlint.sources.shell import read_shell

        units.extend(read_shell(path, shell_text, line_offset=first_line - 1, env_known=True, needs_arguments=True,
                                complete=False, project=project))
    return units
