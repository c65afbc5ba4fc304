"""The prologue's guards as inline Python: the hot path of every call of a jitted function.

A cache hit runs the entry's prologue, so each guard there is written as one `if ...: raise
GuardFailure` line rather than a call to the torch executor's guard function: a Python call costs
about as much as the check itself. The lines mean exactly what those functions do
(compiler/executors/torch.py: check_tensor, check_type, check_value, check_requires_grad,
unpack_sequence, unpack_dict with no keys, size); `check_aliasing` of arguments written in place is a
`DisjointCheck` that remembers the tensors it accepted last; every other prologue prim stays a
call. Device checks avoid building a `torch.device` per call: `is_cpu`, or `get_device()` for a
CUDA index.

A run of consecutive `check_tensor` guards on fixed shapes (a list of parameters, of optimizer
states) is first tried as ONE call to torch's C++ tensor check (`TensorChecks`), which costs about
a tenth of the Python lines per tensor; only when it says no (or before it has learned the
tensors' properties, on the entry's first call) do the lines themselves decide. The check compares
`requires_grad` too, so where the entry accepts no tensor requiring grad under grad mode (the
usual guard of a no-grad entry), a run's part of that guard moves into its lines, and the run
learns only from tensors that do not require grad: a call the C++ check accepts cannot fail it.
A `check_strides` of a run's tensor (every tensor of a CUDA-graphed entry) moves into the run the
same way: the C++ check compares that tensor's strides, and its line does too. Where the entry runs
under autograd (its guard wants grad mode on and given `requires_grad` flags), a run's part of the
flags moves into the run too: its lines compare its tensors' flags, so it learns only from tensors
with the flags wanted, and the C++ check (which compares them exactly) leaves the guard's line
only grad mode and the flags of tensors outside every run: a module's hundreds of parameters cost
no attribute read each.
"""

from __future__ import annotations

import functools
import operator
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from compiler.core.errors import GuardFailure
from compiler.core.gather import data_ptr
from compiler.core.ir import BoundSymbol, Proxy, Trace
from compiler.core.tensor_checks import TensorChecks
from compiler.executors import TORCH
from compiler.executors.codegen import Globals, compile_trace, target_source
from compiler.executors.torch import check_aliasing
from compiler.ops import autocast
from compiler.prims import Prim


def _raise(g: Globals, condition: str) -> str:
    return f"if {condition}: raise {g.bind(GuardFailure, 'GuardFailure')}"


def _unpack_sequence(bsym: BoundSymbol, g: Globals) -> list[str] | None:
    seq, length = bsym.args
    target = target_source(bsym.output)
    lines = [_raise(g, f"len({g.source(seq)}) != {length}")]
    return lines + ([f"{target} = {g.source(seq)}"] if target else [])


def _unpack_dict(bsym: BoundSymbol, g: Globals) -> list[str] | None:
    mapping, keys = bsym.args
    return [_raise(g, g.source(mapping))] if not keys else None


def _device_condition(x: str, device: torch.device, g: Globals) -> str:
    if device.type == "cpu":
        return f"{x}.is_cpu"
    if device.type == "cuda" and device.index is not None:
        return f"{x}.get_device() == {device.index} and {x}.is_cuda"
    return f"{x}.device == {g.bind(device, 'device')}"


def _shape_condition(x: str, shape: tuple, g: Globals) -> str:
    """`x.shape == shape`, or where `shape` holds None (a symbolic size), its rank and each size."""
    if None not in shape:
        return f"{x}.shape == {g.source(shape)}"
    sizes = (f"{x}.shape[{d}] {'>= 2' if s is None else f'== {s}'}" for d, s in enumerate(shape))
    return " and ".join([f"{x}.dim() == {len(shape)}", *sizes])


