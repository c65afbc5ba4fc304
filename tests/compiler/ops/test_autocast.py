"""`torch.autocast` around (and inside) a jitted function: eager's dtypes and values, gradients,
the autocast state guarded, through `compiler.jit` and the dynamo backend."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import compiler


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Linear(8, 16)
        self.norm = nn.LayerNorm(16)
        self.down = nn.Linear(16, 5)

    def forward(self, x: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        u = self.up(x)
        u = u * torch.rsqrt(u.float().pow(2).mean(-1, keepdim=True) + 1e-6)  # an RMSNorm's upcast of bf16
        h = self.norm(torch.softmax(u, -1) * x.sum(-1, keepdim=True))
        logits = self.down(h) @ torch.eye(5)
        return logits, F.cross_entropy(logits, target)


def _step(model: nn.Module, fn, x: torch.Tensor, target: torch.Tensor, backward_inside: bool = False) -> tuple:
    model.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits, loss = fn(x, target)
        if backward_inside:
            loss.backward()
    if not backward_inside:
        loss.backward()
    return logits, loss, [p.grad.clone() for p in model.parameters()]


def _same(got: tuple, want: tuple) -> None:
    for g, w in zip(got[:2], want[:2]):
        assert g.dtype == w.dtype
        torch.testing.assert_close(g, w, atol=2e-2, rtol=2e-2)
    for g, w in zip(got[2], want[2]):
        assert g.dtype == w.dtype == torch.float32  # the weights' gradients, as the weights
        assert (g - w).norm() <= 2e-2 * w.norm() + 1e-6


@pytest.mark.parametrize("backward_inside", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_training_step_under_autocast_has_eagers_dtypes_values_and_gradients(seed: int, backward_inside: bool):
    torch.manual_seed(seed)
    model = _Net()
    x = torch.randn(8, 6).t()[:, :8] if seed == 1 else torch.randn(6, 8)  # strided
    target = torch.randint(0, 5, (6,))
    want = _step(model, model, x, target, backward_inside)
    assert want[0].dtype == torch.bfloat16 and want[1].dtype == torch.float32  # what eager's autocast gives
    jitted = compiler.jit(model)
    _same(_step(model, jitted, x, target, backward_inside), want)
    assert "bf16" in str(compiler.last_traces(jitted)[-1])  # the trace computes in eager's dtypes


def test_the_autocast_state_is_guarded_and_each_state_keeps_its_entry() -> None:
    torch.manual_seed(0)
    model = _Net()
    jitted = compiler.jit(model)
    x, target = torch.randn(6, 8), torch.randint(0, 5, (6,))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert jitted(x, target)[0].dtype == torch.bfloat16
    logits, loss = jitted(x, target)
    assert logits.dtype == torch.float32
    torch.testing.assert_close((logits, loss), model(x, target))
    with torch.autocast("cpu", dtype=torch.float16):
        assert jitted(x, target)[0].dtype == torch.float16
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert jitted(x, target)[0].dtype == torch.bfloat16
    assert compiler.cache_stats(jitted).misses == 3
    assert "autocast" in str(compiler.last_prologue(jitted))


def test_autocast_turned_off_inside_the_program_keeps_float32_there_and_float64_is_never_cast() -> None:
    def fn(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> tuple:
        with torch.autocast("cpu", enabled=False):
            exact = a @ b
        return exact, a @ b, c @ c

    a, b, c = torch.randn(4, 4), torch.randn(4, 4), torch.randn(4, 4, dtype=torch.float64)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want, got = fn(a, b, c), compiler.jit(fn)(a, b, c)
    assert [t.dtype for t in got] == [t.dtype for t in want] == [torch.float32, torch.bfloat16, torch.float64]
    torch.testing.assert_close(got, want)


def test_the_dynamo_backend_follows_autocast() -> None:
    torch.manual_seed(0)
    model = _Net()
    x, target = torch.randn(6, 8), torch.randint(0, 5, (6,))
    want = _step(model, model, x, target)
    torch._dynamo.reset()
    _same(_step(model, torch.compile(model, backend="fusebench"), x, target), want)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_transformers_model_trains_under_autocast_as_in_eager() -> None:
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2,
    )  # fmt: skip
    model = transformers.LlamaForCausalLM(config).train()
    ids = torch.randint(0, 64, (2, 12))
    step = lambda fn: _step(model, lambda x, t: (None, fn(input_ids=x, labels=t).loss), ids, ids)[1:]
    (want_loss, want_grads), (got_loss, got_grads) = step(model), step(compiler.jit(model))
    torch.testing.assert_close(got_loss, want_loss, atol=2e-2, rtol=2e-2)
    for g, w in zip(got_grads, want_grads):
        assert (g - w).norm() <= 3e-2 * w.norm() + 1e-6


@pytest.mark.gpu
def test_on_cuda_the_float32_ops_of_autocast_run_in_float32_as_in_eager() -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA: torch.cuda.is_available() is False on this machine")

    def fn(x: torch.Tensor, w: torch.Tensor) -> tuple:
        h = x @ w
        return h, h.softmax(-1), F.layer_norm(h, (8,)), h.exp(), h.sum(), h.softmax(-1, dtype=torch.float16)

    x, w = torch.randn(4, 8, device="cuda"), torch.randn(8, 8, device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        want, got = fn(x, w), compiler.jit(fn)(x, w)
    assert [t.dtype for t in got] == [t.dtype for t in want]
    torch.testing.assert_close(got, want, atol=2e-2, rtol=2e-2)
