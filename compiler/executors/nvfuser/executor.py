"""The nvFuser executor: claims prims for fusion regions and runs each region as a FusionDefinition.

`nvfuser_direct` is imported lazily (first fusion definition, or the availability check), never
when `compiler` is imported. A region's callable (`NvFusion`) caches one FusionDefinition per
input descriptor (dtype, rank, broadcast dims, contiguity / stride order of each tensor, the type
of each symbolic scalar); the region's device and shapes are guarded by the cache entry's
prologue. On each call it looks the definition up by the tensors' strides (plus shapes where
the trace has symbolic sizes); a call whose tensors are laid out as the last call's (one C++
check, `TensorChecks`) reuses the last call's definition without reading them.

Definitions are shared by structure, process-wide (`nvfuser_definitions.py`): each
FusionDefinition is kept under its source with names canonicalised (`structure_key`), so regions
that differ only in their proxies' names, e.g. the same Adam update of every parameter of one rank
and dtype, or the same fusion in a function jitted again, are defined and compiled by nvFuser once
(`NvFuserStats.reused` counts the others). A region of the same fingerprint as one written before
(the same fusion in another layer, `define/fingerprint.py`) does not even have its source written.

If nvFuser fails to define, compile or run a region, the region falls back to running its prims
with torch, with one `FusionFallbackWarning` naming the fusion and the error; `fallback=False`
(or FUSEBENCH_NVFUSER_FALLBACK=0) raises instead (`executors/region_fallback.py`, shared with
the Inductor executor).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from compiler.core.errors import check
from compiler.core.executor import FusionExecutor, FusionOptions, Reason, Region
from compiler.core.gather import picker, stride
from compiler.core.ir import BoundSymbol, NumberProxy, TensorProxy, Trace
from compiler.core.python_code import code_for
from compiler.core.tensor_checks import TensorChecks
from compiler.executors.nvfuser.define.aliasing import (
    copied_write_backs,
    distinct_outputs,
    fresh_outputs,
    written_inputs,
)
from compiler.executors.nvfuser.define.broadcast import iteration_inputs
from compiler.executors.nvfuser.define.claims import unsupported
from compiler.executors.nvfuser.define.fingerprint import SOURCES
from compiler.executors.nvfuser.define.translations import (
    ScalarDesc,
    TensorDesc,
    describe,
    layout_descriptor,
)
from compiler.executors.nvfuser.run.batch import BatchedFusion
from compiler.executors.nvfuser.run.edge_sizes import EdgeSizes
from compiler.executors.nvfuser.run.kernel_db import compiling
from compiler.executors.nvfuser.run.shared_definitions import DEFINITIONS
from compiler.executors.region_fallback import (
    FALLBACK_ENV,  # noqa: F401  (re-exported: importers name it from here)
    FusionFallbackWarning,
    RegionFallback,
    fallback_default,
)
from compiler.executors.region_split import torch_function
from compiler.passes.expanded_inputs import hoistable, without

_MAX_SEEN_COMPILE_KEYS = 4096


class ExecutorUnavailableError(RuntimeError):
    """An executor was asked for by name but cannot run on this machine."""


@functools.cache
def unavailable_reason() -> str | None:
    """Why nvFuser cannot run here (no CUDA, nvfuser_direct missing or failing to import), or None."""
    reasons = []
    if not torch.cuda.is_available():
        reasons.append("CUDA is not available (torch.cuda.is_available() is False)")
    try:
        installed = importlib.util.find_spec("nvfuser_direct") is not None
    except ValueError:  # NOTE: already imported without a module spec (e.g. injected by a tool)
        installed = True
    if not installed:
        reasons.append(
            "the nvfuser_direct module is not installed (pip install the nvFuser wheel matching your torch "
            "and CUDA, e.g. nvfuser-cu130-torch210)"
        )
    elif not reasons:
        try:
            importlib.import_module("nvfuser_direct")
        except Exception as error:  # NOTE: any import failure (missing symbol, CUDA mismatch) counts
            reasons.append(f"importing nvfuser_direct failed: {type(error).__name__}: {error}")
    return "; ".join(reasons) or None


def nvfuser_direct() -> Any:
    """The `nvfuser_direct` module (imported on first use)."""
    return importlib.import_module("nvfuser_direct")


def nvfuser_version() -> str:
    """The installed nvfuser_direct's version ('m.n.p+git<sha>')."""
    return str(nvfuser_direct().version())


