"""Rotary embeddings written with complex numbers, as Meta's reference Llama writes them (and
transformers' Llama-4 and DeepSeek-V2): `torch.polar`, `view_as_complex`, a complex product,
`view_as_real(...).flatten(3)`, `.type_as`; `freqs_cis` an argument, or a complex buffer of the
module. Through `compiler.jit` and `torch.compile(backend="fusebench")` (no part run eagerly),
forward and gradients against eager, several seeds, size-1 dims, a transposed query, another
sequence length on a second call."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn

import compiler
from compiler.executors.nvfuser.executor import FALLBACK_ENV
from suites._models.hf_architectures import ZOO_BY_NAME
from suites._models.hf_zoo_inputs import call_inputs, tiny_model
from tests.support.nvfuser_helpers import fake_nvfuser  # noqa: F401 - a fixture

FP32 = {"atol": 1e-5, "rtol": 1e-5}
BF16 = {"atol": 1e-2, "rtol": 1e-2}


# Meta's reference Llama (llama/model.py), as written there ---------------------------------------
def precompute_freqs_cis(dim: int, end: int, theta: float = 10000.0) -> torch.Tensor:
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(end, device=freqs.device)
    freqs = torch.outer(t, freqs).float()
    return torch.polar(torch.ones_like(freqs), freqs)


def reshape_for_broadcast(freqs_cis: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    ndim = x.ndim
    assert 0 <= 1 < ndim
    assert freqs_cis.shape == (x.shape[1], x.shape[-1])
    shape = [d if i == 1 or i == ndim - 1 else 1 for i, d in enumerate(x.shape)]
    return freqs_cis.view(*shape)


def apply_rotary_emb(xq: torch.Tensor, xk: torch.Tensor, freqs_cis: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    freqs_cis = reshape_for_broadcast(freqs_cis, xq_)
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


def llama4_rotary(xq: torch.Tensor, xk: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """transformers' Llama-4: the frequencies made from positions in the program, broadcast by slicing."""
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, xq.shape[-1], 2, dtype=torch.float) / xq.shape[-1]))
    freqs = positions[..., None].float() * inv_freq
    freqs_cis = torch.polar(torch.ones_like(freqs), freqs) * 1.0
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    xq_out = torch.view_as_real(xq_ * freqs_cis[:, :, None, :]).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs_cis[:, :, None, :]).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


def _compiled(fn: Callable, entry: str) -> Callable:
    if entry == "jit":
        return compiler.jit(fn)
    torch._dynamo.reset()
    return torch.compile(fn, backend="fusebench")


def _queries(generator: torch.Generator, batch: int, seq: int, heads: int, dim: int, dtype: torch.dtype) -> tuple:
    """(xq, xk) of shape [batch, seq, heads, dim]: xq a transposed view (not contiguous), as a
    query read from [batch, heads, seq, dim] is."""
    xq = torch.randn(batch, heads, seq, dim, generator=generator).to(dtype).transpose(1, 2)
    xk = torch.randn(batch, seq, heads, dim, generator=generator).to(dtype)
    return xq, xk


def _forward_backward(fn: Callable, xq: torch.Tensor, xk: torch.Tensor, third: torch.Tensor) -> list[torch.Tensor]:
    """[rotated q, rotated k, q's gradient, k's gradient] of a weighted sum of the outputs."""
    xq, xk = xq.detach().requires_grad_(), xk.detach().requires_grad_()
    q, k = fn(xq, xk, third)
    weights = torch.linspace(-1.0, 2.0, q.numel(), device=q.device).view(q.shape)
    ((q.float() * weights).sum() + (k.float() * weights.flip(0)).sum()).backward()
    return [q.detach(), k.detach(), xq.grad, xk.grad]


SHAPES = [(2, 5, 3, 8), (1, 1, 1, 2), (1, 6, 1, 4), (3, 1, 2, 6)]  # batch, seq, heads, head dim


