"""log2 and log10 as exact as eager (compiler/ops/elementwise.py): each is a prim of its own, not a
log divided by a constant, so the log2 of a power of two and the log10 of a power of ten are whole
numbers, which programs floor and ceil (bucket sizes, bit widths). The other cases of these ops
(values, dtypes, special points) are in tests/support/opinfo/transcendental.py."""

from __future__ import annotations

import pytest
import torch

import compiler


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16], ids=str)
def test_log2_of_powers_of_two_is_exactly_eagers(dtype: torch.dtype) -> None:
    exponents = torch.arange(-14, 16).to(dtype)
    x = torch.exp2(exponents)
    jfn = compiler.jit(lambda x: torch.log2(x))
    got = jfn(x)
    assert torch.equal(got, torch.log2(x)) and torch.equal(got, exponents)
    assert "prims.log2(" in str(compiler.last_traces(jfn)[-1])
    bits = compiler.jit(lambda x: (torch.log2(x).ceil(), torch.log2(x + 1).floor()))
    for g, w in zip(bits(x), (torch.log2(x).ceil(), torch.log2(x + 1).floor()), strict=True):
        assert torch.equal(g, w)


def test_log2_of_integer_powers_of_two_is_exact_in_the_default_float_dtype() -> None:
    x = torch.tensor([1, 2, 8, 1024, 2**40])
    got = compiler.jit(lambda x: x.log2())(x)
    assert got.dtype == torch.float32 and torch.equal(got, torch.log2(x))
    assert got.tolist() == [0.0, 1.0, 3.0, 10.0, 40.0]


@pytest.mark.parametrize(("dtype", "largest"), [(torch.float32, 10), (torch.float64, 22)], ids=str)
def test_log10_of_powers_of_ten_is_exactly_eagers(dtype: torch.dtype, largest: int) -> None:
    exponents = torch.arange(-largest, largest + 1)
    x = torch.tensor([10.0**k for k in exponents.tolist()], dtype=dtype)
    jfn = compiler.jit(lambda x: torch.log10(x))
    got = jfn(x)
    assert torch.equal(got, torch.log10(x)) and torch.equal(got, exponents.to(dtype))
    assert "prims.log10(" in str(compiler.last_traces(jfn)[-1])


def test_sgn_of_a_complex_tensor_is_refused_with_the_ops_name() -> None:
    """sgn is sign on real tensors; z / |z| of complex ones has no decomposition here."""
    with pytest.raises(NotImplementedError, match=r"torch\.sgn on complex tensors is not supported"):
        compiler.jit(lambda z: torch.sgn(z))(torch.randn(3, dtype=torch.complex64))
