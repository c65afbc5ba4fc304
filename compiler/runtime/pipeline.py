"""From a call to a cache entry: trace, run the passes, generate code for prologue and computation."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from compiler import executors as executors_module
from compiler.core.errors import check
from compiler.core.executor import FusionOptions, fusion_executor
from compiler.core.ir import TensorProxy, Trace, proxies_in
from compiler.executors.codegen import compile_trace
from compiler.executors.inductor_compile import compiling_backward
from compiler.executors.one_op_regions import MAX_PRIMS, OneOpRegion
from compiler.ops import autocast
from compiler.passes.autodiff import Joint, differentiable_values, joint
from compiler.passes.batch_regions import batch_regions
from compiler.passes.cse import cse
from compiler.passes.dce import dce
from compiler.passes.device_scalars import device_scalars
from compiler.passes.duplicate_widenings import duplicate_widenings
from compiler.passes.expanded_inputs import expanded_inputs
from compiler.passes.flatten import flatten
from compiler.passes.fold_conversions import fold_conversions
from compiler.passes.functionalize import functionalize
from compiler.passes.fuse import fuse
from compiler.passes.interleaved_shifts import interleaved_shifts
from compiler.passes.narrow_sort_keys import narrow_sort_keys
from compiler.passes.one_hot_scatters import one_hot_scatters
from compiler.passes.split_backward import Split, backward_from_saved, split_backward
from compiler.passes.stop_gradient import drop_stop_gradients
from compiler.passes.update_fresh import update_fresh
from compiler.passes.update_in_place import update_in_place
from compiler.prims import Prim
from compiler.runtime.autograd import CompiledAutograd
from compiler.runtime.cache import CacheEntry
from compiler.runtime.cuda_graphs import GraphedComputation
from compiler.runtime.cuda_graphs import unavailable_reason as cuda_graphs_unavailable
from compiler.runtime.grad_mode import (
    check_no_write_into_grad_inputs,
    differentiable_writes,
    grad_guard,
    returning_written_values,
)
from compiler.runtime.guard_source import compile_prologue
from compiler.tracing import frontend
from compiler.tracing.check_writebacks import check_writebacks
from compiler.tracing.frontend import leaves
from compiler.tracing.numbers import Numbers


@dataclass(frozen=True)
class Options:
    """What `jit` was asked for. `numbers` is how the frontend traces number arguments;
    `check_writebacks` validates the final trace's write-backs; `automatic_dynamic` makes rejected
    numbers (under `Numbers.CONSTANT`) and tensor sizes symbolic on recompilation;
    `cuda_graphs` replays each entry's computation as CUDA graphs (runtime/cuda_graphs.py): True
    always, None where CUDA is available and calls repeat (automatic), False never."""

    numbers: Numbers
    executors: tuple[Any, ...]
    fusion: FusionOptions = field(default_factory=FusionOptions)
    check_writebacks: bool = True
    automatic_dynamic: bool = True
    cuda_graphs: bool | None = None
    dynamic: frozenset[str] = frozenset()


_PURE_PASSES = (functionalize, flatten, cse, dce)


def differentiated_passes(options: Options) -> tuple[Callable[[Trace], Trace], ...]:
    """The pure passes before autodiff, and where an executor fuses, interleaves of stepped slices
    written as shifts (`interleaved_shifts`): their backward then fuses, where the stepped slices'
    is slice updates of zeros in torch and one-element slices nvFuser segments one by one (GPT-J's
    training step). Not without autodiff: there the stepped slices are torch's views between two
    fusions, and nvfuser_direct 0.2.36 refuses the shifts' forward fusion (fusion.cpp:1020), whose
    pieces then cost more host time than those two fusions."""
    return (*_PURE_PASSES, interleaved_shifts) if fusion_executor(options.executors) is not None else _PURE_PASSES


def computation_passes(options: Options) -> list[Callable[[Trace], Trace]]:
    """The passes run on the computation trace, in order: functionalize first (the others assume
    a pure trace), the stop_gradients autodiff alone reads dropped, small sort keys narrowed, then
    fusion when an executor fuses (exact conversion chains folded and shared upcasts and broadcasts
    duplicated first, small same-structure regions batched after, writing regions reading the
    broadcasts of their inputs expanded), and last the in-place partial
    updates (of written-back inputs, then of dead temporaries)."""
    passes: list[Callable[[Trace], Trace]] = [*_PURE_PASSES, drop_stop_gradients, narrow_sort_keys]
    if fusion_executor(options.executors) is not None:
        passes += [
            fold_conversions,
            duplicate_widenings,
            lambda trace: fuse(trace, options.executors),
            lambda trace: batch_regions(trace, options.executors),
            lambda trace: expanded_inputs(trace, options.executors),
        ]
    passes += [update_in_place, update_fresh]
    return passes


def backward_passes(options: Options) -> list[Callable[[Trace], Trace]]:
    """The passes run on a backward trace (already pure and flattened): for nvFuser, a gather's
    gradient (a scatter-add) written as one-hot masks that fuse first."""
    passes: list[Callable[[Trace], Trace]] = [cse, dce, narrow_sort_keys]
    fusing = fusion_executor(options.executors)
    if fusing is not None:
        passes += [one_hot_scatters] if fusing.name == "nvfuser" else []
        passes += [
            fold_conversions,
            duplicate_widenings,
            lambda trace: fuse(trace, options.executors),
            lambda trace: expanded_inputs(trace, options.executors),
        ]
    passes.append(update_fresh)
    return passes


def run_passes(passes: Sequence[Callable[[Trace], Trace]], traces: list[Trace]) -> list[Trace]:
    """`traces` with each pass's result after the last, in order (a pass that had nothing to do
    and returned its input, as `narrow_sort_keys` does, adds none); returns `traces`."""
    for run_pass in passes:
        result = run_pass(traces[-1])
        if result is not traces[-1]:
            traces.append(result)
    return traces


def compile_entry(
    fn: Callable, options: Options, args: tuple, kwargs: dict, dynamic: frozenset[str] = frozenset()
) -> CacheEntry:
    """Traces `fn` on these arguments (the numbers and sizes named in `dynamic` symbolic) and compiles a cache
    entry for them (a forward and a backward when grad mode is on and a tensor input requires grad)."""
    # NOTE: tracing runs the function's own grad-mode switches (a dynamo graph's are straight-line
    # nodes, with no `with` to undo them when tracing fails): grad mode is the caller's again after
    # it, for the guards below and for the caller.
    enabled = torch.is_grad_enabled()
    try:
        traced = frontend.trace_call(
            fn, args, kwargs, numbers=options.numbers, dynamic=dynamic, exact_strides=options.cuda_graphs is True
        )
    finally:
        torch.set_grad_enabled(enabled)
    entry = _compile_traced(fn, options, traced, args, kwargs)
    entry.computation = traced.attribute_writes.around(
        traced.complex_outputs.around(
            traced.row_major.around(traced.writes.around(autocast.without_autocast(entry.computation, traced.autocast)))
        )
    )
    return entry


def _compile_traced(fn: Callable, options: Options, traced: frontend.Traced, args: tuple, kwargs: dict) -> CacheEntry:
    """The entry of a traced call (its computation before the write-backs onto objects it was given)."""
    prologue, computation = traced.prologue, traced.computation
    prologue, requires_grad, leaf = grad_guard(prologue, args, kwargs)
    # NOTE: the prologue's last outputs are the objects written back (`traced.writes`), not inputs
    requires_grad, leaf = requires_grad[: len(computation.inputs)], leaf[: len(computation.inputs)]
    if any(requires_grad):
        return _compile_autograd(fn, options, prologue, computation, requires_grad, leaf)
    traces = run_passes(computation_passes(options), [computation])
    return _compile_plain(options, prologue, traces)


def _compile_plain(options: Options, prologue: Trace, traces: list[Trace], without_grad: bool = False) -> CacheEntry:
    """The entry that runs the last of `traces` (every computation pass run) without autograd;
    `without_grad`: under `torch.no_grad()` (its write-backs go into inputs that require grad)."""
    if options.check_writebacks:
        check_writebacks(traces[-1])
    prologue = dce(cse(prologue))
    computation = compile_trace(traces[-1], options.executors)
    if without_grad:
        computation = _without_grad(computation)
    return CacheEntry(
        prologue=compile_prologue(prologue),
        computation=graphed(
            options,
            computation,
            written=written_inputs(traces),
            sizes=_sizes(prologue),
            device_scalars=lambda positions, device: _reading_device_scalars(
                options, traces, positions, device, without_grad
            ),
        ),
        prologue_trace=prologue,
        traces=traces,
        compile_seconds=0.0,
    )


def _reading_device_scalars(
    options: Options, traces: list[Trace], positions: tuple[int, ...], device: torch.device, without_grad: bool
) -> Callable[..., Any]:
    """The computation of `traces` compiled again from its first trace, its number inputs at
    `positions` read from 0-d tensors on `device` (passes/device_scalars.py, which raises
    `NumberStaysNumber` where they cannot be); the traces it went through are appended to `traces`
    (`examine` shows the last)."""
    names = [traces[-1].inputs[p].name for p in positions]
    pure = run_passes(_PURE_PASSES, [traces[0]])[-1]
    # NOTE: cse merges the conversions device_scalars makes for each reader (one per parameter of an
    # optimizer step): torch then computes each number's float32 copy once (passes/fuse.py's scalar_prologue)
    read = cse(device_scalars(pure, names, device))
    scalars = run_passes(computation_passes(options)[len(_PURE_PASSES) :], [read])
    if options.check_writebacks:
        check_writebacks(scalars[-1])
    computation = compile_trace(scalars[-1], options.executors)
    traces += scalars
    return _without_grad(computation) if without_grad else computation


def _without_grad(computation: Callable[..., Any]) -> Callable[..., Any]:
    def computation_without_grad(*inputs: Any) -> Any:
        with torch.no_grad():
            return computation(*inputs)

    return computation_without_grad


def _compile_autograd(
    fn: Callable,
    options: Options,
    prologue: Trace,
    computation: Trace,
    requires_grad: tuple[bool, ...],
    leaf: tuple[bool, ...],
) -> CacheEntry:
    traces = run_passes(differentiated_passes(options), [computation])
    pure = traces[-1]
    live = differentiable_values(pure, requires_grad)
    inputs = {p.name for p in pure.inputs}
    writes = differentiable_writes(pure, live)
    check_no_write_into_grad_inputs(pure, requires_grad, leaf, live)
    if not writes and not any(p.name in live and p.name not in inputs for p in proxies_in(pure.output)):
        # NOTE: nothing the function computes and returns or writes carries a gradient (an update
        # made under `torch.no_grad()`, as an SGD step's; an input returned is returned itself): no
        # backward to build, and eager's writes into inputs requiring grad allowed.
        run_passes(computation_passes(options)[len(_PURE_PASSES) :], traces)
        return _compile_plain(options, prologue, traces, without_grad=True)
    if not writes and (ops := _one_op_calls(options, traces)) is not None:
        return _compile_plain(options, prologue, ops)
    output_tree = pure.output
    if writes:  # the written values are outputs too, which the runner writes again under autograd
        pure = returning_written_values(pure, writes)
    full = joint(pure, requires_grad)
    split = split_backward(full)
    traces.append(split.forward)
    run_passes(computation_passes(options)[len(_PURE_PASSES) :], traces)
    if options.check_writebacks:
        check_writebacks(traces[-1])
    prologue = dce(cse(prologue))
    forward_outputs, saved = split.forward.output
    full_backward = _FullBackward(options, split.backward)
    forward = compile_trace(traces[-1], options.executors)

    runner = CompiledAutograd(
        getattr(fn, "__qualname__", repr(fn)),
        graphed(options, forward, lend=len(saved), written=written_inputs(traces), sizes=_sizes(prologue)),
        lambda present: _compile_backward(options, full, split, full_backward, present),
        output_tree,
        forward_outputs,
        split.differentiable,
        sum(isinstance(p, TensorProxy) for p in saved),
        [(i, len(forward_outputs) - len(writes) + k) for k, (i, _) in enumerate(writes)],
        _inputs_returned(forward_outputs, pure.inputs),
    )
    return CacheEntry(
        prologue=compile_prologue(prologue),
        computation=runner,
        prologue_trace=prologue,
        traces=traces,
        compile_seconds=0.0,
        backward=lambda: runner.last_backward_traces() or full_backward.traces(),
        backward_ran=lambda: runner.last_present is not None,
        saved=split.saved,
    )


def _one_op_calls(options: Options, traces: list[Trace]) -> list[Trace] | None:
    """`traces` with the computation passes run, where they leave only regions run as one torch op
    each (executors/one_op_regions.py: on CPU, a softmax, a layer norm, a GELU with nothing to fuse
    it with) whose ATen backward is as fast as a compiled one (`OneOpCall.eager_backward`); else
    None. Such a program gains nothing from a compiled backward: run under grad
    mode, each op records its own ATen backward, as in eager, where a backward of its prims would
    run in a Python autograd function and compile a kernel slower than ATen's."""
    pure = traces[-1]
    on_cpu = all(p.device.type == "cpu" for p in pure.inputs if isinstance(p, TensorProxy))
    fuser = fusion_executor(options.executors)
    if not on_cpu or fuser is None or fuser.name != "inductor" or len(pure.bsyms) > MAX_PRIMS:
        return None
    ops = run_passes(computation_passes(options)[len(_PURE_PASSES) :], list(traces))
    impls = [getattr(b.sym, "impl", None) for b in ops[-1].bsyms]
    eager = impls and all(isinstance(impl, OneOpRegion) and impl.call.eager_backward for impl in impls)
    return ops if eager else None


