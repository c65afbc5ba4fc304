"""The "why" of a change: one commit of a throwaway repository turns horizontal fusion off, and the
records `fusebench run` keeps name the fusion that split, in the compare notes and the report."""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest
import torch

import compiler
from fusebench.cli import main
from fusebench.compare.comparison import compare_runs, explain_changes
from fusebench.compare.interleave import SideRun
from fusebench.compare.why import explain
from fusebench.history.regressions import Regression
from fusebench.report.why import regression_why, why_section

SUITE = """
import torch

from fusebench.cases import Case


def two_chains(x, y):
    return (x * 2 + 1).sin(), (y - 3).exp() * 4


CASES = [
    Case(
        name="two_chains",
        fn=two_chains,
        make_inputs=lambda params, device, seed: (torch.randn(64, device=device), torch.randn(64, device=device)),
        bytes_moved=lambda params: 4 * 64 * 4,
        params={"n": [64]},
        # NOTE: the torch runner forms the same regions as nvFuser would, without nvFuser (CPU).
        jit_options=lambda params: {
            "executors": ["nvfuser", "torch"],
            "fusion": {"runner": "torch", "horizontal": HORIZONTAL},
        },
    )
]
"""


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """`fusebench run` of the suite at two commits of a throwaway repository: fusion on, then split."""
    root = tmp_path_factory.mktemp("why")
    repo, results = root / "repo", root / "results"
    (repo / "suites").mkdir(parents=True)
    _git(repo, "init", "-q")
    commits, documents = [], []
    for horizontal in (True, False):
        (repo / "suites" / "fused.py").write_text(textwrap.dedent(SUITE).replace("HORIZONTAL", str(horizontal)))
        _git(repo, "add", "-A")
        _git(repo, "-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-qm", f"horizontal={horizontal}")
        commits.append(_git(repo, "rev-parse", "HEAD"))
        json_path = root / f"{len(commits)}.json"
        argv = ["run", "--suites", str(repo / "suites"), "--variant", "fusebench", "--device", "cpu"]
        argv += ["--repeat-budget", "0.01", "--results", str(results), "--commit", commits[-1], "--machine", "box"]
        assert main([*argv, "--json", str(json_path)]) == 0
        documents.append(json.loads(json_path.read_text()))
    return {"results": results, "commits": commits, "documents": documents}


def test_run_records_the_trace_and_each_fusion_definition(runs: dict) -> None:
    folder = Path(runs["documents"][1]["outcomes"][0]["extra"]["artifacts"])
    assert folder.is_relative_to(runs["results"] / "box" / "artifacts" / runs["commits"][1][:8])
    names = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
    assert {"trace.py", "fusions.txt", "fusions/nvFusion0.py", "fusions/nvFusion1.py", "record.json.txt"} <= names
    assert (
        "def computation(x, y)" in (folder / "trace.py").read_text() and "took" not in (folder / "trace.py").read_text()
    )
    assert not list(runs["results"].rglob("artifacts/**/*.json")), "ASV would read a .json file as a result file"


def test_the_report_names_the_split_fusion_with_collapsible_diffs(runs: dict) -> None:
    before, after = runs["commits"]
    regression = Regression(
        "box", "env", "fused", "two_chains", "n=64", "fusebench", "time_call", "seconds", before, after, 1e-5, 2e-5
    )
    explanation = regression_why(runs["results"], regression)
    assert explanation is not None
    assert explanation.reason.startswith(
        "fusion count 1→2: nvFusion0 (6 ops) split into nvFusion0 (3 ops) + nvFusion1 (3 ops)"
    )
    assert "trace.py" in explanation.diffs and "+++ B/fusions/nvFusion1.py" in explanation.diffs["fusions/nvFusion1.py"]
    page = why_section(runs["results"], [regression], None)
    assert "split into nvFusion0 (3 ops) + nvFusion1 (3 ops)" in page and "<details><summary>diff of trace.py" in page


def test_compare_notes_and_json_hold_the_reason_and_the_diffs(runs: dict) -> None:
    side_a, side_b = (SideRun(label, 0, 0, 1.0, outcomes=d["outcomes"]) for label, d in zip("AB", runs["documents"]))
    comparisons = compare_runs([side_a], [side_b])
    comparisons[0].verdict = "slower"  # NOTE: the times of this tiny case decide nothing; the notes are the point
    explain_changes(comparisons)
    assert comparisons[0].notes().startswith("fusion count 1→2: nvFusion0 (6 ops) split into")
    assert comparisons[0].why is not None and comparisons[0].why.changes["fusions_per_call"] == [1, 2]


