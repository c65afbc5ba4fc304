"""The prologue's inline guards (compiler/runtime/guard_source.py): the batched C++ tensor check
accepts no call that the exact guard lines reject, and the lines still decide where it says no."""

from __future__ import annotations

import pytest
import torch

import compiler
from compiler.core.errors import GuardFailure
from compiler.core.ir import BoundSymbol
from compiler.prims import Prim
from compiler.runtime import guard_source
from compiler.runtime.guard_source import DisjointCheck, TensorChecks, tensor_check_runs
from compiler.tracing import frontend


def scale_all(tensors: list[torch.Tensor], factor: float) -> list[torch.Tensor]:
    return [t * factor for t in tensors]


def _tensors(seed: int = 0) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(3, 4, generator=gen), torch.randn(5, generator=gen), torch.randn(2, 1, 6, generator=gen)]


def _entry(jfn: compiler.JittedFunction):  # the cache entry the last call used
    return compiler.called_jitted(jfn, "test")


def test_a_list_of_tensors_is_one_batched_check_that_learns_on_the_first_call() -> None:
    jfn = compiler.jit(scale_all)
    tensors = _tensors()
    jfn(tensors, 2.0)
    source = _entry(jfn).prologue.__fusebench_source__
    assert source.count(".check(") == 1, source
    for out, t in zip(jfn(_tensors(1), 2.0), _tensors(1)):
        torch.testing.assert_close(out, t * 2.0)
    checks = [v for v in _entry(jfn).prologue.__globals__.values() if isinstance(v, TensorChecks)]
    assert len(checks) == 1 and checks[0].learned
    assert checks[0].check(*_tensors(2)), "the C++ check should accept tensors like the examples"
    assert compiler.cache_stats(jfn).misses == 1 and compiler.cache_stats(jfn).hits == 1


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda ts: [ts[0], torch.randn(6), ts[2]], id="shape"),
        pytest.param(lambda ts: [ts[0].double(), ts[1], ts[2]], id="dtype"),
        pytest.param(lambda ts: [ts[0], ts[1], ts[2].reshape(6, 2)], id="rank"),
        pytest.param(lambda ts: [ts[0], 3.0, ts[2]], id="not-a-tensor"),
        pytest.param(lambda ts: [ts[0], ts[1], ts[2], ts[0]], id="length"),
    ],
)
def test_a_changed_element_compiles_a_new_entry(change) -> None:
    jfn = compiler.jit(scale_all)
    jfn(_tensors(), 2.0)
    jfn(_tensors(1), 2.0)  # the batched check has learned
    changed = change(_tensors(2))
    jfn(changed, 2.0)
    assert compiler.cache_stats(jfn).misses == 2


def test_what_the_lines_accept_but_the_batched_check_does_not_is_still_a_hit() -> None:
    jfn = compiler.jit(scale_all)
    with torch.no_grad():
        jfn([t.requires_grad_() for t in _tensors()], 2.0)
        jfn(_tensors(1), 2.0)  # requires_grad differs: the C++ check says no, the lines say yes
        parameters = [torch.nn.Parameter(t, requires_grad=False) for t in _tensors(2)]
        out = jfn(parameters, 2.0)  # another type (a Tensor subclass) and a transposed layout
        jfn([_tensors(3)[0].t().contiguous().t(), *_tensors(3)[1:]], 2.0)
    assert compiler.cache_stats(jfn).misses == 1 and compiler.cache_stats(jfn).hits == 3
    for o, p in zip(out, parameters):
        torch.testing.assert_close(o, p * 2.0)


def test_without_torchs_check_the_lines_decide(monkeypatch: pytest.MonkeyPatch) -> None:
    class Missing:
        def __init__(self, *args: object, **kwargs: object) -> None:
            raise TypeError("no such check here")

    monkeypatch.setattr(torch._C._dynamo.guards, "TensorGuards", Missing)
    checks = TensorChecks()
    checks.learn(*_tensors())
    assert checks.learned and not checks.check(*_tensors())
    jfn = compiler.jit(scale_all)
    for seed in range(3):
        for out, t in zip(jfn(_tensors(seed), 3.0), _tensors(seed)):
            torch.testing.assert_close(out, t * 3.0)
    jfn([torch.randn(7), *_tensors()[1:]], 3.0)
    assert compiler.cache_stats(jfn).hits == 2 and compiler.cache_stats(jfn).misses == 2


def test_runs_hold_consecutive_fixed_shape_checks_only() -> None:
    jfn = compiler.jit(scale_all)
    jfn(_tensors(), 2.0)
    bsyms = compiler.last_prologue(jfn).bsyms
    checks = [b for b in bsyms if b.sym is Prim.CHECK_TENSOR]
    assert tensor_check_runs(bsyms) == [checks]
    proxy, _, dtype, device = checks[1].args
    sized = BoundSymbol(Prim.CHECK_TENSOR, (proxy, (None,), dtype, device), {}, None)  # a symbolic size
    other = BoundSymbol(Prim.CHECK_TYPE, (proxy, list), {}, None)
    assert tensor_check_runs([checks[0], sized, checks[2]]) == [[checks[0]], [checks[2]]]
    assert tensor_check_runs([checks[0], other, checks[1], checks[2]]) == [[checks[0]], checks[1:]]


