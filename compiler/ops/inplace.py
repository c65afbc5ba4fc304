"""In-place torch ops: `add_` and friends, `zero_`/`fill_`/`copy_`, `index_copy_`/`index_add_`,
`__setitem__`, the in-place operators (`+=`, ...), and the write behind `out=` arguments.

Each in-place op is recorded as the functional op it updates with (a nested op bound symbol, so
traces show `t = torch.Tensor.add(x, y)`) followed by `prims.copy_(x, t)`, which overwrites `x`
and every view of it. `passes/functionalize.py` turns those writes into pure updates plus
write-backs. Checks follow eager: the result must already have the target's shape (in-place ops
never resize) and a dtype that casts to the target's (`torch.can_cast`); `copy_`, `fill_` and
`__setitem__` broadcast and cast freely.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from compiler import prims
from compiler.core.errors import called_at, check
from compiler.core.ir import NumberProxy, Symbol, TensorProxy
from compiler.ops import advanced_indexing, aliasing
from compiler.ops.indexing import _as_1d, _check_index
from compiler.ops.operands import canonical_dim, insert_dim, to_dtype
from compiler.ops.registry import OPS, RESOLVERS, Op, dispatch, register
from compiler.ops.shape import getitem
from compiler.ops.writes import same_shape, write

# ---------------------------------------------------------------------------------------------
# x.op_(...) == x.copy_(x.op(...)) with eager's checks


def apply_in_place(functional: Callable, self: TensorProxy, args: tuple, kwargs: dict, what: str) -> TensorProxy:
    """Overwrites `self` (and every view of it) with `functional(self, *args, **kwargs)`; returns `self`.

    The write behind every `x.op_(...)`, `torch.op_(x, ...)` and activation `inplace=True`, with
    eager's checks (named `what` in errors): no argument overlaps `self`, the result keeps `self`'s
    shape and casts to its dtype.
    """
    aliasing.check_no_overlap(self, (*args, *kwargs.values()), what)
    return write(self, dispatch(functional, (self, *args), kwargs), what)


def _register_inplace(names: list[str], functional: Callable, what: str) -> None:
    @register(*names)
    def op(self: TensorProxy, *args: Any, **kwargs: Any) -> TensorProxy:
        return apply_in_place(functional, self, args, kwargs, what)

    op.__name__ = what.rsplit(".", 1)[-1]


def _inplace(name: str, functional: Callable, *, function: bool = False, dunders: tuple[str, ...] = ()) -> None:
    names = [f"torch.Tensor.{name}_", *(f"torch.Tensor.{d}" for d in dunders)]
    if function:
        names.append(f"torch.{name}_")
    _register_inplace(names, functional, f"torch.Tensor.{name}_")


for _name, _dunders in (
    ("add", ("__iadd__",)),
    ("sub", ("__isub__",)),
    ("mul", ("__imul__",)),
    ("div", ("__itruediv__",)),
    ("pow", ("__ipow__",)),
    ("floor_divide", ("__ifloordiv__",)),
    ("remainder", ("__imod__",)),
    ("bitwise_and", ("__iand__",)),
    ("bitwise_or", ("__ior__",)),
    ("bitwise_xor", ("__ixor__",)),
    ("fmod", ()),
    ("addcmul", ()),
    ("addcdiv", ()),
    ("lerp", ()),
    ("masked_fill", ()),
    ("index_copy", ()),
    ("index_fill", ()),
    ("tril", ()),
    ("triu", ()),
    ("cumsum", ()),
    ("cumprod", ()),
    ("scatter", ()),
    ("scatter_add", ()),
    ("scatter_reduce", ()),
    ("addmm", ()),
    ("addmv", ()),
    ("addr", ()),
    ("baddbmm", ()),
    ("renorm", ()),
    ("index_reduce", ()),
):
    _inplace(_name, getattr(torch.Tensor, _name), dunders=_dunders)

for _name in (
    "clamp", "clamp_min", "clamp_max", "sqrt", "rsqrt", "neg", "exp", "exp2", "expm1", "log", "log1p", "abs",
    "relu", "sigmoid", "tanh", "sin", "cos", "erf", "reciprocal", "floor", "ceil", "trunc", "logit", "xlogy",
    "acos", "asin", "atan", "arccos", "arcsin", "arctan", "square", "log2", "log10", "tan", "sinh", "cosh", "asinh",
    "acosh", "atanh", "arcsinh", "arccosh", "arctanh", "erfc",
):  # fmt: skip
    _inplace(_name, getattr(torch.Tensor, _name), function=True)

for _name in ("atan2", "arctan2", "hypot", "erfinv", "heaviside", "sinc", "sign", "sgn"):
    _inplace(_name, getattr(torch.Tensor, _name))

# ---------------------------------------------------------------------------------------------
# x.name_(...) of any registered x.name(...)

# NOTE: in-place methods that change what a tensor is (shape, strides, storage, names, autograd
# state) or fill it with what is not its functional twin's result (`bernoulli_(p)` draws with
# probability p, `x.bernoulli()` with probabilities x): never the functional twin written back.
_NOT_TWINS = frozenset(
    {"t_", "transpose_", "swapaxes_", "swapdims_", "squeeze_", "unsqueeze_", "resize_", "resize_as_",
     "resize_as_sparse_", "sparse_resize_", "sparse_resize_and_clear_", "as_strided_", "set_", "detach_",
     "requires_grad_", "share_memory_", "retain_grad", "rename_", "names_", "bernoulli_", "random_", "uniform_",
     "normal_", "cauchy_", "exponential_", "geometric_", "log_normal_", "apply_", "map_", "map2_",
     "fill_diagonal_", "record_stream"}
)  # fmt: skip


def in_place_twin(fn: Any) -> Op | None:
    """The Op for an unregistered in-place Tensor method `torch.Tensor.name_` whose out-of-place
    `torch.Tensor.name` is registered (`gt_`, `logical_not_`, `nan_to_num_`, ...): that op written
    into the tensor with eager's checks (`apply_in_place`). None for any other callable, and for
    the methods that change metadata rather than values (`_NOT_TWINS`: `unsqueeze_`, `t_`, ...)."""
    name = getattr(fn, "__name__", None)
    if not isinstance(name, str) or not name.endswith("_") or name.startswith("_") or name in _NOT_TWINS:
        return None
    if getattr(torch.Tensor, name, None) is not fn:
        return None
    functional = getattr(torch.Tensor, name[:-1], None)
    if functional is None or functional not in OPS:
        return None
    return _twin_op(name, functional)


@functools.cache
def _twin_op(name: str, functional: Callable) -> Op:
    what = f"torch.Tensor.{name}"

    def op(self: TensorProxy, *args: Any, **kwargs: Any) -> TensorProxy:
        return apply_in_place(functional, self, args, kwargs, what)

    op.__name__ = name
    return Op(what, op, Symbol(what))


RESOLVERS.append(in_place_twin)

# The in-place spellings of activations that have no Tensor method (F.relu_ is torch.relu_, above;
# F.selu_ is torch.selu_, F.celu_ torch.celu_, F.threshold_ torch.threshold_).
for _spelling, _functional in (
    ("torch.selu_", F.selu),
    ("torch.celu_", F.celu),
    ("torch.nn.functional.elu_", F.elu),
    ("torch.nn.functional.leaky_relu_", F.leaky_relu),
    ("torch.threshold_", F.threshold),
):
    _register_inplace([_spelling], _functional, _spelling)


@register("torch.Tensor.float_power_")
def float_power_(self: TensorProxy, exponent: Any) -> TensorProxy:
    # NOTE: eager refuses a base that is not float64 (the result's dtype), where other ops cast
    check(
        self.dtype == torch.float64,
        lambda: f"the base given to float_power_ has dtype {self.dtype} but the result requires float64{called_at()}",
        RuntimeError,
    )
    return apply_in_place(torch.Tensor.float_power, self, (exponent,), {}, "torch.Tensor.float_power_")


@register("torch.nn.functional.hardtanh_")
def hardtanh_(self: TensorProxy, min_val: Any = -1.0, max_val: Any = 1.0) -> TensorProxy:
    # NOTE: unlike F.hardtanh, eager's hardtanh_ takes min_val > max_val and clamps: every value
    # becomes max_val (with a zero gradient), which is hardtanh between max_val and max_val.
    low = max_val if min_val > max_val else min_val
    return apply_in_place(F.hardtanh, self, (low, max_val), {}, "torch.nn.functional.hardtanh_")


@register("torch.Tensor.zero_", "torch.zero_")
def zero_(self: TensorProxy) -> TensorProxy:
    return write(self, 0, "torch.Tensor.zero_")


@register("torch.Tensor.fill_", "torch.fill_")
def fill_(self: TensorProxy, value: Any) -> TensorProxy:
    if isinstance(value, TensorProxy):
        check(
            value.ndim == 0,
            lambda: f"fill_ only supports 0-dimension value tensors, got {value.ndim} dimensions{called_at()}",
            RuntimeError,
        )
    return write(self, value, "torch.Tensor.fill_", broadcast=True, any_cast=True)


@register("torch.Tensor.copy_")
def copy_(self: TensorProxy, src: Any, non_blocking: bool = False) -> TensorProxy:
    aliasing.check_no_overlap(self, (src,), "torch.Tensor.copy_")
    return write(self, src, "torch.Tensor.copy_", broadcast=True, any_cast=True)


@register("torch.Tensor.index_add_")
def index_add_(self: TensorProxy, dim: int, index: TensorProxy, source: TensorProxy, *, alpha: Any = 1) -> TensorProxy:
    aliasing.check_no_overlap(self, (source,), "torch.Tensor.index_add_")
    result = dispatch(torch.Tensor.index_add, (self, dim, index, source), {"alpha": alpha})
    return write(self, result, "torch.Tensor.index_add_")


# NOTE: functional index_add lives here, next to index_add_, until ops/indexing.py wants it.
@register("torch.index_add", "torch.Tensor.index_add")
def index_add(
    input: TensorProxy, dim: int, index: TensorProxy, source: TensorProxy, *, alpha: Any = 1, out: Any = None
) -> Any:
    _check_index("index_add", index)
    d = canonical_dim(dim, input.ndim)
    check(
        isinstance(source, TensorProxy) and source.dtype == input.dtype,
        lambda: f"index_add: source must be a tensor of the input's dtype {input.dtype}{called_at()}",
        TypeError,
    )
    if index.ndim == 0 and source.ndim == input.ndim - 1:
        source = insert_dim(source, d)
    if not (type(alpha) in (int, float) and alpha == 1):
        source = prims.mul(source, to_dtype(alpha, input.dtype) if isinstance(alpha, NumberProxy) else alpha)
    if input.ndim == 0:
        flat = prims.index_add(prims.reshape(input, [1]), 0, _as_1d(index), prims.reshape(source, [index.numel()]))
        return prims.reshape(flat, [])
    return prims.index_add(input, d, _as_1d(index), source)


# NOTE: clone lives here, as the copy that in-place code reaches for, until another module wants it.
@register("torch.clone", "torch.Tensor.clone")
def clone(input: TensorProxy, *, memory_format: Any = None) -> TensorProxy:
    out = aliasing.fresh_copy(input)
    if memory_format not in (None, torch.preserve_format):
        aliasing.set_memory_format(out, input, memory_format)
    return out


# ---------------------------------------------------------------------------------------------
# x[key] = value


@register("torch.Tensor.__setitem__")
def setitem(self: TensorProxy, key: Any, value: Any) -> None:
    what = "torch.Tensor.__setitem__"
    items = key if isinstance(key, tuple) else (key,)
    if isinstance(key, TensorProxy) and key.dtype == torch.bool:
        _setitem_mask(self, key, value, what)
        return None
    if not any(advanced_indexing._is_advanced(k) for k in items):
        target = getitem(self, key)
        aliasing.check_no_overlap(target, (value,), what)
        write(target, value, what, broadcast=True, any_cast=True)
        return None
    # NOTE: eager writes through the basic view, then index_put_s into it.
    base, advanced = advanced_indexing.split_key(self, key)
    source = to_dtype(value, base.dtype) if isinstance(value, TensorProxy) else value
    write(base, advanced_indexing.put_advanced(base, advanced, source, accumulate=False), what)
    return None


def _setitem_mask(self: TensorProxy, key: TensorProxy, value: Any, what: str) -> None:
    check(
        same_shape(key.shape, self.shape) and (not isinstance(value, TensorProxy) or value.ndim == 0),
        lambda: (
            f"{what}: a bool mask key must have the tensor's shape and the value must be a scalar (other masks "
            f"write a number of elements that depends on the mask's values); use torch.where(mask, value, x)"
            f"{called_at()}"
        ),
        NotImplementedError,
    )
    write(self, dispatch(torch.Tensor.masked_fill, (self, key, value), {}), what, any_cast=True)


@register("torch.Tensor.index_put_", "torch.index_put_")
def index_put_(self: TensorProxy, indices: Any, values: Any, accumulate: bool = False) -> TensorProxy:
    aliasing.check_no_overlap(self, (values,), "torch.Tensor.index_put_")
    result = dispatch(torch.Tensor.index_put, (self, indices, values), {"accumulate": accumulate})
    return write(self, result, "torch.Tensor.index_put_")
