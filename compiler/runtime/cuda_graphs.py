"""CUDA graphs: a cache entry's computation captured once and replayed (`jit(fn, cuda_graphs=True)`).

A graph replays the kernels it recorded on the very memory it recorded them on, with the scalar
values it recorded. So a `GraphedComputation` keeps one graph per *address key*: each tensor
input's data_ptr and strides, and each number input's type and value (shapes, dtypes and devices
are already the entry's guards). Calls with the same tensors (an optimizer stepping the same
parameters, a decoder writing the same KV caches) replay without any copy, and in-place updates
land in the callers' tensors exactly as the computation's own write-backs do; new addresses or
new values are captured again (at most `max_graphs` per entry; beyond that the call runs without
a graph). A number input that changes on every call (a step counter) therefore gets no replays:
pass it as a tensor to graph it. The first call with a key runs normally (it warms up: nvFuser compiles, cuBLAS
initialises); the second captures and replays; later ones replay.

Outputs: a replay rewrites the graph's own output buffers, so each output that is not memory of
an input is cloned after the replay: a result returned earlier never changes under the caller.
Outputs that are inputs' memory (a returned view of an updated argument) are returned as they are.

A computation that cannot be captured (a CPU tensor, a host synchronisation, an op that is not
capturable) runs without graphs from then on; `reason` says why and one `CudaGraphWarning` is
issued when capture itself failed.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils import _pytree as pytree

_MAX_WARMED_UP_KEYS = 4096


class CudaGraphWarning(UserWarning):
    """A computation could not be captured as a CUDA graph; it runs without one."""


def unavailable_reason() -> str | None:
    """Why CUDA graphs cannot be used in this process, or None."""
    if not torch.cuda.is_available():
        return "CUDA graphs need CUDA, and torch.cuda.is_available() is False on this machine"
    return None


@dataclass
class CudaGraphStats:
    """What one entry's graphed computation did: graphs captured, replays, calls run without a graph."""

    captures: int = 0
    replays: int = 0
    ungraphed_calls: int = 0
    reason: str | None = None

    def __str__(self) -> str:
        text = f"{self.captures} captures, {self.replays} replays, {self.ungraphed_calls} calls without a graph"
        return text + (f" ({self.reason})" if self.reason else "")


class _Graph:
    """One captured graph with its static outputs."""

    def __init__(self, computation: Callable[..., Any], inputs: tuple) -> None:
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            outputs = computation(*inputs)
        self.leaves, self.spec = pytree.tree_flatten(outputs)
        storages = {a.untyped_storage().data_ptr() for a in inputs if isinstance(a, torch.Tensor)}
        self.clone = [
            isinstance(leaf, torch.Tensor) and leaf.untyped_storage().data_ptr() not in storages for leaf in self.leaves
        ]

    def replay(self) -> Any:
        self.graph.replay()
        leaves = [leaf.clone() if clone else leaf for leaf, clone in zip(self.leaves, self.clone)]
        return pytree.tree_unflatten(leaves, self.spec)


class GraphedComputation:
    """Runs a computation through CUDA graphs keyed by its inputs' addresses (see the module)."""

    def __init__(self, computation: Callable[..., Any], max_graphs: int = 8) -> None:
        self.computation = computation
        self.max_graphs = max_graphs
        self.graphs: dict[tuple, _Graph] = {}
        self.warmed_up: set[tuple] = set()
        self.stats = CudaGraphStats()
        self.__fusebench_source__ = getattr(computation, "__fusebench_source__", "")

    def key(self, inputs: tuple) -> tuple | None:
        """The address key of these inputs, or None (with `stats.reason` set) when they cannot be graphed."""
        parts = []
        for a in inputs:
            if isinstance(a, torch.Tensor):
                if not a.is_cuda:
                    self.stats.reason = f"an input is on {a.device}: CUDA graphs replay CUDA work only"
                    return None
                parts.append((a.data_ptr(), a.stride()))
            else:
                parts.append((type(a), a))
        return tuple(parts)

    def __call__(self, *inputs: Any) -> Any:
        graph = None if self.stats.reason is not None else self._graph(inputs)
        if graph is None:
            self.stats.ungraphed_calls += 1
            return self.computation(*inputs)
        self.stats.replays += 1
        return graph.replay()

    def _graph(self, inputs: tuple) -> _Graph | None:
        key = self.key(inputs)
        if key is None:
            return None
        graph = self.graphs.get(key)
        if graph is not None or len(self.graphs) >= self.max_graphs:
            return graph
        if key not in self.warmed_up:
            if len(self.warmed_up) < _MAX_WARMED_UP_KEYS:
                self.warmed_up.add(key)
            return None
        try:
            graph = _Graph(self.computation, inputs)
        except Exception as error:  # NOTE: whatever fails capture (sync, CPU work) means "no graph here"
            first_line = (str(error).strip().splitlines() or [""])[0]
            self.stats.reason = f"capture failed: {type(error).__name__}: {first_line}"
            warnings.warn(f"CUDA graph {self.stats.reason}; running without graphs", CudaGraphWarning, stacklevel=3)
            return None
        self.graphs[key] = graph
        self.stats.captures += 1
        return graph
