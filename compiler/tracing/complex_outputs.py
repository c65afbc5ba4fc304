"""Complex values a traced function returns: real tensors in the trace, complex ones for the caller.

Traces hold real tensors only (ops/complex_proxy.py), so each `ComplexProxy` in a function's
output is returned by the computation as its real view (`torch.view_as_real`: a real tensor
whose last dim of size 2 holds the parts), and `ComplexOutputs.around` wraps the entry's
computation to give the caller `torch.view_as_complex` of it in that place, a view autograd
differentiates through, as eager's complex tensor would be.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from compiler.core.proxies import rebuild_tuple
from compiler.ops.complex_proxy import ComplexProxy

Path = tuple  # the keys and indices leading to a value inside tuples, lists and dicts


@dataclass(frozen=True)
class ComplexOutputs:
    """Where the computation's output holds the real view of a complex value."""

    paths: tuple[Path, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.paths)

    def around(self, computation: Callable) -> Callable:
        """`computation` as a callable whose output holds the complex values themselves."""
        return _Complexified(computation, self.paths) if self.paths else computation


def packed(output: Any) -> tuple[Any, ComplexOutputs]:
    """(the output with each complex value replaced by its real view, where they were); while
    tracing, as the views are computed."""
    paths: list[Path] = []
    return _pack(output, (), paths), ComplexOutputs(tuple(paths))


def _pack(value: Any, path: Path, paths: list[Path]) -> Any:
    if isinstance(value, ComplexProxy):
        paths.append(path)
        return torch.view_as_real(value)
    if isinstance(value, tuple):
        return rebuild_tuple(type(value), [_pack(v, (*path, i), paths) for i, v in enumerate(value)])
    if isinstance(value, list):
        return [_pack(v, (*path, i), paths) for i, v in enumerate(value)]
    if isinstance(value, dict) and type(value) is dict:
        return {k: _pack(v, (*path, k), paths) for k, v in value.items()}
    return value


class _Complexified:
    """Runs an entry's computation, then makes its complex outputs complex again."""

    def __init__(self, computation: Callable, paths: tuple[Path, ...]) -> None:
        self.computation = computation
        self.paths = paths

    def __call__(self, *inputs: Any) -> Any:
        output = self.computation(*inputs)
        for path in self.paths:
            output = _replaced(output, path)
        return output

    def __getattr__(self, name: str) -> Any:  # NOTE: runners' own attributes (a graphed entry's stats)
        return getattr(self.computation, name)


def _replaced(value: Any, path: Path) -> Any:
    if not path:
        viewable = value.stride(-1) == 1 and all(s % 2 == 0 for s in value.stride()[:-1])
        return torch.view_as_complex(value if viewable else value.contiguous())
    key, rest = path[0], path[1:]
    if isinstance(value, tuple):
        items = list(value)
        items[key] = _replaced(items[key], rest)
        return rebuild_tuple(type(value), items)
    value = list(value) if isinstance(value, list) else dict(value)
    value[key] = _replaced(value[key], rest)
    return value
