"""What an executor is: the protocol every executor follows, the fusion options, and the registry.

An `Executor` has a `name` and answers `implementation(bsym)`: the callable that runs one bound
symbol, or None when it does not take it. Codegen asks the executors in the order the user gave
and takes the first answer; torch answers for every prim and always comes last.

A `FusionExecutor` also forms regions: the fusion pass asks it to `claim` each prim (None, or a
`Reason` it cannot), then hands each `Region` of claimed prims to `region_impl`, which returns
the callable that runs it. `batches` says whether `batch_impl` can run same-structure regions as
one call (`passes/batch_regions.py`). Its knobs are `FusionOptions`.

The registry maps names (`jit(executors=["nvfuser", "sdpa", "torch"])`) to `ExecutorSpec`s: how
to make the executor, and why it cannot run here (None when it can). Adding a backend is one
class plus one `register_executor` call (`compiler/executors/__init__.py` registers the bundled
ones). This module sits below `passes/` so that passes, executors and the runtime share it.
"""

from __future__ import annotations

import abc
import enum
import os
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, fields
from typing import Any

from compiler.core.errors import check, short_repr
from compiler.core.ir import BoundSymbol, NumberProxy, Proxy, TensorProxy

FUEL_ENV = "FUSEBENCH_FUSION_FUEL"


@dataclass(frozen=True)
class FusionOptions:
    """Knobs of the fusion pass and the nvFuser executor (`jit(..., fusion=FusionOptions(...))`).

    min_region_size: compute ops (prims that cost torch a kernel: all but views; a cat copies) a
        region needs; 1 allows single-op fusions.
    horizontal: merge independent regions that share input tensors, are small, or share a shape.
    merge_same_shape: (with horizontal) also merge independent regions that only iterate over
        the same shape: few large fusions (an optimizer step's same-shape parameters in one). Off
        by default: nvFuser segments such a fusion into one kernel per disjoint part anyway (an
        Adam step over 32 same-shape parameters: 1 fusion, 32 kernels) and compiles it far longer;
        kept apart, identical regions share one FusionDefinition (one nvFuser compilation per
        structure).
    small_region_size: at most this many compute ops make a region "small" for horizontal merging.
    max_region_tensors: horizontal merging stops before a region reads and writes more tensors.
    batch_numel: regions of the same structure that only write back into their inputs, elementwise
        over tensors of at most this many elements, run as one fusion over their inputs laid end
        to end (`passes/batch_regions.py`: an optimizer step's biases and norm weights); 0: never.
    fuel: keep only the first `fuel` regions (None: no limit; env FUSEBENCH_FUSION_FUEL).
    matmul: let nvFuser run matmul/linear (by default they go to torch, i.e. cuBLAS).
    runner: "nvfuser", or "torch" to run each region's prims with torch: the same partition,
        codegen and fallback plumbing without nvFuser (CPU tests; bisecting numerics on GPU).
    """

    min_region_size: int = 2
    horizontal: bool = True
    merge_same_shape: bool = False
    small_region_size: int = 4
    max_region_tensors: int = 256
    batch_numel: int = 16384
    fuel: int | None = None
    matmul: bool = False
    runner: str = "nvfuser"

    def __post_init__(self) -> None:
        for field_ in fields(self):
            value = getattr(self, field_.name)
            ok, expected = _FIELD_CHECKS[field_.name]
            check(
                ok(value),
                lambda n=field_.name, v=value, e=expected: f"FusionOptions.{n}={short_repr(v)}: expected {e}",
                ValueError,
            )

    @staticmethod
    def from_any(value: FusionOptions | dict | None) -> FusionOptions:
        """Options from a FusionOptions, a dict of its fields, or None (defaults + environment)."""
        if isinstance(value, FusionOptions):
            return value
        check(
            value is None or isinstance(value, dict),
            lambda: f"jit(fusion={short_repr(value)}): expected a FusionOptions, a dict of its fields or None",
            TypeError,
        )
        settings = dict(value or {})
        known = {f.name for f in fields(FusionOptions)}
        unknown = sorted((k for k in settings if k not in known), key=str)
        check(
            not unknown,
            lambda: f"jit(fusion=...): unknown option(s) {unknown}; expected keys from {sorted(known)}",
            TypeError,
        )
        if "fuel" not in settings and os.environ.get(FUEL_ENV):
            fuel = os.environ[FUEL_ENV]
            check(fuel.isdigit(), lambda: f"{FUEL_ENV}={fuel!r}: expected a whole number >= 0", ValueError)
            settings["fuel"] = int(fuel)
        return FusionOptions(**settings)


def _int_at_least(low: int) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= low


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool)


# NOTE: field name -> (accepts the value, what is expected); FusionOptions validates every field.
_FIELD_CHECKS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "min_region_size": (_int_at_least(1), "an int >= 1"),
    "horizontal": (_is_bool, "True or False"),
    "merge_same_shape": (_is_bool, "True or False"),
    "small_region_size": (_int_at_least(0), "an int >= 0"),
    "max_region_tensors": (_int_at_least(1), "an int >= 1"),
    "batch_numel": (_int_at_least(0), "an int >= 0"),
    "fuel": (lambda v: v is None or _int_at_least(0)(v), "None or an int >= 0"),
    "matmul": (_is_bool, "True or False"),
    "runner": (lambda v: v in ("nvfuser", "torch"), "'nvfuser' or 'torch'"),
}


