"""The fusion pass's group graph (compiler/passes/fusion_groups.py): after any sequence of merges,
each group's summary and every answer about a union are what recomputing them from the members
gives, and the tracked descendants find exactly the paths the graph search finds."""

from __future__ import annotations

import random

import pytest
import torch

import compiler
from compiler.core.ir import TensorProxy, Trace, proxies_in
from compiler.passes.fusion_groups import Groups
from compiler.prims import SHAPE_OPS, Prim


def _program(params, grads, state, x, w):
    for p, g, s in zip(params, grads, state):
        s.mul_(0.9).add_(g * g, alpha=0.1)
        p.sub_(g / (s.sqrt() + 1e-8))
    h = torch.nn.functional.layer_norm(x, x.shape[-1:]) @ w
    x.add_(1)
    return h.relu().sum(-1), h.view(-1)[:3], x * 2


def _pure_trace(seed: int) -> Trace:
    gen = torch.Generator().manual_seed(seed)
    shapes = [(4, 3), (3,), (4, 3), (2, 5)][: 2 + seed % 3]
    params, grads, state = ([torch.rand(s, generator=gen) for s in shapes] for _ in range(3))
    jfn = compiler.jit(_program, executors=["torch"])
    jfn(params, grads, state, torch.randn(2, 4, generator=gen), torch.randn(4, 4, generator=gen))
    return next(t for t in compiler.last_traces(jfn) if t.provenance.startswith("dce"))


def _naive(g: Groups, members: list[int], output_ids: set[int]) -> dict:
    """The summary's facts about nodes `members`, from scratch (as the fusion pass once computed them)."""
    bsyms = [g.bsyms[i] for i in members]
    inside = set(members)
    shape, numel = None, -1
    for b in bsyms:
        for p in b.outputs:
            if isinstance(p, TensorProxy) and all(isinstance(s, int) for s in p.shape):
                size = 1
                for s in p.shape:
                    size *= s
                if size > numel:
                    shape, numel = tuple(p.shape), size
    defined = {id(p) for b in bsyms for p in b.outputs}
    tensors = {id(p) for b in bsyms for p in b.outputs if isinstance(p, TensorProxy)}
    inputs = {id(p) for b in bsyms for p in b.inputs if isinstance(p, TensorProxy)}
    escaping = {d for d in tensors if d in output_ids or any(j not in inside for j in g.readers.get(d, ()))}
    conflict, written = False, set()
    for b in bsyms:
        if b.sym is Prim.COPY_TO:
            conflict |= id(b.args[1]) in written or id(b.args[1]) in defined
            written.add(id(b.args[1]))
    return {
        "compute_ops": sum(b.sym not in SHAPE_OPS for b in bsyms),
        "shape": shape,
        "inputs": inputs,
        "tensor_count": len(inputs - tensors) + len(escaping),
        "conflict": conflict,
    }


def _summary_facts(g: Groups, root: int) -> dict:
    s = g.summary[root]
    return {
        "compute_ops": s.compute_ops,
        "shape": s.shape,
        "inputs": s.inputs,
        "tensor_count": len(s.reads) + len(s.escaping),
        "conflict": s.conflict,
    }


def _reached(g: Groups, src: int) -> set[int]:
    stack, seen = list(g.succ[src]), set()
    while stack:
        x = stack.pop()
        if x not in seen:
            seen.add(x)
            stack.extend(g.succ[x])
    return seen


def _reaches_via_other(g: Groups, src: int, dst: int) -> bool:
    """Whether a path src -> x -> ... -> dst exists, x not dst: a search of the whole graph."""
    stack, seen = [s for s in g.succ[src] if s != dst], set()
    while stack:
        x = stack.pop()
        if x == dst:
            return True
        if x not in seen:
            seen.add(x)
            stack.extend(g.succ[x])
    return False


@pytest.mark.parametrize("seed", range(4))
def test_summaries_and_union_answers_match_recomputing_from_the_members(seed):
    trace = _pure_trace(seed)
    bsyms = list(trace.bsyms)
    readers: dict[int, list[int]] = {}
    producer: dict[int, int] = {}
    edges: list[set[int]] = [set() for _ in bsyms]
    for i, b in enumerate(bsyms):
        for p in b.inputs:
            readers.setdefault(id(p), []).append(i)
            if id(p) in producer:
                edges[producer[id(p)]].add(i)
        for p in b.outputs:
            producer[id(p)] = i
    output_ids = {id(p) for p in proxies_in(trace.output)}
    assert any(b.sym is Prim.COPY_TO for b in bsyms)
    g = Groups(bsyms, edges, [True] * len(bsyms), readers, output_ids)
    rng = random.Random(seed)
    merges = 0
    for step in range(400):
        if step == 40:
            g.track_descendants()
        roots = g.roots()
        if len(roots) < 2:
            break
        a, b = rng.sample(roots, 2)
        union = _naive(g, g.members[a] + g.members[b], output_ids)
        assert g.conflict(a, b) == union["conflict"]
        assert g.tensor_count(a, b) == union["tensor_count"]
        assert g.shares_input(a, b) == bool(g.summary[a].inputs & g.summary[b].inputs)
        blocked = False
        for src, dst in ((a, b), (b, a)):
            found = _reaches_via_other(g, src, dst)
            assert g.reaches_via_other(src, dst) == found or step < 40
            assert found or g.path_via_other(src, dst) is None  # the search finds no path that is not there
            blocked |= found
        if not blocked:  # merging keeps the group graph acyclic, as the fusion pass does
            g.merge(a, b)
            merges += 1
            assert _summary_facts(g, a) == _naive(g, g.members[a], output_ids)
            if g.descendants is not None:
                for root in g.roots():
                    tracked = {r for r in g.roots() if g.descendants[root] >> r & 1}
                    assert tracked == _reached(g, root)
    assert merges > 10
    for root in g.roots():
        assert _summary_facts(g, root) == _naive(g, g.members[root], output_ids)
