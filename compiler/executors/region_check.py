"""The first call of a region's compiled function, checked against the region's prims run by torch.

A compiler can generate code that computes something else than the region it was given (Inductor
on CPU has done so for the backward of ConvNeXt's channels-last layer norm, its input permuted
twice). Such a region is caught on its first call: the region's prims run through
torch on copies of the inputs, the compiled function on the inputs themselves, and every floating
output (and every written input) must be within `RELATIVE_ERROR` of torch's
norm-wise (or `ABSOLUTE_RMS` in root mean square), integer and bool ones equal, infinities and
NaNs in the same places. Where they are not, the written inputs get their values from before the
call back and `WrongValues` is raised: the caller falls back (its region runs with torch from
then on, with a warning) or, with `fallback=False`, raises it.

Not checked: regions that draw random numbers (a compiled dropout draws other numbers than
torch's), regions reading or computing bfloat16 or float16 values (a compiled region computes in
float32 between ops where torch rounds after each prim, which moves even its float32 results
legitimately), and calls whose tensor inputs hold more than `MAX_COPIED_BYTES` (the check copies
them all).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from compiler.core.executor import Region
from compiler.core.ir import TensorProxy
from compiler.prims import RANDOM

RELATIVE_ERROR = 1e-3  # ||compiled - torch|| / ||torch||, for float32 and float64 values
ABSOLUTE_RMS = 1e-5  # below this root-mean-square difference values agree (torch's may be exact zeros)
MAX_COPIED_BYTES = 256 << 20
_CHECKED_DTYPES = (torch.float32, torch.float64)


class WrongValues(RuntimeError):
    """A compiled region computed values that its prims run by torch do not."""


def checkable(region: Region) -> bool:
    """Whether first calls of `region` are checked: it draws no random numbers, and every floating
    tensor it reads or computes is float32 or float64."""
    if any(b.sym in RANDOM for b in region.bsyms):
        return False
    tensors = [p for p in region.inputs if isinstance(p, TensorProxy)]
    tensors += [p for b in region.bsyms for p in b.outputs if isinstance(p, TensorProxy)]
    return all(p.dtype in _CHECKED_DTYPES for p in tensors if p.dtype.is_floating_point or p.dtype.is_complex)


def checked_call(
    compiled: Callable[..., Any], reference: Callable[..., Any], args: tuple, written: Sequence[int]
) -> Any:
    """`compiled(*args)`, checked against `reference(*copies of args)` (see the module); raises
    `WrongValues` naming the first output (or written input) that differs, after restoring the
    written inputs to their values before the call."""
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    if sum(t.numel() * t.element_size() for t in tensors) > MAX_COPIED_BYTES:
        return compiled(*args)
    copies = tuple(a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args)
    before = {i: args[i].detach().clone() for i in written}
    expected = reference(*copies)
    outputs = compiled(*args)
    got, wanted = _as_tuple(outputs), _as_tuple(expected)
    pairs = [(f"output {k}", g, w) for k, (g, w) in enumerate(zip(got, wanted))]
    pairs += [(f"written input {i}", args[i], copies[i]) for i in written]
    for where, value, reference_value in pairs:
        problem = _difference(value, reference_value)
        if problem is not None:
            with torch.no_grad():
                for i, saved in before.items():
                    args[i].copy_(saved)
            raise WrongValues(f"its compiled code's {where} differs from its prims run by torch: {problem}")
    return outputs


def _as_tuple(values: Any) -> tuple:
    return tuple(values) if isinstance(values, (tuple, list)) else (values,)


def _difference(value: Any, expected: Any) -> str | None:
    """What differs between a compiled value and torch's, or None where they agree (see the module)."""
    if not isinstance(expected, torch.Tensor) or not isinstance(value, torch.Tensor):
        return None
    if value.shape != expected.shape or value.dtype != expected.dtype:
        return f"{value.dtype} {list(value.shape)} where torch gives {expected.dtype} {list(expected.shape)}"
    if not (value.is_floating_point() or value.is_complex()):
        return None if torch.equal(value, expected) else "integer values differ"
    if value.dtype not in _CHECKED_DTYPES:
        return None
    value, expected = value.detach().double(), expected.detach().double()
    finite = torch.isfinite(expected)
    if not torch.equal(finite, torch.isfinite(value)) or not torch.equal(
        value[~finite].nan_to_num(), expected[~finite].nan_to_num()
    ):
        return "infinities or NaNs in other places"
    error = (value[finite] - expected[finite]).norm().item()
    scale = expected[finite].norm().item()
    if error <= max(RELATIVE_ERROR * scale, ABSOLUTE_RMS * int(finite.sum()) ** 0.5):
        return None
    return f"relative error {error / scale if scale else float('inf'):.3g} (norm-wise; at most {RELATIVE_ERROR:g})"
