"""batch_regions: small same-structure regions (an optimizer step's biases) run as one fusion over
their inputs laid end to end; results against eager, and what must not batch."""

from __future__ import annotations

import copy

import pytest
import torch

import compiler
from compiler import prims
from compiler.executors.nvfuser.executor import region_fusions
from compiler.runtime import pipeline
from compiler.tracing.check_trace import check_trace
from suites.adam_step import PARAMETER_SETS, adam_step
from tests.support.nvfuser_helpers import fake_nvfuser  # noqa: F401 - a fixture

HYPER = (1e-3, 0.9, 0.999, 1e-8)


def adam_state(shapes, seed: int, transpose: bool = False) -> tuple:
    gen = torch.Generator().manual_seed(seed)

    def tensors(positive: bool = False) -> list[torch.Tensor]:
        made = [torch.randn(s, generator=gen) for s in shapes]
        made = [t.abs() if positive else t for t in made]
        return [t.t() if transpose and t.dim() == 2 else t for t in made]

    return tensors(), tensors(), tensors(), tensors(positive=True)


def top_level(jfn) -> list[str]:
    return [b.sym.name for b in compiler.last_traces(jfn)[-1].bsyms if getattr(b.sym, "executor", None)]


def run_against_eager(jfn, shapes, seed: int, steps=(3, 4), transpose: bool = False) -> None:
    state = adam_state(shapes, seed, transpose)
    expected = copy.deepcopy(state)
    for step in steps:
        jfn(*state, step, *HYPER)
        adam_step(*expected, step, *HYPER)
    for got, want in zip(state, expected):
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("runner", ["torch", "nvfuser"])
@pytest.mark.parametrize("seed", [0, 1])
def test_gpt_tiny_adam_batches_every_small_parameter_into_one_fusion(runner, seed, fake_nvfuser):  # noqa: F811
    shapes = PARAMETER_SETS["gpt-tiny"]
    jfn = compiler.jit(adam_step, executors=["nvfuser", "torch"], fusion={"runner": runner})
    run_against_eager(jfn, shapes, seed)
    small = sum(1 for s in shapes if torch.Size(s).numel() <= 16384)
    assert top_level(jfn) == ["nvFusion0", "nvBatch0"]  # the [512, 64] embedding alone, then the rest
    (batch,) = [b for b in compiler.last_traces(jfn)[-1].bsyms if b.sym.name == "nvBatch0"]
    assert len(batch.subsymbols) == small == len(shapes) - 1
    assert [f.name for f in region_fusions(compiler.last_traces(jfn)[-1])] == ["nvFusion0", "nvBatch0"]
    check_trace(compiler.last_traces(jfn)[-1])
    flat = region_fusions(compiler.last_traces(jfn)[-1])[1]
    assert flat.last_inputs[0].shape == (sum(torch.Size(s).numel() for s in shapes[1:]),)
    if runner == "nvfuser":  # the embedding's and the batch's, twice: step 4 recompiled with the step symbolic
        assert compiler.examine.stats(jfn).definitions == 4


def test_non_contiguous_parameters_are_read_and_written_through_their_strides():
    shapes = [(8, 4), (3,), (16, 8), (5, 7)]
    jfn = compiler.jit(adam_step, executors=["nvfuser", "torch"], fusion={"runner": "torch"})
    run_against_eager(jfn, shapes, seed=2, transpose=True)
    assert top_level(jfn) == ["nvBatch0"]


@pytest.mark.parametrize("seed", [0, 1])
def test_strided_vectors_take_the_one_dimensional_path(seed):
    def vectors(shapes, generator):
        return [torch.randn(2 * s[0], generator=generator)[::2] for s in shapes]  # 1-D, stride 2

    shapes = [(7,), (3,), (16,)]
    gen = torch.Generator().manual_seed(seed)
    state = tuple(vectors(shapes, gen) for _ in range(3)) + ([t.abs() for t in vectors(shapes, gen)],)
    expected = copy.deepcopy(state)
    jfn = compiler.jit(adam_step, executors=["nvfuser", "torch"], fusion={"runner": "torch"})
    jfn(*state, 3, *HYPER)
    adam_step(*expected, 3, *HYPER)
    for got, want in zip(state, expected):
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w, rtol=1e-6, atol=1e-7)
    (batch,) = [b for b in compiler.last_traces(jfn)[-1].bsyms if b.sym.name == "nvBatch0"]
    assert batch.sym.impl.one_dim and batch.sym.impl.numels == [7, 3, 16]


def test_a_symbolic_step_shared_by_the_members_batches_them(fake_nvfuser):  # noqa: F811
    shapes = [(8, 4), (3,), (6,)]
    jfn = compiler.jit(adam_step, numbers="symbolic", executors=["nvfuser", "torch"])
    run_against_eager(jfn, shapes, seed=3, steps=(3, 4, 5))
    assert top_level(jfn) == ["nvBatch0"] and compiler.examine.stats(jfn).definitions == 1


