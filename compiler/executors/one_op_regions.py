"""Regions that are the decomposition of one torch op, run on CPU as that op's own ATen call.

ATen's CPU kernels for softmax, log-softmax, layer norm, GELU, SiLU and cross-entropy are
hand-vectorised loops that a region's generated kernel (Inductor's C++) does not beat; a region
made of exactly one such op's prims (the fusion pass found nothing around it to fuse with) gains
nothing from being compiled, so it runs the op, as eager would, and nothing is compiled for it.

Recognised by value numbering, not by the prims' order or names: each candidate of `CANDIDATES`
(an op with its arguments read off the region: the dim it reduces, the constants it holds, which
inputs are the weight and the bias) is traced by the frontend with the op's own decomposition,
over tensors like the region's inputs, and matches when every output of the region is the same
value as the candidate's: the same prims applied to the same inputs and constants, whatever their
order, names, duplicated casts or `stop_gradient`s (`passes/` drops or copies those). A region
that matches no candidate is compiled as before.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from compiler.core.dtypes import compute_dtype
from compiler.core.executor import Region
from compiler.core.ir import BoundSymbol, NumberProxy, Proxy, TensorProxy
from compiler.executors.codegen import Globals
from compiler.prims import GUARDS, Prim

# NOTE: a region above this many prims is never one op's decomposition (cross-entropy's is the
# longest candidate); such regions are not traced against the candidates at all
MAX_PRIMS = 64


@dataclass(frozen=True)
class Input:
    """The region's input at `index`, as an argument of a `Call`."""

    index: int


@dataclass(frozen=True)
class Call:
    """`op(*args, **kwargs)`, whose arguments are region `Input`s, other `Call`s or constants."""

    op: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: tuple[tuple[str, Any], ...] = ()

    def run(self, inputs: Sequence[Any]) -> Any:
        """The call's value for the region's `inputs`."""
        resolve = lambda a: inputs[a.index] if isinstance(a, Input) else a.run(inputs) if isinstance(a, Call) else a
        return self.op(*map(resolve, self.args), **{k: resolve(v) for k, v in self.kwargs})

    def substituted(self, calls: dict[int, Call]) -> Call:
        """This call with the region inputs at the keys of `calls` read through those calls."""
        if not calls:
            return self
        swap = lambda a: (
            calls.get(a.index, a) if isinstance(a, Input) else a.substituted(calls) if isinstance(a, Call) else a
        )
        return Call(self.op, tuple(map(swap, self.args)), tuple((k, swap(v)) for k, v in self.kwargs))

    def source(self, names: Sequence[str], g: Globals) -> str:
        """The call as a Python expression over the inputs' `names` (its callables bound in `g`)."""
        render = lambda a: (
            names[a.index] if isinstance(a, Input) else a.source(names, g) if isinstance(a, Call) else g.source(a)
        )
        args = [render(a) for a in self.args] + [f"{k}={render(v)}" for k, v in self.kwargs]
        return f"{g.bind(self.op, getattr(self.op, '__name__', 'op'))}({', '.join(args)})"


@dataclass(frozen=True)
class OneOpCall:
    """The torch call a region's prims decompose (its one output); `description` says what it
    runs, as a reader writes it; `eager_backward`: whether ATen's backward of the call is as fast
    as a compiled one (runtime/pipeline.py then lets a program of such calls record it)."""

    call: Call
    description: str
    eager_backward: bool = True

    def fn(self, *inputs: Any) -> tuple:
        """The region's outputs (a 1-tuple) for its `inputs`."""
        return (self.call.run(inputs),)


# ---------------------------------------------------------------------------------------------
# What a region holds


def _reduced_dims(region: Region) -> set[tuple[int, ...]]:
    return {tuple(b.args[1]) for b in region.bsyms if b.sym in (Prim.AMAX, Prim.SUM)}


def _epsilons(region: Region) -> list[float]:
    """The numbers the region adds to a value before its reciprocal square root (a norm's eps)."""
    rooted = {id(b.args[0]) for b in region.bsyms if b.sym is Prim.RSQRT}
    found = {
        a for b in region.bsyms if b.sym is Prim.ADD and id(b.output) in rooted for a in b.args if type(a) is float
    }
    return sorted(found)


