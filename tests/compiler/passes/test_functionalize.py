"""The functionalization pass and the write-back check: structure of functionalized traces,
check_trace and eval-before == eval-after for every pass, the copy_to contract, and traces the
write-back check must reject (with messages naming the proxies)."""

from __future__ import annotations

import pytest
import torch

import compiler
from compiler.core.ir import BoundSymbol, Symbol, TensorProxy, Trace
from compiler.passes.cse import cse
from compiler.passes.dce import dce
from compiler.passes.flatten import flatten
from compiler.passes.functionalize import functionalize
from compiler.prims import INPLACE, Prim
from compiler.tracing import frontend
from compiler.tracing.check_trace import check_trace
from compiler.tracing.check_writebacks import WritebackError, check_writebacks, views_after_writebacks
from compiler.tracing.interpreter import eval_trace
from tests.support.inplace_util import assert_same, check_compiled, clone_args, count_writebacks

CPU = torch.device("cpu")


def _traced(fn, *args):
    """(computation trace straight from the frontend, the computation inputs for `args`)."""
    prologue, computation = frontend.trace(fn, args, {})
    return computation, prologue.python(prims=compiler.prims)(args, {})


def _eval(trace: Trace, fn, args):
    fresh = clone_args(args)
    _, inputs = _traced(fn, *fresh)
    return eval_trace(trace, *inputs), fresh


def _input(x, y):
    x.add_(y)
    return x * 2


def _view_then_base(x, y):
    x[1:].mul_(y[1:])
    return x + 1


def _base_then_view(x, y):
    v = x[2]
    x.zero_()
    return v + y[0]


def _intermediate(x, y):
    z = x * 2
    z.t()[1].fill_(3)
    return z * y


def _swap(x, y):
    t = x.clone()
    x.copy_(y)
    y.copy_(t)
    return t


def _copy_from_input(x, y):
    x.copy_(y)
    y.add_(1)
    return x


def _twice_same_value(x, y):
    t = x + y
    x.copy_(t)
    y.copy_(t)


def _returns_old_contents(x, y):
    z = x * 1
    z.copy_(y)  # z's value is y's memory ...
    v = y[1:]
    v.copy_(v)  # ... and v's, while their memory is written
    y.add_(1)
    return z, v


def _returns_written_value(x, y):
    t = y * 3
    x.copy_(t)
    return t


def _written_without_grad(x, y):
    z = x * 2
    with torch.no_grad():
        z[1:].mul_(y[1:])
        x.add_(1)
    return z + x


def _written_through_a_detached_alias(x, y):
    z = x + y
    z.detach()[0].fill_(2)
    return z * y, z


UNRECORDED_WRITES = (_written_without_grad, _written_through_a_detached_alias)
PROGRAMS = {fn.__name__[1:]: fn for fn in (_input, _view_then_base, _base_then_view, _intermediate, _swap,
                                           _copy_from_input, _twice_same_value, _returns_old_contents,
                                           _returns_written_value, *UNRECORDED_WRITES)}  # fmt: skip


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_each_pass_keeps_meaning_and_form(name):
    fn = PROGRAMS[name]
    x, y = torch.randn(4, 4), torch.randn(4, 4)
    expected_args = clone_args((x, y))
    expected = fn(*expected_args)
    trace, _ = _traced(fn, *clone_args((x, y)))
    traces = [trace]
    for run_pass in (functionalize, flatten, cse, dce):
        traces.append(run_pass(traces[-1]))
    for t in traces:
        check_trace(t)
        output, final_args = _eval(t, fn, (x, y))
        assert_same(output, expected, what=t.provenance)
        assert_same(final_args, expected_args, what=t.provenance)
    for t in traces[1:]:
        check_writebacks(t)
        assert not any(leaf.sym in INPLACE for leaf in frontend.leaves(t.bsyms))
        returned_views = views_after_writebacks(list(t.bsyms))
        kinds = [b.sym is Prim.COPY_TO for i, b in enumerate(t.bsyms) if i not in returned_views]
        assert kinds == sorted(kinds), "write-backs come last, but for the returned views of written inputs"
        assert len({b.args[1].name for b in t.bsyms if b.sym is Prim.COPY_TO}) == count_writebacks(t)


