"""Why a benchmark changed: the compiler's records of the two sides, diffed into one line and diffs.

Inputs are two record folders' files (`fusebench.history.artifacts.read_artifacts`; see
`fusebench.measure.compiler_record` for what they hold). The reason names, in this order, what
changed and can explain a time: the prims the trace gained or lost ("+2 mul per add": counted
in the trace's lines and in its fusions' ops), kernels per call (and which fusion nvFuser split into which
segments), the fusions (which fusion split, merged, appeared or went, matched by their ops),
recompilations, CUDA graphs replayed on one side only (and why not on the other), compile time,
bytes saved for backward; when none of these changed, whether the
trace and the fusion definitions are the same ("trace unchanged: same kernels, slower" points at
the runtime, the machine or nvFuser itself rather than at our passes). The unified diffs of the
trace and of each fusion definition come with it. A training step's backward program (recorded
under `backward/`) is read the same way: its fusions' splits and kernels, its fusion count, its
trace and definitions, each named as the backward's ("backward nvFusion3 split into ...").
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from fusebench.history.artifacts import read_record

COMPILE_RATIO, COMPILE_FLOOR_S = 1.25, 0.05
BACKWARD = "backward/"  # the record's folder of a training step's backward program
_PROVENANCE = re.compile(r"^# Constructed by .*\n", re.MULTILINE)


@dataclass
class Explanation:
    """The one-line reason, the changed quantities as (A, B) pairs, and unified diffs by file name."""

    reason: str
    changes: dict[str, Any] = field(default_factory=dict)
    diffs: dict[str, str] = field(default_factory=dict)


def explain(files_a: dict[str, str], files_b: dict[str, str], verdict: str = "") -> Explanation | None:
    """What differs between the records of A and B (None when either side has no record)."""
    if not files_a or not files_b:
        return None
    record_a, record_b = read_record(files_a), read_record(files_b)
    measured_a, measured_b = record_a.get("measurement", {}), record_b.get("measurement", {})
    # NOTE: a record from before backward records existed, or of a forward-only call, has no
    # backward: then both sides' backwards count as empty rather than every fusion as new
    both = "backward_fusions" in record_a and "backward_fusions" in record_b
    backward_a, backward_b = (_backward(r) if both else {} for r in (record_a, record_b))
    changes: dict[str, Any] = {}
    parts: list[str] = []
    for part, a, b in (("", record_a, record_b), (BACKWARD, backward_a, backward_b)):
        if f"{part}trace.py" not in files_a or f"{part}trace.py" not in files_b:
            continue  # NOTE: without both traces, fusions' ops alone would miss what left a fusion
        counts_a, counts_b = prim_counts(files_a, a, part), prim_counts(files_b, b, part)
        if note := prim_changes(counts_a, counts_b):
            changes[f"{_part_label(part)}prims".lstrip()] = [dict(counts_a), dict(counts_b)]
            parts.append(f"{_part_label(part)}prims {note}")
    counted_parts = len(parts)
    details = {
        "kernels_per_call": lambda: _joined(
            _segment_changes(record_a, record_b), _segment_changes(backward_a, backward_b, "backward ")
        ),
        "fusions_per_call": lambda: _fusion_changes(record_a, record_b),
        "fusions_backward": lambda: _fusion_changes(backward_a, backward_b, "backward "),
    }
    labels = {
        "kernels_per_call": "kernels",
        "fusions_per_call": "fusion count",
        "fusions_backward": "backward fusion count",
    }
    for key, label in labels.items():
        a, b = measured_a.get(key), measured_b.get(key)
        if a is not None and b is not None and a != b:
            changes[key] = [a, b]
            detail = details[key]()
            parts.append(f"{label} {a}→{b}" + (f": {detail}" if detail else ""))
    for key in ("fusions_per_call", "fusions_backward"):
        if key not in changes and (moved := details[key]()):
            parts.append(moved)
    recompilations = measured_a.get("recompilations"), measured_b.get("recompilations")
    if None not in recompilations and recompilations[0] != recompilations[1]:
        changes["recompilations"] = list(recompilations)
        parts.append(f"recompilations {recompilations[0]}→{recompilations[1]}")
    if graphs := graphs_change(record_a.get("cuda_graphs"), record_b.get("cuda_graphs")):
        changes["cuda_graphs"] = [record_a["cuda_graphs"], record_b["cuda_graphs"]]
        parts.append(graphs)
    compile_a, compile_b = measured_a.get("compile_seconds"), measured_b.get("compile_seconds")
    if _compile_changed(compile_a, compile_b):
        changes["compile_seconds"] = [compile_a, compile_b]
        parts.append(f"compile {compile_a:.2g} s→{compile_b:.2g} s")
    saved = record_a.get("saved_for_backward_bytes"), record_b.get("saved_for_backward_bytes")
    if None not in saved and saved[0] != saved[1]:
        changes["saved_for_backward_bytes"] = list(saved)
        parts.append(f"saved for backward {saved[0]:,}→{saved[1]:,} bytes")
    diffs = {
        name: diff
        for name in sorted(set(files_a) | set(files_b))
        if (both or not name.startswith(BACKWARD))
        and (name.removeprefix(BACKWARD) == "trace.py" or name.removeprefix(BACKWARD).startswith("fusions/"))
        if (diff := unified_diff(_program_text(files_a.get(name, "")), _program_text(files_b.get(name, "")), name))
    }
    if len(parts) == counted_parts:
        parts.append(_unchanged(diffs, verdict))
    changes["changed_files"] = sorted(diffs)
    return Explanation("; ".join(parts), changes, diffs)


_REPLAYS = re.compile(r"\b(\d+) replays\b")


def graphs_change(listing_a: list[str] | None, listing_b: list[str] | None) -> str:
    """Whether CUDA graphs replayed on one side and not on the other ('' when the same, or when a
    side has no listing), with the listing of the side that did not: it says why."""
    if listing_a is None or listing_b is None:
        return ""
    replayed = [any(int(n) for line in listing for n in _REPLAYS.findall(line)) for listing in (listing_a, listing_b)]
    if replayed[0] == replayed[1]:
        return ""
    word = {True: "replayed", False: "not replayed"}
    return f"CUDA graphs {word[replayed[0]]}→{word[replayed[1]]} ({'; '.join(listing_b if replayed[0] else listing_a)})"


_PRIM_CALL = re.compile(r"\bprims\.(\w+)\(")


def prim_counts(files: dict[str, str], record: dict[str, Any], part: str = "") -> Counter:
    """How many times each prim is called by the program: in the trace's code lines (`part`:
    "" or "backward/") and in its fusions' ops (from `record`)."""
    counts: Counter = Counter()
    for line in files.get(f"{part}trace.py", "").splitlines():
        counts.update(_PRIM_CALL.findall(line.split("#")[0]))
    for fusion in record.get("fusions", {}).values():
        for op in fusion.get("ops", []):
            counts.update(_PRIM_CALL.findall(op))
    return counts


