"""Inspecting what the fusion pass and nvFuser did with a jitted function (after it has run).

    compiler.examine.fusions(jfn)          # each fusion: its ops and its last actual inputs
    compiler.examine.why_not_fused(jfn)    # every op outside a fusion, with the reason
    compiler.examine.repro(jfn, "nvFusion0", "repro.py")   # standalone torch + nvfuser_direct script
    compiler.examine.segments(jfn)         # kernels per fusion, scheduler, time, bandwidth (GPU)
    compiler.examine.stats(jfn)            # nvFuser definitions / compilations / fallbacks / deferred calls
    compiler.examine.saved_for_backward(jfn)  # what the forward keeps for the backward (name, shape, dtype, bytes)
    compiler.examine.recompilations(jfn)   # per recompilation: which guard failed on which input, old vs new
    compiler.examine.cuda_graphs(jfn)      # per cache entry: CUDA graphs captured and replayed, or why not
    compiler.examine.fallbacks()           # what ran eagerly because it could not be compiled (dynamo's included)

Each returns a list whose `str()` is a readable report, so `print(examine.fusions(jfn))` works.
`fusions`, `why_not_fused`, `segments`, `repro` and `fusion_source_of` look at the forward (or
only) trace; with `backward=True` they look at the compiled backward of an entry whose inputs
required grad (`compiler.last_backward_traces`: the one its last `backward()` ran, compiled for
the cotangents that were present), whose fusions are named on their own.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from compiler.core.errors import check, short_repr
from compiler.core.executor import Region, fusion_executor
from compiler.core.fallback_log import logged, logged_count
from compiler.core.ir import Trace
from compiler.executors.inductor import InductorFusion, InductorStats, inductor_fusions
from compiler.executors.nvfuser import InputRecord, NvFuserStats, NvFusion, region_fusions
from compiler.executors.nvfuser.define.translations import fusion_source
from compiler.executors.nvfuser.diagnose.profiler_process import shared_profiler
from compiler.executors.nvfuser.diagnose.repro import ops_by_scheduler, repro_script, segmentation_hint
from compiler.executors.one_op_regions import OneOpRegion
from compiler.executors.region_fallback import error_summary
from compiler.passes.fuse import partition
from compiler.passes.split_backward import saved_summary
from compiler.runtime.autograd import CompiledAutograd
from compiler.runtime.cache import JittedFunction, called_jitted, jitted


class Listing(list):
    """A list whose str() prints one item after another."""

    def __str__(self) -> str:
        return "\n".join(str(item) for item in self) if self else "(none)"


def _options(jfn: Any, api: str) -> Any:
    called_jitted(jfn, f"examine.{api}")
    return jfn.options


def _traces(jfn: Any, api: str, backward: bool = False) -> list[Trace]:
    _options(jfn, api)
    if not backward:
        return jfn.last_entry.traces
    check(
        bool(jfn.last_entry.backward_traces),
        lambda: (
            f"examine.{api}({short_repr(jfn)}, backward=True): it compiled no backward; expected a call with "
            "grad mode on and an input that requires grad"
        ),
        RuntimeError,
    )
    return jfn.last_entry.backward_traces


def _fused(jfn: Any, api: str, backward: bool = False) -> list[NvFusion | InductorFusion | OneOpRegion]:
    trace = _traces(jfn, api, backward)[-1]
    return [*region_fusions(trace), *inductor_fusions(trace)]


def _check_names(
    jfn: Any, api: str, names: Iterable[str], argument: str = "name", backward: bool = False
) -> list[NvFusion]:
    """The fusions of `jfn` and the pieces of those that fell back; a ValueError names each of
    `names` that is not one of them."""
    found = _fused(jfn, api, backward)
    found += [
        p for f in found if f.fallback_error is not None for p in f.fallback.pieces() if not isinstance(p, Region)
    ]
    known = [f.name for f in found]
    for name in names:
        check(
            name in known,
            lambda name=name: (
                f"examine.{api}({argument}={short_repr(name)}): no fusion of that name; expected one of {known}"
                if known
                else f"examine.{api}({argument}={short_repr(name)}): this function has no fusions (executors: "
                f"{[e.name for e in _options(jfn, api).executors]})"
            ),
            ValueError,
        )
    return found


def _find(jfn: Any, name: str, api: str, backward: bool = False) -> NvFusion:
    return next(f for f in _check_names(jfn, api, [name], backward=backward) if f.name == name)


# ---------------------------------------------------------------------------------------------


@dataclass
class PieceInfo:
    """One piece a fusion that fell back was cut into (`FusionInfo.pieces`)."""

    name: str
    prims: int
    runs_as: str  # 'with torch', 'one nvFuser fusion', or what a piece that failed too runs as
    fallback_error: str | None = None  # what the fusion compiler said when this piece failed too

    def __str__(self) -> str:
        failed = f" FELL BACK ({self.fallback_error}):" if self.fallback_error else ""
        return f"{self.name}: {self.prims} prims,{failed} {self.runs_as}"


@dataclass
class FusionInfo:
    """One fusion of the last-used cache entry."""

    name: str
    ops: list[str]
    inputs: list[InputRecord]
    outputs: list[str]
    calls: int
    runner: str
    fallback_error: str | None = None  # what the fusion compiler said when it failed (`error_summary`)
    pieces: list[PieceInfo] = field(default_factory=list)  # what a fusion that fell back was cut into, depth first

    def __str__(self) -> str:
        lines = [f"{self.name}: {len(self.ops)} ops, {self.calls} calls, runs with {self.runner}"]
        if self.fallback_error:
            lines[0] += f" (FELL BACK: {self.fallback_error})"
        if self.pieces:
            lines += ["  cut into (examine.repro takes a piece's name):"] + [f"    {p}" for p in self.pieces]
        lines += ["  inputs:"] + ([f"    {r}" for r in self.inputs] or ["    (not called yet)"])
        lines += [f"  outputs: {', '.join(self.outputs) or '(write-backs only)'}", "  ops:"]
        lines += [f"    {op}" for op in self.ops]
        return "\n".join(lines)


def fusions(jfn: JittedFunction, *, backward: bool = False) -> Listing:
    """Each fusion's name, its ops, and its last actual inputs (shape, stride, dtype, device, value)."""
    result = Listing()
    for f in _fused(jfn, "fusions", backward):
        if isinstance(f, OneOpRegion):
            runner = f.runs_as
        else:
            runner = "inductor" if isinstance(f, InductorFusion) else f.executor.options.runner
        runner = f"{f.fallback.runs_as()} (fallback)" if f.fallback_error else runner
        error = error_summary(f.fallback_error) if f.fallback_error else None
        ops = [str(b).splitlines()[0] for b in f.region.bsyms]
        outputs = [p.name for p in f.region.outputs]
        pieces = [_piece_info(p) for p in f.fallback.pieces()] if f.fallback_error else []
        result.append(FusionInfo(f.name, ops, list(f.last_inputs), outputs, f.calls, runner, error, pieces))
    return result


