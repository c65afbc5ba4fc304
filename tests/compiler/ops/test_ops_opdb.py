"""PyTorch's own op database as samples for every registered op it describes, at float32, bfloat16
and int64 where the entry supports them (`opinfo_opdb.py`: which callables an entry reaches, the
softmax/log_softmax edge cases op_db lacks, the per-entry sample cap).

Each (variant, sample) is jitted and compared with eager (`opinfo.run_sample`). A failure fails its
test unless `KNOWN_FAILURES` lists it with its reason; `test_op_db_pass_rate` prints the share of
samples that match eager and requires at least 99% (it runs the entries KNOWN_FAILURES names and
counts the others' samples: their own tests require every one to match). Registered callables op_db
has no samples for are covered elsewhere: `test_every_registered_op_is_reached_or_covered_elsewhere`
says where.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from compiler.ops import OPS
from tests.support.opinfo.opdb import DEVICE, DTYPES, Outcome, count_entry, entry_id, reached, run_entry
from tests.support.opinfo.samples import Sample

op_db = pytest.importorskip("torch.testing._internal.common_methods_invocations").op_db

pytestmark = [pytest.mark.filterwarnings("ignore::UserWarning")]
if DEVICE != "cpu":
    pytestmark.append(pytest.mark.gpu)  # NOTE: FUSEBENCH_OPDB_DEVICE=cuda, on the GPU machine

# Entries whose samples cannot be compared value for value, or that would only repeat another's.
EXCLUDED = {
    "empty": "uninitialised memory (shape and dtype are checked in test_ops)",
    "empty_like": "uninitialised memory (shape and dtype are checked in test_ops)",
    "new_empty": "uninitialised memory (shape and dtype are checked in test_ops)",
    "__rdiv__": "Tensor.__rdiv__ is a legacy alias that proxies do not expose; / reaches __rtruediv__",
    "bmm.triton_optimized": "bmm's samples at sizes tuned for Triton (half a minute on CPU); `bmm` runs the op",
    **{
        name: "a result shape that depends on values: refused with a message (test_indexing.py)"
        for name in ("masked_select", "nonzero", "argwhere", "unique", "unique_consecutive", "nonzero_static")
    },
    "as_strided": "every sample but one (both entries) passes an explicit storage_offset, counted from the start "
    "of the argument's storage, which the trace does not know (the prologue guards shapes and strides, not where a "
    "tensor starts in its storage; partial_views' inputs start at element 5): refused with a message. "
    "test_as_strided.py compares reads over contiguous tensors, windows, overlaps, offsets on tensors the program "
    "made, and their gradients",
    "bincount": "a length of max(input) + 1: refused without minlength, and op_db's minlength is below its values "
    "(opinfo_cumulative.py in test_ops.py, test_cumulative.py checks the refusal)",
    **{
        f"nn.functional.interpolate.{mode}": "refused (NotImplementedError): the compiler resizes with the nearest "
        "and linear modes (test_op_errors.py checks the message)"
        for mode in ("bicubic", "area", "trilinear")
    },
}

# (entry id, variant name, a part of the sample's repr) -> why those samples do not match eager, at
# every dtype. Every other (variant, sample) must match; test_op_db_pass_rate requires 99% to.
KNOWN_FAILURES: dict[tuple[str, str, str], str] = {
    ("nn.functional.instance_norm", "F.instance_norm", "bfloat16["): (
        "eager's CPU bfloat16 kernel rounds its normalisation otherwise: an output near zero differs by up to "
        "two bfloat16 steps (0.0156), over atol 0.01 (float32 matches; test_torch_compositions.py)"
    ),
    ("nn.functional.embedding", "F.embedding", "max_norm="): (
        "max_norm renormalises rows of the weight in place during the lookup: refused (NotImplementedError)"
    ),
    **{
        ("nn.functional.embedding", "F.embedding", flag): (
            "scale_grad_by_freq and sparse change only the backward, which the compiler's autodiff does not "
            "model: refused (NotImplementedError) rather than silently giving other gradients"
        )
        for flag in ("scale_grad_by_freq=True", "sparse=True")
    },
    **{
        ("kthvalue", variant, "int64["): (
            "integer samples have ties: which of the tied elements' index eager reports is unspecified (its CPU "
            "kernel's quickselect order); the values match"
        )
        for variant in ("torch.kthvalue", "Tensor.kthvalue")
    },
    ("nn.functional.embedding_bag", "F.embedding_bag", "max_norm="): (
        "max_norm renormalises rows of the weight in place during the lookup: refused (NotImplementedError; "
        "test_embedding_bag.py)"
    ),
    **{
        ("nn.functional.embedding_bag", "F.embedding_bag", flag): (
            "scale_grad_by_freq and sparse change only the backward, which the compiler's autodiff does not "
            "model: refused (NotImplementedError; test_embedding_bag.py) rather than silently giving other gradients"
        )
        for flag in ("scale_grad_by_freq=True", "sparse=True")
    },
    ("nn.functional.one_hot", "F.one_hot", "num_classes=-1"): (
        "num_classes=-1 takes the largest index + 1: a shape that depends on values, refused (NotImplementedError)"
    ),
    **{
        ("norm.nuc", variant, "'nuc'"): "the nuclear norm (a matrix norm) is refused (NotImplementedError)"
        for variant in ("torch.norm", "Tensor.norm")
    },
    **{
        ("linalg.matrix_norm", "torch._C._linalg.linalg_matrix_norm", part): (
            "the nuclear and spectral norms need singular values: refused (NotImplementedError; test_norms.py)"
        )
        for part in ("'nuc'", ", 2, (", ", -2, (")
    },
    ("linalg.norm.subgradients_at_zero", "torch._C._linalg.linalg_norm", ", 2, keepdim"): (
        "the spectral norm (ord=2 over two dims) needs singular values: refused (NotImplementedError)"
    ),
    **{
        ("histc", variant, "max=0)"): (
            "min == max takes the bounds from the data's own min and max, values the trace does not have: refused "
            "(NotImplementedError)"
        )
        for variant in ("torch.histc", "Tensor.histc")
    },
    **{
        ("nn.functional.batch_norm", "F.batch_norm", f"{dtype}[0], {dtype}[0], {dtype}[0]"): (
            "a 1-d input has no channel dim (dim 1): refused (ValueError)"
        )
        for dtype in ("float32", "bfloat16")
    },
    **{
        (entry, f"{prefix}.{entry}", "bfloat16["): reason
        for entry, reason in (
            (
                "baddbmm",
                "bfloat16: the batched product is rounded to bfloat16 before beta * input is added (a bf16 "
                "matmul, then the sum in float32), where eager's CPU kernel adds inside its float32 "
                "accumulation and rounds once: one value in 250 was 2 ulps off",
            ),
            (
                "addbmm",
                "bfloat16: one matmul over all batches with float32 accumulation, as eager on CUDA does; "
                "eager's CPU kernel adds the batches one by one and rounds to bfloat16 after each",
            ),
            (
                "addr",
                "bfloat16: the outer product and the scaled sum in float32, rounded once; eager's CPU kernel "
                "rounds its steps to bfloat16: up to 2 ulps apart",
            ),
        )
        for prefix in ("torch", "Tensor")
    },
}
if DEVICE != "cpu":
    KNOWN_FAILURES[
        ("nn.functional.scaled_dot_product_attention", "F.scaled_dot_product_attention", "dropout_p=0.5")
    ] = "on CUDA eager attention runs fused kernels that draw dropout from their own random stream"
    _broadcast_query = "float32[4, 3, 8], float32[4, 4"
    KNOWN_FAILURES[
        ("nn.functional.scaled_dot_product_attention", "F.scaled_dot_product_attention", _broadcast_query)
    ] = (
        "a 3-d query against 4-d keys: eager and the compiled call (the query broadcast to 4-d) reach different "
        "CUDA attention kernels; on an H100 one of 384 float32 values differed by 3e-5 (tolerance 1e-5)"
    )
    KNOWN_FAILURES[("nn.functional.cross_entropy", "F.cross_entropy", "weight=bfloat16[3], reduction='mean'")] = (
        "class probabilities with weights in bfloat16: eager on CUDA rounds log_softmax, the products and the sum "
        "to bfloat16 one by one, the compiler computes in float32 and rounds once (H100: -2.953 vs -3.016)"
    )

# Registered callables no op_db entry reaches: the test that covers each family instead.
ELSEWHERE = {
    "in-place": "test_inplace_opdb.py (op_db's inplace variants) and test_inplace_ops.py",
    "_foreach_": "op_db has no foreach entries (torch keeps them apart): opinfo_foreach.py in test_ops.py",
    "value-dependent shape": "test_indexing.py (refused with a message suggesting torch.where)",
    "no op_db entry": "opinfo_*.py in test_ops.py",
    "another device": "test_devices.py (copies to a GPU, checked on CUDA)",
}
NO_OP_DB_ENTRY = {
    "__rdiv__",
    "__rfloordiv__",
    "type",
    "is_complex",
    "is_floating_point",
    "detach",
    "empty",
    "empty_like",
    "new_empty",
    "copy_",
    "__setitem__",
    "type_as",
    # NOTE: op_db's entries call these through a wrapper that seeds torch, which reaches no op
    "randn",
    "randn_like",
    "rand",
    "rand_like",
    # NOTE: op_db has no entries for these (torch.tensor's data is no tensor sample): opinfo_zoo.py
    "tensor",
    "as_tensor",
    "_grouped_mm",
    "_weight_norm",
    # NOTE: layout questions, not ops with samples: opinfo_shape_compositions.py
    "is_contiguous",
    "stride",
    "cpu",  # opinfo_numeric_compositions.py
    # NOTE: op_db's shift entries call torch.bitwise_*_shift, never the operators: opinfo_elementwise.py
    "__lshift__",
    "__rshift__",
    "new_tensor",  # opinfo_models.py
    # NOTE: op_db has no entries for these: opinfo/torch_compositions.py
    "dropout1d",
    "dropout2d",
    "dropout3d",
    # NOTE: op_db's entries call these through a wrapper that seeds torch (they draw in training):
    # test_stochastic_layers.py
    "rrelu",
    "alpha_dropout",
    "feature_alpha_dropout",
    "gumbel_softmax",
    "native_channel_shuffle",  # test_torch_compositions.py
    "fold",  # NOTE: op_db has no entry for F.fold (nn.Fold's col2im): test_fold.py
    # NOTE: the _with_indices forms, which op_db's entries do not call: opinfo_pooling.py
    *(f"max_pool{n}d_with_indices" for n in (1, 2, 3)),
    "affine_grid",  # NOTE: op_db has no entry for it: test_grid_sample.py
}
# torch's own builtins of ops op_db reaches through torch.nn.functional (same names): opinfo_pooling.py;
# Tensor.hardshrink, whose function op_db reaches: opinfo/torch_compositions.py; Tensor.prelu, whose function
# op_db reaches: test_activations.py
NO_OP_DB_ENTRY_BUILTINS = {
    torch.max_pool1d,
    torch.max_pool2d,
    torch.max_pool3d,
    torch.Tensor.hardshrink,
    torch.Tensor.prelu,
    torch.bernoulli,  # NOTE: op_db reaches one of the two spellings (through a seeding wrapper): test_bernoulli.py
    torch.Tensor.bernoulli,
}


def _has_mask(key: Any) -> bool:
    if isinstance(key, (tuple, list)):
        return any(_has_mask(k) for k in key)
    return isinstance(key, bool) or (isinstance(key, torch.Tensor) and key.dtype == torch.bool)


def _on_cpu(value: Any) -> bool:
    if isinstance(value, (tuple, list)):
        return any(map(_on_cpu, value))
    if isinstance(value, dict):
        return any(map(_on_cpu, value.values()))
    return isinstance(value, torch.Tensor) and value.device.type == "cpu"


def _unsupported(name: str, sample: Sample) -> str | None:
    """Why this compiler rejects the sample by design, or None."""
    if DEVICE != "cpu" and _on_cpu((sample.args, sample.kwargs)):
        return (
            "a CPU tensor (a 0-d operand, an index, a start) among CUDA tensors: elementwise ops, where and "
            "indexing move it to the GPU as eager does (test_devices.py); op_db's other samples of the kind "
            "are not run here"
        )
    if name in ("__getitem__", "index_put") and _has_mask(sample.args[1]):
        return "a bool mask index gives a shape that depends on values (refused with a message)"
    if name == "gather" and sample.args[2].numel() == 0 and sample.args[2].ndim != max(sample.args[0].ndim, 1):
        return "an empty index of another rank than the input (torch skips its checks when empty)"
    repeats = sample.kwargs.get("repeats", sample.args[1] if len(sample.args) > 1 else None)
    if name == "repeat_interleave" and isinstance(repeats, torch.Tensor):
        return "a tensor of repeats gives an output shape that depends on tensor values"
    if name == "tensor_split" and len(sample.args) > 1 and isinstance(sample.args[1], torch.Tensor):
        return "indices given as a tensor give pieces whose sizes depend on its values (refused with a message)"
    return None


ENTRIES = [info for info in op_db if entry_id(info) not in EXCLUDED and info.name not in EXCLUDED and reached(info)]
PARAMS = [
    pytest.param(info, dtype, id=f"{entry_id(info)}-{str(dtype).removeprefix('torch.')}")
    for info in ENTRIES
    for dtype in DTYPES
    if dtype in info.supported_dtypes(DEVICE)
]


_RUN: dict[tuple[int, torch.dtype], list[Outcome]] = {}


def _outcomes(info: Any, dtype: torch.dtype) -> list[Outcome]:
    """The entry's outcomes at `dtype`, run once per session (the pass rate reuses them)."""
    key = (id(info), dtype)
    if key not in _RUN:
        _RUN[key] = run_entry(info, dtype, _unsupported)
    return _RUN[key]


