"""Tokens per call of the model suites, whose `tokens` parameter is (batch, length): what tokens/s counts."""

from __future__ import annotations

from fusebench.cases.case import Params


def prompt_tokens(params: Params) -> int:
    """Prefill and training: every position of every sequence."""
    batch, length = params["tokens"]
    return batch * length


def new_tokens(params: Params) -> int:
    """A decode step: one new token per sequence."""
    return params["tokens"][0]