@pytest.mark.parametrize("entry", ["jit", "dynamo"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("style", ["meta", "llama4"])
def test_complex_rotary_matches_eager(entry: str, dtype: torch.dtype, style: str) -> None:
    fn = apply_rotary_emb if style == "meta" else llama4_rotary
    compiled = _compiled(fn, entry)
    before = compiler.examine.fallbacks_recorded()
    for seed, (batch, seq, heads, dim) in enumerate(SHAPES):
        generator = torch.Generator().manual_seed(seed)
        xq, xk = _queries(generator, batch, seq, heads, dim, dtype)
        if style == "meta":
            third = precompute_freqs_cis(dim, seq * 2)[seq // 2 : seq // 2 + seq]
        else:
            third = torch.arange(seq).expand(batch, seq) + seed
        got, want = _forward_backward(compiled, xq, xk, third), _forward_backward(fn, xq, xk, third)
        for name, g, w in zip(("q", "k", "xq.grad", "xk.grad"), got, want):
            assert g.dtype == w.dtype
            tolerance = FP32 if dtype == torch.float32 else BF16
            torch.testing.assert_close(g, w, **tolerance, msg=lambda m, name=name: f"{name}: {m}")
    assert len(compiler.examine.fallbacks(since=before)) == 0, compiler.examine.fallbacks(since=before)


class RotaryAttention(nn.Module):
    """Meta's Llama attention without its cache: the complex frequencies a buffer of the module."""

    def __init__(self, dim: int = 16, heads: int = 2, max_seq: int = 16) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(dim, dim, bias=False) for _ in range(4))
        self.register_buffer("freqs_cis", precompute_freqs_cis(self.head_dim, max_seq), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, _ = x.shape
        xq = self.wq(x).view(batch, seq, self.heads, self.head_dim)
        xk = self.wk(x).view(batch, seq, self.heads, self.head_dim)
        xv = self.wv(x).view(batch, seq, self.heads, self.head_dim)
        xq, xk = apply_rotary_emb(xq, xk, freqs_cis=self.freqs_cis[:seq])
        scores = torch.matmul(xq.transpose(1, 2), xk.transpose(1, 2).transpose(2, 3)) / self.head_dim**0.5
        output = torch.matmul(scores.softmax(-1), xv.transpose(1, 2))
        return self.wo(output.transpose(1, 2).reshape(batch, seq, -1))


@pytest.mark.parametrize("entry", ["jit", "dynamo"])
def test_a_module_with_a_complex_buffer_trains_as_eager(entry: str) -> None:
    torch.manual_seed(0)
    eager = RotaryAttention()
    model = RotaryAttention()
    model.load_state_dict(eager.state_dict())
    model.freqs_cis = eager.freqs_cis.clone()
    compiled = _compiled(model, entry)
    before = compiler.examine.fallbacks_recorded()
    for seed, seq in enumerate((5, 5, 9, 1)):  # NOTE: a second length on the third call
        x = torch.randn(2, seq, 16, generator=torch.Generator().manual_seed(seed))
        for m in (eager, model):
            m.zero_grad()
        got, want = compiled(x), eager(x)
        torch.testing.assert_close(got, want, **FP32)
        (got * got).sum().backward()
        (want * want).sum().backward()
        for (name, p), q in zip(model.named_parameters(), eager.parameters()):
            # NOTE: at length 1 the query's gradient is zero (a softmax over one key)
            where = f"call {seed}, {name}"
            torch.testing.assert_close(p.grad, q.grad, atol=1e-5, rtol=1e-4, msg=lambda m, at=where: f"{at}: {m}")
    assert len(compiler.examine.fallbacks(since=before)) == 0, compiler.examine.fallbacks(since=before)


class FrequencyModule(nn.Module):
    """transformers' Llama-4 rotary embedding module: it returns the complex frequencies."""

    def __init__(self, dim: int = 8) -> None:
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (10000.0 ** (torch.arange(0, dim, 2).float() / dim)), persistent=False)

    def forward(self, x: torch.Tensor, position_ids: torch.Tensor) -> dict[str, torch.Tensor]:
        freqs = position_ids[..., None].float() * self.inv_freq.to(device=x.device, dtype=torch.float)
        return {"freqs_cis": torch.polar(torch.ones_like(freqs), freqs) * 0.5, "scaled": x * 2}


@pytest.mark.parametrize("entry", ["jit", "dynamo"])
def test_a_module_returning_complex_frequencies_returns_eagers(entry: str) -> None:
    model = FrequencyModule()
    compiled = _compiled(model, entry)
    for seq in (5, 7):
        x, positions = torch.randn(3), torch.arange(seq).expand(2, seq)
        got, want = compiled(x, positions), model(x, positions)
        assert got["freqs_cis"].dtype == torch.complex64
        torch.testing.assert_close(got, want, **FP32)


def test_the_rotary_is_one_fusion_forward_and_backward(fake_nvfuser) -> None:  # noqa: F811
    """Real parts only, so nvFuser takes the whole rotary: one fusion each way (the reshapes around
    it are views torch makes)."""
    jfn = compiler.jit(apply_rotary_emb, executors=["nvfuser", "torch"])
    xq, xk = _queries(torch.Generator().manual_seed(0), 2, 5, 3, 8, torch.bfloat16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = _forward_backward(jfn, xq, xk, precompute_freqs_cis(8, 5))
    want = _forward_backward(apply_rotary_emb, xq, xk, precompute_freqs_cis(8, 5))
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, **BF16)
    assert len(compiler.examine.fusions(jfn)) == 1, compiler.examine.fusions(jfn)
    assert len(compiler.examine.fusions(jfn, backward=True)) == 1, compiler.examine.fusions(jfn, backward=True)


def _rotary_on_cuda(dtype: torch.dtype) -> Any:
    jfn = compiler.jit(apply_rotary_emb)
    for seed, seq in enumerate((16, 16, 33)):
        xq, xk = (t.cuda() for t in _queries(torch.Generator().manual_seed(seed), 2, seq, 4, 64, dtype))
        freqs_cis = precompute_freqs_cis(64, seq).cuda()
        got, want = _forward_backward(jfn, xq, xk, freqs_cis), _forward_backward(apply_rotary_emb, xq, xk, freqs_cis)
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w, **(FP32 if dtype == torch.float32 else BF16))
    return jfn


@pytest.mark.nvfuser
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_the_rotary_on_cuda_matches_eager(dtype: torch.dtype) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the next test checks that no fusion falls back
        _rotary_on_cuda(dtype)


# A complex value's parts are size-1 slices of its last dim: squeezed in front of the segment_set such
# slices need and broadcast back (executors/nvfuser/define/translations.py `_slice`); squeezed behind
# it, nvFuser's segmenter refused the fusion ("Can not squeeze dimension(s) with size != 1")
@pytest.mark.nvfuser
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_the_rotary_on_cuda_is_one_nvfuser_fusion_each_way(dtype: torch.dtype, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FALLBACK_ENV, "0")  # an nvFuser error fails the test instead of falling back
    jfn = _rotary_on_cuda(dtype)
    assert len(compiler.examine.fusions(jfn)) == 1, compiler.examine.fusions(jfn)
    assert len(compiler.examine.fusions(jfn, backward=True)) == 1, compiler.examine.fusions(jfn, backward=True)


@pytest.mark.slow
@pytest.mark.parametrize("architecture", ["llama4_text", "deepseek_v2"])
def test_the_zoos_complex_rotary_models_train_through_dynamo_without_fallbacks(architecture: str) -> None:
    """transformers' Llama-4 and DeepSeek-V2 (complex rotary embeddings) compile whole through the
    dynamo backend: no piece runs eagerly (tests/compiler/models/test_hf_zoo.py compares them)."""
    pytest.importorskip("transformers")
    zoo = ZOO_BY_NAME[architecture]
    model = tiny_model(zoo, torch.device("cpu")).train()
    inputs = call_inputs(zoo, True, torch.device("cpu"))
    torch._dynamo.reset()
    before = compiler.examine.fallbacks_recorded()
    torch.compile(model, backend="fusebench")(**inputs).loss.backward()
    assert len(compiler.examine.fallbacks(since=before)) == 0, compiler.examine.fallbacks(since=before)
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)
