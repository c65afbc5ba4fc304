"""Other spellings of registered ops: `Tensor.multiply`, `torch.fix`, `torch.special.softmax`,
`torch.linalg.matmul`, ... run the decomposition of the op they name (registered here under
each spelling, so traces and errors show the name the program wrote), and the few spellings
whose signature differs: `torch.linalg.diagonal` (dims -2 and -1 by default), `torch.linalg.vecdot`
and `Tensor.sum_to_size`. Their in-place forms (`Tensor.multiply_`, `Tensor.fix_`, ...) are the
generic in-place twins of ops/inplace.py; `torch.negative_` and `torch.fix_` are registered here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from compiler.core import dtypes
from compiler.core.errors import called_at, check
from compiler.core.ir import TensorProxy, same_size
from compiler.ops import elementwise, linalg, nn, numeric_compositions, reductions, shape_compositions  # noqa: F401
from compiler.ops.inplace import apply_in_place
from compiler.ops.operands import check_no_out
from compiler.ops.registry import COMPLEX_OPS, OPS, register, register_complex

# the op a spelling names -> its other spellings
_SPELLINGS: dict[Any, tuple[str, ...]] = {
    torch.mul: ("torch.Tensor.multiply",),
    torch.sub: ("torch.Tensor.subtract",),
    torch.div: ("torch.Tensor.divide",),
    torch.neg: ("torch.Tensor.negative",),
    torch.abs: ("torch.Tensor.absolute",),
    torch.trunc: ("torch.fix", "torch.Tensor.fix"),
    torch.softmax: ("torch.special.softmax",),
    torch.log_softmax: ("torch.special.log_softmax",),
    torch.logsumexp: ("torch.special.logsumexp",),
    torch.matmul: ("torch.linalg.matmul",),
}
for _fn, _names in _SPELLINGS.items():
    register(*_names)(OPS[_fn].impl)
register_complex("torch.Tensor.negative")(COMPLEX_OPS[torch.neg].impl)

for _spelling, _functional in (("torch.negative_", torch.neg), ("torch.fix_", torch.trunc)):

    def _in_place(self: TensorProxy, *, _functional: Any = _functional, _what: str = _spelling) -> TensorProxy:
        return apply_in_place(_functional, self, (), {}, _what)

    register(_spelling)(_in_place)


@register("torch.special.round")
def special_round(input: TensorProxy, *, decimals: int = 0, out: Any = None) -> TensorProxy:
    """torch.special.round: torch.round of float tensors (eager has no kernel of it for integers and bools)."""
    check(
        dtypes.is_float(input.dtype),
        lambda: f'torch.special.round: "round" is not implemented for {input.dtype}{called_at()}',
        NotImplementedError,
    )
    return numeric_compositions.round(input, decimals=decimals, out=out)


@register("torch.linalg.diagonal")
def linalg_diagonal(A: TensorProxy, *, offset: int = 0, dim1: int = -2, dim2: int = -1) -> TensorProxy:
    """torch.linalg.diagonal: torch.diagonal with keyword-only arguments, of the last two dims by default."""
    return torch.diagonal(A, offset, dim1, dim2)


@register("torch.linalg.vecdot")
def vecdot(x: TensorProxy, y: TensorProxy, *, dim: int = -1, out: Any = None) -> TensorProxy:
    """torch.linalg.vecdot of real tensors: (x * y).sum(dim), the operands broadcast (conj is the identity)."""
    check_no_out("torch.linalg.vecdot", out)
    check(
        isinstance(x, TensorProxy) and isinstance(y, TensorProxy),
        lambda: f"linalg.vecdot: expected two tensors{called_at()}",
        TypeError,
    )
    check(
        dtypes.is_float(x.dtype),
        lambda: f"linalg.vecdot: Expected a floating point or complex tensor as input. Got {x.dtype}{called_at()}",
        RuntimeError,
    )
    check(
        x.dtype == y.dtype,
        lambda: (
            f"linalg.vecdot: Expected x and y to have the same dtype, but found x of type {x.dtype} "
            f"and y of type {y.dtype} instead{called_at()}"
        ),
        RuntimeError,
    )
    return torch.sum(x * y, dim)


@register("torch.Tensor.sum_to_size")
def sum_to_size(input: TensorProxy, *size: Any) -> TensorProxy:
    """Tensor.sum_to_size: `input` summed over its leading dims and the dims where `size` is 1, to
    `size` (which must expand to the input's shape); the input itself where it already has that size."""
    shape: Sequence = size[0] if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)) else size
    lead = input.ndim - len(shape)
    expandable = lead >= 0 and all(
        same_size(s, 1) or same_size(s, n) for s, n in zip(shape, input.shape[lead:], strict=True)
    )
    check(
        expandable,
        lambda: f"size {list(shape)} is not expandable to size {list(input.shape)}{called_at()}",
        RuntimeError,
    )
    dims = [*range(lead)] + [
        lead + i for i, s in enumerate(shape) if same_size(s, 1) and not same_size(input.shape[lead + i], 1)
    ]
    if not dims:
        return input
    summed = torch.sum(input, dims, keepdim=True)
    return summed.reshape(list(shape)) if lead else summed
