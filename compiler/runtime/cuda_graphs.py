"""CUDA graphs: a cache entry's computation captured once and replayed (`jit(fn, cuda_graphs=True)`).

A graph replays the kernels it recorded on the very memory it recorded them on, with the scalar
values it recorded. So a `GraphedComputation` keeps one graph per *address key*: each tensor
input's data_ptr and strides, and each number input's type and value (shapes, dtypes and devices
are already the entry's guards; a graphed entry's guards fix its tensors' strides too, so its
computation's key leaves them out, while a backward's, whose inputs no guard checks, keeps
them). Calls with the same tensors (an optimizer stepping the same parameters, a decoder
writing the same KV caches) replay without any copy, and in-place updates land in the callers'
tensors exactly as the computation's own write-backs do; new addresses or new values are
captured again (at most `max_graphs` per entry; beyond that the call runs without
a graph). A number input that changes on every call (a step counter, a scheduled learning rate)
would get no replays: when a few calls in a row that find no graph differ from the previous such
call only in those numbers, a computation without autograd is compiled again reading them from
0-d tensors on the device (passes/device_scalars.py), which each call fills before it runs or
replays, and one graph serves every value; the entry's stats name them. Where they cannot be read
so (a number used as a shape or returned), one `CudaGraphWarning` names them and says why, and
the stats say so. The first call with a key runs normally (it warms up: nvFuser compiles, cuBLAS
initialises); the second captures and replays; later ones replay.

Outputs: a replay rewrites the graph's own output buffers, and a result returned earlier must
never change under its caller. So an output in the graph's memory is returned as an alias of that
buffer (no copy), and a graph is replayed only while nobody holds such an alias any more (the
buffers' storage use counts are back to the graph's own). Each address key keeps up to two
*instances* of its graph, each with its own memory: the common loop `y = f(x)`, where the
previous `y` is still alive during the call, alternates between them. When both are held (a
caller keeping every result), the older instance is left to its holders and a new one captured,
and the outputs found held are cloned after each replay from then on. Outputs that are inputs'
memory (a returned view of an updated argument) are returned as they are.

A training step graphs its forward and each backward apart (`lend`, `static_tail`): the
forward's saved values are not cloned but *lent* (`Lent`) from the graph's buffers to the
backward, so the backward reads the same addresses every step and its graph replays too; the
small cotangents are copied into static buffers (a fresh loss gradient every step; a large one,
usually the same caller's buffer every step, is keyed by its address like any input, since a copy
would cost a pass over it, until calls in a row find no graph only because the large cotangents
moved: a fresh temporary each step, as the backward of a loss computed outside the function
makes, which a key by address would never replay; those are copied too from then on). A replay that would
overwrite buffers still lent to an earlier forward clones them for it first, so two forwards
before their backwards stay right. A backward run again (retain_graph=True) after another replay
raises, naming the limit, rather than read overwritten values.

A computation that cannot be captured (a CPU tensor, inputs on several devices, a host
synchronisation, an op that is not capturable) runs without graphs from then on; a capture runs
on its inputs' device, whichever device is current; `reason` says why and one `CudaGraphWarning` is
issued when capture itself failed.

Automatic: `jit`'s default (`cuda_graphs=None`) on a machine with CUDA graphs every computation
the same way, more cautiously, and silently (`stats.reason` says why one runs without graphs):
a key is captured on its third call, not its second, so a layout met twice pays no capture; an
input at a new address with everything else the same (a new batch every step, a cache position
made every decoding step) is copied into the graphs' static buffers from then on, where an
explicit `cuda_graphs=True` would capture each address; a written input that moves stops graphs
(a replay would write the copy), as do number inputs that change from call to call and cannot be
read from device scalars (no graph would ever replay) and inputs to copy of more than 256 MiB in
all; a computation without tensor inputs is not graphed, nor one that returns a CPU tensor
(computed by the capture alone) or a view of an input it copies (eager's result views the
caller's tensor), nor a call made while the caller captures a graph of its own; at most four
address keys are captured, each instance holding its own memory. Its forward's guards leave
strides to the key, as a backward's do, so automatic graphs never add a recompilation.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from compiler.core.gather import data_ptr, picker, stride
from compiler.passes.device_scalars import DTYPES, NumberStaysNumber
from compiler.runtime.graph_capture import Lent, _Graph

_MAX_WARMED_UP_KEYS = 4096
_COPIED_BYTES = 1 << 20  # a cotangent up to this size is copied, not keyed by address
_INSTANCES = 2  # graph instances per address key (see the module's "Outputs")


_NUMBER_CHANGES = 3  # calls finding no graph, each differing from the one before only in numbers, to warn
_MOVES = 3  # calls finding no graph, each differing from the one before only in cotangent addresses, to copy them
_AUTOMATIC_WARM_CALLS = 2  # automatic graphs: calls with a key that run without one before it is captured
_AUTOMATIC_MAX_GRAPHS = 4  # automatic graphs: address keys captured per computation (each holds its memory)
_AUTOMATIC_COPIED_BYTES = 1 << 28  # automatic graphs: inputs copied into static buffers, in all, at most


_capturing = torch.cuda.is_current_stream_capturing


# Builds the computation that reads the number inputs at these positions from 0-d tensors on this
# device (passes/device_scalars.py); raises NumberStaysNumber where they cannot be.
DeviceScalars = Callable[[tuple[int, ...], torch.device], Callable[..., Any]]


class CudaGraphWarning(UserWarning):
    """A computation could not be captured as a CUDA graph, or its calls cannot replay one."""


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
    reason: str | None = None  # why it runs without graphs from now on
    changing: str | None = None  # the number inputs whose new values keep it from replaying
    device_scalars: str | None = None  # the number inputs written into device scalars each call instead
    # the costs a training loop should not pay step after step (each names what its caller holds):
    held_captures: int = 0  # captures because every instance's outputs were still held by callers
    lent_copies: int = 0  # replays that first copied values lent to a backward that had not run
    cloned_outputs: int = 0  # output leaves cloned after each replay (callers kept them past two calls)
    copied_cotangents: int = 0  # cotangents copied into static buffers before each replay
    copied_inputs: int = 0  # other inputs copied so (automatic graphs: they moved between calls)

    def __str__(self) -> str:
        text = f"{self.captures} captures, {self.replays} replays, {self.ungraphed_calls} calls without a graph"
        held = [
            f"{count} {what}"
            for count, what in (
                (self.held_captures, "captures while every instance's outputs were held"),
                (self.lent_copies, "copies of saved values lent to a backward not run yet"),
                (self.cloned_outputs, "outputs cloned after each replay"),
                (self.copied_cotangents, "cotangents copied before each replay (a new address every step)"),
                (self.copied_inputs, "inputs copied before each replay (a new address every call)"),
            )
            if count
        ]
        if held:
            text += f" ({', '.join(held)})"
        if self.changing:
            text += f" (number inputs that change from call to call: {self.changing})"
        if self.device_scalars:
            text += f" (number inputs read from device scalars, as they change every call: {self.device_scalars})"
        return text + (f" ({self.reason})" if self.reason else "")


class GraphedComputation:
    """Runs a computation through CUDA graphs keyed by its inputs' addresses (see the module).

    `static_tail`: of the last N inputs (a backward's cotangents), those of at most `_COPIED_BYTES`
    are copied into the graph's own buffers before each replay, so their addresses are not part of
    the key. `lend`: the last N output leaves are lent (`Lent`) instead of cloned; `call_lending`
    returns them. `strides_guarded`: the entry's guards fix every tensor input's strides (a graphed
    entry's prologue does, see `frontend.trace(exact_strides=True)`), so the key leaves them out.
    `sizes`: the names of the number inputs that are symbolic tensor sizes (automatic dynamic), which
    the changing-numbers warning advises on apart.

    `automatic` (what `jit` does on CUDA unless told `cuda_graphs=False`, see the module's
    "Automatic"): a key is captured on its third call (`_AUTOMATIC_WARM_CALLS`), never with a
    warning; a tensor input that moved while everything else stayed is copied into static buffers
    from then on, unless the computation writes it (`written`: its positions), which stops graphs;
    so do number inputs that change from call to call, and inputs to copy of more than
    `_AUTOMATIC_COPIED_BYTES` in all. A `backward`'s inputs other than its cotangents are the
    forward's saved values, which move once, when the forward's graph starts lending its own
    buffers, and stay there: they are keyed by address, never copied.
    """

    def __init__(
        self,
        computation: Callable[..., Any],
        max_graphs: int = 8,
        static_tail: int = 0,
        lend: int = 0,
        strides_guarded: bool = False,
        sizes: frozenset[str] = frozenset(),
        automatic: bool = False,
        written: frozenset[int] = frozenset(),
        backward: bool = False,
        device_scalars: DeviceScalars | None = None,
    ) -> None:
        self.computation = computation
        self.automatic = automatic
        self.written = written
        self.backward = backward
        self.warm_calls = _AUTOMATIC_WARM_CALLS if automatic else 1  # calls with a key run before it is captured
        self.strides_guarded = strides_guarded
        self.sizes = sizes
        self.max_graphs = min(max_graphs, _AUTOMATIC_MAX_GRAPHS) if automatic else max_graphs
        self.static_tail = static_tail
        self.lend = lend
        self.graphs: dict[tuple, list[_Graph]] = {}  # address key -> its instances, at most _INSTANCES
        self.cloned: set[int] = set()  # output leaves a caller kept past two calls: copied after each replay
        self.warmed_up: dict[tuple, int] = {}  # key -> the calls it ran without a graph, up to `warm_calls`
        self.stats = CudaGraphStats()
        self._tensors: Callable[[tuple], tuple] | None = None  # gathers the tensor inputs (see `key`)
        self._keyed: Callable[[tuple], tuple] | None = None  # the tensor inputs keyed by address (not copied)
        self._copied: list[int] = []  # positions of the tensor inputs copied into static buffers
        self._others: Callable[[tuple], tuple] | None = None  # the number inputs, where there are any
        self._other_positions: list[int] = []
        self._input_count = 0
        self._last_key: tuple | None = None
        self._number_changes = 0  # new keys in a row that differed from the last new key only in numbers
        self._keyed_positions: list[int] = []  # the positions of the inputs keyed by address, in key order
        self._moves = 0  # new keys in a row that differed from the last new key only in cotangent addresses
        self.device_scalars = device_scalars
        self._scalars: dict[int, torch.Tensor] = {}  # number input position -> the 0-d tensor it is written into
        self.__fusebench_source__ = getattr(computation, "__fusebench_source__", "")

    def key(self, inputs: tuple) -> tuple | None:
        """The address key of these inputs, or None (with `stats.reason` set) when they cannot be graphed.

        Which inputs are tensors is worked out on the first call: the entry's guards fix each
        input's kind and device from then on, so later calls only gather pointers and strides
        (pointers alone with `strides_guarded`: the prologue's C++ tensor check already compares the
        strides, for less than gathering them in Python per call would cost over hundreds of tensors).
        """
        if self._tensors is None:
            tensors = [i for i, a in enumerate(inputs) if isinstance(a, torch.Tensor)]
            if self.automatic and not tensors:
                self.stats.reason = "no tensor input: nothing says the computation runs on CUDA"
                return None
            for i in tensors:
                if not inputs[i].is_cuda:
                    self.stats.reason = f"an input is on {inputs[i].device}: CUDA graphs replay CUDA work only"
                    return None
            devices = sorted({str(inputs[i].device) for i in tensors})
            if len(devices) > 1:
                self.stats.reason = f"inputs on {', '.join(devices)}: a graph records one device's work"
                return None
            static_from = len(inputs) - self.static_tail
            self._copied = [
                i
                for i in tensors
                if i >= static_from and inputs[i].nbytes <= _COPIED_BYTES  # type: ignore[union-attr]
            ]
            self._tensors = picker(tensors)
            self._keyed_positions = [i for i in tensors if i not in self._copied]
            self._keyed = picker(self._keyed_positions) if self._copied else self._tensors
            others = sorted(set(range(len(inputs))) - set(tensors))
            self._others = picker(others) if others else None
            self._other_positions, self._input_count = others, len(inputs)
        ptrs = tuple(map(data_ptr, self._keyed(inputs)))
        strides = None if self.strides_guarded else tuple(map(stride, self._tensors(inputs)))
        if self._others is None:
            return ptrs, strides
        return ptrs, strides, tuple([(type(value), value) for value in self._others(inputs)])

    def __call__(self, *inputs: Any) -> Any:
        return self.call_lending(inputs)[0]

    @property
    def _static_from(self) -> int:
        """The position of the first input of the `static_tail` (a backward's cotangents)."""
        return self._input_count - self.static_tail

    def _moved(self, last: tuple | None, key: tuple) -> list[int]:
        """The positions of the keyed inputs whose addresses differ between two keys that are
        otherwise the same ([] where anything else differs)."""
        if last is None or last[1:] != key[1:]:
            return []
        return [p for p, a, b in zip(self._keyed_positions, last[0], key[0]) if a != b]

    def _copy_from_now(self, positions: Sequence[int]) -> None:
        """The inputs at `positions` are copied into the graphs' static buffers from now on, and the
        graphs keyed by their addresses are dropped."""
        self._copied = sorted({*self._copied, *positions})
        self._keyed_positions = [p for p in self._keyed_positions if p not in positions]
        self._keyed = picker(self._keyed_positions)
        self.graphs.clear()
        self.warmed_up.clear()
        self._last_key, self._moves = None, 0

    def _note_moves(self, last: tuple | None, key: tuple) -> None:
        """Counts a new key that differs from the last new key only in the addresses of cotangents
        (the `static_tail`); at `_MOVES` in a row, every tensor of the tail is copied into the graphs'
        static buffers from then on."""
        moved = self._moved(last, key)
        self._moves = self._moves + 1 if moved and min(moved) >= self._static_from else 0
        if self._moves < _MOVES:
            return
        self._copy_from_now([p for p in self._keyed_positions if p >= self._static_from])
        self.stats.copied_cotangents = sum(p >= self._static_from for p in self._copied)

    def _note_automatic_moves(self, last: tuple | None, key: tuple, inputs: tuple) -> None:
        """Automatic graphs: the inputs (other than a backward's cotangents, see `_note_moves`) that
        moved while everything else stayed are copied from now on; a written one stops graphs (a
        replay would write the static copy, not the caller's tensor), as do more than
        `_AUTOMATIC_COPIED_BYTES` to copy."""
        moved = [p for p in self._moved(last, key) if p < self._static_from]
        if not moved:
            return
        written = [p for p in moved if p in self.written]
        copied = sum(inputs[p].nbytes for p in {*self._copied, *moved})
        if not written and copied <= _AUTOMATIC_COPIED_BYTES:
            self._copy_from_now(moved)
            self.stats.copied_inputs = sum(p < self._static_from for p in self._copied)
            return
        names = input_names(self.computation, self._input_count)  # NOTE: for the reason only: it reads the signature
        if written:
            self.stats.reason = (
                f"the computation writes {', '.join(names[p] for p in written)}, which moved between calls"
            )
        else:
            self.stats.reason = (
                f"inputs that move between calls ({', '.join(names[p] for p in moved)}) would need "
                f"{copied / 2**20:.0f} MiB copied per call"
            )

    def _note_numbers(self, key: tuple, inputs: tuple) -> None:
        """Counts a new key that differs from the last new key only in number inputs; at
        `_NUMBER_CHANGES` in a row, warns once, naming them (a graph bakes numbers in), or with
        `automatic` stops graphs. Notes moved inputs first. Called only for keys without a graph,
        so replays pay nothing."""
        last, self._last_key = self._last_key, key
        if self.automatic and not self.backward:
            self._note_automatic_moves(last, key, inputs)
        if self.static_tail:
            self._note_moves(last, key)
        changed = changed_numbers(last, key)
        self._number_changes = self._number_changes + 1 if changed else 0
        if self._number_changes < _NUMBER_CHANGES or self.stats.changing is not None:
            return
        names = input_names(self.computation, self._input_count)
        positions = [self._other_positions[i] for i in changed]
        changing = [names[p] for p in positions]
        stays = self._read_from_device_scalars(positions, inputs)
        if stays is None:
            self.stats.device_scalars = ", ".join(changing)
            return
        self.stats.changing = ", ".join(changing)
        if self.automatic:  # NOTE: no graph would ever replay; the key's cost is saved from now on
            self.stats.reason = f"number inputs change from call to call: {self.stats.changing} ({stays})"
        else:
            warnings.warn(f"{changing_numbers_message(changing, self.sizes)} ({stays})", CudaGraphWarning, stacklevel=4)

    def _read_from_device_scalars(self, positions: Sequence[int], inputs: tuple) -> str | None:
        """Switches to the computation that reads the number inputs at `positions` from 0-d tensors
        on the device, which each call writes (`_with_scalars`), and starts over with its graphs;
        returns None, or why those numbers stay numbers."""
        if self.device_scalars is None or self.backward:
            return "only a computation without autograd reads them from device scalars"
        device = next(a.device for a in inputs if isinstance(a, torch.Tensor))
        try:
            computation = self.device_scalars(tuple(positions), device)
        except NumberStaysNumber as error:
            return f"they stay numbers: {error}"
        self.computation = computation
        self._scalars = {p: torch.empty((), dtype=DTYPES[type(inputs[p])], device=device) for p in positions}
        self._tensors = None  # NOTE: the inputs at `positions` are tensors from now on: `key` starts over
        self.graphs.clear()
        self.warmed_up.clear()
        self._last_key, self._number_changes, self._moves = None, 0, 0
        return None

    def _with_scalars(self, inputs: tuple) -> tuple:
        """`inputs` with each number read from a device scalar written into it (a fill kernel,
        queued before the call's own work)."""
        values = list(inputs)
        for position, scalar in self._scalars.items():
            scalar.fill_(inputs[position])
            values[position] = scalar
        return tuple(values)

    def call_lending(self, inputs: tuple) -> tuple[Any, Lent | None]:
        """(the result, the `Lent` holding its last `lend` output leaves when a graph ran, else None:
        then the result holds them as ordinary tensors). `inputs` is a tuple, not unpacked again: an
        optimizer step passes hundreds."""
        scalars = bool(self._scalars)
        if scalars:
            inputs = self._with_scalars(inputs)
        if self.stats.reason is not None or (self.automatic and _capturing()):
            graph = None  # NOTE: inside a caller's own capture, automatic graphs keep out of its way
        else:
            graph = self._graph(inputs)
        if graph is None:
            self.stats.ungraphed_calls += 1
            if self._scalars and not scalars:  # this call switched to device scalars
                inputs = self._with_scalars(inputs)
            return self.computation(*inputs), None
        self.stats.replays += 1
        result, lent, kept = graph.replay(inputs, self.cloned)
        self.stats.lent_copies += kept
        return result, lent

    def _graph(self, inputs: tuple) -> _Graph | None:
        """A graph instance for these inputs that no caller's outputs hold, captured when needed."""
        key = self.key(inputs)
        if key is None:
            return None
        instances = self.graphs.get(key)
        if instances is None:
            self._note_numbers(key, inputs)
            if self._tensors is None:  # NOTE: it switched to device scalars: the key is another from now on
                return None
            if len(self.graphs) >= self.max_graphs or self.stats.reason is not None:
                return None
            calls = self.warmed_up.get(key, 0)
            if calls < self.warm_calls:
                if calls or len(self.warmed_up) < _MAX_WARMED_UP_KEYS:
                    self.warmed_up[key] = calls + 1
                return None
            instances = []
        held = []
        for instance in instances:
            held.append(instance.held())
            if not held[-1]:
                return instance
        if len(instances) == _INSTANCES:  # every instance is held: leave the oldest to its holders
            instances.pop(0)
            self.cloned |= held[0]
            self.stats.held_captures += 1
            self.stats.cloned_outputs = len(self.cloned)
        try:
            unviewed = [p for p in self._copied if p < self._static_from]  # copied because they moved
            graph = _Graph(self.computation, inputs, self._copied, self.lend, unviewed)
        except Exception as error:  # NOTE: whatever fails capture (sync, CPU work) means "no graph here"
            first_line = (str(error).strip().splitlines() or [""])[0]
            self.stats.reason = f"capture failed: {type(error).__name__}: {first_line}"
            if not self.automatic:
                warnings.warn(f"CUDA graph {self.stats.reason}; running without graphs", CudaGraphWarning, stacklevel=3)
            return None
        self.graphs[key] = [*instances, graph]
        self.stats.captures += 1
        return graph


def changing_numbers_message(names: Sequence[str], sizes: frozenset[str]) -> str:
    """The warning for number inputs (`names`, as `input_names` gives them) that took new values in
    calls in a row that found no graph; where all are symbolic tensor sizes (`sizes`, plain names),
    it says so and advises fixed sizes instead of 0-d tensors."""
    listed = ", ".join(names)
    if all(name.strip("'") in sizes for name in names):
        return (
            f"CUDA graphs: the tensor sizes {listed} took new values in {_NUMBER_CHANGES} calls in a row that found "
            "no graph to replay, and a graph is captured for one set of sizes (on its second call), so these calls "
            "ran without one; pad inputs to a few fixed sizes to replay graphs"
        )
    return (
        f"CUDA graphs: the number inputs {listed} took new values in {_NUMBER_CHANGES} calls in a row that found no "
        "graph to replay, and a graph replays the numbers it was captured with, so these calls ran without one; "
        "pass such inputs as 0-d CUDA tensors to replay one graph"
    )


def changed_numbers(last: tuple | None, key: tuple) -> list[int]:
    """The indices of the number inputs that differ between two address keys that are otherwise
    the same (same pointers and strides); [] when anything else differs or there are no numbers."""
    if last is None or len(key) < 3 or len(last) < 3 or last[:2] != key[:2]:
        return []
    return [i for i, (before, now) in enumerate(zip(last[2], key[2])) if before != now]


def input_names(computation: Callable[..., Any], count: int) -> list[str]:
    """The parameter names of `computation` (a generated computation names its inputs), or
    'input N' where it has no usable signature."""
    try:
        names = [repr(name) for name in inspect.signature(computation).parameters]
    except (TypeError, ValueError):
        names = []
    return names if len(names) >= count else [f"input {i}" for i in range(count)]