def _inputs_returned(outputs: tuple, inputs: tuple) -> list[tuple[int, int]]:
    """(output, input) positions of the outputs that are inputs returned as they are."""
    position = {p.name: j for j, p in enumerate(inputs)}
    return [(i, position[p.name]) for i, p in enumerate(outputs) if isinstance(p, TensorProxy) and p.name in position]


class _FullBackward:
    """The backward for every output's cotangent: its passes run on first need (a step whose
    unused outputs get no cotangent compiles another backward instead, `_partial_backward`)."""

    def __init__(self, options: Options, trace: Trace) -> None:
        self.options = options
        self.trace = trace
        self._traces: list[Trace] | None = None

    def traces(self) -> list[Trace]:
        """The backward trace after each of `backward_passes`."""
        if self._traces is None:
            with compiling_backward():  # NOTE: the fusion pass makes the regions' callables
                self._traces = run_passes(backward_passes(self.options), [self.trace])
        return self._traces


def _compile_backward(
    options: Options, full: Joint, split: Split, full_backward: _FullBackward, present: tuple[bool, ...]
) -> tuple[Callable, list[Trace]]:
    """The backward for the cotangents flagged present (one flag per output that takes one),
    compiled, and its traces after its construction and after each pass."""
    traces = full_backward.traces() if all(present) else _partial_backward(options, full, split, present)
    backward = compile_trace(traces[-1], options.executors)
    return graphed(options, backward, backward=True, static_tail=sum(present)), traces


