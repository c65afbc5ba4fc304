"""A CPU test double of the slice of `nvfuser_direct` the executor generates code for.

It evaluates fusion definitions with torch so CPU tests can run the generated source end to end:
op names and keyword names (`start_indices=`, `broadcast_dims=`, `alias_input=`, ...), input order,
scalar inputs, write-back aliasing, descriptor checks and the compile counters. It is stricter
than nvFuser in one respect on purpose: arithmetic on bf16/fp16 tensors raises, because the
translator promises to compute those in fp32. It never stands in for nvFuser in GPU tests; the
GPU probe (scripts/nvfuser_probe.py) checks the real API.
"""

from __future__ import annotations

import os
import types
from collections.abc import Callable, Sequence
from typing import Any

import torch

from compiler.executors.nvfuser.define.translations import tensor_descriptor

DataType = types.SimpleNamespace(
    Double=torch.float64,
    Float=torch.float32,
    Half=torch.float16,
    BFloat16=torch.bfloat16,
    Int=torch.int64,
    Int32=torch.int32,
    Bool=torch.bool,
    Null=None,
)
_LOW = (torch.float16, torch.bfloat16)


def _laid_out(t: torch.Tensor, stride_order: Sequence[int]) -> torch.Tensor:
    """A copy of `t` whose strides rank its dims as `stride_order` does (larger = outer)."""
    outer_first = sorted(range(t.dim()), key=lambda d: -stride_order[d])
    dense = t.permute(outer_first).contiguous()
    return dense.permute([outer_first.index(d) for d in range(t.dim())])


class Val:
    """A value of the fusion graph: `fn(env)` computes it from the execute() inputs."""

    def __init__(
        self,
        fn: Callable[[dict], Any],
        dtype: torch.dtype | None,
        is_tensor: bool,
        index: int = -1,
        laid_out: bool = False,
    ) -> None:
        self.fn, self.dtype, self.is_tensor, self.index = fn, dtype, is_tensor, index
        self.laid_out = laid_out  # a `stride_order` result: returned in its order, not row-major


def _get(x: Any, env: dict) -> Any:
    return x.fn(env) if isinstance(x, Val) else x


def _result_dtype(args: Sequence[Any]) -> torch.dtype:
    tensors = [a for a in args if isinstance(a, Val) and a.is_tensor]
    return tensors[0].dtype


def _elementwise(fn: Callable, arithmetic: bool = True, out_dtype: torch.dtype | None = None) -> Callable:
    def op(*args: Any) -> Val:
        tensors = [a for a in args if isinstance(a, Val) and a.is_tensor]
        if not tensors:
            raise TypeError("fake nvFuser: scalar-only ops are not used by the executor")
        if arithmetic and any(t.dtype in _LOW for t in tensors):
            raise TypeError("fake nvFuser: arithmetic on a bf16/fp16 tensor (the translator must upcast)")
        if len({t.dtype for t in tensors}) > 1:
            raise TypeError(f"fake nvFuser: mixed tensor dtypes {[t.dtype for t in tensors]}")
        dtype = out_dtype or _result_dtype(args)
        return Val(lambda env: fn(*(_get(a, env) for a in args)), dtype, True)

    return op


def _div(a: Any, b: Any) -> Any:
    """nvFuser's div: true division of floats, C's truncating division of integers."""
    tensors = [x for x in (a, b) if isinstance(x, torch.Tensor)]
    if tensors and not any(x.is_floating_point() or x.is_complex() for x in tensors):
        return _like(lambda x, y: torch.div(x, y, rounding_mode="trunc"))(a, b)
    return a / b


def _like(fn: Callable) -> Callable:
    """A torch binary function that also takes a Python number first."""

    def call(a: Any, b: Any) -> Any:
        if not isinstance(a, torch.Tensor):
            a = torch.tensor(a, dtype=b.dtype, device=b.device)
        if not isinstance(b, torch.Tensor):
            b = torch.tensor(b, dtype=a.dtype, device=a.device)
        return fn(a, b)

    return call