def _tensor_inputs(region: Region) -> list[TensorProxy] | None:
    """The region's inputs when all are tensors of static sizes (else None: no candidate applies)."""
    inputs = list(region.inputs)
    if not all(isinstance(p, TensorProxy) and all(isinstance(s, int) for s in p.shape) for p in inputs):
        return None
    return inputs


# ---------------------------------------------------------------------------------------------
# Candidates: (prims a region must hold, the calls it may be)


def _softmax_like(op: Callable, name: str) -> Callable[[Region, list[TensorProxy]], Iterator[OneOpCall]]:
    def propose(region: Region, inputs: list[TensorProxy]) -> Iterator[OneOpCall]:
        if len(inputs) != 1 or len(region.outputs) != 1:
            return
        out_dtype = region.outputs[0].dtype
        for dims in _reduced_dims(region):
            if len(dims) != 1:
                continue
            (dim,) = dims
            yield OneOpCall(Call(op, (Input(0), dim)), f"{name}(x, {dim})")
            if out_dtype != inputs[0].dtype:
                yield OneOpCall(
                    Call(op, (Input(0), dim), (("dtype", out_dtype),)), f"{name}(x, {dim}, dtype={out_dtype})"
                )

    return propose


def _layer_norm(region: Region, inputs: list[TensorProxy]) -> Iterator[OneOpCall]:
    if len(region.outputs) != 1 or not 1 <= len(inputs) <= 3:
        return
    for x_at, x in enumerate(inputs):
        others = [i for i in range(len(inputs)) if i != x_at]
        for dims in _reduced_dims(region):
            start = len(x.shape) - len(dims)
            if not dims or tuple(dims) != tuple(range(start, len(x.shape))):
                continue
            shape = tuple(x.shape[start:])
            if any(tuple(inputs[i].shape) != shape for i in others):
                continue
            for order in itertools.permutations(others):
                weight_bias = tuple(Input(i) for i in order) + (None,) * (2 - len(order))
                for eps in _epsilons(region):
                    call = Call(torch.layer_norm, (Input(x_at), shape, *weight_bias, eps))
                    # NOTE: ATen's CPU layer-norm backward in bf16/fp16 (computed in float32) is slower
                    # than a compiled one
                    fast = compute_dtype(x.dtype) == x.dtype
                    yield OneOpCall(call, f"layer_norm(x, {list(shape)}, eps={eps})", fast)


def _gelu(region: Region, inputs: list[TensorProxy]) -> Iterator[OneOpCall]:
    if len(inputs) == 1 and len(region.outputs) == 1:
        for approximate in ("none", "tanh"):
            call = Call(F.gelu, (Input(0),), (("approximate", approximate),))
            yield OneOpCall(call, f"gelu(x, approximate={approximate!r})")


def _silu_times(region: Region, inputs: list[TensorProxy]) -> Iterator[OneOpCall]:
    if len(region.outputs) != 1:
        return
    if len(inputs) == 1:
        yield OneOpCall(Call(F.silu, (Input(0),)), "silu(x)")
    elif len(inputs) == 2:
        for gate, up in ((0, 1), (1, 0)):
            silu = Call(F.silu, (Input(gate),))
            yield OneOpCall(Call(torch.mul, (silu, Input(up))), "silu(gate) * up")
            yield OneOpCall(Call(torch.mul, (Input(up), silu)), "up * silu(gate)")


def _float(t: Any) -> Any:
    """`t.float()` (a method: a proxy while tracing, a tensor when run)."""
    return t.float()


def _cross_entropy(region: Region, inputs: list[TensorProxy]) -> Iterator[OneOpCall]:
    if len(inputs) != 2 or len(region.outputs) != 1:
        return
    for logits, target in ((0, 1), (1, 0)):
        if not inputs[logits].dtype.is_floating_point or inputs[target].dtype.is_floating_point:
            continue
        # NOTE: `F.cross_entropy(logits.float(), target)`, as transformers' losses write it: two calls
        upcasts = [(Input(logits), "logits")]
        if inputs[logits].dtype in (torch.bfloat16, torch.float16):
            upcasts.append((Call(_float, (Input(logits),)), "logits.float()"))
        for logits_value, written in upcasts:
            for reduction in ("mean", "sum"):
                call = Call(F.cross_entropy, (logits_value, Input(target)), (("reduction", reduction),))
                yield OneOpCall(call, f"cross_entropy({written}, target, reduction={reduction!r})")