def prim_changes(before: Counter, after: Counter) -> str:
    """The prims gained or lost, each per an unchanged prim when its change is a whole multiple of
    that prim's count ('+2 mul per add, -1 exp'); '' when the counts are the same."""
    deltas = {prim: after[prim] - before[prim] for prim in sorted(set(before) | set(after))}
    deltas = {prim: delta for prim, delta in deltas.items() if delta}
    steady = sorted((prim for prim in after if prim not in deltas and after[prim] > 1), key=lambda p: -after[p])
    notes = []
    for prim, delta in sorted(deltas.items(), key=lambda item: (-abs(item[1]), item[0])):
        per = next((other for other in steady if delta % after[other] == 0), None)
        notes.append(f"{delta // after[per]:+d} {prim} per {per}" if per else f"{delta:+d} {prim}")
    return ", ".join(notes)


def unified_diff(before: str, after: str, name: str) -> str:
    """The unified diff of two texts ('' when they are equal), labelled A/<name> and B/<name>."""
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), f"A/{name}", f"B/{name}"
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def _program_text(text: str) -> str:
    """A recorded trace or definition without its provenance line (the pass that built the trace
    last): a pass renamed or reordered is not a different program."""
    return _PROVENANCE.sub("", text)


def _unchanged(diffs: dict[str, str], verdict: str) -> str:
    """The reason when no count changed: the trace and fusion definitions are the same, or how they
    differ (the traces' changed lines, and which fusion definitions changed)."""
    trend = f", {verdict}" if verdict in ("slower", "faster") else ""
    if not diffs:
        return f"trace unchanged: same kernels{trend}"
    notes = []
    traces = [name for name in ("trace.py", BACKWARD + "trace.py") if name in diffs]
    if traces:
        added, removed = (sum(counts) for counts in zip(*(_line_counts(diffs[name]) for name in traces)))
        which = "forward and backward traces" if len(traces) == 2 else f"{_part_label(traces[0])}trace"
        notes.append(f"{which} changed (+{added} -{removed} lines)")
    definitions = [name for name in diffs if name not in traces]
    if definitions:
        names = ", ".join(
            _part_label(name) + name.removeprefix(BACKWARD).removeprefix("fusions/").removesuffix(".py")
            for name in definitions
        )
        notes.append(f"fusion definition changed: {names}")
    return ", ".join(notes) + (", same fusion and kernel counts" if traces else "") + trend


def _part_label(name: str) -> str:
    return "backward " if name.startswith(BACKWARD) else ""


def _backward(record: dict[str, Any]) -> dict[str, Any]:
    """The record's backward as a record of its own (its fusions under "fusions")."""
    return {"fusions": record.get("backward_fusions", {})}


def _joined(*notes: str) -> str:
    return ", ".join(note for note in notes if note)


def _compile_changed(a: float | None, b: float | None) -> bool:
    if a is None or b is None or max(a, b) <= COMPILE_FLOOR_S:
        return False
    return max(a, b) > COMPILE_RATIO * max(min(a, b), 1e-9)


