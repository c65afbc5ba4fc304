"""Training steps of transformer layers: forward and backward timed as ONE step.

Every case runs `fusebench.cases.training_step`: the (compiled) forward, then
`torch.autograd.grad` of its output with a given output gradient (none for the scalar loss of
`cross_entropy`, as `loss.backward()`), and returns the output and the gradient of every input
that requires grad. Gradients are returned, not accumulated into `.grad`, so every call does the
same work and nothing has to be zeroed between samples. The reference is eager forward + backward
in float64; the check compares the output AND every gradient. Each case declares
`forward_call=forward_of_step`, so the harness records kernels and fusions of the forward and of
the backward separately.

Cases (GPU sizes; the quick sizes keep the shapes' roles at CPU scale):
- `mlp_block`: linear + bias, tanh-GELU, linear + bias; tokens x width with hidden = 4 x width,
  bfloat16 (8192 tokens, width 4096: an LLM's MLP).
- `rmsnorm` (written by hand, statistics in float32 as LLaMA does) and `layernorm`
  (F.layer_norm with weight and bias) over [8192, 4096], bfloat16 and float32.
- `cross_entropy`: F.cross_entropy with ignore_index over bfloat16 logits [8192, 32000] (a 32k
  vocabulary); about 1 target in 8 is ignored.
- `transformer_block`: a pre-norm GPT block (layer norm, causal F.scaled_dot_product_attention
  with heads of 128, projection, residual, layer norm, GELU MLP, residual), bfloat16, batch 4 x
  2048 tokens, width 2048.

Bytes (the fewest a step must move): the forward reads every input once and writes its output;
the backward reads the output gradient and every input again (it may recompute what the forward
computed instead of saving it) and writes one gradient per input that requires grad. The few
bias vectors a backward does not need (the last bias of an MLP, a layer norm's bias) are counted
as read: under 0.1% of any case's bytes.

Input scales: a bfloat16 result is off by about 1% of its tensor's typical magnitude near zero,
so the absolute tolerance only means something if the output and every gradient have magnitudes
near 1. Sums over tokens make weight gradients grow as sqrt(tokens) while the input gradient does
not, so the inputs are scaled with the token count (`_SCALES`): the output gradient by
1/sqrt(tokens) (weight gradients ~1), and a normalized input by 1/sqrt(tokens) (a norm's input
gradient grows as 1 / its input's scale, which brings it back to ~1).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from fusebench.cases import Case, Params, dtype_named, forward_of_step, generator, random_tensor, training_step
from fusebench.integrations.asv_adapter import asv_benchmarks

IGNORE_INDEX = -100
RMS_EPS = 1e-6
HEAD_DIM = 128

# bfloat16 over sums of thousands of rounded products; float32 over sums of thousands of terms.
_TOLERANCES = {torch.bfloat16: (3e-2, 5e-2), torch.float32: (1e-4, 1e-4)}


# ---------------------------------------------------------------------------------------------
# MLP block


def mlp_block(x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor, b2: torch.Tensor) -> torch.Tensor:
    """linear(x, w1, b1) -> tanh-GELU -> linear(., w2, b2): a transformer's MLP."""
    return F.linear(F.gelu(F.linear(x, w1, b1), approximate="tanh"), w2, b2)


def _mlp_inputs(params: Params, device: torch.device, seed: int) -> tuple:
    tokens, width = params["shape"]
    hidden = 4 * width
    dtype = dtype_named(params["dtype"])
    gen = generator(seed)
    # NOTE: x is scaled so that the gradients of x and w1 (which grow as 1/scale and as scale x
    # sqrt(tokens)) meet; w1 keeps the GELU's input ~1; the output and its gradient are ~2.5 so
    # that the remaining gradients are ~1 (see the module docstring).
    x_scale = math.sqrt(2.0) / tokens**0.25

    def leaf(shape: tuple[int, ...], scale: float) -> torch.Tensor:
        return random_tensor(shape, dtype, device, gen, scale).requires_grad_(True)

    x = leaf((tokens, width), x_scale)
    w1 = leaf((hidden, width), 1.0 / (x_scale * math.sqrt(width)))
    b1 = leaf((hidden,), 0.1)
    w2 = leaf((width, hidden), 2.5 / math.sqrt(hidden))
    b2 = leaf((width,), 0.1)
    cotangent = random_tensor((tokens, width), dtype, device, gen, 2.5 / math.sqrt(tokens))
    return x, w1, b1, w2, b2, cotangent


def _mlp_bytes(params: Params) -> int:
    tokens, width = params["shape"]
    hidden = 4 * width
    inputs = tokens * width + 2 * hidden * width + hidden + width
    output = tokens * width
    forward = inputs + output
    backward = output + inputs + inputs  # output gradient, inputs read again, one gradient each
    return dtype_named(params["dtype"]).itemsize * (forward + backward)


