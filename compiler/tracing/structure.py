"""Output structures: a value tree split into its leaves and a spec that rebuilds it.

A model returns its own containers: dicts and their subclasses (`OrderedDict`), dataclasses
(Hugging Face's `ModelOutput` is both), named tuples and structseqs, lists and tuples. Traces
only carry plain tuples, lists and dicts of proxies, so a jitted module returns `(spec, leaves)`
and the caller calls `spec.rebuild(leaves)`. Anything that is not a container is a leaf
(proxies, tensors, numbers, None).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from compiler.core.proxies import rebuild_tuple


@dataclass(frozen=True)
class Spec:
    """How to rebuild one container: its type, its keys (dicts, dataclasses) and its children."""

    kind: str  # "leaf", "tuple", "list", "dict", "dataclass"
    type: Any = None
    keys: tuple = ()
    children: tuple[Spec, ...] = ()

    def rebuild(self, leaves: list) -> Any:
        """The value with this structure whose leaves are `leaves`, in flattening order."""
        return self._rebuild(leaves, 0)[0]

    def _rebuild(self, leaves: list, at: int) -> tuple[Any, int]:
        if self.kind == "leaf":
            return leaves[at], at + 1
        items = []
        for child in self.children:
            item, at = child._rebuild(leaves, at)
            items.append(item)
        if self.kind == "tuple":
            return rebuild_tuple(self.type, items), at
        if self.kind == "list":
            return items, at
        if self.kind == "dict":
            pairs = dict(zip(self.keys, items))
            return (pairs if self.type is dict else self.type(pairs)), at
        return self.type(**dict(zip(self.keys, items))), at

    def __repr__(self) -> str:
        return f"Spec({getattr(self.type, '__name__', self.kind)})"


_LEAF = Spec("leaf")


def flatten(value: Any) -> tuple[list, Spec]:
    """(the leaves of `value`, in order, and the spec that rebuilds it from them)."""
    leaves: list = []
    return leaves, _flatten(value, leaves)


def _flatten(value: Any, leaves: list) -> Spec:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        names = tuple(f.name for f in dataclasses.fields(value) if f.init)
        children = tuple(_flatten(getattr(value, n), leaves) for n in names)
        return Spec("dataclass", type(value), names, children)
    if isinstance(value, dict):
        children = tuple(_flatten(v, leaves) for v in value.values())
        return Spec("dict", type(value), tuple(value), children)
    if isinstance(value, tuple):
        return Spec("tuple", type(value), (), tuple(_flatten(v, leaves) for v in value))
    if isinstance(value, list):
        return Spec("list", list, (), tuple(_flatten(v, leaves) for v in value))
    leaves.append(value)
    return _LEAF
