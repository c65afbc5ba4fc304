"""Measuring a variant on a case: correctness first, then compile time, steady-state time and counters.

For one (case, params), `prepare_case` makes the inputs once, snapshots them, and computes the
reference once. For each variant, `measure_variant`:
1. restores every input, prepares the variant, and makes the first call, timed on the wall clock
   with the device synchronized; its result (and every argument the case mutates) must match the
   reference, and no other argument may have changed; otherwise the outcome is `failed` with the
   max error and no time is recorded (where eager misses the case's tolerance too, the variant is
   judged by eager's own error instead: `fusebench.measure.yardstick`);
2. warms up (at least two calls, about a tenth of the budget), then times repeats one by one
   (inputs restored and the L2 cache flushed before each, outside the timed region) until the
   time budget is spent and at least `min_repeats` were taken, or, with `Settings.precision`,
   sooner once the median is known to that fraction (`fusebench.measure.precision`): median,
   IQR, min, count; then one more call, inputs restored, is checked as the first was (what was
   timed is a steady call: a replayed CUDA graph, a cache hit, reused buffers), and a
   disagreement makes the outcome `failed` after all (not for a variant that `keeps_state`);
   a `cold` case instead prepares the variant afresh for every sample;
3. compile time = first call - steady-state time (for cold cases: first call - a warm call);
   recompilations = compilations after the first call of the compiled function; kernels per call
   from torch.profiler (CUDA only); fusions per call from our compiler's last trace. A training
   step (a case with `forward_call`) also records its backward's kernels (the call's minus the
   forward part's) and the fusions of our compiler's backward trace; fallbacks = the pieces our
   compiler left to eager (the fusebench-dynamo variant: split-out ops, graph breaks);
4. peak memory over steps 1 to 3 (`fusebench.measure.memory`): device memory the measurement
   allocated at its peak, and the process's peak RSS;
5. with `Settings.record`, what our compiler did (trace, fusion definitions, nvFuser segments with
   `Settings.segments`) as `Outcome.artifacts` (`fusebench.measure.compiler_record`), for ok and
   failed outcomes alike;
6. with `Settings.paired` (warm cases), `fusebench` and each peer measured before it on the same
   prepared case take samples alternately, for the verdict (`fusebench.measure.paired`), after the
   memory watch and inside the device turn; `extra["paired"]` keeps the ratios.
"""

from __future__ import annotations

import contextlib
import functools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from fusebench.cases.case import Case
from fusebench.cases.variants import Compiled, SkipVariant, Target, Variant
from fusebench.measure.compiler_record import record
from fusebench.measure.correctness import Mismatch, compare
from fusebench.measure.memory import MemoryWatch, PeakMemory
from fusebench.measure.outcome import Outcome
from fusebench.measure.paired import Runner, may_pair, pairs_with, time_paired
from fusebench.measure.phases import Phases
from fusebench.measure.precision import PrecisionStop
from fusebench.measure.profiling import count_kernels
from fusebench.measure.snapshot import InputSnapshot, map_tensors, upcast_copy
from fusebench.measure.stats import summarize
from fusebench.measure.timing import L2Flusher, Timer, WallTimer, make_timer
from fusebench.measure.turns import device_turn, quiet_host
from fusebench.measure.yardstick import EagerYardstick, judge, measure_eager, rms_errors

Clock = Callable[[], float]


@dataclass(frozen=True)
class Settings:
    """How hard to measure. `budget_s` is the time budget for the timed repeats of one variant;
    `precision` > 0 ends a warm case's repeats before it once the median's confidence interval is
    within that fraction of it (0: always the whole budget)."""

    device: torch.device
    budget_s: float = 1.0
    min_repeats: int = 5
    cold_min_repeats: int = 3
    max_repeats: int = 10_000
    precision: float = 0.0
    warmup_fraction: float = 0.1
    seed: int = 0
    peak_bandwidth_gbs: float | None = None
    record: bool = False
    segments: bool = False
    paired: bool = False  # time fusebench and each peer alternately too (fusebench.measure.paired)