Proposer = Callable[[Region, list[TensorProxy]], Iterator[OneOpCall]]
# (prims a region of that op holds, the calls to try); tried in order, the first match wins
CANDIDATES: list[tuple[frozenset[Prim], Proposer]] = [
    (frozenset({Prim.AMAX, Prim.EXP, Prim.SUM, Prim.RECIPROCAL}), _softmax_like(torch.softmax, "softmax")),
    (frozenset({Prim.AMAX, Prim.EXP, Prim.SUM, Prim.LOG}), _softmax_like(torch.log_softmax, "log_softmax")),
    (frozenset({Prim.AMAX, Prim.EXP, Prim.SUM, Prim.LOG, Prim.TAKE_ALONG_DIM}), _cross_entropy),
    (frozenset({Prim.SUM, Prim.RSQRT, Prim.SUB}), _layer_norm),
    (frozenset({Prim.ERF}), _gelu),
    (frozenset({Prim.TANH}), _gelu),
    (frozenset({Prim.EXP}), _silu_times),
]


# ---------------------------------------------------------------------------------------------
# Value numbering


class _Numbering:
    """Numbers values by what computes them: equal numbers, equal values (hash-consed)."""

    def __init__(self) -> None:
        self.table: dict[Hashable, int] = {}

    def intern(self, key: Hashable) -> int:
        return self.table.setdefault(key, len(self.table))

    def outputs(self, inputs: Sequence[Proxy], bsyms: Sequence[BoundSymbol], outputs: Sequence[Proxy]) -> tuple | None:
        """The numbers of `outputs` computed by `bsyms` from `inputs` (None: something unknown)."""
        numbers: dict[int, int] = {id(p): self.intern(("input", i)) for i, p in enumerate(inputs)}

        def number(value: Any) -> Hashable:
            if isinstance(value, Proxy):
                found = numbers.get(id(value))
                if found is None:
                    raise KeyError(value.name)
                return ("value", found)
            if isinstance(value, (tuple, list)):
                return tuple(number(v) for v in value)
            if isinstance(value, dict):
                return tuple(sorted((k, number(v)) for k, v in value.items()))
            return (type(value).__name__, value)

        try:
            for bsym in bsyms:
                if bsym.sym in GUARDS:
                    continue
                if bsym.sym is Prim.STOP_GRADIENT:
                    numbers[id(bsym.output)] = numbers[id(bsym.args[0])]
                    continue
                key = (bsym.sym, number(bsym.args), number(bsym.kwargs))
                outs = bsym.outputs
                for i, p in enumerate(outs):
                    numbers[id(p)] = self.intern(key if len(outs) == 1 else (key, i))
            return tuple(numbers[id(p)] for p in outputs)
        except (KeyError, TypeError):  # NOTE: an unhashable constant, or a value from outside
            return None


def _prims_of(call: OneOpCall, inputs: list[TensorProxy]) -> tuple[list[Proxy], list[BoundSymbol], list[Proxy]] | None:
    """(inputs, prims, outputs) of `call` traced over empty tensors like `inputs` (None when it
    does not trace)."""
    from compiler.passes.flatten import flatten
    from compiler.passes.fold_conversions import fold_conversions
    from compiler.tracing import frontend

    examples = [torch.empty(p.shape, dtype=p.dtype, device=p.device) for p in inputs]
    try:
        with torch.no_grad():
            _, computation = frontend.trace(call.fn, tuple(examples), {})
    except Exception:  # NOTE: a candidate that does not apply to these inputs (a dtype it refuses)
        return None
    # NOTE: the region was cut from a trace whose conversions `fold_conversions` moved (an upcast
    # after the lookup or the reshape that reads it): the candidate's prims are folded alike
    flat = fold_conversions(flatten(computation))
    outputs = list(_flat_outputs(flat.output))
    if len(flat.inputs) != len(inputs):
        return None
    return list(flat.inputs), list(flat.bsyms), outputs


def _flat_outputs(output: Any) -> Iterator[Proxy]:
    if isinstance(output, Proxy):
        yield output
    elif isinstance(output, (tuple, list)):
        for value in output:
            yield from _flat_outputs(value)


