"""What reporters need to know about a rule, as a protocol: the rules module's Rule fits it, and so do the plain
objects tests pass. A module of its own so that the formats can name it without importing the package."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from offlint.types import Severity


class RuleInfo(Protocol):
    """What reporters need to know about a rule. Read-only, so frozen dataclasses and plain objects both fit."""

    @property
    def code(self) -> str: ...
    @property
    def slug(self) -> str: ...
    @property
    def severity(self) -> Severity: ...
    @property
    def summary(self) -> str: ...
    @property
    def explanation(self) -> str: ...
    @property
    def fix(self) -> str: ...
    @property
    def url(self) -> str: ...