@dataclass
class PreparedCase:
    """Inputs, their snapshot and the expected results for one parameter combination of a case."""

    suite: str
    case: Case
    params: dict[str, Any]
    args: tuple = ()
    bytes_moved: int | None = None
    snapshot: InputSnapshot | None = None
    expected_output: Any = None
    expected_mutated: dict[int, Any] | None = None
    error: str | None = None
    skip_reason: str | None = None  # the case cannot run here: every variant is skipped
    eager: EagerYardstick | None = None  # eager's error, measured once a variant misses the tolerance
    runners: list[Runner] = field(default_factory=list)  # with Settings.paired: the variants timed ok on it


def prepare_case(suite: str, case: Case, params: dict[str, Any], settings: Settings) -> PreparedCase:
    """Makes the inputs and computes the reference (errors are kept and reported per variant)."""
    prepared = PreparedCase(suite, case, dict(params))
    prepared.skip_reason = case.missing_requirement()
    if prepared.skip_reason is not None:
        return prepared
    try:
        prepared.bytes_moved = int(case.bytes_moved(params))
        args = tuple(case.make_inputs(params, settings.device, settings.seed))
        prepared.args = args
        prepared.snapshot = InputSnapshot(args, case.mutated_args)
        reference_args = upcast_copy(args, case.reference_dtype)
        output = case.run(case.reference or case.fn, reference_args)
        prepared.expected_output = map_tensors(torch.Tensor.detach, output)
        prepared.expected_mutated = {i: reference_args[i] for i in case.mutated_args}
    except Exception as error:
        prepared.error = f"the bytes model, the inputs or the reference failed: {_describe(error)}"
    return prepared


def measure_variant(
    prepared: PreparedCase,
    variant: Variant,
    settings: Settings,
    *,
    clock: Clock = time.perf_counter,
    timer: Timer | None = None,
) -> Outcome:
    """Measures `variant` on the prepared case; never raises for a variant's failure."""
    case = prepared.case
    started_at, start = time.time(), clock()
    memory: list[PeakMemory] = []
    phases = Phases()

    def finish(status: str, detail: str = "", **fields: Any) -> Outcome:
        peaks = memory[0] if memory else PeakMemory(None, None)
        return Outcome(
            suite=prepared.suite,
            case=case.name,
            params=dict(prepared.params),
            variant=variant.name,
            device=str(settings.device),
            status=status,
            detail=detail,
            calls_per_sample=case.calls_per_sample,
            case_version=case.version,
            bytes_moved=prepared.bytes_moved,
            tokens_per_call=None if case.tokens is None else int(case.tokens(prepared.params)),
            peak_bandwidth_gbs=settings.peak_bandwidth_gbs,
            started_at=started_at,
            duration=clock() - start,
            peak_device_bytes=peaks.device_bytes,
            peak_host_rss_bytes=peaks.host_rss_bytes,
            extra={**fields.pop("extra", {}), **phases.facts, "phases": dict(phases.seconds)},
            **fields,
        )

    if prepared.skip_reason is not None:
        return finish("skipped", prepared.skip_reason)
    if prepared.error is not None:
        return finish("error", prepared.error)
    reason = variant.unavailable(settings.device)
    if reason is not None:
        return finish("skipped", reason)
    _flusher(str(settings.device))  # NOTE: made before the watch starts: its buffer is not the variant's
    watch = MemoryWatch(settings.device)

    def stop_watch() -> None:
        memory.append(watch.stop())

    watch.start()
    try:
        return _measure(prepared, variant, settings, clock, timer, finish, stop_watch, phases)
    except SkipVariant as error:
        return finish("skipped", str(error))
    except NotImplementedError as error:
        return finish("unsupported", _first_line(error) or "NotImplementedError")
    except Exception as error:
        return finish("error", _describe(error))
    finally:
        assert prepared.snapshot is not None
        prepared.snapshot.restore_all()


