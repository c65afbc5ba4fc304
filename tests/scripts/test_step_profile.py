"""scripts/step_profile.py: the per-fusion host table, and the script end to end on CPU."""

from __future__ import annotations

import pytest
import torch

import compiler
from scripts import step_profile
from tests.support.nvfuser_helpers import fake_nvfuser  # noqa: F401 - a fixture


def two_regions(x: torch.Tensor) -> torch.Tensor:
    y = (x * 2).sin()
    return ((y @ y.T) * 3).exp()  # NOTE: the matmul runs in torch: a region each side


def test_each_fusion_gets_its_host_time_and_executes_per_call(fake_nvfuser):  # noqa: F811
    jfn = compiler.jit(two_regions, executors=["nvfuser", "torch"])
    x = torch.randn(4, 8)
    jfn(x)
    fusions = [b for b in compiler.last_traces(jfn)[-1].bsyms if str(b.sym).startswith("nvFusion")]
    table = step_profile.fusion_table(lambda: jfn(x), torch.device("cpu"), calls=3, top=10)
    lines = table.splitlines()
    assert lines[0].startswith("nvFuser fusions:") and f"over {len(fusions)} executes" in lines[0], table
    rows = lines[2:]
    assert len(rows) == len(fusions) == 2, table
    for row, bsym in zip(sorted(rows, key=lambda r: r.split()[2]), sorted(fusions, key=lambda b: str(b.sym))):
        us, per_call, name, prims = row.split(maxsplit=3)
        assert float(us) > 0 and float(per_call) == 1.0 and name == str(bsym.sym), table
        assert prims == f"({len(bsym.subsymbols)} prims)", table


def test_without_fusions_the_table_says_so():
    table = step_profile.fusion_table(lambda: torch.ones(3).sin(), torch.device("cpu"), calls=2, top=5)
    assert table.startswith("nvFuser fusions: none ran")


def test_the_script_runs_a_case_end_to_end_on_cpu(capsys):
    # twenty_ops has no quick grid of its own: --quick takes its params
    flags = ["--quick", "--calls", "2", "--profile", "1", "--fusions", "1"]
    step_profile.main(["twenty_ops", "eager", "fusebench", *flags])
    out = capsys.readouterr().out
    assert "== eager: device" in out and "== fusebench: device" in out, out
    assert out.count("nvFuser fusions:") == 2 and "own us" in out, out


def test_an_unknown_case_is_an_error_naming_the_cases(capsys):
    with pytest.raises(SystemExit) as exit_info:
        step_profile.main(["no_such_case"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "no case named 'no_such_case'" in err and "twenty_ops" in err, err


def test_backward_fusions_are_named_as_the_backwards_and_kernels_follow(monkeypatch, fake_nvfuser):  # noqa: F811
    from compiler import examine

    def profile_all(fusions):
        pair = [
            examine.KernelInfo(1, "inner_outer_persistent", 0.04, 1.0, "k1", ""),
            examine.KernelInfo(0, "reduction", 0.02, 1.0, "k0", ""),
        ]
        return [examine.Profile(pair, "") for _ in fusions]

    monkeypatch.setattr(examine, "_profile_all", profile_all)
    jfn = compiler.jit(lambda x: (x * 2).sin().sum(), executors=["nvfuser", "torch"])
    x = torch.randn(4, 8, requires_grad=True)
    jfn(x).backward()

    table = step_profile.fusion_table(lambda: jfn(x).backward(), torch.device("cpu"), 2, 10, program=jfn)
    names = sorted(" ".join(row.split()[2:-2]) for row in table.splitlines()[2:])
    assert names == ["backward nvFusion0", "nvFusion0"], table
    table = step_profile.fusion_table(lambda: jfn(x).backward(), torch.device("cpu"), 2, 10, jfn, kernels=True)
    rows = table.splitlines()[2:]
    assert len(rows) == 2 and all(
        row.endswith("prims)  [2 kernels: reduction+inner_outer_persistent, 60.0 us]") for row in rows
    ), table