def test_limits_and_the_off_switch():
    shapes = [(8, 4), (3,), (64, 64)]
    jfn = compiler.jit(adam_step, executors=["nvfuser", "torch"], fusion={"runner": "torch", "batch_numel": 32})
    run_against_eager(jfn, shapes, seed=4)
    assert top_level(jfn) == ["nvBatch0", "nvFusion2"]  # 32 and 3 elements batch; 4096 does not
    jfn = compiler.jit(adam_step, executors=["nvfuser", "torch"], fusion={"runner": "torch", "batch_numel": 0})
    run_against_eager(jfn, shapes, seed=4)
    assert top_level(jfn) == ["nvFusion0", "nvFusion1", "nvFusion2"]
    with pytest.raises(ValueError, match=r"batch_numel=-1: expected an int >= 0"):
        compiler.jit(adam_step, fusion={"batch_numel": -1})


def chained(a, b, c, e):
    a.mul_(2.0).add_(e)
    k = prims.floor_divide(a, 1.0)  # left to torch: reads what the first update wrote
    b.mul_(2.0).add_(k)  # the same structure, but it must run after a's update
    c.mul_(2.0).add_(e)


def test_a_batch_runs_after_what_its_members_read():
    jfn = compiler.jit(chained, executors=["nvfuser", "torch"], fusion={"runner": "torch", "horizontal": False})
    args = [torch.randn(6) for _ in range(4)]
    expected = [t.clone() for t in args]
    jfn(*args)
    chained(*expected)
    for g, w in zip(args, expected):
        torch.testing.assert_close(g, w)
    # a's update returns its value to floor_divide: not batched; b's (reading k) and c's batch after it
    bsyms = compiler.last_traces(jfn)[-1].bsyms
    assert [str(b).split("(")[0].split(" = ")[-1] for b in bsyms] == ["nvFusion0", "prims.floor_divide", "nvBatch0"]
    assert [member.args[0].name for member in bsyms[2].subsymbols] == ["b", "c"]


def read_view_between(d, a, e):
    v = a.view(2, 3)
    d.mul_(2.0).add_(e)
    x = prims.floor_divide(v, 1.0)  # left to torch: reads a through its view, before a's update
    a.mul_(2.0).add_(e)
    return x


@pytest.mark.parametrize("seed", [0, 1])
def test_an_update_never_moves_before_a_read_of_its_buffer_through_a_view(seed):
    jfn = compiler.jit(
        read_view_between, executors=["nvfuser", "torch"], fusion={"runner": "torch", "horizontal": False}
    )
    gen = torch.Generator().manual_seed(seed)
    d, a, e = (torch.randn(6, generator=gen) * 4 for _ in range(3))
    want_d, want_a = d.clone(), a.clone()
    want_x = read_view_between(want_d, want_a, e)
    torch.testing.assert_close(jfn(d, a, e), want_x)
    torch.testing.assert_close((d, a), (want_d, want_a))
    trace = compiler.last_traces(jfn)[-1]
    leaves = [[leaf for leaf in _leaves(b)] for b in trace.bsyms]
    writes_a = next(
        i for i, ls in enumerate(leaves) if any(lf.sym.value == "copy_to" and lf.args[1].name == "a" for lf in ls)
    )
    reads_a = [i for i, ls in enumerate(leaves) if any(lf.sym.value == "floor_divide" for lf in ls)]
    assert reads_a and max(reads_a) < writes_a


def _leaves(bsym):
    if not bsym.subsymbols:
        yield bsym
    for sub in bsym.subsymbols:
        yield from _leaves(sub)


def test_a_region_returning_values_is_not_batched():
    def program(a, b):
        a.mul_(2.0).add_(1.0)
        return (b * 3.0).exp()

    jfn = compiler.jit(program, executors=["nvfuser", "torch"], fusion={"runner": "torch", "horizontal": False})
    a, b = torch.randn(6), torch.randn(6)
    want_a = a.clone().mul_(2.0).add_(1.0)
    torch.testing.assert_close(jfn(a, b), (b * 3.0).exp())
    torch.testing.assert_close(a, want_a)
    assert not any(name.startswith("nvBatch") for name in top_level(jfn))


@pytest.mark.nvfuser
@pytest.mark.parametrize("cuda_graphs", [False, True])
def test_gpt_tiny_adam_on_the_gpu_with_new_gradients_every_step(cuda_graphs):
    shapes = PARAMETER_SETS["gpt-tiny"]
    state = tuple([t.cuda() for t in ts] for ts in adam_state(shapes, seed=5))
    expected = copy.deepcopy(state)
    jfn = compiler.jit(adam_step, cuda_graphs=cuda_graphs)
    gen = torch.Generator(device="cuda").manual_seed(0)
    for i in range(1, 6):
        step = 3 if cuda_graphs else i  # a graph holds its scalars: a new step number captures again
        for g, eg in zip(state[1], expected[1]):  # new values in the same memory, as a backward writes them
            g.copy_(torch.randn(g.shape, device="cuda", generator=gen))
            eg.copy_(g)
        jfn(*state, step, *HYPER)
        adam_step(*expected, step, *HYPER)
        for got, want in zip(state, expected):
            for g, w in zip(got, want):
                torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6)
    assert "nvBatch0" in top_level(jfn)
    if cuda_graphs:
        assert sum(e.computation.stats.replays for e in jfn.entries) >= 3