def _files(fusions: dict[str, list[str]], schedulers: dict[str, list[str]], kernels: int) -> dict:
    record = {
        "fusions": {n: {"ops": ops, "schedulers": schedulers[n]} for n, ops in fusions.items()},
        "measurement": {"fusions_per_call": len(fusions), "kernels_per_call": kernels},
    }
    return {"record.json.txt": json.dumps(record)}


def _cast(out: int, x: int) -> str:
    return f"t{out} = prims.convert_element_type(t{x}, torch.float32)"


def test_a_fusion_gone_ahead_of_others_is_the_only_change_not_a_cascade_of_renamed_splits() -> None:
    # A: the key/value repeat (nvFusion0), then a norm (nvFusion1) and an activation (nvFusion2); B
    # drops the repeat, so the trace renumbers every later proxy and fusion.
    repeat = ["t5 = prims.broadcast_in_dim(t3, [2, 4], [0])", "t6 = prims.mul(t5, 1)"]
    norm_a = [_cast(9, 8), "t10 = prims.mul(t9, t9)", "t11 = prims.sum(t10, (1,))"]
    norm_b = [_cast(7, 6), "t8 = prims.mul(t7, t7)", "t9 = prims.sum(t8, (1,))"]
    act_a, act_b = [_cast(14, 13), "t15 = prims.neg(t14)"], [_cast(12, 11), "t13 = prims.neg(t12)"]
    a = _files(
        {"nvFusion0": repeat, "nvFusion1": norm_a, "nvFusion2": act_a},
        {"nvFusion0": ["pointwise"], "nvFusion1": ["reduction"], "nvFusion2": ["pointwise"]},
        kernels=3,
    )
    b = _files({"nvFusion0": norm_b, "nvFusion1": act_b}, {"nvFusion0": ["reduction"], "nvFusion1": ["pointwise"]}, 2)
    explanation = explain(a, b)
    assert explanation is not None
    assert explanation.reason == "kernels 3→2; fusion count 3→2: nvFusion0 (2 ops) no longer fused", explanation.reason


def test_a_renumbered_fusion_that_split_is_named_with_its_name_at_a() -> None:
    a = _files(
        {"nvFusion0": ["t1 = prims.exp(x)"], "nvFusion1": [_cast(4, 3)]},
        {"nvFusion0": ["pointwise"], "nvFusion1": ["pointwise"]},
        kernels=2,
    )
    b = _files({"nvFusion0": [_cast(2, 1)]}, {"nvFusion0": ["pointwise", "reduction"]}, kernels=3)
    reason = explain(a, b).reason  # type: ignore[union-attr]
    assert reason.startswith("kernels 2→3: nvFusion0 (A's nvFusion1) split into pointwise + reduction segments"), reason
    assert "fusion count 2→1: nvFusion0 (1 ops) no longer fused" in reason, reason


def _training_files(backward_fusions: dict[str, list[str]], trace: str) -> dict:
    record = {
        "fusions": {"nvFusion0": {"ops": ["t1 = prims.tanh(t0)"], "schedulers": ["pointwise"]}},
        "backward_fusions": {n: {"ops": ops} for n, ops in backward_fusions.items()},
        "measurement": {"fusions_per_call": 1, "fusions_backward": len(backward_fusions), "kernels_per_call": 3},
    }
    return {"record.json.txt": json.dumps(record), "trace.py": "forward\n", "backward/trace.py": trace}


def test_a_split_in_the_backward_is_named_as_the_backwards() -> None:
    chain = ["t3 = prims.mul(t2, 2)", "t4 = prims.sin(t3)", "t5 = prims.mul(t1, t1)", "t6 = prims.sub(1, t5)"]
    a = _training_files({"nvFusion0": chain}, "backward A\n")
    b = _training_files({"nvFusion0": chain[:2], "nvFusion1": chain[2:]}, "backward B\n")
    explanation = explain(a, b)
    assert explanation is not None
    assert explanation.reason == (
        "backward fusion count 1→2: backward nvFusion0 (4 ops) split into nvFusion0 (2 ops) + nvFusion1 (2 ops)"
    ), explanation.reason
    assert explanation.changes["fusions_backward"] == [1, 2]
    assert set(explanation.diffs) == {"backward/trace.py"}
    older = json.loads(a["record.json.txt"])  # a record made before backward records existed
    del older["backward_fusions"], older["measurement"]["fusions_backward"]
    older_files = {"record.json.txt": json.dumps(older), "trace.py": a["trace.py"]}
    assert explain(older_files, b).reason == "trace unchanged: same kernels"
    same = explain(a, _training_files({"nvFusion0": chain}, "backward B\n"), "slower")
    assert same is not None
    assert same.reason == "backward trace changed (+1 -1 lines), same fusion and kernel counts, slower"