def test_a_no_grad_entry_checks_requires_grad_in_its_runs_lines_and_learns_only_without_grad() -> None:
    jfn = compiler.jit(scale_all)
    with torch.no_grad():
        jfn([t.requires_grad_() for t in _tensors()], 2.0)
    source = _entry(jfn).prologue.__fusebench_source__
    lines = [line for line in source.splitlines() if "requires_grad" in line]
    assert len(lines) == 1 and lines[0].startswith("    if ("), source  # inside the run's lines only
    checks = [v for v in _entry(jfn).prologue.__globals__.values() if isinstance(v, TensorChecks)]
    assert not checks[0].learned, "examples that require grad are not learned from"
    jfn(_tensors(1), 2.0)
    assert checks[0].learned
    out = jfn([t.requires_grad_() for t in _tensors(2)], 2.0)  # grad mode: the no-grad entry must refuse
    assert compiler.cache_stats(jfn).misses == 2 and all(o.requires_grad for o in out)


def _disjoint_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    calls: list[tuple] = []
    checked = guard_source.check_aliasing

    def counting(tensors: tuple, groups: tuple | None, disjoint: bool) -> None:
        calls.append(tensors)
        checked(tensors, groups, disjoint)

    monkeypatch.setattr(guard_source, "check_aliasing", counting)
    return calls


def test_the_disjoint_check_accepts_the_same_tensors_again_without_reading_their_storages(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = _disjoint_calls(monkeypatch)
    check = DisjointCheck()
    a, b = torch.zeros(4), torch.zeros(4)
    for _ in range(3):
        check((a, b))
    assert len(calls) == 1
    check((a.view(4), b))  # another tensor object at the same address: checked again
    check((a, b.clone()))  # another address
    assert len(calls) == 3


def test_the_disjoint_check_sees_a_tensor_moved_onto_anothers_storage() -> None:
    check = DisjointCheck()
    a, b = torch.zeros(8), torch.zeros(4)
    check((a, b))
    check((a, b))
    b.set_(a.untyped_storage(), 4, (4,))  # the same object, now inside a's memory
    with pytest.raises(GuardFailure):
        check((a, b))


def test_the_disjoint_check_stops_remembering_fresh_tensors(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _disjoint_calls(monkeypatch)
    check = DisjointCheck()
    for _ in range(2 + DisjointCheck.MISSES):
        check((torch.zeros(2), torch.zeros(2)))
    assert len(calls) == 2 + DisjointCheck.MISSES and check.misses == DisjointCheck.MISSES
    shared = torch.zeros(4)
    with pytest.raises(GuardFailure):
        check((shared, shared[1:]))


def step(params: list[torch.Tensor], grads: list[torch.Tensor]) -> None:
    for p, g in zip(params, grads):
        p.sub_(g * 0.1)


def test_an_optimizer_step_checks_its_arguments_storages_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _disjoint_calls(monkeypatch)
    params, grads = _tensors(), _tensors(1)
    expected = [p - 0.3 * g for p, g in zip(params, grads)]
    jfn = compiler.jit(step)
    for _ in range(3):
        jfn(params, grads)
    for p, e in zip(params, expected):
        torch.testing.assert_close(p, e)
    assert any(isinstance(v, DisjointCheck) for v in _entry(jfn).prologue.__globals__.values())
    assert compiler.cache_stats(jfn).hits == 2 and len(calls) == 1


def _strided_prologue(fn, *args: object):
    """The compiled prologue of `fn` traced on `args` with exact strides (a CUDA-graphed entry's)."""
    prologue, _ = frontend.trace(fn, args, {}, exact_strides=True)
    return guard_source.compile_prologue(prologue)


@pytest.mark.parametrize("learned", [False, True], ids=["lines", "batched-check"])
def test_exact_strides_reject_another_layout_of_the_same_shape(learned: bool) -> None:
    prologue = _strided_prologue(scale_all, _tensors(), 2.0)
    source = prologue.__fusebench_source__
    assert source.count(".check(") == 1 and source.count(".stride() ==") == 3, source
    assert "check_strides" not in source, "the run's lines check the strides"
    if learned:
        prologue((_tensors(1), 2.0), {})
    checks = [v for v in prologue.__globals__.values() if isinstance(v, TensorChecks)]
    assert checks[0].learned == learned
    square = torch.randn(4, 4)
    prologue, _ = frontend.trace(scale_all, ([square, torch.randn(5)], 2.0), {}, exact_strides=True)
    prologue = guard_source.compile_prologue(prologue)
    if learned:
        prologue(([torch.randn(4, 4), torch.randn(5)], 2.0), {})
    with pytest.raises(GuardFailure):
        prologue(([square.t(), torch.randn(5)], 2.0), {})  # same shape, same memory, other strides
    with pytest.raises(GuardFailure):
        prologue(([torch.randn(4, 8)[:, ::2], torch.randn(5)], 2.0), {})
    assert len(prologue(([torch.randn(4, 4), torch.randn(5)], 2.0), {})) == 2


def test_the_batched_check_learns_exact_strides_only_where_asked() -> None:
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    checks = TensorChecks(exact_strides=[True, False])
    checks.learn(a, b)
    assert checks.check(a, b.t()) and not checks.check(a.t(), b)


def test_a_strided_optimizer_step_checks_disjointness_by_address_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _disjoint_calls(monkeypatch)
    params, grads = _tensors(), _tensors(1)
    prologue = _strided_prologue(step, params, grads)
    (check,) = [v for v in prologue.__globals__.values() if isinstance(v, DisjointCheck)]
    assert check.by_address
    prologue((params, grads), {})
    prologue(([p.view(p.shape) for p in params], grads), {})  # other tensor objects, the same memory
    assert len(calls) == 1
    with pytest.raises(GuardFailure):  # the same address, other strides: the stride guard refuses
        prologue(([params[0].t(), *params[1:]], grads), {})
    shared = torch.zeros(2 * 3 * 4 + 5)
    overlapping = [shared[:12].view(3, 4), shared[12:17], shared[:12].view(2, 1, 6)]
    with pytest.raises(GuardFailure):
        prologue((overlapping, grads), {})
