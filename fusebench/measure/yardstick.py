"""Eager's own error as the yardstick where a case's tolerance is tighter than eager can meet.

A case's tolerance is fixed per dtype, but a model brought as it comes (many layers of random
weights in bf16, ALiBi biases, long reductions) can drift from the float64 reference more than
that tolerance allows: eager itself then fails the element-wise check, and so would every correct
compiler. When a variant fails the element-wise check, the harness runs eager once on the same
inputs (per prepared case, cached) and asks whether eager fails it too:

- eager meets the tolerance: the variant's failure stands (a compiler must be as close as eager);
- eager misses it as well: the tolerance does not fit this model here, and the variant passes when
  every floating-point result's root-mean-square error against the reference is at most
  `RMS_MULTIPLIER` times eager's (as PyTorch's own accuracy checks judge a compiled model against
  a float64 reference with eager's error as the scale). A wrong op, a wrong layer or shifted
  logits raise the RMS error far past that; a NaN where the reference has none fails.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from fusebench.measure.correctness import Mismatch, Tolerance, compare
from fusebench.measure.snapshot import iter_leaves, map_tensors

RMS_MULTIPLIER = 2.0


@dataclass(frozen=True)
class EagerYardstick:
    """What eager made of the case's inputs: whether it meets the tolerance, and its RMS error
    against the reference per result leaf (outputs, then mutated arguments)."""

    meets_tolerance: bool
    rms: dict[str, float]


def rms_errors(expected: Any, actual: Any, label: str) -> dict[str, float]:
    """Root-mean-square error of every floating-point tensor leaf of `actual` against `expected`
    (trees of the same structure), keyed by the leaf's path; NaN where `actual` has a NaN the
    reference does not."""
    errors = {}
    for (path, want), (_, got) in zip(iter_leaves(expected, label), iter_leaves(actual, label)):
        if not (isinstance(want, torch.Tensor) and isinstance(got, torch.Tensor)):
            continue
        if not (want.is_floating_point() or got.is_floating_point()) or want.numel() == 0:
            continue
        want64 = want.detach().to(device=got.device, dtype=torch.float64)
        got64 = got.detach().to(torch.float64)
        both_nan = torch.isnan(want64) & torch.isnan(got64)
        difference = torch.where(both_nan, torch.zeros_like(got64), got64 - want64)
        errors[path] = float(difference.square().mean().sqrt())
    return errors


def measure_eager(
    run_eager: Callable[[], Any],
    mutated: Callable[[], dict[int, Any]],
    expected_output: Any,
    expected_mutated: dict[int, Any],
    tolerance: Tolerance,
    rows_may_differ: float,
) -> EagerYardstick:
    """Runs eager once (`run_eager()` on the case's pristine inputs; `mutated()` then gives the
    arguments it updated) and measures it against the reference."""
    output = map_tensors(lambda t: t.detach().clone(), run_eager())
    after = mutated()
    mismatch = compare(expected_output, output, tolerance, "output", rows_may_differ)
    rms = rms_errors(expected_output, output, "output")
    for index, want in expected_mutated.items():
        label = f"argument {index}"
        mismatch = mismatch or compare(want, after[index], tolerance, label, rows_may_differ)
        rms.update(rms_errors(want, after[index], label))
    return EagerYardstick(mismatch is None, rms)


def judge(mismatch: Mismatch, variant_rms: dict[str, float], eager: EagerYardstick) -> str | None:
    """None when a variant that failed the element-wise check (`mismatch`) passes by eager's
    yardstick; otherwise the reason it fails, naming the leaf and both errors where they decide."""
    if eager.meets_tolerance or not math.isfinite(mismatch.max_abs_error):
        return mismatch.message
    for path, error in variant_rms.items():
        scale = eager.rms.get(path)
        if scale is None:
            continue
        if not math.isfinite(error) or error > RMS_MULTIPLIER * scale:
            return (
                f"{mismatch.message}; eager misses that tolerance too, but {path}'s RMS error {error:.3g} "
                f"is more than {RMS_MULTIPLIER:g}x eager's {scale:.3g}"
            )
    return None
