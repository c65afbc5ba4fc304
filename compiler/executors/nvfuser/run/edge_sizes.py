"""Kernels for edge sizes compiled only when those sizes come back.

nvFuser compiles one kernel per definition for every value of its symbolic sizes, except that it
concretizes a symbolic extent of 1 as a broadcast dim (and one of 0 as an empty one): a call whose
sizes give such an extent needs a kernel of its own, and nvFuser's compile of it costs as much as
the first. `split3(a, d0, d1)` over d0 = 1..20 with symbolic sizes would compile twice, once for
d0 = 1 and once for every other d0 (suites/dynamic_split.py).

So a call that would make nvFuser compile, of a region whose sizes are symbolic, first works out
which of the region's symbolic dims are 0 or 1 for its arguments (its pattern of edge sizes): the
sizes are evaluated from the region's inputs through its prims (a slice's bounds, a cat's parts,
number arithmetic), in Python; running the prims on meta tensors would tell the same but the
first meta computation in a process imports torch's decompositions, which takes seconds. The
first time a definition meets a pattern with edge sizes, that call runs the region with torch (as
a fallback does) and nvFuser compiles nothing; when the pattern comes again, nvFuser compiles its
kernel. A call without edge sizes compiles as before. A one-off size 1 then costs one unfused
call instead of a compile, and a size 1 that stays (a decode step of one token) costs one.
"""

from __future__ import annotations

import math
from typing import Any

from compiler.core.executor import Region
from compiler.core.ir import NumberProxy, TensorProxy
from compiler.prims import Prim
from compiler.prims.prim import NUMBER_IMPLS

Pattern = tuple[tuple[int, int, int], ...]  # (tensor, dim, size) of each symbolic dim sized 0 or 1

_MAX_SEEN = 4096


def _sizes(region: Region, args: tuple) -> dict[str, Any] | None:
    """The value of every symbolic number of the region (its scalar inputs, its tensors' symbolic
    dims) for these arguments, or None when a dim's size cannot be worked out."""
    env: dict[str, Any] = {}
    for p, a in zip(region.inputs, args):
        if isinstance(p, NumberProxy):
            env[p.name] = a
        elif isinstance(p, TensorProxy):
            env.update((s.name, n) for s, n in zip(p.shape, a.shape) if isinstance(s, NumberProxy))

    def value(x: Any) -> Any:
        return env.get(x.name) if isinstance(x, NumberProxy) else x

    for b in region.bsyms:
        if b.sym is Prim.SLICE:
            _, starts, ends, steps = b.args
            for s, start, end, step in zip(b.output.shape, starts, ends, steps):
                start, end, step = value(start), value(end), value(step)
                if isinstance(s, NumberProxy) and None not in (start, end, step):
                    env.setdefault(s.name, max(0, math.ceil((end - start) / step)))
        elif b.sym is Prim.CAT:
            tensors, dim = b.args
            parts = [value(t.shape[dim]) for t in tensors]
            if isinstance(b.output.shape[dim], NumberProxy) and None not in parts:
                env.setdefault(b.output.shape[dim].name, sum(parts))
        elif b.sym in NUMBER_IMPLS and isinstance(b.output, NumberProxy):
            operands = [value(x) for x in b.args]
            if None not in operands:
                env[b.output.name] = NUMBER_IMPLS[b.sym](*operands)
        dims = [s for out in b.outputs if isinstance(out, TensorProxy) for s in out.shape]
        if any(isinstance(s, NumberProxy) and s.name not in env for s in dims):
            return None  # NOTE: a size made some other way (a reshape of symbolic sizes...): no deferral
    return env


class EdgeSizes:
    """The edge-size patterns one region's definitions have met once (module doc)."""

    def __init__(self, region: Region) -> None:
        self.region = region
        self.seen: set[tuple[int, Pattern]] = set()

    def pattern(self, args: tuple) -> Pattern | None:
        """Which symbolic dims of the region's tensors are 0 or 1 for these arguments, or None
        when their sizes cannot be worked out."""
        env = _sizes(self.region, args)
        if env is None:
            return None
        tensors = [p for b in self.region.bsyms for p in b.outputs if isinstance(p, TensorProxy)]
        return tuple(
            (i, d, env[s.name])
            for i, p in enumerate(tensors)
            for d, s in enumerate(p.shape)
            if isinstance(s, NumberProxy) and env[s.name] <= 1
        )

    def first_sight(self, definition: Any, args: tuple) -> bool:
        """Whether this call brings `definition` a pattern of edge sizes it has not met before
        (and records it): such a call runs with torch instead of compiling."""
        pattern = self.pattern(args)
        if not pattern:
            return False
        key = (id(definition), pattern)
        if key in self.seen or len(self.seen) >= _MAX_SEEN:
            return False
        self.seen.add(key)
        return True
