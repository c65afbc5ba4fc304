"""`--shard I/N`: disjoint shares of the selected (case, params) that together make the whole."""

from __future__ import annotations

import argparse

import pytest

from fusebench.cases.discovery import discover
from fusebench.cases.selection import add_selection_arguments, add_shard_argument, plan, selection_from_args

SUITES = discover()


def parse(*argv: str):
    parser = argparse.ArgumentParser()
    add_selection_arguments(parser)
    add_shard_argument(parser)
    return selection_from_args(parser.parse_args(list(argv)))


def ids(*argv: str) -> list[str]:
    return [group.case_id for group in plan(SUITES, parse(*argv))]


@pytest.mark.parametrize("count", [1, 2, 3, 7])
def test_the_shards_are_disjoint_and_together_the_whole_selection(count: int) -> None:
    whole = ids("--variant", "eager")
    shards = [ids("--variant", "eager", "--shard", f"{index}/{count}") for index in range(1, count + 1)]
    assert sorted(i for shard in shards for i in shard) == sorted(whole)
    assert len({i for shard in shards for i in shard}) == len(whole)
    assert max(map(len, shards)) - min(map(len, shards)) <= 1  # dealt out in turn: balanced
    for shard in shards:
        assert shard == [i for i in whole if i in shard]  # each keeps the plan's order


def test_a_shard_is_the_sorted_case_ids_dealt_out_in_turn() -> None:
    whole = sorted(ids("--suite", "host_overhead", "--suite", "llm_norms"))
    second_of_three = ids("--suite", "host_overhead", "--suite", "llm_norms", "--shard", "2/3")
    assert sorted(second_of_three) == whole[1::3]


@pytest.mark.parametrize("text", ["0/3", "4/3", "1/0", "a/b", "3"])
def test_a_bad_shard_names_the_flag_and_the_form(text: str, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse("--shard", text)
    assert exit_info.value.code == 2
    assert f"argument --shard: '{text}': expected I/N with 1 <= I <= N, like 1/3" in capsys.readouterr().err
