"""bf16/fp16 values a fusion holds in fp32 are read rounded where rounding decides the result
(tests/support/rounding_cases.py): through the nvFuser executor's definitions, evaluated by the
fake nvFuser on CPU (the GPU tests run the same cases through real nvFuser)."""

from __future__ import annotations

import pytest
import torch

import compiler
from compiler.executors.nvfuser.define.translations import fusion_source
from compiler.executors.nvfuser.define.writer import NV_DTYPES
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


def _definition(fn) -> tuple[dict[str, str], list[str]]:
    """The one fusion definition of `fn` over a bf16 input: its lines by variable, its outputs."""
    jfn = compiler.jit(fn, executors=NVFUSER)
    jfn(rounding_cases.random_input(0, (4, 8), torch.bfloat16))
    fusion = region_fusions(compiler.last_traces(jfn)[-1])[0]
    source = fusion_source(fusion.region, fusion.descriptors())[0]
    defined = dict(line.strip().split(" = ", 1) for line in source.splitlines() if " = " in line)
    returned = [line.strip()[len("fd.add_output(") : -1] for line in source.splitlines() if "add_output" in line]
    return defined, returned


def _operand(defined: dict[str, str], op: str) -> str:
    """The first operand of the definition's first `fd.ops.<op>`."""
    expr = next(expr for expr in defined.values() if expr.startswith(f"fd.ops.{op}("))
    return expr[len(f"fd.ops.{op}(") :].split(",")[0].rstrip(")")


def test_a_returned_value_is_read_as_returned_on_its_way_to_a_max() -> None:
    # h is returned in bf16 (a backward recomputes from it) and leads to a max: read rounded
    # (and the max reads h * 2 rounded to bf16, as eager computes it)
    defined, returned = _definition(lambda x: (h := x * 3 + 1, (h * 2).amax(-1)))
    doubled = next(name for name, expr in defined.items() if expr.startswith("fd.ops.mul(") and "2.0" in expr)
    rounded = defined[_operand(defined, "max")]
    assert rounded.startswith("fd.ops.cast(") and rounded.endswith("dtype=DataType.Float)"), defined
    assert defined[rounded[len("fd.ops.cast(") :].split(",")[0]] == f"fd.ops.cast({doubled}, dtype=DataType.BFloat16)"
    assert defined[defined[doubled][len("fd.ops.mul(") :].split(",")[0]] == (
        f"fd.ops.cast({returned[0]}, dtype=DataType.Float)"
    )


def test_a_returned_value_is_read_unrounded_where_rounding_decides_nothing() -> None:
    # a bias gradient summed from the input gradient it also returns sums the fp32 values
    defined, returned = _definition(lambda x: (h := x * 3 + 1, h.exp()))
    assert defined[returned[0]] == f"fd.ops.cast({_operand(defined, 'exp')}, dtype=DataType.BFloat16)", defined


@pytest.mark.parametrize("wider", [torch.float64, torch.float16])
def test_a_conversion_to_float64_or_the_other_16_bit_dtype_reads_the_rounded_value(wider) -> None:
    # `x * 3` is bf16 (held in fp32 here); eager converts its bf16 value, so the fusion does
    defined, _ = _definition(lambda x: (x * 3).to(wider) * 2)
    cast = next(expr for expr in defined.values() if expr.endswith(f"dtype={NV_DTYPES[wider]})"))
    assert defined[cast[len("fd.ops.cast(") :].split(",")[0]].endswith("dtype=DataType.BFloat16)"), defined
    x = rounding_cases.random_input(1, (4, 8), torch.bfloat16)
    fn = lambda x: (x * 3).to(wider) * 2
    torch.testing.assert_close(compiler.jit(fn, executors=NVFUSER)(x), fn(x), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("seed", [0, 1])
def test_a_rounding_the_program_asks_of_float32_values_is_kept(dtype, seed) -> None:
    """`w.to(bf16).float()` of a float32 `w` (fake quantization) rounds as in eager, where a bf16
    program's values are held in fp32 between ops."""
    x = torch.randn(8, 33, generator=torch.Generator().manual_seed(seed))
    rounding_cases.check_rounded_on_purpose(x, dtype, NVFUSER)
