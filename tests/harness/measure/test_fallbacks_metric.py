"""The fusebench-dynamo variant records how many pieces of the program our compiler left to eager."""

from __future__ import annotations

import warnings

import torch

import compiler
from fusebench.cases.variants import FUSEBENCH_DYNAMO
from fusebench.measure.measure import Settings, measure_variant, prepare_case
from fusebench.measure.outcome import FALLBACKS, METRICS
from tests.support.fakes import tiny_case

CPU = torch.device("cpu")


def _spectrum(x: torch.Tensor) -> torch.Tensor:
    return torch.linalg.eigvalsh(x @ x.mT).sin() * 2  # eigvalsh: no decomposition in our compiler


def _measure(fn) -> object:
    case = tiny_case(
        fn=fn,
        make_inputs=lambda params, device, seed: (torch.randn(3, params["n"], params["n"], device=device),),
        reference=fn,
    )
    settings = Settings(device=CPU, budget_s=0.01, min_repeats=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", compiler.UnsupportedFallback)
        prepared = prepare_case("tiny", case, case.grid(quick=True)[0], settings)
        return measure_variant(prepared, FUSEBENCH_DYNAMO, settings)


def test_the_dynamo_variant_counts_the_ops_it_ran_eagerly() -> None:
    assert FALLBACKS in METRICS
    outcome = _measure(_spectrum)
    assert outcome.status == "ok", outcome.detail
    assert outcome.fallbacks == 1 and outcome.metric_values()[FALLBACKS.name] == 1


def test_a_graph_compiled_whole_has_no_fallback() -> None:
    outcome = _measure(lambda x: (x @ x.mT).sin() * 2)
    assert outcome.status == "ok", outcome.detail
    assert outcome.fallbacks == 0


def _mask_only_in_eager(x: torch.Tensor) -> torch.Tensor:
    # as LongT5 without an attention mask: traced by dynamo it indexes None, so dynamo runs the frame eagerly
    mask = None if torch.compiler.is_compiling() else torch.ones_like(x)
    return (x * mask[0]).sin()


def test_a_frame_dynamo_gives_up_on_is_counted() -> None:
    outcome = _measure(_mask_only_in_eager)
    assert outcome.status == "ok", outcome.detail
    assert outcome.fallbacks == 1, outcome.fallbacks
