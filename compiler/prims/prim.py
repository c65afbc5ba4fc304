"""The `Prim` enum, the prim categories, and what each prim means on Python numbers.

Prims are the contract between the ops layer, the passes and the executors. They do no
broadcasting and no type promotion: elementwise prims take tensors of one shape and dtype (and
Python numbers or NumberProxy scalars); the ops layer inserts `broadcast_in_dim` and
`convert_element_type` to get there. Shapes, dims and perms are passed canonicalised
(non-negative dims, full shapes).
"""

from __future__ import annotations

import builtins
import enum
import math
import operator
from collections.abc import Callable
from typing import Any


class Prim(enum.Enum):
    """Every primitive operation; the value is the name printed in traces (`prims.<value>`)."""

    # elementwise unary
    NEG = "neg"
    ABS = "abs"
    EXP = "exp"
    EXP2 = "exp2"
    LOG = "log"
    LOG1P = "log1p"
    LOG2 = "log2"
    LOG10 = "log10"
    SQRT = "sqrt"
    RSQRT = "rsqrt"
    SIN = "sin"
    COS = "cos"
    TAN = "tan"
    SINH = "sinh"
    COSH = "cosh"
    TANH = "tanh"
    ASINH = "asinh"
    ACOSH = "acosh"
    ATANH = "atanh"
    ERF = "erf"
    ERFC = "erfc"
    ERFINV = "erfinv"
    RECIPROCAL = "reciprocal"
    FLOOR = "floor"
    CEIL = "ceil"
    TRUNC = "trunc"
    SIGN = "sign"
    BITWISE_NOT = "bitwise_not"
    # elementwise binary
    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    DIV = "div"
    FLOOR_DIVIDE = "floor_divide"
    REMAINDER = "remainder"
    FMOD = "fmod"
    POW = "pow"
    ATAN2 = "atan2"  # (y, x): the angle of the point (x, y), as torch.atan2(input=y, other=x)
    MAXIMUM = "maximum"
    MINIMUM = "minimum"
    EQ = "eq"
    NE = "ne"
    LT = "lt"
    LE = "le"
    GT = "gt"
    GE = "ge"
    BITWISE_AND = "bitwise_and"
    BITWISE_OR = "bitwise_or"
    BITWISE_XOR = "bitwise_xor"
    # elementwise ternary and conversion
    WHERE = "where"
    CONVERT_ELEMENT_TYPE = "convert_element_type"
    # reductions
    SUM = "sum"
    PROD = "prod"
    AMAX = "amax"
    AMIN = "amin"
    ARGMAX = "argmax"
    # scans
    CUMSUM = "cumsum"  # (a, dim, reverse): running sums along dim, from its end when reverse
    CUMPROD = "cumprod"  # (a, dim): running products along dim
    # orderings: int64 indices along a dim (the values are a take_along_dim of them)
    ARGSORT = "argsort"  # (a, dim, descending, stable): torch.sort's indices
    TOPK = "topk"  # (a, k, dim, largest, sorted): torch.topk's indices
    # shapes
    BROADCAST_IN_DIM = "broadcast_in_dim"
    RESHAPE = "reshape"
    PERMUTE = "permute"
    SLICE = "slice"
    SQUEEZE = "squeeze"
    CAT = "cat"
    # `stop_gradient(x)` is x (a view of it, as eager's detach), through which no gradient flows
    STOP_GRADIENT = "stop_gradient"
    # `updated_without_grad(value, old)` is `value`, the new contents of a tensor written where
    # autograd does not record (under `torch.no_grad()`, or through a detached alias), whose
    # gradient goes to `old`, its contents before: eager's tensor keeps its autograd history
    UPDATED_WITHOUT_GRAD = "updated_without_grad"
    # `overwritten(value, old)` is `value`, written over a tensor's contents `old` where autograd
    # records: the tensor keeps carrying a gradient (zero for `old`, as eager's copy_ gives it)
    # even when `value` depends on nothing that requires grad (`zero_()`, `fill_()`)
    OVERWRITTEN = "overwritten"
    # indexing
    INDEX_SELECT = "index_select"
    INDEX_COPY = "index_copy"
    INDEX_ADD = "index_add"
    TAKE_ALONG_DIM = "take_along_dim"
    # scatters along a dim (gather's inverse); index and src share one shape, of a's rank
    SCATTER = "scatter"  # (a, dim, index, src): torch.scatter, src written into a copy of a
    # (a, dim, index, src, reduce, include_self): torch.scatter_reduce, reduce in "sum", "prod",
    # "mean", "amax", "amin"
    SCATTER_REDUCE = "scatter_reduce"
    # linear algebra and attention
    MATMUL = "matmul"
    LINEAR = "linear"
    SDPA = "sdpa"
    # (a, b, offs): one matmul per group of a dim, groups ending at the int32 offsets `offs` (a
    # mixture of experts' layers, torch._grouped_mm): a [rows, k] @ b [groups, k, n] -> [rows, n],
    # each row by its group's matrix; or a [k, rows] @ b [rows, n] -> [groups, k, n], each group's
    # rows summed over (the weights' gradient)
    GROUPED_MM = "grouped_mm"
    # attention on a differentiable path: (out, logsumexp), the softmax statistics its backward reads
    SDPA_FORWARD = "sdpa_forward"
    # attention's backward: (dq, dk, dv) from the output's cotangent, sdpa's arguments, out and logsumexp
    SDPA_BACKWARD = "sdpa_backward"
    # (a, weight, bias, stride, padding, dilation, groups): torch's convolution over a's trailing
    # len(stride) dims, a [batch, channels, *spatial], weight [out, channels // groups, *kernel],
    # bias [out] or None; padding is zeros, the same on both sides of each dim
    CONVOLUTION = "convolution"
    # (grad, a, weight, stride, padding, dilation, groups, output_mask): the cotangents of
    # convolution's (a, weight, bias) where output_mask (three bools) says so, in that order
    CONVOLUTION_BACKWARD = "convolution_backward"
    # (a, weight, bias, stride, padding, dilation, groups, output_padding): torch's transposed
    # convolution (aten.convolution with transposed=True, what torch.conv_transpose1d/2d/3d run),
    # a [batch, in, *spatial], weight [in, out // groups, *kernel], bias [out] or None, added inside
    # the kernel; output_padding (below max(stride, dilation)) adds positions at each dim's end
    CONVOLUTION_TRANSPOSE = "convolution_transpose"
    # (a, device): a copy of a on another device (Tensor.to(device); eager's move of a 0-d CPU
    # operand or a CPU index to the device of the tensors it is used with)
    DEVICE_PUT = "device_put"
    # factories
    FULL = "full"
    EMPTY = "empty"
    IOTA = "iota"
    # random: `dropout_noise(shape, p, dtype, device)` draws from torch's default generator
    DROPOUT_NOISE = "dropout_noise"
    # random: `random_values(shape, distribution, dtype, device)`, "normal" (torch.randn),
    # "uniform" (torch.rand) or "exponential" (Tensor.exponential_, rate 1) values drawn from
    # torch's default generator
    RANDOM_VALUES = "random_values"
    # a copy of a tensor with a strided region replaced (the functional form of writing a slice)
    SLICE_UPDATE = "slice_update"
    # in-place: `copy_(target, value)` overwrites `target`, seen through every alias of it. Only
    # traces straight from the frontend hold it; functionalization removes it.
    COPY_ = "copy_"
    # in-place write-back of a computed value into a buffer the caller can observe
    COPY_TO = "copy_to"
    # prologue: unpacking arguments and guards
    UNPACK_SEQUENCE = "unpack_sequence"
    UNPACK_DICT = "unpack_dict"
    # `size(t, dim)`: a tensor argument's size along `dim`, where the computation takes it as a
    # symbolic size (automatic dynamic); `check_tensor` holds None there
    SIZE = "size"
    CHECK_TENSOR = "check_tensor"
    CHECK_TYPE = "check_type"
    CHECK_VALUE = "check_value"
    CHECK_STRIDES = "check_strides"
    CHECK_ALIASING = "check_aliasing"
    # which tensor inputs take part in autograd (requires_grad under grad mode)
    CHECK_REQUIRES_GRAD = "check_requires_grad"
    # the autocast state the trace was made under (ops/autocast.py: `state()`)
    CHECK_AUTOCAST = "check_autocast"

    # NOTE: members are singletons, so identity is their equality; hashing by identity (a C slot)
    # instead of Enum's Python-level hash of the name halves every lookup in the tables and
    # categories keyed by Prim, which the passes do for each line of a trace.
    __hash__ = object.__hash__