# The nvfuser_direct release whose bugs the definitions work around (the comments that say
# "nvfuser_direct 0.2.36": segment_sets before slices and squeezes, materialised broadcasts,
# take_along_axis's limits, write-backs copied instead of aliased). On any other release
# tests/compiler/executors/nvfuser/test_gpu.py fails until each workaround has been checked there,
# retired where the release fixed it, and this constant moved.
WORKAROUNDS_CHECKED_ON = "0.2.36"


def workarounds_checked(version: str) -> bool:
    """Whether nvfuser_direct `version` ('m.n.p+git<sha>') is the release the workarounds were checked on."""
    return version.split("+")[0] == WORKAROUNDS_CHECKED_ON


@dataclass
class NvFuserStats:
    """Counters of one nvFuser executor (one per jitted function)."""

    definitions: int = 0  # FusionDefinitions this function built
    compilations: int = 0  # kernel compilations its calls caused (none for a definition's compiled layouts)
    fallbacks: int = 0
    reused: int = 0  # regions that found their definition already built (here or by another function)
    deferred: int = 0  # calls run with torch: edge sizes met for the first time (nvfuser_edge_sizes.py)


# ---------------------------------------------------------------------------------------------
# Runners: how a region's prims are executed


class TorchRunner:
    """Runs a region's prims with torch (FusionOptions(runner="torch"))."""

    bare_execute = None  # a call always runs the region's torch function (see NvFuserRunner.bare_execute)

    def __init__(self, region: Region) -> None:
        self.fn = torch_function(region)

    def run(self, fusion: NvFusion, args: tuple, key: tuple) -> Any:
        return self.fn(*args)


class _Definition:
    """A FusionDefinition as one region runs it.

    `copies`: the inputs whose written values it returns for the runner to copy
    (nvfuser_aliasing.py). `taken`: the region inputs it takes (None: all; a scalar input the
    definition does not read is left out, see nvfuser_translate.py). `execute(inputs)`:
    `fd.execute` until nvFuser has built the definition's executor cache, then that cache's own
    `execute`, which skips the Python wrapper's checks: host time every call would pay again for
    inputs the prologue has already guarded.
    """

    __slots__ = ("copies", "device", "execute", "fd", "taken")

    def __init__(self, fd: Any, copies: list[int], device: int | None, taken: list[int] | None = None) -> None:
        self.fd, self.copies, self.device, self.taken = fd, copies, device, taken
        self.execute: Callable[[list], list] = self._first_execute

    def taken_from(self, args: tuple) -> list:
        """The region's arguments this definition takes, in order."""
        return list(args) if self.taken is None else [args[i] for i in self.taken]

    def _first_execute(self, inputs: list, **options: Any) -> list:
        if self.device is not None:
            options["device"] = self.device
        outputs = self.fd.execute(inputs, **options)
        cache = getattr(self.fd, "fec", None)
        if cache is not None:
            device = self.device
            self.execute = cache.execute if device is None else functools.partial(cache.execute, device=device)
        return outputs

    def execute_compiling(self, inputs: list) -> list:
        """`execute` for a call that may compile a kernel: with nvFuser's on-disk kernel database
        (nvfuser_kernel_db.py) when it is on."""
        with compiling(nvfuser_version()) as enable:
            if not enable:
                return self.execute(inputs)
            if getattr(self.fd, "fec", None) is None:
                return self._first_execute(inputs, _enable_options=enable)
            return self.execute(inputs, _enable_options=enable)


