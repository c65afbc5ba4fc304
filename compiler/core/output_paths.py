"""Values inside a computation's output, named by paths, and a computation whose output has those
values replaced after every call (complex outputs made complex again, row-major outputs made
contiguous: tracing/complex_values.py, ops/row_major.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from compiler.core.proxies import rebuild_tuple

Path = tuple  # the keys and indices leading to a value inside tuples, lists and dicts


class ReplacedAtPaths:
    """Runs `computation`, then replaces the value at each of `paths` in its output by `replace(value)`."""

    def __init__(self, computation: Callable, paths: tuple[Path, ...], replace: Callable[[Any], Any]) -> None:
        self.computation = computation
        self.paths = paths
        self.replace = replace

    def __call__(self, *inputs: Any) -> Any:
        output = self.computation(*inputs)
        for path in self.paths:
            output = replaced_at(output, path, self.replace)
        return output

    def __getattr__(self, name: str) -> Any:  # NOTE: runners' own attributes (a graphed entry's stats)
        return getattr(self.computation, name)


def replaced_at(value: Any, path: Path, replace: Callable[[Any], Any]) -> Any:
    """`value` with the value at `path` replaced by `replace(it)` (containers rebuilt, not changed)."""
    if not path:
        return replace(value)
    key, rest = path[0], path[1:]
    if isinstance(value, tuple):
        items = list(value)
        items[key] = replaced_at(items[key], rest, replace)
        return rebuild_tuple(type(value), items)
    value = list(value) if isinstance(value, list) else dict(value)
    value[key] = replaced_at(value[key], rest, replace)
    return value
