"""An OpInfo-like harness: each op case is a set of callables and a generator of sample inputs.

`run_case` jits each variant on each sample and compares with eager PyTorch (dtype, shape and
values, with tolerances per dtype), runs `check_trace` on every trace of the entry, and runs the
printed source of the first and last traces, which must agree with eager too.

Sample generators get a `Maker` (random tensors of the dtype under test, made non-contiguous on
request by slicing or transposing) and yield `Sample`s; numbers, dims and dtypes in a sample are
baked into the jitted function, tensors (also inside lists) become its inputs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

import compiler
from compiler import prims
from compiler.core.ir import TensorProxy, Trace, map_proxies, proxies_in
from compiler.tracing.check_trace import check_trace
from compiler.tracing.frontend import leaves as leaves_of
from tests.support.seeding import manual_seed

FLOATS = (torch.float32, torch.float64, torch.bfloat16)
ALL = (*FLOATS, torch.int64)
SEEDS = (0, 1)

# (rtol, atol) by output dtype; integer and bool outputs must match exactly.
TOLERANCES = {
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1e-5, 1e-5),
    torch.float16: (1e-3, 1e-3),
    torch.bfloat16: (1.6e-2, 1e-2),
}


@dataclass(frozen=True)
class Sample:
    """Positional and keyword arguments for one call of an op."""

    args: tuple
    kwargs: dict = field(default_factory=dict)

    def __repr__(self) -> str:
        def show(v: Any) -> str:
            if isinstance(v, torch.Tensor):
                contiguity = "" if v.is_contiguous() else " non-contiguous"
                return f"{str(v.dtype).removeprefix('torch.')}{list(v.shape)}{contiguity}"
            if isinstance(v, (tuple, list)):
                items = ", ".join(show(x) for x in v)
                return f"[{items}]" if isinstance(v, list) else f"({items}{',' if len(v) == 1 else ''})"
            return repr(v)

        parts = [show(a) for a in self.args] + [f"{k}={show(v)}" for k, v in self.kwargs.items()]
        return f"({', '.join(parts)})"


@dataclass(frozen=True)
class OpCase:
    """One op: the callables that reach it, the samples, the dtypes, the tolerances."""

    name: str
    variants: tuple[Callable, ...]
    samples: Callable[[Maker], Iterable[Sample]]
    dtypes: tuple[torch.dtype, ...] = ALL
    tolerances: dict = field(default_factory=dict)
    compare_values: bool = True  # False for uninitialised memory (torch.empty*)


def named(name: str, fn: Callable) -> Callable:
    """`fn` with a readable name for failure messages."""
    fn.__name__ = fn.__qualname__ = name
    return fn


def method(name: str) -> Callable:
    """Calls `self.<name>(*args, **kwargs)`: reaches the Tensor method (or dunder) on proxies."""
    return named(f"Tensor.{name}", lambda self, *args, **kwargs: getattr(self, name)(*args, **kwargs))


class Maker:
    """Random tensors, of the dtype under test unless told otherwise."""

    def __init__(self, dtype: torch.dtype) -> None:
        self.dtype = dtype

    @property
    def is_float(self) -> bool:
        return self.dtype.is_floating_point

    def __call__(
        self,
        *shape: int,
        dtype: torch.dtype | None = None,
        low: float | None = None,
        high: float | None = None,
        noncontiguous: bool = False,
        transposed: bool = False,
        exclude_zero: bool = False,
    ) -> torch.Tensor:
        """A random tensor; `noncontiguous` slices every other element, `transposed` swaps the
        storage order of the last two dims (both give non-contiguous inputs of the same shape)."""
        dtype = dtype or self.dtype
        if dtype == torch.int64 and low is None and high is None:
            low, high = -9, 10
        stored = list(shape)
        if transposed:
            stored[-2:] = stored[-2:][::-1]
        t = torch.testing.make_tensor(
            stored,
            dtype=dtype,
            device="cpu",
            low=low,
            high=high,
            noncontiguous=noncontiguous,
            exclude_zero=exclude_zero,
        )
        return t.mT if transposed else t

    def small_values(self, *shape: int, dtype: torch.dtype | None = None, **kwargs: Any) -> torch.Tensor:
        """Integers in [-3, 3] in the dtype: ties and equalities happen often."""
        dtype = dtype or self.dtype
        return self(*shape, dtype=torch.int64, low=-3, high=4, **kwargs).to(dtype)

    def index(self, size: int, *shape: int) -> torch.Tensor:
        """A random int64 index tensor with values in [0, size)."""
        return torch.randint(0, size, shape, dtype=torch.int64)


def samples_for(case: OpCase, dtype: torch.dtype, seed: int) -> list[Sample]:
    """The case's samples for `dtype`, generated from `seed`."""
    manual_seed(seed)
    return list(case.samples(Maker(dtype)))


# ---------------------------------------------------------------------------------------------
# Tensors out of samples, and back


class _Slot:
    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index


def _split(value: Any, tensors: list[torch.Tensor]) -> Any:
    if isinstance(value, torch.Tensor):
        tensors.append(value)
        return _Slot(len(tensors) - 1)
    if isinstance(value, (tuple, list)):
        return type(value)(_split(v, tensors) for v in value)
    if isinstance(value, dict):
        return {k: _split(v, tensors) for k, v in value.items()}
    return value


def _fill(value: Any, inputs: tuple) -> Any:
    if isinstance(value, _Slot):
        return inputs[value.index]
    if isinstance(value, (tuple, list)):
        return type(value)(_fill(v, inputs) for v in value)
    if isinstance(value, dict):
        return {k: _fill(v, inputs) for k, v in value.items()}
    return value


