"""Where one call of a suite case spends its host time: `python -m scripts.step_profile CASE [VARIANT ...]`.

For each variant (default: eager and fusebench) of the case (its first parameter combination, or
with --quick its quick one) it prints, after warm-up:
- device: the median of CUDA-event times of one call (the harness's device timer, no L2 flush);
- host: the median time from the call's start to its return, the device idle before each call
  (how long the host takes to issue the call's work);
- the functions with the most own host time over `--profile` calls (cProfile), so a slow guard,
  an unexpected synchronization (a large own time in a tensor method) or nvFuser's `execute` shows
  by name;
- with `--kernels N`, on CUDA, the kernels with the most device time over N calls (torch.profiler),
  to compare a variant's kernels with a peer's;
- with `--fusions N`, the host time of each nvFuser fusion's execute (median over N calls), a
  backward fusion named as the backward's; with `--segments` too, on CUDA, each fusion's nvFuser
  kernels (schedulers, device time) after its name: a fusion nvFuser segments into several kernels
  costs more host time per execute than a one-kernel fusion;
- with `--runtime N`, on CUDA, the CUDA runtime and driver calls over N calls (torch.profiler):
  a synchronization (`cudaStreamSynchronize`, `cudaMemcpy`) shows by name and count;
- for our compiler on CUDA, what its CUDA graphs did (captures, replays, or why none:
  `compiler.examine.cuda_graphs`).

Training-step cases (a `call` such as `training_step`) are profiled as the harness times them:
forward and backward as one call; with `--backward`, the backward alone (the forward runs once,
then each call computes the gradients again from its output). On CPU the device column is the
host time.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import pstats
import statistics
import time
from typing import Any

import torch

from fusebench.cases.case import Case, variants_for
from fusebench.cases.discovery import discover
from fusebench.cases.training import backward_of_step, training_step
from fusebench.cases.variants import Target
from fusebench.measure.compiler_record import graph_listing


def find_case(name: str) -> Case:
    """The bundled case named `name` (raises KeyError listing the names when there is none)."""
    cases = {case.name: case for suite in discover() for case in suite.cases}
    if name not in cases:
        raise KeyError(f"no case named {name!r}; cases: {', '.join(sorted(cases))}")
    return cases[name]


def first_params(grid: Any) -> dict[str, Any]:
    """The first combination of a parameter grid."""
    return {key: values[0] for key, values in grid.items()}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_calls(call: Any, device: torch.device, calls: int) -> tuple[float, float]:
    """(device median, host median) of `calls` calls, in microseconds."""
    device_us, host_us = [], []
    for _ in range(calls):
        _sync(device)
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
        began = time.perf_counter()
        call()
        host_us.append((time.perf_counter() - began) * 1e6)
        if device.type == "cuda":
            end.record()
            end.synchronize()
            device_us.append(start.elapsed_time(end) * 1e3)
    _sync(device)
    return (statistics.median(device_us) if device_us else statistics.median(host_us)), statistics.median(host_us)


def parse_params(pairs: list[str], grid: Any) -> dict[str, Any]:
    """`KEY=VALUE` pairs as parameters, each value matched by its text against the grid's values
    (raises ValueError naming the key and the values it takes)."""
    chosen = {}
    for pair in pairs:
        key, _, text = pair.partition("=")
        if key not in grid:
            raise ValueError(f"--param {pair!r}: no parameter {key!r}; parameters: {', '.join(grid)}")
        matches = [value for value in grid[key] if str(value) == text]
        if not matches:
            raise ValueError(f"--param {pair!r}: {key} takes {', '.join(map(str, grid[key]))}")
        chosen[key] = matches[0]
    return chosen


def profile_calls(call: Any, device: torch.device, calls: int, top: int) -> str:
    """The `top` functions by own time over `calls` calls (each followed by a synchronization), in
    microseconds per call: own time, time including callees, and how often each ran per call."""
    profiler = cProfile.Profile()
    for _ in range(calls):
        profiler.enable()
        call()
        profiler.disable()
        _sync(device)
    stats = pstats.Stats(profiler).stats  # (file, line, name) -> (primitive calls, calls, own, cumulative, callers)
    rows = sorted(stats.items(), key=lambda item: -item[1][2])[:top]
    lines = [f"{'own us':>9} {'cum us':>9} {'calls':>7}  function"]
    for (file, line, name), (_, count, own, cumulative, _) in rows:
        where = name if file == "~" else f"{file.split('site-packages/')[-1]}:{line}({name})"
        lines.append(f"{own / calls * 1e6:9.1f} {cumulative / calls * 1e6:9.1f} {count / calls:7.1f}  {where}")
    return "\n".join(lines)


def kernel_table(call: Any, calls: int, top: int) -> str:
    """The `top` CUDA kernels by device time over `calls` calls (torch.profiler), in microseconds
    per call: total, launches per call, name."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            call()
        torch.cuda.synchronize()
    kernels: dict[str, list[float]] = {}
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            kernels.setdefault(event.name, []).append(event.time_range.elapsed_us())
    rows = sorted(kernels.items(), key=lambda item: -sum(item[1]))
    total = sum(sum(times) for _, times in rows) / calls
    lines = [f"kernels: {sum(len(t) for _, t in rows) / calls:.0f} per call, {total:.1f} us per call in all"]
    lines.append(f"{'us':>9} {'count':>6}  kernel")
    for name, times in rows[:top]:
        lines.append(f"{sum(times) / calls:9.1f} {len(times) / calls:6.1f}  {name[:150]}")
    return "\n".join(lines)


