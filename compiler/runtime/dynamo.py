"""The torch.compile backend "fusebench": dynamo captures FX graphs, this compiler compiles each.

`torch.compile(model, backend="fusebench")` works right after `import compiler`: dynamo's guards
and graph breaks handle the Python, and each FX graph (a `GraphModule`, an `nn.Module`) is jitted
like any module by `compiler.jit`, compiling on its first call. What dynamo itself writes into a
graph for Inductor (`torch.sym_sum` of symbolic sizes; `prims.fma`, its decomposition of
`addcmul_` and `addcdiv_` as torch.optim calls them) is rewritten into Python and torch calls
this compiler traces (`_plain_helpers`), so an optimizer step compiles whole.

The backend never raises for what this compiler cannot compile. A graph whose compilation fails
is split (runtime/graph_split.py): the nodes the compiler cannot trace run eagerly, the rest is
compiled piece by piece (a piece that still fails runs eagerly whole). Each such node, and each
graph break of dynamo's (a branch on a tensor value runs in Python between two graphs), is a
fallback, and so is a frame dynamo gives up on whole (runtime/dynamo_frames.py): warned about
once per op and source line (`UnsupportedFallback`) and counted (`compiler.examine.fallbacks()`,
runtime/fallbacks.py).

NOTE: importing torch._dynamo takes seconds, so `import compiler` does not: it registers the
backend when dynamo's backend registry is imported (by torch.compile's first call), through a
finder on `sys.meta_path` that runs once and removes itself; when the registry is already
imported, the backend is registered at once.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import operator
import sys
import weakref
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

import torch

from compiler.runtime import dynamo_frames
from compiler.runtime.fallbacks import (
    CompileFailure,
    EagerOnFailureModule,
    Fallback,
    failing_as_compile_failure,
    one_line,
    record,
)
from compiler.runtime.graph_split import split_graph, unsupported_nodes
from compiler.runtime.module import JittedModule
from compiler.runtime.pipeline import Options, compile_entry, make_options

BACKEND_NAME = "fusebench"
_REGISTRY = "torch._dynamo.backends.registry"


# every graph this backend compiled that is still alive, by its number (0, 1, ... in compile order)
_graphs: weakref.WeakValueDictionary[int, JittedModule] = weakref.WeakValueDictionary()
_compiled = 0


class DynamoGraph(JittedModule):
    """An FX graph dynamo captured, jitted as a module; when it fails to compile, its calls run
    the graph split into compiled and eager pieces instead (`split`)."""

    def __init__(self, graph_module: torch.fx.GraphModule, options: Options) -> None:
        make_entry = lambda traced: failing_as_compile_failure(functools.partial(compile_entry, traced, options))
        super().__init__(graph_module, make_entry, automatic_dynamic=options.automatic_dynamic)
        self.options = options  # NOTE: as compiler.jit sets it: compiler.examine reads it
        self.split: Callable[..., Any] | None = None

    def __call__(self, *args: Any) -> Any:
        if self.split is not None:
            return self.split(*args)
        try:
            return super().__call__(*args)
        except CompileFailure as failure:
            self.split = _split(self.module, args, failure.error, self.options)
            return self.split(*args)


def _split(graph_module: torch.fx.GraphModule, args: tuple, error: BaseException, options: Options) -> Callable:
    """`graph_module` with the nodes this compiler cannot trace (for `args`) run eagerly; the
    whole graph eagerly when no node alone is to blame for `error` (or splitting failed)."""
    try:
        unsupported = unsupported_nodes(graph_module, args)
        if unsupported:
            return split_graph(graph_module, unsupported, lambda piece: _jit_piece(piece, options))
    except Exception as split_error:  # NOTE: the backend never raises; the graph runs as dynamo made it
        error = split_error
    record(Fallback("a whole dynamo graph", "", one_line(error), "graph"))
    return graph_module


def _jit_piece(piece: torch.fx.GraphModule, options: Options) -> EagerOnFailureModule:
    make_entry = lambda traced: failing_as_compile_failure(functools.partial(compile_entry, traced, options))
    jitted = EagerOnFailureModule(piece, make_entry, automatic_dynamic=options.automatic_dynamic)
    jitted.fallback_kind = "graph"
    jitted.options = options
    _remember(jitted)
    return jitted


def _remember(jitted: JittedModule) -> None:
    global _compiled
    _graphs[_compiled] = jitted
    _compiled += 1


def dynamo_backend(graph_module: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Callable:
    """A dynamo backend: the FX graph jitted by this compiler (with the default executors and
    automatic dynamic: a dynamic graph's size arguments, and its tensors' sizes, become symbolic
    in the graph's second entry instead of one entry per value); a graph that fails to compile
    runs split, its unsupported nodes eagerly (see the module docstring). The graph break that
    ends the graph, if one does, is recorded as a fallback, and so is each frame dynamo gives up
    on whole (dynamo_frames.py)."""
    _note_graph_break()
    dynamo_frames.watch(BACKEND_NAME)  # NOTE: again after a torch._dynamo.reset(), which drops it
    jitted = DynamoGraph(_plain_helpers(graph_module), make_options("constant", None))
    _remember(jitted)
    return jitted


def _sum(values: Sequence[Any]) -> Any:
    """`torch.sym_sum` as Python's additions, which symbolic numbers of this compiler support."""
    return functools.reduce(operator.add, values)


def _fma(a: Any, b: Any, c: Any) -> Any:
    """`torch.ops.prims.fma(a, b, c)`, Inductor's fused multiply-add prim, as `a * b + c` (its
    reference implementation); dynamo records it for `addcmul_`, `addcdiv_` and `add_` with a
    tensor `alpha` (torch.optim's Adam, AdamW, ... write their updates so), expecting Inductor to
    compile it."""
    return a * b + c


# Dynamo's helpers for symbolic sizes and its decompositions into Inductor's prims, written as
# plain Python and torch calls, which this compiler traces (`torch.sym_sum` of a dynamic graph
# into arithmetic on symbolic sizes, `prims.fma` into a multiply and an add that fuse with their
# neighbours); keyed by the callable, or an operator's "namespace::name" (its default overload).
_SYM_OPS: dict[Any, Callable[..., Any]] = {torch.sym_sum: _sum}
_DYNAMO_PRIMS: dict[str, Callable[..., Any]] = {"prims::fma": _fma}


class _NumpyOnNumbers:
    """A NumPy function dynamo recorded (its `numpy_to_tensor_wrapper`, which returns the result as a
    0-d tensor): on Python numbers alone (CTRL's `np.sqrt(d_model)`, PEGASUS-X's `np.log(...)`) the
    result is a constant, made again with `torch.tensor`, which this compiler traces; otherwise
    the wrapper itself (the graph's split then runs it eagerly)."""

    def __init__(self, wrapped: Callable[..., Any]) -> None:
        self.wrapped = wrapped
        self.__name__ = f"numbers_{wrapped.__name__}"  # NOTE: FX's code generation names it so

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not all(type(a) in (int, float, bool) for a in (*args, *kwargs.values())):
            return self.wrapped(*args, **kwargs)
        with torch._C.DisableTorchFunction():  # NOTE: computed by torch, not traced
            result = self.wrapped(*args, **kwargs)
        if not isinstance(result, torch.Tensor) or result.ndim != 0:
            return result
        return torch.tensor(result.item(), dtype=result.dtype)


def _rewritten(target: Any) -> Callable[..., Any] | None:
    if isinstance(target, torch._ops.OpOverload):
        return _DYNAMO_PRIMS.get(target._schema.name) if target._overloadname == "default" else None
    from torch._dynamo.utils import numpy_to_tensor_wrapper

    if isinstance(target, numpy_to_tensor_wrapper):
        return _NumpyOnNumbers(target)
    return _SYM_OPS.get(target)


def _plain_helpers(graph_module: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """`graph_module` with dynamo's helpers and prims (`_SYM_OPS`, `_DYNAMO_PRIMS`, NumPy functions
    of numbers) calling their Python equivalents, which this compiler traces."""
    rewritten = False
    for node in graph_module.graph.nodes:
        replacement = _rewritten(node.target) if node.op == "call_function" else None
        if replacement is not None:
            node.target, rewritten = replacement, True
    if rewritten:
        graph_module.recompile()
    return graph_module


def _note_graph_break() -> None:
    """Records the graph break that ends the graph dynamo is handing over, if one does, as a
    fallback (the Python from there to the next graph runs eagerly): its reason and the user's
    line where it broke (dynamo's `compile_subgraph_reason` of the graph being compiled)."""
    from torch._dynamo.symbolic_convert import InstructionTranslator

    try:
        translator = InstructionTranslator.current_tx()
    except (AttributeError, AssertionError):  # NOTE: called outside dynamo (a user's own backend)
        return
    reason = getattr(getattr(translator, "output", None), "compile_subgraph_reason", None)
    if reason is None or not reason.graph_break:
        return
    frame = reason.user_stack[-1] if reason.user_stack else None
    where = f"{frame.filename}:{frame.lineno}: {(frame.line or '').strip()}" if frame is not None else ""
    text = " ".join(reason.reason.split())
    what = "a branch on a tensor value" if text.startswith("generic_jump") else "dynamo graph break"
    record(Fallback(what, where, text[:300], "graph break"))


def watch_skipped_frames() -> None:
    """Records each frame dynamo gives up on for this backend as a fallback from now on: what the
    backend does on its own, needed again right after `torch._dynamo.reset()` (which drops dynamo's
    callbacks) for the frames skipped before the backend's next graph."""
    dynamo_frames.watch(BACKEND_NAME)


def graphs_compiled() -> int:
    """How many graphs this backend has compiled in this process (the compiled pieces of a split
    graph count as graphs of their own)."""
    return _compiled


def compiled_graphs(since: int = 0) -> list[JittedModule]:
    """The graphs compiled by this backend from number `since` on (see `graphs_compiled`) that are
    still alive, in compile order: what `compiler.examine` and `last_traces` can look into."""
    return [graph for number, graph in sorted(_graphs.items(), key=lambda item: item[0]) if number >= since]


def _register(registry: ModuleType) -> None:
    if BACKEND_NAME not in registry._COMPILER_FNS:
        registry.register_backend(compiler_fn=dynamo_backend, name=BACKEND_NAME)
    dynamo_frames.watch(BACKEND_NAME)


class _RegisterOnImport(importlib.abc.MetaPathFinder):
    """Finds dynamo's backend registry as Python would, and registers the backend once it has run."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if name != _REGISTRY:
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        execute = spec.loader.exec_module

        def exec_module(module: ModuleType) -> None:
            execute(module)
            _register(module)

        spec.loader.exec_module = exec_module
        return spec


def install() -> None:
    """Makes backend="fusebench" known to torch.compile (now, or when dynamo's registry loads)."""
    registry = sys.modules.get(_REGISTRY)
    if registry is not None:
        _register(registry)
    elif not any(isinstance(finder, _RegisterOnImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _RegisterOnImport())
