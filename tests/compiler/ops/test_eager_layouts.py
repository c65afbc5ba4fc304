"""eager's layout of composite ops' outputs (compiler/ops/eager_layouts.py): what a program asks
about them (`is_contiguous`, `stride`) and the order dropout draws its noise in are eager's, for a
transposed or channels-last input, where the prims of the decomposition would follow the input."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import compiler

OPS = {
    "layer_norm": lambda x: F.layer_norm(x, x.shape[-1:]),
    "rms_norm": lambda x: F.rms_norm(x, x.shape[-1:]),
    "softmax": lambda x: x.softmax(-1),
    "log_softmax": lambda x: F.log_softmax(x, 1),
    "masked_fill": lambda x: x.masked_fill(x > 0, 1.0),
    "tril": lambda x: x.tril(),
    "cumsum": lambda x: x.cumsum(-1),
    "logsigmoid": F.logsigmoid,
    "gelu": F.gelu,  # an elementwise op: follows the input, as in eager
    "batch_norm": lambda x: F.batch_norm(x, None, None, training=True),
    "group_norm": lambda x: F.group_norm(x, 1),
}
INPUTS = {
    "transposed": lambda: torch.randn(2, 5, 6).transpose(1, 2),
    "channels_last": lambda: torch.randn(2, 4, 3, 5).permute(0, 3, 1, 2),  # [2, 5, 4, 3], channels innermost
    "row_major": lambda: torch.randn(2, 6, 5),
}


@pytest.mark.parametrize("layout", INPUTS)
@pytest.mark.parametrize("op", OPS)
def test_layout_queries_answer_as_eager(op: str, layout: str) -> None:
    def asks(x):
        y = OPS[op](x)
        return y.is_contiguous(), y.stride()

    x = INPUTS[layout]()
    assert compiler.jit(asks)(x) == asks(x)


@pytest.mark.parametrize("op", ["layer_norm", "softmax", "masked_fill", "group_norm"])
def test_dropout_after_a_composite_op_drops_what_eager_drops(op: str) -> None:
    def program(x):
        return F.dropout(OPS[op](x) * 1.0, 0.4)

    x = INPUTS["channels_last"]() if op == "group_norm" else INPUTS["transposed"]()
    jitted = compiler.jit(program)
    for seed in (0, 1):
        torch.manual_seed(seed)
        got = jitted(x)
        torch.manual_seed(seed)
        want = program(x)
        assert ((got == 0) == (want == 0)).all()
        torch.testing.assert_close(got, want)
