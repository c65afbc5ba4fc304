"""A CUDA graph captured once (`_Graph`: one instance with its output buffers), the values it lends
to a backward (`Lent`) and the capture itself (`capturing`): what `GraphedComputation`
(runtime/cuda_graphs.py) keeps per address key and replays."""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from torch.utils import _pytree as pytree


class Lent:
    """A graph's output buffers lent to one caller (a forward's saved values, for its backward).
    A lent value that is not the graph's own memory (a saved input, such as the x a norm's
    backward reads) is not copied before an overwrite: the replay does not write it."""

    def __init__(self, values: list, graph: _Graph) -> None:
        self.values = values
        self.graph = graph
        self.generation = graph.generation
        self.kept = False
        self.released = False

    def keep(self) -> bool:
        """Called before the graph overwrites the buffers: the borrower gets copies, unless done.
        Whether it copied."""
        if not self.released and not self.kept:
            self.values = [v.clone() if own else v for v, own in zip(self.values, self.graph.lent_owned)]
            self.kept = True
            return True
        return False

    def borrow(self) -> list:
        """The lent values; raises RuntimeError when the graph has overwritten them since."""
        if not self.kept and self.graph.generation != self.generation:
            raise RuntimeError(
                "a backward ran again (retain_graph=True) after its CUDA-graphed forward was replayed, which "
                "overwrote the values it saved; jit(..., cuda_graphs=False) supports this"
            )
        return self.values

    def release(self) -> None:
        """The borrower is done (its backward ran): later replays need not copy the buffers."""
        self.released = True


_capture_streams: dict[int, torch.cuda.Stream] = {}  # device index -> the side stream captures run on


@contextlib.contextmanager
def capturing(graph: torch.cuda.CUDAGraph) -> Iterator[None]:
    """Captures the CUDA work of the block into `graph` (in a private memory pool, on a side stream
    ordered after the current one), as `torch.cuda.graph(graph)` does less the device
    synchronisation and `torch.cuda.empty_cache()` it starts with. An entry captures whenever it
    meets new input addresses, in the middle of a training loop: emptying the cache there hands
    every cached block back to the driver, so the next allocations get new addresses (new keys,
    more captures) through cudaMalloc, which synchronises; a capture needs no synchronisation,
    since nothing it records runs until a replay on the current stream."""
    current = torch.cuda.current_stream()
    stream = _capture_streams.get(current.device_index)
    if stream is None:
        stream = _capture_streams[current.device_index] = torch.cuda.Stream(device=current.device)
    stream.wait_stream(current)
    with torch.cuda.stream(stream):
        graph.capture_begin(capture_error_mode="thread_local")  # NOTE: other threads' CUDA work is theirs
        try:
            yield
        except BaseException:
            with contextlib.suppress(Exception):  # NOTE: the block's error says why, not the broken capture's
                graph.capture_end()
            raise
        graph.capture_end()
    current.wait_stream(stream)


class _Slot(int):
    """A leaf's position, standing in for the leaf while `_unflattener` reads a tree's structure."""


def _unflattener(spec: pytree.TreeSpec) -> Callable[[list], Any]:
    """`lambda leaves: <the tree>` for trees of tuples, lists and None (a computation's usual
    result): several times faster than `pytree.tree_unflatten`, which any other tree uses."""

    def source(node: Any) -> str:
        if type(node) is _Slot:
            return f"l[{int(node)}]"
        if node is None:
            return "None"
        if type(node) is tuple:
            return "(" + "".join(source(child) + ", " for child in node) + ")"
        if type(node) is list:
            return "[" + ", ".join(source(child) for child in node) + "]"
        raise TypeError(type(node).__name__)

    try:
        return eval(f"lambda l: {source(pytree.tree_unflatten([_Slot(i) for i in range(spec.num_leaves)], spec))}")
    except TypeError:
        return lambda leaves: pytree.tree_unflatten(leaves, spec)


# How many tensors (and storage objects) hold a storage's memory, given its `_cdata`: torch's own
# count, as its CUDA-graph trees read it to know whether an output is still alive.
_storage_use_count = torch._C._storage_Use_Count