def test_a_training_step_records_the_backward_it_ran() -> None:
    from fusebench.measure.compiler_record import record

    def step(x, w):
        logits = (x * w).tanh()
        return logits, (logits.exp() * 2).sum()

    program = compiler.jit(step, executors=["nvfuser", "torch"], fusion={"runner": "torch"})
    x, w = torch.randn(4, 8, requires_grad=True), torch.randn(8, requires_grad=True)
    with torch.no_grad():
        program(x, w)
    forward_only = record(program)
    assert "errors.txt" not in forward_only and not any(name.startswith("backward/") for name in forward_only)
    _, loss = program(x, w)
    loss.backward()  # the logits get no cotangent: the backward compiled for the loss's alone runs
    files = record(program)
    assert "errors.txt" not in files, files.get("errors.txt")
    (name,) = json.loads(files["record.json.txt"])["backward_fusions"]
    assert {"backward/trace.py", "backward/fusions.txt", f"backward/fusions/{name}.py"} <= set(files)
    (ran,) = compiler.examine.fusions(program, backward=True)
    assert ran.name == name and ran.calls == 1
    assert "def backward(" in files["backward/trace.py"] and "took" not in files["backward/trace.py"]


def _forward_files(trace: str, definition: str) -> dict:
    record = {
        "fusions": {"nvFusion0": {"ops": ["t1 = prims.mul(q, t0)"], "schedulers": ["pointwise"]}},
        "measurement": {"fusions_per_call": 1, "kernels_per_call": 1},
    }
    return {"record.json.txt": json.dumps(record), "trace.py": trace, "fusions/nvFusion0.py": definition}


def test_a_changed_definition_is_named_and_the_traces_provenance_line_is_not_a_change() -> None:
    # the rotary regression of session 41: the same trace, built last by a renamed pass, and one
    # broadcast's shape written differently in the fusion definition
    trace = "def computation(q, cos):\n  t1, = nvFusion0(q, cos)\n  return t1\n"
    fixed = "    t0 = fd.ops.broadcast_in_dim(cos, shape=[2, 4, 16, 8], broadcast_dims=[2, 3])\n"
    read = "    t0 = fd.ops.broadcast_in_dim(cos, shape=[fd.ops.size(q, dim=0), 4, 16, 8], broadcast_dims=[2, 3])\n"
    a = _forward_files("# Constructed by update_in_place\n" + trace, fixed)
    b = _forward_files("# Constructed by update_fresh\n" + trace, read)
    explanation = explain(a, b, "slower")
    assert explanation is not None
    assert explanation.reason == "fusion definition changed: nvFusion0, slower", explanation.reason
    assert set(explanation.diffs) == {"fusions/nvFusion0.py"}
    both = explain(a, _forward_files(trace.replace("t1", "t2"), read), "slower")
    assert both is not None
    assert both.reason == (
        "trace changed (+2 -2 lines), fusion definition changed: nvFusion0, same fusion and kernel counts, slower"
    ), both.reason
    assert (
        explain(a, _forward_files("# Constructed by fuse\n" + trace, fixed)).reason == "trace unchanged: same kernels"
    )


def _graphed_files(listing: list[str]) -> dict:
    record = {"fusions": {}, "measurement": {"fusions_per_call": 0, "kernels_per_call": 3}, "cuda_graphs": listing}
    return {"record.json.txt": json.dumps(record)}


def test_graphs_that_stopped_replaying_are_named_with_the_reason() -> None:
    replayed = ["entry 0: forward: 1 captures, 18 replays, 2 calls without a graph; backward: 1 captures, 17 replays"]
    failed = ["entry 0: forward: 0 captures, 0 replays, 20 calls without a graph (capture failed: RuntimeError: sync)"]
    explanation = explain(_graphed_files(replayed), _graphed_files(failed), "slower")
    assert explanation is not None
    assert explanation.reason == f"CUDA graphs replayed→not replayed ({failed[0]})", explanation.reason
    assert explanation.changes["cuda_graphs"] == [replayed, failed]
    assert explain(_graphed_files(failed), _graphed_files(replayed)).reason.startswith(
        "CUDA graphs not replayed→replayed"
    )
    same = explain(_graphed_files(replayed), _graphed_files([replayed[0].replace("18", "30")]))
    assert "CUDA graphs" not in same.reason
