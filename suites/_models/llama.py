"""A Llama-style decoder block: RMSNorm, rotary position embeddings, grouped-query attention
(fewer key/value heads than query heads, SDPA's enable_gqa) and a SwiGLU MLP.

`LlamaConfig.llama3_8b()` has the sizes of one Llama-3-8B layer. `block(x, positions)` is the
training/prefill forward (causal attention over `x`); `block.decode(x, positions, cache)` writes
the new keys and values into the (key, value) cache at `positions` and attends over it with a
boolean mask.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class LlamaConfig:
    """Sizes of a block; `max_positions` bounds the rotary tables and the cache."""

    dim: int = 4096
    n_heads: int = 32
    n_kv_heads: int = 8
    ffn_dim: int = 14336
    max_positions: int = 8192
    rope_theta: float = 500000.0
    norm_eps: float = 1e-5

    @staticmethod
    def llama3_8b() -> LlamaConfig:
        """One layer of Llama-3-8B (218M parameters)."""
        return LlamaConfig()

    @staticmethod
    def tiny() -> LlamaConfig:
        """For tests and --quick runs on CPU."""
        return LlamaConfig(dim=32, n_heads=4, n_kv_heads=2, ffn_dim=64, max_positions=64)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        normed = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
        return normed.type_as(x) * self.weight


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


class LlamaBlock(nn.Module):
    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.config = config
        self.head_dim = config.dim // config.n_heads
        kv_width = config.n_kv_heads * self.head_dim
        self.attention_norm = RMSNorm(config.dim, config.norm_eps)
        self.wq = nn.Linear(config.dim, config.dim, bias=False)
        self.wk = nn.Linear(config.dim, kv_width, bias=False)
        self.wv = nn.Linear(config.dim, kv_width, bias=False)
        self.wo = nn.Linear(config.dim, config.dim, bias=False)
        self.ffn_norm = RMSNorm(config.dim, config.norm_eps)
        self.w1 = nn.Linear(config.dim, config.ffn_dim, bias=False)
        self.w3 = nn.Linear(config.dim, config.ffn_dim, bias=False)
        self.w2 = nn.Linear(config.ffn_dim, config.dim, bias=False)
        inv_freq = 1.0 / config.rope_theta ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim)
        angles = torch.outer(torch.arange(config.max_positions).float(), inv_freq)
        angles = torch.cat((angles, angles), dim=-1)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)
        for linear in (self.wq, self.wk, self.wv, self.wo, self.w1, self.w3, self.w2):
            nn.init.normal_(linear.weight, std=0.02)

    def _qkv(self, x: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        batch, length, _ = x.shape
        h = self.attention_norm(x)
        q = self.wq(h).view(batch, length, self.config.n_heads, self.head_dim).transpose(1, 2)
        k = self.wk(h).view(batch, length, self.config.n_kv_heads, self.head_dim).transpose(1, 2)
        v = self.wv(h).view(batch, length, self.config.n_kv_heads, self.head_dim).transpose(1, 2)
        cos = self.cos.index_select(0, positions).to(x.dtype)
        sin = self.sin.index_select(0, positions).to(x.dtype)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        return q, k, v

    def _finish(self, x: torch.Tensor, attended: torch.Tensor) -> torch.Tensor:
        batch, _, length, _ = attended.shape
        x = x + self.wo(attended.transpose(1, 2).reshape(batch, length, self.config.dim))
        h = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))

    def forward(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        q, k, v = self._qkv(x, positions)
        return self._finish(x, F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True))

    def decode(self, x: torch.Tensor, positions: torch.Tensor, cache: tuple) -> torch.Tensor:
        q, k, v = self._qkv(x, positions)
        k_cache, v_cache = cache
        k_cache.index_copy_(2, positions, k)
        v_cache.index_copy_(2, positions, v)
        visible = torch.arange(k_cache.size(2), device=x.device)[None, :] <= positions[:, None]
        attended = F.scaled_dot_product_attention(q, k_cache, v_cache, attn_mask=visible, enable_gqa=True)
        return self._finish(x, attended)

    def empty_cache(self, batch: int, length: int, dtype: torch.dtype, device: torch.device) -> tuple:
        """A zeroed (key, value) cache: [batch, kv heads, length, head dim] each."""
        shape = (batch, self.config.n_kv_heads, length, self.head_dim)
        return torch.zeros(shape, dtype=dtype, device=device), torch.zeros(shape, dtype=dtype, device=device)


class BlockDecoder(nn.Module):
    """`block.decode` as a module's forward, so it can be jitted and compiled like one."""

    def __init__(self, block: LlamaBlock) -> None:
        super().__init__()
        self.block = block

    def forward(self, x: torch.Tensor, positions: torch.Tensor, cache: tuple) -> torch.Tensor:
        return self.block.decode(x, positions, cache)
