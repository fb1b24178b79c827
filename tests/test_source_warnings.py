"""offlint's own modules compile without a warning. An invalid escape sequence in a string or docstring (`\\$`) is a
DeprecationWarning on Python 3.11 and a SyntaxWarning from 3.12, printed to a user's terminal by the first run that
compiles the module (a pre-commit hook's fresh environment, or PYTHONDONTWRITEBYTECODE)."""

from __future__ import annotations

import warnings
from pathlib import Path

import offlint

PACKAGE = Path(offlint.__file__).parent


def test_every_module_compiles_without_a_warning():
    warned = []
    for path in sorted(PACKAGE.rglob("*.py")):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            compile(path.read_text(encoding="utf-8"), str(path), "exec")
        # (what the compiler says of this file: not a ResourceWarning of another test's object collected meanwhile)
        warned.extend(f"{path.relative_to(PACKAGE.parent)}: {w.message}" for w in caught if w.filename == str(path))
    assert warned == []