def fusion_table(
    call: Any, device: torch.device, calls: int, top: int, program: Any = None, kernels: bool = False
) -> str:
    """The `top` nvFuser fusions by host time over `calls` calls (each followed by a synchronization):
    median microseconds per execute (the fusion's call: its layout check and nvFuser's execute),
    executes per call, name and prims.

    With `program` (the `compiler.jit` function or module behind `call`), a fusion of the backward
    that ran is named as the backward's (forward and backward number their fusions apart); with
    `kernels` too, each fusion that ran with nvFuser is followed by its kernels (schedulers and
    device time, `compiler.examine.segments`, which profiles in a child process: CUDA only)."""
    from compiler.executors.nvfuser import executor as nvfuser

    times: dict[int, tuple[Any, list[float]]] = {}
    run = nvfuser.NvFusion.__call__

    def timed(fusion: Any, *args: Any) -> Any:
        began = time.perf_counter()
        try:
            return run(fusion, *args)
        finally:
            spent = (time.perf_counter() - began) * 1e6
            if fusion.last_definition is not None:  # it ran with nvFuser (not torch: a fallback, the torch runner)
                times.setdefault(id(fusion), (fusion, []))[1].append(spent)

    nvfuser.NvFusion.__call__ = timed
    try:
        for _ in range(calls):
            call()
            _sync(device)
    finally:
        nvfuser.NvFusion.__call__ = run
    if not times:
        return "nvFuser fusions: none ran (no nvFuser here, or nothing fused)"
    labels = _fusion_labels(program, kernels) if program is not None else {}
    rows = sorted(times.values(), key=lambda row: -statistics.median(row[1]) * len(row[1]))
    total = sum(sum(spent) for _, spent in rows) / calls
    executes = sum(len(spent) for _, spent in rows) / calls
    lines = [f"nvFuser fusions: {total:.1f} us of host time per call over {executes:.0f} executes"]
    lines.append(f"{'us':>9} {'per call':>8}  fusion")
    for fusion, spent in rows[:top]:
        name, kernel_note = labels.get(id(fusion), (fusion.name, ""))
        prims = len(fusion.region.bsyms)
        lines.append(f"{statistics.median(spent):9.1f} {len(spent) / calls:8.1f}  {name} ({prims} prims){kernel_note}")
    return "\n".join(lines)


def _fusion_labels(program: Any, kernels: bool) -> dict[int, tuple[str, str]]:
    """id(fusion) -> (its name, "backward " before a backward fusion's; with `kernels` its nvFuser
    kernels, "  [2 kernels: reduction+inner_outer_persistent, 64.3 us]", else "")."""
    import compiler
    from compiler import examine
    from compiler.executors.nvfuser.executor import region_fusions

    labels: dict[int, tuple[str, str]] = {}
    parts = [(False, compiler.last_traces(program))]
    if backward_traces := compiler.last_backward_traces(program, ran=True):
        parts.append((True, backward_traces))
    for backward, traces in parts:
        fusions = list(region_fusions(traces[-1]))
        ran = [f.name for f in fusions if f.last_definition is not None and f.fallback_error is None]
        reports = {r.name: r for r in examine.segments(program, ran, backward=backward)} if kernels and ran else {}
        for f in fusions:
            report, note = reports.get(f.name), ""
            if report is not None:
                schedulers = "+".join(report.schedulers)
                spent = sum(k.time_ms for k in report.kernels) * 1e3
                count = len(report.kernels)
                note = f"  [{count} kernel{'s' if count != 1 else ''}: {schedulers}, {spent:.1f} us]"
            labels[id(f)] = (("backward " if backward else "") + f.name, note)
    return labels


