"""The harness's error types and its one `check` helper (messages are built only on failure)."""

from __future__ import annotations

from collections.abc import Callable


class FusebenchError(Exception):
    """Base class: a problem the user can fix (bad case declaration, bad flag, unreadable results)."""


class CaseError(FusebenchError, ValueError):
    """A case declaration is malformed."""


class SuiteError(FusebenchError):
    """A suite module cannot be found or imported."""


class ResultsError(FusebenchError):
    """A results file or folder is not in the expected ASV layout."""


def check(cond: object, message: Callable[[], str], error: type[Exception] = FusebenchError) -> None:
    """Raises `error(message())` when `cond` is false."""
    if not cond:
        raise error(message())