def collect_samples(
    run: Callable[[], Any],
    before_each: Callable[[], None],
    timer: Timer,
    clock: Clock,
    budget_s: float,
    min_repeats: int,
    max_repeats: int,
    stop: Callable[[list[float]], bool] | None = None,
) -> list[float]:
    """Times `run` repeatedly (calling `before_each` untimed first) until the budget is spent and
    at least `min_repeats` samples exist, or `max_repeats` samples exist, or `stop(samples)` says
    they suffice (after `min_repeats`)."""
    samples: list[float] = []
    start = clock()
    while len(samples) < max_repeats:
        before_each()
        samples.append(timer.time(run))
        if len(samples) >= min_repeats and (clock() - start >= budget_s or (stop is not None and stop(samples))):
            break
    return samples


class FirstCallProbe:
    """Calls the compiled function and remembers its compilation count right after the first call."""

    def __init__(self, compiled: Compiled) -> None:
        self.compiled = compiled
        self.compilations_after_first: int | None = None
        self.calls = 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        result = self.compiled.fn(*args, **kwargs)
        self.calls += 1
        if self.calls == 1:
            self.compilations_after_first = self.compiled.compilations()
        return result

    def recompilations(self) -> int | None:
        """Compilations since the end of the first call (None when the variant does not count them)."""
        total = self.compiled.compilations()
        if total is None or self.compilations_after_first is None:
            return None
        return total - self.compilations_after_first


def _measure(
    prepared: PreparedCase,
    variant: Variant,
    settings: Settings,
    clock: Clock,
    timer: Timer | None,
    finish: Callable[..., Outcome],
    stop_memory_watch: Callable[[], None] = lambda: None,
    phases: Phases | None = None,
) -> Outcome:
    case, args, snapshot = prepared.case, prepared.args, prepared.snapshot
    assert snapshot is not None
    phases = phases or Phases()
    snapshot.restore_all()
    target = Target(case.fn, args, prepared.params, case.options(prepared.params), settings.device)
    with phases.phase("prepare"):
        compiled = variant.prepare(target)
    probe = FirstCallProbe(compiled)
    wall = WallTimer(settings.device, clock)
    results: list[Any] = []
    # NOTE: where several workers share the device (fusebench.measure.turns), each compiles and
    # checks while another times; a cold case's first call is its first sample, timed in its turn
    with contextlib.ExitStack() as turn:
        if case.cold:
            turn.enter_context(device_turn(phases.phase("turn_wait")))
        with phases.phase("first_call"):
            first_s = wall.time(lambda: results.append(case.run(probe, args)))
        with phases.phase("check"):
            problem = check_result(prepared, results[0])
        if problem is not None:
            with phases.phase("record"):
                artifacts = _record(compiled, settings)
            return finish("failed", problem[0], extra={"max_abs_error": problem[1]}, artifacts=artifacts)
        if not case.cold:
            turn.enter_context(device_turn(phases.phase("turn_wait")))
        timer = timer or make_timer(case.timer, settings.device)
        flusher = _flusher(str(settings.device))

        def before_each() -> None:
            snapshot.restore_mutated()
            flusher.flush()

        def counters() -> dict[str, Any]:
            before_each()
            kernels = count_kernels(lambda: case.run(compiled.fn, args), settings.device)
            return {
                "recompilations": probe.recompilations(),
                "fusions_per_call": compiled.fusions(),
                "fusions_backward": compiled.backward_fusions(),
                "fallbacks": compiled.fallbacks(),
                "kernels_per_call": kernels,
                "kernels_backward": _backward_kernels(case, compiled, args, kernels, before_each, settings.device),
            }

        if case.cold:
            # NOTE: counters come from the first compiled function, before fresh ones replace it
            # (a fresh torch.compile resets Dynamo's caches).
            snapshot.restore_mutated()
            with phases.phase("warmup"):
                steady_s = wall.time(lambda: case.run(compiled.fn, args))
            with phases.phase("counters"):
                counted = counters()
            with phases.phase("samples"):
                samples = _cold_samples(prepared, variant, target, first_s, before_each, settings, clock, timer)
            stats = summarize(samples)
        else:
            stats = summarize(_warm_samples(prepared, compiled, before_each, settings, clock, timer, phases))
            with phases.phase("counters"):
                counted = counters()
            problem = None
            if not compiled.keeps_state:
                with phases.phase("check"):
                    before_each()
                    problem = check_result(prepared, case.run(compiled.fn, args))
            if problem is not None:  # NOTE: a steady call is what was timed: a cache, a replay, a reused buffer
                with phases.phase("record"):
                    artifacts = _record(compiled, settings)
                detail = f"the first call agreed with the reference, a call after {stats.repeats} timed ones did not: "
                return finish("failed", detail + problem[0], extra={"max_abs_error": problem[1]}, artifacts=artifacts)
            steady_s = stats.median
        compile_seconds = max(first_s - steady_s, 0.0)
        stop_memory_watch()
        if settings.paired and not case.cold:  # NOTE: after the memory watch: the other side's peak is not ours
            with phases.phase("paired"):
                counted["extra"] = _paired(prepared, variant, compiled, before_each, settings, clock, timer)
    # NOTE: out of the turn: the record profiles nvFuser's segments in a child process, mostly compiling
    with phases.phase("record"):
        artifacts = _record(compiled, settings)
    return finish("ok", timing=stats, compile_seconds=compile_seconds, artifacts=artifacts, **counted)


