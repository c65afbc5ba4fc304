"""Peers' measurements kept between runs, so that a run on every change measures what changed.

A change to fusebench's compiler changes none of its peers' numbers: torch.compile, thunder,
torch.optim or a hand-written nvFuser definition run the same code on the same inputs. A run
therefore reuses a peer's earlier measurement (variants marked `Variant.reusable`) where nothing it
depends on changed: the same machine and GPU, the same torch, CUDA, nvFuser, thunder and Python,
the same thread count, sizes, repeat budget and precision, and the same harness and suite code
(every file of the `fusebench` and suite packages, hashed). Anything else differing, the whole
cache is stale and every peer is measured again.

A peer that ran past the unit time limit (`--unit-timeout`) is as reproducible: it is reused, as
crashed, by runs whose limit is no longer than the one it ran past; any other crash (a dead worker)
may be the machine's and is measured again.

Eager is never reused: measured on every run, it is the control. A reused peer whose case's eager
time now differs from the eager time measured beside it by more than `DRIFT` (the machine or its
clocks are not as they were) is measured again in the same run, unless the case's eager time moves
that much from run to run anyway: the cache keeps each case's eager medians of the last `HISTORY`
runs, and where they spread wider (`NOISE_SIGMAS` robust standard deviations of their logarithms,
from three runs on), that spread is the tolerance. A host-bound case on a shared machine, whose
eager time swings by a third between runs, would otherwise have its peers measured again on most
runs, their new numbers no more certain than the kept ones.

The cache is `<results>/<machine>/peers.fusebench` (not a `.json` file: ASV reads those), written
atomically. `fusebench run --remeasure-peers` (or `FUSEBENCH_REUSE_PEERS=0`, which `compare`'s
runs set) measures every peer and refreshes it.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from fusebench.files import atomic_write_json
from fusebench.measure.machine import MachineInfo
from fusebench.measure.outcome import Outcome

FILE_NAME = "peers.fusebench"
REUSE_ENV = "FUSEBENCH_REUSE_PEERS"  # "0": measure every peer (compare's side runs set it)
DRIFT = 0.10  # the largest change of a case's eager time under which its peers' times still stand
HISTORY = 8  # eager medians kept per case, the latest runs'
NOISE_SIGMAS = 3.0  # how far beyond its own run-to-run spread a case's eager time must move to be drift
# A peer's error or wrong result is as reproducible as its time (the same code on the same inputs
# and libraries); a crash other than the unit time limit (a dead worker) may be the machine's.
REUSED_STATUSES = ("ok", "skipped", "unsupported", "failed", "error")
_FORMAT = 1


def fingerprint(machine: MachineInfo, settings: dict[str, Any], code_roots: Sequence[Path]) -> str:
    """A hash of everything a peer's measurement depends on (see the module docstring): the
    machine facts, `settings` (sizes, budget, precision...) and every Python file under `code_roots`."""
    facts = {k: v for k, v in asdict(machine).items() if k not in ("os", "ram")}
    digest = hashlib.sha256(json.dumps([_FORMAT, facts, settings, _thunder_version()], sort_keys=True).encode())
    for root in code_roots:
        for path in sorted(Path(root).rglob("*.py")):
            digest.update(str(path.relative_to(root)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def _thunder_version() -> str:
    try:
        return importlib.metadata.version("lightning-thunder")
    except importlib.metadata.PackageNotFoundError:
        return "none"


def _key(case_id: str, variant: str) -> str:
    return f"{case_id} | {variant}"


class PeerCache:
    """The peers' outcomes measured under one fingerprint, with the eager time measured beside each."""

    def __init__(self, path: Path, key: str) -> None:
        self.path, self.key = Path(path), key
        self.entries: dict[str, dict[str, Any]] = {}
        self.eager_history: dict[str, list[float]] = {}  # case id -> its eager medians, oldest first
        self.stale = False  # a cache file was there, measured under another fingerprint
        if self.path.exists():
            try:
                document = json.loads(self.path.read_text())
            except (OSError, ValueError):
                document = {}
            if document.get("fingerprint") == key:
                self.entries = document.get("entries", {})
                self.eager_history = document.get("eager_history", {})
            else:
                self.stale = True

    def reusable(self, case_id: str, variant: str, unit_timeout_s: float | None = None) -> Outcome | None:
        """The kept outcome of `variant` on `case_id`, or None when there is none to reuse. A unit
        stopped at a time limit is reused under a limit (`unit_timeout_s`, None: none) no longer."""
        entry = self.entries.get(_key(case_id, variant))
        if entry is None or not (
            entry["outcome"].get("status") in REUSED_STATUSES or _past_limit(entry["outcome"], unit_timeout_s)
        ):
            return None
        outcome = Outcome.from_json(entry["outcome"])
        outcome.extra.pop("paired", None)  # NOTE: pairs with the fusebench of its own run (fusebench.measure.paired)
        outcome.extra["reused"] = {"commit": entry["commit"], "eager_median": entry.get("eager_median")}
        return outcome

    def eager_median(self, case_id: str, variant: str) -> float | None:
        """The eager time measured in the run that measured this peer (None: not known)."""
        entry = self.entries.get(_key(case_id, variant))
        return None if entry is None else entry.get("eager_median")

    def remember(self, case_id: str, outcome: Outcome, commit: str, eager: Outcome | None) -> None:
        """Keeps a freshly measured peer's outcome, with the eager time of the same run."""
        data = asdict(outcome)
        data.pop("artifacts", None)
        data["extra"] = {k: v for k, v in data["extra"].items() if k not in ("reused", "paired")}
        self.entries[_key(case_id, outcome.variant)] = {
            "outcome": data,
            "commit": commit,
            "eager_median": median(eager),
        }

    def note_eager(self, case_id: str, eager_median: float | None) -> None:
        """Adds this run's eager median of `case_id` to its history (the last `HISTORY` kept)."""
        if eager_median:
            self.eager_history[case_id] = [*self.eager_history.get(case_id, []), eager_median][-HISTORY:]

    def tolerance(self, case_id: str) -> float:
        """How far `case_id`'s eager time may move without its peers being measured again: `DRIFT`,
        or `NOISE_SIGMAS` robust standard deviations of its logged eager medians where that is wider
        (from three runs on)."""
        history = self.eager_history.get(case_id, [])
        if len(history) < 3:
            return DRIFT
        logs = [math.log(value) for value in history]
        center = statistics.median(logs)
        sigma = 1.4826 * statistics.median(abs(value - center) for value in logs)
        return max(DRIFT, math.exp(NOISE_SIGMAS * sigma) - 1.0)

    def save(self) -> None:
        """Writes the cache (atomically)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        document = {"fingerprint": self.key, "entries": self.entries, "eager_history": self.eager_history}
        atomic_write_json(self.path, document)


def _past_limit(outcome: dict[str, Any], unit_timeout_s: float | None) -> bool:
    """Whether `outcome` (as kept) was stopped at a time limit that `unit_timeout_s` would also hit."""
    limit = outcome.get("extra", {}).get("time_limit_s")
    return (
        outcome.get("status") == "crashed"
        and limit is not None
        and unit_timeout_s is not None
        and unit_timeout_s <= limit
    )


def median(outcome: Outcome | None) -> float | None:
    """An ok outcome's median time, else None."""
    return outcome.timing.median if outcome is not None and outcome.status == "ok" and outcome.timing else None


def drifted(eager_now: float | None, eager_then: float | None, tolerance: float = DRIFT) -> bool:
    """Whether a case's eager time moved by more than `tolerance` since its peers were measured
    (unknown either side counts as moved: nothing vouches for the kept numbers)."""
    if not eager_now or not eager_then:
        return True
    return max(eager_now / eager_then, eager_then / eager_now) - 1.0 > tolerance
