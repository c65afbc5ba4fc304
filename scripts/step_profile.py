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
  to compare a variant's kernels with a peer's.

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
    args = parser.parse_intermixed_args(argv)  # flags may come between the case and its variants

    case = find_case(args.case)
    if args.backward and case.call is not training_step:
        parser.error(f"--backward: {case.name} is not a training step (its call is not training_step)")
    device = torch.device(args.device)
    params = first_params(case.quick_params if args.quick else case.params)
    params.update(parse_params(args.param, case.quick_params if args.quick else case.params))
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


if __name__ == "__main__":
    main()
