# ruff: noqa: E501 - the probe reads best with one fusion definition per line
"""Checks, on a GPU, every nvfuser_direct API fact the compiler relies on: `python -m scripts.nvfuser_probe`.

Prints one OK / FAIL line per fact (with the error and, for ops, the binding's signature), so a
first run on a new nvFuser version shows exactly which assumption broke. Takes well under a minute.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from typing import Any

import torch


def ops_used() -> list[str]:
    """Every `fd.ops.<name>` the translator can emit (read off its source and op tables)."""
    import inspect
    import re

    from compiler.executors.nvfuser.define import translations as translate

    names = set(re.findall(r"fd\.ops\.(\w+)", inspect.getsource(translate)))
    names |= set(translate._UNARY_OPS.values()) | set(translate._BINARY_OPS.values())
    names |= set(re.findall(r'(?:bool_op=|_reduction\()"(\w+)"', inspect.getsource(translate)))
    return sorted(names)


OPS_CURIOUS = ("argmax", "sdpfa_fwd", "var_mean", "scatter", "index_put_accumulate")
SIGNATURES = ("slice", "broadcast_in_dim", "reshape", "permute", "squeeze", "cat", "index_select")
SIGNATURES += ("take_along_axis", "full", "iota", "sum", "cast")

failures: list[str] = []


def fact(name: str, body: Callable[[], Any]) -> None:
    """Runs one check and prints OK or FAIL with the reason."""
    try:
        detail = body()
        print(f"OK    {name}{': ' + str(detail) if detail not in (None, True) else ''}")
    except Exception as error:
        failures.append(name)
        last = traceback.extract_tb(error.__traceback__)[-1]
        message = str(error).strip().splitlines()[0] if str(error).strip() else ""
        print(f"FAIL  {name}: {type(error).__name__}: {message} (probe line {last.lineno})")


def run(define: Callable[[Any], None], inputs: list[Any], **execute: Any) -> tuple[list[Any], Any]:
    """Defines a fusion with `define(fd)`, executes it; returns (outputs, the FusionDefinition)."""
    from nvfuser_direct import FusionDefinition

    with FusionDefinition() as fd:
        define(fd)
    return fd.execute(inputs, **execute), fd


def signature(ops: Any, op: str) -> str:
    """The first docstring line of a binding (nanobind puts the signature there)."""
    doc = (getattr(ops, op, None).__doc__ or "").strip()
    return doc.splitlines()[0][:160] if doc else "(no docstring)"


def all_present(ops: Any) -> str:
    used = ops_used()
    missing = [op for op in used if not hasattr(ops, op)]
    if missing:
        raise AttributeError(f"missing {missing}")
    return f"{len(used)} ops: {' '.join(used)}"


def main() -> int:
    import nvfuser_direct as nvf
    from nvfuser_direct import DataType

    print(f"torch {torch.__version__} | nvfuser_direct {nvf.version()} | {torch.cuda.get_device_name(0)}")
    ops = nvf.FusionDefinition().ops
    fact("fd.ops has every op the translator emits", lambda: all_present(ops))
    print("      optional ops present:", {op: hasattr(ops, op) for op in OPS_CURIOUS})
    for op in SIGNATURES:
        print(f"      sig {op}: {signature(ops, op)}")
    for member in ("Double", "Float", "Half", "BFloat16", "Int", "Int32", "Bool", "Null"):
        fact(f"DataType.{member}", lambda m=member: getattr(DataType, m) is not None)
    fact("compute_tensor_descriptor exists", lambda: nvf.compute_tensor_descriptor([2, 3], [3, 1]))
    fact("PythonProfiler exists", lambda: nvf.PythonProfiler)

    x = torch.randn(8, 16, 64, device="cuda")

    def typed_constants(fd: Any) -> None:
        t = fd.define_tensor(
            shape=[-1, -1, -1], contiguity=[True, True, True], dtype=DataType.Float, stride_order=[2, 1, 0]
        )
        s = fd.define_scalar(None, dtype=DataType.Double)
        fd.add_output(
            fd.ops.mul(fd.ops.add(t, fd.define_scalar(2.0, dtype=DataType.Float)), fd.ops.cast(s, dtype=DataType.Float))
        )

    fact("define_scalar(2.0, dtype=Float) + symbolic Double cast to Float",
         lambda: torch.testing.assert_close(run(typed_constants, [x, 0.5])[0][0], (x + 2) * 0.5))  # fmt: skip

    def split(fd: Any) -> None:
        a = fd.define_tensor(
            shape=[-1, -1, -1], contiguity=[True, True, True], dtype=DataType.Float, stride_order=[2, 1, 0]
        )
        d0, d1 = fd.define_scalar(None, dtype=DataType.Int), fd.define_scalar(None, dtype=DataType.Int)
        fd.add_output(fd.ops.slice(a, start_indices=[0, 0, d0], end_indices=[8, 16, d1], strides=[1, 1, 1]))

    def symbolic_slices() -> str:
        from nvfuser_direct import FusionDefinition

        with FusionDefinition() as fd:
            split(fd)
        compiled = []
        for d0 in range(1, 6):
            args = [x, d0, d0 + 8]
            compiled.append(hasattr(fd, "fec") and fd.fec.is_compiled(args))
            torch.testing.assert_close(fd.execute(args)[0], x[:, :, d0 : d0 + 8])
        return f"is_compiled before each of 5 sizes: {compiled}"

    fact("slice(start_indices=, end_indices=, strides=) with symbolic bounds; fec.is_compiled", symbolic_slices)

    def alias(fd: Any) -> None:
        a = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float, stride_order=[1, 0])
        b = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float, stride_order=[1, 0])
        fd.add_output(fd.ops.set(fd.ops.add(a, b)), alias_input=a)
        fd.add_output(fd.ops.sub(a, b))

    def in_place() -> str:
        a, b = torch.randn(64, 32, device="cuda"), torch.randn(64, 32, device="cuda")
        a0 = a.clone()
        outputs, _ = run(alias, [a, b])
        torch.testing.assert_close(a, a0 + b)
        torch.testing.assert_close(outputs[0], a0 - b)
        return f"{len(outputs)} returned output(s); the aliased one is not returned"

    fact("add_output(set(v), alias_input=a) writes a in place and reads a's old value", in_place)

    def factories(fd: Any) -> None:
        full = fd.ops.full(shape=[4, 8], fill_value=fd.define_scalar(2.0, dtype=DataType.Float), dtype=DataType.Float)
        iota = fd.ops.iota(
            8, fd.define_scalar(0.0, dtype=DataType.Float), fd.define_scalar(1.0, dtype=DataType.Float), DataType.Float
        )
        fd.add_output(fd.ops.add(full, fd.ops.broadcast_in_dim(iota, shape=[4, 8], broadcast_dims=[1])))

    fact("full(shape=, fill_value=, dtype=), iota(n, start, step, dtype), execute(device=0)",
         lambda: torch.testing.assert_close(run(factories, [], device=0)[0][0], 2 + torch.arange(8.0, device="cuda").expand(4, 8)))  # fmt: skip

    def shapes(fd: Any) -> None:
        a = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float, stride_order=[1, 0])
        row = fd.ops.squeeze(fd.ops.slice(a, start_indices=[0, 0], end_indices=[1, 8], strides=[1, 1]), dims=[0])
        stacked = fd.ops.cat([fd.ops.broadcast_in_dim(row, shape=[1, 8], broadcast_dims=[1])] * 2, dim=0)
        fd.add_output(fd.ops.reshape(fd.ops.permute(stacked, dims=[1, 0]), new_shape=[16]))

    a = torch.randn(4, 8, device="cuda")
    fact("squeeze(slice) + cat of broadcast dims + permute(dims=) + reshape(new_shape=)",
         lambda: torch.testing.assert_close(run(shapes, [a])[0][0], torch.stack([a[0], a[0]]).t().reshape(16)))  # fmt: skip

    def gathers(fd: Any) -> None:
        a = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float, stride_order=[1, 0])
        i = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int, stride_order=[0])
        j = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Int, stride_order=[1, 0])
        fd.add_output(fd.ops.index_select(a, i, dim=0))
        fd.add_output(fd.ops.take_along_axis(a, j, 1))

    i, j = torch.tensor([3, 0, 1], device="cuda"), torch.randint(0, 8, (4, 5), device="cuda")
    fact("index_select(a, i, dim=), take_along_axis(a, j, dim)",
         lambda: [torch.testing.assert_close(g, w) for g, w in zip(run(gathers, [a, i, j])[0], [a[i], torch.gather(a, 1, j)])] and None)  # fmt: skip

    def int_sum(fd: Any) -> None:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Int32, stride_order=[1, 0])
        fd.add_output(fd.ops.sum(t, dims=[1], dtype=DataType.Int32))
        fd.add_output(fd.ops.max(fd.ops.cast(t, dtype=DataType.Float), dims=[0]))

    n = torch.randint(-5, 5, (4, 8), device="cuda", dtype=torch.int32)
    fact("sum(dims=, dtype=Int32) keeps int32; max(dims=)",
         lambda: (run(int_sum, [n])[0][0].dtype, run(int_sum, [n])[0][1].dtype))  # fmt: skip

    def remainder(fd: Any) -> None:
        t = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float, stride_order=[0])
        fd.add_output(fd.ops.remainder(t, fd.define_scalar(-3.0, dtype=DataType.Float)))

    r = torch.linspace(-7, 7, 29, device="cuda")
    fact("remainder follows Python's sign rule (torch.remainder)",
         lambda: torch.testing.assert_close(run(remainder, [r])[0][0], torch.remainder(r, -3.0)))  # fmt: skip

    def profile() -> str:
        _, fd = run(typed_constants, [x, 0.5])
        with nvf.PythonProfiler() as prof:
            fd.execute([x, 0.5])
        p = prof.profile
        k = p.kernel_profiles[0]
        ir = fd.fec.get_most_recent_scheduled_ir()
        return (f"segments={p.segments} kernel_time_ms={p.kernel_time_ms:.4f} bw={p.effective_bandwidth_gbs:.0f} "
                f"kernel0: name={k.name} scheduler={k.scheduler} segment_id={k.segment_id} grid={k.grid_str} "
                f"block={k.block_str} regs={k.registers}; scheduled IR {type(ir).__name__} of {len(ir or '')} chars")  # fmt: skip

    fact("PythonProfiler fields and fec.get_most_recent_scheduled_ir()", profile)

    from compiler.executors.nvfuser.define.translations import tensor_descriptor

    def descriptors() -> None:
        for sizes, strides in [
            ((2, 3, 4), (12, 1, 3)),
            ((2, 2, 2, 2), (8, 4, 0, 2)),
            ((5, 1, 7), (7, 7, 1)),
            ((4, 1, 1), (1, 4, 4)),
        ]:
            theirs = tuple(tuple(v) for v in nvf.compute_tensor_descriptor(list(sizes), list(strides)))
            ours = tensor_descriptor(tuple(1 if s == 1 else -1 for s in sizes), sizes, strides)
            assert ours == theirs, f"{sizes} {strides}: ours {ours} != nvFuser {theirs}"

    fact("our tensor_descriptor == nvfuser_direct.compute_tensor_descriptor", descriptors)

    print(f"\n{len(failures)} failing fact(s){': ' + ', '.join(failures) if failures else ''}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
