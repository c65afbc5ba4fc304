"""The autograd side of jit: cache entries per grad mode, errors as eager, inspection, the partition."""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F

import compiler
from compiler import examine
from compiler.passes.split_backward import RECOMPUTE_REACH
from compiler.tracing.check_trace import check_trace
from tests.support.autodiff_util import AtenOps, check_gradients

LEAF_ERROR = re.escape("a leaf Variable that requires grad is being used in an in-place operation.")


def gelu(x):
    return F.gelu(x, approximate="tanh")


def test_no_grad_and_grad_calls_compile_two_entries_and_never_mix_them():
    jfn = compiler.jit(gelu)
    x = torch.randn(4, 8, requires_grad=True)
    with torch.no_grad():
        plain = jfn(x)
    assert not plain.requires_grad and compiler.last_backward_traces(jfn) == []
    tracked = jfn(x)
    assert tracked.requires_grad and compiler.last_backward_traces(jfn)
    assert compiler.cache_stats(jfn).misses == 2
    for _ in range(2):
        with torch.no_grad():
            assert not jfn(x).requires_grad
        assert jfn(x).requires_grad
        assert not jfn(x.detach()).requires_grad  # no input requires grad: the plain entry
    assert compiler.cache_stats(jfn).misses == 2
    torch.testing.assert_close(plain, tracked.detach())


def test_requires_grad_of_each_input_is_guarded():
    jfn = compiler.jit(lambda x, y: x * y)
    x, y = torch.randn(3), torch.randn(3)
    for flags in ((True, False), (False, True), (True, True), (True, False)):
        check_gradients(lambda x, y: x * y, [x, y], flags, jfn=jfn)
    assert compiler.cache_stats(jfn).misses == 3


def test_in_place_on_a_leaf_that_requires_grad_raises_eagers_error():
    def program(x):
        x.mul_(2)
        return x

    x = torch.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError, match=LEAF_ERROR):
        program(x)
    with pytest.raises(RuntimeError, match=LEAF_ERROR):
        compiler.jit(program)(x)
    before = x.detach().clone()
    with torch.no_grad():
        compiler.jit(program)(x)  # allowed without grad mode, as in eager
    torch.testing.assert_close(x.detach(), before * 2)


def test_double_backward_raises_naming_the_function():
    jfn = compiler.jit(gelu)
    x = torch.randn(5, requires_grad=True)
    y = jfn(x).sum()
    with pytest.raises(NotImplementedError, match=r"double backward.*gelu"):
        torch.autograd.grad(y, x, create_graph=True)


def test_symbolic_scalars_reach_the_backward():
    def program(x, scale, cut):
        return (x[:, :cut] * scale).tanh()

    jfn = compiler.jit(program, numbers="symbolic")
    x = torch.randn(4, 10)
    for cut in (3, 7):
        check_gradients(program, [x, 0.5 * cut, cut], [True, False, False], jfn=jfn)
    assert compiler.cache_stats(jfn).misses == 1


def test_the_gelu_partition_recomputes_and_saves_only_the_input():
    jfn = compiler.jit(gelu)
    jfn(torch.randn(16, 32, requires_grad=True))
    saved = examine.saved_for_backward(jfn)
    assert [(v.name, v.shape, v.dtype, v.bytes) for v in saved] == [("x", (16, 32), torch.float32, 16 * 32 * 4)]
    assert "x: float32[16, 32], 2,048 bytes" in str(saved) and "total: 2,048 bytes" in str(saved)
    assert [b.sym.value for b in compiler.last_backward_traces(jfn)[0].bsyms].count("tanh") == 1


def test_gelu_bias_saves_the_two_inputs_not_their_sum():
    jfn = compiler.jit(lambda x, b: gelu(x + b))
    jfn(torch.randn(8, 16, requires_grad=True), torch.randn(16, requires_grad=True))
    assert [v.name for v in examine.saved_for_backward(jfn)] == ["x", "b"]


def test_layer_norm_saves_reduced_statistics_not_normalized_values():
    jfn = compiler.jit(lambda x, w, b: F.layer_norm(x, (64,), w, b))
    jfn(torch.randn(8, 64, requires_grad=True), torch.randn(64, requires_grad=True), torch.randn(64))
    big = [v for v in examine.saved_for_backward(jfn) if v.bytes >= 8 * 64 * 4]
    assert [v.name for v in big] == ["x"]