def _piece_info(piece: Any) -> PieceInfo:
    """One piece of a fusion that fell back (a `RegionFallback.pieces` entry)."""
    if isinstance(piece, Region):
        return PieceInfo(piece.name, len(piece.bsyms), "with torch")
    prims, fallback = len(piece.region.bsyms), piece.fallback
    if piece.fallback_error is None:
        return PieceInfo(piece.name, prims, f"one {fallback.compiler_name} fusion")
    return PieceInfo(piece.name, prims, fallback.runs_as(), error_summary(piece.fallback_error))


def why_not_fused(jfn: JittedFunction, *, backward: bool = False) -> Listing:
    """Every op left outside a fusion in the last-used cache entry, with the reason.

    Replays the (pure) partition on the trace the fusion pass received.
    """
    options = _options(jfn, "why_not_fused")
    traces = _traces(jfn, "why_not_fused", backward)
    check(
        fusion_executor(options.executors) is not None,
        lambda: "this function has no fusion executor: jit it with executors=['nvfuser', ...]",
        ValueError,
    )
    fused_at = next((i for i, t in enumerate(traces) if t.provenance.startswith("fuse ")), len(traces))
    return Listing(d for d in partition(traces[fused_at - 1], options.executors).decisions)


def stats(jfn: JittedFunction) -> NvFuserStats | InductorStats:
    """Definitions, compilations, fallbacks and deferred calls (nvfuser_edge_sizes.py) counted by the
    jitted function's nvFuser executor (Inductor's: regions compiled, reused, fallbacks)."""
    executor = fusion_executor(_options(jfn, "stats").executors)
    check(executor is not None, lambda: "this function has no nvFuser executor", ValueError)
    return executor.stats


