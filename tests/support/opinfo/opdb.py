"""PyTorch's op database (`op_db`) as samples for the registered ops: which registered callables
an entry reaches, the edge cases op_db lacks, and running an entry's samples one by one.

An entry reaches its function, its Tensor method, its aliases' functions and methods, the operator
dunders of the same op (`add` → `Tensor.__add__`), and the registered callables listed in
`SAME_SAMPLES` (another name for the same op whose entry op_db lacks: `torch.swapaxes` runs
`transpose`'s samples). Samples eager PyTorch rejects are not counted.

At most `MAX_SAMPLES` samples per (entry, dtype) run, evenly spaced over op_db's list, so the whole
op_db run stays within about two minutes on two cores; the edge cases in `EDGE_SAMPLES` always run.

Samples are made on `DEVICE`: the CPU, or the device named by FUSEBENCH_OPDB_DEVICE (`cuda` runs
every sample through the default executors there, nvFuser included).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from compiler.ops import OPS
from tests.support.opinfo.samples import OpCase, Sample, method, run_sample
from tests.support.seeding import manual_seed

MAX_SAMPLES = 10
DEVICE = os.environ.get("FUSEBENCH_OPDB_DEVICE", "cpu")
# (rtol, atol) by dtype where an entry's samples are worse conditioned than the defaults allow
# (samples.TOLERANCES): op_db draws attention inputs in [-9, 9], so logits reach ~200 and a few
# float32 ulps of them, summed in another order than eager's kernel, move the weights by ~1e-4
ENTRY_TOLERANCES: dict[str, dict[torch.dtype, tuple[float, float]]] = {
    "nn.functional.scaled_dot_product_attention": {torch.float32: (2e-4, 1e-4)},
}
DTYPES = (torch.float32, torch.bfloat16, torch.int64)

# op_db entry name -> the operator dunders that are the same op (same samples, no kwargs).
DUNDERS = {
    "add": ("__add__",),
    "sub": ("__sub__",),
    "mul": ("__mul__",),
    "div": ("__truediv__",),
    "floor_divide": ("__floordiv__",),
    "remainder": ("__mod__",),
    "pow": ("__pow__",),
    "eq": ("__eq__",),
    "ne": ("__ne__",),
    "lt": ("__lt__",),
    "le": ("__le__",),
    "gt": ("__gt__",),
    "ge": ("__ge__",),
    "bitwise_and": ("__and__",),
    "bitwise_or": ("__or__",),
    "bitwise_xor": ("__xor__",),
    "bitwise_not": ("__invert__",),
    "matmul": ("__matmul__",),
}


def reaching(registered: Callable, variant: Callable) -> Callable:
    """`variant` (a wrapper that reorders op_db's arguments) marked as reaching `registered`."""
    variant.reaches = registered
    variant.__name__ = variant.__qualname__ = registered.__name__
    return variant


# op_db entry name -> registered callables that are the same op under a name op_db does not list
# (a variant whose arguments op_db orders differently says which callable it reaches).
SAME_SAMPLES: dict[str, tuple[Callable, ...]] = {
    "transpose": (torch.swapaxes, method("swapaxes")),
    "cat": (torch.concat, torch.concatenate),
    "neg": (torch.negative,),
    "abs": (torch.absolute,),
    "sub": (torch.subtract,),
    "mul": (torch.multiply,),
    "div": (torch.divide,),
    "clamp": (method("clip"),),
    "where": (torch.where,),
    # NOTE: op_db's einsum samples are (operands, equation); its op is a lambda reaching nothing
    "einsum": (reaching(torch.einsum, lambda tensors, equation: torch.einsum(equation, tensors)),),
    "nn.functional.relu": (torch.relu, method("relu")),
    "nn.functional.threshold": (torch.threshold,),
    "nn.functional.scaled_dot_product_attention": (F.scaled_dot_product_attention,),
    "nn.functional.dropout": (
        F.dropout,
        reaching(torch.dropout, lambda input, p=0.5, training=True, inplace=False: torch.dropout(input, p, training)),
    ),
    "nn.functional.pad": (torch._C._nn.pad,),
    "nn.functional.multi_head_attention_forward": (F.multi_head_attention_forward,),
    "nn.functional.embedding": (reaching(F.embedding, lambda weight, index, **kw: F.embedding(index, weight, **kw)),),
    "nn.functional.embedding_bag": (
        reaching(F.embedding_bag, lambda weight, index, **kw: F.embedding_bag(index, weight, **kw)),
    ),
}


def entry_id(info: Any) -> str:
    """'name' or 'name.variant_test_name', as op_db's own test ids."""
    return f"{info.name}.{info.variant_test_name}" if info.variant_test_name else info.name


def _registered(fn: Any) -> bool:
    try:
        return fn in OPS
    except TypeError:  # NOTE: unhashable callables (some op_db lambdas' closures) are not registered
        return False


def reached(info: Any) -> list[tuple[Callable, Any]]:
    """(variant to call, the registered callable it reaches) for this entry (see the module doc)."""
    found: dict[Any, Callable] = {}

    def add(fn: Any, variant: Callable | None = None) -> None:
        if fn is not None and _registered(fn) and fn not in found:
            found[fn] = variant or fn

    for op_info in (info, *info.aliases):
        name = op_info.name.rsplit(".", 1)[-1]
        tensor_method = getattr(torch.Tensor, name, None)
        if op_info.op is not tensor_method:
            add(op_info.op)
        if op_info.method_variant is not None:
            add(tensor_method, method(name))
    if info.variant_test_name in ("", "no_rounding_mode"):
        for dunder in DUNDERS.get(info.name, ()):
            add(getattr(torch.Tensor, dunder), method(dunder))
    for variant in SAME_SAMPLES.get(info.name, ()):
        name = getattr(variant, "__name__", "")
        registered = getattr(torch.Tensor, name.removeprefix("Tensor.")) if name.startswith("Tensor.") else variant
        add(getattr(variant, "reaches", registered), variant)
    return [(variant, fn) for fn, variant in found.items()]


def label(variant: Callable) -> str:
    """'torch.softmax', 'F.softmax', 'Tensor.softmax', ...: which callable a variant is."""
    if hasattr(variant, "reaches"):
        return label(variant.reaches)
    name = getattr(variant, "__name__", str(variant))
    for prefix, namespace in (("torch.", torch), ("F.", F), ("torch.special.", torch.special)):
        if getattr(namespace, name, None) is variant:
            return prefix + name
    return name if name.startswith("Tensor.") else f"{getattr(variant, '__module__', '?')}.{name}"


# ---------------------------------------------------------------------------------------------
# Edge cases op_db lacks


def _softmax_edges(dtype: torch.dtype, device: str) -> Iterator[Sample]:
    """Large magnitudes, rows of -inf (all or some), +inf, long rows in low precision, upcasting."""
    if not dtype.is_floating_point:
        return
    big = torch.finfo(dtype).max
    x = torch.randn(4, 9).to(dtype)
    rows = x.clone()
    rows[1] = -math.inf
    rows[2, ::2] = -math.inf
    with_inf = x.clone()
    with_inf[0, 3] = math.inf
    samples = [
        ((x * 1e4, -1), {}),
        ((torch.tensor([[big, big / 2, -big], [0.0, big, 1.0]], dtype=dtype), 1), {}),
        ((rows, -1), {}),
        ((rows.mT.contiguous(), 0), {}),
        ((with_inf, 1), {}),
        ((torch.randn(2, 4096).mul(8).to(dtype), -1), {}),
        ((torch.randn(3, 5).mul(40).to(dtype), 1), {"dtype": torch.float32}),
        ((torch.randn(3, 5).mul(40).to(dtype), 0), {"dtype": torch.bfloat16}),
        ((torch.full((2, 3), -math.inf, dtype=dtype), -1), {}),
    ]
    for (tensor, dim), kwargs in samples:
        yield Sample((tensor.to(device), dim), kwargs)


EDGE_SAMPLES: dict[str, Callable[[torch.dtype, str], Iterator[Sample]]] = {
    "softmax": _softmax_edges,
    "log_softmax": _softmax_edges,
}


# ---------------------------------------------------------------------------------------------
# Running an entry's samples


@dataclass(frozen=True)
class Outcome:
    """One (variant, sample) of an entry at a dtype: None error means it matched eager."""

    variant: str
    sample: str
    error: str | None


def op_db_samples(info: Any, device: str, dtype: torch.dtype) -> Iterator[Any]:
    """The entry's `SampleInput`s, from its sample function: `OpInfo.sample_inputs` wraps them in
    a tracker that walks the interpreter's stack with `inspect` on every call and reseeds torch
    before every sample (most of these tests' time); the caller seeds once instead."""
    return iter(info.sample_inputs_func(info, device, dtype, False))


def samples_of(info: Any, dtype: torch.dtype) -> list[Sample]:
    """op_db's samples (at most MAX_SAMPLES, evenly spaced) and the entry's edge cases."""
    manual_seed(0)
    raw = [Sample((s.input, *s.args), dict(s.kwargs)) for s in op_db_samples(info, DEVICE, dtype)]
    step = max(1, math.ceil(len(raw) / MAX_SAMPLES))
    edges = EDGE_SAMPLES.get(info.name) if not info.variant_test_name else None
    return raw[::step] + (list(edges(dtype, DEVICE)) if edges else [])


def _accepted(info: Any, dtype: torch.dtype, skip: Callable[[str, Sample], str | None]) -> Iterator[tuple]:
    """(variant, sample) for each reached variant on each sample eager accepts (and `skip` does not refuse)."""
    for sample in samples_of(info, dtype):
        if skip(info.name, sample):
            continue
        for variant, _ in reached(info):
            try:
                manual_seed(0)
                variant(*sample.args, **sample.kwargs)
            except Exception:
                continue  # eager rejects it too
            yield variant, sample


def run_entry(info: Any, dtype: torch.dtype, skip: Callable[[str, Sample], str | None]) -> list[Outcome]:
    """Each reached variant on each sample eager accepts (and `skip` does not refuse), compiled and
    compared with eager."""
    outcomes = []
    case = OpCase(entry_id(info), (), lambda make: [], tolerances=ENTRY_TOLERANCES.get(info.name, {}))
    for variant, sample in _accepted(info, dtype, skip):
        try:
            run_sample(case, variant, sample)
            outcomes.append(Outcome(label(variant), repr(sample), None))
        except Exception as error:
            message = " ".join(f"{type(error).__name__}: {error}".split())
            outcomes.append(Outcome(label(variant), repr(sample), message[:300]))
    return outcomes


def count_entry(info: Any, dtype: torch.dtype, skip: Callable[[str, Sample], str | None]) -> int:
    """How many outcomes `run_entry` gives, counted with eager alone (no compilation)."""
    return sum(1 for _ in _accepted(info, dtype, skip))
