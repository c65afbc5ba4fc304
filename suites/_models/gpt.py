"""A GPT-2-style decoder, nanoGPT-like: learned positions, pre-LayerNorm blocks, GELU (tanh) MLP,
causal attention through F.scaled_dot_product_attention, and an LM head tied to the token
embedding. `GPTConfig.small()` is GPT-2 small (124M parameters).

Besides the training/prefill forward (`model(tokens, targets)`), `model.decode(tokens,
positions, caches)` runs new tokens against per-layer key/value caches: it writes their keys and
values at `positions` in place (index_copy_) and attends over the cache with a boolean mask that
hides the positions after each new token's.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class GPTConfig:
    """Sizes of the model; dropout applies to embeddings, attention output and MLP output."""

    block_size: int = 1024
    vocab_size: int = 50304
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768
    dropout: float = 0.0

    @staticmethod
    def small() -> GPTConfig:
        """GPT-2 small: 12 layers, 12 heads, 768 wide (vocabulary padded to 50304)."""
        return GPTConfig()

    @staticmethod
    def tiny() -> GPTConfig:
        """A few thousand parameters, for tests and --quick runs on CPU."""
        return GPTConfig(block_size=64, vocab_size=96, n_layer=2, n_head=2, n_embd=32)


class CausalSelfAttention(nn.Module):
    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd)
        self.resid_dropout = nn.Dropout(config.dropout)

    def _heads(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        batch, length, width = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        shape = (batch, length, self.n_head, width // self.n_head)
        return q.view(shape).transpose(1, 2), k.view(shape).transpose(1, 2), v.view(shape).transpose(1, 2)

    def _merge(self, y: torch.Tensor) -> torch.Tensor:
        batch, _, length, _ = y.size()
        y = y.transpose(1, 2).contiguous().view(batch, length, self.n_embd)
        return self.resid_dropout(self.c_proj(y))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self._heads(x)
        return self._merge(F.scaled_dot_product_attention(q, k, v, is_causal=True))

    def decode(self, x: torch.Tensor, positions: torch.Tensor, cache: tuple) -> torch.Tensor:
        q, k, v = self._heads(x)
        k_cache, v_cache = cache
        k_cache.index_copy_(2, positions, k)
        v_cache.index_copy_(2, positions, v)
        visible = torch.arange(k_cache.size(2), device=x.device)[None, :] <= positions[:, None]
        return self._merge(F.scaled_dot_product_attention(q, k_cache, v_cache, attn_mask=visible))


class MLP(nn.Module):
    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd)
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.c_proj(F.gelu(self.c_fc(x), approximate="tanh")))


class Block(nn.Module):
    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd)
        self.mlp = MLP(config)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))

    def decode(self, x: torch.Tensor, positions: torch.Tensor, cache: tuple) -> torch.Tensor:
        x = x + self.attn.decode(self.ln_1(x), positions, cache)
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.block_size, config.n_embd)
        self.drop = nn.Dropout(config.dropout)
        self.h = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.n_embd)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight  # tied, as in GPT-2
        self.apply(_init_weights)

    def forward(self, tokens: torch.Tensor, targets: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """{'logits': ..., 'loss': cross entropy against `targets` (ignoring -1) when given}."""
        positions = torch.arange(tokens.size(1), device=tokens.device)
        x = self.drop(self.wte(tokens) + self.wpe(positions))
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        if targets is None:
            return {"logits": logits}
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return {"logits": logits, "loss": loss}

    def decode(self, tokens: torch.Tensor, positions: torch.Tensor, caches: list) -> torch.Tensor:
        """Logits of the new `tokens` at `positions`, updating each layer's (key, value) cache in place."""
        x = self.wte(tokens) + self.wpe(positions)
        for block, cache in zip(self.h, caches):
            x = block.decode(x, positions, cache)
        return self.lm_head(self.ln_f(x))

    def empty_caches(self, batch: int, length: int, dtype: torch.dtype, device: torch.device) -> list:
        """Zeroed (key, value) caches for every layer: [batch, heads, length, head dim] each."""
        c = self.config
        shape = (batch, c.n_head, length, c.n_embd // c.n_head)
        return [
            (torch.zeros(shape, dtype=dtype, device=device), torch.zeros(shape, dtype=dtype, device=device))
            for _ in range(c.n_layer)
        ]


class Decoder(nn.Module):
    """`model.decode` as a module's forward, so it can be jitted and compiled like one."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, tokens: torch.Tensor, positions: torch.Tensor, caches: list) -> torch.Tensor:
        return self.model.decode(tokens, positions, caches)


def _init_weights(module: nn.Module) -> None:
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)