class Reason(enum.Enum):
    """Why an op is not inside a fusion."""

    HOST = "scalar arithmetic: computed on the host, passed to fusions as a scalar input"
    NO_TRANSLATION = "no nvFuser translation for this prim"
    LEFT_TO_TORCH = "deliberately left to another executor"
    DTYPE = "dtype not supported by nvFuser"
    DEVICE = "not on a CUDA device"
    CLAIMED = "claimed by another executor"
    TOO_SMALL = "region too small"
    SHAPE_ONLY = "region made only of shape ops"
    CYCLE = "fusing it would create a cycle"
    FUEL = "fusion fuel exhausted"


@dataclass(frozen=True)
class Region:
    """A fused region: its prims in trace order, the values it reads and the values it returns;
    `written`: names of its inputs that the trace writes back (inside the region or after it)."""

    name: str
    bsyms: tuple[BoundSymbol, ...]
    inputs: tuple[Proxy, ...]
    outputs: tuple[Proxy, ...]
    written: frozenset[str] = frozenset()

    @classmethod
    def of(
        cls, name: str, bsyms: Sequence[BoundSymbol], returned: Callable[[int], bool], written: Collection[str]
    ) -> Region:
        """The region of `bsyms`: it reads the tensors and numbers they read and do not define, and
        returns those they define whose id `returned` accepts; `written`: names written back."""
        defined: dict[int, Proxy] = {}
        inputs: dict[int, Proxy] = {}
        for b in bsyms:
            for p in b.inputs:
                if id(p) not in defined and isinstance(p, (TensorProxy, NumberProxy)):
                    inputs.setdefault(id(p), p)
            for p in b.outputs:
                defined[id(p)] = p
        outputs = tuple(p for key, p in defined.items() if returned(key))
        kept = frozenset(p.name for p in inputs.values() if p.name in written)
        return cls(name, tuple(bsyms), tuple(inputs.values()), outputs, kept)


class Executor(abc.ABC):
    """Runs bound symbols of an execution trace: `implementation(bsym)` is the callable for
    `bsym`, or None when this executor does not take it."""

    name: str

    @abc.abstractmethod
    def implementation(self, bsym: BoundSymbol) -> Callable | None:
        """The callable that runs `bsym` (its arguments in order), or None."""


class FusionExecutor(Executor):
    """An executor that runs regions of prims as one call each (nvFuser, Inductor)."""

    options: FusionOptions
    #: its regions are named `{region_prefix}N` in traces (nvFuser's `nvFusion0`, Inductor's `inductor0`)
    region_prefix: str
    #: whether `batch_impl` can run same-structure small regions as one call
    batches: bool = False
    #: a batch of regions is named `{batch_prefix}N` in traces (nvFuser's `nvBatch0`)
    batch_prefix: str = "batch"
    #: whether a batch runs its members' common region over their inputs laid end to end
    #: (`batch_impl`: nvFuser, one kernel) rather than as one region holding every member's prims
    #: (`region_impl` of their union: Inductor, one call, no copies in or out)
    batch_flat: bool = True
    #: whether one resize (cat, slice) anywhere in a region changes how the executor schedules all of
    #: it (nvFuser's resize scheduler): the fusion pass then leaves small resizes to torch (`fuse.py`)
    resize_splits: bool = False
    #: whether a region writing back into its inputs should read broadcasts of its other inputs
    #: already expanded, made outside it (`passes/expanded_inputs.py`: nvFuser copies a written value
    #: computed from a broadcast made inside the fusion through a second kernel)
    expands_inputs: bool = False

    @abc.abstractmethod
    def claim(self, bsym: BoundSymbol) -> tuple[Reason, str] | None:
        """None if this executor can run `bsym` inside a region, else (reason, detail)."""

    @abc.abstractmethod
    def region_impl(self, region: Region) -> Callable:
        """The callable that runs `region` (args: `region.inputs`; returns `region.outputs`)."""

    def batch_impl(self, flat: Region, numels: Sequence[int], one_dim: bool) -> Callable:
        """The callable running same-structure regions of `numels` elements each as `flat`, their
        common region over 1-D inputs (only called when `batches` and `batch_flat` are True)."""
        raise NotImplementedError(f"the {self.name} executor does not batch regions")

    def implementation(self, bsym: BoundSymbol) -> Callable | None:
        """A fusion executor runs regions only; single prims go to the other executors."""
        return None


@dataclass(frozen=True)
class ExecutorSpec:
    """A registered executor: `make(fusion, fallback)` builds one for a jitted function;
    `unavailable_reason()` says why it cannot run on this machine (None when it can)."""

    name: str
    make: Callable[[FusionOptions, bool | None], Executor]
    unavailable_reason: Callable[[], str | None]
    description: str


EXECUTORS: dict[str, ExecutorSpec] = {}


def register_executor(spec: ExecutorSpec) -> None:
    """Makes `spec.name` selectable in `jit(executors=[...])`; a name is registered once."""
    check(
        spec.name not in EXECUTORS,
        lambda: f"register_executor: an executor named {spec.name!r} is already registered",
        ValueError,
    )
    EXECUTORS[spec.name] = spec


def fusion_executor(executors: Sequence[Executor]) -> FusionExecutor | None:
    """The first executor that forms regions, or None."""
    return next((e for e in executors if isinstance(e, FusionExecutor)), None)
