"""Generated code deletes each value after its last use (codegen.last_uses), so temporaries return
to the allocator as they do in eager; inputs and outputs are never deleted."""

from __future__ import annotations

import ast
import weakref

import pytest
import torch
from torch.overrides import TorchFunctionMode

import compiler


def chain(x):
    for _ in range(12):
        x = (x * 1.5).sin()
    return x


def branches(x, y):
    a = x.sin()
    b, _ = (a * y).split(2, dim=-1)
    return b.exp(), y.cos() + a.sum()


def unused_output(x):
    values, _indices = x.max(dim=-1)  # the indices: read by nothing
    return values * 2


def _source(jfn, backward: bool = False) -> str:
    computation = jfn.last_entry.computation
    if backward:
        return computation.backwards[computation.last_present].__fusebench_source__
    return getattr(computation, "forward", computation).__fusebench_source__


def _check_deletions(source: str) -> None:
    """Nothing reads a deleted name; every name a line defines is deleted once unless returned."""
    function = ast.parse(source).body[0]
    inputs = {a.arg for a in function.args.args}
    defined, deleted = set(), set()
    returned: set[str] = set()
    for statement in function.body:
        read = {n.id for n in ast.walk(statement) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        assert not read & deleted, f"{sorted(read & deleted)} read after deletion:\n{source}"
        if isinstance(statement, ast.Delete):
            names = {t.id for t in statement.targets}
            assert not names & (inputs | deleted), source
            deleted |= names
        elif isinstance(statement, ast.Return):
            returned = read
        else:
            defined |= {n.id for n in ast.walk(statement) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    assert not returned & deleted
    assert defined - returned - {"_"} == deleted, source


@pytest.mark.parametrize("executors", [["torch"], None])
@pytest.mark.parametrize(("fn", "shapes"), [(chain, [(4, 6)]), (branches, [(3, 4), (3, 4)]), (unused_output, [(5, 7)])])
def test_each_value_is_deleted_after_its_last_use(fn, shapes, executors):
    jfn = compiler.jit(fn, executors=executors)
    args = [torch.randn(s) for s in shapes]
    torch.testing.assert_close(jfn(*args), fn(*args))
    _check_deletions(_source(jfn))


def test_forward_and_backward_of_a_training_step_delete_their_temporaries():
    w = torch.randn(6, 6, requires_grad=True)
    jfn = compiler.jit(lambda x, w: chain(x @ w).sum(), executors=["torch"])
    x = torch.randn(4, 6)
    jfn(x, w).backward()
    expected = w.grad.clone()
    w.grad = None
    chain(x @ w).sum().backward()
    torch.testing.assert_close(expected, w.grad)
    _check_deletions(_source(jfn))
    _check_deletions(_source(jfn, backward=True))


class LiveResults(TorchFunctionMode):
    """Counts, at each torch call, the results of earlier calls that are still alive."""

    def __init__(self) -> None:
        super().__init__()
        self.results: list[weakref.ref] = []
        self.most_alive = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.most_alive = max(self.most_alive, sum(r() is not None for r in self.results))
        if isinstance(out, torch.Tensor):
            self.results.append(weakref.ref(out))
        return out


def test_temporaries_are_freed_as_the_computation_goes_not_at_its_return():
    jfn = compiler.jit(chain, executors=["torch"])
    x = torch.randn(64, 64)
    jfn(x)
    with LiveResults() as live:
        jfn(x)
    assert len(live.results) >= 24 and live.most_alive <= 3, (len(live.results), live.most_alive)
