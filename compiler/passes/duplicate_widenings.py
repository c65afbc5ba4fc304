"""duplicate_widenings: an upcast, a broadcast or a scalar computation read by several fusible
prims becomes one per reader.

Assumes: a flattened, pure trace, right before `fuse`, its conversion and reshape chains folded
(`fold_conversions` runs first: `x.float().to(bf16).float()` of a bf16 `x` is `x.float()`), so
that the upcasts found are those of the values the program reads. Guarantees: every widening
(`is_widening`: a `convert_element_type` to a wider dtype, or a `broadcast_in_dim`) and every
scalar computation (`is_scalar_computation`: an elementwise prim whose result is a 0-d tensor)
read by more than one elementwise, reduction or shape prim gets a copy per such reader after the
first (same source, placed just before the reader); values are unchanged, and readers of other
kinds (a matmul, the trace's output) keep the original. At most `MAX_SCALAR_COPIES` scalar
computations are copied in all (a chain of them is copied once per reader of its end), and none
of the `scalar_prologue` (computed once by torch instead).

Why: a widening makes a tensor at least as large as it reads, which its reader could make
itself. cse merges the `x.float()` of an RMSNorm and of the residual add after attention into one
float32 value, and the rotary embedding's cos broadcast to a layer's query heads into one value
for every layer. When `fuse` puts those readers in different regions, that value crosses between
them as the wide tensor: written by one region and read by the other, where both could read the
narrow one (in a Llama block's forward, 134 MB of float32 residual; in a decode step, the cos and
sin of every layer written by the first fusion). With a copy per reader, a widening of a value no region computes
(a trace input, a matmul's output) joins its reader's region, which reads the narrow value; a
widening of a value a region computes joins that region, as `fuse` merges producers first, and
`fuse` then moves it to its reader's region (`sink_widenings`). Regions that read one narrow
value may then merge (a layer's query and key rotations, which read the same cos and sin). A
region holding several copies computes the same widening twice, which costs nothing next to a
pass over memory.
A scalar computation shared by independent updates (an optimizer step's `-lr * 2` of a learning
rate given as a 0-d float32 tensor, torch.optim's capturable idiom) would otherwise be the one
producer every update's region merges into: one fusion of every parameter's update, whose nvFuser
compilation grows with the parameter count. With a copy per reader each update stays its own
region, as it is when the learning rate is a number, and computes the scalar for itself (float32
arithmetic per element, next to a pass over memory); 64-bit ones (`scalar_prologue`) are
computed once instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from compiler.core.context import TraceContext
from compiler.core.ir import BoundSymbol, Proxy, TensorProxy, Trace, map_proxies
from compiler.passes import trace_pass
from compiler.prims import ELEMENTWISE, REDUCTIONS, SHAPE_OPS, Prim

_FUSIBLE_READERS = ELEMENTWISE | REDUCTIONS | SHAPE_OPS
MAX_SCALAR_COPIES = 4096  # scalar computations copied in all, at most (a bound, not a tuning knob)


def is_upcast(bsym: BoundSymbol) -> bool:
    """Whether `bsym` converts a tensor to a wider dtype."""
    if bsym.sym is not Prim.CONVERT_ELEMENT_TYPE:
        return False
    source, dtype = bsym.args[0], bsym.args[1]
    return (
        isinstance(source, TensorProxy)
        and isinstance(bsym.output, TensorProxy)
        and bsym.output.dtype.itemsize > source.dtype.itemsize
        and dtype == bsym.output.dtype
    )


def is_broadcast(bsym: BoundSymbol) -> bool:
    """Whether `bsym` broadcasts a tensor (to more elements, or only adding size-1 dims: either way
    a reader makes it for free, and a region writing it would write a tensor of broadcast dims)."""
    return bsym.sym is Prim.BROADCAST_IN_DIM and isinstance(bsym.args[0], TensorProxy)


def is_widening(bsym: BoundSymbol) -> bool:
    """Whether `bsym` makes a larger tensor than it reads, which any reader could make itself: an
    upcast or a broadcast."""
    return is_upcast(bsym) or is_broadcast(bsym)


def is_scalar_computation(bsym: BoundSymbol) -> bool:
    """Whether `bsym` is an elementwise prim computing a 0-d tensor (from 0-d tensors and numbers:
    elementwise prims read operands of their result's shape), which any reader can compute itself."""
    return bsym.sym in ELEMENTWISE and isinstance(bsym.output, TensorProxy) and bsym.output.shape == ()


_WIDE_SCALARS = (torch.float64, torch.int64, torch.bool)  # the dtypes of numbers read from device scalars


def scalar_prologue(inputs: Sequence[Proxy], bsyms: Sequence[BoundSymbol]) -> list[int]:
    """The positions in `bsyms` of the scalar computations made from the float64, int64 and bool 0-d
    tensors among `inputs` (numbers read from device scalars, passes/device_scalars.py) and numbers
    alone, directly or through each other: an Adam step's bias corrections from its step count. In
    a region they would be computed again for every element of every parameter, in float64 and
    int64 arithmetic, which GPUs run at a fraction of float32's rate: `fuse` leaves them to torch,
    which computes each once, and they are not copied per reader."""
    scalars = {id(p) for p in inputs if isinstance(p, TensorProxy) and p.shape == () and p.dtype in _WIDE_SCALARS}
    found = []
    for i, bsym in enumerate(bsyms):
        tensors = [p for p in bsym.inputs if isinstance(p, TensorProxy)]
        if is_scalar_computation(bsym) and tensors and all(id(p) in scalars for p in tensors):
            scalars.add(id(bsym.output))
            found.append(i)
    return found


@trace_pass("duplicate_widenings")
def duplicate_widenings(trace: Trace) -> Trace:
    """The trace with a copy of each shared widening and scalar computation for every fusible
    reader after its first.

    A chain of them (the cos of a rotary embedding broadcast to a layer's heads, then upcast: cse
    shares both across the layers; a bias correction computed from a step count) is copied whole:
    once the last has a copy per reader, the one before it is read by each copy, and gets a copy
    per copy in turn."""
    bsyms = list(trace.bsyms)
    context = TraceContext(reserved=trace.names())
    budget = [MAX_SCALAR_COPIES]
    # NOTE: found once: a prologue prim reads only prologue values, which are never copied, so it is
    # never replaced by a later round
    prologue = frozenset(id(bsyms[i]) for i in scalar_prologue(trace.inputs, bsyms))
    while (copied := _copy_shared(bsyms, context, budget, prologue)) is not None:
        bsyms = copied
    return trace.with_bsyms(bsyms)


def _copy_shared(
    bsyms: list[BoundSymbol], context: TraceContext, budget: list[int], prologue: frozenset[int]
) -> list[BoundSymbol] | None:
    """`bsyms` with a copy of each widening (and, while `budget[0]` scalar copies are left, each
    scalar computation) for every fusible reader after its first, the `prologue` (ids of bound
    symbols computed once by torch, `fuse`) left alone, or None when none has more than one."""
    fusible_readers: dict[str, int] = {}
    for bsym in bsyms:
        if bsym.sym in _FUSIBLE_READERS:
            for name in {p.name for p in bsym.inputs}:
                fusible_readers[name] = fusible_readers.get(name, 0) + 1
    copied = lambda b: fusible_readers.get(b.output.name, 0) - 1
    candidates = [
        b for b in bsyms if (is_widening(b) or is_scalar_computation(b)) and id(b) not in prologue and copied(b) > 0
    ]
    shared = {b.output.name: b for b in candidates if is_widening(b)}
    scalars = [b for b in candidates if not is_widening(b)]
    count = sum(map(copied, scalars))
    if count <= budget[0]:
        budget[0] -= count
        shared.update((b.output.name, b) for b in scalars)
    if not shared:
        return None
    first_reader_seen: set[str] = set()
    result: list[BoundSymbol] = []
    for bsym in bsyms:
        copies: dict[str, Proxy] = {}
        if bsym.sym in _FUSIBLE_READERS:
            for name in dict.fromkeys(p.name for p in bsym.inputs if p.name in shared):
                if name not in first_reader_seen:
                    first_reader_seen.add(name)
                    continue
                original = shared[name].output
                copy = TensorProxy(original.shape, original.dtype, original.device, name=context.fresh(name))
                result.append(shared[name].replace(output=copy))
                copies[name] = copy
        if copies:

            def substitute(value: Any, copies: dict[str, Proxy] = copies) -> Any:
                return map_proxies(value, lambda q: copies.get(q.name, q))

            bsym = bsym.replace(args=substitute(bsym.args), kwargs=substitute(bsym.kwargs))
        result.append(bsym)
    return result
