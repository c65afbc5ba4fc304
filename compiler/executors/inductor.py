"""The Inductor executor: regions of prims compiled by Inductor, torch.compile's backend.

As lightning-thunder's torch.compile executor does, each region's prims become one Python function
(`codegen` with the torch executor: the region's reference implementation) that Inductor compiles
on the region's first call: on CPU C++/OpenMP loops instead of one ATen call per prim, on CUDA
Triton kernels. A region with symbolic sizes or scalar inputs (automatic dynamic, or
`cache="symbolic"`) is `torch.compile(fn, backend="inductor", fullgraph=True, dynamic=True)`: one
compilation serves every size, as one FusionDefinition does for nvFuser; except a CPU region whose
numbers only meet floating-point tensors in arithmetic (an optimizer's learning rate), compiled
statically with its numbers as 0-d tensors. A static region (the
common case) is compiled per input layout without Dynamo: the cache entry's prologue already
guards sizes, dtypes and devices, so Dynamo's guards would only be checked twice per call
(`Compilations`); one that writes no input goes straight to Inductor's graph compiler and is
called without AOTAutograd's runtime wrapper (`GraphCall`), one that writes inputs through
`compile_fx`, the entry point torch.compile calls.

Compiled functions are shared by structure, process-wide: the region's source with its proxies
renamed in order (`Canonical`), the constants it binds, and each input's dtype, device and static
shape are the key, kept in nvFuser's bounded table of shared definitions under a key of their
own (`compiler.clear_fusion_cache()` drops both), so the same Adam update of same-shape
parameters, or the same fusion in a function jitted again, is compiled by Inductor once.

Write-backs (`copy_to` into an input the caller observes) stay inside the region: the generated
function writes the buffer with `copy_`, and Inductor (through AOTAutograd's functionalization)
keeps eager's semantics for mutated inputs. As for nvFuser, an output that lands in the memory of
a buffer the trace writes (a view Inductor returns of an input) is cloned, so a write-back never
changes a value already computed. So is an output made by an op that allocates in eager (not a view
of an input) and that Inductor returns in an input's memory, having simplified it to that input
(`x + 0 * y` is `x`): eager's result is a tensor of its own, which a write into the input must not
change. Which outputs alias is fixed by a static compilation, so that is checked once per compiled
function (on every call of a dynamic one).

Left to the others: matmul and linear (the BLAS, unless `FusionOptions(matmul=True)`), attention
(sdpa), random numbers (drawn from torch's generator as eager draws them), scatters and partial
updates (torch writes them in one kernel; `update_in_place` writes caches in their own memory),
sorts, and complex or float8 dtypes. If Inductor fails on a region, the region falls back to
running its prims with torch, with one warning (`fallback=False` raises instead;
`executors/region_fallback.py`, shared with the nvFuser executor). How a region is compiled and
shared: `compiler/executors/inductor_compile.py`.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
from collections.abc import Callable
from typing import Any

import torch

from compiler.core.errors import check
from compiler.core.executor import FusionExecutor, FusionOptions, Reason, Region
from compiler.core.gather import picker
from compiler.core.ir import BoundSymbol, TensorProxy, Trace
from compiler.core.tensor_checks import TensorChecks
from compiler.executors.inductor_compile import (
    Canonical,
    InductorStats,
    shared_compilations,
)
from compiler.executors.nvfuser.define.aliasing import shares_memory
from compiler.executors.nvfuser.executor import ExecutorUnavailableError, InputRecord
from compiler.executors.one_op_regions import OneOpRegion, one_op_call
from compiler.executors.region_check import checkable, checked_call
from compiler.executors.region_fallback import FusionFallbackWarning, RegionFallback, fallback_default
from compiler.prims import ELEMENTWISE, REDUCTIONS, SHAPE_OPS, Prim, views_of

# Prims a region compiled by Inductor takes: elementwise math and casts, reductions, views and
# shape ops, gathers, scans, constant factories, and write-backs into inputs.
CLAIMED: frozenset[Prim] = (
    ELEMENTWISE
    | REDUCTIONS
    | SHAPE_OPS
    | {Prim.INDEX_SELECT, Prim.TAKE_ALONG_DIM, Prim.CUMSUM, Prim.CUMPROD, Prim.FULL, Prim.IOTA, Prim.COPY_TO}
)
# Prims deliberately left to another executor, and why (the fusion pass reports these words).
LEFT_TO_OTHERS: dict[Prim, str] = {
    Prim.MATMUL: "matmul goes to torch (the BLAS) unless FusionOptions(matmul=True)",
    Prim.LINEAR: "linear goes to torch (the BLAS) unless FusionOptions(matmul=True)",
    Prim.SDPA: "attention runs in the sdpa executor or torch (fused attention kernels)",
    Prim.SDPA_FORWARD: "attention runs in the sdpa executor or torch (fused attention kernels)",
    Prim.SDPA_BACKWARD: "attention's backward runs in the sdpa executor or torch (fused attention kernels)",
    Prim.DROPOUT_NOISE: "random numbers come from torch's generator (as eager draws them); runs in torch",
    Prim.RANDOM_VALUES: "random numbers come from torch's generator (as eager draws them); runs in torch",
    Prim.SLICE_UPDATE: "a partial update: torch writes it, in the cache's own memory where it can (update_in_place)",
    Prim.INDEX_COPY: "a scatter into a copy of the whole tensor; torch does it in one kernel",
    Prim.INDEX_ADD: "an accumulating scatter into a copy of the whole tensor; runs in torch",
    Prim.SCATTER: "a scatter into a copy of the whole tensor (repeated positions: torch's rule); runs in torch",
    Prim.SCATTER_REDUCE: "an accumulating scatter other than a sum into a copy of the whole tensor; runs in torch",
    Prim.ARGSORT: "a sort: Inductor calls torch's own; runs in torch (the values' gather can fuse)",
    Prim.TOPK: "a selection: Inductor calls torch's own; runs in torch (the values' gather can fuse)",
    Prim.EMPTY: "uninitialised memory needs no kernel; torch allocates it",
    Prim.STOP_GRADIENT: "a returned detach() is a view torch makes without a kernel",
    Prim.UPDATED_WITHOUT_GRAD: "a returned one is its value, no kernel (others are gone before fusion)",
    Prim.OVERWRITTEN: "a returned one is its value, no kernel (others are gone before fusion)",
    Prim.COPY_: "in-place writes are removed by functionalization before fusion",
    Prim.CONVOLUTION: "a convolution runs in torch (its library kernel: cuDNN on CUDA)",
    Prim.CONVOLUTION_BACKWARD: "a convolution's backward runs in torch (its library kernel: cuDNN on CUDA)",
    Prim.CONVOLUTION_TRANSPOSE: "a transposed convolution runs in torch (its library kernel: cuDNN on CUDA)",
    Prim.GROUPED_MM: "a grouped GEMM runs in torch (torch._grouped_mm's kernel)",
    Prim.DEVICE_PUT: "a copy between devices runs in torch (a compiled region runs on one device)",
}
_MATMULS = frozenset({Prim.MATMUL, Prim.LINEAR})
DTYPES = frozenset(
    {torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16, torch.bfloat16,
     torch.float32, torch.float64}
)  # fmt: skip


class InductorFallbackWarning(FusionFallbackWarning):
    """Inductor failed on a region; that region now runs its prims with torch."""


@functools.cache
def _has_cxx_compiler() -> bool:
    return any(name and shutil.which(name) for name in (os.environ.get("CXX", ""), "g++", "c++", "clang++"))


@functools.cache
def _has_triton() -> bool:
    return importlib.util.find_spec("triton") is not None


def device_unavailable_reason(device: torch.device) -> str | None:
    """Why Inductor cannot compile kernels for `device` here, or None when it can."""
    if device.type == "cpu":
        return None if _has_cxx_compiler() else "Inductor on CPU needs a C++ compiler (no $CXX, g++, c++ or clang++)"
    if device.type == "cuda":
        return None if _has_triton() else "Inductor on CUDA needs Triton, which is not installed"
    return f"Inductor compiles for CPU and CUDA only, not {device.type}"


def unavailable_reason() -> str | None:
    """Why the inductor executor cannot run on this machine (neither a C++ compiler nor CUDA with
    Triton), or None."""
    cpu = device_unavailable_reason(torch.device("cpu"))
    if cpu is None or (torch.cuda.is_available() and _has_triton()):
        return None
    return cpu


# ---------------------------------------------------------------------------------------------
# A region's callable


def allocated_outputs(region: Region) -> list[int]:
    """The positions of the region's outputs that eager allocates: those that are not views (through
    `VIEWS` prims) of one of its inputs."""
    viewed = views_of(region.bsyms)
    inputs = {p.name for p in region.inputs}
    allocated = []
    for k, output in enumerate(region.outputs):
        base = output
        while base.name in viewed:
            base = viewed[base.name]
        if isinstance(output, TensorProxy) and base.name not in inputs:
            allocated.append(k)
    return allocated


class InductorFusion:
    """The callable behind an `inductorN` bound symbol: runs its region's compiled function for
    the call's layout, records its last inputs (`compiler.examine.fusions`)."""

    LAYOUT_CHANGES = 2  # layouts the one C++ check learns at most (the first included)

    def __init__(self, region: Region, executor: InductorExecutor) -> None:
        self.region = region
        self.name = region.name
        self.executor = executor
        self.canonical = Canonical(region)
        self.compilations = shared_compilations(region, self.canonical, executor.stats)
        self._compiled: Callable = self.compilations.fn
        self._layout_changes = 0
        inputs = region.inputs
        self._tensor_idx = [i for i, p in enumerate(inputs) if isinstance(p, TensorProxy)]
        self._tensors = picker(self._tensor_idx)
        self._scalar_idx = [i for i, p in enumerate(inputs) if not isinstance(p, TensorProxy)]
        self._written = [i for i, p in enumerate(inputs) if p.name in region.written]
        self._own_memory = allocated_outputs(region)
        self._checked: set[int] = set()  # ids of the static compiled functions whose outputs had memory of their own
        # NOTE: one C++ check says whether this call's tensors are laid out as the last one's; only
        # a call that is not looks its compiled function up by strides (read per tensor) and is recorded.
        self._same_layout = TensorChecks(exact_strides=[True] * len(self._tensor_idx))
        self.fallback = RegionFallback(region, "Inductor", InductorFallbackWarning)
        # NOTE: each compiled function's first call is checked against the region's prims run by
        # torch (region_check.py): a miscompiled region falls back instead of returning wrong values
        self._verify = checkable(region)
        self._verified: set[int] = set()  # ids of the compiled functions whose first call was checked
        self.last_inputs: list[InputRecord] = []
        self.calls = 0

    def __call__(self, *args: Any) -> Any:
        self.calls += 1
        if self.fallback.error is not None:
            return self.fallback.run(args)
        try:
            tensors = self._tensors(args)
            if self._same_layout.check(*tensors):
                if self._scalar_idx:
                    self._record_scalars(args)
                compiled = self._compiled
                outputs = compiled(*args)
            else:
                compiled = self._new_layout(args, tensors)
                if self._verify and id(compiled) not in self._verified:
                    outputs = checked_call(compiled, self.fallback.function(), args, self._written)
                    self._verified.add(id(compiled))
                else:
                    outputs = compiled(*args)
        except Exception as error:
            if not self.executor.fallback:
                raise
            return self.fallback.fall_back(error, args, self.executor.stats)
        if self._written and outputs:
            buffers = [args[i] for i in self._written]
            outputs = tuple(o.clone() if shares_memory(o, buffers) else o for o in outputs)
        if self._own_memory and id(compiled) not in self._checked:
            outputs = self._apart_from_inputs(outputs, args, compiled)
        return outputs

    def _apart_from_inputs(self, outputs: Any, args: tuple, compiled: Callable) -> Any:
        """`outputs` with each one `allocated_outputs` names that lies in an input's memory cloned;
        a static compiled function none of whose did is not checked again."""
        inputs = [a for a in args if isinstance(a, torch.Tensor)]
        moved = [k for k in self._own_memory if shares_memory(outputs[k], inputs)]
        if not moved and not self.compilations.dynamic:
            self._checked.add(id(compiled))
        if not moved:
            return outputs
        return tuple(o.clone() if k in moved else o for k, o in enumerate(outputs))

    def _new_layout(self, args: tuple, tensors: tuple) -> Callable:
        """Records a call laid out other than the last (or the first), and finds (or compiles) its
        function; learns the layout for the one C++ check, up to `LAYOUT_CHANGES` times: a region
        whose sizes change every call (symbolic sizes) keeps this path."""
        self._record(args)
        self._compiled = self.compilations.for_call(args, self.executor.stats)
        if self._layout_changes < self.LAYOUT_CHANGES:
            self._layout_changes += 1
            self._same_layout = TensorChecks(exact_strides=[True] * len(tensors))
            self._same_layout.learn(*tensors)
        return self._compiled

    def _record(self, args: tuple) -> None:
        records = []
        for p, a in zip(self.region.inputs, args):
            if isinstance(a, torch.Tensor):
                records.append(InputRecord(p.name, tuple(a.shape), tuple(a.stride()), a.dtype, a.device))
            else:
                records.append(InputRecord(p.name, None, None, type(a), None, a))
        self.last_inputs = records

    def _record_scalars(self, args: tuple) -> None:
        for i in self._scalar_idx:
            if self.last_inputs[i].value is not args[i]:
                self.last_inputs[i] = InputRecord(self.region.inputs[i].name, None, None, type(args[i]), None, args[i])

    @property
    def fallback_error(self) -> BaseException | None:
        """The error that made this region run with torch from then on, or None."""
        return self.fallback.error

    def __repr__(self) -> str:
        return f"<{self.name}: {len(self.region.bsyms)} prims, compiled by Inductor>"


