"""Attention that keeps its softmax statistics, and the fused backward that reads them.

`attention_forward` (`prims.sdpa_forward`) returns attention's output and the logsumexp of each
query row's scaled, masked scores; `attention_backward` (`prims.sdpa_backward`) hands both to
torch's fused attention backward kernels, so the backward never runs attention's forward again.
Both pick the kernel with torch's own rule (`aten._fused_sdp_choice`: what
`F.scaled_dot_product_attention` picks for these tensors) and call the matching aten ops:

| backend          | forward                                       | backward          |
|------------------|-----------------------------------------------|-------------------|
| flash (CUDA)     | `_scaled_dot_product_flash_attention`         | its `_backward`   |
| efficient (CUDA) | `_scaled_dot_product_efficient_attention`     | its `_backward`   |
| cudnn (CUDA)     | `_scaled_dot_product_cudnn_attention`         | its `_backward`   |
| flash (CPU)      | `_scaled_dot_product_flash_attention_for_cpu` | its `_backward`   |

Efficient attention and cuDNN take a mask as an additive bias (a boolean mask becomes 0 / -inf,
made once per mask: `attention_masks.additive_bias`).
Everything else (the math backend, tensors that are not 4-D, head dims FlashAttention would need
padded for, an op missing from this torch build: warned about once) takes the
recompute path: `F.scaled_dot_product_attention` forward with the logsumexp computed from the
scores, and a backward through torch autograd that runs attention's forward again.

The logsumexp has one layout for every backend: float32 of shape `q.shape[:-1]`, natural log. Each
backend's own layout is a view or a small pad away (efficient attention pads rows to a multiple
of 32, cuDNN adds a trailing dim of 1). NOTE: forward and backward choose their kernel on the same
tensors, so they agree; where they would not (`sdpa_kernel` changed in between), the statistic
means the same to every backend and the gradients stay correct.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from compiler.core.ir import Proxy
from compiler.core.proxies import same_extent
from compiler.core.tensor_checks import TensorChecks
from compiler.executors.attention_masks import additive_bias

_ATEN = torch.ops.aten
_FLASH, _EFFICIENT, _CUDNN = 1, 2, 3  # torch.nn.attention.SDPBackend values
_NO_DROPOUT = 0.0
_EFFICIENT_ROWS = 32  # efficient attention's logsumexp rows are padded to this multiple

# backend -> (forward op, backward op), by name: looked up when first used, so a torch build
# without one still imports.
OPS = {
    "flash": ("_scaled_dot_product_flash_attention", "_scaled_dot_product_flash_attention_backward"),
    "efficient": ("_scaled_dot_product_efficient_attention", "_scaled_dot_product_efficient_attention_backward"),
    "cudnn": ("_scaled_dot_product_cudnn_attention", "_scaled_dot_product_cudnn_attention_backward"),
    "cpu_flash": (
        "_scaled_dot_product_flash_attention_for_cpu",
        "_scaled_dot_product_flash_attention_for_cpu_backward",
    ),
}
_warned: set[str] = set()


def _available(backend: str) -> bool:
    missing = [name for name in OPS[backend] if not hasattr(_ATEN, name)]
    for name in missing:
        if name not in _warned:
            _warned.add(name)
            warnings.warn(
                f"torch {torch.__version__} has no aten.{name}: attention's backward runs its forward again",
                RuntimeWarning,
                stacklevel=3,
            )
    return not missing


def kv_groups(q: torch.Tensor, k: torch.Tensor) -> int:
    """How many query heads share each key/value head: 1 unless k has fewer heads than q
    (grouped-query attention)."""
    return 1 if q.ndim < 3 or k.shape[-3] == q.shape[-3] else q.shape[-3] // k.shape[-3]


def repeat_heads(t: torch.Tensor, groups: int) -> torch.Tensor:
    """Each key/value head repeated for the `groups` query heads it serves (torch's enable_gqa order)."""
    return t.repeat_interleave(groups, dim=-3)


def sum_heads(t: torch.Tensor, groups: int) -> torch.Tensor:
    """The gradient of repeated heads summed back onto each key/value head (in float32)."""
    return t.unflatten(-3, (-1, groups)).sum(-3, dtype=torch.float32).to(t.dtype)


# What torch's choice reads besides the tensors: the backends enabled (`sdpa_kernel` sets them),
# their priority order, determinism. A getter missing from a torch build reads None.
_SETTINGS = tuple(
    getattr(torch._C, name, lambda: None)
    for name in (
        "_get_flash_sdp_enabled",
        "_get_mem_efficient_sdp_enabled",
        "_get_cudnn_sdp_enabled",
        "_get_math_sdp_enabled",
        "_get_fa3_sdp_enabled",
        "_get_overrideable_sdp_enabled",
        "_get_sdp_priority_order",
        "are_deterministic_algorithms_enabled",
    )
)
_CHOICES: dict[tuple, int | None] = {}  # _choice_key -> torch's choice
_BACKENDS: dict[tuple, str | None] = {}  # _choice_key -> attention_backend's answer
_MAX_CHOICES = 4096
_UNKNOWN: Any = object()  # a key not asked about yet (None is an answer)


def _layout(t: Any) -> tuple:
    """What torch's choice reads of one argument: a tensor's shape, strides, offset, dtype, device and
    requires_grad; anything else (None, a number) as it is."""
    if not isinstance(t, torch.Tensor):
        return (t,)
    return t.shape, t.stride(), t.storage_offset(), t.dtype, t.device, t.requires_grad


def _settings() -> tuple:
    """Grad mode and the global settings torch's choice reads, as one tuple."""
    flash, efficient, cudnn, math, fa3, overrideable, order, deterministic = _SETTINGS
    return (
        torch.is_grad_enabled(), flash(), efficient(), cudnn(), math(), fa3(), overrideable(), tuple(order()),
        deterministic(),
    )  # fmt: skip


def _choice_key(q: Any, k: Any, v: Any, attn_mask: Any, is_causal: bool, scale: Any) -> tuple:
    """Everything `aten._fused_sdp_choice` decides on: the tensors' shapes, strides, dtypes,
    devices and requires_grad, the flags, grad mode and the global settings, as one flat tuple
    (built every call: cheap to make and to hash)."""
    return (*_layout(q), *_layout(k), *_layout(v), *_layout(attn_mask), is_causal, scale, *_settings())


class RememberedAtSite:
    """`answer(q, k, v, attn_mask, is_causal, scale)` (`attention_backend`, `torch_choice`) for one
    attention of a trace (the sdpa executor gives each its own): the last call's answer again
    while the tensors keep their sizes, strides, dtypes, devices and requires_grad (one C++ check,
    `TensorChecks`), their storage offsets, and the flags and torch's settings are the same.
    Building `_choice_key` and hashing it cost host time on every call of every attention."""

    __slots__ = ("answer", "checks", "last", "state")

    def __init__(self, answer: Callable[..., Any]) -> None:
        self.answer = answer
        self.checks: TensorChecks | None = None
        self.state: tuple | None = None
        self.last: Any = None

    def __call__(self, q: Any, k: Any, v: Any, attn_mask: Any, is_causal: bool, scale: Any) -> Any:
        tensors = (q, k, v) if not isinstance(attn_mask, torch.Tensor) else (q, k, v, attn_mask)
        offsets = tuple([t.storage_offset() for t in tensors])
        state = (offsets, attn_mask is None, is_causal, scale, *_settings())
        if state == self.state and self.checks is not None and self.checks.check(*tensors):
            return self.last
        answer = self.answer(q, k, v, attn_mask, is_causal, scale)
        checks = TensorChecks(exact_strides=[True] * len(tensors))
        checks.learn(*tensors)
        self.checks, self.state, self.last = checks, state, answer
        return answer


def torch_choice(
    q: Any, k: Any, v: Any, attn_mask: Any, is_causal: bool, scale: Any, key: tuple | None = None
) -> int | None:
    """torch's backend choice for these tensors (enable_gqa where k has fewer heads), None if it
    fails. Remembered per `_choice_key`: asking torch costs several times the host time of building
    the key, every call."""
    key = _choice_key(q, k, v, attn_mask, is_causal, scale) if key is None else key
    choice = _CHOICES.get(key, _UNKNOWN)
    if choice is not _UNKNOWN:
        return choice
    try:
        gqa = kv_groups(q, k) > 1
        choice = int(_ATEN._fused_sdp_choice(q, k, v, attn_mask, _NO_DROPOUT, is_causal, scale=scale, enable_gqa=gqa))
    except (RuntimeError, AttributeError, TypeError):
        choice = None
    if len(_CHOICES) < _MAX_CHOICES:
        _CHOICES[key] = choice
    return choice


def attention(
    q: Any, k: Any, v: Any, attn_mask: Any, is_causal: bool, scale: Any, *, choice: Callable[..., Any] | None = None
) -> torch.Tensor:
    """`F.scaled_dot_product_attention`; k and v may have fewer heads than q. FlashAttention and
    cuDNN read each key/value head once for its group of query heads; for any other backend (which
    would repeat them anyway, or run the math path) the heads are repeated first. `choice`: torch's
    choice of backend (`torch_choice`, or a `RememberedAtSite` of it)."""
    groups = kv_groups(q, k)
    if groups > 1 and (choice or torch_choice)(q, k, v, attn_mask, is_causal, scale) not in (_FLASH, _CUDNN):
        k, v, groups = repeat_heads(k, groups), repeat_heads(v, groups), 1
    return F.scaled_dot_product_attention(
        q, k, v, attn_mask=attn_mask, is_causal=is_causal, scale=scale, enable_gqa=groups > 1
    )


def _attention_source(bsym: Any, g: Any) -> list[str] | None:
    """`attention` as torch's own call where the trace's shapes show every key/value head serves
    one query head (not grouped-query attention): no Python call of its own, nor the head count
    read, on a decode step's hot path. None, keeping the call, otherwise."""
    q, k, v, attn_mask, is_causal, scale = bsym.args
    if bsym.kwargs or not all(isinstance(p, Proxy) for p in (q, k, v, bsym.output)):
        return None
    if q.ndim >= 3 and not all(t.ndim >= 3 and same_extent(t.shape[-3], q.shape[-3]) for t in (k, v)):
        return None
    sdpa = g.bind(F.scaled_dot_product_attention, "sdpa")
    options = f"attn_mask={g.source(attn_mask)}, is_causal={g.source(is_causal)}, scale={g.source(scale)}"
    return [f"{bsym.output.name} = {sdpa}({q.name}, {k.name}, {v.name}, {options})"]


attention.inline_source = _attention_source  # type: ignore[attr-defined]


def attention_backend(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: Any, is_causal: bool, scale: Any
) -> str | None:
    """The backend whose fused forward and backward run this attention ("flash", "efficient",
    "cudnn", "cpu_flash"), or None for the recompute path (and for grouped-query attention that
    no fused kernel takes with its own heads: its callers repeat the heads)."""
    if not (q.ndim == k.ndim == v.ndim == 4):
        return None
    key = _choice_key(q, k, v, attn_mask, is_causal, scale)
    backend = _BACKENDS.get(key, _UNKNOWN)
    if backend is not _UNKNOWN:
        return backend
    backend = _backend(q, k, v, attn_mask, is_causal, scale, key)
    if len(_BACKENDS) < _MAX_CHOICES:
        _BACKENDS[key] = backend
    return backend


def _backend(q: Any, k: Any, v: Any, attn_mask: Any, is_causal: bool, scale: Any, key: tuple) -> str | None:
    choice = torch_choice(q, k, v, attn_mask, is_causal, scale, key)
    backend = None
    if q.device.type == "cpu":
        backend = "cpu_flash" if choice == _FLASH else None
    elif q.device.type == "cuda":
        backend = {_FLASH: "flash", _EFFICIENT: "efficient", _CUDNN: "cudnn"}.get(choice)
        # NOTE: F.scaled_dot_product_attention pads head dims to a multiple of 8 for FlashAttention;
        # those cases recompute instead.
        if backend == "flash" and (q.shape[-1] % 8 or v.shape[-1] % 8):
            backend = None
    if kv_groups(q, k) > 1 and backend == "efficient":
        backend = None
    return backend if backend is not None and _available(backend) else None


def attention_forward(
    q: Any, k: Any, v: Any, attn_mask: Any, is_causal: bool, scale: Any, *, backend_of: Callable[..., Any] | None = None
) -> tuple:
    """(attention's output, logsumexp of its scores: float32 of shape q.shape[:-1]). `backend_of`:
    `attention_backend`, or a `RememberedAtSite` of it."""
    backend = (backend_of or attention_backend)(q, k, v, attn_mask, is_causal, scale)
    groups = kv_groups(q, k)
    if groups > 1 and backend is None:
        return attention_forward(q, repeat_heads(k, groups), repeat_heads(v, groups), attn_mask, is_causal, scale)
    rows = q.shape[:-1]
    if backend == "flash":
        result = _op(backend, 0)(q, k, v, _NO_DROPOUT, is_causal, False, scale=scale)
        return result[0], result[1]
    if backend == "efficient":
        bias = _bias(attn_mask, q, k)
        out, logsumexp, _, _ = _op(backend, 0)(q, k, v, bias, True, _NO_DROPOUT, is_causal, scale=scale)
        return out, logsumexp[..., : rows[-1]]
    if backend == "cudnn":
        bias = _bias(attn_mask, q, k)
        result = _op(backend, 0)(q, k, v, bias, True, _NO_DROPOUT, is_causal, False, scale=scale)
        return result[0], result[1].reshape(rows)
    if backend == "cpu_flash":
        mask = additive_bias(attn_mask, q.dtype, aligned=False)
        return _op(backend, 0)(q, k, v, _NO_DROPOUT, is_causal, attn_mask=mask, scale=scale)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, is_causal=is_causal, scale=scale)
    return out, _math_logsumexp(q, k, attn_mask, is_causal, scale)