def test_a_matmul_operand_in_both_passes_is_saved_not_recomputed():
    # The GELU output is the second linear's input: the forward writes it for that matmul anyway,
    # and the backward's weight gradient reads it; recomputing it would write it again.
    def mlp(x, w1, w2):
        return F.linear(gelu(F.linear(x, w1)), w2)

    jfn = compiler.jit(mlp)
    args = [torch.randn(8, 16, requires_grad=True), torch.randn(32, 16, requires_grad=True)]
    args.append(torch.randn(16, 32, requires_grad=True))
    check_gradients(mlp, args, [True] * 3, jfn=jfn)
    big = {v.name: v.shape for v in examine.saved_for_backward(jfn) if v.shape == (8, 32)}
    assert len(big) == 2  # the first linear's output (GELU's input) and the GELU output
    computed = {p.name for b in compiler.last_backward_traces(jfn)[0].bsyms for p in b.outputs}
    assert not computed & set(big)


def test_a_residual_stack_saves_each_layers_input_not_a_chain_to_recompute():
    # Saving x_k or the matmul output m_k costs the same bytes; of the equal cuts the split takes
    # the latest one, so the backward does not recompute the residual stream x_k = x_(k-1) + m_(k-1)
    # from x_0 across every layer (a chain that fused into one fusion spanning the whole model).
    def stack(x: torch.Tensor, *ws: torch.Tensor) -> torch.Tensor:
        for w in ws:
            x = x + x @ w
        return x.sum()

    jfn = compiler.jit(stack)
    x, ws = torch.randn(8, 16, requires_grad=True), [torch.randn(16, 16, requires_grad=True) for _ in range(4)]
    check_gradients(stack, [x, *ws], [True] * 5, jfn=jfn)
    backward = compiler.last_backward_traces(jfn)[0]
    saved = {v.name for v in examine.saved_for_backward(jfn)}
    assert len(saved) == 8  # x, the 4 weights and x_1 .. x_3
    assert not [b for b in backward.bsyms if b.sym.value == "add" and all(p.name in saved for p in b.inputs)]


def _rms(y: torch.Tensor) -> torch.Tensor:
    return y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + 1e-6)


def test_a_post_norm_residual_stack_does_not_recompute_its_stream_across_every_layer():
    # x_k = x_(k-1) + rms(rms(x_(k-1)) @ w_k): the norms' backward reads m_k = rms(x) @ w and x_k's
    # statistics anyway, so recomputing x_k from x_0 is strictly cheaper in bytes; the split still
    # keeps each recomputed chain within RECOMPUTE_REACH matmuls (Gemma 2's post-norm layers made
    # one backward fusion recompute the whole model's stream).
    layers = 2 * RECOMPUTE_REACH + 2

    def stack(x: torch.Tensor, *ws: torch.Tensor) -> torch.Tensor:
        for w in ws:
            x = x + _rms(_rms(x) @ w)
        return x.sum()

    jfn = compiler.jit(stack)
    x = torch.randn(8, 16, requires_grad=True)
    ws = [torch.randn(16, 16, requires_grad=True) / 4 for _ in range(layers)]
    jfn(x, *ws).backward()
    forward = next(t for t in compiler.last_traces(jfn) if t.provenance.startswith("split_backward"))
    forward_values = {p.name for b in forward.bsyms for p in b.outputs}
    chain: dict[str, int] = {}  # a recomputed value -> the residual adds recomputed in a row for it
    for b in compiler.last_backward_traces(jfn)[0].bsyms:
        if all(p.name in forward_values for p in b.outputs):
            depth = max((chain.get(p.name, 0) for p in b.inputs), default=0)
            chain.update((p.name, depth + (b.sym.value == "add")) for p in b.outputs)
    assert 1 < max(chain.values()) <= RECOMPUTE_REACH + 1
    check_gradients(stack, [x, *ws], [True] * (layers + 1), jfn=jfn)


def test_saved_for_backward_is_empty_without_a_backward():
    jfn = compiler.jit(gelu)
    jfn(torch.randn(3))
    assert list(examine.saved_for_backward(jfn)) == [] and "nothing saved" in str(examine.saved_for_backward(jfn))