def _reduction(fn: Callable) -> Callable:
    def op(arg: Val, dims: Sequence[int], dtype: Any = None) -> Val:
        if arg.dtype in _LOW:
            raise TypeError("fake nvFuser: reduction of a bf16/fp16 tensor (the translator must upcast)")
        out_dtype = dtype or arg.dtype

        def run(env: dict) -> Any:
            x = _get(arg, env)
            for d in sorted(dims, reverse=True):
                x = fn(x, d)
            return x.to(out_dtype)

        return Val(run, out_dtype, True)

    return op


def _cast(arg: Any, dtype: torch.dtype) -> Val:
    if isinstance(arg, Val) and not arg.is_tensor:
        python = {torch.bool: bool, torch.int64: int, torch.int32: int}.get(dtype, float)
        return Val(lambda env: python(_get(arg, env)), dtype, False)
    return Val(lambda env: _get(arg, env).to(dtype), dtype, True)


def _sizes(values: Sequence[Any], env: dict) -> list[int]:
    return [int(_get(v, env)) for v in values]


def _broadcast_in_dim(arg: Val, shape: Sequence[Any], broadcast_dims: Sequence[int]) -> Val:
    def run(env: dict) -> Any:
        x, target = _get(arg, env), _sizes(shape, env)
        view = [1] * len(target)
        for i, d in enumerate(broadcast_dims):
            view[d] = x.shape[i]
        return x.reshape(view).expand(target)

    return Val(run, arg.dtype, True)


def _slice(
    arg: Val,
    start_indices: Sequence[Any],
    end_indices: Sequence[Any],
    strides: Sequence[Any],
    manual_normalization: bool = False,
) -> Val:
    def run(env: dict) -> Any:
        bounds = zip(_sizes(start_indices, env), _sizes(end_indices, env), _sizes(strides, env))
        return _get(arg, env)[tuple(slice(s, e, st) for s, e, st in bounds)]

    return Val(run, arg.dtype, True)


def _squeeze(x: torch.Tensor, dims: Sequence[int]) -> torch.Tensor:
    # NOTE: as nvFuser's, a squeeze of a dim of another size than 1 is refused (torch's leaves it)
    wider = [d for d in dims if x.shape[d] != 1]
    if wider:
        raise RuntimeError(f"squeeze: dims {wider} of a tensor of shape {tuple(x.shape)} are not of size 1")
    return torch.squeeze(x, tuple(dims))


def _take_along_axis(a: torch.Tensor, index: torch.Tensor, dim: int) -> torch.Tensor:
    # NOTE: like nvFuser's, the index must have the input's sizes off `dim` (gather takes smaller).
    off = [d for d in range(a.ndim) if d != dim]
    if [index.shape[d] for d in off] != [a.shape[d] for d in off]:
        raise RuntimeError(f"take_along_axis: index {tuple(index.shape)} does not match {tuple(a.shape)} off dim {dim}")
    return torch.gather(a, dim, index)


def _iota(length: Any, start: Any, step: Any, dtype: torch.dtype) -> Val:
    def run(env: dict) -> Any:
        return _get(start, env) + _get(step, env) * torch.arange(int(_get(length, env)), dtype=dtype)

    return Val(run, dtype, True)


