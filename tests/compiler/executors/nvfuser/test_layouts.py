"""Region outputs laid out as eager lays them out (compiler/executors/nvfuser/define/layouts.py): the
generated `fd.ops.stride_order`, and end to end through the fake nvFuser, strides equal to eager's."""

from __future__ import annotations

import itertools

import pytest
import torch

import compiler
from compiler.executors.nvfuser.define.layouts import physical_order, stride_order
from compiler.executors.nvfuser.define.translations import fusion_source
from compiler.executors.nvfuser.executor import region_fusions
from tests.support.nvfuser_helpers import fake_nvfuser  # noqa: F401 - a fixture

on_the_fake = pytest.mark.skipif(torch.cuda.is_available(), reason="runs the generated source on the CPU fake")


def rotary(qkv: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, heads: int) -> torch.Tensor:
    """Rotary embedding of a linear layer's output viewed as [batch, heads, length, head dim]."""
    b, s, _ = qkv.shape
    q = qkv.view(b, s, heads, -1).transpose(1, 2)
    first, second = q.chunk(2, dim=-1)
    return q * cos + torch.cat((-second, first), dim=-1) * sin


def permuted_scale(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x.permute(2, 0, 1) * w + 1.0


def contiguous_first(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a * 2.0 + b.transpose(0, 1)  # the row-major operand comes first and decides


def transposed_first(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return b.transpose(0, 1) * 2.0 + a  # the transposed operand comes first and decides


def cat_of_permuted(x: torch.Tensor) -> torch.Tensor:
    return torch.cat((x.transpose(0, 1), x.transpose(0, 1) * 2.0), dim=1) + 1.0  # cat: row-major


def _rotary_args(batch: int, dtype: torch.dtype, seed: int) -> tuple:
    g = torch.Generator().manual_seed(seed)
    length, heads, head_dim = 6, 4, 8
    qkv = torch.randn(batch, length, heads * head_dim, generator=g).to(dtype)
    cos = torch.randn(length, head_dim, generator=g).to(dtype)
    sin = torch.randn(length, head_dim, generator=g).to(dtype)
    return qkv, cos, sin, heads


def _pair(b: int, dtype: torch.dtype, seed: int) -> tuple:
    return torch.randn(5, b + 3).to(dtype), torch.randn(b + 3, 5).to(dtype)


CASES = {
    "rotary": (rotary, _rotary_args),
    "permuted_scale": (permuted_scale, lambda b, dt, seed: (torch.randn(b, 5, 7).to(dt), torch.randn(5).to(dt))),
    "contiguous_first": (contiguous_first, _pair),
    "transposed_first": (transposed_first, _pair),
    "cat_of_permuted": (cat_of_permuted, lambda b, dtype, seed: (torch.randn(b + 2, 3).to(dtype),)),
}


PERMUTED = {"rotary", "permuted_scale", "transposed_first"}  # cases whose eager output is permuted
PARAMS = list(itertools.product(CASES, [1, 3], [torch.float32, torch.bfloat16], [0, 1]))


def _check_strides_and_values(name: str, batch: int, dtype: torch.dtype, seed: int, device: str) -> None:
    fn, make = CASES[name]
    torch.manual_seed(seed)
    args = [a.to(device) if isinstance(a, torch.Tensor) else a for a in make(batch, dtype, seed)]
    jfn = compiler.jit(fn, executors=["nvfuser", "torch"], fusion={"min_region_size": 1}, fallback=False)
    got, want = jfn(*args), fn(*args)
    torch.testing.assert_close(got, want, atol=1e-2 if dtype is torch.bfloat16 else 1e-5, rtol=1e-2)
    if name in PERMUTED:  # a permuted layout is given; a row-major one is left to nvFuser, which
        assert got.stride() == want.stride()  # may pick another (a cat of transposed inputs: column-major)
    assert region_fusions(compiler.last_traces(jfn)[-1]), "no fusion formed"


@on_the_fake
@pytest.mark.parametrize(("name", "batch", "dtype", "seed"), PARAMS)
def test_outputs_have_eager_strides_and_values(name, batch, dtype, seed, fake_nvfuser):  # noqa: F811
    _check_strides_and_values(name, batch, dtype, seed, "cpu")


@pytest.mark.nvfuser
@pytest.mark.parametrize(("name", "batch", "dtype", "seed"), PARAMS)
def test_outputs_of_real_nvfuser_have_eager_strides_and_values(name, batch, dtype, seed):
    _check_strides_and_values(name, batch, dtype, seed, "cuda")


@on_the_fake
def test_rotary_query_is_written_in_the_order_of_the_linear_output(fake_nvfuser):  # noqa: F811
    args = _rotary_args(2, torch.bfloat16, 0)
    jfn = compiler.jit(rotary, executors=["nvfuser", "torch"])
    q = jfn(*args)
    (fusion,) = region_fusions(compiler.last_traces(jfn)[-1])
    source = fusion_source(fusion.region, fusion.descriptors())[0]
    assert "fd.ops.stride_order(" in source and "[3, 1, 2, 0])" in source
    merged = q.transpose(1, 2).reshape(2, 6, 32)  # what attention's output goes through: a view now
    assert merged.data_ptr() == q.data_ptr()


@on_the_fake
def test_row_major_outputs_are_left_to_nvfuser(fake_nvfuser):  # noqa: F811
    jfn = compiler.jit(cat_of_permuted, executors=["nvfuser", "torch"], fusion={"min_region_size": 1})
    jfn(torch.randn(4, 3))
    (fusion,) = region_fusions(compiler.last_traces(jfn)[-1])
    assert "stride_order(" not in fusion_source(fusion.region, fusion.descriptors())[0].split("fd.ops.cat")[-1]


@pytest.mark.parametrize("order", list(itertools.permutations(range(4))))
def test_stride_order_and_physical_order_are_inverse(order):
    assert physical_order(stride_order(order)) == order
    contiguous = torch.empty(2, 3, 4, 5).permute(order)  # memory order: `order`'s inverse
    inverse = tuple(order.index(d) for d in range(4))
    ranks = stride_order(inverse)
    assert sorted(range(4), key=lambda d: -contiguous.stride(d)) == list(inverse)
    strides = contiguous.stride()
    assert ranks == [sorted(strides).index(s) for s in strides]


def transposed_residual_norm(features: torch.Tensor, positions: torch.Tensor) -> tuple:
    """Whisper's encoder: a convolution's [batch, channels, time] output read as [batch, time, channels]."""
    hidden = features.permute(0, 2, 1) + positions
    return hidden, torch.nn.functional.layer_norm(hidden, (hidden.shape[-1],))


@on_the_fake
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_region_that_reduces_leaves_an_output_transposed_off_its_last_dim_to_nvfuser(fake_nvfuser, dtype):  # noqa: F811
    features, positions = torch.randn(2, 8, 6).to(dtype), torch.randn(6, 8).to(dtype)
    jfn = compiler.jit(transposed_residual_norm, executors=["nvfuser", "torch"], fallback=False)
    for got, want in zip(jfn(features, positions), transposed_residual_norm(features, positions)):
        torch.testing.assert_close(got, want, atol=1e-2 if dtype is torch.bfloat16 else 1e-5, rtol=1e-2)
    (fusion,) = region_fusions(compiler.last_traces(jfn)[-1])
    assert "stride_order(" not in fusion_source(fusion.region, fusion.descriptors())[0]
    scaled = compiler.jit(lambda f, p: f.permute(0, 2, 1) * 2.0 + p, executors=["nvfuser", "torch"])
    assert scaled(features, positions).stride() == (features.permute(0, 2, 1) * 2.0 + positions).stride()
