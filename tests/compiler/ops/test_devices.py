"""Tensors on two devices in one jitted function, as eager allows them: a 0-d CPU operand joins
tensors on another device, CPU indices index a tensor on another device, and `Tensor.to(device)`,
`.cuda()` and `.cpu()` copy (`prims.device_put`, which torch runs outside any fusion); gradients
flow back across the copy.

On the CPU a "meta" tensor stands in for the other device (shapes, dtypes and devices, no values);
the `gpu` tests check values and gradients against eager on CUDA.
"""

from __future__ import annotations

import pytest
import torch

import compiler
from compiler.prims import Prim


def _scaled_masked_rows(x: torch.Tensor, scale: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    # a 0-d CPU operand, a constant made on the CPU, a 0-d CPU branch of where, CPU row indices
    y = x * scale + torch.tensor(1.5)
    return torch.where(x > 0, y, torch.tensor(-1.0))[rows]


def _window_mask(x: torch.Tensor) -> torch.Tensor:
    # as masking code builds constants: on the CPU, then moved to the activations' device
    window = torch.tensor(2).to(x.device)
    positions = torch.arange(x.shape[-1], device=x.device)
    return x.masked_fill(positions[None, :] < window, 0.0)


def _prims(jitted: compiler.JittedFunction) -> list[Prim]:
    return [b.sym for b in compiler.last_traces(jitted)[-1].bsyms if isinstance(b.sym, Prim)]


def test_cpu_operands_and_indices_join_another_device_with_a_copy() -> None:
    x, scale, rows = torch.randn(4, 3, device="meta"), torch.tensor(2.0), torch.tensor([0, 2, -1])
    jitted = compiler.jit(_scaled_masked_rows, executors=["inductor", "torch"])  # a fusing executor folds
    got, want = jitted(x, scale, rows), _scaled_masked_rows(x, scale, rows)
    assert (got.device, got.shape, got.dtype) == (want.device, want.shape, want.dtype)
    # the scale and the row indices are copied; the constants 1.5 and -1.0 are made on x's device
    assert _prims(jitted).count(Prim.DEVICE_PUT) == 2


def test_to_device_of_a_tensor_on_it_is_the_tensor_and_to_another_is_a_copy() -> None:
    def same_and_moved(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x.to(x.device) * 2, x.to("meta", torch.float64)

    jitted = compiler.jit(same_and_moved)
    doubled, moved = jitted(torch.randn(3, 2))
    assert doubled.device.type == "cpu" and (moved.device.type, moved.dtype) == ("meta", torch.float64)
    assert _prims(jitted).count(Prim.DEVICE_PUT) == 1


def test_a_cpu_tensor_of_more_than_one_element_with_another_device_names_both() -> None:
    with pytest.raises(ValueError, match=r"expected all tensors on one device") as raised:
        compiler.jit(lambda a, b: a + b)(torch.randn(3, device="meta"), torch.randn(3))
    assert "[3] on meta" in str(raised.value) and "[3] on cpu" in str(raised.value)


@pytest.mark.gpu
@pytest.mark.parametrize("seed", [0, 1])
def test_values_and_gradients_across_devices_match_eager(seed: int) -> None:
    torch.manual_seed(seed)
    x = torch.randn(5, 7, device="cuda")
    scale, rows = torch.tensor(0.5), torch.tensor([4, 0, -2])
    torch.testing.assert_close(compiler.jit(_scaled_masked_rows)(x, scale, rows), _scaled_masked_rows(x, scale, rows))
    torch.testing.assert_close(compiler.jit(_window_mask)(x), _window_mask(x))

    def round_trip(w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return (w.cuda() * x).sum(0).cpu() * 3

    w = torch.randn(7, requires_grad=True)  # on the CPU; its gradient comes back there
    want = round_trip(w, x)
    (want_grad,) = torch.autograd.grad(want.sum(), w)
    got = compiler.jit(round_trip)(w, x)
    (got_grad,) = torch.autograd.grad(got.sum(), w)
    assert got.device.type == "cpu" and got_grad.device.type == "cpu"
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(got_grad, want_grad)


def test_a_device_named_without_its_index_is_the_current_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """`torch.zeros(n, device="cuda")` makes a tensor on 'cuda:0', which meets the inputs there."""
    from compiler.core.ir import canonical_device

    assert canonical_device("cpu") == torch.device("cpu") and canonical_device(None) == torch.get_default_device()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    assert canonical_device("cuda") == torch.device("cuda", 0) and canonical_device("cuda:1").index == 1


@pytest.mark.gpu
def test_constants_made_on_cuda_named_without_an_index_meet_the_inputs() -> None:
    x = torch.randn(4, 9, device="cuda")

    def program(x: torch.Tensor) -> torch.Tensor:
        q = torch.tensor([0.25, 0.5], device="cuda")
        return x * torch.zeros(9, device="cuda").add(2) + torch.quantile(x, q, dim=1).sum()

    torch.testing.assert_close(compiler.jit(program)(x), program(x))