UNARY = frozenset(
    {Prim.NEG, Prim.ABS, Prim.EXP, Prim.EXP2, Prim.LOG, Prim.LOG1P, Prim.LOG2, Prim.LOG10, Prim.SQRT, Prim.RSQRT,
     Prim.SIN, Prim.COS, Prim.TAN, Prim.SINH, Prim.COSH, Prim.TANH, Prim.ASINH, Prim.ACOSH, Prim.ATANH, Prim.ERF,
     Prim.ERFC, Prim.ERFINV, Prim.RECIPROCAL, Prim.FLOOR, Prim.CEIL, Prim.TRUNC, Prim.SIGN, Prim.BITWISE_NOT}
)  # fmt: skip
COMPARISONS = frozenset({Prim.EQ, Prim.NE, Prim.LT, Prim.LE, Prim.GT, Prim.GE})
BINARY = frozenset(
    {Prim.ADD, Prim.SUB, Prim.MUL, Prim.DIV, Prim.FLOOR_DIVIDE, Prim.REMAINDER, Prim.FMOD, Prim.POW,
     Prim.ATAN2, Prim.MAXIMUM, Prim.MINIMUM, Prim.BITWISE_AND, Prim.BITWISE_OR, Prim.BITWISE_XOR}
) | COMPARISONS  # fmt: skip
ELEMENTWISE = UNARY | BINARY | {Prim.WHERE, Prim.CONVERT_ELEMENT_TYPE}
# Prims whose result jumps where an operand crosses a value its dtype can hold (an equality, a
# threshold, an integer, a multiple). A fusion that holds bf16/fp16 values in fp32 between ops
# (nvFuser's translation, Inductor) must give these the operand rounded to its dtype, as eager
# computes it: a max's backward (`x == max(x)`) otherwise finds no maximum where its forward did.
EXACT_OPERANDS = COMPARISONS | {Prim.FLOOR, Prim.CEIL, Prim.TRUNC, Prim.SIGN, Prim.REMAINDER, Prim.FMOD}
REDUCTIONS = frozenset({Prim.SUM, Prim.PROD, Prim.AMAX, Prim.AMIN, Prim.ARGMAX})
SCANS = frozenset({Prim.CUMSUM, Prim.CUMPROD})
ORDERINGS = frozenset({Prim.ARGSORT, Prim.TOPK})
# Prims whose result rounding decides: those above, and those that pick among their operand's
# values by comparing them. A value a fusion returns rounded is read rounded by the ops on the way
# to one of these, as a backward recomputing from the returned value reads it.
ROUNDING_DECIDES = EXACT_OPERANDS | {Prim.AMAX, Prim.AMIN, Prim.ARGMAX} | ORDERINGS
SHAPE_OPS = frozenset({Prim.BROADCAST_IN_DIM, Prim.RESHAPE, Prim.PERMUTE, Prim.SLICE, Prim.SQUEEZE, Prim.CAT})
# Shape ops torch makes without a kernel where the operand's layout allows (views); a cat always copies.
VIEW_SHAPE_OPS = SHAPE_OPS - {Prim.CAT}
# Shape ops that change an extent (nvFuser hands a fusion holding one to its resize scheduler).
RESIZES = frozenset({Prim.CAT, Prim.SLICE})
GATHERS = frozenset({Prim.INDEX_SELECT, Prim.TAKE_ALONG_DIM})
# Functional updates: a copy of the first operand with some of its positions written or accumulated into.
UPDATES = frozenset({Prim.INDEX_COPY, Prim.INDEX_ADD, Prim.SLICE_UPDATE, Prim.SCATTER, Prim.SCATTER_REDUCE})
LINALG = frozenset({Prim.MATMUL, Prim.LINEAR})
ATTENTION = frozenset({Prim.SDPA, Prim.SDPA_FORWARD, Prim.SDPA_BACKWARD})
# Prims torch runs with library kernels of their own (cuDNN's convolutions, grouped GEMMs).
LIBRARY = frozenset({Prim.CONVOLUTION, Prim.CONVOLUTION_BACKWARD, Prim.CONVOLUTION_TRANSPOSE, Prim.GROUPED_MM})
FACTORIES = frozenset({Prim.FULL, Prim.EMPTY, Prim.IOTA, Prim.DROPOUT_NOISE, Prim.RANDOM_VALUES})
# Prims whose every call draws new random numbers: never merged, never recomputed, kept in order.
RANDOM = frozenset({Prim.DROPOUT_NOISE, Prim.RANDOM_VALUES})
DISTRIBUTIONS = ("normal", "uniform", "exponential")  # of prims.random_values: randn's, rand's, exponential_'s
SCATTER_REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")  # prims.scatter_reduce's `reduce`
GUARDS = frozenset(
    {Prim.CHECK_TENSOR, Prim.CHECK_TYPE, Prim.CHECK_VALUE, Prim.CHECK_STRIDES, Prim.CHECK_ALIASING,
     Prim.CHECK_REQUIRES_GRAD, Prim.CHECK_AUTOCAST}
)  # fmt: skip
PROLOGUE_ONLY = GUARDS | {Prim.UNPACK_SEQUENCE, Prim.UNPACK_DICT, Prim.SIZE}
# The IR's aliasing rule: the output of a view prim aliases its first argument (writing into one
# changes the other); every other prim returns a fresh tensor. passes/functionalize.py relies on
# it, and the tracer (compiler/ops/aliasing.py) keeps it true to eager PyTorch.
VIEWS = frozenset(
    {Prim.SLICE, Prim.RESHAPE, Prim.PERMUTE, Prim.SQUEEZE, Prim.BROADCAST_IN_DIM, Prim.STOP_GRADIENT,
     Prim.UPDATED_WITHOUT_GRAD, Prim.OVERWRITTEN}
)  # fmt: skip
# Prims that only tell autodiff how gradients flow (their value is their first argument); gone
# from a trace once autodiff has read it (passes/stop_gradient.py)
GRADIENT_MARKERS = frozenset({Prim.STOP_GRADIENT, Prim.UPDATED_WITHOUT_GRAD, Prim.OVERWRITTEN})
# Prims that mutate their arguments; none survives functionalization.
INPLACE = frozenset({Prim.COPY_})
# Prims kept by dead-code elimination even when nothing reads their outputs (unpacking checks
# the length or keys of what it unpacks).
SIDE_EFFECTS = set(PROLOGUE_ONLY) | INPLACE | {Prim.COPY_TO}
# Each prim's kind: these groups partition Prim (tests/compiler/prims/test_tables.py checks it), so a
# new prim is first given a kind, and then each table keyed by its kind's prims fails its test until
# it covers the new prim or names it among the prims it leaves out.
KINDS: dict[str, frozenset[Prim]] = {
    "elementwise": ELEMENTWISE,
    "reduction": REDUCTIONS,
    "scan": SCANS,
    "ordering": ORDERINGS,
    "shape": SHAPE_OPS,
    "gradient stop": GRADIENT_MARKERS,
    "gather": GATHERS,
    "update": UPDATES,
    "linear algebra": LINALG,
    "attention": ATTENTION,
    "library kernel": LIBRARY,
    "transfer": frozenset({Prim.DEVICE_PUT}),
    "factory": FACTORIES,
    "write": INPLACE | {Prim.COPY_TO},
    "prologue": PROLOGUE_ONLY,
}


