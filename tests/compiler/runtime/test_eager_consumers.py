"""Whatever eager code reads a compiled function's outputs, they carry eager's gradients.

A compiled piece (through `compiler.jit`, or a graph dynamo hands the "fusebench" backend) returns
fresh values, views of its intermediates, views of its inputs, pieces of one tensor, an input as
is; the caller's eager code then views them, makes complex numbers of them, writes them in place,
reads `.data`, or detaches them into a new leaf. Every output that requires grad in eager must
require grad in the compiled run and give the same gradients (normalized error <= 1e-3)."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import pytest
import torch

import compiler


def _fresh(x: torch.Tensor, w: torch.Tensor, fr: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return ((x @ w).tanh(),)


def _view_of_intermediate(x: torch.Tensor, w: torch.Tensor, fr: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return ((x @ w).float().reshape(x.shape[0], -1, 2),)  # llama4's query before its rotary


def _transposed_heads(x: torch.Tensor, w: torch.Tensor, fr: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return ((x @ w).view(x.shape[0], 2, -1).transpose(0, 1),)


def _view_of_input(x: torch.Tensor, w: torch.Tensor, fr: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (x.t(), x @ w)


def _chunks(x: torch.Tensor, w: torch.Tensor, fr: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (x @ w).chunk(2, dim=-1)


def _input_as_is(x: torch.Tensor, w: torch.Tensor, fr: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (w, (x @ w).sum(0))


PIECES = [_fresh, _view_of_intermediate, _transposed_heads, _view_of_input, _chunks, _input_as_is]


def _weights(y: torch.Tensor) -> torch.Tensor:
    return torch.linspace(-1.0, 2.0, y.numel(), dtype=y.dtype).view(y.shape)


def _viewed(y: torch.Tensor, fr: torch.Tensor) -> torch.Tensor:
    flat = y.reshape(-1)
    return (flat * _weights(flat)).sum() + (y.transpose(0, -1)[..., 1:] ** 2).sum()


def _rotated(y: torch.Tensor, fr: torch.Tensor) -> torch.Tensor:
    pairs = torch.view_as_complex(y.reshape(-1, 2))
    rotated = torch.view_as_real(pairs * fr[: pairs.shape[0]])
    return (rotated * _weights(rotated)).sum()


def _scaled_in_place(y: torch.Tensor, fr: torch.Tensor) -> torch.Tensor:
    y.mul_(1.5)
    return (y * _weights(y)).sum()


def _slice_in_place(y: torch.Tensor, fr: torch.Tensor) -> torch.Tensor:
    y[..., :1].add_(0.5)
    return (y * y).sum()


def _data_read(y: torch.Tensor, fr: torch.Tensor) -> torch.Tensor:
    return (y * y.data).sum()


def _data_written(y: torch.Tensor, fr: torch.Tensor) -> torch.Tensor:
    y.data.mul_(2.0)  # NOTE: unseen by autograd: a backward that reads y reads the new values
    return (y * _weights(y)).sum()


def _detached_alias_written(y: torch.Tensor, fr: torch.Tensor) -> torch.Tensor:
    y.detach().add_(1.0)
    return (y * y).sum()


def _new_leaf(y: torch.Tensor, fr: torch.Tensor) -> torch.Tensor:
    leaf = y.detach().requires_grad_()
    _new_leaf.leaf = leaf
    return (leaf * _weights(leaf)).sum() + (y**3).sum()


CONSUMERS = [
    _viewed,
    _rotated,
    _scaled_in_place,
    _slice_in_place,
    _data_read,
    _data_written,
    _detached_alias_written,
    _new_leaf,
]


def _normalized_error(got: torch.Tensor | None, want: torch.Tensor | None) -> float:
    if got is None or want is None:
        return 0.0 if got is None and want is None else float("inf")
    return float((got - want).norm() / want.norm().clamp_min(1e-12))


def _run(piece: Callable, consumer: Callable, seed: int) -> tuple[object, ...]:
    """(loss, x.grad, w.grad, the new leaf's grad) or (the error type eager and ours must share,)."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(4, 6, generator=generator).requires_grad_()
    w = torch.randn(6, 8, generator=generator).requires_grad_()
    fr = torch.polar(torch.ones(64), torch.rand(64, generator=generator) * 6.0)
    _new_leaf.leaf = None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            outputs = piece(x, w, fr)
        loss = sum(consumer(y, fr) for y in outputs)
        loss.backward()
    except RuntimeError as error:  # NOTE: eager refuses some (an in-place write into a leaf)
        return (type(error),)
    leaf = _new_leaf.leaf
    return (loss.detach(), x.grad, w.grad, None if leaf is None else leaf.grad)


def _compare(piece: Callable, compiled: Callable, seed: int) -> None:
    for consumer in CONSUMERS:
        want, got = _run(piece, consumer, seed), _run(compiled, consumer, seed)
        assert len(got) == len(want), f"{consumer.__name__}: eager gave {want}, compiled {got}"
        for name, g, w in zip(("loss", "x.grad", "w.grad", "leaf.grad"), got, want):
            if isinstance(w, type):
                assert g is w
                continue
            error = _normalized_error(g, w)
            assert error <= 1e-3, f"{consumer.__name__}: {name} differs from eager (normalized error {error})"


@pytest.mark.parametrize("piece", PIECES, ids=lambda p: p.__name__.strip("_"))
def test_jitted_outputs_carry_eagers_gradients_into_eager_code(piece: Callable) -> None:
    compiled = compiler.jit(piece)
    for seed in range(2):
        _compare(piece, compiled, seed)


@pytest.mark.parametrize("piece", PIECES, ids=lambda p: p.__name__.strip("_"))
def test_dynamo_graph_outputs_carry_eagers_gradients_into_eager_code(piece: Callable) -> None:
    torch._dynamo.reset()
    compiled = torch.compile(piece, backend="fusebench")
    for seed in range(2):
        _compare(piece, compiled, seed)


def _rotary(x: torch.Tensor, w: torch.Tensor, fr: torch.Tensor) -> torch.Tensor:
    """llama4_text's rotary after its projection: the complex ops dynamo graphs with the projection."""
    q = (x @ w).float().reshape(x.shape[0], -1, 2)
    return torch.view_as_real(torch.view_as_complex(q) * fr)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_complex_rotary_after_a_projection_gets_eagers_gradient_through_dynamo(seed: int) -> None:
    torch._dynamo.reset()
    generator = torch.Generator().manual_seed(seed)
    x, w = torch.randn(2, 4, generator=generator), torch.randn(4, 6, generator=generator)
    fr = torch.polar(torch.ones(3), torch.rand(3, generator=generator) * 6.0)
    compiled = torch.compile(_rotary, backend="fusebench")
    grads = []
    for fn in (_rotary, compiled):
        xs, ws = x.clone().requires_grad_(), w.clone().requires_grad_()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = fn(xs, ws, fr)
        (out * torch.arange(out.numel(), dtype=out.dtype).view(out.shape)).sum().backward()
        grads.append((out.detach(), xs.grad, ws.grad))
    for got, want in zip(grads[1], grads[0]):
        assert _normalized_error(got, want) <= 1e-3


def _sum_of_outputs(y: torch.Tensor, fr: torch.Tensor) -> torch.Tensor:
    return y


def _whole_program(piece: Callable, consumer: Callable) -> Callable:
    """The piece and its consumer as one function (dynamo graphs both; the complex ops it splits
    out of the graph run eagerly between compiled pieces)."""

    def program(x: torch.Tensor, w: torch.Tensor, fr: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (sum(consumer(y, fr) for y in piece(x, w, fr)),)

    return program


@pytest.mark.parametrize("piece", PIECES, ids=lambda p: p.__name__.strip("_"))
def test_dynamo_programs_ending_in_eager_consumers_keep_eagers_gradients(piece: Callable) -> None:
    for consumer in CONSUMERS:
        if consumer is _new_leaf:
            continue  # NOTE: its attribute store is a side effect dynamo replays after the graph
        torch._dynamo.reset()
        program = _whole_program(piece, consumer)
        want, got = (
            _run(program, _sum_of_outputs, 0),
            _run(torch.compile(program, backend="fusebench"), _sum_of_outputs, 0),
        )
        if len(want) == 1:
            continue  # NOTE: eager refuses the backward (a saved value written in place); ours may compute it
        for name, g, w in zip(("loss", "x.grad", "w.grad"), got, want):
            error = _normalized_error(g, w)
            assert error <= 1e-3, f"{consumer.__name__}: {name} differs from eager (normalized error {error})"