# ---------------------------------------------------------------------------------------------
# normalizations


def rms_norm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """RMSNorm written by hand: statistics and normalization in float32 (or wider: float64 for the
    reference), scaled in x's dtype."""
    wide = x.to(torch.promote_types(x.dtype, torch.float32))
    normalized = wide * torch.rsqrt(wide.pow(2).mean(-1, keepdim=True) + RMS_EPS)
    return normalized.to(x.dtype) * weight


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """F.layer_norm over the last dimension, with weight and bias."""
    return F.layer_norm(x, (x.shape[-1],), weight, bias)


def _norm_inputs(with_bias: bool):
    def make(params: Params, device: torch.device, seed: int) -> tuple:
        tokens, width = params["shape"]
        dtype = dtype_named(params["dtype"])
        gen = generator(seed)
        x = random_tensor((tokens, width), dtype, device, gen, 1.0 / math.sqrt(tokens)).requires_grad_(True)
        weight = (1.0 + random_tensor((width,), torch.float32, device, gen, 0.1)).to(dtype).requires_grad_(True)
        bias = (random_tensor((width,), dtype, device, gen, 0.1).requires_grad_(True),) if with_bias else ()
        cotangent = random_tensor((tokens, width), dtype, device, gen, 1.0 / math.sqrt(tokens))
        return (x, weight, *bias, cotangent)

    return make


def _norm_bytes(with_bias: bool):
    def count(params: Params) -> int:
        tokens, width = params["shape"]
        inputs = tokens * width + width * (2 if with_bias else 1)
        output = tokens * width
        return dtype_named(params["dtype"]).itemsize * (inputs + output + output + 2 * inputs)

    return count


# ---------------------------------------------------------------------------------------------
# cross-entropy


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of `logits` [tokens, vocabulary] against `targets`, ignoring IGNORE_INDEX."""
    return F.cross_entropy(logits, targets, ignore_index=IGNORE_INDEX)


def _cross_entropy_inputs(params: Params, device: torch.device, seed: int) -> tuple:
    tokens, vocabulary = params["shape"]
    gen = generator(seed)
    logits = random_tensor((tokens, vocabulary), dtype_named(params["dtype"]), device, gen)
    targets = torch.randint(0, vocabulary, (tokens,), generator=gen)
    targets[torch.rand(tokens, generator=gen) < 0.125] = IGNORE_INDEX
    return logits.requires_grad_(True), targets.to(device), None


def _cross_entropy_bytes(params: Params) -> int:
    tokens, vocabulary = params["shape"]
    logits = tokens * vocabulary * dtype_named(params["dtype"]).itemsize
    targets = tokens * torch.int64.itemsize
    loss = dtype_named(params["dtype"]).itemsize
    return (logits + targets + loss) + (logits + targets + logits)


# ---------------------------------------------------------------------------------------------
# transformer block


def transformer_block(
    x: torch.Tensor,
    norm1_weight: torch.Tensor,
    norm1_bias: torch.Tensor,
    qkv_weight: torch.Tensor,
    projection_weight: torch.Tensor,
    norm2_weight: torch.Tensor,
    norm2_bias: torch.Tensor,
    fc_weight: torch.Tensor,
    fc_bias: torch.Tensor,
    out_weight: torch.Tensor,
    out_bias: torch.Tensor,
) -> torch.Tensor:
    """A pre-norm GPT block on x [batch, seq, width]: causal self-attention and an MLP, with residuals."""
    batch, seq, width = x.shape
    heads = width // HEAD_DIM
    normed = F.layer_norm(x, (width,), norm1_weight, norm1_bias)
    q, k, v = F.linear(normed, qkv_weight).split(width, dim=-1)
    q, k, v = (t.view(batch, seq, heads, HEAD_DIM).transpose(1, 2) for t in (q, k, v))
    attention = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    x = x + F.linear(attention.transpose(1, 2).reshape(batch, seq, width), projection_weight)
    normed = F.layer_norm(x, (width,), norm2_weight, norm2_bias)
    return x + F.linear(F.gelu(F.linear(normed, fc_weight, fc_bias), approximate="tanh"), out_weight, out_bias)


def _block_shapes(width: int) -> list[tuple[int, ...]]:
    """Shapes of the block's parameters, in argument order after x."""
    hidden = 4 * width
    norm, attention = [(width,), (width,)], [(3 * width, width), (width, width)]
    return [*norm, *attention, *norm, (hidden, width), (hidden,), (width, hidden), (width,)]


