"""The Inductor executor: regions of prims compiled by Inductor, torch.compile's backend.

As lightning-thunder's torch.compile executor does, each region's prims become one Python function
(`codegen` with the torch executor: the region's reference implementation) that Inductor compiles
on the region's first call: on CPU C++/OpenMP loops instead of one ATen call per prim, on CUDA
Triton kernels. A region with symbolic sizes or scalar inputs (automatic dynamic, or
`cache="symbolic"`) is `torch.compile(fn, backend="inductor", fullgraph=True, dynamic=True)`: one
compilation serves every size, as one FusionDefinition does for nvFuser. A static region (the
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
changes a value already computed.

Left to the others: matmul and linear (the BLAS, unless `FusionOptions(matmul=True)`), attention
(sdpa), random numbers (drawn from torch's generator as eager draws them), scatters and partial
updates (torch writes them in one kernel; `update_in_place` writes caches in their own memory),
sorts, and complex or float8 dtypes. If Inductor fails on a region, the region falls back to
running its prims with torch, with one warning (`fallback=False` raises instead;
`executors/region_fallback.py`, shared with the nvFuser executor).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from compiler.core import dtypes
from compiler.core.errors import check
from compiler.core.executor import FusionExecutor, FusionOptions, Reason, Region
from compiler.core.gather import picker
from compiler.core.ir import BoundSymbol, NumberProxy, Proxy, TensorProxy, Trace, map_proxies
from compiler.core.tensor_checks import TensorChecks
from compiler.executors.codegen import python_source
from compiler.executors.nvfuser.define.aliasing import shares_memory
from compiler.executors.nvfuser.executor import ExecutorUnavailableError, InputRecord
from compiler.executors.nvfuser.run.shared_definitions import DEFINITIONS
from compiler.executors.one_op_regions import OneOpRegion, one_op_call
from compiler.executors.region_fallback import FusionFallbackWarning, RegionFallback, fallback_default
from compiler.executors.torch import TorchExecutor
from compiler.prims import ELEMENTWISE, EXACT_OPERANDS, REDUCTIONS, SHAPE_OPS, Prim, converts_to_integer

_TORCH = TorchExecutor()
# NOTE: the key of Inductor's entries in the shared table (whose other keys are nvFuser modules).
_TABLE_KEY = "inductor"

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
    Prim.SCATTER_REDUCE: "an accumulating scatter into a copy of the whole tensor; runs in torch",
    Prim.ARGSORT: "a sort: Inductor calls torch's own; runs in torch (the values' gather can fuse)",
    Prim.TOPK: "a selection: Inductor calls torch's own; runs in torch (the values' gather can fuse)",
    Prim.EMPTY: "uninitialised memory needs no kernel; torch allocates it",
    Prim.STOP_GRADIENT: "a returned detach() is a view torch makes without a kernel",
    Prim.UPDATED_WITHOUT_GRAD: "a returned one is its value, no kernel (others are gone before fusion)",
    Prim.OVERWRITTEN: "a returned one is its value, no kernel (others are gone before fusion)",
    Prim.COPY_: "in-place writes are removed by functionalization before fusion",
    Prim.CONVOLUTION: "a convolution runs in torch (its library kernel: cuDNN on CUDA)",
    Prim.CONVOLUTION_BACKWARD: "a convolution's backward runs in torch (its library kernel: cuDNN on CUDA)",
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


@dataclass
class InductorStats:
    """Counters of one inductor executor (one per jitted function)."""

    compiled: int = 0  # Inductor compilations its regions caused: per input layout (static), per structure (dynamic)
    reused: int = 0  # regions that found their structure's compilations made (here or by another function)
    fallbacks: int = 0


# ---------------------------------------------------------------------------------------------
# A region as a Python function with canonical names


class Canonical:
    """A region's function with its proxies renamed in order of appearance (`v0`, `v1`, ...):
    `source` and the constants it binds (`scope`) are equal for regions of the same structure."""

    def __init__(self, region: Region) -> None:
        renamed: dict[int, Proxy] = {}

        def rename(p: Proxy) -> Proxy:
            new = renamed.get(id(p))
            if new is None:
                shape = tuple(map_proxies(p.shape, rename)) if isinstance(p, TensorProxy) else ()
                name = f"v{len(renamed)}"  # NOTE: after its symbolic sizes have their names
                if isinstance(p, TensorProxy):
                    new = TensorProxy(shape, p.dtype, p.device, name=name)
                elif isinstance(p, NumberProxy):
                    new = NumberProxy(p.python_type, p.value, name=name)
                else:
                    new = Proxy(name)
                renamed[id(p)] = new
            return new

        inputs = tuple(rename(p) for p in region.inputs)
        bsyms = [
            b.replace(
                args=map_proxies(b.args, rename),
                kwargs=map_proxies(b.kwargs, rename),
                output=map_proxies(b.output, rename),
            )
            for b in region.bsyms
        ]
        trace = Trace(inputs, bsyms, tuple(rename(p) for p in region.outputs), name="region")
        self.source, self.scope = python_source(trace, [_TORCH], release=False)  # Inductor plans its own buffers

    def key(self) -> str:
        """The source, and each constant it binds (implementations by identity, values by repr)."""
        constants = [f"{name}={value!r}" for name, value in sorted(self.scope.items())]
        # NOTE: a function's repr holds its address: the same implementation, the same text.
        return "\n".join([self.source, *constants])

    def function(self, filename: str) -> Callable:
        """The region's function (a fresh code object: Dynamo's cache of it is its own)."""
        scope = dict(self.scope)
        exec(compile(self.source, filename, "exec"), scope)
        return scope["region"]


def is_dynamic(region: Region) -> bool:
    """Whether the region has symbolic sizes or scalar inputs: then one compilation must serve
    every value they take."""
    if any(isinstance(p, NumberProxy) for p in region.inputs):
        return True
    proxies = [*region.inputs, *(p for b in region.bsyms for p in b.outputs)]
    return any(isinstance(s, NumberProxy) for p in proxies if isinstance(p, TensorProxy) for s in p.shape)


SCALAR_ARITHMETIC = frozenset({Prim.ADD, Prim.SUB, Prim.MUL, Prim.DIV})
SCALAR_TENSOR_DTYPES = {float: torch.float64, int: torch.int64}


def scalars_as_tensors(region: Region) -> dict[int, torch.dtype] | None:
    """For a CPU region whose sizes are all constant and whose numbers (an optimizer's learning
    rate, its bias corrections) only meet floating-point tensors in +, -, * and /: each number
    input's position and the dtype of the 0-d tensor it is passed as, so that one static
    compilation serves every value (torch promotes a 0-d tensor as it does a number there). None
    for any other region."""
    numbers = {p.name: i for i, p in enumerate(region.inputs) if isinstance(p, NumberProxy)}
    tensors = [p for p in region.inputs if isinstance(p, TensorProxy)]
    if not numbers or not tensors or any(p.device.type != "cpu" for p in tensors):
        return None
    if any(isinstance(s, NumberProxy) for p in tensors for s in p.shape):
        return None
    for bsym in region.bsyms:
        if any(isinstance(s, NumberProxy) for p in bsym.outputs if isinstance(p, TensorProxy) for s in p.shape):
            return None
        if not any(isinstance(a, Proxy) and a.name in numbers for a in bsym.args):
            continue
        others = [a for a in bsym.args if isinstance(a, TensorProxy)]
        if bsym.sym not in SCALAR_ARITHMETIC or not others or not all(a.dtype.is_floating_point for a in others):
            return None
    dtypes_by_index = {}
    for i in numbers.values():
        dtype = SCALAR_TENSOR_DTYPES.get(region.inputs[i].python_type)
        if dtype is None:
            return None
        dtypes_by_index[i] = dtype
    return dtypes_by_index


def needs_exact_casts(region: Region) -> bool:
    """Whether `region` holds bf16/fp16 values and has a prim of `prims.EXACT_OPERANDS` or a
    conversion to an integer or bool: then Inductor keeps the roundings to those dtypes that it
    would elide between fused ops (`emulate_precision_casts`), so such a prim sees the values
    eager computes (a max's backward finds its maximum by `x == max(x)`, on the upcast values)."""
    values = [*region.inputs, *(p for b in region.bsyms for p in b.outputs)]
    if not any(isinstance(p, TensorProxy) and dtypes.compute_dtype(p.dtype) != p.dtype for p in values):
        return False
    return any(b.sym in EXACT_OPERANDS or converts_to_integer(b) for b in region.bsyms)


def structure_key(region: Region, canonical: Canonical, dynamic: bool) -> str:
    """The key compiled functions are shared by: the canonical source and constants, and each
    input's dtype, device and (static regions) shape."""
    inputs = []
    for p in region.inputs:
        if isinstance(p, TensorProxy):
            shape = len(p.shape) if dynamic else tuple(p.shape)
            inputs.append(f"{p.dtype} {p.device} {shape}")
        else:
            inputs.append(p.python_type.__name__)
    return f"dynamic={dynamic}\n" + "\n".join(inputs) + "\n" + canonical.key()


class Compilations:
    """Inductor's compiled functions of one region structure, shared by every region of it.

    A static region (constant sizes, no scalar inputs) is compiled once per layout of its inputs:
    its ATen graph (`make_fx` over fake tensors) goes to `compile_fx`, Inductor's entry point
    behind torch.compile, whose code asserts the sizes and strides it was compiled for and runs
    without Dynamo's guards: the cache entry's prologue has checked sizes, dtypes and devices, and
    the region's callable checks the layout in one C++ call, so a call pays no guard twice.
    A dynamic region is `torch.compile(fn, backend="inductor", fullgraph=True, dynamic=True)`:
    Dynamo's symbolic sizes let one compilation serve every size, its guards pick it per call.
    A CPU region dynamic only for numbers that meet floating-point tensors in arithmetic (an
    optimizer step's learning rate) is static instead, taking them as 0-d tensors
    (`scalars_as_tensors`): one compilation serves every value, and no Dynamo guard runs per call.
    """

    def __init__(
        self,
        fn: Callable,
        dynamic: bool,
        writes_inputs: bool,
        exact_casts: bool = False,
        scalars: dict[int, torch.dtype] | None = None,
    ) -> None:
        self.fn = fn
        self.dynamic = dynamic
        self.writes_inputs = writes_inputs
        self.exact_casts = exact_casts
        self.scalars = scalars  # number inputs passed as 0-d tensors (`scalars_as_tensors`)
        self.by_strides: dict[tuple, Callable] = {}
        self.dynamo = None
        if dynamic:
            options = {"emulate_precision_casts": exact_casts}
            self.dynamo = torch.compile(fn, backend="inductor", fullgraph=True, dynamic=True, options=options)

    def for_call(self, args: tuple, stats: InductorStats) -> Callable:
        """The compiled function for arguments laid out as `args` (compiled on first sight)."""
        if self.dynamo is not None:
            return self.dynamo
        key = tuple(a.stride() if isinstance(a, torch.Tensor) else None for a in args)
        compiled = self.by_strides.get(key)
        if compiled is None:
            if self.scalars:
                examples = with_scalar_tensors(args, self.scalars)
                compiled = compile_static(self.fn, examples, self.writes_inputs, self.exact_casts)
                compiled = ScalarsAsTensors(compiled, self.scalars)
            else:
                compiled = compile_static(self.fn, args, self.writes_inputs, self.exact_casts)
            self.by_strides[key] = compiled
            stats.compiled += 1
        return compiled


def with_scalar_tensors(args: tuple, scalars: dict[int, torch.dtype]) -> tuple:
    """`args` with each number input named in `scalars` a 0-d tensor of its dtype."""
    converted = list(args)
    for i, dtype in scalars.items():
        converted[i] = torch.scalar_tensor(args[i], dtype=dtype)
    return tuple(converted)


class ScalarsAsTensors:
    """A static compilation that takes its number inputs as 0-d tensors (`scalars_as_tensors`)."""

    def __init__(self, compiled: Callable, scalars: dict[int, torch.dtype]) -> None:
        self.compiled = compiled
        self.scalars = scalars

    def __call__(self, *args: Any) -> Any:
        return self.compiled(*with_scalar_tensors(args, self.scalars))


def compile_static(fn: Callable, args: tuple, writes_inputs: bool = True, exact_casts: bool = False) -> Callable:
    """`fn` compiled by Inductor for inputs of these sizes, strides, dtypes and devices; with
    `exact_casts`, keeping every rounding to bf16/fp16 the function writes (`needs_exact_casts`).

    A region that writes none of its inputs is one functional ATen graph already: it goes straight
    to Inductor's graph compiler (`compile_fx_inner`), and the region calls the generated code
    (`GraphCall`) without the AOTAutograd runtime wrapper `compile_fx` puts around it, whose Python
    layers cost as much as a small region's kernel on CPU. A region that writes its inputs goes
    through `compile_fx`, whose functionalization keeps eager's semantics for the written buffers.
    """
    from torch._inductor.compile_fx import compile_fx
    from torch.fx.experimental.proxy_tensor import make_fx

    # NOTE: empty tensors of the arguments' layouts: tracing must not write into the caller's buffers
    examples = [
        torch.empty_strided(a.shape, a.stride(), dtype=a.dtype, device=a.device) if isinstance(a, torch.Tensor) else a
        for a in args
    ]
    from torch._inductor import config

    with torch.no_grad(), config.patch(emulate_precision_casts=exact_casts):
        if not writes_inputs and all(isinstance(a, torch.Tensor) for a in args):
            direct = _compile_graph(fn, examples)
            if direct is not None:
                return direct
        graph = make_fx(fn, tracing_mode="fake")(*examples)
        return compile_fx(graph, examples)


class GraphCall:
    """Inductor's generated code for one functional graph, called with the region's arguments."""

    def __init__(self, compiled: Any) -> None:
        self.compiled = compiled
        # NOTE: the generated `call(args)` itself where Inductor exposes it: its output object's
        # `__call__` only adds bookkeeping of debug and autotuning caches
        self._call = getattr(compiled, "current_callable", None) or compiled

    def __call__(self, *args: Any) -> Any:
        return self._call(list(args))  # NOTE: a fresh list: the generated code empties the one it gets


def _compile_graph(fn: Callable, examples: list[torch.Tensor]) -> GraphCall | None:
    """`fn` traced to ATen with Inductor's decompositions and compiled by `compile_fx_inner`, or
    None where its graph does not return a tuple (then `compile_fx` handles it)."""
    from torch._inductor.compile_fx import compile_fx_inner, graph_returns_tuple
    from torch._inductor.decomposition import select_decomp_table
    from torch.fx.experimental.proxy_tensor import make_fx

    graph = make_fx(fn, decomposition_table=select_decomp_table(), tracing_mode="fake")(*examples)
    if not graph_returns_tuple(graph):
        return None
    return GraphCall(compile_fx_inner(graph, examples, is_inference=True))


def shared_compilations(region: Region, canonical: Canonical, stats: InductorStats) -> Compilations:
    """The compilations of `region`'s structure (`canonical`), made on first need and shared."""
    scalars = scalars_as_tensors(region)
    dynamic = is_dynamic(region) and scalars is None
    key = structure_key(region, canonical, dynamic)
    compilations = DEFINITIONS.get(_TABLE_KEY, key)
    if compilations is None:
        function = canonical.function(f"<fusebench {region.name}>")
        compilations = Compilations(function, dynamic, bool(region.written), needs_exact_casts(region), scalars)
        DEFINITIONS.put(_TABLE_KEY, key, compilations)
        stats.compiled += dynamic  # a static structure counts a compilation per layout it meets
    else:
        stats.reused += 1
    return compilations


# ---------------------------------------------------------------------------------------------
# A region's callable


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
        # NOTE: one C++ check says whether this call's tensors are laid out as the last one's; only
        # a call that is not looks its compiled function up by strides (read per tensor) and is recorded.
        self._same_layout = TensorChecks(exact_strides=[True] * len(self._tensor_idx))
        self.fallback = RegionFallback(region, "Inductor", InductorFallbackWarning)
        self.last_inputs: list[InputRecord] = []
        self.calls = 0

    def __call__(self, *args: Any) -> Any:
        self.calls += 1
        if self.fallback.error is not None:
            return self.fallback.function()(*args)
        try:
            tensors = self._tensors(args)
            if self._same_layout.check(*tensors):
                if self._scalar_idx:
                    self._record_scalars(args)
                compiled = self._compiled
            else:
                compiled = self._new_layout(args, tensors)
            outputs = compiled(*args)
        except Exception as error:
            if not self.executor.fallback:
                raise
            return self.fallback.fall_back(error, args, self.executor.stats)
        if self._written and outputs:
            buffers = [args[i] for i in self._written]
            outputs = tuple(o.clone() if shares_memory(o, buffers) else o for o in outputs)
        return outputs

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
