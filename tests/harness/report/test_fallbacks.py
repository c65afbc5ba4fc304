"""The run's lines about measurements in which our compiler left pieces to eager or regions to torch."""

from __future__ import annotations

from fusebench.measure.outcome import Outcome
from fusebench.report.fallbacks import render_fallbacks


def _outcome(variant: str, fallbacks: int | None, case: str = "zoo_training") -> Outcome:
    return Outcome("hf_zoo", case, {"model": "gpt_neox", "size": "gpu"}, variant, "cuda", "ok", fallbacks=fallbacks)


def test_only_our_measurements_with_fallbacks_are_named() -> None:
    outcomes = [
        _outcome("eager", None),
        _outcome("torch.compile", None),
        _outcome("fusebench", 2),
        _outcome("fusebench-dynamo", 0),
        _outcome("fusebench", 1, case="zoo_inference"),
    ]
    lines = render_fallbacks(outcomes).splitlines()
    assert lines[0].startswith("fallbacks: 2 measurements of our compiler ran pieces eagerly or fusion regions")
    assert lines[1:] == [
        "  zoo_training model=gpt_neox, size=gpu fusebench: 2",
        "  zoo_inference model=gpt_neox, size=gpu fusebench: 1",
    ]


def test_nothing_is_printed_without_fallbacks() -> None:
    assert render_fallbacks([_outcome("fusebench", 0), _outcome("fusebench-dynamo", None)]) == ""