# NOTE: under no_grad, `z[1:]` is the slice and its detached alias (the view made there): each of
# the three takes a marker, and so does `x`; through `z.detach()[0]` only `z` keeps a history
@pytest.mark.parametrize("fn, changed", zip(UNRECORDED_WRITES, (4, 1)), ids=["no_grad", "detached_alias"])
def test_a_write_autograd_does_not_record_keeps_the_written_tensors_history(fn, changed):
    """Each tensor with a history that such a write changes (the view written, its base) takes its
    new value through `updated_without_grad`, whose gradient goes to its old contents; the
    write-back writes the value alone."""
    trace = functionalize(_traced(fn, torch.randn(4, 4), torch.randn(4, 4))[0])
    markers = [b for b in trace.bsyms if b.sym is Prim.UPDATED_WITHOUT_GRAD]
    assert len(markers) == changed
    written = {b.args[0].name for b in trace.bsyms if b.sym is Prim.COPY_TO}
    assert written.isdisjoint(b.output.name for b in markers)


def test_functionalize_leaves_pure_traces_alone():
    trace, _ = _traced(lambda x: x.sin() * 2, torch.randn(3))
    result = functionalize(trace)
    assert result.bsyms == trace.bsyms and result.provenance.startswith("functionalize")


def test_functionalized_trace_prints_one_update_per_inplace_op():
    def program(x, y):
        v = x[:, 1]
        x.mul_(2)
        v.add_(y)
        return v * 1

    trace, _ = _traced(program, torch.randn(3, 4), torch.randn(3))
    text = str(functionalize(trace))
    expected_lines = [
        "t2 = torch.Tensor.mul(x, 2)",
        "t5 = prims.slice(t2, [0, 1], [3, 2], [1, 1])",  # v recomputed from the new x ...
        "t6 = prims.squeeze(t5, [1])",
        "t3 = torch.Tensor.add(t6, y)",  # ... right before v.add_ reads it
        "t7 = prims.reshape(t3, [3, 1])",  # v's new value written back into x's column
        "t8 = prims.slice_update(t2, t7, [0, 1], [3, 2], [1, 1])",
        "t4 = torch.Tensor.__mul__(t3, 1)",
        "prims.copy_to(t8, x)",
    ]
    lines = [line.split("  #")[0].strip() for line in text.splitlines()]
    for line in expected_lines:
        assert line in lines, f"{line!r} not in:\n{text}"
    assert [lines.index(line) for line in expected_lines] == sorted(lines.index(line) for line in expected_lines)
    assert lines.index("prims.copy_to(t8, x)") == len(lines) - 2  # last before the return


def test_writeback_copies_where_the_contract_needs_them():
    def program(x, y, z):
        t = z + 1
        x.copy_(t)
        y.copy_(t)  # the same value for two buffers
        z.copy_(x.t())  # a view, and of another written buffer
        return t  # and returned

    jfn = check_compiled(program, torch.randn(3, 3), torch.randn(3, 3), torch.randn(3, 3))
    final = compiler.last_traces(jfn)[-1]
    written = {b.args[1].name: b.args[0] for b in final.bsyms if b.sym is Prim.COPY_TO}
    assert sorted(written) == ["x", "y", "z"] and len({p.name for p in written.values()}) == 3
    assert final.output.name not in {p.name for p in written.values()}


def test_cse_keeps_each_writeback_value():
    def program(x, y, z):
        x.copy_(z + 1)
        y.copy_(z + 1)
        return z + 1

    jfn = check_compiled(program, torch.randn(3), torch.randn(3), torch.randn(3))
    final = compiler.last_traces(jfn)[-1]
    computed = [b.args[0].name for b in final.bsyms if b.sym is Prim.COPY_TO]
    assert len(set(computed)) == 2 and final.output.name not in computed


def test_writes_into_an_unused_view_of_an_intermediate_are_dropped():
    def program(x):
        z = x * 2
        z[0].add_(1)  # nothing reads z afterwards
        return x + 1

    jfn = check_compiled(program, torch.randn(3, 2))
    assert count_writebacks(compiler.last_traces(jfn)[-1]) == 0
    assert len(compiler.last_traces(jfn)[-1].bsyms) == 1


# ---------------------------------------------------------------------------------------------
# the write-back check on hand-built traces


def _t(name: str, shape=(3,)) -> TensorProxy:
    return TensorProxy(shape, torch.float32, CPU, name=name)


def _bsym(prim: Prim, *args, out=None) -> BoundSymbol:
    return BoundSymbol(prim, args, {}, out)


X, Y, T0, T1, T2, V = _t("x"), _t("y"), _t("t0"), _t("t1"), _t("t2"), _t("v", (2,))
BODY = [_bsym(Prim.ADD, X, Y, out=T0), _bsym(Prim.MUL, T0, 2.0, out=T1)]  # t1 = (x + y) * 2
WRITEBACK = _bsym(Prim.COPY_TO, T1, X)
REGION = Symbol("nvFusion0", impl=lambda *a: None, executor="nvfuser")


