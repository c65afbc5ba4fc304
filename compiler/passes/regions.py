"""What the fusion pass decides: the partition of a trace into regions, and why an op was left out.

The fusion pass (`fuse.py`) produces these; `compiler.examine` reports the decisions. Regions,
the reasons and the fusion executor's protocol and options are in `compiler/core/executor.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from compiler.core.executor import Reason, Region
from compiler.core.ir import BoundSymbol


@dataclass(frozen=True)
class Decision:
    """One op left outside every fusion, and why."""

    bsym: BoundSymbol
    reason: Reason
    detail: str = ""

    def __str__(self) -> str:
        line = str(self.bsym).splitlines()[0]
        return f"{line}\n    -> {self.reason.value}{': ' + self.detail if self.detail else ''}"


@dataclass
class Partition:
    """The result of `partition`: what runs where, in a valid order."""

    units: list[Region | BoundSymbol]
    decisions: list[Decision] = field(default_factory=list)

    @property
    def regions(self) -> list[Region]:
        """The fused regions, in trace order."""
        return [u for u in self.units if isinstance(u, Region)]
