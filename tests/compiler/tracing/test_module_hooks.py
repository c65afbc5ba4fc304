"""Forward hooks and pre-hooks of a jitted module: traced with the forward, guarded, refused where
they keep a traced value outside the model; gradient checkpointing (which registers one)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import compiler

_KEPT: list = []


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(4, 8)
        self.body = nn.Sequential(nn.Linear(8, 8), nn.GELU(), nn.Linear(8, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(self.embed(x))


def _values_and_gradients(model: nn.Module, fn, x: torch.Tensor) -> tuple:
    model.zero_grad()
    out = fn(x)
    out.square().sum().backward()
    return out.detach(), [p.grad.clone() for p in model.parameters()]


def _check(model: nn.Module, jitted, x: torch.Tensor) -> None:
    got_out, got_grads = _values_and_gradients(model, jitted, x)
    want_out, want_grads = _values_and_gradients(model, model, x)
    torch.testing.assert_close(got_out, want_out)
    torch.testing.assert_close(got_grads, want_grads)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_forward_hooks_and_pre_hooks_run_in_the_trace_with_eagers_values_and_gradients(seed: int) -> None:
    torch.manual_seed(seed)
    model = _Net()
    model.embed.register_forward_hook(lambda module, args, output: output.requires_grad_(True))  # as transformers
    model.body[0].register_forward_hook(lambda module, args, output: output * 2.0)
    model.body[2].register_forward_pre_hook(lambda module, args: (args[0] + 1.0,))
    model.register_forward_hook(
        lambda module, args, kwargs, output: output - kwargs.get("shift", 0.0), with_kwargs=True
    )
    x = torch.randn(5, 4).t().contiguous().t()[:, :4] if seed == 1 else torch.randn(5, 4)
    _check(model, compiler.jit(model), x)


def test_a_hook_registered_or_removed_after_a_call_compiles_again() -> None:
    torch.manual_seed(0)
    model = _Net()
    jitted = compiler.jit(model)
    x = torch.randn(3, 4)
    _check(model, jitted, x)
    handle = model.body[0].register_forward_hook(lambda module, args, output: -output)
    _check(model, jitted, x)  # the hook applies: a new entry
    assert compiler.cache_stats(jitted).misses == 2
    handle.remove()
    other = model.body[0].register_forward_hook(lambda module, args, output: output + 1.0)
    _check(model, jitted, x)  # another hook in its place: another entry
    other.remove()
    _check(model, jitted, x)  # none again: the first entry
    assert compiler.cache_stats(jitted).misses == 3


def test_a_hook_that_keeps_a_traced_value_outside_the_model_is_refused_with_its_name() -> None:
    model = _Net()
    activations: dict = {}

    def keep(module, args, output):
        activations["body.0"] = output

    model.body[0].register_forward_hook(keep)
    with pytest.raises(
        NotImplementedError, match=r"forward hook '.*keep' of module 'body\.0' \(Linear\) keeps .*'activations'"
    ):
        compiler.jit(model)(torch.randn(2, 4))

    model = _Net()
    model.body[2].register_forward_hook(lambda module, args, output: _KEPT.append(output))
    with pytest.raises(NotImplementedError, match=r"keeps a traced value in '_KEPT'"):
        compiler.jit(model)(torch.randn(2, 4))


def test_backward_hooks_are_refused_naming_the_module() -> None:
    model = _Net()
    model.body[2].register_full_backward_pre_hook(lambda module, grad_output: None)
    with pytest.raises(NotImplementedError, match=r"module 'body\.2' \(Linear\) has backward pre hooks"):
        compiler.jit(model)(torch.randn(2, 4))


@pytest.mark.filterwarnings("ignore:`gradient_checkpointing_enable` is deprecated")
@pytest.mark.parametrize("seed", [0, 1])
def test_gradient_checkpointing_of_a_transformers_model_matches_eager(seed: int) -> None:
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(seed)
    config = transformers.LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2,
    )  # fmt: skip
    model = transformers.LlamaForCausalLM(config).train()
    model.gradient_checkpointing_enable()
    ids = torch.randint(0, 64, (2, 12))
    jitted = compiler.jit(model)
    got = jitted(input_ids=ids, labels=ids).loss
    got.backward()
    got_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    want = model(input_ids=ids, labels=ids).loss
    want.backward()
    torch.testing.assert_close(got, want)
    for g, p in zip(got_grads, model.parameters()):
        torch.testing.assert_close(g, p.grad, atol=1e-5, rtol=1e-4)
