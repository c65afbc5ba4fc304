"""Variants: the ways a case's function is run, so that peers are compared on the same inputs.

Standard variants apply to every case:
- `eager`: the function as written, in PyTorch eager mode.
- `torch.compile`: Inductor. Under the case option cache="symbolic" it compiles with
  dynamic=True; otherwise with torch's default (dynamic=None: static first, dynamic after a
  shape or scalar changes).
- `torch.compile(reduce-overhead)`: the same with mode="reduce-overhead" (CUDA graphs; CUDA only).
- `fusebench`: our compiler as `compiler.jit` comes: the default executors of the device measured on
  (nvFuser on CUDA, Inductor on CPU: `compiler.executors.default_executor_names`) and, on CUDA, its
  automatic CUDA graphs (a computation called again laid out as before is replayed as a graph);
  `fusebench-ungraphed`: the same without CUDA graphs (CUDA only: what the graphs buy); `fusebench-torch`: our compiler
  with the torch executor only; `fusebench-inductor`: our compiler with its regions compiled by
  Inductor (["inductor", "sdpa", "torch"]): the same trace and regions as `fusebench`, so on CUDA
  nvFuser and Inductor are compared on one program (skipped where `fusebench` runs Inductor
  already: on CPU by default); `fusebench-cudagraphs`: default executors, each cache entry
  replayed as CUDA graphs from its second call (`cuda_graphs=True`; CUDA only). The case option
  `cache` ("constant" by default; the name ASV's history knows) is `compiler.jit(numbers=...)`,
  how number arguments are traced;
  `fusion` (FusionOptions fields) and `executors` (for `fusebench` only) are passed to `compiler.jit`.
- `fusebench-dynamo`: `torch.compile(fn, backend="fusebench")`: dynamo captures the graphs, our
  compiler (default executors) compiles each.
- `thunder`: lightning-thunder, when it is importable ("constant values" / "symbolic values").
A default `fusebench run` measures the variants with `default=True`: eager, torch.compile, fusebench
and thunder, the peers a developer compares on every change, plus every variant a case adds. The
others (fusebench-torch, fusebench-inductor, fusebench-cudagraphs, fusebench-ungraphed, fusebench-dynamo,
torch.compile(reduce-overhead)) answer narrower questions (which executor, which capture path,
what CUDA graphs buy) and run with `--all`, when named with `--variant`, or where a case lists
them in `Case.headline_variants` (launch-bound cases, where CUDA graphs are the strongest peer).
Cases add their own (a hand-written nvFuser FusionDefinition, torch.optim baselines) through
`Case.extra_variants`; `fusebench.cases.case.variants_for(case)` lists both. This module knows
nothing of cases (cases import it, never the other way round).

A variant's `prepare(target)` returns a `Compiled`: the callable to time plus counters. It raises
`SkipVariant` when it cannot run the case here (with the reason) and lets `NotImplementedError`
propagate when the case uses something it does not support yet (reported as unsupported).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

OURS = "fusebench"  # our compiler's default variant: the one `fusebench run`'s verdicts are about


def is_ours(variant: str) -> bool:
    """Whether `variant` runs our compiler (`fusebench` or one of its `fusebench-*` executor sets)."""
    return variant == OURS or variant.startswith(OURS + "-")


class SkipVariant(Exception):
    """This variant cannot run this case on this machine; the message says why."""


@dataclass(frozen=True)
class Target:
    """What a variant prepares: the case's function, example arguments and compile options."""

    fn: Callable[..., Any]
    args: tuple
    params: Mapping[str, Any]
    options: Mapping[str, Any]
    device: torch.device


def _unknown() -> int | None:
    return None