def _known(info: Any, outcome: Outcome) -> str | None:
    """The reason KNOWN_FAILURES gives for this failure, or None."""
    for (entry, variant, part), reason in KNOWN_FAILURES.items():
        if entry == entry_id(info) and variant == outcome.variant and part in outcome.sample:
            return reason
    return None


@pytest.mark.parametrize(("info", "dtype"), PARAMS)
def test_op_db_samples_match_eager(info: Any, dtype: torch.dtype) -> None:
    outcomes = _outcomes(info, dtype)
    assert outcomes, f"no sample of {entry_id(info)} for {dtype} ran: the entry should be excluded"
    failures = [o for o in outcomes if o.error is not None and not _known(info, o)]
    assert not failures, "\n".join(f"{entry_id(info)}: {o.variant}{o.sample} [{dtype}]: {o.error}" for o in failures)


def test_op_db_pass_rate(capsys: pytest.CaptureFixture) -> None:
    # NOTE: the entries KNOWN_FAILURES names are run whole; every other entry's outcomes are counted
    # with eager alone: its own test above requires each of them to match eager (running them all
    # again here took one pytest-xdist worker most of the time the entries' own tests take)
    known = {entry for entry, _, _ in KNOWN_FAILURES}
    total = failed = 0
    for param in PARAMS:
        info, dtype = param.values
        if entry_id(info) in known:
            outcomes = _outcomes(info, dtype)
            total += len(outcomes)
            failed += sum(o.error is not None for o in outcomes)
        else:
            total += count_entry(info, dtype, _unsupported)
    rate = (total - failed) / total
    with capsys.disabled():  # NOTE: printed in every run, as the headline of these tests
        print(f"\nop_db on {DEVICE}: {total - failed} of {total} samples match eager ({100 * rate:.2f}%)")
    assert rate >= 0.99, f"only {100 * rate:.2f}% of op_db samples match eager"


