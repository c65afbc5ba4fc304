"""How long each measurement took in earlier runs on this machine, so that a run's ETA is the time
its measurements took before rather than the pace of its first few (a run that starts with quick
eager rows and ends with model compilations otherwise promises minutes and takes tens of them).

`<results>/<machine>/durations.fusebench` maps `case id | variant | device sizes` to the wall seconds
of its last measurement (compilation, checks and repeats: `Outcome.duration`). Runs merge into it
under a lock, so several `fusebench run` processes sharing the results folder keep each other's.
A unit not measured before counts at the mean of those that were.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path

from fusebench.files import atomic_write_json, file_lock
from fusebench.measure.outcome import Outcome

FILE_NAME = "durations.fusebench"


def unit_key(case_id: str, variant: str, device: str, quick: bool) -> str:
    """The key of one measurement: its case id, variant, device type (`cuda`, not `cuda:1`) and
    sizes (`quick` or `full`)."""
    return f"{case_id} | {variant} | {device.split(':')[0]} {'quick' if quick else 'full'}"


def load_durations(path: Path) -> dict[str, float]:
    """The kept durations (none when the file is missing or unreadable)."""
    try:
        document = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}
    entries = document.get("durations", {}) if isinstance(document, dict) else {}
    return {k: float(v) for k, v in entries.items() if isinstance(v, (int, float)) and v > 0}


def keep_durations(path: Path, measured: Iterable[tuple[str, Outcome]]) -> None:
    """Merges the durations of `measured` (unit key, outcome) into the file; a crash (no duration)
    is left out."""
    fresh = {key: o.duration for key, o in measured if o.duration > 0}
    if not fresh:
        return
    path = Path(path)
    with file_lock(path.with_name(f".{path.name}.lock")):
        atomic_write_json(path, {"durations": {**load_durations(path), **fresh}})


class Durations:
    """A run's use of the file: the durations expected of its units, and those it measures, merged
    into the file when the run ends (interrupted or not)."""

    def __init__(self, path: Path, keys: list[str]) -> None:
        """`keys`: the `unit_key` of each of the run's units, by unit index."""
        self.path, self.keys = Path(path), keys
        self.known = load_durations(self.path)
        self.measured: list[tuple[str, Outcome]] = []

    def expected(self, indices: Iterable[int]) -> list[float | None]:
        """The kept duration of each of these units (None: not measured before)."""
        return [self.known.get(self.keys[i]) for i in indices]

    def watching(self, done: Callable[[int, Outcome], None]) -> Callable[[int, Outcome], None]:
        """`done`, also noting each outcome's duration."""

        def noted(index: int, outcome: Outcome) -> None:
            self.measured.append((self.keys[index], outcome))
            done(index, outcome)

        return noted

    def keep(self) -> None:
        """Merges the measured durations into the file."""
        keep_durations(self.path, self.measured)