@dataclass
class Compiled:
    """A prepared variant: `fn` has the case function's signature.

    compilations: how many times the variant has compiled so far (None: it does not compile).
    fusions: fusion regions in the program the last call ran (None: not known for this variant);
        under autograd, in its forward.
    backward_fusions: fusion regions in the backward program the last call compiled (None: no
        backward, or not known for this variant).
    program: our compiler's jitted function (None for other variants), whose record
        `fusebench.measure.compiler_record` keeps.
    fallbacks: pieces of the program that ran eagerly because our compiler could not compile them,
        and fusion regions that ran with torch because their fusion compiler failed on them
        (`compiler.examine.fallbacks`), since `prepare` (None: not known for this variant).
    keeps_state: `fn` keeps state between calls that restoring the case's arguments does not reset
        (a `torch.optim` optimizer's step count), so only its first call is checked against the
        reference, not a steady one after timing (`fusebench.measure.measure`).
    """

    fn: Callable[..., Any]
    compilations: Callable[[], int | None] = _unknown
    fusions: Callable[[], int | None] = _unknown
    backward_fusions: Callable[[], int | None] = _unknown
    program: Any = None
    fallbacks: Callable[[], int | None] = _unknown
    keeps_state: bool = False


def _available(device: torch.device) -> str | None:
    return None


@dataclass(frozen=True)
class Variant:
    """A named way to run a case. `unavailable(device)` returns why it cannot run here, or None.
    `default`: measured by a default `fusebench run` (the peers compared on every change); the
    others only with `--all`, `--variant` or a case's `headline_variants`."""

    name: str
    prepare: Callable[[Target], Compiled]
    unavailable: Callable[[torch.device], str | None] = field(default=_available)
    description: str = ""
    default: bool = True
    # Runs none of fusebench's compiler (torch.compile, thunder, torch.optim, a hand-written
    # definition): its measurement stands until the machine, libraries or harness change, so a run
    # may reuse it (fusebench.history.peer_cache). Never eager: each run measures it as the control.
    reusable: bool = False


# --------------------------------------------------------------------------------------------
# eager


def call_model(model: torch.nn.Module, *inputs: Any) -> Any:
    """A case function that calls its first argument, a model: compiling variants compile the model
    (its parameters are then the compiler's inputs), not this function."""
    return model(*inputs)


def _compile(target: Target, compile_fn: Callable[[Callable], Callable]) -> tuple[Callable, Callable]:
    """(what `compile_fn` made of the case, a callable with the case function's signature)."""
    if target.fn is not call_model:
        compiled = compile_fn(target.fn)
        return compiled, compiled
    compiled_model = compile_fn(target.args[0])
    return compiled_model, lambda model, *inputs: compiled_model(*inputs)


def _prepare_eager(target: Target) -> Compiled:
    if target.options.get("cache", "constant") != "constant":
        raise SkipVariant("eager has no compile cache: it is measured once, under cache='constant'")
    return Compiled(target.fn)


EAGER = Variant("eager", _prepare_eager, description="the function as written, PyTorch eager mode")

# --------------------------------------------------------------------------------------------
# torch.compile


def _torch_compile_unavailable(device: torch.device) -> str | None:
    if device.type == "cuda":
        from torch.utils._triton import has_triton

        return None if has_triton() else "torch.compile on CUDA needs Triton, which is not installed"
    compilers = [os.environ.get("CXX", ""), "g++", "c++", "clang++"]
    if not any(name and shutil.which(name) for name in compilers):
        return "torch.compile on CPU needs a C++ compiler (no $CXX, g++, c++ or clang++ on PATH)"
    return None


def _torch_compile_prepare(mode: str | None) -> Callable[[Target], Compiled]:
    def prepare(target: Target) -> Compiled:
        from torch._dynamo.utils import counters

        # NOTE: a fresh Dynamo state per preparation, so compilations are this function's only and
        # cold cases really start cold (Inductor's on-disk caches are kept, as a user's would be).
        torch._dynamo.reset()
        base = counters["frames"]["ok"]
        dynamic = True if target.options.get("cache") == "symbolic" else None
        _, compiled = _compile(target, lambda fn: torch.compile(fn, dynamic=dynamic, mode=mode))
        return Compiled(compiled, compilations=lambda: counters["frames"]["ok"] - base)

    return prepare