def _partial_backward(options: Options, full: Joint, split: Split, present: tuple[bool, ...]) -> list[Trace]:
    """The backward for the cotangents flagged present (one flag per output that takes one), after
    its construction and after each pass: the others count as zero and are never built; it reads
    the values the full split saves."""
    flags = iter(present)
    cotangents = [d and next(flags) for d in split.differentiable]
    forward = full.trace.bsyms[: full.forward_length]
    pure = Trace(full.trace.inputs[: len(full.requires_grad)], forward, full.trace.output[0])
    start = time.perf_counter()
    partial = joint(pure, full.requires_grad, cotangents)
    first = backward_from_saved(partial, split.saved)
    traces = [replace(first, provenance=f"backward_from_saved (took {(time.perf_counter() - start) * 1e3:.2f} ms)")]
    with compiling_backward():
        return run_passes(backward_passes(options), traces)


def graphed(options: Options, computation: Callable[..., Any], backward: bool = False, **kwargs: Any) -> Callable:
    """`computation` replayed as CUDA graphs where `options.cuda_graphs` asks for them (True) or
    leaves it to the compiler (None) on a machine with CUDA (automatic graphs, see
    runtime/cuda_graphs.py), else `computation` itself. A forward's guards fix its strides where
    graphs were asked for (`frontend.trace(exact_strides=True)`); a backward's inputs are not guarded."""
    if options.cuda_graphs is False or (options.cuda_graphs is None and not torch.cuda.is_available()):
        return computation
    automatic = options.cuda_graphs is None
    return GraphedComputation(
        computation, strides_guarded=not (automatic or backward), automatic=automatic, backward=backward, **kwargs
    )


