"""Standalone repro scripts for fusions, and the pieces they share with `compiler.examine`.

A repro script needs only torch and nvfuser_direct: it holds the fusion definition source (the
same text the executor runs), builds inputs with the recorded shapes, strides and dtypes, runs
the fusion, checks it against the same prims written as PyTorch code (generated from the region
by `TORCH_SOURCE`, a table keyed by `Prim`), checks every buffer the fusion writes back, and
times it with CUDA events (median, L2 flushed between runs).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import torch

from compiler.core.executor import Region
from compiler.core.ir import NumberProxy, Proxy, TensorProxy, value_source
from compiler.executors import region_fallback
from compiler.executors.nvfuser.define.aliasing import copied_write_backs, written_inputs
from compiler.executors.nvfuser.define.dependencies import computed_from
from compiler.executors.nvfuser.define.translations import LOW_PRECISION, ScalarDesc, TensorDesc, fusion_source
from compiler.prims import REDUCTIONS, UNARY, Prim

# ---------------------------------------------------------------------------------------------
# PyTorch source for each prim the nvFuser executor translates


def _call(fn: str) -> Callable[[list[str]], str]:
    return lambda a: f"{fn}({', '.join(a)})"


_OPERATORS = {
    Prim.ADD: "+", Prim.SUB: "-", Prim.MUL: "*", Prim.DIV: "/", Prim.FLOOR_DIVIDE: "//", Prim.REMAINDER: "%",
    Prim.POW: "**",
    Prim.EQ: "==", Prim.NE: "!=", Prim.LT: "<", Prim.LE: "<=", Prim.GT: ">", Prim.GE: ">=",
    Prim.BITWISE_AND: "&", Prim.BITWISE_OR: "|", Prim.BITWISE_XOR: "^",
}  # fmt: skip

TORCH_SOURCE: dict[Prim, Callable[[list[str]], str]] = {
    **{p: _call(f"torch.{p.value}") for p in UNARY},
    **{p: (lambda a, op=op: f"({a[0]} {op} {a[1]})") for p, op in _OPERATORS.items()},
    Prim.FMOD: _call("_fmod"),
    Prim.ATAN2: _call("_atan2"),
    Prim.MAXIMUM: _call("_maximum"),
    Prim.MINIMUM: _call("_minimum"),
    Prim.WHERE: _call("torch.where"),
    Prim.CONVERT_ELEMENT_TYPE: lambda a: f"{a[0]}.to({a[1]})",
    Prim.SUM: lambda a: f"_reduce(torch.sum, {a[0]}, {a[1]})",
    Prim.PROD: _call("_prod"),
    Prim.AMAX: lambda a: f"_reduce(torch.amax, {a[0]}, {a[1]})",
    Prim.AMIN: lambda a: f"_reduce(torch.amin, {a[0]}, {a[1]})",
    Prim.BROADCAST_IN_DIM: _call("_broadcast_in_dim"),
    Prim.RESHAPE: lambda a: f"{a[0]}.reshape({a[1]})",
    Prim.PERMUTE: lambda a: f"{a[0]}.permute({a[1]})",
    Prim.SLICE: _call("_slice"),
    Prim.SQUEEZE: lambda a: f"torch.squeeze({a[0]}, tuple({a[1]}))",
    Prim.CAT: _call("torch.cat"),
    Prim.INDEX_SELECT: _call("torch.index_select"),
    Prim.TAKE_ALONG_DIM: lambda a: f"torch.gather({a[0]}, {a[2]}, {a[1]})",
    Prim.FULL: lambda a: f"torch.full({a[0]}, {a[1]}, dtype={a[2]}, device={a[3]})",
    Prim.IOTA: _call("_iota"),
    Prim.MATMUL: _call("torch.matmul"),
    Prim.LINEAR: _call("torch.nn.functional.linear"),
    Prim.COPY_TO: lambda a: f"{a[1]}.copy_({a[0]})",
}

_HELPERS = """
def _tensors(a, b):
    like = a if isinstance(a, torch.Tensor) else b
    return [x if isinstance(x, torch.Tensor) else torch.tensor(x, dtype=like.dtype, device=like.device) for x in (a, b)]


