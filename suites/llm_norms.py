"""Normalization, loss and activation patterns of an LLM's forward pass (inference), at LLM sizes.

Each case is one pattern a transformer runs on every token, in bf16 (computed in fp32 inside, as
torch.compile and hand-written kernels do); each should be one or two kernels:
- `softmax`, `log_softmax`: over a 32k vocabulary, [tokens, vocab]. Bytes: read and write the logits.
- `cross_entropy`: mean loss of [tokens, vocab] logits against int64 targets. Bytes: read the
  logits and the targets (the scalar loss written is negligible).
- `rms_norm`: F.rms_norm over the hidden size with a weight, [tokens, hidden]. Bytes: read x and
  the weight, write y.
- `layer_norm`: F.layer_norm over the hidden size with a weight and a bias, [tokens, hidden] (GPT-2's
  and BERT's norm). Bytes: read x, the weight and the bias, write y.
- `swiglu`: silu(gate) * up of a LLaMA MLP, [tokens, intermediate]. Bytes: read gate and up, write one.
- `rotary`: rotary position embedding of queries, [batch, heads, seq, head_dim] with cos and sin
  of [seq, head_dim] (rotate_half convention). Bytes: read q, cos and sin, write the result.

Full sizes are LLaMA-7B's (4096 tokens, vocab 32000, hidden 4096, intermediate 11008, 32 heads of
128); quick sizes run on CPU in well under a second. Training-step versions live elsewhere.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from fusebench.cases import Case, Params, dtype_named, generator, random_tensor
from fusebench.integrations.asv_adapter import asv_benchmarks

EPS = 1e-6
LAYER_NORM_EPS = 1e-5  # torch's default, GPT-2's


def softmax(logits: torch.Tensor) -> torch.Tensor:
    """Softmax over the vocabulary."""
    return torch.softmax(logits, dim=-1)


def log_softmax(logits: torch.Tensor) -> torch.Tensor:
    """Log-softmax over the vocabulary."""
    return torch.log_softmax(logits, dim=-1)


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy loss of the logits against the target token ids."""
    return F.cross_entropy(logits, targets)


def rms_norm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """RMS norm over the hidden size, scaled by a weight."""
    return F.rms_norm(x, (x.shape[-1],), weight, EPS)


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """Layer norm over the hidden size, scaled by a weight and shifted by a bias."""
    return F.layer_norm(x, (x.shape[-1],), weight, bias, LAYER_NORM_EPS)


def swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """The gated activation of a LLaMA MLP."""
    return F.silu(gate) * up


def rotary(q: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding: q * cos + rotate_half(q) * sin."""
    half = q.shape[-1] // 2
    rotated = torch.cat((-q[..., half:], q[..., :half]), dim=-1)
    return q * cos + rotated * sin


def _size(params: Params) -> int:
    return dtype_named(params["dtype"]).itemsize


def _logits(params: Params, device: torch.device, seed: int) -> tuple:
    return (random_tensor(params["shape"], dtype_named(params["dtype"]), device, generator(seed), 4.0),)


def _logits_and_targets(params: Params, device: torch.device, seed: int) -> tuple:
    gen = generator(seed)
    tokens, vocab = params["shape"]
    logits = random_tensor((tokens, vocab), dtype_named(params["dtype"]), device, gen, 4.0)
    targets = torch.randint(0, vocab, (tokens,), generator=gen).to(device)
    return logits, targets


def _norm_inputs(params: Params, device: torch.device, seed: int, vectors: int = 1) -> tuple:
    """x of [tokens, hidden], then `vectors` tensors of [hidden] (a weight; a weight and a bias)."""
    gen = generator(seed)
    tokens, hidden = params["shape"]
    dtype = dtype_named(params["dtype"])
    x = random_tensor((tokens, hidden), dtype, device, gen)
    return x, *(random_tensor((hidden,), dtype, device, gen) for _ in range(vectors))


def _two(params: Params, device: torch.device, seed: int) -> tuple:
    gen = generator(seed)
    dtype = dtype_named(params["dtype"])
    return tuple(random_tensor(params["shape"], dtype, device, gen) for _ in range(2))


def _rotary_inputs(params: Params, device: torch.device, seed: int) -> tuple:
    batch, heads, seq, head_dim = params["shape"]
    dtype = dtype_named(params["dtype"])
    q = random_tensor((batch, heads, seq, head_dim), dtype, device, generator(seed))
    inverse = 1.0 / (10000 ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    angles = torch.outer(torch.arange(seq, dtype=torch.float64), inverse).repeat(1, 2)
    return q, angles.cos().to(device, dtype), angles.sin().to(device, dtype)


def _elements(params: Params) -> int:
    return math.prod(params["shape"])


def _case(
    name: str,
    fn: Callable,
    make_inputs: Callable,
    bytes_moved: Callable[[Params], int],
    full: tuple,
    quick: tuple,
    description: str,
    tolerances: dict | None = None,
) -> Case:
    return Case(
        name=name,
        fn=fn,
        make_inputs=make_inputs,
        bytes_moved=bytes_moved,
        params={"shape": [full], "dtype": ["bfloat16"]},
        quick_params={"shape": [quick], "dtype": ["bfloat16"]},
        description=description,
        tolerances=tolerances or {},
    )


CASES = [
    _case(
        "softmax",
        softmax,
        _logits,
        lambda p: 2 * _elements(p) * _size(p),
        (4096, 32000),
        (64, 512),
        "softmax over a 32k vocabulary (inference)",
    ),
    _case(
        "log_softmax",
        log_softmax,
        _logits,
        lambda p: 2 * _elements(p) * _size(p),
        (4096, 32000),
        (64, 512),
        "log_softmax over a 32k vocabulary (inference)",
    ),
    _case(
        "cross_entropy",
        cross_entropy,
        _logits_and_targets,
        lambda p: _elements(p) * _size(p) + 8 * p["shape"][0],
        (4096, 32000),
        (64, 512),
        "mean cross-entropy over a 32k vocabulary (forward only)",
    ),
    _case(
        "rms_norm",
        rms_norm,
        _norm_inputs,
        lambda p: (2 * _elements(p) + p["shape"][1]) * _size(p),
        (4096, 4096),
        (64, 256),
        "RMS norm over the hidden size with a weight",
    ),
    _case(
        "layer_norm",
        layer_norm,
        functools.partial(_norm_inputs, vectors=2),
        lambda p: (2 * _elements(p) + 2 * p["shape"][1]) * _size(p),
        (4096, 4096),
        (64, 256),
        "layer norm over the hidden size with a weight and a bias",
    ),
    _case(
        "swiglu",
        swiglu,
        _two,
        lambda p: 3 * _elements(p) * _size(p),
        (4096, 11008),
        (64, 344),
        "silu(gate) * up of a LLaMA MLP",
    ),
    _case(
        "rotary",
        rotary,
        _rotary_inputs,
        lambda p: (2 * _elements(p) + 2 * p["shape"][2] * p["shape"][3]) * _size(p),
        (4, 32, 2048, 128),
        (1, 4, 64, 32),
        "rotary position embedding of queries (rotate_half convention)",
        # NOTE: eager's bf16 q*cos + rotate_half(q)*sin rounds twice, which takes it past the
        # default bf16 atol of 0.01 from the float64 reference.
        {torch.bfloat16: (1.6e-2, 2e-2)},
    ),
]

# ASV sees each case as benchmarks '<suite>.<case>.<metric>' (fusebench/integrations/asv_adapter.py).
globals().update(asv_benchmarks(__name__, CASES))
