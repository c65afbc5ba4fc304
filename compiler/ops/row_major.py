"""Returned tensors that eager always lays out row-major: `t.contiguous()` of a tensor it copies, and
the outputs of the ops eager allocates row-major whatever their input's layout (`F.softmax`,
`F.layer_norm`, ...: compiler/ops/eager_layouts.py).

Traces hold values, not layouts, and executors lay an elementwise result out in its operand's
memory order, as TensorIterator does: the copy `x.t().contiguous()` is a `mul(t, 1)` of the
transposed `t`, which torch and nvFuser both give the transposed order. Inside the program that is
invisible (the layout model, compiler/ops/aliasing.py, knows eager's strides); a caller that gets
it back would see a tensor that is not contiguous, where eager's `.view(...)` of it works. So the
tracer marks such tensors (`mark`), and the entry's computation makes the returned ones among them
contiguous (`RowMajorOutputs.around`: a no-op where they are already), unless another returned
value views its memory (a copy would part them) or it is an input.
"""

from __future__ import annotations

import collections
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from compiler.core.ir import BoundSymbol, TensorProxy, TraceContext
from compiler.core.output_paths import Path, replaced_at_paths
from compiler.prims import views_of

_MARKED: weakref.WeakKeyDictionary[TraceContext, set[int]] = weakref.WeakKeyDictionary()


def mark(context: TraceContext | None, t: TensorProxy) -> None:
    """Records that eager lays `t` out row-major whatever its operands' layouts."""
    if context is not None:
        _MARKED.setdefault(context, set()).add(id(t))


@dataclass(frozen=True)
class RowMajorOutputs:
    """The paths of the returned tensors to make contiguous (see the module)."""

    paths: tuple[Path, ...] = ()

    def around(self, computation: Callable) -> Callable:
        """`computation` as a callable whose marked outputs are contiguous."""
        return replaced_at_paths(computation, self.paths, _contiguous)


def row_major_outputs(context: TraceContext, output: Any, inputs: tuple, bsyms: list[BoundSymbol]) -> RowMajorOutputs:
    """The marked tensors of `output` (walked through tuples, lists and dicts) that are not inputs
    and whose memory no other returned tensor views."""
    marked = _MARKED.get(context, set())
    if not marked:
        return RowMajorOutputs()
    found: list[tuple[Path, TensorProxy]] = []
    _walk(output, (), found)
    viewed = views_of(bsyms)
    shared: set[str] = set()  # names of the tensors whose memory a returned view reaches
    for _, p in found:
        base = viewed.get(p.name)
        while base is not None:
            shared.add(base.name)
            base = viewed.get(base.name)
    returned = collections.Counter(id(p) for _, p in found)
    inputs_ids = {id(p) for p in inputs}
    paths = tuple(
        path
        for path, p in found
        if id(p) in marked and p.name not in shared and id(p) not in inputs_ids and returned[id(p)] == 1
    )
    return RowMajorOutputs(paths)


def _walk(value: Any, path: Path, found: list[tuple[Path, TensorProxy]]) -> None:
    if isinstance(value, TensorProxy):
        found.append((path, value))
    elif isinstance(value, (tuple, list)):
        for i, item in enumerate(value):
            _walk(item, (*path, i), found)
    elif isinstance(value, dict) and type(value) is dict:
        for key, item in value.items():
            _walk(item, (*path, key), found)


def _contiguous(value: Any) -> Any:
    return value.contiguous() if isinstance(value, torch.Tensor) else value


_contiguous.method = "contiguous"  # type: ignore[attr-defined]  # the values at the paths are tensors
