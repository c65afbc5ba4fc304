"""A region its fusion compiler fails on runs cut into pieces that compile, the rest with torch,
and computes eager's values: outputs, write-backs, edge shapes."""

from __future__ import annotations

import math
import warnings

import pytest
import torch

import compiler
from compiler import prims
from compiler.core.executor import Region
from compiler.executors.nvfuser.executor import TorchRunner
from compiler.executors.region_fallback import FusionFallbackWarning, RegionFallback
from compiler.executors.region_split import MIN_FUSED, halves
from compiler.passes.fuse import partition
from compiler.prims import Prim
from compiler.tracing.interpreter import eval_trace
from tests.support.nvfuser_helpers import prim_trace, torch_fuser


def _chain(a, b):
    x = prims.add(prims.mul(a, 2.0), b)
    y = prims.mul(prims.sin(x), a)
    z = prims.exp(prims.sub(y, b))
    w = prims.add(prims.cos(z), x)
    return prims.sum(w, (1,)), prims.mul(w, 3.0)


def _region(fn, *specs) -> Region:
    (region,) = [u for u in partition(prim_trace(fn, *specs), [torch_fuser()]).units if isinstance(u, Region)]
    return region


F32 = ((4, 8), torch.float32)


def test_the_halves_are_the_region_in_order_each_reading_only_what_is_defined_before_it():
    region = _region(_chain, F32, F32)
    first, second = halves(region)
    assert (first.name, second.name) == ("nvFusion0_0", "nvFusion0_1")
    assert first.bsyms + second.bsyms == region.bsyms
    n = len(region.bsyms)
    assert n // 4 <= len(first.bsyms) <= n - n // 4
    first_defined = {id(p) for b in first.bsyms for p in b.outputs}
    assert all(id(p) in {id(q) for q in region.inputs} for p in first.inputs)
    assert {id(p) for p in second.inputs} <= {id(q) for q in region.inputs} | {id(q) for q in first.outputs}
    # the first half returns what the second reads and what the region returns, nothing else
    read = {id(p) for b in second.bsyms for p in b.inputs} | {id(p) for p in region.outputs}
    assert {id(p) for p in first.outputs} == first_defined & read
    assert {id(p) for p in first.outputs + second.outputs} >= {id(p) for p in region.outputs}


def test_the_cut_is_where_the_fewest_elements_cross():
    # a big chain that narrows to a row sum in the middle: the cut passes the small sum, not the big tensors
    def program(a):
        x = prims.exp(prims.sin(prims.mul(a, 2.0)))
        s = prims.sum(x, (1,))
        b = prims.broadcast_in_dim(s, (64, 128), (0,))
        return prims.cos(prims.mul(prims.add(b, 1.0), 3.0))

    region = _region(program, ((64, 128), torch.float32))
    first, second = halves(region)
    assert [p.shape for p in first.outputs] == [(64,)]
    assert second.bsyms[0].sym is Prim.BROADCAST_IN_DIM


def test_a_written_input_stays_written_in_the_pieces_that_read_it():
    region = _region(_chain, F32, F32)
    marked = Region(region.name, region.bsyms, region.inputs, region.outputs, frozenset({region.inputs[0].name}))
    for piece in halves(marked):
        assert piece.written == frozenset(p.name for p in piece.inputs if p is region.inputs[0])


def _failing_on(monkeypatch: pytest.MonkeyPatch, *failing: Prim) -> list[Region]:
    """The fusion runner fails on any region with one of `failing`; returns the regions it ran."""
    ran: list[Region] = []
    run = TorchRunner.run

    def fail_or_run(self, fusion, args, key):
        if any(b.sym in failing for b in fusion.region.bsyms):
            raise RuntimeError(f"nvFuser exploded on {fusion.name}")
        ran.append(fusion.region)
        return run(self, fusion, args, key)

    monkeypatch.setattr(TorchRunner, "run", fail_or_run)
    return ran


def _program(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    x = a * 2 + b
    w = ((x.sin() * a - b).exp()).cos() + x
    return w.sum(-1), w * 3


EDGE_INPUTS = {
    "plain": lambda g: (torch.randn(4, 8, generator=g), torch.randn(4, 8, generator=g)),
    "size-1": lambda g: (torch.randn(1, 8, generator=g), torch.randn(1, 8, generator=g)),
    "strided": lambda g: (torch.randn(8, 4, generator=g).t(), torch.randn(4, 16, generator=g)[:, ::2]),
    "broadcast": lambda g: (torch.randn(4, 8, generator=g), torch.randn(8, generator=g)),
}


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("layout", list(EDGE_INPUTS))
def test_a_failed_region_runs_as_pieces_that_compile_and_gives_eagers_values(monkeypatch, layout, seed):
    ran = _failing_on(monkeypatch, Prim.COS)
    jfn = compiler.jit(_program, executors=["nvfuser"], fusion={"runner": "torch"})
    a, b = EDGE_INPUTS[layout](torch.Generator().manual_seed(seed))
    with pytest.warns(FusionFallbackWarning) as caught:
        for _ in range(2):
            torch.testing.assert_close(jfn(a, b), _program(a, b))
    (warning,) = [w for w in caught if issubclass(w.category, FusionFallbackWarning)]
    (info,) = compiler.examine.fusions(jfn)
    fusions, torch_prims = _outcome(info.runner)
    assert f"nvFusion0 now runs as {fusions} nvFuser fusion" in str(warning.message)
    assert fusions >= 1 and 0 < torch_prims < len(info.ops)
    assert all(Prim.COS not in {b.sym for b in r.bsyms} for r in ran)  # no piece that ran holds the failing prim
    assert all(len(r.bsyms) >= MIN_FUSED for r in ran)
    assert compiler.examine.stats(jfn).fallbacks == 1  # the region counts once, however it was cut


def _outcome(runner: str) -> tuple[int, int]:
    """(fusions, prims with torch) from examine's 'N nvFuser fusions and M prims with torch (fallback)'."""
    words = runner.split()
    return int(words[0]), int(words[words.index("prims") - 1]) if "prims" in words else 0


def test_pieces_that_all_fail_run_every_prim_with_torch(monkeypatch):
    ran = _failing_on(monkeypatch, *Prim)
    jfn = compiler.jit(_program, executors=["nvfuser"], fusion={"runner": "torch"})
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FusionFallbackWarning)
        torch.testing.assert_close(jfn(a, b), _program(a, b))
        torch.testing.assert_close(jfn(a, b), _program(a, b))
    assert ran == []
    (info,) = compiler.examine.fusions(jfn)
    assert info.runner == f"its {len(info.ops)} prims with torch (fallback)"