# ---------------------------------------------------------------------------------------------
# The executor


class InductorExecutor(FusionExecutor):
    """Claims the prims Inductor compiles well and turns regions of them into `InductorFusion`s."""

    name = "inductor"
    region_prefix = "inductor"
    batch_prefix = "inductorBatch"
    batches = True
    batch_flat = False  # NOTE: one compiled call for all members; copies in and out cost more on CPU

    def __init__(self, options: FusionOptions | None = None, fallback: bool | None = None) -> None:
        self.options = options or FusionOptions()
        self.fallback = fallback_default() if fallback is None else bool(fallback)
        self.stats = InductorStats()
        reason = unavailable_reason()
        check(
            reason is None,
            lambda: f"the inductor executor is unavailable on this machine: {reason}. Use executors=['torch'].",
            ExecutorUnavailableError,
        )

    def claim(self, bsym: BoundSymbol) -> tuple[Reason, str] | None:
        """None if Inductor should run `bsym` inside a region, else (reason, detail)."""
        prim = bsym.sym
        if prim in _MATMULS and self.options.matmul:
            pass
        elif prim is Prim.SCATTER_REDUCE and bsym.args[4] == "sum":
            pass  # NOTE: a scatter-add (a gather's gradient) is one more loop of the region's kernel
        elif prim in LEFT_TO_OTHERS:
            return Reason.LEFT_TO_TORCH, LEFT_TO_OTHERS[prim]
        elif prim not in CLAIMED:
            return Reason.LEFT_TO_TORCH, f"prims.{prim.value} is not compiled by the inductor executor"
        for p in (*bsym.inputs, *bsym.outputs):
            if isinstance(p, TensorProxy):
                if p.dtype not in DTYPES:
                    return Reason.LEFT_TO_TORCH, f"{p.name} is {p.dtype}: not compiled by the inductor executor"
                unavailable = device_unavailable_reason(p.device)
                if unavailable is not None:
                    return Reason.LEFT_TO_TORCH, f"{p.name} is on {p.device}: {unavailable}"
        return None

    def region_impl(self, region: Region) -> Callable:
        """The callable running `region`: on CPU, a region that is one torch op's decomposition
        runs as that op (`one_op_regions.py`); any other is compiled by Inductor."""
        if all(p.device.type == "cpu" for p in (*region.inputs, *region.outputs) if isinstance(p, TensorProxy)):
            call = one_op_call(region)
            if call is not None:
                return OneOpRegion(region, call)
        return InductorFusion(region, self)


def inductor_fusions(trace: Trace) -> list[InductorFusion | OneOpRegion]:
    """The callables of a fused trace's regions this executor made, in order."""
    return [impl for b in trace.bsyms if isinstance(impl := getattr(b.sym, "impl", None), InductorFusion | OneOpRegion)]
