"""bf16/fp16 values a fusion holds in fp32 are read rounded where rounding decides the result
(tests/support/rounding_cases.py): through the nvFuser executor's definitions, evaluated by the
fake nvFuser on CPU (the GPU tests run the same cases through real nvFuser)."""

from __future__ import annotations

import pytest
import torch

import compiler
from compiler.executors.nvfuser.define.translations import fusion_source
from compiler.executors.nvfuser.executor import region_fusions
from tests.support import rounding_cases
from tests.support.nvfuser_helpers import fake_nvfuser  # noqa: F401  (a fixture)

pytestmark = pytest.mark.usefixtures("fake_nvfuser")

NVFUSER = ["nvfuser", "torch"]
LOW = [torch.bfloat16, torch.float16]


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("name", sorted(rounding_cases.DIFFERENTIABLE))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_max_backward_finds_the_maximum_its_forward_found(name, dtype, seed) -> None:
    x = rounding_cases.random_input(seed, (8, 3, 16), dtype)
    rounding_cases.check_against_eager(rounding_cases.DIFFERENTIABLE[name], x, NVFUSER)


@pytest.mark.parametrize("dtype", LOW)
def test_comparisons_integer_conversions_and_floor_read_rounded_values(dtype) -> None:
    rounding_cases.check_against_eager(rounding_cases.near_integers, rounding_cases.integers(dtype), NVFUSER)


def test_a_returned_value_is_read_as_returned_by_the_rest_of_its_region() -> None:
    def fn(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = x * 3 + 1  # returned in bf16, and read again below
        return h, h.exp()

    jfn = compiler.jit(fn, executors=NVFUSER)
    jfn(rounding_cases.random_input(0, (4, 8), torch.bfloat16))
    fusion = region_fusions(compiler.last_traces(jfn)[-1])[0]
    source = fusion_source(fusion.region, fusion.descriptors())[0]
    defined = dict(line.strip().split(" = ", 1) for line in source.splitlines() if " = " in line)
    returned = [line.strip()[len("fd.add_output(") : -1] for line in source.splitlines() if "add_output" in line]
    exp_operand = next(expr for expr in defined.values() if expr.startswith("fd.ops.exp("))[len("fd.ops.exp(") : -1]
    assert defined[exp_operand] == f"fd.ops.cast({returned[0]}, dtype=DataType.Float)", source
