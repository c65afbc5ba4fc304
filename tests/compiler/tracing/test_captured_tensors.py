"""Tensors a program reads that are not its arguments (compiler/tracing/captured_tensors.py): plain
module attributes, closure variables and globals are inputs of the computation, read again on
every call, against eager PyTorch."""

from __future__ import annotations

import copy
import types

import pytest
import torch
from torch import nn

import compiler
from compiler.core.errors import TracingError

SEEDS = (0, 1, 2)
TABLE = torch.arange(4.0)  # a module-level global the programs below read


def _precompute_freqs_cis(dim: int, end: int, theta: float = 10000.0) -> torch.Tensor:
    """Meta's Llama: the rotary table as complex numbers."""
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(end, device=freqs.device)
    freqs = torch.outer(t, freqs).float()
    return torch.polar(torch.ones_like(freqs), freqs)


def _apply_rotary_emb(xq: torch.Tensor, xk: torch.Tensor, freqs_cis: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    freqs_cis = freqs_cis.view(1, xq_.shape[1], 1, xq_.shape[-1])
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


class _Attention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.wq, self.wk, self.wv = (nn.Linear(dim, dim, bias=False) for _ in range(3))
        self.wo = nn.Linear(dim, dim, bias=False)

    def forward(self, x: torch.Tensor, freqs_cis: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        q = self.wq(x).view(b, s, self.heads, self.head_dim)
        k = self.wk(x).view(b, s, self.heads, self.head_dim)
        v = self.wv(x).view(b, s, self.heads, self.head_dim)
        q, k = _apply_rotary_emb(q, k, freqs_cis)
        out = nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True
        )
        return self.wo(out.transpose(1, 2).reshape(b, s, -1))


class MetaStyleLlama(nn.Module):
    """As Meta's reference Llama keeps it: `freqs_cis` a plain attribute (no buffer), moved to the
    input's device by reassigning it in forward."""

    def __init__(self, dim: int = 16, heads: int = 2, layers: int = 2, max_seq: int = 32) -> None:
        super().__init__()
        self.embed = nn.Embedding(64, dim)
        self.layers = nn.ModuleList(_Attention(dim, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(dim)
        self.out = nn.Linear(dim, 64, bias=False)
        self.freqs_cis = _precompute_freqs_cis(dim // heads, max_seq)

    def forward(self, tokens: torch.Tensor, start_pos: int = 0) -> torch.Tensor:
        h = self.embed(tokens)
        seqlen = tokens.shape[1]
        self.freqs_cis = self.freqs_cis.to(h.device)
        freqs_cis = self.freqs_cis[start_pos : start_pos + seqlen]
        for layer in self.layers:
            h = h + layer(h, freqs_cis)
        return self.out(self.norm(h)).float()


class _RealRotary(nn.Module):
    """Real-valued cos/sin caches kept as plain attributes of a submodule."""

    def __init__(self, dim: int, max_seq: int) -> None:
        super().__init__()
        inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
        freqs = torch.outer(torch.arange(max_seq).float(), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.cos_cached, self.sin_cached = emb.cos(), emb.sin()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = x.shape[-2]
        cos, sin = self.cos_cached[:s], self.sin_cached[:s]
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
        return x * cos + torch.cat((-x2, x1), dim=-1) * sin


class RealRotaryModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.rotary = _RealRotary(8, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.rotary(self.proj(x)).sum(-1)


class _CachedAttention(nn.Module):
    """Meta's Llama attention as written for inference: its KV cache in plain attributes, moved with
    `.to(xq)` and written in place at `start_pos` on every call."""

    def __init__(self, dim: int = 16, heads: int = 2, max_batch: int = 2, max_seq: int = 32) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(dim, dim, bias=False) for _ in range(4))
        self.cache_k = torch.zeros(max_batch, max_seq, heads, dim // heads)
        self.cache_v = torch.zeros(max_batch, max_seq, heads, dim // heads)

    def forward(
        self, x: torch.Tensor, start_pos: int, freqs_cis: torch.Tensor, mask: torch.Tensor | None
    ) -> torch.Tensor:
        bsz, seqlen, _ = x.shape
        xq = self.wq(x).view(bsz, seqlen, self.heads, self.head_dim)
        xk = self.wk(x).view(bsz, seqlen, self.heads, self.head_dim)
        xv = self.wv(x).view(bsz, seqlen, self.heads, self.head_dim)
        xq, xk = _apply_rotary_emb(xq, xk, freqs_cis)
        self.cache_k = self.cache_k.to(xq)
        self.cache_v = self.cache_v.to(xq)
        self.cache_k[:bsz, start_pos : start_pos + seqlen] = xk
        self.cache_v[:bsz, start_pos : start_pos + seqlen] = xv
        keys = self.cache_k[:bsz, : start_pos + seqlen].transpose(1, 2)
        values = self.cache_v[:bsz, : start_pos + seqlen].transpose(1, 2)
        scores = torch.matmul(xq.transpose(1, 2), keys.transpose(2, 3)) / self.head_dim**0.5
        if mask is not None:
            scores = scores + mask
        scores = torch.softmax(scores.float(), dim=-1).type_as(xq)
        return self.wo(torch.matmul(scores, values).transpose(1, 2).contiguous().view(bsz, seqlen, -1))


class MetaStyleDecoder(nn.Module):
    def __init__(self, dim: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.tok = nn.Embedding(64, dim)
        self.layers = nn.ModuleList(_CachedAttention(dim, heads) for _ in range(2))
        self.out = nn.Linear(dim, 64, bias=False)
        self.freqs_cis = _precompute_freqs_cis(dim // heads, 64)

    @torch.inference_mode()
    def forward(self, tokens: torch.Tensor, start_pos: int) -> torch.Tensor:
        seqlen = tokens.shape[1]
        h = self.tok(tokens)
        self.freqs_cis = self.freqs_cis.to(h.device)
        freqs_cis = self.freqs_cis[start_pos : start_pos + seqlen]
        mask = None
        if seqlen > 1:
            mask = torch.triu(torch.full((seqlen, seqlen), float("-inf")), diagonal=1)
            mask = torch.hstack([torch.zeros((seqlen, start_pos)), mask]).type_as(h)
        for layer in self.layers:
            h = h + layer(h, start_pos, freqs_cis, mask)
        return self.out(h).float()


@pytest.mark.parametrize("seed", SEEDS)
def test_meta_llama_decoding_writes_its_plain_kv_cache_attributes_in_place(seed: int) -> None:
    torch.manual_seed(seed)
    model = MetaStyleDecoder()
    reference = copy.deepcopy(model)
    jitted = compiler.jit(model)
    caches = [layer.cache_k for layer in model.layers]
    tokens = torch.randint(0, 64, (2, 6))
    torch.testing.assert_close(jitted(tokens, 0), reference(tokens, 0), atol=1e-5, rtol=1e-5)
    for start_pos in range(6, 10):
        tokens = torch.randint(0, 64, (2, 1))
        torch.testing.assert_close(jitted(tokens, start_pos), reference(tokens, start_pos), atol=1e-5, rtol=1e-5)
        for layer, expected in zip(model.layers, reference.layers):
            torch.testing.assert_close(layer.cache_k, expected.cache_k, atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(layer.cache_v, expected.cache_v, atol=1e-5, rtol=1e-5)
    assert all(layer.cache_k is cache for layer, cache in zip(model.layers, caches))  # written in place
    assert compiler.cache_stats(jitted).misses == 2  # the prefill, then every decode step (start_pos symbolic)


def _gradients(model: nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.grad.clone() for name, p in model.named_parameters()}


@pytest.mark.parametrize("seed", SEEDS)
def test_meta_llama_with_a_plain_complex_freqs_cis_reassigned_in_forward_matches_eager(seed: int) -> None:
    torch.manual_seed(seed)
    model = MetaStyleLlama()
    reference = copy.deepcopy(model)
    jitted = compiler.jit(model)
    for start_pos, seqlen in ((0, 8), (3, 8), (0, 8)):
        tokens = torch.randint(0, 64, (2, seqlen))
        out = jitted(tokens, start_pos)
        expected = reference(tokens, start_pos)
        torch.testing.assert_close(out, expected, atol=1e-4, rtol=1e-4)
        out.square().mean().backward()
        expected.square().mean().backward()
        for name, grad in _gradients(reference).items():
            torch.testing.assert_close(_gradients(model)[name], grad, atol=1e-4, rtol=1e-4, msg=name)
        model.zero_grad()
        reference.zero_grad()
    # NOTE: the table is an input (start_pos a constant: one entry per value), never a proxy left behind
    assert type(model.freqs_cis) is torch.Tensor and model.freqs_cis.dtype == torch.complex64
    assert compiler.cache_stats(jitted).misses == 2
    assert "freqs_cis" in str(compiler.last_prologue(jitted))


@pytest.mark.parametrize("seed", SEEDS)
def test_real_cos_sin_caches_of_a_submodule_are_inputs_read_on_every_call(seed: int) -> None:
    torch.manual_seed(seed)
    model = RealRotaryModel()
    jitted = compiler.jit(model)
    x = torch.randn(2, 5, 8)
    torch.testing.assert_close(jitted(x), model(x))
    prologue = str(compiler.last_prologue(jitted))
    assert "rotary_cos_cached" in prologue and "rotary_sin_cached" in prologue
    model.rotary.cos_cached.mul_(0.5)  # an in-place change of its values is seen
    torch.testing.assert_close(jitted(x), model(x))
    model.rotary.sin_cached = torch.randn(16, 8)  # another tensor of the same layout: no compilation
    torch.testing.assert_close(jitted(x), model(x))
    assert compiler.cache_stats(jitted).misses == 1
    model.rotary.sin_cached = torch.randn(16, 8, dtype=torch.float64)  # another dtype: its own entry
    torch.testing.assert_close(jitted(x), model(x))
    assert compiler.cache_stats(jitted).misses == 2


@pytest.mark.parametrize("seed", SEEDS)
def test_a_closure_tensor_read_in_a_helper_is_an_input(seed: int) -> None:
    torch.manual_seed(seed)
    scale = torch.randn(4)

    def helper(y: torch.Tensor) -> torch.Tensor:
        return y * scale

    def f(x: torch.Tensor) -> torch.Tensor:
        return helper(x).exp() + scale

    jitted = compiler.jit(f)
    x = torch.randn(3, 4)
    torch.testing.assert_close(jitted(x), f(x))
    scale.add_(1.0)
    torch.testing.assert_close(jitted(x), f(x))
    scale = torch.randn(4)  # the cell now holds another tensor
    torch.testing.assert_close(jitted(x), f(x))
    scale = torch.randn(1)  # of another shape
    torch.testing.assert_close(jitted(x), f(x))
    assert compiler.cache_stats(jitted).misses == 2


def _reads_global(x: torch.Tensor) -> torch.Tensor:
    return torch.sigmoid(x) * TABLE


@pytest.mark.parametrize("seed", SEEDS)
def test_a_global_tensor_is_an_input_and_reassigning_it_is_seen(seed: int) -> None:
    global TABLE
    saved = TABLE
    try:
        torch.manual_seed(seed)
        TABLE = torch.randn(4)
        jitted = compiler.jit(_reads_global)
        x = torch.randn(2, 4)
        torch.testing.assert_close(jitted(x), _reads_global(x))
        TABLE = torch.randn(4)
        torch.testing.assert_close(jitted(x), _reads_global(x))
        TABLE = torch.randn(3, 1)
        x = torch.randn(3, 4)
        torch.testing.assert_close(jitted(x), _reads_global(x))
        assert compiler.cache_stats(jitted).misses == 2
    finally:
        TABLE = saved


def test_a_table_moved_in_forward_is_set_on_the_module_as_eager_sets_it() -> None:
    class Moves(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.table = torch.randn(4)  # float32; the input is float64, as on a GPU it is on another device

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.table = self.table.to(x.dtype)
            return x * self.table

    model = Moves()
    reference = copy.deepcopy(model)
    jitted = compiler.jit(model)
    for seed in SEEDS:
        torch.manual_seed(seed)
        x = torch.randn(3, 4, dtype=torch.float64)
        torch.testing.assert_close(jitted(x), reference(x))
        assert model.table.dtype == torch.float64
        torch.testing.assert_close(model.table, reference.table)
    # the first call converts and sets it; the calls after it read the converted table
    assert compiler.cache_stats(jitted).misses == 2


def test_writes_into_a_closure_tensor_land_in_it() -> None:
    counts = torch.zeros(4)
    expected = torch.zeros(4)

    def count(x: torch.Tensor) -> torch.Tensor:
        counts.add_(x)
        return counts * 2

    jitted = compiler.jit(count)
    for seed in SEEDS:
        torch.manual_seed(seed)
        x = torch.randn(4)
        expected.add_(x)
        torch.testing.assert_close(jitted(x), expected * 2)
        torch.testing.assert_close(counts, expected)
    assert compiler.cache_stats(jitted).misses == 1


class _Accumulator(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.total = torch.zeros(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.total.add_(x.sum(0))
        self.last = x * 2
        return x * self.total


def test_in_place_writes_and_attribute_assignments_in_forward_land_as_in_eager() -> None:
    model, reference = _Accumulator(), _Accumulator()
    jitted = compiler.jit(model)
    total = model.total
    for seed in SEEDS:
        torch.manual_seed(seed)
        x = torch.randn(3, 4)
        torch.testing.assert_close(jitted(x), reference(x))
        torch.testing.assert_close(model.total, reference.total)
        torch.testing.assert_close(model.last, reference.last)
    assert model.total is total  # written in place, as eager writes it


def test_an_attribute_tensor_requiring_grad_gets_its_gradient() -> None:
    class Scaled(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(4, 4)
            self.gain = torch.randn(4, requires_grad=True)  # a plain attribute, not a parameter

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return (self.lin(x) * self.gain).tanh().sum()

    for seed in SEEDS:
        torch.manual_seed(seed)
        model = Scaled()
        reference = copy.deepcopy(model)
        x = torch.randn(3, 4)
        compiler.jit(model)(x).backward()
        reference(x).backward()
        torch.testing.assert_close(model.gain.grad, reference.gain.grad)
        torch.testing.assert_close(model.lin.weight.grad, reference.lin.weight.grad)


def test_a_tensor_held_in_two_places_follows_the_one_reassigned() -> None:
    shared = torch.randn(4)

    class Twice(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = shared, shared

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + self.b

    model = Twice()
    jitted = compiler.jit(model)
    x = torch.randn(4)
    torch.testing.assert_close(jitted(x), model(x))
    model.b = torch.randn(4)  # `a` still holds the traced tensor: the places differ now
    torch.testing.assert_close(jitted(x), model(x))


def test_a_tensor_returned_as_is_is_the_attribute_itself() -> None:
    class Returns(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.table = torch.randn(3)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return x + 1, self.table

    model = Returns()
    _, table = compiler.jit(model)(torch.randn(3))
    assert table is model.table


def test_a_tensor_without_a_place_is_still_refused() -> None:
    holder = types.SimpleNamespace(table=torch.randn(3))
    with pytest.raises(TracingError, match=r"received a real torch.Tensor that is not an argument"):
        compiler.jit(lambda x: x * holder.table)(torch.randn(3))


def test_a_closure_the_traced_call_made_is_no_place() -> None:
    holder = types.SimpleNamespace(table=torch.randn(3))

    def per_call_closure(x: torch.Tensor) -> torch.Tensor:
        table = holder.table  # NOTE: the generator's cell is this call's own: the next call makes another
        return sum(x * table for _ in range(2))

    with pytest.raises(TracingError, match=r"received a real torch.Tensor that is not an argument"):
        compiler.jit(per_call_closure)(torch.randn(3))

    class Pairs(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.table = torch.randn(3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            table = self.table
            return sum(x * table for _ in range(2))

    model = Pairs()
    jitted = compiler.jit(model)
    x = torch.randn(3)
    torch.testing.assert_close(jitted(x), model(x))
    model.table = torch.randn(3)  # the attribute is its place
    torch.testing.assert_close(jitted(x), model(x))


def test_the_dynamo_backend_runs_the_meta_llama() -> None:
    torch.manual_seed(0)
    model = MetaStyleLlama(layers=1)
    reference = copy.deepcopy(model)
    tokens = torch.randint(0, 64, (2, 8))
    compiled = torch.compile(model, backend="fusebench")
    torch.testing.assert_close(compiled(tokens), reference(tokens), atol=1e-4, rtol=1e-4)