def written_inputs(traces: Sequence[Trace]) -> frozenset[int]:
    """The positions, among the last trace's inputs, of the inputs that any of `traces` writes back
    (`prims.copy_to`; update_in_place makes some of them updates in place in the last trace)."""
    names = {bsym.args[1].name for trace in traces for bsym in leaves(trace.bsyms) if bsym.sym is Prim.COPY_TO}
    return frozenset(i for i, p in enumerate(traces[-1].inputs) if p.name in names)


def _sizes(prologue: Trace) -> frozenset[str]:
    """The names of the computation's number inputs that are symbolic tensor sizes (`prims.size`)."""
    return frozenset(b.output.name for b in prologue.bsyms if b.sym is Prim.SIZE)


NUMBERS = tuple(mode.value for mode in Numbers)  # what `jit(numbers=...)` accepts


def _check_numbers(keyword: str, value: Any) -> None:
    check(
        isinstance(value, Numbers) or value in NUMBERS,
        lambda: f"jit({keyword}={value!r}): expected one of {', '.join(map(repr, NUMBERS))}",
        ValueError,
    )


def numbers_keyword(numbers: str | Numbers | None, cache: str | None) -> str | Numbers:
    """`jit`'s `numbers`, taken from `cache`, its deprecated name, when only that is given (with a
    DeprecationWarning pointing at the `jit` call); "constant" when neither is."""
    if cache is None:
        return "constant" if numbers is None else numbers
    check(
        numbers is None,
        lambda: f"jit(numbers={numbers!r}, cache={cache!r}): pass numbers= alone (cache= is its deprecated name)",
        TypeError,
    )
    _check_numbers("cache", cache)
    warnings.warn(
        f"jit(cache={cache!r}) is deprecated: it chooses how numbers are traced, not a cache; "
        f"use jit(numbers={cache!r})",
        DeprecationWarning,
        stacklevel=3,
    )
    return cache