def recompilations(jfn: JittedFunction) -> Listing:
    """Each recompilation: the guards each cache entry failed (input, expected and actual value) and
    the numbers automatic dynamic made symbolic for it."""
    _options(jfn, "recompilations")
    return Listing(jfn.recompilations)


def fallbacks(jfn: JittedFunction | None = None, *, since: int = 0) -> Listing:
    """What runs eagerly because this compiler could not compile it (`runtime/fallbacks.Fallback`:
    what, the user's line, the reason, the kind). With `jfn` (a `jit(..., unsupported="eager")`
    function): its fallback, if it fell back. Without: every fallback recorded in this process
    from number `since` on (see `fallbacks_recorded`): the FX nodes the "fusebench" dynamo backend
    split out, its graphs that ran eagerly whole, dynamo's graph breaks, jitted functions, and
    fusion regions whose compiler failed on them (kind 'fusion': their prims run with torch)."""
    if jfn is not None:
        return Listing(getattr(jitted(jfn, "examine.fallbacks"), "fallbacks", []))
    return Listing(logged(since))


def fallbacks_recorded() -> int:
    """How many fallbacks this process has recorded so far: a `since` for `fallbacks`, so that
    `len(fallbacks(since=before))` counts those of what ran after."""
    return logged_count()


def cuda_graphs(jfn: JittedFunction) -> Listing:
    """For each cache entry of a function jitted with CUDA graphs (`cuda_graphs=True`, or the
    default automatic graphs on a machine with CUDA): captures, replays, calls run without a graph
    and why."""
    check(
        _options(jfn, "cuda_graphs").cuda_graphs is not False,
        lambda: f"{jfn!r} was jitted with cuda_graphs=False",
        ValueError,
    )
    return Listing(f"entry {i}: {_graph_stats(e.computation)}" for i, e in enumerate(jfn.entries))


NOT_GRAPHED = "not graphed (CUDA is unavailable)"  # `cuda_graphs`' line for a computation without graphs


def _stats(computation: Any) -> str:
    stats = getattr(computation, "stats", None)
    return NOT_GRAPHED if stats is None else str(stats)


def _graph_stats(computation: Any) -> str:
    if isinstance(computation, CompiledAutograd):  # a forward and, once run, each backward: graphed apart
        parts = [f"forward: {_stats(computation.forward)}"]
        parts += [f"backward: {_stats(b)}" for b in computation.backwards.values()]
        return "; ".join(parts)
    return _stats(computation)


def fusion_source_of(jfn: JittedFunction, name: str, *, backward: bool = False) -> str:
    """The FusionDefinition source the fusion `name` ran with on its last call (an Inductor region:
    the Python function torch.compile compiled)."""
    f = _find(jfn, name, "fusion_source_of", backward)
    if isinstance(f, InductorFusion):
        return f.canonical.source
    if isinstance(f, OneOpRegion):
        return f"# {name} runs as one torch op\n{f.call.description}\n"
    return fusion_source(f.region, f.descriptors())[0]