class NvFuserRunner:
    """Runs a region as an nvFuser FusionDefinition, one per input descriptor."""

    def __init__(self, region: Region) -> None:
        self.region = region
        self.by_key: dict[tuple, _Definition] = {}
        self._hot_key: tuple | None = None  # the last call's key (NvFusion passes the same tuple again)
        self._hot_entry: _Definition | None = None
        self.by_descriptor: dict[tuple, _Definition] = {}
        self.written_idx = [i for i, p in enumerate(region.inputs) if p.name in region.written]
        self.iteration = iteration_inputs(region)
        self.shape_scalar_idx: list[int] = []
        self.seen_compile_keys: set[tuple] = set()
        self.fresh: dict[tuple, bool] = {}  # key -> whether nvFuser allocated its outputs (`distinct`)
        self.edge_sizes = EdgeSizes(region)
        # the last call's definition's execute where a call of that key needs nothing else (it takes
        # every argument, copies nothing back, its outputs need no aliasing check), else None
        self.bare_execute: Callable[[list], list] | None = None
        self.device: int | None = None
        if not any(isinstance(p, TensorProxy) for p in region.inputs):
            outputs = [p for b in region.bsyms for p in b.outputs if isinstance(p, TensorProxy)]
            self.device = (outputs[0].device.index or 0) if outputs else None

    def definition(self, fusion: NvFusion, args: tuple, key: tuple) -> _Definition:
        """The FusionDefinition for these arguments (defined on first sight of their descriptor)."""
        descriptors = tuple(describe(p, a, p.name in self.iteration) for p, a in zip(self.region.inputs, args))
        entry = self.by_descriptor.get(descriptors)
        if entry is None:
            # NOTE: a region of the same fingerprint as one written before (another layer's) is not written again
            source, fn_name, structure, shape_scalars, taken = SOURCES.written(self.region, descriptors)
            nvf = nvfuser_direct()
            fd = DEFINITIONS.get(nvf, structure)
            if fd is None:
                scope: dict[str, Any] = {"DataType": nvf.DataType}
                exec(code_for(source, f"<{self.region.name}>"), scope)
                fd = nvf.FusionDefinition()
                with fd:
                    scope[fn_name](fd)
                DEFINITIONS.put(nvf, structure, fd)
                fusion.executor.stats.definitions += 1
            else:
                fusion.executor.stats.reused += 1
            copies = written_inputs(self.region) if copied_write_backs(self.region, descriptors) else []
            subset = None if len(taken) == len(self.region.inputs) else list(taken)
            entry = self.by_descriptor[descriptors] = _Definition(fd, copies, self.device, subset)
            self.shape_scalar_idx = list(shape_scalars)
        self.by_key[key] = entry
        return entry

    def run(self, fusion: NvFusion, args: tuple, key: tuple) -> Any:
        self.bare_execute = None
        entry = self._hot_entry if key is self._hot_key else self.by_key.get(key)
        compiles = False
        if entry is None:
            entry = self.definition(fusion, args, key)
            compiles = self.count_compilation(fusion, entry, args, key)
        elif self.shape_scalar_idx:
            compiles = self.count_compilation(fusion, entry, args, key)
        if compiles is None:  # edge sizes met for the first time: torch runs this call (nvfuser_edge_sizes.py)
            fusion.executor.stats.deferred += 1
            return fusion.fallback.function()(*args)
        self._hot_key, self._hot_entry = key, entry
        fd, copies = entry.fd, entry.copies
        fusion.last_definition = fd
        taken = entry.taken_from(args)
        outputs = entry.execute_compiling(taken) if compiles else entry.execute(taken)
        if copies:
            for i, value in zip(copies, outputs[len(outputs) - len(copies) :]):
                args[i].copy_(value)
            outputs = outputs[: len(outputs) - len(copies)]
        checked = bool(self.written_idx) or len(outputs) > 1
        if checked:
            outputs = self.distinct(outputs, args, key, compiles)
        bare = not copies and entry.taken is None and not self.shape_scalar_idx
        self.bare_execute = entry.execute if bare and (not checked or self.fresh.get(key) is True) else None
        return outputs

    def distinct(self, outputs: list, args: tuple, key: tuple, compiles: bool) -> list:
        """`distinct_outputs`, skipped where nvFuser allocated every output (none shares memory with
        another or with an input). Which outputs alias is fixed by the kernels of a layout, so that
        is asked once per key (again on a new kernel); sizes set by scalars ask on every call."""
        if self.shape_scalar_idx:
            return distinct_outputs(outputs, [args[i] for i in self.written_idx])
        fresh = self.fresh.get(key)
        if fresh is None or compiles:
            fresh = fresh_outputs(outputs, args)
            if len(self.fresh) < _MAX_SEEN_COMPILE_KEYS:
                self.fresh[key] = fresh
        return outputs if fresh else distinct_outputs(outputs, [args[i] for i in self.written_idx])

    def count_compilation(self, fusion: NvFusion, entry: _Definition, args: tuple, key: tuple) -> bool | None:
        """Counts a compilation when nvFuser has no kernel yet for this layout and these sizes
        (and says whether it has none); None, counting nothing, when that kernel would be for
        edge sizes this definition meets for the first time (nvfuser_edge_sizes.py).

        Only new layouts, and new values of scalars that set sizes (slice bounds, reshape sizes),
        can need a new kernel, so only those calls ask nvFuser (`fec.is_compiled`).
        """
        fd = entry.fd
        compile_key = (id(fd), key, *(args[i] for i in self.shape_scalar_idx))
        if compile_key in self.seen_compile_keys:
            return False
        compiles = not hasattr(fd, "fec") or not fd.fec.is_compiled(entry.taken_from(args))
        if compiles and self.shape_scalar_idx and self.edge_sizes.first_sight(fd, args):
            return None
        if compiles:
            fusion.executor.stats.compilations += 1
        if len(self.seen_compile_keys) < _MAX_SEEN_COMPILE_KEYS:
            self.seen_compile_keys.add(compile_key)
        return compiles