def _cuda_only(unavailable: Callable[[torch.device], str | None]) -> Callable[[torch.device], str | None]:
    def check(device: torch.device) -> str | None:
        if device.type != "cuda":
            return f"CUDA graphs need a CUDA device (device is {device})"
        return unavailable(device)

    return check


TORCH_COMPILE = Variant(
    "torch.compile",
    _torch_compile_prepare(None),
    _torch_compile_unavailable,
    "torch.compile (Inductor; dynamic=True under cache='symbolic')",
    reusable=True,
)
TORCH_COMPILE_REDUCE_OVERHEAD = Variant(
    "torch.compile(reduce-overhead)",
    _torch_compile_prepare("reduce-overhead"),
    _cuda_only(_torch_compile_unavailable),
    "torch.compile(mode='reduce-overhead'): Inductor with CUDA graphs",
    default=False,
    reusable=True,
)

# --------------------------------------------------------------------------------------------
# fusebench (our compiler)


def count_fusions(trace: Any) -> int:
    """Bound symbols of `trace` that an executor claimed as a region (a `compiler.core.ir.Symbol` with an executor)."""
    from compiler.core.ir import Symbol

    return sum(1 for bsym in trace.bsyms if isinstance(bsym.sym, Symbol) and bsym.sym.executor is not None)


def last_fusions(jitted: Any, traces: Callable[[Any], list]) -> int | None:
    """Fusion regions in the last of `traces(jitted)` (its entry's forward or backward traces) for
    the entry the last call used, or None when it has not run or has no such trace."""
    if jitted.last_entry is None:
        return None
    found = traces(jitted)
    return count_fusions(found[-1]) if found else None


def _fresh_fusions(compiler: Any) -> None:
    # NOTE: nvFuser definitions (and kernels) are shared process-wide; each preparation starts
    # without them, as in a fresh process, so a unit's compile time does not depend on the units
    # measured before it in the same worker, and each sample of a cold case compiles its kernels.
    compiler.clear_fusion_cache()


def _default_executors(target: Target) -> list[str]:
    from compiler.executors import default_executor_names

    return default_executor_names(target.device.type if target.device.type in ("cpu", "cuda") else None)


def _inductor_unavailable(device: torch.device) -> str | None:
    from compiler.executors import default_executor_names
    from compiler.executors.inductor import device_unavailable_reason

    reason = device_unavailable_reason(device)
    if reason is None and device.type == "cpu" and default_executor_names("cpu")[0] == "inductor":
        # NOTE: measuring it again would only compile every region a second time
        return "on CPU the fusebench variant runs its regions with Inductor already (its default there)"
    return reason


def _fallbacks_from_now(compiler: Any) -> Callable[[], int]:
    """A count of the fallbacks our compiler records from now on (`compiler.examine.fallbacks`)."""
    first = compiler.examine.fallbacks_recorded()
    return lambda: len(compiler.examine.fallbacks(since=first))


def fusebench_prepare(executors: Sequence[str] | None, **jit_options: Any) -> Callable[[Target], Compiled]:
    """`prepare` of a variant running our compiler with these executors and `jit` options."""

    def prepare(target: Target) -> Compiled:
        import compiler

        _fresh_fusions(compiler)
        fallbacks = _fallbacks_from_now(compiler)
        jitted, call = _compile(
            target,
            lambda fn: compiler.jit(
                fn,
                numbers=target.options.get("cache", "constant"),
                executors=executors or target.options.get("executors") or _default_executors(target),
                fusion=jit_options.get("fusion", target.options.get("fusion")),
                **{k: v for k, v in jit_options.items() if k != "fusion"},
            ),
        )

        return Compiled(
            call,
            compilations=lambda: compiler.cache_stats(jitted).misses,
            fusions=lambda: last_fusions(jitted, compiler.last_traces),
            backward_fusions=lambda: last_fusions(jitted, compiler.last_backward_traces),
            fallbacks=fallbacks,  # jit's: regions whose fusion compiler failed on them (kind 'fusion')
            program=jitted,
        )

    return prepare