def _check_tensor(bsym: BoundSymbol, g: Globals, strides: tuple | None = None) -> list[str] | None:
    proxy, shape, dtype, device = bsym.args
    x = g.source(proxy)
    condition = (
        f"isinstance({x}, {g.bind(torch.Tensor, 'Tensor')}) and {x}.dtype is {g.bind(dtype, 'dtype')} "
        f"and {_shape_condition(x, tuple(shape), g)} and {_device_condition(x, device, g)}"
    )
    if strides is not None:
        condition += f" and {x}.stride() == {g.source(tuple(strides))}"
    return [_raise(g, f"not ({condition})")]


def tensor_check_runs(bsyms: Sequence[BoundSymbol]) -> list[list[BoundSymbol]]:
    """The runs of consecutive `check_tensor` guards whose shapes are all plain integers (the C++
    check takes a symbolic size for any size, where the guard wants at least 2)."""
    runs: list[list[BoundSymbol]] = []
    in_run = False
    for bsym in bsyms:
        static = bsym.sym is Prim.CHECK_TENSOR and None not in bsym.args[1]
        if static and not in_run:
            runs.append([])
        if static:
            runs[-1].append(bsym)
        in_run = static
    return runs


class DisjointCheck:
    """`check_aliasing(tensors, None, True)` (arguments an entry writes into share no storage) that
    remembers the last tensors it accepted: a call with the very same tensor objects at the same
    addresses (an optimizer step's parameters and states, every step) is accepted on that alone,
    in C, without the storage of each (comparing addresses costs less than reading every tensor's
    storage, which an optimizer step over hundreds of parameters would pay on every call).
    `by_address`: the prologue guards every tensor's shape and strides, so the same addresses
    mean the same memory whatever the tensor objects, and the check compares addresses alone.
    It stops remembering after `MISSES` calls in a row with other tensors (fresh tensors every call),
    where remembering would only add work.
    """

    MISSES = 2

    def __init__(self, by_address: bool = False) -> None:
        self.pointers: tuple[int, ...] = ()
        self.refs: tuple[weakref.ref, ...] = ()
        self.misses = 0
        self.by_address = by_address

    def __call__(self, tensors: tuple[torch.Tensor, ...]) -> None:
        if self.misses >= self.MISSES:
            return check_aliasing(tensors, None, True)
        pointers = tuple(map(data_ptr, tensors))
        if pointers == self.pointers and (
            self.by_address or all(map(operator.is_, tensors, map(_dereference, self.refs)))
        ):
            self.misses = 0
            return None
        check_aliasing(tensors, None, True)  # raises GuardFailure
        self.misses += 1
        self.pointers = pointers
        if not self.by_address:
            self.refs = tuple(map(weakref.ref, tensors))
        return None


_dereference = getattr(operator, "call", weakref.ref.__call__)  # operator.call (3.11+) calls a weakref faster


def _check_aliasing(laid_out: set[int], bsym: BoundSymbol, g: Globals) -> list[str] | None:
    """A `DisjointCheck`; one that trusts addresses alone where every tensor's shape and strides
    are guarded (`laid_out`: ids of their proxies)."""
    tensors, groups, disjoint = bsym.args
    if groups is not None or not disjoint:
        return None  # the torch executor's call
    check = DisjointCheck(by_address=all(id(t) in laid_out for t in tensors))
    return [f"{g.bind(check, 'disjoint')}({g.source(tuple(tensors))})"]


def _no_grad_guarded(bsyms: Sequence[BoundSymbol]) -> set[int]:
    """The ids of the tensor proxies that a `check_requires_grad` forbids to require grad under grad mode."""
    guards = (b for b in bsyms if b.sym is Prim.CHECK_REQUIRES_GRAD and True not in b.args[1])
    return {id(t) for b in guards for t in b.args[0]}


@dataclass(frozen=True)
class _Runs:
    """The runs of a prologue's `check_tensor` guards (`tensor_check_runs`) and what they take over."""

    heads: Mapping[int, list[BoundSymbol]]  # id of a run's first guard -> the run
    members: set[int]  # ids of the other guards of the runs
    folded: set[int]  # ids of the first guards of the runs that check requires_grad (see the module)
    wanted: Mapping[int, bool]  # id of a tensor proxy of a run -> the requires_grad its autograd guard wants
    strided: Mapping[int, tuple]  # id of a run's tensor proxy -> the strides a `check_strides` guards


