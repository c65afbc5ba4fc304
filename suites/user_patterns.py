"""The suite patterns as users write them: casts before or after the reduction, `.to` chains, views.

The `llm_norms` suite writes each pattern once, the way a compiler would like it. Code in the wild
writes the same work in other forms (transformers' loss upcasts the logits first:
`F.cross_entropy(logits.float(), target)`; its norms upcast, compute and cast back), and a
compiler should not be slower for it. Each case here is one pattern (`PATTERNS`) in one form
(`FORMS`), generated as data: every (pattern, form) pair is a case `<pattern>__<form>`:

- `as_written`: the pattern on the bf16 inputs as they come (torch computes in fp32 inside);
- `float_first`: the inputs upcast with `.float()` first, the result left in float32 (the
  transformers loss);
- `float_first_cast_back`: upcast first, the result cast back with `.to(dtype)` (transformers'
  norms);
- `cast_after`: the pattern in bf16, its result upcast with `.float()` afterwards (the cast moved
  after the reduction);
- `to_chain`: the inputs through `.to(float32).to(dtype).float()` (round trips a compiler
  should see through; exact in value);
- `viewed`: the inputs viewed as [2, tokens / 2, width] and back to [tokens, width] before the
  pattern, and its result viewed the same way after (views a model's reshapes add).

Token counts run from 2,048 to 16,384 at full size (`TOKENS`); quick sizes run on CPU in well
under a second. Bytes: each input read once at its dtype, each output written once at its dtype
(a scalar loss counts its 4 or 2 bytes), as for `llm_norms`. The width (vocabulary, hidden or
intermediate size) is a parameter of one value: LLaMA-7B's at full size, small at quick sizes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from fusebench.cases import Case, Params, dtype_named, generator, random_tensor
from fusebench.integrations.asv_adapter import asv_benchmarks

EPS = 1e-6
TOKENS = (2048, 4096, 8192, 16384)
QUICK_TOKENS = 16


# --- the patterns: each takes its floating inputs first (the ones a form transforms) -----------


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of [tokens, vocab] logits against the target ids."""
    return F.cross_entropy(logits, targets)


def softmax(logits: torch.Tensor) -> torch.Tensor:
    """Softmax over the vocabulary."""
    return torch.softmax(logits, dim=-1)


def log_softmax(logits: torch.Tensor) -> torch.Tensor:
    """Log-softmax over the vocabulary."""
    return torch.log_softmax(logits, dim=-1)


def rms_norm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """RMS norm as LLaMA's reference code writes it: mean of squares, rsqrt, weight."""
    variance = x.pow(2).mean(-1, keepdim=True)
    return weight * (x * torch.rsqrt(variance + EPS))


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """Layer norm over the hidden size with a weight and a bias."""
    return F.layer_norm(x, (x.shape[-1],), weight, bias)


def swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """The gated activation of a LLaMA MLP."""
    return F.silu(gate) * up


def gelu(x: torch.Tensor) -> torch.Tensor:
    """GPT-2's tanh GELU."""
    return F.gelu(x, approximate="tanh")


@dataclass(frozen=True)
class Pattern:
    """A pattern: its function, how many of its leading inputs are [tokens, width] tensors
    (`floating`), its width at full and quick sizes, and whether it returns a scalar (a loss) or
    one [tokens, width] tensor. A form transforms the floating inputs and the vectors."""

    name: str
    fn: Callable[..., torch.Tensor]
    floating: int
    width: int
    quick_width: int
    scalar: bool = False
    vectors: int = 0  # [width] inputs after the floating ones (weights, biases)
    targets: bool = False  # an int64 target id per token after them (the loss)
    scale: float = 1.0  # of the random values (logits spread as a model's are)


PATTERNS = (
    Pattern("cross_entropy", cross_entropy, 1, 32000, 512, scalar=True, targets=True, scale=4.0),
    Pattern("softmax", softmax, 1, 32000, 512, scale=4.0),
    Pattern("log_softmax", log_softmax, 1, 32000, 512, scale=4.0),
    Pattern("rms_norm", rms_norm, 1, 4096, 256, vectors=1),
    Pattern("layer_norm", layer_norm, 1, 4096, 256, vectors=2),
    Pattern("swiglu", swiglu, 2, 11008, 344),
    Pattern("gelu", gelu, 1, 4096, 256),
)


# --- the forms: how the inputs reach the pattern and what happens to its result ----------------


def _float(t: torch.Tensor) -> torch.Tensor:
    return t.float()


def _to_chain(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.float32).to(t.dtype).float()


