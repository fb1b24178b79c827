"""Files into units: each file of a check read by the source reader of its kind, with its suppressions.

The one place files become units: the pipeline's workers (`file_outcomes.read_one`) and the commands that load one
unit (`units.load_unit`: estimate, replay) both call `read_files`. A file that cannot be read or parsed becomes
a one-line FileError and the other files go on.
"""

from __future__ import annotations

from dataclasses import dataclass

from offlint.discover import SourceFile
from offlint.reading import text_or_error
from offlint.sources import read_source
from offlint.sources.python_project import PythonProject
from offlint.suppressions import Suppression, find_suppressions
from offlint.types import FileError, InputError, Unit


@dataclass
class FileRead:
    """One file as read: its text, its units and its suppression comments."""

    file: SourceFile
    text: str
    units: list[Unit]
    suppressions: list[Suppression]


def read_files(files: list[SourceFile], texts: dict[str, str], project: PythonProject,
               errors: list[FileError]) -> list[FileRead]:
    """Read each file into units; a file that cannot be read becomes a FileError and the others go on."""
    reads: list[FileRead] = []
    for file in files:
        text = texts.get(file.path)
        if text is None:
            text, error = text_or_error(file.path)
            if error:
                errors.append(FileError(file.path, error))
                continue
        try:
            units = read_source(file.path, file.kind, text, explicit=file.explicit, project=project)
        except InputError as exc:  # (the file's own content: its author's to fix)
            errors.append(FileError(file.path, _one_line(str(exc))))
            continue
        except RecursionError:
            errors.append(FileError(file.path, "too deeply nested to analyse"))
            continue
        except Exception as exc:  # an offlint bug must not stop the other files from being checked
            errors.append(FileError(file.path, f"internal error while reading ({type(exc).__name__}: "
                                               f"{_one_line(str(exc))}); please report it"))
            continue
        reads.append(FileRead(file, text, units, find_suppressions(text)))
    return reads


def _one_line(message: str) -> str:
    return " ".join(message.split())[:500]