# ---------------------------------------------------------------------------------------------
# A region's callable


@dataclass(frozen=True)
class InputRecord:
    """What one argument of a fusion's last call looked like."""

    name: str
    shape: tuple[int, ...] | None
    stride: tuple[int, ...] | None
    dtype: torch.dtype | type
    device: torch.device | None
    value: Any = None

    def __str__(self) -> str:
        if self.shape is None:
            return f"{self.name}: {self.dtype.__name__} = {self.value!r}"
        return f"{self.name}: {self.dtype} {list(self.shape)} stride={list(self.stride)} on {self.device}"


class NvFusion:
    """The callable behind an `nvFusionN` bound symbol: runs its region, records its last inputs."""

    LAYOUT_CHANGES = 2  # layouts `_same_layout` learns at most (the first included); the next change stops it

    def __init__(self, region: Region, executor: NvFuserExecutor, *, piece: bool = False) -> None:
        self.region = region
        self.name = region.name
        self.executor = executor
        inputs = region.inputs
        self._tensor_idx = [i for i, p in enumerate(inputs) if isinstance(p, TensorProxy)]
        self._sized_idx = [i for i in self._tensor_idx if any(isinstance(s, NumberProxy) for s in inputs[i].shape)]
        self._tensors = picker(self._tensor_idx)
        self._scalar_idx = [i for i, p in enumerate(inputs) if not isinstance(p, TensorProxy)]
        # NOTE: a call whose tensors have the last call's type, dtype, device, sizes and strides
        # (one C++ check) reuses its key: reading the tensors' strides from Python costs several times as much
        self._same_layout = TensorChecks()
        self._layout_changes = 0
        self.runner: TorchRunner | NvFuserRunner = (
            NvFuserRunner(region) if executor.options.runner == "nvfuser" else TorchRunner(region)
        )
        # NOTE: a region nvFuser fails on is cut into pieces, NvFusions whose fallbacks (`piece`) the
        # region they were cut from reports
        piece_of = functools.partial(NvFusion, executor=executor, piece=True)
        self.fallback = RegionFallback(region, "nvFuser", FusionFallbackWarning, piece_of, executor.name, quiet=piece)
        self.last_key: tuple | None = None
        self.last_inputs: list[InputRecord] = []
        self.last_definition: Any = None
        self.calls = 0
        # NOTE: a call laid out as the last one (the check above), which ran its definition's execute
        # alone (`NvFuserRunner.bare_execute`), runs that execute directly: the runner's lookups cost
        # host time on every call of every fusion
        self._bare: Callable[[list], list] | None = None

    def __call__(self, *args: Any) -> Any:
        tensors = self._tensors(args)
        if self._same_layout.check(*tensors):
            bare = self._bare
            if bare is not None:  # the hot path: laid out as the last call, which needed only its execute
                self.calls += 1
                try:
                    return bare(list(args))
                except Exception as error:
                    return self._failed(error, args)
            key = self.last_key
        else:
            key = self._layout_key(args, tensors)
        if self._scalar_idx:
            for i in self._scalar_idx:
                record = self.last_inputs[i]
                if record.value is not args[i]:
                    self.last_inputs[i] = InputRecord(record.name, None, None, record.dtype, None, args[i])
        self.calls += 1
        if self.fallback.error is not None:
            return self.fallback.run(args)
        try:
            outputs = self.runner.run(self, args, key)
        except Exception as error:
            return self._failed(error, args)
        self._bare = None if self._scalar_idx else self.runner.bare_execute
        return outputs

    def _failed(self, error: Exception, args: tuple) -> Any:
        """A call that raised: re-raised where fallbacks are off, else run with torch from then on."""
        self._bare = None
        if not self.executor.fallback:
            raise error
        return self.fallback.fall_back(error, args, self.executor.stats)

    @property
    def fallback_error(self) -> BaseException | None:
        """The error that made this region run with torch from then on, or None."""
        return self.fallback.error

    def _layout_key(self, args: tuple, tensors: tuple) -> tuple:
        """The definition key of a call whose tensors are not laid out as the last call's (or
        before `_same_layout` has learned them): their strides, plus their shapes where the region
        has symbolic sizes. Learns the new layout, up to `LAYOUT_CHANGES` times: a region whose
        layout or sizes keep changing (symbolic sizes met anew every call) keeps this path."""
        key = tuple(map(stride, tensors))
        if self._sized_idx:
            key += tuple([args[i].shape for i in self._sized_idx])
        if key != self.last_key:
            self.last_key = key
            self.last_inputs = self._records(args)
        if self._layout_changes < self.LAYOUT_CHANGES:
            self._layout_changes += self._same_layout.learned
            self._same_layout = TensorChecks(exact_strides=[True] * len(tensors))
            if self._layout_changes < self.LAYOUT_CHANGES:
                self._same_layout.learn(*tensors)
        return key

    def _records(self, args: tuple) -> list[InputRecord]:
        records = []
        for p, a in zip(self.region.inputs, args):
            if isinstance(a, torch.Tensor):
                records.append(InputRecord(p.name, tuple(a.shape), tuple(a.stride()), a.dtype, a.device))
            else:
                records.append(InputRecord(p.name, None, None, type(a), None, a))
        return records

    def descriptors(self) -> tuple[TensorDesc | ScalarDesc, ...] | None:
        """The input descriptors of the last call (None before the first call)."""
        if not self.last_inputs:
            return None

        iteration = iteration_inputs(self.region)
        return tuple(
            layout_descriptor(p, r.shape, r.stride, p.name in iteration)
            if r.shape is not None
            else ScalarDesc(p.python_type)
            for p, r in zip(self.region.inputs, self.last_inputs)
        )

    def __repr__(self) -> str:
        return f"<{self.name}: {len(self.region.bsyms)} prims, runner={self.executor.options.runner}>"