def _record(compiled: Compiled, settings: Settings) -> dict[str, str]:
    if not settings.record or compiled.program is None:
        return {}
    return record(compiled.program, segments=settings.segments)


def _paired(
    prepared: PreparedCase,
    variant: Variant,
    compiled: Compiled,
    before_each: Callable[[], None],
    settings: Settings,
    clock: Clock,
    timer: Timer,
) -> dict[str, Any]:
    """This variant timed alternately with each variant measured before it that a verdict pairs
    it with (`extra["paired"]`, by the other's name); kept for the variants after it where a
    verdict may pair them (it is `fusebench` or a peer)."""
    this = Runner(variant.name, _sample_run(prepared.case, compiled, prepared.args))
    paired = {}
    for other in [runner for runner in prepared.runners if pairs_with(variant.name, runner.variant)]:
        with quiet_host():
            result = time_paired(
                this, other, before_each, timer, clock, settings.budget_s, settings.min_repeats, settings.max_repeats
            )
        paired[other.variant] = result.to_json()
    if may_pair(variant.name):
        prepared.runners.append(this)
    return {"paired": paired} if paired else {}


def _sample_run(case: Case, compiled: Compiled, args: tuple) -> Callable[[], None]:
    """One sample's calls of the compiled function (`Case.calls_per_sample`)."""
    calls = case.calls_per_sample

    def run() -> None:
        for _ in range(calls):
            case.run(compiled.fn, args)

    return run


def _warm_samples(
    prepared: PreparedCase,
    compiled: Compiled,
    before_each: Callable[[], None],
    settings: Settings,
    clock: Clock,
    timer: Timer,
    phases: Phases,
) -> list[float]:
    calls = prepared.case.calls_per_sample
    run = _sample_run(prepared.case, compiled, prepared.args)
    warmup_end = clock() + settings.warmup_fraction * settings.budget_s
    warmups = 0
    with phases.phase("warmup"):
        while warmups < 2 or (clock() < warmup_end and warmups < settings.max_repeats):
            before_each()
            run()
            warmups += 1
    with phases.phase("samples"), quiet_host() as stopped:  # NOTE: the other workers of a shared GPU wait stopped
        if stopped:
            phases.facts["workers_stopped"] = len(stopped)
        stop = PrecisionStop(settings.precision) if settings.precision > 0 else None
        samples = collect_samples(
            run, before_each, timer, clock, settings.budget_s, settings.min_repeats, settings.max_repeats, stop
        )
    return [sample / calls for sample in samples]


