"""What a default run measures (fusebench/cases/case.py `headline`, `headline_variants`,
`default_variants_for`): the rule's defaults, declared headlines, and their validation."""

from __future__ import annotations

import pytest

from fusebench.cases.case import default_variants_for, headline_values, variants_for
from fusebench.cases.variants import STANDARD_VARIANTS
from fusebench.errors import CaseError
from tests.support.fakes import tiny_case


def test_one_or_two_values_run_whole_and_a_longer_sweep_by_its_first() -> None:
    case = tiny_case(params={"n": [8, 16, 32, 64], "dtype": ["float32", "bfloat16"], "mode": ["a"]})
    assert case.headline_grid(quick=False) == [
        {"n": 8, "dtype": "float32", "mode": "a"},
        {"n": 8, "dtype": "bfloat16", "mode": "a"},
    ]
    assert len(case.grid(quick=False)) == 8


def test_a_declared_headline_picks_its_values_of_the_grid_being_run() -> None:
    case = tiny_case(params={"n": [2048, 4096, 8192]}, quick_params={"n": [16]}, headline={"n": [4096]})
    assert case.headline_grid(quick=False) == [{"n": 4096}]
    # the quick grid holds none of the headline's values: the rule picks (its only value)
    assert case.headline_grid(quick=True) == [{"n": 16}]


def test_a_headline_may_list_several_values_and_keeps_the_grids_order() -> None:
    case = tiny_case(params={"model": ["a", "b", "c", "d"]}, headline={"model": ["d", "b"]})
    assert case.headline_grid(quick=False) == [{"model": "b"}, {"model": "d"}]


def test_headline_values_compare_by_repr_as_the_grid_does() -> None:
    assert headline_values([(1, 2), (3, 4), (5, 6)], [(3, 4)]) == [(3, 4)]
    assert headline_values([1, 2, 3], None) == [1]
    assert headline_values([1, 2], None) == [1, 2]


@pytest.mark.parametrize(
    ("headline", "message"),
    [
        ({"m": [1]}, r"double.headline\['m'\]: not a parameter of the grid \['n'\]"),
        ({"n": []}, r"double.headline\['n'\] is not a non-empty list"),
        ({"n": [99]}, r"double.headline\['n'\] holds 99, which is in neither params nor quick_params"),
        (["n"], r"double.headline is not a mapping"),
    ],
)
def test_a_bad_headline_names_the_case_and_what_is_wrong(headline: object, message: str) -> None:
    with pytest.raises(CaseError, match=message):
        tiny_case(params={"n": [8, 16, 32]}, quick_params={"n": [4]}, headline=headline)


def test_a_headline_value_of_the_quick_grid_only_is_accepted() -> None:
    case = tiny_case(params={"n": [8, 16, 32]}, quick_params={"n": [4, 5, 6]}, headline={"n": [5]})
    assert case.headline_grid(quick=True) == [{"n": 5}]


def test_default_variants_are_the_peers_plus_the_cases_own_and_its_headline_variants() -> None:
    case = tiny_case()
    assert [v.name for v in default_variants_for(case)] == ["eager", "torch.compile", "fusebench", "thunder"]
    opted = tiny_case(headline_variants=("fusebench-cudagraphs",))
    assert [v.name for v in default_variants_for(opted)] == [
        "eager",
        "torch.compile",
        "fusebench",
        "fusebench-cudagraphs",
        "thunder",
    ]
    assert len(variants_for(case)) == len(STANDARD_VARIANTS)


def test_headline_variants_must_name_a_variant_of_the_case() -> None:
    with pytest.raises(CaseError, match=r"double.headline_variants names 'jax', not one of its variants \['eager'"):
        tiny_case(headline_variants=("jax",))