def _checked_run(runs: _Runs, bsym: BoundSymbol, g: Globals) -> list[str] | None:
    """A run's lines at its first guard (the C++ check, the exact lines where it says no), none at
    the others; a `check_tensor` outside every run is its own line. A folded run also checks its
    tensors' requires_grad in its lines, a run's strided tensors their strides (see the module)."""
    run = runs.heads.get(id(bsym))
    if run is None:
        return [] if id(bsym) in runs.members else _check_tensor(bsym, g)
    without_grad = id(bsym) in runs.folded
    exact = [id(b.args[0]) in runs.strided for b in run]
    checks = g.bind(TensorChecks(without_grad, exact), "tensor_checks")
    names = ", ".join(g.source(b.args[0]) for b in run)
    lines = [f"if not {checks}.check({names}):"]
    for b in run:
        lines += [f"  {line}" for line in _check_tensor(b, g, runs.strided.get(id(b.args[0]))) or []]
    if without_grad:
        lines += [f"  {line}" for line in _no_grad_line([b.args[0] for b in run], g)]
    elif id(run[0].args[0]) in runs.wanted:  # the whole run's flags, see `_autograd_guarded`
        tensors = [b.args[0] for b in run]
        lines += [f"  {line}" for line in _flags_line(tensors, [runs.wanted[id(t)] for t in tensors], g)]
    return [*lines, f"  {checks}.learn({names})"]


def _size(bsym: BoundSymbol, g: Globals) -> list[str] | None:
    tensor, dim = bsym.args
    return [f"{bsym.output.name} = {g.source(tensor)}.shape[{dim}]"]


def _check_type(bsym: BoundSymbol, g: Globals) -> list[str] | None:
    x, expected = bsym.args
    return [_raise(g, f"type({g.source(x)}) is not {g.bind(expected, 'type')}")]


def _check_value(bsym: BoundSymbol, g: Globals) -> list[str] | None:
    x, expected = bsym.args
    if not isinstance(x, Proxy):
        return None
    if type(expected) is bool:
        return [_raise(g, f"{x.name} is not {expected}")]
    return [_raise(g, f"type({x.name}) is not {g.bind(type(expected), 'type')} or {x.name} != {g.source(expected)}")]


def _no_grad_line(tensors: Sequence[Proxy], g: Globals) -> list[str]:
    """The guard that none of `tensors` requires grad under grad mode."""
    if not tensors:
        return []
    any_requires = " or ".join(f"{g.source(t)}.requires_grad" for t in tensors)
    return [_raise(g, f"({any_requires}) and {g.bind(torch.is_grad_enabled, 'is_grad_enabled')}()")]


def _flags_line(tensors: Sequence[Proxy], flags: Sequence[bool], g: Globals) -> list[str]:
    """The guard that `tensors` have these `requires_grad` flags."""
    actual = "".join(f"{g.source(t)}.requires_grad, " for t in tensors)
    return [_raise(g, f"({actual}) != {g.source(tuple(flags))}")]


def _check_requires_grad(folded: set[int], bsym: BoundSymbol, g: Globals) -> list[str] | None:
    """The requires_grad guard, less the tensors whose runs check it (`folded`, see `_checked_run`)."""
    tensors, flags = bsym.args
    if True not in flags:  # the common case: no tensor may require grad under grad mode
        return _no_grad_line([t for t in tensors if id(t) not in folded], g)
    enabled = f"{g.bind(torch.is_grad_enabled, 'is_grad_enabled')}()"
    rest = [(t, f) for t, f in zip(tensors, flags) if id(t) not in folded]
    if not rest:
        return [_raise(g, f"not {enabled}")]
    actual = "".join(f"{g.source(t)}.requires_grad, " for t, _ in rest)
    return [_raise(g, f"not {enabled} or ({actual}) != {g.source(tuple(f for _, f in rest))}")]


