"""split_backward: a joint trace → a forward trace and a backward trace, saving the fewest bytes.

Assumes: a `Joint` from `autodiff.joint`.

Guarantees: `split_backward(joint)` returns a `Split`:
- `forward` takes the original inputs, runs the forward (write-backs included) and returns
  `(outputs, saved)`: the distinct outputs of the original trace, and the values saved for the
  backward (tensors first, then numbers such as symbolic sizes);
- `backward` takes `(*saved, *cotangents)` and returns one gradient per original input (None for
  inputs that get none), recomputing the forward values it needs that were not saved;
- both are dead-code eliminated.

Which values are saved is a minimum cut of the forward's dataflow graph (as functorch and
thunder choose): each forward value is a node split in two by an edge costing the memory traffic
saving it adds; the source feeds the inputs and every value whose prim is not cheap to
recompute (reductions, matmuls, attention, gathers and scatters); the values the backward reads
drain to the sink. Every value cut off from the source is recomputed in the backward, so cheap
elementwise and shape chains (GELU's tanh, a bias add) are recomputed rather than stored, and
their fused backward reads the inputs instead. A value that exists anyway (an input or an output)
costs its bytes (the backward reads it); an intermediate costs twice its bytes (the forward
writes it, the backward reads it), so a value is stored only where recomputing it would read more.
An operand of a matmul or attention in both the forward and the backward is saved, not
recomputed: the forward has it in memory anyway, and recomputing it would write it again for
the backward's matmul to read (torch.compile saves a GELU MLP's activation so as well).
Of equal cuts the one closest to the sink is taken (the fewest values recomputed): saving a
residual stream's x_k costs what saving the layer output added to it does, and recomputing x_k
from x_0 would chain every layer's recomputation into one.
Where recomputing is strictly cheaper (a post-norm residual, x_k = x_(k-1) + norm(m_k), whose
m_k and statistics the norm's backward reads anyway) a chain could still reach across the whole
model: the backward would open with one fusion recomputing every layer's stream (a few outputs
per layer, slow for nvFuser to compile) and hold them all. So a value is not recomputed from a
chain of same-sized values that started more than `RECOMPUTE_REACH` matmuls or attentions
earlier in the forward (about a transformer layer's); it is saved or recomputed from a saved
value nearer to it. Smaller operands broadcast into the chain (rotary tables, a norm's weight,
masks) do not extend it.
An input the forward writes into costs as an intermediate: saving it means saving a copy taken
before the write-back.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch

from compiler.core.errors import check
from compiler.core.ir import BoundSymbol, NumberProxy, Proxy, TensorProxy, Trace, TraceContext, proxies_in
from compiler.passes.autodiff import Joint
from compiler.passes.dce import dce
from compiler.passes.mincut import INFINITE, FlowGraph
from compiler.passes.returned import FORWARD
from compiler.passes.stop_gradient import without_stop_gradients
from compiler.prims import ELEMENTWISE, FACTORIES, GRADIENT_MARKERS, RANDOM, SHAPE_OPS, Prim, views_of

# Prims whose outputs the backward may recompute instead of loading them.
# NOTE: random draws are saved, never recomputed: drawing again would give other numbers.
RECOMPUTABLE = ELEMENTWISE | SHAPE_OPS | (FACTORIES - RANDOM - {Prim.EMPTY})
# Prims that read their operands from memory outside any fusion (cuBLAS, fused attention, cuDNN,
# grouped GEMMs).
MATERIALIZING = frozenset(
    {
        Prim.MATMUL,
        Prim.LINEAR,
        Prim.SDPA,
        Prim.SDPA_FORWARD,
        Prim.SDPA_BACKWARD,
        Prim.CONVOLUTION,
        Prim.CONVOLUTION_BACKWARD,
        Prim.CONVOLUTION_TRANSPOSE,
        Prim.GROUPED_MM,
    }
)
# How many MATERIALIZING prims a recomputation may reach back across (see the module).
RECOMPUTE_REACH = 8


@dataclass(frozen=True)
class Split:
    """The forward and backward traces of a joint trace, and what passes between them."""

    forward: Trace
    backward: Trace
    saved: tuple[Proxy, ...]
    differentiable: tuple[bool, ...]  # per forward output: whether the backward takes its cotangent


def nbytes(p: Proxy) -> int:
    """The bytes a value holds (symbolic sizes at their traced values; numbers count 8)."""
    if not isinstance(p, TensorProxy):
        return 8
    count = 1
    for s in p.shape:
        count *= s.value if isinstance(s, NumberProxy) else s
    return count * p.dtype.itemsize


def _numel(p: Proxy) -> int:
    return nbytes(p) // p.dtype.itemsize if isinstance(p, TensorProxy) else 1


def _beyond_reach(forward: Sequence[BoundSymbol], recomputable: set[str]) -> set[str]:
    """The recomputable values (names in `recomputable`) that are saved or recomputed from a value
    nearer to them instead: their chain of recomputable values of at least their size started
    more than RECOMPUTE_REACH materializing prims earlier in `forward`."""
    crossed, start, beyond = 0, {}, set()
    for b in forward:
        for p in b.outputs:
            if p.name not in recomputable:
                continue
            size = _numel(p)
            earliest = min((start[q.name] for q in b.inputs if q.name in start and _numel(q) >= size), default=crossed)
            if crossed - earliest > RECOMPUTE_REACH:
                beyond.add(p.name)
                earliest = crossed
            start[p.name] = earliest
        crossed += b.sym in MATERIALIZING
    return beyond


def _reads(bsyms: Iterable[BoundSymbol]) -> dict[str, Proxy]:
    return {p.name: p for b in bsyms for p in b.inputs}


def _live_backward(joint: Joint) -> list[BoundSymbol]:
    """The backward bound symbols the gradients need, in order."""
    backward = joint.trace.bsyms[joint.forward_length :]
    live = {p.name for p in proxies_in(joint.trace.output[1])}
    kept = []
    for bsym in reversed(backward):
        if any(p.name in live for p in bsym.outputs):
            kept.append(bsym)
            live.update(p.name for p in bsym.inputs)
    kept.reverse()
    return kept


def _read_by_materializing(bsyms: Sequence[BoundSymbol]) -> set[str]:
    """Names of the values a MATERIALIZING prim of `bsyms` reads, directly or through views."""
    view_of = {name: source.name for name, source in views_of(bsyms).items()}
    found = set()
    for b in bsyms:
        if b.sym in MATERIALIZING:
            for p in b.inputs:
                name = p.name
                found.add(name)
                while name in view_of:
                    name = view_of[name]
                    found.add(name)
    return found


def _choose_saved(joint: Joint, needed: dict[str, Proxy], live: Sequence[BoundSymbol]) -> list[Proxy]:
    """The values to save: the min cut (the backward recomputes the rest); `live`: the backward's
    bound symbols the gradients need (`_live_backward`)."""
    forward = joint.trace.bsyms[: joint.forward_length]
    producer = {p.name: b for b in forward for p in b.outputs}
    # NOTE: a matmul's (or attention's) operand in both passes is in memory after the forward
    # anyway; recomputing it would write it again in the backward for the matmul to read.
    in_memory = _read_by_materializing(forward) & _read_by_materializing(live)
    values: dict[str, Proxy] = {}
    stack = list(needed.values())
    while stack:  # the forward values the needed ones are computed from
        p = stack.pop()
        if p.name in values:
            continue
        values[p.name] = p
        if p.name in producer:
            stack.extend(producer[p.name].inputs)
    index = {name: i for i, name in enumerate(values)}
    source, sink = 2 * len(values), 2 * len(values) + 1
    graph = FlowGraph(2 * len(values) + 2)
    outputs = {p.name for p in joint.outputs}
    written = {b.args[1].name for b in forward if b.sym is Prim.COPY_TO}
    recomputable = {
        name for name in values if name in producer and producer[name].sym in RECOMPUTABLE and name not in in_memory
    }
    recomputable -= _beyond_reach(forward, recomputable)
    for name, p in values.items():
        i = index[name]
        bsym = producer.get(name)
        exists_anyway = (bsym is None or name in outputs) and name not in written
        cost = nbytes(p) if exists_anyway else 2 * nbytes(p)
        graph.add_edge(2 * i, 2 * i + 1, cost)
        if name not in recomputable:
            graph.add_edge(source, 2 * i, INFINITE)
        else:
            for q in bsym.inputs:
                graph.add_edge(2 * index[q.name] + 1, 2 * i, INFINITE)
        if name in needed:
            graph.add_edge(2 * i + 1, sink, INFINITE)
    _, reachable = graph.min_cut(source, sink)
    saved = [p for name, p in values.items() if 2 * index[name] in reachable and 2 * index[name] + 1 not in reachable]
    position = {p.name: i for i, p in enumerate([*joint.trace.inputs, *(q for b in forward for q in b.outputs)])}
    saved.sort(key=lambda p: (not isinstance(p, TensorProxy), position[p.name]))
    return saved


def _without_stop_gradients(joint: Joint) -> Joint:
    """`joint` with its `stop_gradient` lines dropped: the backward is built, they only cost now."""
    trace = joint.trace
    returned = {id(p) for p in joint.outputs}
    forward = trace.bsyms[: joint.forward_length]
    dropped = sum(b.sym in GRADIENT_MARKERS and id(b.output) not in returned for b in forward)
    bsyms = without_stop_gradients(trace.bsyms, joint.outputs)
    return replace(joint, trace=trace.with_bsyms(bsyms), forward_length=joint.forward_length - dropped)


def split_backward(joint: Joint) -> Split:
    """The forward and backward traces of `joint` (see the module)."""
    start = time.perf_counter()
    joint = _without_stop_gradients(joint)
    trace = joint.trace
    live = _live_backward(joint)
    needed = _needed(joint, live)
    saved = _choose_saved(joint, needed, live)
    forward = list(trace.bsyms[: joint.forward_length])
    forward_saved = list(saved)
    written = {b.args[1].name for b in forward if b.sym is Prim.COPY_TO}
    handed = {b.args[0].name for b in forward if b.sym is Prim.COPY_TO}
    context = TraceContext(reserved=trace.names())
    for i, p in enumerate(saved):
        if p.name in written or p.name in handed:
            # NOTE: the write-backs overwrite this input (or take this value into a buffer, after
            # which the forward may not return it), so the forward saves a copy taken before the
            # first write-back; the backward still calls the value by its own name.
            copy = TensorProxy(p.shape, p.dtype, p.device, name=context.fresh(f"{p.name}_saved"))
            at = (
                0
                if p.name in written
                else next(k for k, b in enumerate(forward) if b.sym is Prim.COPY_TO and b.args[0].name == p.name)
            )
            forward.insert(at, BoundSymbol(Prim.MUL, (p, True if p.dtype == torch.bool else 1), {}, copy))
            forward_saved[i] = copy
    took = f"(took {(time.perf_counter() - start) * 1e3:.2f} ms)"
    primals = joint.trace.inputs[: _primal_count(joint)]
    forward_trace = Trace(primals, forward, (joint.outputs, tuple(forward_saved)), name=FORWARD)
    return Split(
        forward=replace(dce(forward_trace), provenance=f"split_backward {took}"),
        backward=replace(_backward_from_saved(joint, saved, live, needed), provenance=f"split_backward {took}"),
        saved=tuple(saved),
        differentiable=joint.differentiable,
    )


def backward_from_saved(joint: Joint, saved: Sequence[Proxy]) -> Trace:
    """The backward of `joint` taking `(*saved, *cotangents)`: the forward values it reads that are
    not saved are recomputed from saved ones. Raises AssertionError when `saved` is not enough."""
    joint = _without_stop_gradients(joint)
    live = _live_backward(joint)
    return _backward_from_saved(joint, saved, live, _needed(joint, live))


def _backward_from_saved(
    joint: Joint, saved: Sequence[Proxy], live: list[BoundSymbol], needed: dict[str, Proxy]
) -> Trace:
    """`backward_from_saved` of a joint without its `stop_gradient` lines, whose backward lines
    the gradients need are `live` (`_live_backward`), reading the forward values `needed`."""
    trace = joint.trace
    forward = trace.bsyms[: joint.forward_length]
    producer = {p.name: b for b in forward for p in b.outputs}
    available = {p.name for p in saved}
    recomputed: set[int] = set()
    stack = list(needed.values())
    while stack:
        p = stack.pop()
        if p.name in available:
            continue
        bsym = producer.get(p.name)
        check(
            bsym is not None and bsym.sym in RECOMPUTABLE,
            lambda p=p: f"backward_from_saved: {p.name} is neither saved nor recomputable from saved values",
            AssertionError,
        )
        available.update(q.name for q in bsym.outputs)
        recomputed.add(id(bsym))
        stack.extend(bsym.inputs)
    recompute = [b for b in forward if id(b) in recomputed]
    cotangents = trace.inputs[_primal_count(joint) :]
    backward = Trace((*saved, *cotangents), recompute + live, trace.output[1], name="backward")
    return dce(backward)


def _primal_count(joint: Joint) -> int:
    return len(joint.trace.inputs) - sum(joint.differentiable)


def _needed(joint: Joint, backward_bsyms: Sequence[BoundSymbol]) -> dict[str, Proxy]:
    """The forward values (and inputs) that `backward_bsyms` (`_live_backward`) read, by name."""
    trace = joint.trace
    cotangents = trace.inputs[_primal_count(joint) :]
    defined_in_backward = {p.name for b in backward_bsyms for p in b.outputs} | {p.name for p in cotangents}
    return {
        name: p
        for name, p in (_reads(backward_bsyms) | {p.name: p for p in proxies_in(trace.output[1])}).items()
        if name not in defined_in_backward
    }


def saved_summary(saved: Iterable[Any]) -> list[tuple[str, tuple, Any, int]]:
    """(name, shape, dtype, bytes) of each saved value (numbers: shape (), their Python type)."""
    rows = []
    for p in saved:
        if isinstance(p, TensorProxy):
            rows.append((p.name, tuple(p.shape), p.dtype, nbytes(p)))
        else:
            rows.append((p.name, (), getattr(p, "python_type", type(p)), nbytes(p)))
    return rows
