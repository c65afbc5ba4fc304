"""While a traced program runs, its `isinstance(x, torch.Tensor)` holds for the proxy of a tensor, as
on the tensor itself (transformers takes a prepared 4-d attention mask as is only then); the
compiler's own code sees the proxy as it is, and the builtin is itself again after the trace."""

from __future__ import annotations

import builtins

import pytest
import torch

import compiler
from compiler.tracing import patches


def prepared_or_padding(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    # the branch transformers' masking_utils takes: a 4-d tensor mask is used as given
    if isinstance(mask, (torch.Tensor, int)) and len(mask.shape) == 4:
        return x + mask
    return x + mask[:, None, None, :]


def kinds(x: torch.Tensor, flag: bool) -> torch.Tensor:
    assert isinstance(x, torch.Tensor) and not isinstance(x, torch.nn.Parameter)
    assert not isinstance(flag, torch.Tensor)
    return x * 2


def test_a_traced_tensor_is_a_tensor_to_the_program() -> None:
    x, mask = torch.randn(2, 1, 3, 5), torch.randn(2, 1, 3, 5)
    torch.testing.assert_close(compiler.jit(prepared_or_padding)(x, mask), prepared_or_padding(x, mask))
    x = torch.randn(3)
    torch.testing.assert_close(compiler.jit(kinds)(x, True), x * 2)


def test_the_builtin_is_restored_after_tracing_and_when_tracing_fails() -> None:
    compiler.jit(kinds)(torch.randn(3), True)
    assert builtins.isinstance is patches._isinstance

    def fails(x: torch.Tensor) -> torch.Tensor:
        raise ValueError("stop")

    with pytest.raises(ValueError, match="stop"):
        compiler.jit(fails)(torch.randn(3))
    assert builtins.isinstance is patches._isinstance and not patches._PROGRAM.running


def test_the_compiler_sees_proxies_while_the_program_runs() -> None:
    seen = []
    original = compiler.core.proxies.HOOKS.dispatch

    def program(x: torch.Tensor) -> torch.Tensor:
        seen.append(compiler.core.proxies.HOOKS.dispatch is not original)  # wrapped while tracing
        return x + 1

    compiler.jit(program)(torch.randn(3))
    assert seen == [True] and compiler.core.proxies.HOOKS.dispatch is original
    with patches.program_running():
        proxy = compiler.core.proxies.TensorProxy((3,), torch.float32, torch.device("cpu"), name="p")
        assert isinstance(proxy, torch.Tensor)
        calls = []
        wrapped = patches._compiler_code(lambda: calls.append(isinstance(proxy, torch.Tensor)))
        wrapped()
        assert calls == [False] and isinstance(proxy, torch.Tensor)
    assert not isinstance(proxy, torch.Tensor)