def repro(jfn: JittedFunction, name: str, path: str | Path, *, backward: bool = False) -> Path:
    """Writes a standalone script reproducing fusion `name` with its last inputs' layouts; returns the path."""
    f = _find(jfn, name, "repro", backward)
    check(
        isinstance(f, NvFusion),
        lambda: f"examine.repro({name!r}): repro scripts are written for nvFuser fusions; {name} runs with Inductor",
        ValueError,
    )
    check(bool(f.last_inputs), lambda: f"{name} has not run yet, so there are no inputs to record", RuntimeError)
    path = Path(path)
    try:
        check(
            path.parent.is_dir() and not path.is_dir(),
            lambda: f"examine.repro(path={str(path)!r}): expected a file path in an existing folder",
            ValueError,
        )
        path.write_text(repro_script(f.region, f.last_inputs, f.descriptors(), path.name))
    except OSError as error:
        raise ValueError(f"examine.repro(path={str(path)!r}): cannot write there ({error.strerror})") from error
    return path


# ---------------------------------------------------------------------------------------------


@dataclass
class KernelInfo:
    """One kernel nvFuser launched for a fusion."""

    segment: int
    scheduler: str
    time_ms: float
    bandwidth_gbs: float
    name: str = ""
    launch: str = ""


@dataclass
class SegmentReport:
    """How nvFuser split one fusion into kernels."""

    name: str
    kernels: list[KernelInfo]
    ops_by_segment: dict[int, list[str]]
    hint: str | None
    scheduled_ir: str = field(default="", repr=False)
    mismatch: str | None = None  # how the repro's outputs disagreed with PyTorch on its random inputs

    @property
    def schedulers(self) -> list[str]:
        """The scheduler of each kernel, in segment order."""
        return [k.scheduler for k in sorted(self.kernels, key=lambda k: k.segment)]

    @property
    def multi_kernel(self) -> bool:
        """True when nvFuser needed more than one kernel."""
        return len(self.kernels) > 1

    def __str__(self) -> str:
        head = f"{self.name}: {len(self.kernels)} kernel{'s' if len(self.kernels) != 1 else ''}"
        if self.multi_kernel:
            head = f"*** {head} (MULTI-KERNEL: {self.hint or 'nvFuser gave no reason'}) ***"
        lines = [head]
        if self.mismatch:
            lines.append(f"  ! its repro disagrees with PyTorch on random inputs: {self.mismatch}")
        for k in self.kernels:
            lines.append(
                f"  segment {k.segment}: {k.scheduler:<14} {k.time_ms * 1e3:9.1f} us "
                f"{k.bandwidth_gbs:8.1f} GB/s  {k.launch}"
            )
            inferred = " (inferred)" if self.multi_kernel else ""
            for op in self.ops_by_segment.get(k.segment, []):
                lines.append(f"      {op}{inferred}")
        return "\n".join(lines)


class Profile(NamedTuple):
    """What a fusion's repro script wrote under nvFuser's profiler."""

    kernels: list[KernelInfo]
    scheduled_ir: str
    mismatch: str | None = None  # the outputs' disagreement with PyTorch, where they disagreed


def _profile_all(fusions: list[NvFusion]) -> list[Profile]:
    """Each fusion's kernels, scheduled IR and check, from its repro script run under nvFuser's
    profiler (a fusion whose outputs disagree with PyTorch is profiled all the same, and says so).

    NOTE: nvFuser's profiler needs CUPTI to itself: after torch.profiler has run in a process
    (the harness counts kernels with it), cuptiSubscribe fails and nvFuser ends the whole
    process. So the scripts run in a child process, this process's long-lived one
    (`diagnose/profiler_process.py`), since starting Python, torch and nvFuser costs seconds each time.
    """
    profiler = shared_profiler()
    profiles = []
    with tempfile.TemporaryDirectory(prefix="fusebench-segments-") as tmp:
        for number, f in enumerate(fusions):
            script = Path(tmp) / f"{f.name}_{number}_repro.py"
            script.write_text(repro_script(f.region, f.last_inputs, f.descriptors(), script.name))
            out = Path(tmp) / f"profile_{number}.json"
            job = profiler.run(script, out)
            check(
                job.ok,
                lambda f=f, job=job: (
                    f"profiling {f.name} in a child process failed ({job.failure}):\n{job.detail[-2000:]}"
                ),
                RuntimeError,
            )
            data = json.loads(out.read_text())
            kernels = [
                KernelInfo(k["segment"], k["scheduler"], k["time_ms"], k["bandwidth_gbs"], k["name"], k["launch"])
                for k in data["kernels"]
            ]
            profiles.append(Profile(kernels, data["scheduled_ir"], data.get("mismatch")))
    return profiles