ops = types.SimpleNamespace(
    **{
        name: _elementwise(getattr(torch, name))
        for name in ("abs", "exp", "exp2", "log", "log1p", "log2", "log10", "sqrt", "rsqrt", "sin", "cos", "tan")
        + ("sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf", "erfc", "erfinv", "reciprocal", "floor", "ceil")
        + ("trunc", "sign", "bitwise_not")
    },
    neg=_elementwise(torch.neg),
    logical_not=_elementwise(torch.logical_not, arithmetic=False, out_dtype=torch.bool),
    add=_elementwise(_like(torch.add)),
    sub=_elementwise(_like(torch.sub)),
    mul=_elementwise(_like(torch.mul)),
    div=_elementwise(_div),
    remainder=_elementwise(_like(torch.remainder)),
    fmod=_elementwise(_like(torch.fmod)),
    pow=_elementwise(_like(torch.pow)),
    atan2=_elementwise(_like(torch.atan2)),
    maximum=_elementwise(_like(torch.maximum)),
    minimum=_elementwise(_like(torch.minimum)),
    bitwise_and=_elementwise(_like(torch.bitwise_and)),
    bitwise_or=_elementwise(_like(torch.bitwise_or)),
    bitwise_xor=_elementwise(_like(torch.bitwise_xor)),
    logical_and=_elementwise(_like(torch.logical_and), arithmetic=False),
    logical_or=_elementwise(_like(torch.logical_or), arithmetic=False),
    **{
        name: _elementwise(_like(getattr(torch, name)), out_dtype=torch.bool)
        for name in ("eq", "ne", "lt", "le", "gt", "ge")
    },
    where=lambda pred, a, b: Val(
        lambda env: torch.where(_get(pred, env), _get(a, env), _get(b, env)), _result_dtype([a, b]), True
    ),
    cast=lambda arg, dtype: _cast(arg, dtype),
    set=lambda arg: Val(lambda env: _get(arg, env).clone(), arg.dtype, True),
    stride_order=lambda arg, order: Val(lambda env: _laid_out(_get(arg, env), order), arg.dtype, True, laid_out=True),
    sum=_reduction(torch.sum),
    prod=_reduction(torch.prod),
    max=_reduction(torch.amax),
    min=_reduction(torch.amin),
    broadcast_in_dim=_broadcast_in_dim,
    reshape=lambda arg, new_shape: Val(lambda env: _get(arg, env).reshape(_sizes(new_shape, env)), arg.dtype, True),
    permute=lambda arg, dims: Val(lambda env: _get(arg, env).permute(list(dims)), arg.dtype, True),
    slice=_slice,
    squeeze=lambda arg, dims: Val(lambda env: _squeeze(_get(arg, env), dims), arg.dtype, True),
    cat=lambda tensors, dim: Val(lambda env: torch.cat([_get(t, env) for t in tensors], dim), tensors[0].dtype, True),
    index_select=lambda arg, index, dim: Val(
        lambda env: torch.index_select(_get(arg, env), dim, _get(index, env)), arg.dtype, True
    ),
    pad=lambda arg, pad_widths, value=None: Val(
        lambda env: torch.nn.functional.pad(_get(arg, env), _sizes(pad_widths, env), value=_get(value, env) or 0),
        arg.dtype,
        True,
    ),
    segment_set=lambda arg: Val(lambda env: _get(arg, env), arg.dtype, True),
    size=lambda arg, dim: Val(lambda env: _get(arg, env).shape[dim], torch.int64, False),
    gather=lambda arg, index, dim: Val(
        lambda env: torch.gather(_get(arg, env), dim, _get(index, env)), arg.dtype, True
    ),
    take_along_axis=lambda arg, index, dim: Val(
        lambda env: _take_along_axis(_get(arg, env), _get(index, env), dim), arg.dtype, True
    ),
    full=lambda shape, fill_value, dtype: Val(
        lambda env: torch.full(_sizes(shape, env), _get(fill_value, env), dtype=dtype), dtype, True
    ),
    iota=_iota,
    matmul=lambda a, b: Val(lambda env: torch.matmul(_get(a, env), _get(b, env)), a.dtype, True),
    linear=lambda a, w, bias=None: Val(
        lambda env: torch.nn.functional.linear(_get(a, env), _get(w, env), _get(bias, env)), a.dtype, True
    ),
)


# (enable options, $TMPDIR) of each execute, in order: what the kernel-database tests look at
executed: list[tuple[tuple[str, ...], str | None]] = []


class _Fec:
    """The executor cache that `FusionDefinition.execute` builds and then calls, as nvfuser_direct's does."""

    def __init__(self, definition: FusionDefinition) -> None:
        self.definition = definition
        self.compiled: set[tuple] = set()

    def execute(
        self, inputs: Sequence[Any], device: int | None = None, _enable_options: Any = (), _disable_options: Any = ()
    ) -> list[Any]:
        self.definition._check(inputs)
        self.compiled.add(self.key(inputs))
        executed.append((tuple(_enable_options), os.environ.get("TMPDIR")))
        env = dict(enumerate(inputs))
        results = [(value.fn(env), alias, value.laid_out) for value, alias in self.definition.outputs]
        returned = []
        for result, alias, laid_out in results:
            if alias is None:
                returned.append(result if laid_out else result.contiguous())  # nvFuser's default: row-major
            else:
                inputs[alias].copy_(result)
        return returned

    @staticmethod
    def key(inputs: Sequence[Any]) -> tuple:
        return tuple((tuple(x.shape), x.stride()) if isinstance(x, torch.Tensor) else x for x in inputs)

    def is_compiled(self, inputs: Sequence[Any]) -> bool:
        return self.key(inputs) in self.compiled

    def get_most_recent_scheduled_ir(self) -> str:
        return "fake scheduled IR"


