"""`torch.fft`: the discrete Fourier transforms (fft, ifft, fft2, ifft2, fftn, ifftn, rfft, irfft)
as products with the transform's cosine and sine matrices.

A transform along a dim of length n is `X @ W` with `W[j, k] = exp(-+2 pi i j k / n)`: for the parts
of X (the imaginary part absent for a real input), `C = cos`, `S = sin` of those angles,
forward `(Xr C + Xi S) + i (Xi C - Xr S)`, inverse `(Xr C - Xi S) + i (Xi C + Xr S)`, then scaled
as `norm` asks. The phases `j k mod n` are exact integers, so the angles stay in [0, 2 pi). The
matrices are computed in the trace; the products are matmuls, so the executors run them as any
linear layer, and autodiff differentiates them as such (FNet's token mixing: `fftn(x).real`).
A product costs n^2 per element where a fast Fourier transform costs n log n: right for the
lengths of a model's hidden size or sequence, not meant for long signals.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from compiler.core.errors import called_at, check
from compiler.core.proxies import TensorProxy
from compiler.ops.complex_numbers import add_parts, make, mul_parts, parts, sub_parts
from compiler.ops.complex_proxy import COMPLEX_OF, ComplexProxy
from compiler.ops.factory import arange
from compiler.ops.registry import register_complex

_NORMS = (None, "backward", "ortho", "forward")


def _scale(norm: str | None, n: int, inverse: bool) -> float:
    check(norm in _NORMS, lambda: f"torch.fft: norm must be one of {_NORMS}, got {norm!r}{called_at()}", ValueError)
    if norm == "ortho":
        return 1.0 / math.sqrt(n)
    return 1.0 / n if (norm == "forward") != inverse else 1.0


def _matrices(n: int, columns: int, dtype: torch.dtype, device: Any) -> tuple[TensorProxy, TensorProxy]:
    """cos and sin of the angles 2 pi j k / n, j < n, k < columns (a [n, columns] matrix each)."""
    rows = arange(n, device=device, dtype=torch.int64)
    phase = (rows[:, None] * rows[None, :columns]) % n
    angle = phase.to(dtype) * (2.0 * math.pi / n)
    return torch.cos(angle), torch.sin(angle)


def _resized(x: Any, dim: int, size: int | None) -> Any:
    """A part cut or zero-padded at the end of `dim` to `size` (itself for None)."""
    if x is None or size is None or size == x.shape[dim]:
        return x
    check(size >= 1, lambda: f"torch.fft: invalid number of data points ({size}) specified{called_at()}", RuntimeError)
    if size < x.shape[dim]:
        return x.narrow(dim, 0, size)
    pad = [0, 0] * (x.ndim - 1 - dim) + [0, size - x.shape[dim]]
    return torch.nn.functional.pad(x, pad)


def _along(x: Any, dim: int, matrix: TensorProxy) -> Any:
    """`x` (a part, None for zero) transformed along `dim` by `matrix`."""
    if x is None:
        return None
    return (x.movedim(dim, -1) @ matrix).movedim(-1, dim)


def _operand(input: Any, what: str) -> tuple[Any, Any, torch.dtype]:
    """(real part, imaginary part or None, the parts' dtype) of a real or complex input."""
    check(
        isinstance(input, (TensorProxy, ComplexProxy)),
        lambda: f"{what}: expected a tensor, got {type(input).__name__}{called_at()}",
        TypeError,
    )
    if isinstance(input, ComplexProxy):
        dtype = input.real.dtype
    else:
        dtype = input.dtype if input.dtype in (torch.float32, torch.float64) else torch.float32
    check(
        dtype in COMPLEX_OF,
        lambda: f"{what}: transforms of {dtype} tensors are not supported{called_at()}",
        NotImplementedError,
    )
    real, imag = parts(input, dtype)
    return real, imag, dtype


def _dims(ndim: int, dim: Any, sizes: Any, what: str) -> tuple[list[int], list[int | None]]:
    if dim is None:
        dims = list(range(ndim - len(sizes), ndim)) if sizes is not None else list(range(ndim))
    else:
        dims = [dim] if isinstance(dim, int) else list(dim)
    check(
        all(-ndim <= d < ndim for d in dims),
        lambda: f"{what}: dim {dim} out of range for a {ndim}-d tensor{called_at()}",
        IndexError,
    )
    dims = [d % ndim for d in dims]
    lengths: list[int | None] = [None] * len(dims) if sizes is None else list(sizes)
    check(
        len(lengths) == len(dims),
        lambda: f"{what}: s has {len(lengths)} sizes for {len(dims)} dims{called_at()}",
        RuntimeError,
    )
    return dims, lengths


def _transform(
    input: Any, dims: Sequence[int], sizes: Sequence[int | None], norm: Any, inverse: bool, what: str
) -> Any:
    real, imag, dtype = _operand(input, what)
    for d, size in zip(dims, sizes):
        real, imag = _resized(real, d, size), _resized(imag, d, size)
        n = real.shape[d]
        c, s = _matrices(n, n, dtype, real.device)
        rc, rs, ic, is_ = (_along(p, d, m) for p, m in ((real, c), (real, s), (imag, c), (imag, s)))
        if inverse:
            real, imag = sub_parts(rc, is_), add_parts(ic, rs)
        else:
            real, imag = add_parts(rc, is_), sub_parts(ic, rs)
        scale = _scale(norm, n, inverse)
        if scale != 1.0:
            real, imag = mul_parts(real, scale), mul_parts(imag, scale)
    return make(real, imag)


@register_complex("torch.fft.fft", makes_complex=True)
def fft(input: Any, n: int | None = None, dim: int = -1, norm: str | None = None) -> ComplexProxy:
    dims, sizes = _dims(input.ndim, dim, None if n is None else [n], "torch.fft.fft")
    return _transform(input, dims, sizes, norm, False, "torch.fft.fft")


@register_complex("torch.fft.ifft", makes_complex=True)
def ifft(input: Any, n: int | None = None, dim: int = -1, norm: str | None = None) -> ComplexProxy:
    dims, sizes = _dims(input.ndim, dim, None if n is None else [n], "torch.fft.ifft")
    return _transform(input, dims, sizes, norm, True, "torch.fft.ifft")


@register_complex("torch.fft.fftn", makes_complex=True)
def fftn(input: Any, s: Sequence[int] | None = None, dim: Any = None, norm: str | None = None) -> ComplexProxy:
    dims, sizes = _dims(input.ndim, dim, s, "torch.fft.fftn")
    return _transform(input, dims, sizes, norm, False, "torch.fft.fftn")


@register_complex("torch.fft.ifftn", makes_complex=True)
def ifftn(input: Any, s: Sequence[int] | None = None, dim: Any = None, norm: str | None = None) -> ComplexProxy:
    dims, sizes = _dims(input.ndim, dim, s, "torch.fft.ifftn")
    return _transform(input, dims, sizes, norm, True, "torch.fft.ifftn")


@register_complex("torch.fft.fft2", makes_complex=True)
def fft2(input: Any, s: Sequence[int] | None = None, dim: Any = (-2, -1), norm: str | None = None) -> ComplexProxy:
    return fftn(input, s, dim, norm)


@register_complex("torch.fft.ifft2", makes_complex=True)
def ifft2(input: Any, s: Sequence[int] | None = None, dim: Any = (-2, -1), norm: str | None = None) -> ComplexProxy:
    return ifftn(input, s, dim, norm)


@register_complex("torch.fft.rfft", makes_complex=True)
def rfft(input: Any, n: int | None = None, dim: int = -1, norm: str | None = None) -> ComplexProxy:
    check(
        isinstance(input, TensorProxy),
        lambda: f"torch.fft.rfft: expected a real input tensor, got {getattr(input, 'dtype', input)}{called_at()}",
        RuntimeError,
    )
    (d,), (size,) = _dims(input.ndim, dim, None if n is None else [n], "torch.fft.rfft")
    real, _, dtype = _operand(input, "torch.fft.rfft")
    real = _resized(real, d, size)
    length = real.shape[d]
    c, s = _matrices(length, length // 2 + 1, dtype, real.device)
    scale = _scale(norm, length, False)
    out_real, out_imag = _along(real, d, c), -_along(real, d, s)
    return make(mul_parts(out_real, scale), mul_parts(out_imag, scale))


@register_complex("torch.fft.irfft", makes_complex=True)
def irfft(input: Any, n: int | None = None, dim: int = -1, norm: str | None = None) -> TensorProxy:
    (d,), _ = _dims(input.ndim, dim, None, "torch.fft.irfft")
    length = n if n is not None else 2 * (input.shape[d] - 1)
    check(
        length >= 1,
        lambda: f"torch.fft.irfft: invalid number of data points ({length}) specified{called_at()}",
        RuntimeError,
    )
    real, imag, dtype = _operand(input, "torch.fft.irfft")
    half = length // 2 + 1
    real, imag = _resized(real, d, half), _resized(imag, d, half)
    # the Hermitian spectrum's other half counted through weights: 1 for the zero (and, for an even
    # length, the middle) frequency, 2 for the others; their imaginary parts never reach the output
    frequency = arange(half, device=real.device, dtype=torch.int64)
    w = (2 - (frequency == 0).to(dtype) - (frequency * 2 == length).to(dtype)).reshape([-1] + [1] * (real.ndim - 1 - d))
    c, s = _matrices(length, half, dtype, real.device)  # [length, half]: output t, frequency k
    out = _along(real * w, d, c.T)
    if imag is not None:
        out = out - _along(imag * w, d, s.T)
    return out * _scale(norm, length, True)
