"""Helpers for the fusion / nvFuser CPU tests: traces built from prims, and the fake-nvFuser fixture."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from compiler.core.executor import FusionOptions
from compiler.core.ir import BoundSymbol, NumberProxy, TensorProxy, Trace, TraceContext, tracing
from compiler.executors.nvfuser import executor as nvfuser_module
from compiler.executors.nvfuser.define.claims import unsupported
from compiler.executors.nvfuser.diagnose import fake_nvfuser as fake_api
from compiler.executors.nvfuser.executor import NvFuserExecutor
from compiler.executors.nvfuser.run import kernel_db


def prim_trace(fn: Callable, *specs: Any) -> Trace:
    """A trace of `fn` called on proxies; specs are (shape, dtype) for tensors or (int|float, value)."""
    context = TraceContext()
    with tracing(context):
        inputs = []
        for k, spec in enumerate(specs):
            if spec[0] in (int, float):
                inputs.append(NumberProxy(spec[0], spec[1], name=f"s{k}"))
            else:
                shape, dtype = spec
                inputs.append(TensorProxy(shape, dtype, torch.device("cpu"), name=f"a{k}"))
        output = fn(*inputs)
    return Trace(tuple(inputs), list(context.bsyms), output)


def torch_fuser(**options: Any) -> NvFuserExecutor:
    """An nvFuser executor whose regions run with torch (no nvFuser needed)."""
    return NvFuserExecutor(FusionOptions(runner="torch", **options))


def region_ops(trace: Trace) -> list[list[str]]:
    """For each region of a fused trace, the prim names it holds."""
    return [[b.sym.value for b in r.subsymbols] for r in trace.bsyms if getattr(r.sym, "executor", None) == "nvfuser"]


def printed_ops(trace: Trace) -> list[str]:
    """Each line's callee as the trace prints it (`nvFusion0`, `prims.add`, `slice_update_fresh`)."""
    return [str(b).split("(")[0].split(" = ")[-1] for b in trace.bsyms]


def outside(trace: Trace) -> list[str]:
    """The prim names left outside every region."""
    return [b.sym.value for b in trace.bsyms if not isinstance(b, BoundSymbol) or not b.subsymbols]


@pytest.fixture
def fake_nvfuser(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Makes runner="nvfuser" work on CPU against the torch-evaluated fake of nvfuser_direct."""
    fake = fake_api.module()
    monkeypatch.setattr(kernel_db, "_tried", True)  # the on-disk kernel database off: no slot taken
    monkeypatch.setattr(kernel_db, "_slot", None)
    monkeypatch.setattr(nvfuser_module, "unavailable_reason", lambda: None)
    monkeypatch.setattr(nvfuser_module, "nvfuser_direct", lambda: fake)
    monkeypatch.setattr(NvFuserExecutor, "claim", lambda self, bsym: unsupported(bsym, matmul=self.options.matmul))
    return fake