def test_check_writebacks_accepts_the_contract():
    trace = Trace((X, Y), [*BODY, WRITEBACK], (T0, X))  # returning the buffer itself is fine
    assert check_writebacks(check_trace(trace)) is trace
    fused = BoundSymbol(REGION, (X, Y), {}, (T0,), (*BODY, WRITEBACK))
    check_writebacks(Trace((X, Y), [fused], T0))


REJECTED = {
    "computed read after": ([*BODY, WRITEBACK, _bsym(Prim.NEG, T1, out=T2)], None,
                            r"t1 is read by `t2 = prims.neg\(t1\)` after `prims.copy_to\(t1, x\)`"),
    "computed returned": ([*BODY, WRITEBACK], T1, r"the output returns t1 after `prims.copy_to\(t1, x\)`"),
    "computed is an input": ([*BODY, _bsym(Prim.COPY_TO, Y, X)], None, r"writes back y, which is not computed"),
    "buffer read after": ([*BODY, WRITEBACK, _bsym(Prim.ADD, X, 1.0, out=T2)], None,
                          r"x is read \(as x\) by `t2 = prims.add\(x, 1.0\)` after `prims.copy_to\(t1, x\)`"),
    "buffer view read after": ([_bsym(Prim.SLICE, X, [0], [2], [1], out=V), *BODY, WRITEBACK,
                                _bsym(Prim.NEG, V, out=_t("t3", (2,)))], None, r"x is read \(as v\)"),
    "buffer view returned": ([_bsym(Prim.SLICE, X, [0], [2], [1], out=V), *BODY, WRITEBACK], V,
                             r"the output returns v, a view of x"),
    "late view read": ([*BODY, WRITEBACK, _bsym(Prim.SLICE, X, [0], [2], [1], out=V),
                        _bsym(Prim.NEG, V, out=_t("t3", (2,)))], _t("t3", (2,)),
                       r"x is read \(as v\) by `t3 = prims.neg\(v\)` after"),
    "buffer not an input": ([*BODY, _bsym(Prim.COPY_TO, T1, T0)], None, r"writes into t0, which is not an input"),
    "buffer written twice": ([*BODY, WRITEBACK, _bsym(Prim.COPY_TO, T0, X)], None, r"x is written back twice"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(REJECTED))
def test_check_writebacks_rejects(case):
    bsyms, output, message = REJECTED[case]
    with pytest.raises(WritebackError, match=message):
        check_writebacks(Trace((X, Y), bsyms, output))


def test_check_writebacks_accepts_views_of_a_buffer_after_its_writeback_that_feed_the_output():
    late = [_bsym(Prim.SLICE, X, [0], [2], [1], out=V), _bsym(Prim.RESHAPE, V, [2, 1], out=_t("w", (2, 1)))]
    trace = Trace((X, Y), [*BODY, WRITEBACK, *late], (V, _t("w", (2, 1))))
    assert check_writebacks(check_trace(trace)) is trace
    assert views_after_writebacks(trace.bsyms) == {3, 4}


def test_check_writebacks_rejects_a_view_after_the_writeback_inside_a_region():
    fused = BoundSymbol(REGION, (X, Y), {}, (V,), (*BODY, WRITEBACK, _bsym(Prim.SLICE, X, [0], [2], [1], out=V)))
    with pytest.raises(WritebackError, match=r"`v = prims.slice\(x, .*\)` views x after its write-back inside"):
        check_writebacks(Trace((X, Y), [fused], V))


def test_check_writebacks_rejects_a_value_computed_outside_the_region():
    fused = BoundSymbol(REGION, (X, T1), {}, None, (WRITEBACK,))
    with pytest.raises(WritebackError, match="in nvFusion0 writes back t1, computed outside that region"):
        check_writebacks(Trace((X, Y), [*BODY, fused], None))


def test_pipeline_runs_the_check(monkeypatch):
    import compiler.runtime.pipeline as pipeline

    def broken(trace):  # a "pass" that reads a written-back value after its write-back
        written = trace.bsyms[-1].args[0]
        out = TensorProxy(written.shape, written.dtype, written.device, name="late")
        return trace.with_bsyms([*trace.bsyms, BoundSymbol(Prim.NEG, (written,), {}, out)], output=out)

    monkeypatch.setattr(pipeline, "computation_passes", lambda options: [functionalize, flatten, broken])
    with pytest.raises(WritebackError, match=r"late = prims\.neg"):
        compiler.jit(lambda x: x.add_(1))(torch.randn(3))