def _line_counts(diff: str) -> tuple[int, int]:
    lines = diff.splitlines()[2:]
    return sum(line.startswith("+") for line in lines), sum(line.startswith("-") for line in lines)


def _segment_changes(record_a: dict[str, Any], record_b: dict[str, Any], part: str = "") -> str:
    """'nvFusion0 split into reduction + 2 pointwise segments' for each fusion with more kernels at B
    (each note starting with `part`, e.g. "backward ")."""
    fusions_a, fusions_b = record_a.get("fusions", {}), record_b.get("fusions", {})
    notes = []
    for name, source in _pairs(record_a, record_b).items():
        before, after = fusions_a[source].get("schedulers"), fusions_b[name].get("schedulers")
        if before is None or after is None or len(before) == len(after):
            continue
        counts = Counter(after)
        kinds = " + ".join(f"{n} {kind}" if n > 1 else kind for kind, n in counts.items())
        verb = "split into" if len(after) > len(before) else "now runs as"
        notes.append(f"{part}{_named(name, source)} {verb} {kinds} segment{'s' if len(after) > 1 else ''}")
    return ", ".join(notes)


def _fusion_changes(record_a: dict[str, Any], record_b: dict[str, Any], part: str = "") -> str:
    """Which fusions split, merged, appeared or went from A to B, matching fusions by their ops
    (proxy names left out, so a fusion the trace merely renumbered is the same fusion); each note
    starts with `part` (e.g. "backward ")."""
    fusions_a, fusions_b = _anonymous_ops(record_a), _anonymous_ops(record_b)
    for name, source in _twins(fusions_a, fusions_b).items():
        del fusions_a[source], fusions_b[name]
    notes = []
    for name, ops in fusions_a.items():
        owners = _owners(ops, fusions_b)
        fused = {owner: n for owner, n in owners.items() if owner is not None}
        if len(fused) > 1 or (fused and None in owners):
            pieces = [f"{owner} ({n} ops)" for owner, n in fused.items()]
            pieces += [f"{owners[None]} ops unfused"] if None in owners else []
            notes.append(f"{name} ({len(ops)} ops) split into {' + '.join(pieces)}")
        elif not fused and ops:
            notes.append(f"{name} ({len(ops)} ops) no longer fused")
    for name, ops in fusions_b.items():
        sources = set(_owners(ops, fusions_a))
        if len(sources - {None}) > 1:
            notes.append(f"{' + '.join(sorted(s for s in sources if s))} merged into {name}")
        elif sources == {None} and ops:
            notes.append(f"{name} ({len(ops)} ops) newly fused")
    return ", ".join(part + note for note in notes)


_PROXY = re.compile(r"\bt\d+\b")


def _anonymous_ops(record: dict[str, Any]) -> dict[str, list[str]]:
    """Each fusion's ops with the trace's numbered proxies (`t12`) as `t`: another op before a
    fusion renumbers its proxies, not its ops."""
    return {name: [_PROXY.sub("t", op) for op in f.get("ops", [])] for name, f in record.get("fusions", {}).items()}


def _twins(fusions_a: dict[str, list[str]], fusions_b: dict[str, list[str]]) -> dict[str, str]:
    """B name -> A name for fusions with the same ops in the same order (in order of appearance)."""
    twins: dict[str, str] = {}
    unpaired = dict(fusions_a)
    for name, ops in fusions_b.items():
        source = next((a for a, a_ops in unpaired.items() if a_ops == ops), None)
        if source is not None:
            twins[name] = source
            del unpaired[source]
    return twins


def _pairs(record_a: dict[str, Any], record_b: dict[str, Any]) -> dict[str, str]:
    """B name -> A name of the same fusion: the twin by ops, else the same name when neither side's
    fusion of that name has a twin."""
    twins = _twins(_anonymous_ops(record_a), _anonymous_ops(record_b))
    taken = set(twins.values())
    names_a = set(record_a.get("fusions", {}))
    same = {n: n for n in record_b.get("fusions", {}) if n not in twins and n in names_a and n not in taken}
    return twins | same


def _named(name: str, source: str) -> str:
    return name if name == source else f"{name} (A's {source})"


def _owners(ops: list[str], fusions: dict[str, list[str]]) -> Counter:
    """How many of `ops` each of `fusions` holds (None: held by none), each op of `fusions` counted
    once and given first to the fusion sharing the most of `ops` (a common op such as a cast
    belongs with the rest of its fusion)."""
    wanted = Counter(ops)
    counts = {name: Counter(f_ops) for name, f_ops in fusions.items()}
    pools = {name: counts[name] for name in sorted(counts, key=lambda n: -sum((wanted & counts[n]).values()))}
    owners: Counter = Counter()
    for op in ops:
        owner = next((name for name, pool in pools.items() if pool[op] > 0), None)
        if owner is not None:
            pools[owner][op] -= 1
        owners[owner] += 1
    return owners
