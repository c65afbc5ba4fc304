"""A sample of the user patterns through `torch.compile(fn, backend="fusebench")`: dynamo captures
the graph, this compiler compiles it; outputs, inputs written in place and gradients against eager,
over two calls of other shapes (dynamo's recompilation or its dynamic shapes)."""

from __future__ import annotations

import pytest
import torch
import torch._dynamo

from tests.compiler.user_patterns import (
    test_casts,
    test_inplace,
    test_inplace_views,
    test_model_code,
    test_precision,
    test_shapes,
    test_views,
)
from tests.support.user_patterns import Call, Pattern, check_call, on_device


def _pattern(patterns: list[Pattern], name: str) -> Pattern:
    return next(p for p in patterns if p.name == name)


PATTERNS = [
    _pattern(test_casts.CAST_PATTERNS, "cross_entropy_upcast"),
    _pattern(test_views.VIEW_PATTERNS, "heads_split_and_merge"),
    _pattern(test_inplace.INPLACE_PATTERNS, "intermediate_slice_assign"),
    _pattern(test_inplace.INPLACE_PATTERNS, "mul_add_chain"),
    _pattern(test_precision.PRECISION_PATTERNS, "rms_norm_llama"),
    _pattern(test_precision.PRECISION_PATTERNS, "softmax_then_cast_to_query_dtype"),
    _pattern(test_precision.PRECISION_PATTERNS, "attention_finfo_mask"),
    _pattern(test_precision.PRECISION_PATTERNS, "new_factories_with_dtype"),
    _pattern(test_model_code.MODEL_PATTERNS, "topk_softmax_routing"),
    _pattern(test_model_code.MODEL_PATTERNS, "cross_entropy_options"),
    _pattern(test_model_code.MODEL_PATTERNS, "bce_with_logits_pos_weight"),
    _pattern(test_shapes.SHAPE_PATTERNS, "view_star_shape_heads"),
    _pattern(test_shapes.SHAPE_PATTERNS, "einsum_attention_strings"),
    _pattern(test_shapes.SHAPE_PATTERNS, "qkv_chunk_heads"),
    _pattern(test_inplace_views.INPLACE_VIEW_PATTERNS, "ellipsis_slice_times_equal"),
    _pattern(test_inplace_views.INPLACE_VIEW_PATTERNS, "intermediate_narrow_copy"),
]


@pytest.mark.parametrize("pattern", PATTERNS, ids=lambda p: p.name)
def test_pattern_matches_eager_through_torch_compile(pattern: Pattern) -> None:
    torch._dynamo.reset()
    compiled = torch.compile(pattern.fn, backend="fusebench")
    calls = [
        Call(0, torch.float32, pattern.sizes[0], "contiguous", True),
        Call(1, torch.bfloat16, pattern.sizes[2], "transposed", True),
    ]
    with on_device():
        assert all(check_call(pattern, compiled, call) for call in calls)
