"""Operators called through `torch.ops` (a library's, or aten's in a dynamo graph): their names in
errors, and decompositions registered by "namespace::name" reaching both the packet and `.default`."""

from __future__ import annotations

import pytest
import torch

import compiler
from compiler.ops.registry import CUSTOM_OPS, register_custom, torch_name


def test_operators_are_named_as_they_are_called() -> None:
    assert torch_name(torch.ops.aten.slice) == "torch.ops.aten.slice"
    assert torch_name(torch.ops.aten.slice.Tensor) == "torch.ops.aten.slice.Tensor"
    with pytest.raises(NotImplementedError, match=r"^torch\.ops\.aten\.slice\.Tensor is not supported"):
        compiler.jit(lambda x: torch.ops.aten.slice.Tensor(x, 0, 0, 1))(torch.randn(3))


def test_a_registered_operator_is_reached_by_its_packet_and_its_default_overload() -> None:
    moe = pytest.importorskip("transformers.integrations.moe")
    assert moe is not None and "transformers::grouped_mm_fallback" in CUSTOM_OPS
    rows, weights = torch.randn(8, 8), torch.randn(2, 8, 16)
    offs = torch.tensor([3, 8], dtype=torch.int32)
    expected = torch.ops.transformers.grouped_mm_fallback(rows, weights, offs=offs)
    for operator in (torch.ops.transformers.grouped_mm_fallback, torch.ops.transformers.grouped_mm_fallback.default):
        got = compiler.jit(lambda a, b, o, operator=operator: operator(a, b, offs=o))(rows, weights, offs)
        torch.testing.assert_close(got, expected)


def test_registering_needs_a_new_namespaced_name() -> None:
    with pytest.raises(ValueError, match="expected a new 'namespace::name'"):
        register_custom("grouped_mm_fallback")
    with pytest.raises(ValueError, match="expected a new 'namespace::name'"):
        register_custom("transformers::grouped_mm_fallback")