def _viewed_inputs(
    region: Region, inputs: list[TensorProxy]
) -> Iterator[tuple[list[TensorProxy], dict[int, Call], str]]:
    """The region's inputs as the op may read them: as they come; each one the region reshapes
    first (a model's views before the op) as that reshape; every bf16 or fp16 one the region
    upcasts as that upcast (`op(x.float())`)."""
    yield inputs, {}, ""
    for b in region.bsyms:
        at = next((i for i, p in enumerate(inputs) if b.args and b.args[0] is p), None)
        if b.sym is Prim.RESHAPE and at is not None and all(isinstance(s, int) for s in b.args[1]):
            viewed = [b.output if i == at else p for i, p in enumerate(inputs)]
            yield viewed, {at: Call(torch.reshape, (Input(at), tuple(b.args[1])))}, f" of input {at} reshaped"
    upcasts = {
        i: b.output
        for b in region.bsyms
        if b.sym is Prim.CONVERT_ELEMENT_TYPE and b.args[1] == torch.float32
        for i, p in enumerate(inputs)
        if b.args[0] is p and p.dtype in (torch.bfloat16, torch.float16)
    }
    if upcasts:
        calls = {i: Call(_float, (Input(i),)) for i in upcasts}
        yield [upcasts.get(i, p) for i, p in enumerate(inputs)], calls, f" of inputs {sorted(upcasts)} upcast"


def _variants(region: Region, inputs: list[TensorProxy], propose: Proposer) -> Iterator[OneOpCall]:
    """The calls `propose` makes, over the inputs as they come or viewed (`_viewed_inputs`), and
    each also with its result upcast by `.float()` (an op in bf16 whose result is upcast after)."""
    upcast = region.outputs[0].dtype == torch.float32 and len(region.outputs) == 1
    for viewed, views, how in _viewed_inputs(region, inputs):
        for call in propose(region, viewed):
            made = OneOpCall(call.call.substituted(views), call.description + how, call.eager_backward)
            yield made
            if upcast:
                yield OneOpCall(Call(_float, (made.call,)), f"{made.description}.float()", made.eager_backward)


def one_op_call(region: Region) -> OneOpCall | None:
    """The one torch op `region`'s prims are the decomposition of, as a call on its inputs; None
    when it is not one of `CANDIDATES` (or writes into an input, or has symbolic sizes)."""
    inputs = _tensor_inputs(region)
    if inputs is None or region.written or len(region.bsyms) > MAX_PRIMS:
        return None
    if not all(isinstance(p, TensorProxy) for p in region.outputs):
        return None
    held = {b.sym for b in region.bsyms}
    values = [p for b in region.bsyms for p in b.outputs]
    if any(isinstance(s, NumberProxy) for p in values if isinstance(p, TensorProxy) for s in p.shape):
        return None
    numbering = _Numbering()
    actual = numbering.outputs(inputs, region.bsyms, region.outputs)
    for needs, propose in CANDIDATES:
        if not needs <= held:
            continue
        for call in _variants(region, inputs, propose):
            traced = _prims_of(call, inputs)
            if traced is not None and numbering.outputs(*traced) == actual:
                return call
    return None


class OneOpRegion:
    """The callable behind a region run as one torch op (`one_op_call`), what `inductor_fusions`
    lists for it. Codegen writes the op's call in place of the region's (`inline_source`): no
    Python call of its own, so its calls are not counted (`calls` stays 0, `last_inputs` empty)
    where it runs inline."""

    def __init__(self, region: Region, call: OneOpCall) -> None:
        self.region = region
        self.name = region.name
        self.call = call
        self.runs_as = f"torch ({call.description})"
        self.fallback_error: BaseException | None = None
        self.last_inputs: list = []
        self.calls = 0

    def __call__(self, *args: Any) -> tuple:
        self.calls += 1
        return self.call.fn(*args)

    def inline_source(self, bsym: BoundSymbol, g: Globals) -> list[str] | None:
        """The region's line as the op's call over its arguments (codegen's protocol)."""
        if not (isinstance(bsym.output, tuple) and len(bsym.output) == 1 and isinstance(bsym.output[0], Proxy)):
            return None
        if not all(isinstance(a, Proxy) for a in bsym.args) or bsym.kwargs:
            return None
        return [f"{bsym.output[0].name} = {self.call.call.source([a.name for a in bsym.args], g)}"]

    def __repr__(self) -> str:
        return f"<{self.name}: {len(self.region.bsyms)} prims, run as torch's {self.call.description}>"