def _maximum(a, b):
    return torch.maximum(*_tensors(a, b))


def _minimum(a, b):
    return torch.minimum(*_tensors(a, b))


def _fmod(a, b):
    return torch.fmod(*_tensors(a, b))


def _atan2(a, b):
    return torch.atan2(*_tensors(a, b))


def _reduce(fn, a, dims):
    return fn(a, tuple(dims)) if dims else a.clone()


def _prod(a, dims):
    for d in sorted(dims, reverse=True):
        a = torch.prod(a, d)
    return a if dims else a.clone()


def _broadcast_in_dim(a, shape, broadcast_dims):
    view = [1] * len(shape)
    for i, d in enumerate(broadcast_dims):
        view[d] = a.shape[i]
    return a.reshape(view).expand(list(shape))


def _slice(a, starts, ends, steps):
    return a[tuple(slice(s, e, st) for s, e, st in zip(starts, ends, steps))]


def _iota(length, start, step, dtype, device):
    return start + step * torch.arange(length, dtype=dtype, device=device)
"""


def reference_source(region: Region) -> str:
    """`def reference(<inputs>)`: the region's prims as PyTorch code, returning its outputs.

    A float32 value converted to bf16/fp16 stays float32 there, as the fusion holds it (the
    translator's `_convert`), and each output is rounded to its dtype once, at the end: eager's
    rounding of every intermediate would differ from the fusion by more than a bf16 tolerance
    where terms cancel (rotary's q * cos + rotate_half(q) * sin).
    """
    lines = [f"def reference({', '.join(p.name for p in region.inputs)}):"]
    for bsym in region.bsyms:
        if _kept_in_f32(bsym):
            lines.append(f"    {bsym.output.name} = {value_source(bsym.args[0])}  # held in float32 as in the fusion")
            continue
        expr = TORCH_SOURCE[bsym.sym]([value_source(a) for a in bsym.args])
        lines.append(f"    {bsym.output.name} = {expr}" if isinstance(bsym.output, Proxy) else f"    {expr}")
    outputs = [f"{p.name}.to({p.dtype})" if p.dtype in LOW_PRECISION else p.name for p in region.outputs]
    lines.append(f"    return [{', '.join(outputs)}]")
    return "\n".join(lines) + "\n"


def _kept_in_f32(bsym: Any) -> bool:
    """A conversion of a float32 tensor to bf16/fp16, which the fusion does not round."""
    if bsym.sym is not Prim.CONVERT_ELEMENT_TYPE or not isinstance(bsym.args[0], TensorProxy):
        return False
    return bsym.args[0].dtype is torch.float32 and bsym.args[1] in LOW_PRECISION


# ---------------------------------------------------------------------------------------------
# Inputs


def index_bounds(region: Region) -> dict[str, int]:
    """For integer inputs used as indices, the exclusive upper bound of valid values."""
    bounds: dict[str, int] = {}
    for b in region.bsyms:
        if b.sym is Prim.INDEX_SELECT:
            source, dim, index = b.args
        elif b.sym is Prim.TAKE_ALONG_DIM:
            source, index, dim = b.args
        else:
            continue
        size = source.shape[dim] if source.shape else 1
        bounds[index.name] = size.value if isinstance(size, NumberProxy) else size
    return bounds


def input_source(
    name: str, shape: Sequence[int], stride: Sequence[int], dtype: torch.dtype, device: Any, high: int | None
) -> str:
    """Source of an expression building a random tensor with this exact layout: its storage is
    filled, then viewed (a layout with stride-0 or overlapping dims cannot be written in place)."""
    storage = 0 if 0 in shape else 1 + sum((n - 1) * s for n, s in zip(shape, stride))
    dense = f"torch.empty({storage}, dtype={dtype}, device={str(device)!r})"
    if dtype.is_floating_point:
        filled = f"{dense}.normal_()"
    elif dtype is torch.bool:
        filled = f"{dense}.random_(0, 2)"
    else:
        filled = f"{dense}.random_(0, {high})" if high is not None else f"{dense}.random_(1, 8)"
    return f"{filled}.as_strided({tuple(shape)}, {tuple(stride)})"


def make_inputs(region: Region, records: Sequence[Any], *, seed: int = 0) -> list[Any]:
    """Random arguments with the recorded layouts (scalars keep their recorded values)."""
    torch.manual_seed(seed)
    bounds = index_bounds(region)
    scope: dict[str, Any] = {"torch": torch}
    values = []
    for r in records:
        if r.shape is None:
            values.append(r.value)
        else:
            values.append(eval(input_source(r.name, r.shape, r.stride, r.dtype, r.device, bounds.get(r.name)), scope))
    return values


def tolerance(dtype: torch.dtype) -> tuple[float, float]:
    """(rtol, atol) for comparing nvFuser with eager: arithmetic order and intrinsics differ."""
    return {torch.bfloat16: (2e-2, 2e-2), torch.float16: (1e-2, 1e-2), torch.float64: (1e-7, 1e-7)}.get(
        dtype, (1e-4, 1e-4)
    )


# ---------------------------------------------------------------------------------------------
# The script


def _summary_source() -> str:
    """`region_fallback.error_summary` and what it reads, as source a repro script holds: where an
    nvFuser error ends, after its C++ stack, the script says in one line what failed."""
    constants = "\n".join(
        f"{name} = re.compile({getattr(region_fallback, name).pattern!r})"
        for name in ("_EXPECTED", "_ASSERTED_AT", "_RAISED_AT")
    )
    body = inspect.getsource(region_fallback.error_summary)
    return f"{constants}\nSUMMARY_CHARS = {region_fallback.SUMMARY_CHARS}\n\n\n{body}"


def repro_script(
    region: Region,
    records: Sequence[Any],
    descriptors: Sequence[TensorDesc | ScalarDesc],
    script_name: str = "repro.py",
) -> str:
    """A standalone script (torch + nvfuser_direct only) that defines, checks and times the fusion."""
    definition, fn_name, _, taken = fusion_source(region, descriptors)
    bounds = index_bounds(region)
    builders = [
        repr(r.value)
        if r.shape is None
        else input_source(r.name, r.shape, r.stride, r.dtype, r.device, bounds.get(r.name))
        for r in records
    ]
    written = written_inputs(region)
    copied = copied_write_backs(region, descriptors)
    out_dtypes = [p.dtype for p in region.outputs] + [region.inputs[i].dtype for i in written]
    tolerances = [tolerance(d) for d in out_dtypes]
    ops = "\n".join(f"    {str(b).splitlines()[0]}" for b in region.bsyms).replace('"', "'")
    return f'''"""Repro for {region.name} (written by fusebench's compiler.examine.repro).

Runs with only torch and nvfuser_direct installed: python {script_name}
The fusion's prims, as they appear in the trace:
{ops}
"""

import argparse
import json
import os
import re
import statistics
import sys
import traceback

import torch
from nvfuser_direct import DataType, FusionDefinition, PythonProfiler

{definition}
{_HELPERS}

{_summary_source()}

{reference_source(region)}

def make_inputs():
    torch.manual_seed(0)
    return [
{"".join(f"        {b},{chr(10)}" for b in builders)}    ]


WRITTEN_INPUTS = {written}
DEFINITION_INPUTS = {taken}  # the inputs the definition takes (a number it does not read is left out)
COPIED = {copied}  # the fusion returns the written values (the caller copies them), or writes them itself
TOLERANCES = {tolerances}


def median_ms(fn, repeats=30):
    flush = torch.empty(256 * 1024 * 1024, dtype=torch.int8, device="cuda")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(repeats):
        flush.zero_()
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def execute(fd, inputs):
    return fd.execute([inputs[i] for i in DEFINITION_INPUTS])


def profile(fd, inputs, path, mismatch):
    """Writes each kernel's segment, scheduler, time and bandwidth, the scheduled IR, and how the
    outputs disagreed with PyTorch (None where they agreed), as JSON."""
    with PythonProfiler() as prof:
        execute(fd, inputs)
    kernels = [
        dict(segment=int(k.segment_id), scheduler=str(k.scheduler), time_ms=float(k.time_ms),
             bandwidth_gbs=float(k.effective_bandwidth_gbs), name=str(k.name),
             launch=f"grid {{k.grid_str}} block {{k.block_str}} regs {{k.registers}}")
        for k in prof.profile.kernel_profiles
    ]
    ir = fd.fec.get_most_recent_scheduled_ir() or ""
    with open(path, "w") as f:
        json.dump(dict(kernels=kernels, scheduled_ir=ir, mismatch=mismatch), f)


def main():
    parser = argparse.ArgumentParser(description="Checks and times {region.name}.")
    parser.add_argument("--profile-json", help="also write nvFuser's per-kernel profile to this JSON file")
    args = parser.parse_args()
    inputs = make_inputs()
    expected_inputs = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
    expected = reference(*expected_inputs) + [expected_inputs[i] for i in WRITTEN_INPUTS]
    try:
        with FusionDefinition() as fd:
            {fn_name}(fd)
        outputs = list(execute(fd, inputs))
    except Exception as error:  # its C++ stack, then what failed in one line
        traceback.print_exc()
        sys.exit(f"{region.name}: nvFuser failed: {{error_summary(error)}}")
    if COPIED:
        for i, value in zip(WRITTEN_INPUTS, outputs[len(outputs) - len(WRITTEN_INPUTS):]):
            inputs[i].copy_(value)
        outputs = outputs[: len(outputs) - len(WRITTEN_INPUTS)]
    outputs = outputs + [inputs[i] for i in WRITTEN_INPUTS]
    mismatches = []
    for k, (out, ref, (rtol, atol)) in enumerate(zip(outputs, expected, TOLERANCES)):
        try:
            torch.testing.assert_close(out, ref, rtol=rtol, atol=atol, equal_nan=True)
        except AssertionError as error:
            lines = [line.strip() for line in str(error).splitlines() if line.strip()]
            mismatches.append(f"output {{k}}: " + " ".join(lines))
    if mismatches and not args.profile_json:
        raise AssertionError("\\n".join(mismatches))
    print(f"{region.name}: " + ("; ".join(mismatches) if mismatches else f"{{len(outputs)}} outputs match PyTorch"))
    fresh = make_inputs()
    execute(fd, fresh)
    print(f"{region.name}: {{median_ms(lambda: execute(fd, fresh)):.4f}} ms (median, CUDA events, L2 flushed)")
    if args.profile_json:  # profiled even where the outputs disagree: the profile says so
        profile(fd, fresh, args.profile_json, "; ".join(mismatches) or None)


if __name__ == "__main__":
    main()
'''


# ---------------------------------------------------------------------------------------------
# Segmentation: what a fusion's structure predicts


def segmentation_hint(region: Region) -> str | None:
    """Why nvFuser likely needs several kernels for `region`, read off its prims (None: no reason seen)."""
    reductions = [b for b in region.bsyms if b.sym in REDUCTIONS]
    shapes = {tuple(p.shape) for p in region.outputs if isinstance(p, TensorProxy)}
    reasons = []
    if reductions and len(shapes) > 1:
        reasons.append(
            f"{len(reductions)} reduction(s) ({', '.join(b.output.name for b in reductions)}) next to outputs of "
            "other shapes: a reduction and a pointwise op over a different shape need separate schedules"
        )
    elif len(shapes) > 1:
        reasons.append(f"outputs of {len(shapes)} different shapes {sorted(map(str, shapes))}")
    if any(b.sym in (Prim.MATMUL, Prim.LINEAR) for b in region.bsyms):
        reasons.append("a matmul gets its own kernel")
    broadcast = _written_from_a_broadcast(region)
    if broadcast is not None:
        reasons.append(
            f"it writes into {broadcast} a value computed from a broadcast made inside the fusion: nvFuser "
            "writes it to a temporary and a second kernel copies it in"
        )
    parts = _unjoined_parts(region)
    if len(parts) > 1:
        shown = " | ".join(", ".join(part) for part in parts)
        reasons.append(
            f"its results fall into {len(parts)} parts that share no input or value ({shown}): nvFuser runs each "
            "part as a kernel of its own (one fusion still saves a launch from the host)"
        )
    return "; ".join(reasons) or None


def _unjoined_parts(region: Region) -> list[list[str]]:
    """The names of `region`'s results (outputs and written inputs), grouped by the parts of its
    dataflow that no tensor joins (numbers shared by two parts do not join them)."""
    parent: dict[str, str] = {}

    def root(name: str) -> str:
        while parent.setdefault(name, name) != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    for b in region.bsyms:
        names = [p.name for p in (*b.inputs, *b.outputs) if isinstance(p, TensorProxy)]
        for name in names[1:]:
            parent[root(name)] = root(names[0])
    results = [p.name for p in region.outputs if isinstance(p, TensorProxy)]
    results += [b.args[1].name for b in region.bsyms if b.sym is Prim.COPY_TO and b.args[1].name not in results]
    parts: dict[str, list[str]] = {}
    for name in results:
        parts.setdefault(root(name), []).append(name)
    return list(parts.values())


def _written_from_a_broadcast(region: Region) -> str | None:
    """The name of an input `region` writes back a value computed from one of its broadcasts, or None."""
    written = (
        b.args[1].name
        for b in region.bsyms
        if b.sym is Prim.COPY_TO
        and isinstance(b.args[0], TensorProxy)
        and computed_from(region, b.args[0], {Prim.BROADCAST_IN_DIM})
    )
    return next(written, None)


def ops_by_scheduler(region: Region, schedulers: Sequence[str]) -> dict[int, list[str]]:
    """Inferred placement of the region's prims in nvFuser's segments (exact for one kernel).

    For several kernels, from the schedulers' names: a reduction whose result is broadcast back
    over its own input (a softmax's max, a norm's mean), and every reduction over that input and
    those dims, goes to the first persistent segment; the other reductions (a cross entropy's
    mean over rows, a bias gradient) to the first `reduction` segment, either kind standing in for
    the other. Any other prim goes to the latest segment among those that computed its inputs,
    else (it reads only region inputs) to the earliest among its readers', else to the first
    segment of neither kind.
    """
    bsyms = region.bsyms
    lines = [str(b).splitlines()[0].split("  #")[0] for b in bsyms]
    if len(schedulers) <= 1:
        return {0: lines}
    kinds = [s.lower() for s in schedulers]
    persistent = next((i for i, k in enumerate(kinds) if "persistent" in k), None)
    reduction = next((i for i, k in enumerate(kinds) if "reduction" in k and "persistent" not in k), None)
    other = next((i for i, k in enumerate(kinds) if i not in (persistent, reduction)), 0)
    producer = {id(p): i for i, b in enumerate(bsyms) for p in b.outputs}
    readers: list[list[int]] = [[] for _ in bsyms]
    for j, b in enumerate(bsyms):
        for i in {producer[id(p)] for p in b.inputs if id(p) in producer}:
            readers[i].append(j)

    def over(b: Any) -> tuple:
        dims = b.args[1]
        return tuple(b.args[0].shape), tuple(dims) if isinstance(dims, (list, tuple)) else (dims,)

    normalizing = {
        over(b)
        for i, b in enumerate(bsyms)
        if b.sym in REDUCTIONS
        and any(
            bsyms[j].sym is Prim.BROADCAST_IN_DIM and tuple(bsyms[j].output.shape) == tuple(b.args[0].shape)
            for j in readers[i]
        )
    }
    segment: list[int | None] = []
    for b in bsyms:
        if b.sym in REDUCTIONS:
            first, second = (persistent, reduction) if over(b) in normalizing else (reduction, persistent)
            segment.append(first if first is not None else second if second is not None else other)
        else:
            made = [segment[producer[id(p)]] for p in b.inputs if id(p) in producer]
            segment.append(max((s for s in made if s is not None), default=None))
    for i in reversed(range(len(bsyms))):
        if segment[i] is None:
            segment[i] = min((segment[j] for j in readers[i] if segment[j] is not None), default=other)
    placed: dict[int, list[str]] = {}
    for seg, line in zip(segment, lines):
        placed.setdefault(seg, []).append(line)
    return placed
