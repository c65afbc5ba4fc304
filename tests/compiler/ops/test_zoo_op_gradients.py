"""Gradients of the ops the Hugging Face zoo added (grouped GEMMs, weight and batch normalisation;
pooling's are in test_pooling_gradients.py) against eager on random inputs, and what those ops must
keep exact: scan dtypes, transformers' grouped-GEMM fallback operator, constants built from tensors
carrying no gradient."""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F

import compiler


def _assert_gradients_match(fn: Callable, inputs: list[torch.Tensor], differentiable: list[int]) -> None:
    wanted = [inputs[i] for i in differentiable]
    got = torch.autograd.grad(compiler.jit(fn)(*inputs), wanted)
    expected = torch.autograd.grad(fn(*inputs), wanted)
    for index, g, e in zip(differentiable, got, expected):
        torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-5, msg=lambda m, index=index: f"input {index}: {m}")


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("offsets", [[3, 3, 8], [8, 8, 8], [0, 4, 8]], ids=["empty-middle", "one-group", "empty-first"])
def test_grouped_mm_gradients(seed: int, offsets: list[int]) -> None:
    torch.manual_seed(seed)
    offs = torch.tensor(offsets, dtype=torch.int32)
    rows, weights, out = (
        torch.randn(8, 8, requires_grad=True),
        torch.randn(3, 8, 16, requires_grad=True),
        torch.randn(8, 16),
    )
    _assert_gradients_match(
        lambda a, b, o, w: (F.grouped_mm(a, b, offs=o) * w).sum(), [rows, weights, offs, out], [0, 1]
    )
    a, b, out = torch.randn(8, 8).mT.requires_grad_(), torch.randn(8, 16, requires_grad=True), torch.randn(3, 8, 16)
    _assert_gradients_match(lambda a, b, o, w: (torch._grouped_mm(a, b, offs=o) * w).sum(), [a, b, offs, out], [0, 1])


def test_transformers_grouped_mm_fallback_runs_as_grouped_mm() -> None:
    moe = pytest.importorskip("transformers.integrations.moe")
    torch.manual_seed(0)
    rows, weights = torch.randn(8, 8, requires_grad=True), torch.randn(3, 8, 16, requires_grad=True)
    offs = torch.tensor([2, 2, 6], dtype=torch.int32)  # rows 6 and 7 in no group: zero, as the fallback's
    out = torch.randn(8, 16)
    fn = lambda a, b, o, w: (torch.ops.transformers.grouped_mm_fallback(a, b, offs=o) * w).sum()
    assert moe is not None
    _assert_gradients_match(fn, [rows, weights, offs, out], [0, 1])


@pytest.mark.parametrize(("shape", "dim"), [((6, 4, 5), 2), ((6, 4, 5), 0), ((6, 4), -1)])
def test_weight_norm_gradients(shape: tuple, dim: int) -> None:
    torch.manual_seed(0)
    v = torch.randn(shape, requires_grad=True)
    g_shape = [] if dim == -1 else [size if d == dim else 1 for d, size in enumerate(shape)]
    g, out = torch.randn(g_shape, requires_grad=True), torch.randn(shape)
    _assert_gradients_match(lambda v, g, w: (torch._weight_norm(v, g, dim) * w).sum(), [v, g, out], [0, 1])


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("shape", [(4, 3, 5, 5), (6, 3)])
def test_batch_norm_gradients_and_running_statistics(training: bool, shape: tuple) -> None:
    torch.manual_seed(0)
    norm = (torch.nn.BatchNorm2d(3) if len(shape) == 4 else torch.nn.BatchNorm1d(3)).train(training)
    with torch.no_grad():
        for t in (norm.weight, norm.bias, norm.running_mean):
            t.uniform_(-1, 1)
        norm.running_var.uniform_(0.5, 2.0)
    eager = copy.deepcopy(norm)
    x, out = torch.randn(shape, requires_grad=True), torch.randn(shape)
    got = torch.autograd.grad((compiler.jit(norm)(x) * out).sum(), (x, norm.weight, norm.bias))
    want = torch.autograd.grad((eager(x) * out).sum(), (x, eager.weight, eager.bias))
    for g, e in zip(got, want):
        torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-5)
    for name, buffer in norm.named_buffers():  # updated in place in training, as eager's
        torch.testing.assert_close(buffer, dict(eager.named_buffers())[name], msg=lambda m, name=name: f"{name}: {m}")


@pytest.mark.parametrize("shape", [(1, 3), (1, 3, 1, 1)])
def test_batch_norm_of_one_value_per_channel_raises_as_eager_and_leaves_the_statistics(shape: tuple) -> None:
    norm = torch.nn.BatchNorm2d(3) if len(shape) == 4 else torch.nn.BatchNorm1d(3)
    before = [norm.running_mean.clone(), norm.running_var.clone()]
    for call in (norm, compiler.jit(norm)):
        with pytest.raises(ValueError, match="Expected more than 1 value per channel when training"):
            call(torch.randn(shape))
    for buffer, was in zip((norm.running_mean, norm.running_var), before):
        torch.testing.assert_close(buffer, was)
    norm.eval()  # one value per channel is fine with the running statistics
    x = torch.randn(shape)
    torch.testing.assert_close(compiler.jit(norm)(x), norm(x))


def test_cumsum_keeps_the_int32_it_was_asked_for() -> None:
    # transformers' experts sum tokens per expert into int32 offsets, which torch._grouped_mm requires
    counts = torch.tensor([2.0, 0.0, 3.0])
    got = compiler.jit(lambda c: torch.cumsum(c, 0, dtype=torch.int32))(counts)
    assert got.dtype == torch.int32 and got.tolist() == [2, 2, 5]
    products = compiler.jit(lambda c: torch.cumprod(c.int(), 0, dtype=torch.int32))(counts + 1)
    assert products.dtype == torch.int32 and products.tolist() == [3, 3, 12]


def test_a_tensor_built_from_traced_values_carries_no_gradient() -> None:
    x = torch.randn(3, requires_grad=True)
    fn = lambda x: (x * torch.tensor([x[0].detach(), x[1].detach() * 2, 1.0])).sum()
    (got,) = torch.autograd.grad(compiler.jit(fn)(x), x)
    (expected,) = torch.autograd.grad(fn(x), x)
    torch.testing.assert_close(got, expected)
