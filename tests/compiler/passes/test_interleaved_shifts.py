"""interleaved_shifts: an interleave of stepped slices of one tensor becomes shifted copies of it
picked by position, with the same values bit for bit; anything else is left alone. Through `jit`
with a fusing executor and gradients, GPT-J's rotary is then one fusion each way with eager's
gradients; without gradients, its stepped slices stay."""

from __future__ import annotations

import warnings

import pytest
import torch

import compiler
from compiler import prims
from compiler.passes.flatten import flatten
from compiler.passes.interleaved_shifts import interleaved_shifts
from compiler.prims import Prim
from compiler.tracing.interpreter import eval_trace
from tests.support.autodiff_util import check_gradients
from tests.support.nvfuser_helpers import fake_nvfuser, prim_trace  # noqa: F401  (fixture)


def rotate_every_two(x: torch.Tensor) -> torch.Tensor:
    """GPT-J's `rotate_every_two`."""
    return torch.stack((-x[..., 1::2], x[..., ::2]), dim=-1).flatten(-2)


def gptj_rotary(q: torch.Tensor, sin: torch.Tensor, cos: torch.Tensor) -> torch.Tensor:
    """GPT-J's rotary over the first 32 of each head's dims, the rest passed through."""
    rotated, kept = q[..., :32], q[..., 32:]
    return torch.cat([rotated * cos + rotate_every_two(rotated) * sin, kept], dim=-1)


def _stepped_slices(trace) -> int:
    return sum(b.sym is Prim.SLICE and any(s != 1 for s in b.args[3]) for b in trace.bsyms)


def _with_edge_values(x: torch.Tensor) -> torch.Tensor:
    flat = x.reshape(-1)
    flat[:4] = torch.tensor([float("inf"), float("-inf"), float("nan"), -0.0])
    return x


def _same_bits(got: torch.Tensor, want: torch.Tensor) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    assert torch.equal(got.isnan(), want.isnan())
    bits = torch.int16 if got.itemsize == 2 else torch.int32
    assert torch.equal(torch.where(got.isnan(), 0, got).view(bits), torch.where(want.isnan(), 0, want).view(bits))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize(
    ("program", "shape"),
    [
        (rotate_every_two, (2, 3, 8)),
        (lambda x: rotate_every_two(x.float()).to(x.dtype), (4, 1, 6)),  # conversions in the pieces
        (lambda x: torch.stack((x[:, 2::3], -x[:, ::3], x[:, 1::3]), dim=2).flatten(1, 2), (3, 9, 2)),  # step 3
    ],
    ids=["gptj", "converted", "step3-middle-dim"],
)
def test_an_interleave_becomes_shifts_with_every_value_the_same(program, shape, dtype) -> None:
    trace = flatten(prim_trace(program, (shape, dtype)))
    rewritten = interleaved_shifts(trace)
    assert _stepped_slices(trace) > 0 and _stepped_slices(rewritten) == 0
    assert not any(b.sym is Prim.SLICE and 1 in b.output.shape[-1:] for b in rewritten.bsyms)
    for seed in range(3):
        x = _with_edge_values(torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(dtype))
        _same_bits(eval_trace(rewritten, x), eval_trace(trace, x))
        _same_bits(eval_trace(rewritten, x), program(x))


@pytest.mark.parametrize(
    "program",
    [
        lambda x, y: torch.stack((-x[..., 1::2], y[..., ::2]), dim=-1).flatten(-2),  # two tensors
        lambda x, y: torch.stack((x[..., 1::2].exp(), x[..., ::2]), dim=-1).flatten(-2),  # exp: not finite on all
        lambda x, y: torch.stack((x[..., 1::2], x[..., 1::2]), dim=-1).flatten(-2),  # one offset twice
        lambda x, y: torch.stack((x[..., 1::2], x[..., ::2]), dim=-1),  # not merged back
        lambda x, y: torch.stack((x[..., 0:4:2], x[..., 1:4:2]), dim=-1).flatten(-2),  # part of the dim
    ],
    ids=["two-tensors", "exp", "offset-twice", "no-merge", "part"],
)
def test_anything_else_is_left_alone(program) -> None:
    trace = flatten(prim_trace(program, ((2, 8), torch.float32), ((2, 8), torch.float32)))
    assert interleaved_shifts(trace).bsyms == trace.bsyms


def test_pieces_expanded_as_they_are_unsqueezed_are_left_alone() -> None:
    def program(x):  # x: [1, 8]; each piece [1, 4] broadcast to [2, 4, 1] in one prim
        pieces = [prims.slice(x, [0, a], [1, 8], [1, 2]) for a in (1, 0)]
        expanded = [prims.broadcast_in_dim(p, [2, 4, 1], [0, 1]) for p in pieces]
        return prims.reshape(prims.cat(expanded, 2), [2, 8])

    trace = flatten(prim_trace(program, ((1, 8), torch.float32)))
    assert interleaved_shifts(trace).bsyms == trace.bsyms