class FusionDefinition:
    """Records inputs, ops and outputs; `execute` evaluates them with torch."""

    ops = ops

    def __enter__(self) -> FusionDefinition:
        self.inputs: list[tuple[str, Any]] = []
        self.outputs: list[tuple[Val, int | None]] = []
        return self

    def __exit__(self, *exc: Any) -> None:
        pass

    def _input(self, kind: str, meta: Any, dtype: torch.dtype, is_tensor: bool) -> Val:
        index = len(self.inputs)
        self.inputs.append((kind, meta))
        return Val(lambda env: env[index], dtype, is_tensor, index)

    def define_tensor(
        self, shape: Sequence[int], contiguity: Sequence[Any], dtype: torch.dtype, stride_order: Sequence[int] = ()
    ) -> Val:
        return self._input("tensor", (list(shape), list(contiguity), list(stride_order), dtype), dtype, True)

    def define_scalar(self, value: Any = None, dtype: torch.dtype | None = None) -> Val:
        if value is None:
            return self._input("scalar", dtype, dtype, False)
        return Val(lambda env: value, dtype, False)

    def add_output(self, value: Val, alias_input: Val | None = None) -> None:
        assert alias_input is None or alias_input.index >= 0, "fake nvFuser: alias_input must be a fusion input"
        self.outputs.append((value, None if alias_input is None else alias_input.index))

    def _check(self, args: Sequence[Any]) -> None:
        assert len(args) == len(self.inputs), f"fake nvFuser: {len(args)} arguments for {len(self.inputs)} inputs"
        for (kind, meta), arg in zip(self.inputs, args):
            if kind == "scalar":
                assert not isinstance(arg, torch.Tensor), "fake nvFuser: a tensor passed for a scalar input"
                continue
            shape, contiguity, order, dtype = meta
            assert arg.dtype == dtype, f"fake nvFuser: {arg.dtype} passed for a {dtype} input"
            assert len(shape) == arg.dim(), "fake nvFuser: rank mismatch"
            assert all(s == -1 or s == n for s, n in zip(shape, arg.shape)), "fake nvFuser: broadcast dim is not 1"
            expected = tensor_descriptor(shape, tuple(arg.shape), arg.stride())
            assert list(expected[0]) == contiguity, "fake nvFuser: contiguity mismatch"
            assert not order or list(expected[1]) == order, "fake nvFuser: stride order mismatch"

    def execute(self, inputs: Sequence[Any], device: int | None = None, _enable_options: Any = ()) -> list[Any]:
        if not hasattr(self, "fec"):
            self.fec = _Fec(self)
        return self.fec.execute(inputs, device=device, _enable_options=_enable_options)


class PythonProfiler:
    """Reports one made-up pointwise kernel per profiled execute (shape of the real profile only)."""

    def __enter__(self) -> PythonProfiler:
        return self

    def __exit__(self, *exc: Any) -> None:
        kernel = types.SimpleNamespace(
            name="fake_kernel", segment_id=0, scheduler="pointwise", time_ms=0.01, effective_bandwidth_gbs=100.0,
            grid_str="<<<1>>>", block_str="<<<128>>>", registers=32,
        )  # fmt: skip
        self.profile = types.SimpleNamespace(
            segments=1, kernel_time_ms=0.01, effective_bandwidth_gbs=100.0, kernel_profiles=[kernel]
        )


def module() -> types.ModuleType:
    """The fake as a module object (what `nvfuser_direct()` returns in tests)."""
    fake = types.ModuleType("fake_nvfuser_direct")
    fake.DataType = DataType
    fake.FusionDefinition = FusionDefinition
    fake.PythonProfiler = PythonProfiler
    fake.ops = ops
    fake.version = lambda: "fake"
    return fake