def _same_kernels_key(f: NvFusion) -> tuple:
    """Equal for fusions that run the same nvFuser definition on inputs of the same layouts (and
    scalars): they run the same kernels, so one profile serves all (a model's repeated layers)."""
    inputs = tuple((r.shape, r.stride, r.dtype, None if r.shape is not None else repr(r.value)) for r in f.last_inputs)
    return id(f.last_definition), inputs


def segments(jfn: JittedFunction, names: Iterable[str] | None = None, *, backward: bool = False) -> Listing:
    """For each fusion (that ran with nvFuser): kernels, scheduler, time and bandwidth per segment.

    Runs each fusion's repro script (fresh random inputs with its last inputs' layouts) under
    nvfuser_direct.PythonProfiler in this process's long-lived profiler child, once per distinct
    definition and input layout (identical layers share one profile). Multi-kernel fusions are
    flagged, with the structural reason the region suggests; which ops landed in which segment is
    exact for one kernel and inferred (reductions vs the rest) for several.
    """
    result = Listing()
    chosen: list[NvFusion] = []
    wanted = None if names is None else [names] if isinstance(names, str) else list(names)
    for f in _check_names(jfn, "segments", wanted or [], "names", backward):
        if wanted is not None and f.name not in wanted:
            continue
        check(
            isinstance(f, NvFusion),
            lambda f=f: f"{f.name} runs with Inductor; segments are nvFuser's kernels per fusion",
            RuntimeError,
        )
        check(
            f.executor.options.runner == "nvfuser" and f.last_definition is not None and f.fallback_error is None,
            lambda f=f: (
                f"{f.name} did not run with nvFuser (runner={f.executor.options.runner}, "
                f"fallback={f.fallback_error!r}); segments need nvFuser on a GPU"
            ),
            RuntimeError,
        )
        chosen.append(f)
    keys = [_same_kernels_key(f) for f in chosen]
    unique = {key: f for key, f in reversed(list(zip(keys, chosen)))}  # the first fusion of each key
    profiles = dict(zip(unique, _profile_all(list(unique.values()))))
    for f, key in zip(chosen, keys):
        profile = profiles[key]
        report = SegmentReport(
            f.name, profile.kernels, {}, segmentation_hint(f.region), profile.scheduled_ir, profile.mismatch
        )
        report.ops_by_segment = ops_by_scheduler(f.region, report.schedulers)
        result.append(report)
    return result


# ---------------------------------------------------------------------------------------------


@dataclass
class SavedValue:
    """One value the forward of the last-used entry saves for its backward."""

    name: str
    shape: tuple
    dtype: Any
    bytes: int

    def __str__(self) -> str:
        dims = ", ".join(str(s) for s in self.shape)
        dtype = getattr(self.dtype, "__name__", str(self.dtype).removeprefix("torch."))
        return f"{self.name}: {dtype}[{dims}], {self.bytes:,} bytes"


class SavedListing(Listing):
    """The saved values, with their total."""

    def __str__(self) -> str:
        if not self:
            return "(nothing saved: no backward was compiled, or it needs no forward value)"
        return super().__str__() + f"\ntotal: {sum(v.bytes for v in self):,} bytes"


def saved_for_backward(jfn: Any) -> SavedListing:
    """What the last-used entry's forward saves for its backward (empty without a backward)."""
    _options(jfn, "saved_for_backward")
    return SavedListing(SavedValue(*row) for row in saved_summary(jfn.last_entry.saved))