def _sign(x: Any) -> Any:
    return x if x != x else (x > 0) - (x < 0)  # NaN stays NaN


def _erfinv(x: Any) -> float:
    # NOTE: Python's math has no erfinv; torch's float64 kernel gives the value eager gives a 0-d tensor.
    import torch

    return torch.erfinv(torch.tensor(float(x), dtype=torch.float64)).item()


def _fmod(a: Any, b: Any) -> Any:
    return math.fmod(a, b) if isinstance(a, float) or isinstance(b, float) else int(math.fmod(a, b))


# What each prim means on Python numbers: folds constants and gives NumberProxy values.
NUMBER_IMPLS: dict[Prim, Callable] = {
    Prim.NEG: operator.neg,
    Prim.ABS: builtins.abs,
    Prim.EXP: math.exp,
    Prim.EXP2: lambda x: 2.0**x,
    Prim.LOG: math.log,
    Prim.LOG1P: math.log1p,
    Prim.LOG2: math.log2,
    Prim.LOG10: math.log10,
    Prim.SQRT: math.sqrt,
    Prim.RSQRT: lambda x: 1 / math.sqrt(x),
    Prim.SIN: math.sin,
    Prim.COS: math.cos,
    Prim.TAN: math.tan,
    Prim.SINH: math.sinh,
    Prim.COSH: math.cosh,
    Prim.TANH: math.tanh,
    Prim.ASINH: math.asinh,
    Prim.ACOSH: math.acosh,
    Prim.ATANH: math.atanh,
    Prim.ERF: math.erf,
    Prim.ERFC: math.erfc,
    Prim.ERFINV: _erfinv,
    Prim.RECIPROCAL: lambda x: 1 / x,
    Prim.FLOOR: math.floor,
    Prim.CEIL: math.ceil,
    Prim.TRUNC: math.trunc,
    Prim.SIGN: _sign,
    Prim.BITWISE_NOT: operator.invert,
    Prim.ADD: operator.add,
    Prim.SUB: operator.sub,
    Prim.MUL: operator.mul,
    Prim.DIV: operator.truediv,
    Prim.FLOOR_DIVIDE: operator.floordiv,
    Prim.REMAINDER: operator.mod,
    Prim.FMOD: _fmod,
    Prim.POW: operator.pow,
    Prim.ATAN2: math.atan2,
    Prim.MAXIMUM: builtins.max,
    Prim.MINIMUM: builtins.min,
    Prim.EQ: operator.eq,
    Prim.NE: operator.ne,
    Prim.LT: operator.lt,
    Prim.LE: operator.le,
    Prim.GT: operator.gt,
    Prim.GE: operator.ge,
    Prim.BITWISE_AND: operator.and_,
    Prim.BITWISE_OR: operator.or_,
    Prim.BITWISE_XOR: operator.xor,
    Prim.WHERE: lambda c, a, b: a if c else b,
    Prim.CONVERT_ELEMENT_TYPE: lambda x, t: t(x),
}
