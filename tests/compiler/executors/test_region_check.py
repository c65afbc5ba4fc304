"""region_check: a compiled region's first call is checked against its prims run by torch, and a
miscompiled region falls back to torch (its written inputs holding torch's values) instead of
returning wrong values."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

import compiler
from compiler.executors import inductor_compile
from compiler.executors.inductor import InductorFallbackWarning, inductor_fusions, unavailable_reason
from compiler.executors.region_check import WrongValues, checkable, checked_call
from compiler.prims import Prim

needs_inductor = pytest.mark.skipif(unavailable_reason() is not None, reason=f"{unavailable_reason()}")
INDUCTOR = ["inductor", "torch"]


def _update(p: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    p.sub_(g * 0.5)
    return p * 2


def test_a_compiled_function_that_agrees_returns_its_own_outputs() -> None:
    p, g = torch.randn(4, 3), torch.randn(4, 3)
    expected_p = p - g * 0.5
    outputs = checked_call(_update, _update, (p, g), written=[0])
    torch.testing.assert_close(p, expected_p)
    torch.testing.assert_close(outputs, expected_p * 2)


@pytest.mark.parametrize(
    ("wrong", "says"),
    [
        (lambda p, g: _update(p, g) + 1e-2, "output 0 differs .* relative error"),
        (lambda p, g: _update(p, g)[:2], r"output 0 differs .* torch.float32 \[2, 3\] where torch gives"),
        (lambda p, g: _update(p, g).index_fill_(0, torch.tensor([1]), float("nan")), "NaNs in other places"),
        (lambda p, g: (_update(p, g), p.add_(1.0))[0], "written input 0 differs"),
    ],
    ids=["values", "shape", "nan", "written input"],
)
def test_a_compiled_function_that_differs_raises_and_leaves_the_written_input_as_before(wrong, says) -> None:
    p, g = torch.randn(4, 3), torch.randn(4, 3)
    before = p.clone()
    with pytest.raises(WrongValues, match=says):
        checked_call(wrong, _update, (p, g), written=[0])
    torch.testing.assert_close(p, before, rtol=0, atol=0)


def test_rounding_noise_exact_zeros_matching_nans_and_bf16_outputs_pass() -> None:
    x = torch.tensor([1.0, float("nan"), float("inf"), 0.0])
    noisy = lambda a: a * (1 + 1e-6)
    assert torch.isnan(checked_call(noisy, lambda a: a.clone(), (x,), written=[])[1])
    zeros = torch.zeros(100)
    checked_call(lambda a: a + 1e-7, lambda a: a.clone(), (zeros,), written=[])  # torch's exact zeros
    h = torch.randn(8).bfloat16()
    checked_call(lambda a: (a.float() * 1.01).bfloat16(), lambda a: a * 1, (h,), written=[])


@needs_inductor
def test_a_miscompiled_region_falls_back_to_torch_with_eager_values_and_writes(monkeypatch) -> None:
    p, g = torch.randn(4, 3), torch.randn(4, 3)

    def miscompiled(fn, args, writes_inputs=True, exact_casts=False):
        def run(*inputs):
            outputs = fn(*inputs)
            for value in inputs:
                if value is p:
                    value.add_(1.0)  # a wrong write into the written input
            return tuple(o + 1 for o in outputs)

        return run

    monkeypatch.setattr(inductor_compile, "compile_static", miscompiled)
    expected_p, expected = p.clone(), None
    expected = _update(expected_p, g)
    jfn = compiler.jit(_update, executors=INDUCTOR)
    with pytest.warns(InductorFallbackWarning, match=r"Inductor failed on inductor0 \(WrongValues: its compiled"):
        got = jfn(p, g)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(p, expected_p)
    assert "FELL BACK: " in str(compiler.examine.fusions(jfn))
    strict = compiler.jit(lambda p, g: _update(p, g) * 1, executors=INDUCTOR, fallback=False)
    with pytest.raises(WrongValues):
        strict(p.clone(), g)


def _norm_backward_permuted_twice(s0, t41, t17, t48, t55, w1, t236):
    """A channels-last layer norm's backward as ConvNeXt's training computes it (its input permuted
    to channels-last and back): Inductor on CPU (torch 2.13) returns it with 40% of its norm wrong."""
    t3 = t17 + (s0 * t41).permute(0, 3, 1, 2)
    t6 = t3.permute(0, 2, 3, 1) - t48[..., None]
    t12 = t236.permute(0, 2, 3, 1) * w1
    t16 = t12 * t55[..., None]
    t19 = (t12 * t6).sum(3)
    t26 = (t19 * -0.5 * (t55 * t55 * t55) / 8)[..., None] * t6
    t28 = t16 + t26 + t26
    return t28 + ((-t28).sum(3) / 8)[..., None]


@needs_inductor
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.filterwarnings("ignore::compiler.executors.inductor.InductorFallbackWarning")  # where Inductor errs
def test_convnexts_norm_backward_matches_eager_through_inductor(seed) -> None:
    generator = torch.Generator().manual_seed(seed)
    draw = lambda *shape: torch.randn(*shape, generator=generator)
    args = (draw(8), draw(2, 8, 8, 8), draw(2, 8, 8, 8), draw(2, 8, 8), draw(2, 8, 8), draw(8), draw(2, 8, 8, 8))
    jfn = compiler.jit(_norm_backward_permuted_twice, executors=INDUCTOR)
    torch.testing.assert_close(jfn(*args), _norm_backward_permuted_twice(*args), rtol=1e-4, atol=1e-4)


@needs_inductor
@pytest.mark.parametrize(("dtype", "checked"), [(torch.float32, True), (torch.bfloat16, False), (torch.float64, True)])
def test_only_regions_computing_in_float32_or_float64_without_random_numbers_are_checked(dtype, checked) -> None:
    # a bf16 region's float32 results move legitimately (torch rounds after every prim), and a
    # compiled dropout draws other numbers than torch's
    x = torch.randn(4, 8, dtype=dtype)
    jfn = compiler.jit(lambda x: (x.float() * 2).exp().sum(-1), executors=INDUCTOR)
    jfn(x)
    (fusion,) = inductor_fusions(compiler.last_traces(jfn)[-1])
    assert checkable(fusion.region) == checked
    drawing = SimpleNamespace(bsyms=[SimpleNamespace(sym=Prim.RANDOM_VALUES, outputs=[])], inputs=())
    assert not checkable(drawing)