def test_forward_and_backward_traces_are_well_formed_and_print_as_python():
    def program(x, w, b, target):
        return F.cross_entropy(F.linear(F.layer_norm(x, (8,)), w, b), target)

    jfn = compiler.jit(program)
    args = [torch.randn(6, 8), torch.randn(5, 8), torch.randn(5), torch.tensor([0, 1, 4, -100, 2, 3])]
    check_gradients(program, args, [True, True, True, False], jfn=jfn)
    for trace in compiler.last_traces(jfn) + compiler.last_backward_traces(jfn):
        check_trace(trace)
    backward = compiler.last_backward_traces(jfn)[-1]
    assert str(backward).splitlines()[0].startswith("# Constructed by")
    backward.python()  # the printed source runs as Python


def test_backward_elementwise_chain_fuses_into_one_region(fake_nvfuser):  # noqa: F811
    jfn = compiler.jit(gelu, executors=["nvfuser", "torch"])
    check_gradients(gelu, [torch.randn(4, 8)], jfn=jfn)
    forward, backward = compiler.last_traces(jfn)[-1], compiler.last_backward_traces(jfn)[-1]
    assert [b.sym.name for b in forward.bsyms] == ["nvFusion0"]
    assert [b.sym.name for b in backward.bsyms] == ["nvFusion0"]


def test_gelu_bias_backward_is_one_region_with_the_bias_reduction(fake_nvfuser):  # noqa: F811
    def program(x, b):
        return gelu(x + b)

    jfn = compiler.jit(program, executors=["nvfuser", "torch"])
    check_gradients(program, [torch.randn(4, 8), torch.randn(8)], jfn=jfn)
    backward = compiler.last_backward_traces(jfn)[-1]
    assert [b.sym.name for b in backward.bsyms] == ["nvFusion0"]
    assert "sum" in [s.sym.value for s in backward.bsyms[0].subsymbols]


from tests.support.nvfuser_helpers import fake_nvfuser  # noqa: E402, F401  (a fixture)


def test_the_cotangents_of_split_pieces_are_joined_by_one_cat():
    def program(x, w):
        q, k, v = (x @ w).split(4, dim=-1)
        return (q * k).tanh() + v.sin()

    jfn = compiler.jit(program)
    check_gradients(program, [torch.randn(3, 5), torch.randn(5, 12)], jfn=jfn)
    backward = [b.sym.value for b in compiler.last_backward_traces(jfn)[-1].bsyms]
    assert backward.count("cat") == 1 and "slice_update" not in backward and "full" not in backward


@pytest.mark.parametrize("shape", [(3, 8), (2, 1, 6)], ids=["3x8", "2x1x6"])
def test_the_cotangents_of_stepped_slices_that_interleave_are_joined_by_one_cat(shape):
    """`x[..., ::2]` and `x[..., 1::2]` (a rotary's pairs): their cotangents interleave back with a
    cat along a new dim and a reshape, not each written into zeros by a slice update."""

    def program(x, w):
        return x[..., ::2] * w[..., 1::2] - x[..., 1::2].sin() * w[..., ::2]

    jfn = compiler.jit(program)
    check_gradients(program, [torch.randn(shape), torch.randn(shape)], jfn=jfn)
    backward = [b.sym.value for b in compiler.last_backward_traces(jfn)[-1].bsyms]
    assert backward.count("cat") == 2 and "slice_update" not in backward and "full" not in backward


@pytest.mark.parametrize("first", ["step3", "step2"])
def test_stepped_slices_of_two_steps_are_not_taken_for_an_interleave(first):
    def program(x):  # offsets 0 and 1, but steps 3 and 2, sliced in either order
        if first == "step3":
            a = x[..., 0::3].sum(-1)
            return a + x[..., 1::2].sum(-1)
        b = x[..., 1::2].sum(-1)
        return x[..., 0::3].sum(-1) + b

    check_gradients(program, [torch.randn(3, 12)], jfn=compiler.jit(program))