def attention_backward(
    grad: Any,
    q: Any,
    k: Any,
    v: Any,
    attn_mask: Any,
    is_causal: bool,
    scale: Any,
    out: Any,
    logsumexp: Any,
    *,
    backend_of: Callable[..., Any] | None = None,
) -> tuple:
    """(dq, dk, dv) of attention from the output's cotangent and the forward's output and logsumexp
    (`backend_of` as for `attention_forward`)."""
    backend = (backend_of or attention_backend)(q, k, v, attn_mask, is_causal, scale)
    groups = kv_groups(q, k)
    if groups > 1 and backend is None:
        k, v = repeat_heads(k, groups), repeat_heads(v, groups)
        dq, dk, dv = attention_backward(grad, q, k, v, attn_mask, is_causal, scale, out, logsumexp)
        return dq, sum_heads(dk, groups), sum_heads(dv, groups)
    rows_q, rows_k = q.shape[-2], k.shape[-2]
    if backend == "flash":
        seed = _placeholder(q.device)
        logsumexp = logsumexp.contiguous()
        return _op(backend, 1)(
            grad, q, k, v, out, logsumexp, None, None, rows_q, rows_k, _NO_DROPOUT, is_causal, seed, seed, scale=scale
        )
    if backend == "efficient":
        seed = _placeholder(q.device)
        bias = _bias(attn_mask, q, k)
        padded = F.pad(logsumexp, (0, -rows_q % _EFFICIENT_ROWS))
        dq, dk, dv, _ = _op(backend, 1)(
            grad, q, k, v, bias, out, padded, seed, seed, _NO_DROPOUT, [True, True, True, False], is_causal, scale=scale
        )
        return dq, dk, dv
    if backend == "cudnn":
        seed = _placeholder(q.device)
        if grad.stride() != out.stride():
            grad = torch.empty_like(out).copy_(grad)
        native = logsumexp.reshape(_cudnn_logsumexp_shape(q))
        return _op(backend, 1)(
            grad,
            q,
            k,
            v,
            out,
            native,
            seed,
            seed,
            _bias(attn_mask, q, k),
            None,
            None,
            rows_q,
            rows_k,
            _NO_DROPOUT,
            is_causal,
            scale=scale,
        )
    if backend == "cpu_flash":
        mask = additive_bias(attn_mask, q.dtype, aligned=False)
        return _op(backend, 1)(grad, q, k, v, out, logsumexp, _NO_DROPOUT, is_causal, attn_mask=mask, scale=scale)
    return recomputed_attention_backward(grad, q, k, v, attn_mask, is_causal, scale)


