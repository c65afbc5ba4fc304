"""The vocabulary of fusion: options, regions, partitions and why an op was left out.

The fusion pass (`fuse.py`) produces these; fusion executors (nvFuser) consume regions and
`compiler.examine` reports the decisions.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Protocol

from compiler.core.errors import check, short_repr
from compiler.core.ir import BoundSymbol, Proxy

FUEL_ENV = "FUSEBENCH_FUSION_FUEL"


@dataclass(frozen=True)
class FusionOptions:
    """Knobs of the fusion pass and the nvFuser executor (`jit(..., fusion=FusionOptions(...))`).

    min_region_size: compute ops (prims that are not shape ops) a region needs; 1 allows
        single-op fusions.
    horizontal: merge independent regions that share input tensors, are small, or share a shape.
    merge_same_shape: (with horizontal) also merge independent regions that only iterate over
        the same shape: few large fusions (an optimizer step's same-shape parameters in one). Off
        by default: nvFuser segments such a fusion into one kernel per disjoint part anyway (an
        Adam step over 32 same-shape parameters: 1 fusion, 32 kernels) and compiles it far longer
        (H100, gpt2-small Adam: 44.9 s merged against 1.6 s apart); kept apart, identical regions
        share one FusionDefinition (one nvFuser compilation per structure).
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
class Decision:
    """One op left outside every fusion, and why."""

    bsym: BoundSymbol
    reason: Reason
    detail: str = ""

    def __str__(self) -> str:
        line = str(self.bsym).splitlines()[0]
        return f"{line}\n    -> {self.reason.value}{': ' + self.detail if self.detail else ''}"


@dataclass(frozen=True)
class Region:
    """A fused region: its prims in trace order, the values it reads and the values it returns;
    `written`: names of its inputs that the trace writes back (inside the region or after it)."""

    name: str
    bsyms: tuple[BoundSymbol, ...]
    inputs: tuple[Proxy, ...]
    outputs: tuple[Proxy, ...]
    written: frozenset[str] = frozenset()


class FusionExecutor(Protocol):
    """What the fusion pass needs from a fusion executor."""

    name: str
    options: FusionOptions

    def claim(self, bsym: BoundSymbol) -> tuple[Reason, str] | None:
        """None if the executor can run `bsym` inside a region, else (reason, detail)."""

    def region_impl(self, region: Region) -> Callable:
        """The callable that runs `region` (args: region.inputs; returns region.outputs)."""


@dataclass
class Partition:
    """The result of `partition`: what runs where, in a valid order."""

    units: list[Region | BoundSymbol]
    decisions: list[Decision] = field(default_factory=list)

    @property
    def regions(self) -> list[Region]:
        """The fused regions, in trace order."""
        return [u for u in self.units if isinstance(u, Region)]


def fusion_executor(executors: Sequence[Any]) -> Any | None:
    """The first executor that forms regions (has `region_impl`), or None."""
    return next((e for e in executors if hasattr(e, "region_impl")), None)