def _family(fn: Any) -> str | None:
    name = getattr(fn, "__name__", "")
    if name.startswith("_foreach_"):
        return "_foreach_"
    if (name.endswith("_") and not name.endswith("__")) or name.startswith("__i"):
        return "in-place"
    if name in EXCLUDED or name in ("masked_select", "nonzero", "argwhere", "unique"):
        by_design = ("empty", "empty_like", "__rdiv__", "as_strided")
        return "no op_db entry" if name in by_design else "value-dependent shape"
    if name == "cuda":
        return "another device"
    if fn in NO_OP_DB_ENTRY_BUILTINS:
        return "no op_db entry"
    return "no op_db entry" if name in NO_OP_DB_ENTRY else None


def test_every_registered_op_is_reached_or_covered_elsewhere() -> None:
    by_op_db = {fn for info in ENTRIES for _, fn in reached(info)}
    missing = sorted(getattr(fn, "__name__", str(fn)) for fn in OPS if fn not in by_op_db and _family(fn) is None)
    assert not missing, f"registered ops neither reached by op_db nor covered elsewhere: {missing}"
    assert {_family(fn) for fn in OPS} - {None} <= set(ELSEWHERE), "each family names the test covering it"
    stale = sorted(n for n in NO_OP_DB_ENTRY if any(getattr(fn, "__name__", "") == n for fn in by_op_db))
    assert not stale, f"NO_OP_DB_ENTRY lists ops op_db now reaches: {stale}"