def make_options(
    numbers: str | Numbers,
    executors: Sequence[str] | None,
    fusion: FusionOptions | dict | None = None,
    fallback: bool | None = None,
    automatic_dynamic: bool = True,
    cuda_graphs: bool | None = None,
    dynamic: Sequence[str] = (),
) -> Options:
    """Validated options, `numbers` resolved to a `Numbers`."""
    _check_numbers("numbers", numbers)
    for name, value, expected in (
        ("fallback", fallback, (bool, type(None))),
        ("automatic_dynamic", automatic_dynamic, bool),
        ("cuda_graphs", cuda_graphs, (bool, type(None))),
    ):
        check(
            isinstance(value, expected),
            lambda n=name, v=value, e=expected: (
                f"jit({n}={v!r}): expected True or False" + (" or None" if e is not bool else "")
            ),
            TypeError,
        )
    pattern = frontend.DYNAMIC_NAME
    named = not isinstance(dynamic, str) and all(isinstance(n, str) and pattern.fullmatch(n) for n in dynamic)
    check(
        named,
        lambda: (
            f"jit(dynamic={dynamic!r}): expected a list of input names: a number argument ('n') or a tensor "
            "argument's size ('x.size(1)')"
        ),
        TypeError,
    )
    graphs_unavailable = cuda_graphs_unavailable() if cuda_graphs is True else None
    check(graphs_unavailable is None, lambda: f"jit(cuda_graphs=True): {graphs_unavailable}", ValueError)
    fusion_options = FusionOptions.from_any(fusion)
    resolved = executors_module.resolve(executors, fusion=fusion_options, fallback=fallback)
    return Options(
        numbers=Numbers(numbers),
        executors=tuple(resolved),
        fusion=fusion_options,
        automatic_dynamic=automatic_dynamic,
        cuda_graphs=cuda_graphs,
        dynamic=frozenset(dynamic),
    )