def as_function(variant: Callable, sample: Sample) -> tuple[Callable, list[torch.Tensor]]:
    """(a function of the sample's tensors only, those tensors): the rest is baked in."""
    tensors: list[torch.Tensor] = []
    args, kwargs = _split(sample.args, tensors), _split(sample.kwargs, tensors)

    def fn(*inputs: torch.Tensor) -> Any:
        return variant(*_fill(args, inputs), **_fill(kwargs, inputs))

    fn.__name__ = getattr(variant, "__name__", "fn")
    return fn, tensors


# ---------------------------------------------------------------------------------------------
# Comparing with eager


def leaves(value: Any) -> list[Any]:
    """The tensors and numbers of a (nested tuple / list) output, in order."""
    if isinstance(value, (tuple, list)):
        return [leaf for v in value for leaf in leaves(v)]
    return [value]


def assert_matches(actual: Any, expected: Any, case: OpCase, compare_values: bool = True) -> None:
    """Same structure, dtypes and shapes; values within the case's tolerance for the dtype."""
    got, want = leaves(actual), leaves(expected)
    assert len(got) == len(want), f"{len(got)} outputs, eager gives {len(want)}"
    for i, (a, e) in enumerate(zip(got, want)):
        if not isinstance(e, torch.Tensor):
            assert a == e or (isinstance(e, float) and math.isnan(e) and math.isnan(a)), f"output {i}: {a} != {e}"
            continue
        assert isinstance(a, torch.Tensor), f"output {i} is {type(a).__name__}, eager gives a tensor"
        assert a.dtype == e.dtype, f"output {i} has dtype {a.dtype}, eager gives {e.dtype}"
        assert a.shape == e.shape, f"output {i} has shape {tuple(a.shape)}, eager gives {tuple(e.shape)}"
        if not compare_values:
            continue
        rtol, atol = case.tolerances.get(e.dtype, TOLERANCES.get(e.dtype, (0.0, 0.0)))
        torch.testing.assert_close(a, e, rtol=rtol, atol=atol, equal_nan=True, msg=lambda m, i=i: f"output {i}: {m}")


def check_metadata(trace: Trace, inputs: list[torch.Tensor]) -> None:
    """Evaluates the prims of `trace` (ops replaced by their decompositions) one by one; every
    tensor a prim computes must have the dtype and shape its meta function promised (so a meta
    that disagrees with the executor fails here)."""
    env = {p.name: value for p, value in zip(trace.inputs, inputs)}
    for bsym in leaves_of(trace.bsyms):
        args = map_proxies(bsym.args, lambda p: env[p.name])
        output = prims.evaluate(bsym.sym, args)
        values = output if isinstance(bsym.output, (tuple, list)) else [output]
        for proxy, value in zip(proxies_in(bsym.output), values):
            env[proxy.name] = value
            if isinstance(proxy, TensorProxy):
                where = f"prims.{bsym.sym.value} ({proxy.name})"
                assert value.dtype == proxy.dtype, f"{where} computes {value.dtype}, its meta says {proxy.dtype}"
                assert tuple(value.shape) == tuple(proxy.shape), (
                    f"{where} computes shape {tuple(value.shape)}, its meta says {tuple(proxy.shape)}"
                )


def run_sample(case: OpCase, variant: Callable, sample: Sample, *, inspect: bool = True) -> None:
    """Jitted vs eager; with `inspect`, also check_trace on every trace, the metadata of every prim
    against its value, and the printed first and last traces run and agree with eager (each call
    seeded alike, so random ops draw the same numbers)."""
    fn, tensors = as_function(variant, sample)
    manual_seed(0)  # NOTE: before every call: random ops (dropout) must draw alike
    expected = fn(*tensors)
    jfn = compiler.jit(fn)
    manual_seed(0)
    assert_matches(jfn(*tensors), expected, case, case.compare_values)
    if not inspect:
        return
    traces = compiler.last_traces(jfn)
    for trace in traces:
        check_trace(trace)
    manual_seed(0)
    check_metadata(traces[0], tensors)
    for trace in (traces[0], traces[-1]):
        manual_seed(0)
        assert_matches(trace.python()(*tensors), expected, case, case.compare_values)


def run_case(case: OpCase, dtype: torch.dtype) -> int:
    """Runs every variant on every sample for each seed; returns how many calls were checked. The
    traces are inspected (`run_sample`'s `inspect`) for the first seed's samples: another seed draws
    other values of the same shapes, which trace alike."""
    checked = 0
    for seed in SEEDS:
        for i, sample in enumerate(samples_for(case, dtype, seed)):
            for variant in case.variants:
                try:
                    run_sample(case, variant, sample, inspect=seed == SEEDS[0])
                except Exception as error:
                    where = f"{case.name}: {variant.__name__}{sample!r} [{dtype}, seed {seed}, sample {i}]"
                    raise AssertionError(f"{where}: {type(error).__name__}: {error}") from error
                checked += 1
    return checked


def iter_calls(cases: Iterable[OpCase]) -> Iterator[tuple[OpCase, Callable, Sample]]:
    """Every (case, variant, sample) over every dtype, for the first seed (the coverage test)."""
    for case in cases:
        for dtype in case.dtypes:
            for sample in samples_for(case, dtype, SEEDS[0]):
                for variant in case.variants:
                    yield case, variant, sample
