"""autodiff: the joint forward + backward trace of a pure computation trace.

Assumes: a functionalized, flattened trace (prims only; write-backs `copy_to` at the end) and, for
each of its inputs, whether it requires grad.

Guarantees: `joint(trace, requires_grad)` returns a `Joint` whose trace
- takes the trace's inputs, then one cotangent per differentiable output (a float tensor output
  that depends on an input requiring grad, unless `cotangents` leaves it out), in output order;
- runs the forward bound symbols (same names; attention that gradients flow through rewritten to
  keep its softmax statistics, `vjp_attention.FORWARD_REWRITES`), then the backward: for each forward
  prim in reverse order whose output has a cotangent, its VJP rule (`vjp_rules.VJP`), the
  cotangents of a value read several times summed;
- returns `(outputs, grads)`: `outputs` the trace's distinct output proxies in order, `grads` one
  entry per input: the cotangent of an input requiring grad, zeros where every path from it to an
  output has a zero gradient (floor, sign, ...), None where no output depends on it (as eager
  autograd leaves `.grad` None), and None for inputs that do not require grad.
Raises NotImplementedError for a prim on a differentiable path that has no rule.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from compiler import prims
from compiler.core.errors import check
from compiler.core.ir import (
    BoundSymbol,
    NumberProxy,
    Proxy,
    TensorProxy,
    Trace,
    TraceContext,
    map_proxies,
    proxies_in,
    tracing,
)
from compiler.passes.vjp_attention import FORWARD_REWRITES, RESIDUALS
from compiler.passes.vjp_rules import NONDIFFERENTIABLE, VJP
from compiler.passes.vjp_structural import zeros, zeros_shaped
from compiler.prims import Prim


@dataclass(frozen=True)
class Joint:
    """The joint trace and how to read it (see the module)."""

    trace: Trace
    forward_length: int  # the first `forward_length` bound symbols are the forward
    outputs: tuple[Proxy, ...]  # the distinct outputs of the original trace, in order
    differentiable: tuple[bool, ...]  # per output: whether it has a cotangent input
    requires_grad: tuple[bool, ...]  # per original input


def distinct_outputs(trace: Trace) -> tuple[Proxy, ...]:
    """The proxies a trace returns, each once, in order of first appearance."""
    seen: dict[int, Proxy] = {}
    for p in proxies_in(trace.output):
        if isinstance(p, (TensorProxy, NumberProxy)):
            seen.setdefault(id(p), p)
    return tuple(seen.values())


def differentiable_values(trace: Trace, requires_grad: Sequence[bool]) -> set[str]:
    """Names of the float tensors that depend on an input requiring grad (through differentiable prims).

    Raises NotImplementedError where a complex tensor would carry a gradient (an input requiring
    grad, or a differentiable prim's output reached from one): eager differentiates it, and these
    rules are written for real values only, so treating it as a constant would lose the gradient
    without a word (a dynamo backend then runs that graph eagerly)."""
    seeds = []
    for p, r in zip(trace.inputs, requires_grad):
        if r and isinstance(p, TensorProxy):
            _check_real(p, lambda p=p: f"its input {p.name}")
            seeds += [p.name] if _float_tensor(p) else []
    return gradient_reach(trace, seeds)


def gradient_reach(trace: Trace, seeds: Iterable[str]) -> set[str]:
    """`seeds` and the names of the float tensors a gradient would flow through from them (their
    readers through differentiable prims, transitively); raises as `differentiable_values`."""
    live = set(seeds)
    for bsym in trace.bsyms:
        if bsym.sym in NONDIFFERENTIABLE or not any(p.name in live for p in _differentiated(bsym)):
            continue
        check(
            bsym.sym in VJP or bsym.sym in FORWARD_REWRITES,
            lambda bsym=bsym: f"autodiff: no VJP rule for {str(bsym).splitlines()[0]}",
            NotImplementedError,
        )
        outputs = bsym.outputs[:1] if bsym.sym in RESIDUALS else bsym.outputs
        for p in outputs:
            if isinstance(p, TensorProxy):
                _check_real(p, lambda bsym=bsym: f"`{str(bsym).splitlines()[0].strip()}`")
        live.update(p.name for p in outputs if _float_tensor(p))
    return live


def _check_real(p: TensorProxy, made_by: Callable[[], str]) -> None:
    check(
        not p.dtype.is_complex,
        lambda: (
            f"autodiff: the complex tensor {p.name} ({p.type_string()}, {made_by()}) carries a gradient; "
            "gradients through complex values are not supported"
        ),
        NotImplementedError,
    )


def _rewrite_forward(trace: Trace, live: set[str]) -> Trace:
    """`trace` with each line gradients flow through that has a forward rewrite (attention) rewritten."""
    if not any(b.sym in FORWARD_REWRITES for b in trace.bsyms):
        return trace
    context = TraceContext(reserved=trace.names())
    bsyms: list[BoundSymbol] = []
    for bsym in trace.bsyms:
        if bsym.sym not in FORWARD_REWRITES or not any(p.name in live for p in bsym.inputs):
            bsyms.append(bsym)
            continue
        start = len(context.bsyms)
        with tracing(context):
            stand_in = FORWARD_REWRITES[bsym.sym](bsym, live)
        # NOTE: the rewritten lines define the original output under its own name, so the lines
        # after it and the trace's output read it unchanged.
        for b in context.bsyms[start:]:
            bsyms.append(
                b.replace(output=map_proxies(b.output, lambda p, old=bsym.output, new=stand_in: old if p is new else p))
            )
    return trace.with_bsyms(bsyms)


def _differentiated(bsym: BoundSymbol) -> tuple[Proxy, ...]:
    """The inputs of `bsym` its VJP rule can give a gradient (an updated tensor's new value takes
    none: `prims.updated_without_grad`)."""
    return (bsym.args[1],) if bsym.sym is Prim.UPDATED_WITHOUT_GRAD else bsym.inputs


def _float_tensor(p: Any) -> bool:
    return isinstance(p, TensorProxy) and p.dtype.is_floating_point


class _Backward:
    """Accumulates cotangents while the VJP rules record the backward into `context`.

    The cotangents of a value are summed when its producer is visited (all its readers come later
    in the forward, so they have all been visited by then). Cotangents that are slices of it
    written into zeros (`slice_update`) and tile it along one dim, as the pieces of a `split` or
    `chunk` do, are joined with one `cat` instead of summing full-size tensors of zeros; slices
    written into zeros that do not cover it all, next to other cotangents (a chunk's halves of
    a tensor also read whole, as rotary embedding does), are written one after the other into
    one buffer of zeros (which `update_fresh` then writes in place).
    """

    def __init__(self, live: set[str], context: TraceContext) -> None:
        self.live = live
        self.context = context
        self.parts: dict[str, list[TensorProxy]] = {}
        self.reached: set[str] = set()

    def add(self, p: Proxy, g: TensorProxy) -> None:
        if p.name not in self.live:
            return
        check(
            g.dtype == p.dtype and len(g.shape) == len(p.shape),
            lambda: f"autodiff: the cotangent {g.name} of {p.name} is {g.type_string()}, expected {p.type_string()}",
            AssertionError,
        )
        self.parts.setdefault(p.name, []).append(g)

    def total(self, name: str) -> TensorProxy | None:
        parts = self.parts.get(name)
        if not parts:
            return None
        if len(parts) > 1:
            slices = [g for g in parts if self._slice_of_zeros(g) is not None]
            joined = self._tiles(slices) if len(slices) > 1 else None
            if joined is not None:  # NOTE: a rotary's halves: one cat (fused) plus the other terms
                parts = [joined, *(g for g in parts if all(g is not s for s in slices))]
            else:
                parts = self._chained(parts)
                if sum(self._slice_of_zeros(g) is not None for g in parts) > 1:
                    parts = [self._padded(g) for g in parts]
        scattered = [update for g in parts if (update := self._scattered_into_zeros(g)) is not None]
        if scattered and len(scattered) < len(parts):  # NOTE: added into the other terms, not into zeros
            parts = [g for g in parts if all(g is not u.output for u in scattered)]
        else:
            scattered = []
        result = parts[0]
        for g in parts[1:]:
            result = prims.add(result, g)
        for update in scattered:
            _, dim, index, src, _, _ = update.args
            result = prims.scatter_reduce(result, dim, index, src, "sum", True)
        self.parts[name] = [result]
        return result

    def _scattered_into_zeros(self, g: TensorProxy) -> BoundSymbol | None:
        """The `scatter_reduce(zeros, ..., "sum", ...)` that made `g` (a gather's cotangent), or None."""
        update = self._into_zeros(g, Prim.SCATTER_REDUCE)
        return update if update is not None and update.args[4] == "sum" else None

    def _slice_of_zeros(self, g: TensorProxy) -> BoundSymbol | None:
        """The `slice_update` that wrote `g` into zeros, or None."""
        return self._into_zeros(g, Prim.SLICE_UPDATE)

    def _into_zeros(self, g: TensorProxy, prim: Prim) -> BoundSymbol | None:
        """The `prim` update that made `g` by writing into a tensor of zeros, or None."""
        update = self.context.producers.get(id(g))
        if update is None or update.sym is not prim:
            return None
        base = self.context.producers.get(id(update.args[0]))
        return update if base is not None and base.sym is Prim.FULL and base.args[1] == 0 else None

    def _padded(self, g: TensorProxy) -> TensorProxy:
        """`g`, a slice of unit steps along one dim written into zeros, as the slice's value cat
        between zeros (a pad, which fuses: the slices of `x[1:] - x[:-1]`, or of an interleave's
        shifts, overlap, so neither tile nor chain); `g` itself where it is not such a slice."""
        update = self._slice_of_zeros(g)
        if update is None:
            return g
        base, value, starts, ends, steps = update.args
        moved = [d for d in range(g.ndim) if not (_same(starts[d], 0) and _same(ends[d], base.shape[d]))]
        if len(moved) != 1 or any(step != 1 for step in steps):
            return g
        d = moved[0]
        start, end, size = starts[d], ends[d], base.shape[d]
        if type(start) is not int or not (_same(end, size) or (type(end) is int and type(size) is int)):
            return g
        pieces = [value]
        if start > 0:
            pieces.insert(0, zeros_shaped(base, d, start))
        if not _same(end, size):
            pieces.append(zeros_shaped(base, d, size - end))
        return prims.cat(pieces, d)

    def _chained(self, parts: list[TensorProxy]) -> list[TensorProxy]:
        """`parts` with the slices written into zeros at disjoint places (a chunk's halves, one of
        them also read whole) written one after the other into the first one's zeros: one buffer
        instead of several full-size ones summed (the sum is the same: each element has one)."""
        chain: list[BoundSymbol] = []
        rest: list[TensorProxy] = []
        for g in parts:
            update = self._slice_of_zeros(g)
            if update is None or not all(_disjoint(update, other) for other in chain):
                rest.append(g)
                continue
            chain.append(update)
        if len(chain) < 2:
            return parts
        result = chain[0].output
        for update in chain[1:]:
            _, value, starts, ends, steps = update.args
            result = prims.slice_update(result, value, starts, ends, steps)
        return [result, *rest]

    def _tiles(self, parts: list[TensorProxy]) -> TensorProxy | None:
        """cat of the slices when `parts` are slices written into zeros that tile one dim, else None;
        slices of one step that interleave (`x[..., ::2]` and `x[..., 1::2]`), see `_interleaved`."""
        pieces = []
        for g in parts:
            update = self._slice_of_zeros(g)
            if update is None:
                return None
            _, value, starts, ends, steps = update.args
            moved = [d for d in range(g.ndim) if not (_same(starts[d], 0) and _same(ends[d], g.shape[d]))]
            if any(step != 1 for step in steps):
                return _interleaved([self._slice_of_zeros(g) for g in parts])
            if len(moved) != 1:
                return None
            pieces.append((moved[0], starts[moved[0]], ends[moved[0]], value))
        dim = pieces[0][0]
        order = []
        position: Any = 0
        while len(order) < len(pieces):
            following = next((p for p in pieces if p[0] == dim and _same(p[1], position) and p not in order), None)
            if following is None:
                return None
            order.append(following)
            position = following[2]
        if not _same(position, parts[0].shape[dim]):
            return None
        return prims.cat([value for _, _, _, value in order], dim)

    def visit(self, bsym: BoundSymbol) -> None:
        out = bsym.outputs[0] if bsym.sym in RESIDUALS else bsym.output
        if not isinstance(out, TensorProxy) or bsym.sym not in VJP:
            return
        if out.name not in self.parts and out.name not in self.reached:
            return
        self.reached.update(p.name for p in _differentiated(bsym) if p.name in self.live)
        if out.name not in self.parts:
            return  # NOTE: only a zero gradient reaches it: its inputs get zeros, as in eager
        for p, g in VJP[bsym.sym](bsym, self.total(out.name)):
            self.add(p, g)


def _interleaved(updates: list[BoundSymbol | None]) -> TensorProxy | None:
    """The values of slice updates into zeros that interleave along one dim, as one tensor: the
    updates `[a::s]` for every offset `a` below the step `s` of a dim of known size `n` that `s`
    divides (a GPT-J rotary's `x[..., ::2]` and `x[..., 1::2]`), each value read as `[n / s, 1]`
    there, cat along that new dim in offset order, and the `[n / s, s]` merged back to `n`; else
    None. A cat and a reshape fuse, where a stepped slice update runs in torch on zeros."""
    dims, steps_seen, by_offset = set(), set(), {}
    for update in updates:
        if update is None:
            return None
        base, value, starts, ends, steps = update.args
        stepped = [d for d, s in enumerate(steps) if s != 1]
        if len(stepped) != 1:
            return None
        d = stepped[0]
        size, offset, s = base.shape[d], starts[d], steps[d]
        whole = all(_same(starts[k], 0) and _same(ends[k], base.shape[k]) for k in range(base.ndim) if k != d)
        if not (whole and type(size) is int and type(offset) is int and size % s == 0 and 0 <= offset < s):
            return None
        if type(value.shape[d]) is not int or value.shape[d] != size // s or offset in by_offset:
            return None
        dims.add(d)
        steps_seen.add(s)
        by_offset[offset] = value
    if len(dims) != 1 or len(steps_seen) != 1 or sorted(by_offset) != list(range(step := steps_seen.pop())):
        return None
    d = dims.pop()
    shape = list(updates[0].args[0].shape)
    pieces = []
    for offset in range(step):
        value = by_offset[offset]
        column = [*value.shape[: d + 1], 1, *value.shape[d + 1 :]]
        kept = [k if k <= d else k + 1 for k in range(value.ndim)]
        pieces.append(prims.broadcast_in_dim(value, column, kept))
    return prims.reshape(prims.cat(pieces, d + 1), shape)


def _disjoint(a: BoundSymbol, b: BoundSymbol) -> bool:
    """Whether two step-1 slice updates write no element in common: along some dim one ends where
    (or before) the other starts."""
    (_, _, starts_a, ends_a, steps_a), (_, _, starts_b, ends_b, steps_b) = a.args, b.args
    if any(step != 1 for step in (*steps_a, *steps_b)):
        return False
    return any(_at_most(ends_a[d], starts_b[d]) or _at_most(ends_b[d], starts_a[d]) for d in range(len(starts_a)))


def _at_most(a: Any, b: Any) -> bool:
    """Whether `a <= b` is known without recording a guard."""
    return _same(a, b) or (type(a) is int and type(b) is int and a <= b)


def _same(a: Any, b: Any) -> bool:
    """Whether two sizes are known equal without recording a guard (the same proxy, or equal ints)."""
    return a is b or (type(a) is int and type(b) is int and a == b)


def joint(trace: Trace, requires_grad: Sequence[bool], cotangents: Sequence[bool] | None = None) -> Joint:
    """The joint forward + backward of `trace` for the inputs flagged in `requires_grad`; with
    `cotangents` (one flag per distinct output), only the flagged outputs take a cotangent (the
    others count as zero, never built)."""
    check(
        len(requires_grad) == len(trace.inputs),
        lambda: f"joint: {len(requires_grad)} requires_grad flags for {len(trace.inputs)} inputs",
        ValueError,
    )
    start = time.perf_counter()
    trace = _rewrite_forward(trace, differentiable_values(trace, requires_grad))
    live = differentiable_values(trace, requires_grad)
    outputs = distinct_outputs(trace)
    flags = [True] * len(outputs) if cotangents is None else cotangents
    differentiable = tuple(p.name in live and flag for p, flag in zip(outputs, flags, strict=True))
    context = TraceContext(reserved=trace.names())
    with tracing(context):
        with_cotangent = [p for p, d in zip(outputs, differentiable) if d]
        cotangents = [
            TensorProxy(p.shape, p.dtype, p.device, name=context.fresh(f"grad_{p.name}_")) for p in with_cotangent
        ]
        backward = _Backward(live, context)
        for p, g in zip(with_cotangent, cotangents):
            backward.add(p, g)
            backward.reached.add(p.name)
        for bsym in reversed(trace.bsyms):
            backward.visit(bsym)
        grads: list[TensorProxy | None] = []
        for p, r in zip(trace.inputs, requires_grad):
            g = backward.total(p.name)
            if g is None and r and p.name in backward.reached:
                g = zeros(p)
            grads.append(g if r else None)
    took_ms = (time.perf_counter() - start) * 1e3
    joint_trace = Trace(
        (*trace.inputs, *cotangents),
        list(trace.bsyms) + list(context.bsyms),
        (outputs, tuple(grads)),
        name="joint",
        provenance=f"autodiff (took {took_ms:.2f} ms)",
    )
    return Joint(joint_trace, len(trace.bsyms), outputs, differentiable, tuple(requires_grad))