class _Graph:
    """One captured graph instance with its static outputs (and static inputs for `static` positions).
    No output other than the lent ones may view the static input at a position in `unviewed` (a
    copied input that eager's output would view: the caller's tensor, not the graph's copy); the
    capture raises RuntimeError where one does."""

    def __init__(
        self, computation: Callable[..., Any], inputs: tuple, static: list[int], lend: int, unviewed: Sequence[int] = ()
    ) -> None:
        self.static = static
        self.buffers = [inputs[i].clone() for i in static]
        inputs = tuple(self.buffers[static.index(i)] if i in static else a for i, a in enumerate(inputs))
        self.graph = torch.cuda.CUDAGraph()
        # NOTE: on the inputs' device, whichever is current: a capture records the work of its own
        # device's stream only, and the inputs' kernels would run there, unrecorded
        device = next((a.device for a in inputs if isinstance(a, torch.Tensor) and a.is_cuda), None)
        with contextlib.nullcontext() if device is None else torch.cuda.device(device), capturing(self.graph):
            outputs = computation(*inputs)
        self.leaves, spec = pytree.tree_flatten(outputs)
        for leaf in self.leaves:
            if isinstance(leaf, torch.Tensor) and not leaf.is_cuda:  # computed by the capture alone
                raise RuntimeError(f"the computation returns a tensor on {leaf.device}: a replay does not compute it")
        copies = {self.buffers[static.index(i)].untyped_storage().data_ptr() for i in unviewed}
        for leaf in self.leaves[: len(self.leaves) - lend]:
            if isinstance(leaf, torch.Tensor) and leaf.untyped_storage().data_ptr() in copies:
                raise RuntimeError("an output views an input that moves between calls, which a graph reads as a copy")
        self.unflatten = _unflattener(spec)
        del outputs
        storages = {
            a.untyped_storage().data_ptr()
            for i, a in enumerate(inputs)
            if isinstance(a, torch.Tensor) and i not in static  # a static buffer's memory is rewritten
        }
        self.lent_from = len(self.leaves) - lend
        # the lent leaves in the graph's own memory: those a replay overwrites (see `Lent.keep`)
        self.lent_owned = [
            isinstance(leaf, torch.Tensor) and leaf.untyped_storage().data_ptr() not in storages
            for leaf in self.leaves[self.lent_from :]
        ]
        # the output leaves in the graph's own memory: returned as aliases, see `held`
        self.owned = [
            i < self.lent_from and isinstance(leaf, torch.Tensor) and leaf.untyped_storage().data_ptr() not in storages
            for i, leaf in enumerate(self.leaves)
        ]
        self.storages: list[torch.UntypedStorage] = []  # the owned leaves' storages, each once
        self.leaf_storage: list[int] = []  # each leaf's position in `storages` (-1: not owned)
        position: dict[int, int] = {}
        for leaf, owned in zip(self.leaves, self.owned):
            if not owned:
                self.leaf_storage.append(-1)
                continue
            storage = leaf.untyped_storage()
            if storage.data_ptr() not in position:
                position[storage.data_ptr()] = len(self.storages)
                self.storages.append(storage)
            self.leaf_storage.append(position[storage.data_ptr()])
        # NOTE: the graph keeps `storages` alive, so their StorageImpl addresses stay valid to count
        self._cdata = [storage._cdata for storage in self.storages]
        self.own_counts = list(map(_storage_use_count, self._cdata))  # what the graph itself holds
        self.generation = 0
        self.borrower: Callable[[], Lent | None] | None = None  # the last `Lent`, while alive

    def held(self) -> set[int]:
        """The output leaves whose memory a caller still holds (an alias returned by an earlier replay)."""
        counts = list(map(_storage_use_count, self._cdata))
        if counts == self.own_counts:  # the usual case, compared in C
            return set()
        busy = {j for j, (count, own) in enumerate(zip(counts, self.own_counts)) if count > own}
        return {i for i, j in enumerate(self.leaf_storage) if j in busy}

    def replay(self, inputs: tuple, cloned: set[int]) -> tuple[Any, Lent | None, bool]:
        """Replays; the owned leaves come back as aliases, those in `cloned` as copies. Also returns
        whether the values lent to the last borrower had to be copied first (it had not run)."""
        if self.static:
            for i, buffer in zip(self.static, self.buffers):
                buffer.copy_(inputs[i])
        lent = self.borrower() if self.borrower is not None else None
        kept = lent is not None and lent.keep()
        self.graph.replay()
        self.generation += 1
        if cloned:
            leaves = [
                (leaf.clone() if i in cloned else leaf.detach()) if owned else leaf
                for i, (leaf, owned) in enumerate(zip(self.leaves, self.owned))
            ]
        else:
            leaves = [leaf.detach() if owned else leaf for leaf, owned in zip(self.leaves, self.owned)]
        lent = None
        if self.lent_from < len(leaves):
            lent = Lent(leaves[self.lent_from :], self)
            self.borrower = weakref.ref(lent)
        return self.unflatten(leaves), lent, kept
