"""The torch.compile backend "fusebench": dynamo captures FX graphs, this compiler compiles each.

`torch.compile(model, backend="fusebench")` works right after `import compiler`: dynamo's guards
and graph breaks handle the Python, and each FX graph (a `GraphModule`, an `nn.Module`) is jitted
like any module by `compiler.jit`, compiling on its first call.

NOTE: importing torch._dynamo takes seconds, so `import compiler` does not: it registers the
backend when dynamo's backend registry is imported (by torch.compile's first call), through a
finder on `sys.meta_path` that runs once and removes itself; when the registry is already
imported, the backend is registered at once.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import sys
import weakref
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

import torch

from compiler.runtime.module import JittedModule
from compiler.runtime.pipeline import compile_entry, make_options

BACKEND_NAME = "fusebench"
_REGISTRY = "torch._dynamo.backends.registry"


# every graph this backend compiled that is still alive, by its number (0, 1, ... in compile order)
_graphs: weakref.WeakValueDictionary[int, JittedModule] = weakref.WeakValueDictionary()
_compiled = 0


def dynamo_backend(graph_module: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Callable:
    """A dynamo backend: the FX graph jitted by this compiler (with the default executors and
    automatic dynamic: a dynamic graph's size arguments, and its tensors' sizes, become symbolic
    in the graph's second entry instead of one entry per value)."""
    options = make_options("constant", None)
    make_entry = lambda traced: functools.partial(compile_entry, traced, options)
    jitted = JittedModule(graph_module, make_entry, automatic_dynamic=options.automatic_dynamic)
    jitted.options = options  # NOTE: as compiler.jit sets it: compiler.examine reads it
    global _compiled
    _graphs[_compiled] = jitted
    _compiled += 1
    return jitted


def graphs_compiled() -> int:
    """How many graphs this backend has compiled in this process."""
    return _compiled


def compiled_graphs(since: int = 0) -> list[JittedModule]:
    """The graphs compiled by this backend from number `since` on (see `graphs_compiled`) that are
    still alive, in compile order: what `compiler.examine` and `last_traces` can look into."""
    return [graph for number, graph in sorted(_graphs.items(), key=lambda item: item[0]) if number >= since]


def _register(registry: ModuleType) -> None:
    if BACKEND_NAME not in registry._COMPILER_FNS:
        registry.register_backend(compiler_fn=dynamo_backend, name=BACKEND_NAME)


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
