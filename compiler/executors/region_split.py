"""A fusion region its compiler fails on, cut into pieces that each compile, or run with torch.

A fusion compiler's bug usually sits in one corner of a region (a squeeze after a segment
boundary, a vectorised read of a permuted input, a reduction it cannot rfactor): running the whole
region's prims with torch then costs a kernel per prim for the sake of one. So a region that fails
is cut in two (`halves`), each half a region of its own for the same executor; a half that fails
too is cut again (its `RegionFallback` does so on its first call), down to pieces of fewer than
`MIN_FUSED` prims, which run with torch. `split_function` is the function that runs the pieces in
trace order, through the same code generator as a fused trace.

Where to cut: in trace order (each half then reads only the region's inputs and what earlier halves
computed), within the middle half of the region's prims and leaving each half `MIN_FUSED` prims
where the region has enough, where the values crossing the cut are the fewest elements (each
crossing value is one more tensor written and read again); of equal cuts, the most even.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from compiler.core.executor import Region
from compiler.core.ir import BoundSymbol, Symbol, Trace
from compiler.executors.codegen import compile_trace
from compiler.executors.torch import TorchExecutor
from compiler.passes.fusion_groups import static_numel

MIN_FUSED = 4  # a piece of fewer prims runs with torch: a fusion of it would save little
_TORCH = TorchExecutor()


def _cut(region: Region) -> int:
    """The index in `region.bsyms` to cut before (see the module doc)."""
    bsyms = region.bsyms
    n = len(bsyms)
    defined: dict[int, int] = {}
    last_read: dict[int, int] = {}
    weight: dict[int, int] = {}
    for i, b in enumerate(bsyms):
        for p in b.inputs:
            if id(p) in defined:
                last_read[id(p)] = i
        for p in b.outputs:
            defined[id(p)] = i
            weight[id(p)] = static_numel(p) or 0
    unknown = max(weight.values(), default=0) or 1  # a symbolic size counts as the largest static one
    # NOTE: within the middle half, and where the region is long enough, with both halves long enough to fuse
    margin = max(n // 4, min(MIN_FUSED, n // 2))
    lo, hi = max(1, margin), max(1, min(n - 1, n - margin))

    def crossing(i: int) -> int:
        return sum(weight[k] or unknown for k, at in defined.items() if at < i <= last_read.get(k, -1))

    return min(range(lo, hi + 1), key=lambda i: (crossing(i), abs(2 * i - n)))


def _piece(region: Region, bsyms: Sequence[BoundSymbol], read_later: set[int], name: str) -> Region:
    """The region of `bsyms` (a run of `region`'s prims): it returns what they define that
    `region` returns or a later piece reads."""
    returned = {id(p) for p in region.outputs}
    return Region.of(name, bsyms, lambda key: key in returned or key in read_later, region.written)


def halves(region: Region) -> tuple[Region, Region]:
    """`region` cut in two regions, named `{name}_0` and `{name}_1` (see the module doc)."""
    at = _cut(region)
    first, second = region.bsyms[:at], region.bsyms[at:]
    read_by_second = {id(p) for b in second for p in b.inputs}
    return (
        _piece(region, first, read_by_second, f"{region.name}_0"),
        _piece(region, second, set(), f"{region.name}_1"),
    )


def torch_function(region: Region) -> Callable:
    """`region`'s prims (or its pieces' callables) as one Python function run by the torch
    executor (args: its inputs; returns its outputs)."""
    trace = Trace(region.inputs, list(region.bsyms), region.outputs, name=region.name.lower())
    return compile_trace(trace, [_TORCH])


def split_function(
    region: Region, make: Callable[[Region], Callable], executor_name: str
) -> tuple[Callable, list[Callable | Region]]:
    """A function running `region` (args: its inputs; returns its outputs) as its two halves:
    `make(piece)` runs a half of at least `MIN_FUSED` prims (the executor's region callable),
    torch the prims of a smaller one. Also returns, per half, its callable or (for torch) its region."""
    bsyms: list[BoundSymbol] = []
    parts: list[Callable | Region] = []
    for piece in halves(region):
        if len(piece.bsyms) < MIN_FUSED:
            bsyms.extend(piece.bsyms)
            parts.append(piece)
            continue
        impl = make(piece)
        bsyms.append(BoundSymbol(Symbol(piece.name, impl, executor_name), piece.inputs, {}, piece.outputs, piece.bsyms))
        parts.append(impl)
    return torch_function(Region(region.name, tuple(bsyms), region.inputs, region.outputs)), parts
