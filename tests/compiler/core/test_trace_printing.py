"""Printed traces: golden text, provenance headers, decompositions as comments, and runnable source."""

from __future__ import annotations

import re

import torch

import compiler
from compiler.tracing.interpreter import eval_trace


def _normalized(trace: compiler.Trace) -> str:
    return re.sub(r"\(took [0-9.]+ ms\)", "(took N ms)", str(trace))


def gelu_tanh_scale(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(x, approximate="tanh") * y


GOLDEN_TRACED = """\
# Constructed by tracing
import torch
from compiler import prims

def computation(x, y):
  # x: cpu bf16[2, 3]
  # y: cpu f32[3]
  t10 = torch.nn.functional.gelu(x, approximate='tanh')  # t10: cpu bf16[2, 3]
    # t0 = prims.convert_element_type(x, torch.float32)  # t0: cpu f32[2, 3]
    # t1 = prims.mul(t0, t0)  # t1: cpu f32[2, 3]
    # t2 = prims.mul(t1, t0)  # t2: cpu f32[2, 3]
    # t3 = prims.mul(t2, 0.044715)  # t3: cpu f32[2, 3]
    # t4 = prims.add(t0, t3)  # t4: cpu f32[2, 3]
    # t5 = prims.mul(t4, 0.7978845608028654)  # t5: cpu f32[2, 3]
    # t6 = prims.mul(t0, 0.5)  # t6: cpu f32[2, 3]
    # t7 = prims.tanh(t5)  # t7: cpu f32[2, 3]
    # t8 = prims.add(t7, 1.0)  # t8: cpu f32[2, 3]
    # t9 = prims.mul(t6, t8)  # t9: cpu f32[2, 3]
    # t10 = prims.convert_element_type(t9, torch.bfloat16)  # t10: cpu bf16[2, 3]
  t13 = torch.Tensor.__mul__(t10, y)  # t13: cpu f32[2, 3]
    # t11 = prims.convert_element_type(t10, torch.float32)  # t11: cpu f32[2, 3]
    # t12 = prims.broadcast_in_dim(y, [2, 3], [1])  # t12: cpu f32[2, 3]
    # t13 = prims.mul(t11, t12)  # t13: cpu f32[2, 3]
  return t13
"""

GOLDEN_FINAL = """\
# Constructed by update_fresh (took N ms)
import torch
from compiler import prims

def computation(x, y):
  # x: cpu bf16[2, 3]
  # y: cpu f32[3]
  t0 = prims.convert_element_type(x, torch.float32)  # t0: cpu f32[2, 3]
  t1 = prims.mul(t0, t0)  # t1: cpu f32[2, 3]
  t2 = prims.mul(t1, t0)  # t2: cpu f32[2, 3]
  t3 = prims.mul(t2, 0.044715)  # t3: cpu f32[2, 3]
  t4 = prims.add(t0, t3)  # t4: cpu f32[2, 3]
  t5 = prims.mul(t4, 0.7978845608028654)  # t5: cpu f32[2, 3]
  t6 = prims.mul(t0, 0.5)  # t6: cpu f32[2, 3]
  t7 = prims.tanh(t5)  # t7: cpu f32[2, 3]
  t8 = prims.add(t7, 1.0)  # t8: cpu f32[2, 3]
  t9 = prims.mul(t6, t8)  # t9: cpu f32[2, 3]
  t10 = prims.convert_element_type(t9, torch.bfloat16)  # t10: cpu bf16[2, 3]
  t11 = prims.convert_element_type(t10, torch.float32)  # t11: cpu f32[2, 3]
  t12 = prims.broadcast_in_dim(y, [2, 3], [1])  # t12: cpu f32[2, 3]
  t13 = prims.mul(t11, t12)  # t13: cpu f32[2, 3]
  return t13
"""


def test_traced_trace_prints_ops_with_their_decompositions() -> None:
    jfn = compiler.jit(gelu_tanh_scale)
    x, y = torch.randn(2, 3, dtype=torch.bfloat16), torch.randn(3)
    jfn(x, y)
    assert _normalized(compiler.last_traces(jfn)[0]) == GOLDEN_TRACED
    assert _normalized(compiler.last_traces(jfn)[-1]) == GOLDEN_FINAL


def test_every_trace_starts_with_its_provenance_and_pass_timing() -> None:
    jfn = compiler.jit(gelu_tanh_scale)
    jfn(torch.randn(2, 3), torch.randn(3))
    headers = [str(t).splitlines()[0] for t in compiler.last_traces(jfn)]
    assert headers[0] == "# Constructed by tracing"
    names = ("functionalize", "flatten", "cse", "dce", "drop_stop_gradients", "update_in_place", "update_fresh")
    assert len(headers) == 1 + len(names)
    for header, name in zip(headers[1:], names):
        assert re.fullmatch(rf"# Constructed by {name} \(took [0-9.]+ ms\)", header)


def test_printed_traces_run_as_python_and_match_eager() -> None:
    def program(a, b, n):
        c = torch.where(a > 0, a, b)
        return (c * n).abs(), c[:, 1:].exp()

    a, b = torch.randn(4, 5), torch.randn(4, 5)
    jfn = compiler.jit(program, numbers="symbolic")
    jfn(a, b, 3)
    expected = program(a, b, 3)
    for trace in compiler.last_traces(jfn):
        got = trace.python()(a, b, 3)
        torch.testing.assert_close(got, expected)
        torch.testing.assert_close(eval_trace(trace, a, b, 3), expected)


def test_prologue_prints_unpacking_and_guards_and_runs() -> None:
    def f(x, n):
        return x + n if n > 2 else x - n

    jfn = compiler.jit(f, numbers="symbolic")
    x = torch.randn(3)
    jfn(x, 4)
    prologue = compiler.last_prologue(jfn)
    text = str(prologue)
    assert "def prologue(args, kwargs):" in text
    assert "x, n = prims.unpack_sequence(args, 2)" in text
    assert "prims.check_tensor(x, (3,), torch.float32, torch.device('cpu'))" in text
    assert "prims.check_type(n, int)" in text
    assert re.search(r"b\d+ = prims.gt\(n, 2\)", text) and "prims.check_value(b" in text
    run = prologue.python()
    assert run((x, 7), {}) == (x, 7)
    try:
        run((x, 1), {})
    except compiler.GuardFailure:
        pass
    else:
        raise AssertionError("the prologue accepted n=1 although the trace took the n > 2 branch")


def test_symbolic_sizes_print_in_shapes() -> None:
    def f(a, n):
        return a[:, :n] * 2

    jfn = compiler.jit(f, numbers="symbolic")
    jfn(torch.randn(3, 8), 5)
    final = str(compiler.last_traces(jfn)[-1])
    assert "prims.slice(a, [0, 0], [3, n], [1, 1])" in final
    assert "cpu f32[3, n]" in final