def _cold_samples(
    prepared: PreparedCase,
    variant: Variant,
    target: Target,
    first_s: float,
    before_each: Callable[[], None],
    settings: Settings,
    clock: Clock,
    timer: Timer,
) -> list[float]:
    """The first call's time followed by samples from freshly prepared variants."""
    case, args = prepared.case, prepared.args
    fresh: list[Compiled] = []

    def prepare_fresh() -> None:
        before_each()
        fresh[:] = [variant.prepare(target)]

    return [first_s] + collect_samples(
        lambda: case.run(fresh[0].fn, args),
        prepare_fresh,
        timer,
        clock,
        settings.budget_s,
        max(settings.cold_min_repeats - 1, 0),
        max(settings.max_repeats - 1, 0),
    )


def _backward_kernels(
    case: Case,
    compiled: Compiled,
    args: tuple,
    kernels: int | None,
    before_each: Callable[[], None],
    device: torch.device,
) -> int | None:
    """Kernels of a training step's backward: the whole call's minus its forward part's (None
    when the case declares no forward part or kernels are not counted here)."""
    if case.forward_call is None or kernels is None:
        return None
    forward_call = case.forward_call
    before_each()
    forward = count_kernels(lambda: forward_call(compiled.fn, args), device)
    return None if forward is None else kernels - forward


def check_result(prepared: PreparedCase, output: Any) -> tuple[str, float] | None:
    """(message, max error) for the first disagreement with the reference, or None. A variant
    that misses the case's tolerance where eager misses it too is judged by eager's own error
    (fusebench/measure/yardstick.py)."""
    case, args, snapshot = prepared.case, prepared.args, prepared.snapshot
    assert snapshot is not None and prepared.expected_mutated is not None
    rows = case.differing_rows(prepared.params)
    modified = snapshot.modified_unmutated()
    mismatch = compare(prepared.expected_output, output, case.tolerance, "output", rows)
    for index in case.mutated_args:
        if mismatch is None:
            mismatch = compare(prepared.expected_mutated[index], args[index], case.tolerance, f"argument {index}", rows)
    if mismatch is not None:
        message = _beyond_eager(prepared, output, mismatch)
        if message is not None:
            return message, mismatch.max_abs_error
    if modified:
        return f"wrote into {', '.join(modified[:3])}, which the case does not declare as mutated", float("inf")
    return None


def _beyond_eager(prepared: PreparedCase, output: Any, mismatch: Mismatch) -> str | None:
    """Why the variant fails, or None where eager misses the tolerance as well and the variant's
    error stays within eager's (eager runs once per prepared case, on the pristine inputs)."""
    case, args, snapshot = prepared.case, prepared.args, prepared.snapshot
    assert snapshot is not None and prepared.expected_mutated is not None
    if not math.isfinite(mismatch.max_abs_error):
        return mismatch.message
    variant_rms = rms_errors(prepared.expected_output, output, "output")
    for index, want in prepared.expected_mutated.items():
        variant_rms.update(rms_errors(want, args[index], f"argument {index}"))
    if prepared.eager is None:
        snapshot.restore_all()
        try:
            prepared.eager = measure_eager(
                lambda: case.run(case.fn, args),
                lambda: {i: map_tensors(lambda t: t.detach().clone(), args[i]) for i in case.mutated_args},
                prepared.expected_output,
                prepared.expected_mutated,
                case.tolerance,
                case.differing_rows(prepared.params),
            )
        finally:
            snapshot.restore_all()
    return judge(mismatch, variant_rms, prepared.eager)


@functools.cache
def _flusher(device: str) -> L2Flusher:
    return L2Flusher(torch.device(device))


def _first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[0] if lines else ""


def _describe(error: BaseException) -> str:
    message = _first_line(error)
    return f"{type(error).__name__}: {message}" if message else type(error).__name__