class _Accesses:
    """A stand-in for batch_regions._Memory: what each (named) bound symbol reads and writes."""

    def __init__(self, table):
        self.table = table

    def reads(self, bsym):
        return set(self.table[bsym][0])

    def writes(self, bsym):
        return set(self.table[bsym][1])


def test_a_member_left_in_place_is_passed_like_any_other_bound_symbol():
    from compiler.passes.batch_regions import _movable

    accesses = {
        "r0": ({"a", "e"}, {"a"}),
        "floor_divide": ({"e"}, {"k"}),
        "rb": ({"b", "k", "c"}, {"b"}),  # reads k: stays after floor_divide
        "rc": ({"c", "e"}, {"c"}),  # writes c, which rb (left in place) reads first
        "rd": ({"d", "e"}, {"d"}),
    }
    order = list(accesses)
    assert _movable(order, [0, 2, 3, 4], _Accesses(accesses)) == [0, 4]


@pytest.mark.parametrize("seed", [0, 1])
def test_inductor_runs_a_batch_as_one_region_of_every_member(seed):
    # Inductor compiles the members' prims as one region: one call, nothing copied in or out
    from compiler.executors.inductor import InductorFusion, inductor_fusions, unavailable_reason

    if unavailable_reason() is not None:
        pytest.skip(f"needs Inductor: {unavailable_reason()}")
    shapes = PARAMETER_SETS["gpt-tiny"]
    transposed = compiler.jit(adam_step, executors=["inductor", "torch"], fallback=False)
    run_against_eager(transposed, shapes, seed, transpose=True)  # members read through their strides
    assert "inductorBatch0" in top_level(transposed)
    jfn = compiler.jit(adam_step, executors=["inductor", "torch"], fallback=False)
    run_against_eager(jfn, shapes, seed)
    trace = compiler.last_traces(jfn)[-1]
    check_trace(trace)
    assert top_level(jfn) == ["inductor0", "inductorBatch0"]
    (batch,) = [b for b in trace.bsyms if b.sym.name == "inductorBatch0"]
    assert len(batch.subsymbols) == len(shapes) - 1
    fusions = inductor_fusions(trace)
    assert all(isinstance(f, InductorFusion) for f in fusions) and len(fusions) == 2
    # every member's four tensors once, and the numbers they share (the step) once
    inputs = fusions[1].region.inputs
    assert sum(isinstance(p, torch.Tensor) or hasattr(p, "shape") for p in inputs) == 4 * (len(shapes) - 1)
    assert len({p.name for p in inputs}) == len(inputs) == len(batch.args)


@pytest.mark.parametrize("runner", ["torch", "nvfuser"])
def test_updates_reading_device_scalars_batch_as_they_do_reading_numbers(runner, fake_nvfuser):  # noqa: F811
    # under CUDA graphs a changing step count and learning rate are read from 0-d tensors, which
    # every update broadcasts: the small updates still batch, sharing those tensors
    shapes = PARAMETER_SETS["gpt-tiny"]
    jfn = compiler.jit(adam_step, executors=["nvfuser", "torch"], fusion={"runner": runner}, numbers="symbolic")
    state = adam_state(shapes, 0)
    expected = copy.deepcopy(state)
    jfn(*copy.deepcopy(state), 3, *HYPER)
    traces = compiler.last_traces(jfn)
    names = [p.name for p in traces[-1].inputs]
    positions = tuple(names.index(n) for n in ("step", "lr"))
    computation = pipeline._reading_device_scalars(jfn.options, traces, positions, torch.device("cpu"), False)
    assert [b.sym.name for b in traces[-1].bsyms if getattr(b.sym, "executor", None) == "nvfuser"] == [
        "nvFusion0",
        "nvBatch0",
    ]
    # both read the 0-d inputs expanded, not broadcast inside (expanded_inputs.py)
    fusions = region_fusions(traces[-1])
    assert [b for f in fusions for b in f.region.bsyms if b.sym is prims.Prim.BROADCAST_IN_DIM] == []
    assert len(fusions) == 2
    inputs = list(jfn.last_entry.prologue((*state, 4, *HYPER), {}))
    inputs[positions[0]], inputs[positions[1]] = torch.tensor(4), torch.tensor(HYPER[0], dtype=torch.float64)
    computation(*inputs)
    adam_step(*expected, 4, *HYPER)
    for got, want in zip(state, expected):
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w, rtol=1e-6, atol=1e-7)