def _block_inputs(params: Params, device: torch.device, seed: int) -> tuple:
    batch, seq, width = params["shape"]
    dtype = dtype_named(params["dtype"])
    gen = generator(seed)
    tokens = batch * seq
    x = random_tensor((batch, seq, width), dtype, device, gen, 1.0 / math.sqrt(tokens)).requires_grad_(True)
    parameters = []
    for shape in _block_shapes(width):
        if len(shape) == 2:  # a weight matrix: outputs ~1 for inputs ~1
            value = random_tensor(shape, dtype, device, gen, 1.0 / math.sqrt(shape[1]))
        elif len(parameters) in (0, 4):  # a layer norm's weight
            value = (1.0 + random_tensor(shape, torch.float32, device, gen, 0.1)).to(dtype)
        else:
            value = random_tensor(shape, dtype, device, gen, 0.1)
        parameters.append(value.requires_grad_(True))
    cotangent = random_tensor((batch, seq, width), dtype, device, gen, 1.0 / math.sqrt(tokens))
    return (x, *parameters, cotangent)


def _block_bytes(params: Params) -> int:
    batch, seq, width = params["shape"]
    inputs = batch * seq * width + sum(math.prod(shape) for shape in _block_shapes(width))
    output = batch * seq * width
    return dtype_named(params["dtype"]).itemsize * (inputs + output + output + 2 * inputs)


CASES = [
    Case(
        name="mlp_block",
        fn=mlp_block,
        make_inputs=_mlp_inputs,
        bytes_moved=_mlp_bytes,
        params={"shape": [(8192, 4096)], "dtype": ["bfloat16"]},
        quick_params={"shape": [(256, 64)], "dtype": ["bfloat16"]},
        call=training_step,
        forward_call=forward_of_step,
        tolerances=_TOLERANCES,
        description="linear + bias + GELU + linear + bias, forward and backward (tokens x width, hidden 4 x width)",
    ),
    Case(
        name="rmsnorm",
        fn=rms_norm,
        make_inputs=_norm_inputs(with_bias=False),
        bytes_moved=_norm_bytes(with_bias=False),
        params={"shape": [(8192, 4096)], "dtype": ["bfloat16", "float32"]},
        quick_params={"shape": [(256, 512)], "dtype": ["bfloat16", "float32"]},
        call=training_step,
        forward_call=forward_of_step,
        tolerances=_TOLERANCES,
        description="RMSNorm written by hand (float32 statistics), forward and backward",
    ),
    Case(
        name="layernorm",
        fn=layer_norm,
        make_inputs=_norm_inputs(with_bias=True),
        bytes_moved=_norm_bytes(with_bias=True),
        params={"shape": [(8192, 4096)], "dtype": ["bfloat16", "float32"]},
        quick_params={"shape": [(256, 512)], "dtype": ["bfloat16", "float32"]},
        call=training_step,
        forward_call=forward_of_step,
        tolerances=_TOLERANCES,
        description="F.layer_norm with weight and bias, forward and backward",
    ),
    Case(
        name="cross_entropy",
        fn=cross_entropy,
        make_inputs=_cross_entropy_inputs,
        bytes_moved=_cross_entropy_bytes,
        params={"shape": [(8192, 32000)], "dtype": ["bfloat16"]},
        quick_params={"shape": [(64, 1000)], "dtype": ["bfloat16"]},
        call=training_step,
        forward_call=forward_of_step,
        # NOTE: gradients are ~1e-9 (softmax / tokens) and exact only relative to themselves; eager
        # bfloat16 rounds the log-probabilities (about -10, spacing 1/16), so its softmax is off by
        # up to ~3%.
        tolerances={torch.bfloat16: (6e-2, 1e-12)},
        description="F.cross_entropy with ignore_index over a 32k vocabulary, forward and backward",
    ),
    Case(
        name="transformer_block",
        fn=transformer_block,
        make_inputs=_block_inputs,
        bytes_moved=_block_bytes,
        params={"shape": [(4, 2048, 2048)], "dtype": ["bfloat16"]},
        quick_params={"shape": [(2, 32, 256)], "dtype": ["bfloat16"]},
        call=training_step,
        forward_call=forward_of_step,
        # NOTE: errors compound through two layer norms, attention and the MLP (eager bfloat16 is
        # off by a few percent of a gradient's magnitude at the quick size, hence the 4% rtol). At
        # the full size the first layer norm's bias gradient sums 8192 tokens' bf16 gradients that
        # went through attention, and eager bfloat16's own error there exceeds an atol of 0.08 on
        # top of that rtol; atol 0.16 leaves both eager and our compiler room for it.
        tolerances={torch.bfloat16: (4e-2, 1.6e-1)},
        description="pre-norm GPT block (layer norms, causal SDPA, GELU MLP, residuals), forward and backward",
    ),
]

# ASV sees each case as benchmarks '<suite>.<case>.<metric>' (fusebench/integrations/asv_adapter.py).
globals().update(asv_benchmarks(__name__, CASES))
