"""nvFuser's segmentation of a fusion, profiled once per definition and kept on disk across runs.

Profiling a fusion's kernels (`compiler.examine.segments`) starts a child process that imports
torch and nvFuser and runs the fusion's repro script under nvFuser's profiler: seconds per
measurement, for an answer that depends only on the fusion definition, the layouts of its inputs
and the software and GPU it ran on. So the answer is cached under the SHA-256 of exactly those
(the definition's source, its inputs as `examine.fusions` lists them, the nvFuser and torch
versions, the GPU's name): one file per fusion in `<cache dir>/segments/` (`cache_dir()` of
`fusebench.measure.bandwidth`). A fusion met again, in this run or a later one, is not profiled
again; its kernel times are those of its first profile.

An entry keeps the report's text with the fusion's name written as NAME_PLACEHOLDER, since the
same definition is named differently in different programs (`nvFusion0` here, `nvFusion3` there).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fusebench.files import atomic_write_json, read_json

FOLDER = "segments"
NAME_PLACEHOLDER = "<fusion>"
FORMAT_VERSION = "1"


@dataclass(frozen=True)
class CachedSegments:
    """One fusion's segmentation: its report's text (for segments.txt) and each kernel's scheduler."""

    text: str
    schedulers: list[str]


def segment_key(definition: str, inputs: Sequence[str], environment: str) -> str:
    """The cache key of a fusion: the SHA-256 of its definition source, inputs and environment."""
    digest = hashlib.sha256()
    for part in (FORMAT_VERSION, environment, definition, *inputs):
        digest.update(part.encode())
        digest.update(b"\x00")
    return digest.hexdigest()


class SegmentCache:
    """The on-disk cache of segmentations under `folder` (created on first write)."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)

    def get(self, key: str, name: str) -> CachedSegments | None:
        """The cached segmentation of `key` with the fusion named `name`, or None (also when the
        file is unreadable: it is profiled again and rewritten)."""
        try:
            data = read_json(self.folder / f"{key}.json")
            return CachedSegments(str(data["text"]).replace(NAME_PLACEHOLDER, name, 1), list(data["schedulers"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(self, key: str, name: str, segments: CachedSegments) -> None:
        """Stores the segmentation of the fusion `name` under `key`."""
        text = segments.text.replace(name, NAME_PLACEHOLDER, 1)
        atomic_write_json(self.folder / f"{key}.json", {"text": text, "schedulers": segments.schedulers})


def cached_segments(
    fusions: Sequence[tuple[str, str, Sequence[str]]],
    profile: Callable[[list[str]], list[Any]],
    cache: SegmentCache,
    environment: str,
) -> dict[str, CachedSegments]:
    """The segmentation of each fusion `(name, definition source, inputs)`, from the cache where it
    has it; `profile(names)` profiles the others (reports with `name`, `schedulers` and a text as
    their `str`, as `compiler.examine.segments` returns them), whose answers are then cached."""
    keys = {
        name: segment_key(definition, inputs, environment) if definition else None
        for name, definition, inputs in fusions
    }
    found = {name: None if key is None else cache.get(key, name) for name, key in keys.items()}
    missing = [name for name, segments in found.items() if segments is None]
    if missing:
        for report in profile(missing):
            segments = CachedSegments(str(report), list(report.schedulers))
            key = keys.get(report.name)
            if key is not None:  # NOTE: without its definition's source a fusion has no safe key
                cache.put(key, report.name, segments)
            found[report.name] = segments
    return {name: segments for name, segments in found.items() if segments is not None}


def environment_key() -> str:
    """What a segmentation depends on besides the fusion: nvFuser's and torch's versions, the GPU."""
    import torch

    try:
        import nvfuser_direct

        nvfuser = str(getattr(nvfuser_direct, "__version__", "unknown"))
    except Exception:  # NOTE: no nvFuser: nothing will be profiled, the key only has to be stable
        nvfuser = "none"
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no-gpu"
    return json.dumps([nvfuser, torch.__version__, gpu])
