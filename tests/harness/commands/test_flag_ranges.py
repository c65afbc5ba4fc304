"""Bad values of compare's, bisect's and run's flags: one line naming the flag and its range, exit 2."""

from __future__ import annotations

import pytest

from fusebench.cli import main

BAD = [
    (["compare", "a", "b", "--rounds", "0"], "--rounds 0: expected a whole number of rounds from 1 to 100"),
    (["compare", "a", "b", "--rounds", "101"], "--rounds 101: expected a whole number of rounds from 1 to 100"),
    (["compare", "a", "b", "--alpha", "1.5"], "--alpha 1.5: expected a probability strictly between 0 and 1"),
    (["compare", "a", "b", "--alpha", "0"], "--alpha 0: expected a probability strictly between 0 and 1"),
    (["compare", "a", "b", "--min-effect", "-1"], "--min-effect -1: expected a fraction from 0 to 10"),
    (["compare", "a", "b", "--threads", "0"], "--threads 0: expected a whole number of threads from 1 to 1024"),
    (
        ["compare", "a", "b", "--repeat-budget", "0"],
        "--repeat-budget 0: expected a positive number of seconds, at most",
    ),
    (["compare", "a", "b", "--repeat-budget", "1e5"], "--repeat-budget 100000: expected a positive number of seconds"),
    (["compare", "a", "b", "--quantile", "1"], "--quantile 1: expected a level strictly between 0 and 1"),
    (
        ["compare", "a", "b", "--max-rounds", "5"],
        "--max-rounds 5: expected a whole number of rounds from --rounds (6) to 100 (equal to --rounds: no follow-up",
    ),
    (["compare", "a", "b", "--rounds", "8", "--max-rounds", "101"], "--max-rounds 101: expected a whole number of"),
    (["bisect", "a", "b", "--max-rounds", "0"], "--max-rounds 0: expected a whole number of rounds from --rounds (6)"),
    (["bisect", "a", "b", "--rounds", "0"], "--rounds 0: expected a whole number of rounds from 1 to 100"),
    (["bisect", "a", "b", "--retries", "-1"], "--retries -1: expected a whole number of retries from 0 to 10"),
    (["run", "--unit-timeout", "-1"], "--unit-timeout -1: expected seconds >= 0 (0: no limit)"),
    (["run", "--unit-timeout", "nan"], "--unit-timeout nan: expected seconds >= 0 (0: no limit)"),
    (["run", "--time-limit", "-5"], "--time-limit -5: expected seconds >= 0 (0: no limit)"),
    (["run", "--time-limit", "inf"], "--time-limit inf: expected seconds >= 0 (0: no limit)"),
    (["run", "--threads", "0"], "--threads 0: expected a whole number of threads from 1 to 1024"),
    (["run", "--threads", "-3"], "--threads -3: expected a whole number of threads from 1 to 1024"),
    (["run", "--precision", "1.5"], "--precision 1.5: expected a fraction from 0 (spend the whole budget) to below 1"),
    (["run", "--precision", "-0.5"], "--precision -0.5: expected a fraction from 0 (spend the whole budget)"),
    # the decision flags are one definition (fusebench.compare.arguments): bisect checks them as compare does
    (["bisect", "a", "b", "--alpha", "1.5"], "--alpha 1.5: expected a probability strictly between 0 and 1"),
    (["bisect", "a", "b", "--quantile", "0"], "--quantile 0: expected a level strictly between 0 and 1"),
]


@pytest.mark.parametrize(("argv", "message"), BAD, ids=[" ".join(argv[:1] + argv[-2:]) for argv, _ in BAD])
def test_a_bad_flag_is_one_line_naming_it_and_its_range(
    argv: list[str], message: str, capsys: pytest.CaptureFixture
) -> None:
    assert main([*argv, "--device", "cpu", "--quick"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert err.startswith(f"fusebench {argv[0]}: error: ")
