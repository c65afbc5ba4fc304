"""What our compiler did for one measurement, as small text files (the raw material of "why").

`record(program, segments=...)` reads a jitted function of `compiler.jit` after it ran and returns
{relative file name: text}:
- `trace.py`: the final execution trace (the timing in its header removed, so equal programs give
  equal text);
- `fusions.txt`: each fusion, its ops, its last inputs (`compiler.examine.fusions`);
- `fusions/<name>.py`: each fusion's FusionDefinition source;
- `segments.txt`: nvFuser's kernels per fusion with their schedulers (`compiler.examine.segments`;
  only when `segments` is set and a fusion ran with nvFuser on a GPU: it profiles in a child
  process, once per fusion definition and input layouts, `fusebench.measure.segment_cache`);
- `backward/trace.py`, `backward/fusions.txt`, `backward/fusions/<name>.py`, `backward/segments.txt`:
  the same for the backward a training step ran (the one compiled for the outputs' cotangents
  that were present: `compiler.last_backward_traces(program, ran=True)`);
- `recompilations.txt`, `saved_for_backward.txt`: when this compiler's `examine` has them;
- `cuda_graphs.txt`: each cache entry's CUDA graphs (captures, replays, or why it runs without),
  where the program may graph (on CUDA, unless jitted with `cuda_graphs=False`);
- `record.json.txt`: the same facts as data (fusion names, op counts, ops, kernels and schedulers
  per fusion, of the forward under "fusions" and of the backward under "backward_fusions",
  recompilations, bytes saved for backward, CUDA graphs). NOTE: not `.json`: ASV reads every `*.json` file
  under its results folder as a result file.
A part the compiler cannot produce is left out with its error in `errors.txt`; recording never
raises, so it never costs a measurement.
"""

from __future__ import annotations

import json
import re
from typing import Any

from fusebench.measure.bandwidth import cache_dir
from fusebench.measure.segment_cache import FOLDER as SEGMENTS_FOLDER
from fusebench.measure.segment_cache import SegmentCache, cached_segments, environment_key

RECORD_FILE = "record.json.txt"
FUSIONS_KEYS = ("fusions", "backward_fusions")  # the record's fusions of the forward (or only) program, of the backward
_TOOK = re.compile(r" \(took [0-9.]+ ms\)")


def record(program: Any, segments: bool = False) -> dict[str, str]:
    """The files describing what `program` (a called `compiler.jit` function) did; {} if it never ran."""
    import compiler
    from compiler import examine

    if getattr(program, "last_entry", None) is None:
        return {}
    files: dict[str, str] = {}
    data: dict[str, Any] = {}
    errors: list[str] = []

    def attempt(what: str, action: Any) -> None:
        try:
            action()
        except Exception as error:  # NOTE: a missing part must not cost the measurement
            errors.append(f"{what}: {type(error).__name__}: {error}")

    ran: list[bool] = []  # whether the entry's backward has run (a training step)
    attempt("backward", lambda: ran.append(bool(compiler.last_backward_traces(program, ran=True))))
    for backward in (False, True) if any(ran) else (False,):
        fusions = data[FUSIONS_KEYS[backward]] = {}
        _program(program, backward, segments, files, fusions, attempt)
    recompilations = getattr(examine, "recompilations", None)
    if recompilations is not None:
        attempt("recompilations", lambda: _listing(files, data, "recompilations", recompilations(program)))
    saved = getattr(examine, "saved_for_backward", None)
    if saved is not None:
        attempt("saved for backward", lambda: _saved(files, data, saved(program)))
    if getattr(examine, "cuda_graphs", None) is not None:
        attempt("cuda graphs", lambda: _graphs(files, data, program))
    if errors:
        files["errors.txt"] = "\n".join(errors) + "\n"
    files[RECORD_FILE] = json.dumps(data, indent=1, sort_keys=True) + "\n"
    return files


def _program(
    program: Any, backward: bool, segments: bool, files: dict[str, str], fusions: dict[str, Any], attempt: Any
) -> None:
    """Records the forward (or only) program of `program`, or its backward under `backward/`: its
    trace, fusions, definitions and (with `segments`) nvFuser's kernels; `fusions` gets the data."""
    import compiler
    from compiler import examine

    part = "backward/" if backward else ""
    traces = compiler.last_backward_traces if backward else compiler.last_traces

    def trace() -> None:
        files[f"{part}trace.py"] = _TOOK.sub("", str(traces(program)[-1]))

    listing: list[Any] = []

    def listed() -> None:
        found = examine.fusions(program, backward=backward)
        listing.extend(found)
        files[f"{part}fusions.txt"] = str(found) + "\n"
        for info in listing:
            fusions[info.name] = {"ops": [_op(op) for op in info.ops], "runner": info.runner}
            attempt(f"{part}fusion {info.name}", lambda name=info.name: definition(name))

    def definition(name: str) -> None:
        files[f"{part}fusions/{name}.py"] = examine.fusion_source_of(program, name, backward=backward)

    def kernels() -> None:
        ran = [info for info in listing if info.runner == "nvfuser" and not info.fallback_error]
        described = [(i.name, files.get(f"{part}fusions/{i.name}.py", ""), [str(r) for r in i.inputs]) for i in ran]
        found = cached_segments(
            described,
            lambda names: examine.segments(program, names, backward=backward),
            SegmentCache(cache_dir() / SEGMENTS_FOLDER),
            environment_key(),
        )
        texts = [found[info.name].text for info in ran if info.name in found]
        files[f"{part}segments.txt"] = ("\n".join(texts) or "(none)") + "\n"
        for name, segments in found.items():
            fusions.setdefault(name, {})["schedulers"] = segments.schedulers

    attempt(f"{part}trace", trace)
    attempt(f"{part}fusions", listed)
    if segments and any(f.get("runner") == "nvfuser" for f in fusions.values()):
        attempt(f"{part}segments", kernels)


def _op(line: str) -> str:
    """An op line without its trailing type comment: `t0 = prims.mul(x, y)`."""
    return line.split("  #")[0].strip()


def _listing(files: dict[str, str], data: dict[str, Any], name: str, listing: Any) -> None:
    files[f"{name}.txt"] = str(listing) + "\n"
    data[name] = [str(item) for item in listing]


def graph_listing(program: Any) -> Any:
    """`compiler.examine.cuda_graphs(program)`: each entry's CUDA graphs (captures, replays, why
    none), or None where the program may not graph at all (jitted with cuda_graphs=False, or no CUDA)."""
    from compiler import examine

    try:
        listing = examine.cuda_graphs(program)
    except ValueError:  # NOTE: jitted with cuda_graphs=False: nothing to say
        return None
    return None if all(str(line).endswith(examine.NOT_GRAPHED) for line in listing) else listing


def _graphs(files: dict[str, str], data: dict[str, Any], program: Any) -> None:
    """`cuda_graphs.txt`, where the program may graph (`graph_listing`)."""
    listing = graph_listing(program)
    if listing is not None:
        _listing(files, data, "cuda_graphs", listing)


def _saved(files: dict[str, str], data: dict[str, Any], listing: Any) -> None:
    files["saved_for_backward.txt"] = str(listing) + "\n"
    data["saved_for_backward_bytes"] = sum(int(value.bytes) for value in listing)
