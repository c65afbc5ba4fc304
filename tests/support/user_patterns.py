"""A battery runner for small functions written the way users write them: each `Pattern` is called
jitted and eagerly on the same arguments over a fixed schedule of calls (seeds, size-1 and other
sizes, transposed, step-sliced and expanded inputs, float32, bfloat16 and float16), through one
jitted function so that every later call exercises the cache, its guards and recompilation.

Each call compares outputs (dtype, shape, requires_grad, values), every argument's final contents
(in-place writes), and, where the call's inputs require grad, the gradients of every differentiable
input for the same random cotangents."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

import compiler
from compiler.core.ir import TensorProxy
from compiler.executors.nvfuser import region_fusions
from compiler.prims import VIEWS
from tests.support.inplace_util import same_layout
from tests.support.seeding import manual_seed

# NOTE: the device the tensors are made on: the CPU, or the one FUSEBENCH_PATTERNS_DEVICE names
# (`cuda` runs the battery through the default executors there, nvFuser included).
DEVICE = torch.device(os.environ.get("FUSEBENCH_PATTERNS_DEVICE", "cpu"))
FLOATS = (torch.float32, torch.bfloat16, torch.float16)
SIZES = ({"B": 3, "N": 5, "D": 6, "K": 2}, {"B": 1, "N": 1, "D": 6, "K": 1}, {"B": 2, "N": 7, "D": 4, "K": 3})
LAYOUTS = ("contiguous", "transposed", "strided", "expanded")

# NOTE: the compiler computes a chain of bf16/f16 ops in float32 and rounds once where eager rounds
# after every op, so low-precision results are compared loosely.
_TOLERANCE = {
    torch.float32: {"atol": 1e-5, "rtol": 1e-4},
    torch.float64: {"atol": 1e-7, "rtol": 1e-7},
    torch.bfloat16: {"atol": 6e-2, "rtol": 5e-2},
    torch.float16: {"atol": 1e-2, "rtol": 1e-2},
}


@dataclass(frozen=True)
class Arg:
    """One tensor argument. `shape` holds ints or size names (keys of the call's sizes). `kind`:
    "float" (the call's dtype, which may be an integer one), "pos" (positive, the call's dtype), "f32" (always float32),
    "long:H" / "int:H" (ints in [0, H), H an int or a size name), "bool", "mask" (bool, mostly True).
    `written`: the function writes into it (never expanded, never requires grad)."""

    shape: tuple[int | str, ...]
    kind: str = "float"
    written: bool = False
    grad: bool = True


@dataclass(frozen=True)
class Pattern:
    """A user-style function and how to call it. Non-`Arg` entries of `args` are passed as given;
    `inner`: a lower precision the function computes in whatever the inputs' dtype (its tolerance
    applies to every call)."""

    fn: Callable
    args: tuple[Any, ...]
    dtypes: tuple[torch.dtype, ...] = FLOATS
    sizes: tuple[dict[str, int], ...] = SIZES
    layouts: tuple[str, ...] = LAYOUTS
    grad: bool = True
    inner: torch.dtype | None = None
    jit_options: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.fn.__name__


@dataclass(frozen=True)
class Call:
    """One call of the schedule."""

    seed: int
    dtype: torch.dtype
    sizes: dict[str, int]
    layout: str
    grad: bool

    def __str__(self) -> str:
        return f"seed={self.seed} {self.dtype} sizes={self.sizes} {self.layout} grad={self.grad}"


def schedule(pattern: Pattern) -> Iterator[Call]:
    """The calls one pattern gets: the first sizes in float32 with two seeds, the other sizes, an
    empty batch (B = 0), every layout, then the other dtypes; gradients on about every other call
    where the pattern has them."""
    first = pattern.sizes[0]
    dtype = pattern.dtypes[0]
    calls = [Call(0, dtype, first, "contiguous", True), Call(1, dtype, first, "contiguous", False)]
    calls += [Call(2 + i, dtype, s, "contiguous", i % 2 == 0) for i, s in enumerate(pattern.sizes[1:])]
    if "B" in first:  # an empty batch, where eager accepts one
        calls.append(Call(6, dtype, {**first, "B": 0}, "contiguous", True))
    calls += [Call(7 + i, dtype, first, lay, i % 2 == 0) for i, lay in enumerate(pattern.layouts[1:])]
    calls += [
        Call(11 + i, d, first, pattern.layouts[i % len(pattern.layouts)], True)
        for i, d in enumerate(pattern.dtypes[1:])
    ]
    for call in calls:
        yield Call(call.seed, call.dtype, call.sizes, call.layout, call.grad and pattern.grad)


def _size(entry: int | str, sizes: dict[str, int]) -> int:
    return entry if isinstance(entry, int) else sizes[entry]


def _values(arg: Arg, shape: tuple[int, ...], dtype: torch.dtype, generator: torch.Generator) -> torch.Tensor:
    kind = arg.kind
    if kind == "bool":
        return (torch.rand(shape, generator=generator, device="cpu") < 0.5).to(DEVICE)
    if kind == "mask":
        return (torch.rand(shape, generator=generator, device="cpu") < 0.8).to(DEVICE)
    values = torch.randn(shape, generator=generator, device="cpu")
    if kind == "pos":
        values = values.abs() + 0.5
    return values.to(device=DEVICE, dtype=torch.float32 if kind == "f32" else dtype)


def make_tensor(arg: Arg, call: Call, generator: torch.Generator) -> torch.Tensor:
    """`arg` for `call`: its values, then laid out as the call says (where the shape allows)."""
    shape = tuple(_size(s, call.sizes) for s in arg.shape)
    kind, _, high = arg.kind.partition(":")
    if kind in ("long", "int"):
        bound = max(_size(int(high) if high.isdigit() else high, call.sizes), 1)
        base = torch.randint(
            0, bound, shape, generator=generator, dtype=torch.int64 if kind == "long" else torch.int32, device="cpu"
        )
        return base.to(DEVICE)
    layout = call.layout
    if layout == "transposed" and len(shape) >= 2:
        swapped = (*shape[:-2], shape[-1], shape[-2])
        return _values(arg, swapped, call.dtype, generator).transpose(-1, -2)
    if layout == "strided" and len(shape) >= 1:
        wide = (*shape[:-1], 2 * shape[-1])
        return _values(arg, wide, call.dtype, generator)[..., ::2]
    if layout == "expanded" and len(shape) >= 2 and not arg.written:
        return _values(arg, (1, *shape[1:]), call.dtype, generator).expand(shape)
    return _values(arg, shape, call.dtype, generator)


def make_args(pattern: Pattern, call: Call) -> list[Any]:
    generator = torch.Generator().manual_seed(call.seed)
    return [make_tensor(a, call, generator) if isinstance(a, Arg) else a for a in pattern.args]


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, (tuple, list)):
        return [leaf for v in value for leaf in _leaves(v)]
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in _leaves(v)]
    return [value]


def _clone(args: list[Any], grads: list[bool]) -> list[Any]:
    """Same values and the same strides (a transposed or step-sliced input stays so), requiring grad
    where told; expanded inputs keep their zero strides."""
    copies = []
    for a, g in zip(args, grads):
        if not isinstance(a, torch.Tensor):
            copies.append(a)
            continue
        copy = same_layout(a)
        copies.append(copy.requires_grad_(g) if g else copy)
    return copies


def assert_close(actual: Any, expected: Any, dtype: torch.dtype, what: str) -> None:
    """Leaf-wise: tensors of the same dtype, shape and requires_grad, values within the dtype's
    tolerance (exact for integers and bools, NaNs equal); other leaves equal."""
    a_leaves, e_leaves = _leaves(actual), _leaves(expected)
    assert len(a_leaves) == len(e_leaves), f"{what}: {len(a_leaves)} leaves, eager has {len(e_leaves)}"
    for i, (a, e) in enumerate(zip(a_leaves, e_leaves)):
        if not isinstance(e, torch.Tensor):
            assert type(a) is type(e) and (a == e or (a != a and e != e)), f"{what} leaf {i}: {a!r}, eager {e!r}"
            continue
        assert isinstance(a, torch.Tensor), f"{what} leaf {i}: got {type(a).__name__}, eager gives a tensor"
        assert (a.dtype, a.shape) == (e.dtype, e.shape), (
            f"{what} leaf {i}: {a.dtype} {tuple(a.shape)}, eager {e.dtype} {tuple(e.shape)}"
        )
        # NOTE: an op over no elements (a scatter of an empty index) may be traced as a copy, cut
        # from its source's graph: the flag of an empty output is not compared.
        assert a.requires_grad == e.requires_grad or e.numel() == 0, (
            f"{what} leaf {i}: requires_grad {a.requires_grad}, eager {e.requires_grad}"
        )
        # NOTE: a float32 result computed from low-precision inputs carries their rounding, and a
        # low-precision result of a float32 call its own (nvFuser rounds a chain once): the looser.
        tols = [_TOLERANCE[d] for d in (dtype, e.dtype) if d in _TOLERANCE] if e.is_floating_point() else []
        tol = max(tols, key=lambda t: t["atol"]) if tols else {"atol": 0, "rtol": 0}
        torch.testing.assert_close(
            a.detach(), e.detach(), equal_nan=True, **tol, msg=lambda m, i=i: f"{what} leaf {i}: {m}"
        )


def _differentiable(output: Any) -> list[torch.Tensor]:
    return [o for o in _leaves(output) if isinstance(o, torch.Tensor) and o.requires_grad]


def _indexes_an_empty_dim(pattern: Pattern, call: Call) -> bool:
    """True when an index argument of `call` indexes a dim of size 0 (an empty batch's `long:B`):
    no index is in range, and eager's CPU kernels do not all say so (index_add_ into an empty
    tensor does nothing; on a GPU it is a device-side assert)."""
    for arg in pattern.args:
        kind, _, high = arg.kind.partition(":") if isinstance(arg, Arg) else ("", "", "")
        bounded_by_empty = kind in ("long", "int") and not high.isdigit() and call.sizes.get(high) == 0
        if bounded_by_empty and all(_size(s, call.sizes) for s in arg.shape):
            return True
    return False


def _eager_accepts_on_the_cpu(pattern: Pattern, args: list[Any]) -> bool:
    """Whether eager runs the call on CPU copies of `args`. On a GPU, an index out of range (an
    empty batch's index) is a device-side assert that leaves the process's CUDA context unusable,
    not an exception: such calls are found on the CPU first."""
    with torch.device("cpu"):
        try:
            pattern.fn(*[a.cpu() if isinstance(a, torch.Tensor) else a for a in args])
        except (RuntimeError, IndexError, ValueError):
            return False
    return True


def check_call(pattern: Pattern, jfn: Callable, call: Call) -> bool:
    """Runs one call eagerly and jitted; False when eager itself rejects the arguments (skipped)."""
    args = make_args(pattern, call)
    grads = [
        call.grad and isinstance(a, Arg) and a.grad and not a.written and t.is_floating_point()
        for a, t in zip(pattern.args, args)
    ]
    if _indexes_an_empty_dim(pattern, call) or (DEVICE.type != "cpu" and not _eager_accepts_on_the_cpu(pattern, args)):
        return False
    eager_args, jit_args = _clone(args, grads), _clone(args, grads)
    try:
        expected = pattern.fn(*eager_args)
    except (RuntimeError, IndexError, ValueError):
        return False
    where = f"{pattern.name} [{call}]"
    dtype = call.dtype if pattern.inner is None else pattern.inner
    actual = jfn(*jit_args)
    assert_close(actual, expected, dtype, f"{where} output")
    written = [i for i, a in enumerate(pattern.args) if isinstance(a, Arg)]
    assert_close([jit_args[i] for i in written], [eager_args[i] for i in written], dtype, f"{where} arguments after")
    wants, gots = _differentiable(expected), _differentiable(actual)
    inputs = [i for i, g in enumerate(grads) if g]
    if not wants or not inputs:
        return True
    generator = torch.Generator().manual_seed(100 + call.seed)
    cotangents = [
        torch.randn(w.shape, generator=generator, device="cpu").to(device=w.device, dtype=w.dtype) for w in wants
    ]
    try:
        want = torch.autograd.grad(wants, [eager_args[i] for i in inputs], cotangents, allow_unused=True)
    except RuntimeError:  # NOTE: eager's own backward refuses (a saved value was written in place)
        return True
    got = torch.autograd.grad(gots, [jit_args[i] for i in inputs], cotangents, allow_unused=True)
    for i, w, g in zip(inputs, want, got):
        w = torch.zeros_like(eager_args[i]) if w is None else w
        g = torch.zeros_like(jit_args[i]) if g is None else g
        assert_close(g, w, dtype, f"{where} gradient of argument {i}")
    return True


def check_pattern(pattern: Pattern, *, short: bool = False, **jit_options: Any) -> int:
    """Every call of the schedule through one jitted function (`short`: the sizes and the last
    dtype only, no layouts); returns how many calls ran (eager accepted the arguments)."""
    manual_seed(0)
    jfn = compiler.jit(pattern.fn, **{**pattern.jit_options, **jit_options})
    calls = list(schedule(pattern))
    if short:
        calls = [c for c in calls if c.layout == "contiguous" and c.dtype == calls[0].dtype] + calls[-1:]
    with on_device():
        ran = sum(check_call(pattern, jfn, call) for call in calls)
    assert ran, f"{pattern.name}: eager rejected every call of the schedule"
    return ran


def on_device() -> contextlib.AbstractContextManager:
    """Factories inside the patterns (torch.zeros, torch.arange, ...) make tensors on `DEVICE`."""
    return contextlib.nullcontext() if DEVICE.type == "cpu" else torch.device(DEVICE)


def planner_options() -> dict[str, Any]:
    """The jit options of the GPU path's fusion planner: on the CPU, nvFuser's regions run with
    torch, so that the passes that matter on a GPU (fusion, upcast placement) run here too; on a
    GPU, the default executors (nvFuser's fusions)."""
    if DEVICE.type != "cpu":
        return {}
    return {"executors": ["nvfuser", "torch"], "fusion": {"runner": "torch"}}


def fused_options() -> dict[str, Any]:
    """`check_pattern`'s options for the fusion planner of the GPU path (`planner_options`), on
    the short schedule."""
    return {**planner_options(), "short": True}


@dataclass(frozen=True)
class Structure:
    """How a call was compiled: fusion regions of the forward and of the backward (None without
    one), and the tensor prims left outside every region, views aside (each its own torch call)."""

    forward_regions: int
    forward_outside: tuple[str, ...]
    backward_regions: int | None
    backward_outside: tuple[str, ...] | None


def _outside(trace: Any) -> tuple[str, ...]:
    outside = []
    for bsym in trace.bsyms:
        if getattr(bsym.sym, "executor", None) == "nvfuser" or bsym.sym in VIEWS:
            continue
        if any(isinstance(p, TensorProxy) for p in (*bsym.inputs, *bsym.outputs)):
            outside.append(getattr(bsym.sym, "name", str(bsym.sym)))
    return tuple(outside)


def structure(
    pattern: Pattern, dtype: torch.dtype = torch.bfloat16, sizes: tuple[dict[str, int], ...] = ()
) -> Structure:
    """`pattern` jitted for the fusion planner (`planner_options`) and called on each of `sizes`
    (default: its first sizes; a second size makes the entry's sizes symbolic) in `dtype`, its
    floating inputs requiring grad, each call differentiated: the `Structure` of the last call."""
    jfn = compiler.jit(pattern.fn, **{**pattern.jit_options, **planner_options()})
    with on_device():
        for call_sizes in sizes or pattern.sizes[:1]:
            call = Call(0, dtype, call_sizes, "contiguous", pattern.grad)
            args = [
                a.requires_grad_() if isinstance(spec, Arg) and spec.grad and call.grad and a.is_floating_point() else a
                for spec, a in zip(pattern.args, make_args(pattern, call))
            ]
            wants = _differentiable(jfn(*args))
            if wants:
                torch.autograd.backward(wants, [torch.ones_like(w) for w in wants])
    forward = compiler.last_traces(jfn)[-1]
    if not wants:
        return Structure(len(region_fusions(forward)), _outside(forward), None, None)
    backward = compiler.last_backward_traces(jfn)[-1]
    return Structure(len(region_fusions(forward)), _outside(forward), len(region_fusions(backward)), _outside(backward))