FUSEBENCH = Variant(OURS, fusebench_prepare(None), description="our compiler, default executors")
FUSEBENCH_TORCH = Variant(
    "fusebench-torch", fusebench_prepare(["torch"]), description="our compiler, torch executor", default=False
)
FUSEBENCH_INDUCTOR = Variant(
    "fusebench-inductor",
    fusebench_prepare(["inductor", "sdpa", "torch"]),
    _inductor_unavailable,
    "our compiler, regions compiled by Inductor (torch.compile's backend) instead of nvFuser",
    default=False,
)
FUSEBENCH_CUDAGRAPHS = Variant(
    "fusebench-cudagraphs",
    fusebench_prepare(None, cuda_graphs=True),
    _cuda_only(lambda device: None),
    "our compiler, default executors, cache entries replayed as CUDA graphs",
    default=False,
)

FUSEBENCH_UNGRAPHED = Variant(
    "fusebench-ungraphed",
    fusebench_prepare(None, cuda_graphs=False),
    _cuda_only(lambda device: None),
    "our compiler, default executors, without its automatic CUDA graphs",
    default=False,
)


def _prepare_fusebench_dynamo(target: Target) -> Compiled:
    from torch._dynamo.utils import counters

    import compiler
    from compiler.runtime import dynamo

    torch._dynamo.reset()
    dynamo.watch_skipped_frames()
    _fresh_fusions(compiler)
    base, first_graph = counters["frames"]["ok"], dynamo.graphs_compiled()
    fallbacks = _fallbacks_from_now(compiler)
    dynamic = True if target.options.get("cache") == "symbolic" else None
    _, compiled = _compile(target, lambda fn: torch.compile(fn, backend="fusebench", dynamic=dynamic))

    def fusions(traces: Callable[[Any], list]) -> int | None:
        """Fusion regions over the graphs dynamo handed to our compiler since `prepare`, or None
        when none has run one (see `last_fusions`)."""
        counts = [last_fusions(graph, traces) for graph in dynamo.compiled_graphs(first_graph)]
        known = [count for count in counts if count is not None]
        return sum(known) if known else None

    return Compiled(
        compiled,
        compilations=lambda: counters["frames"]["ok"] - base,
        fusions=lambda: fusions(compiler.last_traces),
        backward_fusions=lambda: fusions(compiler.last_backward_traces),
        fallbacks=fallbacks,
    )


FUSEBENCH_DYNAMO = Variant(
    "fusebench-dynamo",
    _prepare_fusebench_dynamo,
    description='torch.compile(backend="fusebench"): dynamo graphs compiled by our compiler',
    default=False,
)

# --------------------------------------------------------------------------------------------
# lightning-thunder


def _thunder_unavailable(device: torch.device) -> str | None:
    if importlib.util.find_spec("thunder") is None:
        return "lightning-thunder is not installed (pip install lightning-thunder)"
    return None


_THUNDER_CACHE = {"constant": "constant values", "symbolic": "symbolic values"}


def _prepare_thunder(target: Target) -> Compiled:
    try:
        import thunder
    except Exception as error:  # NOTE: thunder imports nvFuser and more; any failure means "cannot run here"
        raise SkipVariant(f"lightning-thunder failed to import: {type(error).__name__}: {error}") from error
    cache = _THUNDER_CACHE[target.options.get("cache", "constant")]
    jitted, call = _compile(target, lambda fn: thunder.jit(fn, cache=cache))
    return Compiled(call, compilations=lambda: thunder.cache_misses(jitted))


THUNDER = Variant("thunder", _prepare_thunder, _thunder_unavailable, "lightning-thunder (thunder.jit)", reusable=True)

STANDARD_VARIANTS: tuple[Variant, ...] = (
    EAGER,
    TORCH_COMPILE,
    TORCH_COMPILE_REDUCE_OVERHEAD,
    FUSEBENCH,
    FUSEBENCH_TORCH,
    FUSEBENCH_INDUCTOR,
    FUSEBENCH_CUDAGRAPHS,
    FUSEBENCH_UNGRAPHED,
    FUSEBENCH_DYNAMO,
    THUNDER,
)