# ---------------------------------------------------------------------------------------------
# The executor


class NvFuserExecutor(FusionExecutor):
    """Claims prims nvFuser can run and turns regions of them into `NvFusion` callables."""

    name = "nvfuser"
    region_prefix = "nvFusion"
    batch_prefix = "nvBatch"
    resize_splits = True
    batches = True
    expands_inputs = True

    def __init__(self, options: FusionOptions | None = None, fallback: bool | None = None) -> None:
        self.options = options or FusionOptions()
        self.fallback = fallback_default() if fallback is None else bool(fallback)
        self.stats = NvFuserStats()
        reason = unavailable_reason() if self.options.runner == "nvfuser" else None
        check(
            reason is None,
            lambda: (
                f"the nvfuser executor is unavailable on this machine: {reason}. Use executors=['torch'] "
                "(the default here), or FusionOptions(runner='torch') to form the same regions and run them "
                "with torch."
            ),
            ExecutorUnavailableError,
        )

    def claim(self, bsym: BoundSymbol) -> tuple[Reason, str] | None:
        """None if nvFuser can run `bsym` in a region, else (reason, detail)."""
        refusal = unsupported(bsym, matmul=self.options.matmul)
        if refusal is None and self.options.runner == "nvfuser":
            for p in (*bsym.inputs, *bsym.outputs):
                if isinstance(p, TensorProxy) and p.device.type != "cuda":
                    return Reason.DEVICE, f"{p.name} is on {p.device}"
        return refusal

    def region_impl(self, region: Region) -> Callable:
        """The callable running `region`."""
        return NvFusion(region, self)

    def batch_impl(self, flat: Region, numels: Sequence[int], one_dim: bool) -> BatchedFusion:
        """The callable running same-structure regions of `numels` elements each (1-D ones when
        `one_dim`) as `flat`, their common region over 1-D inputs of all their elements
        (passes/batch_regions.py). The members' 0-d inputs it broadcasts (numbers read from device
        scalars) it reads expanded, as `expanded_inputs` has the other writing regions do."""
        hoisted = hoistable(flat)
        if not hoisted:
            return BatchedFusion.of(self.region_impl(flat), flat, numels, one_dim)
        runs = without(flat, hoisted)
        return BatchedFusion.of(self.region_impl(runs), flat, numels, one_dim, runs)


def region_fusions(trace: Trace) -> Sequence[NvFusion]:
    """The `NvFusion` callables of a fused trace, in order (a batch's: the one it runs)."""
    impls = [getattr(b.sym, "impl", None) for b in trace.bsyms]
    impls = [impl.flat if isinstance(impl, BatchedFusion) else impl for impl in impls]
    return [impl for impl in impls if isinstance(impl, NvFusion)]