def _check_autocast(bsym: BoundSymbol, g: Globals) -> list[str] | None:
    """Autocast off (the common case: one C call), or in the state the trace was made under."""
    (expected,) = bsym.args
    if not expected:
        return [_raise(g, f"{g.bind(torch._C._is_any_autocast_enabled, 'is_any_autocast_enabled')}()")]
    return [_raise(g, f"{g.bind(autocast.state, 'autocast_state')}() != {g.source(expected)}")]


def _autograd_guarded(bsyms: Sequence[BoundSymbol]) -> dict[int, bool]:
    """Tensor proxy id -> the requires_grad flag that a `check_requires_grad` wanting grad mode on
    (some tensor requiring grad: an autograd entry) wants for it."""
    guards = (b for b in bsyms if b.sym is Prim.CHECK_REQUIRES_GRAD and True in b.args[1])
    return {id(t): flag for b in guards for t, flag in zip(*b.args)}


# Prologue prims INLINE_GUARDS leaves out: `compile_prologue` inlines them itself, knowing which
# tensor checks one run of `check_tensor`s folds in.
INLINED_PER_PROLOGUE = frozenset({Prim.CHECK_STRIDES})
INLINE_GUARDS: Mapping[Prim, Callable[[BoundSymbol, Globals], list[str] | None]] = {
    Prim.UNPACK_SEQUENCE: _unpack_sequence,
    Prim.UNPACK_DICT: _unpack_dict,
    Prim.SIZE: _size,
    Prim.CHECK_TENSOR: _check_tensor,
    Prim.CHECK_TYPE: _check_type,
    Prim.CHECK_VALUE: _check_value,
    Prim.CHECK_AUTOCAST: _check_autocast,
    Prim.CHECK_ALIASING: functools.partial(_check_aliasing, set()),
    Prim.CHECK_REQUIRES_GRAD: functools.partial(_check_requires_grad, set()),
}


def _check_strides(runs: _Runs, bsym: BoundSymbol, g: Globals) -> list[str] | None:
    """Nothing for a tensor whose run checks its strides; else the torch executor's call."""
    return [] if id(bsym.args[0]) in runs.strided else None


def compile_prologue(prologue: Trace) -> Callable[[tuple, dict], Any]:
    """The prologue as a Python function `(args, kwargs) -> computation inputs`, guards inline."""
    found = tensor_check_runs(prologue.bsyms)
    in_runs = {id(b.args[0]) for run in found for b in run}
    no_grad = _no_grad_guarded(prologue.bsyms)
    folded_runs = [run for run in found if all(id(b.args[0]) in no_grad for b in run)]
    autograd = _autograd_guarded(prologue.bsyms)
    flagged_runs = [run for run in found if all(id(b.args[0]) in autograd for b in run)]
    folded = {id(b.args[0]) for run in [*folded_runs, *flagged_runs] for b in run}
    runs = _Runs(
        heads={id(run[0]): run for run in found},
        members={id(b) for run in found for b in run[1:]},
        folded={id(run[0]) for run in folded_runs},
        wanted={id(b.args[0]): autograd[id(b.args[0])] for run in flagged_runs for b in run},
        strided={
            id(b.args[0]): tuple(b.args[1])
            for b in prologue.bsyms
            if b.sym is Prim.CHECK_STRIDES and id(b.args[0]) in in_runs
        },
    )
    inline = {
        **INLINE_GUARDS,
        Prim.CHECK_TENSOR: functools.partial(_checked_run, runs),
        Prim.CHECK_STRIDES: functools.partial(_check_strides, runs),
        Prim.CHECK_REQUIRES_GRAD: functools.partial(_check_requires_grad, folded),
        Prim.CHECK_ALIASING: functools.partial(_check_aliasing, set(runs.strided)),
    }
    return compile_trace(prologue, [TORCH], inline, release=False)  # guards read runs of inputs by position
