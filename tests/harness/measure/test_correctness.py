"""compare(): tolerances by dtype, structure, shapes, NaN, and where the worst error is."""

from __future__ import annotations

import pytest
import torch

from fusebench.cases.case import DEFAULT_TOLERANCES
from fusebench.errors import CaseError
from fusebench.measure.correctness import compare


def tolerance(dtype: torch.dtype) -> tuple[float, float]:
    return DEFAULT_TOLERANCES.get(dtype, (0.0, 0.0))


def test_values_within_tolerance_agree() -> None:
    expected = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    actual = (expected * (1 + 5e-5)).float()  # inside float32's rtol 1e-4
    assert compare(expected, actual, tolerance) is None


def test_the_worst_element_is_reported_with_its_index() -> None:
    expected = torch.zeros(2, 3, dtype=torch.float64)
    actual = torch.zeros(2, 3)
    actual[1, 2] = 0.5
    actual[0, 0] = 0.1
    mismatch = compare((expected,), (actual,), tolerance)
    assert mismatch is not None
    assert mismatch.where == "output[0]"
    assert mismatch.max_abs_error == 0.5
    assert "at index (1, 2)" in mismatch.message and "2 of 6 elements" in mismatch.message


def test_bfloat16_gets_a_looser_tolerance_than_float32() -> None:
    expected = torch.tensor([1.0], dtype=torch.float64)
    off_by_half_percent = torch.tensor([1.005])
    assert compare(expected, off_by_half_percent.to(torch.bfloat16), tolerance) is None
    assert compare(expected, off_by_half_percent, tolerance) is not None


def test_structure_shape_and_type_mismatches() -> None:
    one = torch.ones(2)
    assert "structure" in compare((one, one), (one,), tolerance).message
    assert "shape (3,)" in compare(one, torch.ones(3), tolerance).message
    assert "is float" in compare(one, 1.0, tolerance).message
    assert compare([1, "a"], [1, "b"], tolerance).message == "output[1] is 'b' but the reference gave 'a'"


def test_nan_agrees_only_with_nan() -> None:
    nan = torch.tensor([float("nan"), 1.0], dtype=torch.float64)
    assert compare(nan, nan.float(), tolerance) is None
    mismatch = compare(torch.tensor([0.0, 1.0], dtype=torch.float64), nan.float(), tolerance)
    assert mismatch is not None and mismatch.max_abs_error == float("inf")


def test_integer_tensors_must_match_exactly() -> None:
    assert compare(torch.tensor([1, 2]), torch.tensor([1, 2]), tolerance) is None
    assert compare(torch.tensor([1, 2]), torch.tensor([1, 3]), tolerance).max_abs_error == 1


def test_slices_add_up_to_the_whole_comparison(monkeypatch) -> None:
    # outputs are compared a slice at a time: counts add up, the worst element wins across slices,
    # and a NaN in the result (not in the reference) is the worst of all
    import fusebench.measure.correctness as correctness

    expected = torch.zeros(4, 5, dtype=torch.float64)
    actual = torch.zeros(4, 5)
    actual[0, 1], actual[2, 3], actual[3, 4] = 0.25, 0.75, 0.5
    for chunk in (3, 7, 1 << 24):
        monkeypatch.setattr(correctness, "CHUNK_ELEMENTS", chunk)
        mismatch = compare(expected, actual, tolerance)
        assert mismatch is not None and mismatch.max_abs_error == 0.75
        assert "at index (2, 3)" in mismatch.message and "3 of 20 elements" in mismatch.message
        actual[1, 1] = float("nan")
        with_nan = compare(expected, actual, tolerance)
        assert with_nan is not None and "at index (1, 1)" in with_nan.message and "4 of 20" in with_nan.message
        actual[1, 1] = 0.0


def test_rows_may_differ_excuses_a_few_whole_rows_and_nothing_that_touches_most_rows() -> None:
    expected = torch.randn(50, 8, dtype=torch.float64)
    two_rows_off = expected.float().clone()
    two_rows_off[[3, 40]] = -two_rows_off[[3, 40]] + 1.0  # another choice: whole rows differ
    assert compare(expected, two_rows_off, tolerance) is not None  # elementwise, as before
    assert compare(expected, two_rows_off, tolerance, rows_may_differ=0.04) is None  # 2 of 50 rows
    too_many = compare(expected, two_rows_off, tolerance, rows_may_differ=0.02)  # 1 row allowed
    assert too_many is not None and "2 of 50 rows disagree, more than the 1 the case allows" in too_many.message
    shifted = expected.float() + 0.05
    assert compare(expected, shifted, tolerance, rows_may_differ=0.5) is not None  # every row: fails
    nan_row = expected.float().clone()
    nan_row[7] = float("nan")
    assert compare(expected, nan_row, tolerance, rows_may_differ=0.5).max_abs_error == float("inf")


def test_rows_may_differ_never_excuses_a_scalar_or_a_vector() -> None:
    # a loss or a vector has no rows of a choice: its elements are checked one by one
    loss = torch.tensor(1.0, dtype=torch.float64)
    assert compare(loss, torch.tensor(2.0), tolerance, rows_may_differ=0.5) is not None
    vector = torch.zeros(10, dtype=torch.float64)
    assert compare(vector, vector.float() + torch.eye(10)[0], tolerance, rows_may_differ=0.5) is not None


def test_rows_may_differ_is_a_fraction() -> None:
    with pytest.raises(CaseError, match=r"rows_may_differ is 1\.0; expected a fraction in \[0, 1\)"):
        compare(torch.zeros(2, 2), torch.zeros(2, 2), tolerance, rows_may_differ=1.0)
