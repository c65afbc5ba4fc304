"""Region fingerprints: what a fusion definition is written from, with the proxies' names left out.

`fusion_source` reads a region's prims, their constant arguments, the dtype, device and shape of
every proxy and the input descriptors; names only tell values apart (dictionary keys, variable
names that `structure_key` renames). Two regions whose fingerprints are equal are the same region
up to a one-to-one renaming, so their sources have the same `structure_key`, take the same input
positions and read the same positions as sizes. A model's identical layers give regions of equal
fingerprints: `SOURCES` keeps what writing the source of the first one gave, and the others skip
writing (and canonicalising) theirs.

A fingerprint holds no proxy: names become their order of first appearance, each occurrence of a
proxy carries its own type (two objects of one name could differ), constants are (type, repr), so
values that compare equal but print apart (0.0 and -0.0, 1 and True) stay apart.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, NamedTuple

from compiler.core.executor import Region
from compiler.core.ir import NumberProxy, Proxy, TensorProxy
from compiler.executors.nvfuser.define.descriptors import ScalarDesc, TensorDesc, structure_key
from compiler.executors.nvfuser.define.translations import fusion_source

MAX_SOURCES = 1024

_PROXY, _TENSOR, _NUMBER = object(), object(), object()  # tags no constant can equal


class _Unsupported(Exception):
    """A value the fingerprint does not describe (the region is written afresh instead)."""


class WrittenSource(NamedTuple):
    """What writing a region's definition gave, by positions (valid for every region of its fingerprint)."""

    source: str  # the first region's `def <fn_name>(fd): ...`
    fn_name: str
    structure: str  # `structure_key(source)`
    shape_scalars: tuple[int, ...]  # positions of the region inputs it reads as sizes
    taken: tuple[int, ...]  # positions of the region inputs it takes


class _Encoder:
    def __init__(self) -> None:
        self.names: dict[str, int] = {}
        self.seen: dict[int, tuple] = {}  # id(proxy) -> its encoding

    def proxy(self, p: Proxy) -> tuple:
        found = self.seen.get(id(p))
        if found is not None:
            return found
        index = self.names.setdefault(p.name, len(self.names))
        if type(p) is TensorProxy:
            encoded = (_PROXY, index, _TENSOR, tuple(self.size(s) for s in p.shape), p.dtype, p.device)
        elif type(p) is NumberProxy:
            encoded = (_PROXY, index, _NUMBER, p.python_type)
        else:
            raise _Unsupported(p)
        self.seen[id(p)] = encoded
        return encoded

    def size(self, size: Any) -> Any:
        return size if type(size) is int else self.value(size)

    def value(self, value: Any) -> Any:
        kind = type(value)
        if kind is TensorProxy or kind is NumberProxy:
            return self.proxy(value)
        if kind is tuple or kind is list:
            return (kind, tuple([self.value(v) for v in value]))
        if kind is dict:
            return (dict, tuple((self.value(k), self.value(v)) for k, v in value.items()))
        if kind is slice:
            return (slice, self.value(value.start), self.value(value.stop), self.value(value.step))
        if isinstance(value, (Proxy, tuple, list, dict)):  # other proxies, namedtuples, subclasses
            raise _Unsupported(value)
        return (kind, repr(value))


def fingerprint(region: Region, descriptors: Sequence[TensorDesc | ScalarDesc]) -> tuple | None:
    """The fingerprint of `region` defined for inputs of these descriptors (see the module), or
    None for a region holding values it does not describe."""
    encoder = _Encoder()
    try:
        inputs = tuple(encoder.proxy(p) for p in region.inputs)
        lines = []
        for bsym in region.bsyms:
            if bsym.subsymbols:
                return None
            args, kwargs = encoder.value(bsym.args), encoder.value(bsym.kwargs)
            lines.append((bsym.sym, args, kwargs, encoder.value(bsym.output)))
        outputs = tuple(encoder.proxy(p) for p in region.outputs)
    except _Unsupported:
        return None
    if any(name not in encoder.names for name in region.written):
        return None
    written = tuple(sorted(encoder.names[name] for name in region.written))
    return (inputs, tuple(lines), outputs, written, tuple(descriptors))


def _write(region: Region, descriptors: Sequence[TensorDesc | ScalarDesc]) -> WrittenSource:
    source, fn_name, shape_scalars, taken = fusion_source(region, descriptors)
    positions = tuple(i for i, p in enumerate(region.inputs) if p.name in shape_scalars)
    return WrittenSource(source, fn_name, structure_key(source), positions, tuple(taken))


class Sources:
    """A bounded map fingerprint -> `WrittenSource`, least recently used out."""

    def __init__(self, capacity: int = MAX_SOURCES) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[tuple, WrittenSource] = OrderedDict()

    def written(self, region: Region, descriptors: Sequence[TensorDesc | ScalarDesc]) -> WrittenSource:
        """What writing the definition of `region` for these descriptors gives: kept from a region
        of the same fingerprint when one was written before, else written now (and kept)."""
        key = fingerprint(region, descriptors)
        if key is None:
            return _write(region, descriptors)
        found = self._entries.get(key)
        if found is not None:
            self._entries.move_to_end(key)
            return found
        found = self._entries[key] = _write(region, descriptors)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)
        return found

    def clear(self) -> None:
        """Forgets every source."""
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


SOURCES = Sources()