def _step(p: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    p.mul_(0.9).add_(g.sin() * 0.1)
    return ((p * g).cos() + p).sum()


def test_a_region_that_writes_an_input_back_writes_it_when_cut(monkeypatch):
    _failing_on(monkeypatch, Prim.COS)
    jfn = compiler.jit(_step, executors=["nvfuser"], fusion={"runner": "torch"})
    for seed in range(3):
        g = torch.Generator().manual_seed(seed)
        p, grad = torch.randn(16, 8, generator=g), torch.randn(16, 8, generator=g)
        expected_p = p.clone()
        expected = _step(expected_p, grad)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FusionFallbackWarning)
            torch.testing.assert_close(jfn(p, grad), expected)
        torch.testing.assert_close(p, expected_p)


def test_a_cut_region_evaluates_as_the_trace_does():
    trace = prim_trace(_chain, F32, F32)
    region = _region(_chain, F32, F32)
    first, second = halves(region)
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    env = dict(zip((p.name for p in trace.inputs), (a, b)))
    for piece in (first, second):
        piece_trace = type(trace)(piece.inputs, list(piece.bsyms), piece.outputs, name="piece")
        env.update(zip((p.name for p in piece.outputs), eval_trace(piece_trace, *[env[p.name] for p in piece.inputs])))
    expected = eval_trace(trace, a, b)
    torch.testing.assert_close([env[p.name] for p in region.outputs], list(expected))


def _long_chain(a: torch.Tensor) -> torch.Tensor:
    for k in range(80):
        a = (a * 1.01 + k).sin() if k % 2 else (a - 0.5).cos()
    return a


def test_a_region_and_its_pieces_fail_at_most_max_failures_times(monkeypatch):
    attempts = []
    run = TorchRunner.run

    def always_fails(self, fusion, args, key):
        attempts.append(fusion.name)
        raise RuntimeError("no GPU left")

    monkeypatch.setattr(TorchRunner, "run", always_fails)
    jfn = compiler.jit(_long_chain, executors=["nvfuser"], fusion={"runner": "torch"})
    a = torch.randn(3, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FusionFallbackWarning)
        torch.testing.assert_close(jfn(a), _long_chain(a))
        torch.testing.assert_close(jfn(a), _long_chain(a))
    (info,) = compiler.examine.fusions(jfn)
    assert len(info.ops) > 2 * RegionFallback.MAX_FAILURES * MIN_FUSED  # enough prims to fail more often uncapped
    # past the limit, only the pieces already cut (one per level of cuts) try once more
    assert RegionFallback.MAX_FAILURES < len(attempts) <= RegionFallback.MAX_FAILURES + math.log2(len(info.ops)), (
        attempts
    )
    assert info.runner == f"its {len(info.ops)} prims with torch (fallback)"
    monkeypatch.setattr(TorchRunner, "run", run)


def test_examine_lists_the_pieces_and_writes_a_repro_of_the_smallest_that_failed(monkeypatch, tmp_path):
    _failing_on(monkeypatch, Prim.COS)
    jfn = compiler.jit(_program, executors=["nvfuser"], fusion={"runner": "torch"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FusionFallbackWarning)
        jfn(torch.randn(4, 8), torch.randn(4, 8))
    (info,) = compiler.examine.fusions(jfn)
    lines = [str(piece) for piece in info.pieces]
    assert lines and all(line.startswith("nvFusion0_") for line in lines)
    assert "  cut into (examine.repro takes a piece's name):" in str(info)
    assert all(f"    {line}" in str(info) for line in lines)
    failed = [line.split(":")[0] for line in lines if "FELL BACK (RuntimeError: nvFuser exploded" in line]
    fused = [line.split(":")[0] for line in lines if line.endswith("one nvFuser fusion")]
    assert failed == [p.name for p in info.pieces if p.fallback_error] and fused
    assert failed and fused
    smallest = failed[-1]  # depth first: the last failed piece holds no piece that failed after it
    path = compiler.examine.repro(jfn, smallest, tmp_path / "smallest.py")
    assert f'"""Repro for {smallest} (written by fusebench' in path.read_text()
    assert "cos" in path.read_text()
    with pytest.raises(ValueError, match="no fusion of that name"):
        compiler.examine.repro(jfn, "nvFusion0_9", tmp_path / "none.py")
