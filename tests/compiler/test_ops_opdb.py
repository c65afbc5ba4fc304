"""PyTorch's own op database as extra samples: every registered op that `op_db` describes runs its
`sample_inputs` (edge shapes, broadcasting, scalars, kwargs) through `opinfo.run_sample`.

Samples eager PyTorch rejects are dropped; samples this compiler does not support by design are
dropped by `_unsupported`, which says why. Everything else must match eager.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from compiler.ops import OPS
from tests.compiler.opinfo import ALL, OpCase, Sample, method, run_sample

op_db = pytest.importorskip("torch.testing._internal.common_methods_invocations").op_db

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

# Names whose samples cannot be compared value for value, or reach no registered callable.
EXCLUDED = {
    "empty": "uninitialised memory (shape and dtype are checked in test_ops)",
    "empty_like": "uninitialised memory (shape and dtype are checked in test_ops)",
    "__rdiv__": "Tensor.__rdiv__ is a legacy alias that proxies do not expose; / reaches __rtruediv__",
    "nn.functional.pad.reflect": "only constant padding is supported",
    "nn.functional.pad.replicate": "only constant padding is supported",
    "nn.functional.pad.replicate_negative": "only constant padding is supported",
    "nn.functional.pad.circular": "only constant padding is supported",
    **{
        name: "a result shape that depends on values: refused with a message (test_indexing.py)"
        for name in ("masked_select", "nonzero", "argwhere", "unique", "unique_consecutive", "nonzero_static")
    },
}


def _variants(info: Any) -> list[Callable]:
    """The registered callables an op_db entry reaches: its function and its Tensor method."""
    variants = []
    method_name = info.name.rsplit(".", 1)[-1]
    tensor_method = getattr(torch.Tensor, method_name, None)
    if info.op in OPS and info.op is not tensor_method:
        variants.append(info.op)
    if info.method_variant is not None and tensor_method in OPS:
        variants.append(method(method_name))
    return variants


def _has_mask(key: Any) -> bool:
    if isinstance(key, (tuple, list)):
        return any(_has_mask(k) for k in key)
    return isinstance(key, bool) or (isinstance(key, torch.Tensor) and key.dtype == torch.bool)


def _unsupported(name: str, sample: Sample) -> str | None:
    """Why this compiler rejects the sample by design, or None."""
    if name in ("__getitem__", "index_put") and _has_mask(sample.args[1]):
        return "a bool mask index gives a shape that depends on values (refused with a message)"
    if name == "gather" and sample.args[2].numel() == 0 and sample.args[2].ndim != max(sample.args[0].ndim, 1):
        return "an empty index of another rank than the input (torch skips its checks when empty)"
    repeats = sample.kwargs.get("repeats", sample.args[1] if len(sample.args) > 1 else None)
    if name == "repeat_interleave" and isinstance(repeats, torch.Tensor):
        return "a tensor of repeats gives an output shape that depends on tensor values"
    return None


ENTRIES = [
    info
    for info in op_db
    if info.name not in EXCLUDED and f"{info.name}.{info.variant_test_name}" not in EXCLUDED and _variants(info)
]
PARAMS = [
    pytest.param(info, dtype, id=f"{info.name}{'.' + info.variant_test_name if info.variant_test_name else ''}-{dtype}")
    for info in ENTRIES
    for dtype in ALL
    if dtype in info.supported_dtypes("cpu")
]


@pytest.mark.parametrize(("info", "dtype"), PARAMS)
def test_op_db_samples_match_eager(info: Any, dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    case = OpCase(info.name, (), lambda make: [])
    checked = 0
    for raw in info.sample_inputs("cpu", dtype):
        sample = Sample((raw.input, *raw.args), dict(raw.kwargs))
        if _unsupported(info.name, sample):
            continue
        for variant in _variants(info):
            try:
                variant(*sample.args, **sample.kwargs)
            except Exception:
                continue  # eager rejects it too
            try:
                run_sample(case, variant, sample)
            except Exception as error:
                where = f"{info.name}: {getattr(variant, '__name__', variant)}{sample!r} [{dtype}]"
                raise AssertionError(f"{where}: {type(error).__name__}: {error}") from error
            checked += 1
    assert checked > 0, f"no sample of {info.name} for {dtype} ran: the entry should be excluded"


def test_op_db_reaches_many_registered_ops() -> None:
    reached = {fn for info in ENTRIES for fn in OPS if fn is info.op or fn is getattr(torch.Tensor, info.name, None)}
    assert len(reached) >= 100, f"op_db reaches only {len(reached)} registered callables"
