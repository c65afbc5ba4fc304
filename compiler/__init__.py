"""fusebench's trace compiler.

jfn = compiler.jit(fn, numbers="symbolic")
jfn(*args)                       # traces, compiles, runs; later calls reuse cache entries
compiler.last_traces(jfn)        # the computation trace after each pass
compiler.last_backward_traces(jfn)  # the backward trace after each pass (when inputs require grad)
compiler.last_prologue(jfn)      # the guards of the entry used last
compiler.cache_stats(jfn)        # hits, misses (compilations), compile seconds
compiler.examine                 # fusions, why ops were not fused, repro scripts, segmentation
compiler.clear_fusion_cache()    # drop the nvFuser definitions (and kernels) shared process-wide
torch.compile(model, backend="fusebench")  # dynamo captures FX graphs, this compiler compiles them
compiler.examine.fallbacks()     # what ran eagerly because this compiler could not compile it

Under grad mode, when a tensor input requires grad, the outputs are attached to autograd through
one torch.autograd.Function whose forward and backward are both compiled traces (the backward is
built from per-prim VJP rules; `examine.saved_for_backward(jfn)` lists what the forward saves).

On a GPU with nvFuser the default executors are ["nvfuser", "sdpa", "torch"]; elsewhere (CPU)
["inductor", "torch"] where Inductor can compile, or those FUSEBENCH_CPU_EXECUTORS names.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import torch

from compiler.core.errors import GuardFailure, TracingError, check, short_repr
from compiler.core.executor import FusionOptions
from compiler.core.ir import Trace
from compiler.runtime import dynamo
from compiler.runtime.bound_forward import BoundMethod, is_module_method
from compiler.runtime.cache import CacheStats, JittedFunction, called_jitted, jitted
from compiler.runtime.dynamo import dynamo_backend
from compiler.runtime.fallbacks import (
    UNSUPPORTED_MODES,
    EagerOnFailureFunction,
    EagerOnFailureModule,
    UnsupportedFallback,
    failing_as_compile_failure,
)
from compiler.runtime.module import JittedModule
from compiler.runtime.pipeline import compile_entry, make_options, numbers_keyword

__all__ = [
    "CacheStats",
    "FusionOptions",
    "GuardFailure",
    "JittedFunction",
    "JittedModule",
    "Trace",
    "TracingError",
    "UnsupportedFallback",
    "cache_stats",
    "clear_fusion_cache",
    "dynamo_backend",
    "examine",
    "jit",
    "last_backward_traces",
    "last_prologue",
    "last_traces",
]


def jit(
    fn: Callable,
    *,
    numbers: str | None = None,
    cache: str | None = None,
    executors: Sequence[str] | None = None,
    fusion: FusionOptions | dict | None = None,
    fallback: bool | None = None,
    automatic_dynamic: bool = True,
    cuda_graphs: bool | None = None,
    dynamic: Sequence[str] = (),
    unsupported: str = "raise",
) -> JittedFunction:
    """Compiles `fn` on first call (and whenever no cache entry's guards accept the arguments).

    `fn` may be an `nn.Module`: its parameters and buffers are then inputs of the traces, guarded
    by metadata (never by value), and its train/eval modes are guarded; it returns what the module
    returns (dicts, dataclasses, named tuples). A method bound to a module (`model.forward`) is
    jitted with its module the same way, and the class's method is what runs, so
    `model.forward = compiler.jit(model.forward)` makes `model(...)` and `model.generate(...)`
    call the jitted forward.

    numbers: how tracing specialises int/float/bool arguments. "constant" (the default) bakes
        each value into the entry, guarded; "symbolic" keeps them as symbolic inputs and guards
        only the branches taken on them.
    cache: the deprecated name of `numbers` (a DeprecationWarning; it never chose a cache).
    automatic_dynamic: a number (under numbers="constant") whose baked-in value made a call miss,
        and a tensor argument's size (in either mode) that made a call miss, are symbolic from the next
        compilation on (at most two compilations for a changing size; sizes 0 and 1 keep entries
        of their own); `compiler.examine.recompilations(jfn)` says which guard failed on which input.
    dynamic: inputs symbolic from the first compilation on, as automatic dynamic makes them after
        a miss: number arguments by name ('n') and tensor sizes ('x.size(1)'; a size below 2 at a
        compilation stays constant in that entry). A name that is not an input of `fn` raises
        ValueError at the first call, listing the names there are.
    cuda_graphs: None (the default): on a machine with CUDA, a computation called again laid out as
        before (the same tensor addresses, strides and numbers: a training loop, a decoder's static
        cache, an optimizer step) is captured as a CUDA graph on its third such call and replayed
        from then on, so its calls no longer pay the host time of each kernel launch; inputs that
        come at a new address every call (a new batch) are copied into the graph's buffers, and a
        computation that cannot be graphed (CPU tensors, a host synchronisation, numbers that change
        every call, a written input that moves) silently runs without graphs
        (`compiler.examine.cuda_graphs(jfn)` says why). True: every entry's computation is graphed
        from its second call, one graph per set of input addresses, with a `CudaGraphWarning` where
        it cannot be; raises ValueError where CUDA is unavailable. False: never (compiler/runtime/cuda_graphs.py).
    executors: executor names in priority order (torch is always the fallback); None picks
        ["nvfuser", "sdpa", "torch"] where nvFuser can run, else the CPU defaults: the names in
        FUSEBENCH_CPU_EXECUTORS (comma-separated), or ["inductor", "torch"] where Inductor can
        compile (a C++ compiler is found), else ["torch"].
    fusion: FusionOptions (or a dict of its fields): region size, horizontal merging, fuel, ...
    fallback: whether a fusion nvFuser (or Inductor) fails on runs with torch instead (with one warning);
        None reads FUSEBENCH_NVFUSER_FALLBACK (default on). It is about fusions only: what this
        compiler cannot trace is `unsupported`'s business.
    unsupported: what a call that cannot be compiled does (an op the compiler lacks, a branch on a
        tensor value, ...). "raise" (the default): it raises the compiler's error, one line naming
        the op, the module being traced and the user's source line. "eager": `fn` runs eagerly
        for that call and for every later call that no entry compiled before it accepts (the whole
        function, not only the op: the tracer does not resume after an op it cannot trace), with
        one `compiler.UnsupportedFallback` warning and one fallback counted
        (`compiler.examine.fallbacks(jfn)`). Only compilation failures fall back; an error raised
        by running compiled code propagates. `torch.compile(fn, backend="fusebench")` always
        falls back, and finer: only the FX nodes the compiler cannot trace run eagerly.
    """
    numbers = numbers_keyword(numbers, cache)
    check(
        callable(fn), lambda: f"jit(fn={short_repr(fn)}): expected a callable (a function or an nn.Module)", TypeError
    )
    check(
        unsupported in UNSUPPORTED_MODES,
        lambda: f"jit(unsupported={unsupported!r}): expected one of {', '.join(map(repr, UNSUPPORTED_MODES))}",
        ValueError,
    )
    options = make_options(numbers, executors, fusion, fallback, automatic_dynamic, cuda_graphs, dynamic)
    caching = {"automatic_dynamic": options.automatic_dynamic, "dynamic": options.dynamic}
    eager = unsupported == "eager"
    wrap = failing_as_compile_failure if eager else lambda compile: compile
    if is_module_method(fn):
        fn = BoundMethod(fn)
    if isinstance(fn, torch.nn.Module):
        make_entry = lambda traced: wrap(functools.partial(compile_entry, traced, options))
        jfn = (EagerOnFailureModule if eager else JittedModule)(fn, make_entry, **caching)
    else:
        compile_fn = wrap(functools.partial(compile_entry, fn, options))
        jfn = (EagerOnFailureFunction if eager else JittedFunction)(fn, compile_fn, **caching)
    jfn.options = options  # NOTE: compiler.examine replays the fusion pass with these executors.
    return jfn


def __getattr__(name: str) -> Any:
    """`compiler.examine` is imported on first use (it is not needed to run jitted code)."""
    if name == "examine":
        import importlib

        return importlib.import_module("compiler.examine")
    raise AttributeError(f"module 'compiler' has no attribute {name!r}")


def last_traces(jfn: JittedFunction) -> list[Trace]:
    """The computation trace after tracing and after each pass, for the entry the last call used."""
    return list(called_jitted(jfn, "last_traces").traces)


def last_backward_traces(jfn: JittedFunction, *, ran: bool = False) -> list[Trace]:
    """The backward trace after its construction and after each pass, for the entry the last call
    used: the backward its last `backward()` ran (compiled for the outputs' cotangents that were
    present), or before any, the one for every output's cotangent. Empty when that entry has no
    backward (no input required grad under grad mode), and with `ran=True` also before its first
    `backward()`."""
    entry = called_jitted(jfn, "last_backward_traces")
    return [] if ran and not entry.backward_ran() else list(entry.backward_traces)


def last_prologue(jfn: JittedFunction) -> Trace:
    """The prologue (unpacking and guards) of the entry the last call used."""
    return called_jitted(jfn, "last_prologue").prologue_trace


def cache_stats(jfn: JittedFunction) -> CacheStats:
    """Hits, misses (= compilations), and seconds spent compiling."""
    return jitted(jfn, "cache_stats").stats


def clear_fusion_cache() -> None:
    """Drops the nvFuser definitions shared by every jitted function of this process, with their
    compiled kernels: the next compilation of any function defines and compiles its fusions afresh
    (as the first one in a new process would), writing each definition's source again. Entries
    already compiled keep their own."""
    from compiler.executors.nvfuser.define.fingerprint import SOURCES
    from compiler.executors.nvfuser.run.shared_definitions import DEFINITIONS

    DEFINITIONS.clear()
    SOURCES.clear()


dynamo.install()
