"""scripts/fuzz_nvfuser.py on CPU: the torch executor and the fake nvFuser agree with eager on a
few random programs, and a planted bug is found and shrunk to a small program."""

from __future__ import annotations

import pytest
import torch

from compiler.executors.nvfuser.executor import NvFuserExecutor  # noqa: F401  (the fixture patches it)
from scripts import fuzz_nvfuser
from tests.support.nvfuser_helpers import fake_nvfuser  # noqa: F401  (a fixture)


def test_fuzzing_with_the_torch_executor_finds_no_mismatch() -> None:
    summary = fuzz_nvfuser.fuzz(0, 40, "cpu", ["torch"])
    assert summary.programs_run == 40 and not summary.failures, str(summary)


def test_fuzzing_with_the_fake_nvfuser_finds_no_mismatch(fake_nvfuser) -> None:  # noqa: F811
    summary = fuzz_nvfuser.fuzz(1, 25, "cpu", ["nvfuser", "torch"])
    assert summary.programs_run == 25 and not summary.failures, str(summary)


def test_a_planted_bug_is_found_and_minimized(monkeypatch: pytest.MonkeyPatch) -> None:
    real_sin = torch.sin
    monkeypatch.setitem(fuzz_nvfuser.__dict__, "UNARY", ("torch.sin({})",))
    # the jitted side computes sin through the torch executor, the eager side through torch.sin
    monkeypatch.setattr(torch, "sin", lambda x: real_sin(x) + (0 if torch.compiler.is_compiling() else 1))
    summary = fuzz_nvfuser.fuzz(0, 30, "cpu", ["torch"])
    assert summary.failures, "the planted bug was not found"
    minimized = summary.failures[0][0]
    assert "torch.sin" in minimized and minimized.count("\n    v") <= 2, minimized


def test_a_refusal_that_falls_back_to_the_right_result_is_counted_not_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    real_jit = fuzz_nvfuser.compiler.jit

    def refusing_jit(fn, *, fallback=True, **options):
        if not fallback:
            raise RuntimeError("planted refusal")
        return real_jit(fn, **options)

    monkeypatch.setattr(fuzz_nvfuser.compiler, "jit", refusing_jit)
    summary = fuzz_nvfuser.fuzz(2, 10, "cpu", ["torch"])
    # NOTE: every program eager accepts is refused (eager refuses writes into an expanded input)
    refused = summary.refused.get("RuntimeError: planted refusal", 0)
    assert not summary.failures and list(summary.refused) == ["RuntimeError: planted refusal"], str(summary)
    assert 5 <= refused <= 10 and f"{refused} x RuntimeError: planted refusal" in str(summary)


def test_a_bf16_result_closer_to_float64_than_eager_is_told_apart_from_a_wrong_one() -> None:
    # Fuzz seed 81 on an H100: eager rounds a0 + 1.5 to bf16 before the cancelling subtraction; a
    # fusion keeps it in fp32 and gets float64's answer (0.1187 against eager's 0.0947).
    program = fuzz_nvfuser.Program(inputs=[((1,), torch.bfloat16, "contiguous")])
    program.lines = ["a0.add_(1.5)", "v1 = torch.sub(a0, 3)", "v2 = torch.neg(a0)", "a0.mul_(v1)"]
    program.outputs = ["v2"]
    fn, inputs = program.function(), program.make_inputs("cpu", 0)
    eager_args = [t.clone() for t in inputs]
    eager_outputs = fn(*eager_args)
    assert not fuzz_nvfuser._matches_float64(fn, inputs, eager_outputs, eager_args)
    a = inputs[0].double() + 1.5
    fused_outputs, fused_args = [(-a).to(torch.bfloat16)], [(a * (a - 3)).to(torch.bfloat16)]
    assert fuzz_nvfuser._matches_float64(fn, inputs, fused_outputs, fused_args)


def test_a_write_through_an_overlapping_read_is_not_a_mismatch() -> None:
    # found on an H200 once inputs kept their gaps: eager did not detect the overlap through the
    # step slice; its result depends on the order it adds elements in, the compiler refuses it
    program = fuzz_nvfuser.Program(inputs=[((2,), torch.float32, "strided")])
    program.lines += ["v0 = a0[..., 1:]", "a0.add_(v0)"]
    program.outputs.append("v0")
    assert fuzz_nvfuser.check_program(program, "cpu", ["torch"]) is None
