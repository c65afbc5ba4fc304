"""group_norm beyond the op table (opinfo_group_norm.py): gradients of the input, weight and bias
against eager autograd over 3 seeds in float32 and bfloat16, nn.GroupNorm compiled as a module, one
fusion for the whole normalisation, and the errors eager raises (a channel count num_groups does not
divide, a weight of the wrong size, a 1-D input)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import compiler
from tests.support.autodiff_util import check_gradients

DTYPES = [torch.float32, torch.bfloat16]
SEEDS = range(3)
SHAPES = [((2, 6, 5), 3), ((3, 8), 2), ((2, 8, 3, 4), 1), ((2, 4, 3, 2, 2), 2), ((1, 6, 1, 1), 3)]


def randn(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


@pytest.mark.parametrize(("shape", "groups"), SHAPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_group_norm_gradients(dtype: torch.dtype, shape: tuple[int, ...], groups: int) -> None:
    channels = shape[1]
    for seed in SEEDS:
        x = randn(*shape, dtype=dtype, seed=seed) * 3 + 1
        w, b = randn(channels, dtype=dtype, seed=seed + 10), randn(channels, dtype=dtype, seed=seed + 20)
        check_gradients(lambda x, w, b: F.group_norm(x, groups, w, b).sin(), [x, w, b], seed=seed)
        check_gradients(lambda x: torch.group_norm(x, groups, eps=1e-3) * x, [x], seed=seed)
        check_gradients(lambda x, w: F.group_norm(x.transpose(0, 1).transpose(0, 1), groups, w), [x, w], seed=seed)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_group_norm_module_gradients(dtype: torch.dtype) -> None:
    for seed in SEEDS:
        torch.manual_seed(seed)
        eager = nn.GroupNorm(4, 8).to(dtype)
        with torch.no_grad():
            eager.weight.normal_()
            eager.bias.normal_()
        compiled = nn.GroupNorm(4, 8).to(dtype)
        compiled.load_state_dict(eager.state_dict())
        x = randn(2, 8, 6, 5, dtype=dtype, seed=seed)
        want, got = eager(x), compiler.jit(compiled)(x)
        torch.testing.assert_close(got, want, **_tolerance(dtype))
        cotangent = randn(*want.shape, dtype=dtype, seed=seed + 1)
        want.backward(cotangent)
        got.backward(cotangent)
        for name in ("weight", "bias"):
            got_grad, want_grad = getattr(compiled, name).grad, getattr(eager, name).grad
            torch.testing.assert_close(got_grad, want_grad, **_tolerance(dtype), msg=lambda m, n=name: f"{n}: {m}")


def _tolerance(dtype: torch.dtype) -> dict[str, float]:
    return {"atol": 5e-2, "rtol": 5e-2} if dtype == torch.bfloat16 else {"atol": 2e-5, "rtol": 2e-4}


def test_group_norm_is_one_fusion() -> None:
    jfn = compiler.jit(lambda x, w, b: F.group_norm(x, 2, w, b), executors=["nvfuser"], fusion={"runner": "torch"})
    x, w, b = randn(2, 6, 4, 4, dtype=torch.bfloat16), randn(6), randn(6)
    torch.testing.assert_close(jfn(x, w, b), F.group_norm(x, 2, w.bfloat16(), b.bfloat16()), atol=3e-2, rtol=2e-2)
    trace = compiler.last_traces(jfn)[-1]
    # the reshape of the input into groups is torch's free view (the upcast moved after it), the
    # rest one fusion
    assert [getattr(b.sym, "name", b.sym) for b in trace.bsyms] == ["RESHAPE", "nvFusion0"], trace
    assert trace.bsyms[0].args[0].name == "x"


ERRORS = [
    ("not divisible", lambda x: F.group_norm(x, 4), ["6", "num_groups=4", "not divisible"]),
    ("torch.group_norm not divisible", lambda x: torch.group_norm(x, 5), ["6", "num_groups=5"]),
    ("weight size", lambda x: F.group_norm(x, 2, torch.ones(4)), ["weight", "(6)", "[4]"]),
    ("1-D input", lambda x: F.group_norm(x[0, :, 0], 2), ["at least 2 dims"]),
]


@pytest.mark.parametrize(("fn", "parts"), [pytest.param(*e[1:], id=e[0]) for e in ERRORS])
def test_bad_group_norms_raise_value_error_naming_the_numbers(fn, parts: list[str]) -> None:
    x = torch.randn(2, 6, 3)
    with pytest.raises(RuntimeError):
        fn(x)  # eager rejects it too
    with pytest.raises(ValueError) as info:
        compiler.jit(fn)(x)
    assert all(part in str(info.value) for part in parts), str(info.value)
    assert f"{__file__}:" in str(info.value)
