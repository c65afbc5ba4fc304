"""How the Inductor executor compiles a region: its prims as one Python function with canonical
names (`Canonical`), compiled by Inductor per input layout (static regions) or once through
Dynamo (symbolic sizes), and shared by structure process-wide (`shared_compilations`; the
executor's module docstring, `compiler/executors/inductor.py`, says why each path)."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from compiler.core import dtypes
from compiler.core.executor import Region
from compiler.core.ir import NumberProxy, Proxy, TensorProxy, Trace, map_proxies
from compiler.executors.codegen import python_source
from compiler.executors.nvfuser.run.shared_definitions import DEFINITIONS
from compiler.executors.torch import TorchExecutor
from compiler.prims import ROUNDING_DECIDES, Prim, converts_to_integer, rounded_on_purpose

_TORCH = TorchExecutor()
# NOTE: the key of Inductor's entries in the shared table (whose other keys are nvFuser modules).
_TABLE_KEY = "inductor"


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


def has_symbolic_sizes(region: Region) -> bool:
    """Whether a tensor the region takes or makes has a symbolic size."""
    proxies = [*region.inputs, *(p for b in region.bsyms for p in b.outputs)]
    return any(isinstance(s, NumberProxy) for p in proxies if isinstance(p, TensorProxy) for s in p.shape)


def is_dynamic(region: Region) -> bool:
    """Whether the region has symbolic sizes or scalar inputs: then one compilation must serve
    every value they take."""
    return any(isinstance(p, NumberProxy) for p in region.inputs) or has_symbolic_sizes(region)


SCALAR_ARITHMETIC = frozenset({Prim.ADD, Prim.SUB, Prim.MUL, Prim.DIV})
SCALAR_TENSOR_DTYPES = {float: torch.float64, int: torch.int64}


def scalars_as_tensors(region: Region) -> dict[int, torch.dtype] | None:
    """For a CPU region whose sizes are all constant and whose numbers (an optimizer's learning
    rate, its bias corrections) only meet floating-point tensors of at least one dimension in +, -,
    * and /: each number input's position and the dtype of the 0-d tensor it is passed as, so that
    one static compilation serves every value (torch promotes a 0-d tensor as it does a number
    there; not where it meets another 0-d tensor, a layer norm's variance plus its eps, which a
    float64 0-d tensor would make float64). None for any other region."""
    numbers = {p.name: i for i, p in enumerate(region.inputs) if isinstance(p, NumberProxy)}
    tensors = [p for p in region.inputs if isinstance(p, TensorProxy)]
    if not numbers or not tensors or any(p.device.type != "cpu" for p in tensors) or has_symbolic_sizes(region):
        return None
    for bsym in region.bsyms:
        if not any(isinstance(a, Proxy) and a.name in numbers for a in bsym.args):
            continue
        others = [a for a in bsym.args if isinstance(a, TensorProxy)]
        if bsym.sym not in SCALAR_ARITHMETIC or not others:
            return None
        if not all(a.dtype.is_floating_point and len(a.shape) > 0 for a in others):
            return None
    dtypes_by_index = {}
    for i in numbers.values():
        dtype = SCALAR_TENSOR_DTYPES.get(region.inputs[i].python_type)
        if dtype is None:
            return None
        dtypes_by_index[i] = dtype
    return dtypes_by_index


# NOTE: set while a backward trace is compiled (runtime/pipeline.py): its regions recompute forward values
_BACKWARD: contextvars.ContextVar[bool] = contextvars.ContextVar("compiling_backward", default=False)


@contextlib.contextmanager
def compiling_backward() -> Iterator[None]:
    """Marks the regions compiled inside as a backward's (`needs_exact_casts`)."""
    token = _BACKWARD.set(True)
    try:
        yield
    finally:
        _BACKWARD.reset(token)


def needs_exact_casts(region: Region) -> bool:
    """Whether Inductor keeps the roundings to bf16/fp16 that it would elide between fused ops
    (`emulate_precision_casts`) in `region`, which holds such values: where it has a prim of
    `prims.ROUNDING_DECIDES` (a comparison, a max) or a conversion to an integer or bool, so such a
    prim sees the values eager computes (a max's backward finds its maximum by `x == max(x)`, on the
    upcast values, and its forward found it among the same values); and in a backward's regions,
    which recompute forward values: a bf16 softmax's backward recomputing `exp(x * scale - max)`
    with `x * scale` unrounded, against a max and sum its forward took of rounded values, gives
    gradients several times further from exact than eager's. Elsewhere it computes in float32
    between the trace's casts, which costs a bf16 region on CPU half its time or more: a bf16
    program's values are computed in float32 and rounded only where they leave the region, as in
    torch.compile. Not so a rounding the program asks of values it holds wider (`w.half().float()`
    of a float32 `w`, fake quantization): its region keeps every rounding (`prims.rounded_on_purpose`)."""
    values = [*region.inputs, *(p for b in region.bsyms for p in b.outputs)]
    if not any(isinstance(p, TensorProxy) and dtypes.compute_dtype(p.dtype) != p.dtype for p in values):
        return False
    return (
        _BACKWARD.get()
        or any(b.sym in ROUNDING_DECIDES or converts_to_integer(b) for b in region.bsyms)
        or bool(rounded_on_purpose(region.inputs, region.bsyms))
    )


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
    behind torch.compile, and runs without Dynamo's guards and without the size and stride asserts
    Inductor's code would make of every input (`size_asserts`): the cache entry's prologue has
    checked sizes, dtypes and devices, and the region's callable checks the layout in one C++
    call, so a call pays no check twice (an Adam step over 28 parameters made 112 such asserts).
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

    # NOTE: a static compilation serves one layout (`Compilations.for_call`), checked before each call
    with torch.no_grad(), config.patch(emulate_precision_casts=exact_casts, size_asserts=False):
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
    exact = needs_exact_casts(region)
    key = f"{structure_key(region, canonical, dynamic)}|exact={exact}"
    compilations = DEFINITIONS.get(_TABLE_KEY, key)
    if compilations is None:
        function = canonical.function(f"<fusebench {region.name}>")
        compilations = Compilations(function, dynamic, bool(region.written), exact, scalars)
        DEFINITIONS.put(_TABLE_KEY, key, compilations)
        stats.compiled += dynamic  # a static structure counts a compilation per layout it meets
    else:
        stats.reused += 1
    return compilations