def recomputed_attention_backward(
    grad: Any, q: Any, k: Any, v: Any, attn_mask: Any, is_causal: bool, scale: Any
) -> tuple:
    """(dq, dk, dv) through torch autograd, running attention's forward again."""
    with torch.enable_grad():
        q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, is_causal=is_causal, scale=scale)
        return torch.autograd.grad(out, (q, k, v), grad)


def _op(backend: str, index: int) -> Any:
    return getattr(_ATEN, OPS[backend][index])


@functools.cache
def _placeholder(device: torch.device) -> torch.Tensor:
    """The philox seed and offset the backward kernels take; without dropout they read neither."""
    return torch.empty((), dtype=torch.int64, device=device)


def _bias(attn_mask: Any, q: torch.Tensor, k: torch.Tensor) -> Any:
    """The mask as efficient attention and cuDNN take it: additive, rows aligned, full 4-D shape."""
    bias = additive_bias(attn_mask, q.dtype, aligned=True)
    return None if bias is None else bias.expand(q.shape[0], q.shape[1], q.shape[2], k.shape[2])


@functools.cache
def _cudnn_logsumexp_rank() -> int:
    """The rank of cuDNN's logsumexp in this torch build (asked of the op's meta kernel)."""
    q = torch.empty(1, 1, 8, 64, dtype=torch.bfloat16, device="meta")
    try:
        return _op("cudnn", 0)(q, q, q, None, True, _NO_DROPOUT, False, False)[1].ndim
    except (RuntimeError, NotImplementedError):
        return 4


def _cudnn_logsumexp_shape(q: torch.Tensor) -> tuple[int, ...]:
    rows = tuple(q.shape[:-1])
    return rows + (1,) * (_cudnn_logsumexp_rank() - len(rows))


def _math_logsumexp(q: torch.Tensor, k: torch.Tensor, attn_mask: Any, is_causal: bool, scale: Any) -> torch.Tensor:
    """The logsumexp of each query row's scaled, masked scores, in float32."""
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    scores = torch.matmul(q.float(), k.float().transpose(-2, -1)) * scale
    if is_causal:
        keep = torch.ones(scores.shape[-2:], dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(keep.logical_not(), float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(attn_mask.logical_not(), float("-inf"))
        else:
            scores = scores + attn_mask.float()
    return torch.logsumexp(scores, dim=-1)