def test_the_cotangents_of_overlapping_slices_are_cats_with_zeros():
    """`x[1:] - x[:-1]` reads overlapping slices: each cotangent is its value cat with a row of zeros
    (a pad, which fuses), not a slice update of a tensor of zeros."""

    def program(x):
        return (x[1:] - x[:-1]).square()

    jfn = compiler.jit(program)
    check_gradients(program, [torch.randn(5, 4)], jfn=jfn)
    backward = [b.sym.value for b in compiler.last_backward_traces(jfn)[-1].bsyms]
    assert backward.count("cat") == 2 and "slice_update" not in backward


def test_outputs_left_out_of_the_backward_count_as_zero_cotangents():
    def program(x, w):
        h = x * w
        return h.tanh(), h.sum(-1), h.exp()

    x, w = torch.randn(3, 4, requires_grad=True), torch.randn(4, requires_grad=True)
    first, _, third = compiler.jit(program)(x, w)
    (first.sum() + third.mean()).backward()
    ex, ew = x.detach().requires_grad_(), w.detach().requires_grad_()
    want_first, _, want_third = program(ex, ew)
    (want_first.sum() + want_third.mean()).backward()
    torch.testing.assert_close(x.grad, ex.grad)
    torch.testing.assert_close(w.grad, ew.grad)


def test_the_backward_for_every_cotangent_compiles_only_when_needed():
    def program(x, w):
        h = x * w
        return h.tanh(), h.exp()

    jfn = compiler.jit(program)
    x, w = torch.randn(8, 4, requires_grad=True), torch.randn(4, requires_grad=True)
    first, _ = jfn(x, w)
    assert jfn.last_entry.computation.backwards == {}  # nothing compiled for the backward yet
    assert compiler.last_backward_traces(jfn, ran=True) == []
    first.sum().backward()
    assert compiler.last_backward_traces(jfn, ran=True) == compiler.last_backward_traces(jfn)
    assert sorted(jfn.last_entry.computation.backwards) == [(True, False)]
    # the traces are those of the backward that ran: for the first output's cotangent alone
    compiled_passes = [t.provenance.split(" ")[0] for t in compiler.last_backward_traces(jfn)]
    assert compiled_passes == ["backward_from_saved", "cse", "dce", "update_fresh"]
    for trace in compiler.last_backward_traces(jfn):
        check_trace(trace)
    assert len(compiler.last_backward_traces(jfn)[-1].inputs) == len(jfn.last_entry.saved) + 1  # one cotangent
    x.grad = w.grad = None
    sum(o.sum() for o in jfn(x, w)).backward()
    assert sorted(jfn.last_entry.computation.backwards) == [(True, False), (True, True)]
    compiled_passes = [t.provenance.split(" ")[0] for t in compiler.last_backward_traces(jfn)]
    assert compiled_passes == ["split_backward", "cse", "dce", "update_fresh"]  # the full one, made on demand
    assert len(compiler.last_backward_traces(jfn)[-1].inputs) == len(jfn.last_entry.saved) + 2
    ex, ew = x.detach().requires_grad_(), w.detach().requires_grad_()
    sum(o.sum() for o in program(ex, ew)).backward()
    torch.testing.assert_close(x.grad, ex.grad)
    torch.testing.assert_close(w.grad, ew.grad)


def test_a_missing_cotangent_is_never_built_and_each_pattern_compiles_one_backward():
    def program(x, w):
        h = x * w
        return h.tanh(), h.exp(), h.sin()

    jfn = compiler.jit(program)
    for used in [(0,), (0, 2), (0,), (0, 1, 2), (1,)]:
        x, w = torch.randn(64, 32, requires_grad=True), torch.randn(32, requires_grad=True)
        outputs = jfn(x, w)
        with AtenOps() as ops:
            sum(outputs[i].sum() for i in used).backward()
        assert not {"zeros", "zeros_like", "full", "full_like", "fill", "zero"} & set(ops.names), ops.names
        ex, ew = x.detach().requires_grad_(), w.detach().requires_grad_()
        want = program(ex, ew)
        sum(want[i].sum() for i in used).backward()
        torch.testing.assert_close(x.grad, ex.grad)
        torch.testing.assert_close(w.grad, ew.grad)
    assert sorted(jfn.last_entry.computation.backwards) == [
        (False, True, False),
        (True, False, False),
        (True, False, True),
        (True, True, True),
    ]
    assert compiler.cache_stats(jfn).misses == 1
