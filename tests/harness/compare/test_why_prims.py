"""The one-line reason names the prims a change added or removed, per op where it is a whole multiple."""

from __future__ import annotations

import json
from collections import Counter

from fusebench.compare.comparison import BenchmarkComparison, SideSummary
from fusebench.compare.decide import Decision
from fusebench.compare.why import Explanation, explain, prim_changes, prim_counts
from fusebench.history.artifacts import RECORD_FILE

TRACE = """# Constructed by update_fresh
import torch
from compiler import prims

def computation(x, y):
  # x: cpu f32[4]
{body}  return t
"""


def _files(lines: list[str], fusions: dict | None = None) -> dict[str, str]:
    record = {"fusions": fusions or {}, "measurement": {"fusions_per_call": len(fusions or {})}}
    body = "".join(f"  {line}  # t: cpu f32[4]\n" for line in lines)
    return {"trace.py": TRACE.format(body=body), RECORD_FILE: json.dumps(record)}


def test_two_multiplies_before_every_add_read_as_plus_two_mul_per_add() -> None:
    before = ["t = prims.add(x, y)"] * 10
    after = ["t = prims.mul(x, 1.0)", "t = prims.mul(t, 1.0)", "t = prims.add(t, y)"] * 10
    explanation = explain(_files(before), _files(after), "slower")
    assert explanation is not None
    assert explanation.reason.startswith("prims +2 mul per add; trace changed (+30 -10 lines)")
    assert explanation.changes["prims"] == [{"add": 10}, {"add": 10, "mul": 20}]


def test_prims_inside_fusions_count_and_comments_do_not() -> None:
    fusion = {"nvFusion0": {"ops": ["t0 = prims.exp(x)", "t1 = prims.mul(t0, 2.0)"], "runner": "nvfuser"}}
    files = _files(["(t,) = nvFusion0(x)", "# t = prims.add(x, y)", "t = prims.add(t, y)"], fusion)
    record = json.loads(files[RECORD_FILE])
    assert prim_counts(files, record) == Counter(exp=1, mul=1, add=1)


def test_prim_changes_without_a_whole_multiple_are_plain_counts() -> None:
    assert prim_changes(Counter(add=3, exp=2), Counter(add=3, exp=1, sin=1)) == "-1 exp, +1 sin"
    assert prim_changes(Counter(add=4), Counter(add=5)) == "+1 add"
    assert prim_changes(Counter(add=4), Counter(add=4)) == ""


def test_unchanged_prims_keep_the_old_reason() -> None:
    same = _files(["t = prims.add(x, y)"])
    explanation = explain(same, same, "slower")
    assert explanation is not None and explanation.reason == "trace unchanged: same kernels, slower"


def test_a_row_the_interval_calls_changed_but_the_verdict_did_not_flag_gets_its_reason() -> None:
    decision = Decision(1.03, 1.01, 1.06, 0.001, "noisy", rounds=6, paired=True, rounds_needed=None)
    comparison = BenchmarkComparison("s", "c", {}, "v", SideSummary("ok"), SideSummary("ok"), "noisy", decision)
    comparison.why = Explanation("prims +2 mul per add")
    notes = comparison.notes()
    assert notes.startswith("slower by 1.0% to 6.0%: maybe below the minimum effect")
    assert notes.endswith("edge: over 100 rounds would be needed; prims +2 mul per add")