def runtime_table(call: Any, calls: int, top: int) -> str:
    """The `top` CUDA runtime and driver calls by host time over `calls` calls (torch.profiler):
    microseconds per call, count per call, name."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            call()
        torch.cuda.synchronize()
    rows = [e for e in prof.key_averages() if e.key.startswith(("cuda", "cu")) and not e.key.startswith("cudnn")]
    rows.sort(key=lambda e: -e.cpu_time_total)
    lines = [f"{'us':>9} {'count':>6}  CUDA runtime/driver call"]
    for e in rows[:top]:
        lines.append(f"{e.cpu_time_total / calls:9.1f} {e.count / calls:6.0f}  {e.key}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Parses the command line and prints each variant's timings and profile."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("case")
    parser.add_argument("variants", nargs="*", default=["eager", "fusebench"])
    parser.add_argument("--quick", action="store_true", help="the case's quick parameters")
    parser.add_argument(
        "--param", action="append", default=[], metavar="KEY=VALUE", help="a parameter value (repeatable)"
    )
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--calls", type=int, default=50, help="timed calls per variant")
    parser.add_argument("--profile", type=int, default=20, help="profiled calls per variant (0: none)")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--kernels", type=int, default=0, help="calls profiled for a CUDA kernel table (0: none)")
    parser.add_argument("--backward", action="store_true", help="a training step's backward alone")
    parser.add_argument("--fusions", type=int, default=0, help="calls timed for a per-fusion host table (0: none)")
    parser.add_argument("--runtime", type=int, default=0, help="calls profiled for CUDA runtime calls (0: none)")
    parser.add_argument(
        "--segments", action="store_true", help="with --fusions, on CUDA: each fusion's nvFuser kernels after its name"
    )
    args = parser.parse_intermixed_args(argv)  # flags may come between the case and its variants

    try:
        case = find_case(args.case)
    except KeyError as error:
        parser.error(error.args[0])
    if args.backward and case.call is not training_step:
        parser.error(f"--backward: {case.name} is not a training step (its call is not training_step)")
    device = torch.device(args.device)
    grid = case.quick_params if args.quick and case.quick_params is not None else case.params
    params = first_params(grid)
    params.update(parse_params(args.param, grid))
    by_name = {variant.name: variant for variant in variants_for(case)}
    print(f"{case.name} {params} on {torch.cuda.get_device_name(device) if device.type == 'cuda' else 'cpu'}")
    for name in args.variants:
        inputs = case.make_inputs(params, device, 0)
        options = case.jit_options(params) if case.jit_options else {}
        compiled = by_name[name].prepare(Target(case.fn, inputs, params, options, device))
        if args.backward:
            call = backward_of_step(compiled.fn, inputs)
        else:
            call = functools.partial(case.run, compiled.fn, inputs)
        for _ in range(5):
            call()
        device_us, host_us = time_calls(call, device, args.calls)
        print(f"\n== {name}: device {device_us:.1f} us, host {host_us:.1f} us per call (medians of {args.calls})")
        if args.profile:
            print(profile_calls(call, device, args.profile, args.top))
        if args.kernels and device.type == "cuda":
            print(kernel_table(call, args.kernels, args.top))
        if args.fusions:
            kernels = args.segments and device.type == "cuda"
            print(fusion_table(call, device, args.fusions, args.top, getattr(compiled, "program", None), kernels))
        if args.runtime and device.type == "cuda":
            print(runtime_table(call, args.runtime, args.top))
        if graphs := graphs_text(getattr(compiled, "program", None)):
            print(graphs)


def graphs_text(program: Any) -> str:
    """For our compiler's program: what its CUDA graphs did (`compiler_record.graph_listing`), or ''
    (not our compiler, jitted with cuda_graphs=False, or no CUDA)."""
    listing = graph_listing(program) if program is not None else None
    return "" if listing is None else f"CUDA graphs:\n{listing}"


if __name__ == "__main__":
    main()