def _viewed(t: torch.Tensor) -> torch.Tensor:
    if t.dim() != 2:
        return t
    return t.view(2, t.shape[0] // 2, t.shape[1]).view(-1, t.shape[1])


def _same(t: torch.Tensor) -> torch.Tensor:
    return t


@dataclass(frozen=True)
class Form:
    """How a pattern is written: each transformed input goes through `inputs`; the result through
    `result(result, input dtype)`; `float_result` when the result is float32; `rounded` when that
    float32 result holds values rounded to the input dtype first (checked with its tolerance)."""

    name: str
    inputs: Callable[[torch.Tensor], torch.Tensor]
    result: Callable[[torch.Tensor, torch.dtype], torch.Tensor]
    float_result: bool
    rounded: bool = False


FORMS = (
    Form("as_written", _same, lambda r, dtype: r, False),
    Form("float_first", _float, lambda r, dtype: r, True),
    Form("float_first_cast_back", _float, lambda r, dtype: r.to(dtype), False),
    Form("cast_after", _same, lambda r, dtype: r.float(), True, rounded=True),
    Form("to_chain", _to_chain, lambda r, dtype: r, True),
    Form("viewed", _viewed, lambda r, dtype: _viewed(r), False),
)


def written(pattern: Pattern, form: Form) -> Callable[..., torch.Tensor]:
    """`pattern` written in `form`: a function of the case's inputs."""
    transformed = pattern.floating + pattern.vectors

    def fn(*args: torch.Tensor) -> torch.Tensor:
        dtype = args[0].dtype
        inputs = [form.inputs(a) for a in args[:transformed]]
        return form.result(pattern.fn(*inputs, *args[transformed:]), dtype)

    fn.__name__ = fn.__qualname__ = f"{pattern.name}__{form.name}"
    fn.__doc__ = f"{pattern.fn.__doc__} Written {form.name.replace('_', ' ')}."
    return fn


# --- inputs and bytes -----------------------------------------------------------------------


def inputs_of(pattern: Pattern) -> Callable[[Params, torch.device, int], tuple]:
    """The case's `make_inputs`: [tokens, width] tensors, [width] vectors, target ids."""

    def make(params: Params, device: torch.device, seed: int) -> tuple:
        gen = generator(seed)
        tokens, width, dtype = params["tokens"], params["width"], dtype_named(params["dtype"])
        args = [random_tensor((tokens, width), dtype, device, gen, pattern.scale) for _ in range(pattern.floating)]
        args += [random_tensor((width,), dtype, device, gen) for _ in range(pattern.vectors)]
        if pattern.targets:
            args.append(torch.randint(0, width, (tokens,), generator=gen).to(device))
        return tuple(args)

    return make


def bytes_of(pattern: Pattern, form: Form) -> Callable[[Params], int]:
    """Each input read once and the result written once, at their dtypes."""

    def bytes_moved(params: Params) -> int:
        tokens, width = params["tokens"], params["width"]
        size = dtype_named(params["dtype"]).itemsize
        read = pattern.floating * tokens * width * size + pattern.vectors * width * size
        read += 8 * tokens if pattern.targets else 0
        out_size = 4 if form.float_result else size
        return read + out_size * (1 if pattern.scalar else tokens * width)

    return bytes_moved


def _case(pattern: Pattern, form: Form) -> Case:
    # NOTE: atol 2e-2 for bf16 (default 1e-2): a bf16 result of a float32 computation rounds once
    # more than the float64 reference does, and a [tokens, 32000] softmax's largest values reach it.
    bf16 = (1.6e-2, 2e-2)
    return Case(
        name=f"{pattern.name}__{form.name}",
        fn=written(pattern, form),
        make_inputs=inputs_of(pattern),
        bytes_moved=bytes_of(pattern, form),
        params={"tokens": list(TOKENS), "width": [pattern.width], "dtype": ["bfloat16"]},
        quick_params={"tokens": [QUICK_TOKENS], "width": [pattern.quick_width], "dtype": ["bfloat16"]},
        headline={"tokens": [8192]},
        tolerances={torch.bfloat16: bf16, **({torch.float32: bf16} if form.rounded else {})},
        description=f"{pattern.name} written {form.name.replace('_', ' ')}",
    )


CASES = [_case(pattern, form) for pattern in PATTERNS for form in FORMS]

# ASV sees each case as benchmarks '<suite>.<case>.<metric>' (fusebench/integrations/asv_adapter.py).
globals().update(asv_benchmarks(__name__, CASES))