def test_a_piece_read_elsewhere_too_keeps_its_value_there() -> None:
    def program(x):
        odd = -x[..., 1::2]
        return torch.stack((odd, x[..., ::2]), dim=-1).flatten(-2), odd * 2

    trace = flatten(prim_trace(program, ((2, 8), torch.float32)))
    x = torch.randn(2, 8)
    for got, want in zip(eval_trace(interleaved_shifts(trace), x), program(x)):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_gptj_rotary_is_one_fusion_each_way_with_eagers_gradients(fake_nvfuser, dtype) -> None:  # noqa: F811
    jfn = compiler.jit(gptj_rotary, executors=["nvfuser", "torch"])
    generator = torch.Generator().manual_seed(0)
    q = torch.randn(2, 5, 3, 48, generator=generator).to(dtype)
    sin, cos = (torch.randn(5, 1, 32, generator=generator).to(dtype) for _ in range(2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_gradients(gptj_rotary, [q, sin, cos], jfn=jfn, reference_dtype=torch.float64)
    forward, backward = compiler.last_traces(jfn)[-1], compiler.last_backward_traces(jfn)[-1]
    # NOTE: sin's and cos's gradients, summed over the heads inside, are reshaped by torch after
    assert [b.sym.name for b in forward.bsyms] == ["nvFusion0"], forward
    assert [b.sym.name for b in backward.bsyms if b.subsymbols] == ["nvFusion0"], backward
    assert _stepped_slices(flatten(compiler.last_traces(jfn)[0])) == 2  # the traced program's, rewritten after


def test_symbolic_batch_and_sequence_sizes_record_no_guard_and_compile_once(fake_nvfuser) -> None:  # noqa: F811
    jfn = compiler.jit(
        gptj_rotary, executors=["nvfuser", "torch"], dynamic=["q.size(0)", "q.size(1)", "sin.size(0)", "cos.size(0)"]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for batch, length in ((2, 5), (3, 7)):
            generator = torch.Generator().manual_seed(batch)
            q = torch.randn(batch, length, 3, 48, generator=generator)
            sin, cos = (torch.randn(length, 1, 32, generator=generator) for _ in range(2))
            check_gradients(gptj_rotary, [q, sin, cos], jfn=jfn)
    assert len(compiler.examine.recompilations(jfn)) <= 1, compiler.examine.recompilations(jfn)
    assert _stepped_slices(compiler.last_traces(jfn)[-1]) == 0


def test_a_forward_without_gradients_keeps_the_stepped_slices(fake_nvfuser) -> None:  # noqa: F811
    """nvFuser refuses the shifts' forward fusion; the stepped slices are torch's views."""
    jfn = compiler.jit(rotate_every_two, executors=["nvfuser", "torch"])
    x = torch.randn(2, 8)
    torch.testing.assert_close(jfn(x), rotate_every_two(x), rtol=0, atol=0)
    assert _stepped_slices(compiler.last_traces(jfn)[-1]) == 2


def test_the_torch_executor_keeps_the_stepped_slices() -> None:
    """As torch, a stepped slice is a view: nothing to gain from shifted copies."""
    jfn = compiler.jit(rotate_every_two, executors=["torch"])
    x = torch.randn(2, 8)
    torch.testing.assert_close(jfn(x), rotate_every_two(x), rtol=0, atol=0)
    assert _stepped_slices(compiler.last_traces(jfn)[-1]) == 2


def test_a_gptj_training_step_through_the_fusing_executor_matches_eager(fake_nvfuser) -> None:  # noqa: F811
    """The whole model: its rotary's pairs as shifts in the forward autodiff differentiates, its loss
    and every gradient as eager's."""
    pytest.importorskip("transformers")
    import copy

    from suites._models.hf_zoo_inputs import call_inputs, every_architecture, tiny_model, training_loss

    zoo = every_architecture()["gptj"]
    eager = tiny_model(zoo, torch.device("cpu")).train(True)
    model = copy.deepcopy(eager)
    jfn = compiler.jit(model, executors=["nvfuser", "torch"])
    inputs = call_inputs(zoo, True, torch.device("cpu"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = training_loss(jfn(**copy.deepcopy(inputs)))
        want = training_loss(eager(**inputs))
        got.backward()
        want.backward()
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    for (name, p), q in zip(model.named_parameters(), eager.parameters()):
        error = (p.grad - q.grad).norm() / q.grad.norm().clamp_min(1e-6)
        assert error <= 1e-3, f"{name}: gradient error {error:.2e}"
    assert _stepped_slices(compiler.last_traces(jfn)[-1]) == 0
