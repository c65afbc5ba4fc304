"""The VJP table's coverage, the min-cut, and a property test over random differentiable programs."""

from __future__ import annotations

import torch
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import compiler
from compiler.passes.mincut import INFINITE, FlowGraph
from compiler.passes.vjp_rules import NONDIFFERENTIABLE, REWRITTEN, VJP, ZERO_GRADIENT
from compiler.prims import COMPARISONS, GUARDS, Prim
from tests.support.autodiff_util import check_gradients


def test_every_prim_has_a_vjp_rule_or_is_declared_nondifferentiable():
    missing = set(Prim) - set(VJP) - NONDIFFERENTIABLE - REWRITTEN
    assert missing == set()
    assert set(VJP).isdisjoint(NONDIFFERENTIABLE) and set(VJP).isdisjoint(REWRITTEN)
    assert {Prim.SDPA} == REWRITTEN
    assert set(VJP) >= ZERO_GRADIENT
    assert (
        COMPARISONS
        | GUARDS
        | {Prim.BITWISE_NOT, Prim.BITWISE_AND, Prim.BITWISE_OR, Prim.BITWISE_XOR, Prim.ARGMAX, Prim.FLOOR_DIVIDE}
        | {Prim.ARGSORT, Prim.TOPK}
        | {Prim.FULL, Prim.EMPTY, Prim.IOTA, Prim.DROPOUT_NOISE, Prim.RANDOM_VALUES}
        | {Prim.UNPACK_SEQUENCE, Prim.UNPACK_DICT}
        | {Prim.SIZE}
        | {Prim.COPY_, Prim.COPY_TO, Prim.SDPA_BACKWARD, Prim.STOP_GRADIENT}
        | {Prim.CONVOLUTION_BACKWARD}
    ) == NONDIFFERENTIABLE


def test_min_cut_finds_the_cheapest_separating_edges():
    graph = FlowGraph(6)
    for u, v, capacity in [(0, 1, 10), (0, 2, 10), (1, 3, 4), (2, 4, 9), (3, 5, 10), (4, 5, 10), (1, 2, 2), (4, 3, 6)]:
        graph.add_edge(u, v, capacity)
    total, source_side = graph.min_cut(0, 5)
    assert total == 13 and source_side == {0, 1, 2}
    blocked = FlowGraph(3)
    blocked.add_edge(0, 1, INFINITE)
    blocked.add_edge(1, 2, 7)
    assert blocked.min_cut(0, 2) == (7, {0, 1})


def test_of_equal_min_cuts_the_one_closest_to_the_sink_is_taken():
    chain = FlowGraph(4)
    for u in range(3):
        chain.add_edge(u, u + 1, 5)
    assert chain.min_cut(0, 3) == (5, {0, 1, 2})


UNARY = {
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "exp": lambda t: torch.exp(t.clamp(max=3)),
    "sin": torch.sin,
    "square": lambda t: t * t,
    "log1p_abs": lambda t: torch.log1p(t.abs() + 0.1),
    "sqrt_shift": lambda t: torch.sqrt(t * t + 1),
    "relu": torch.relu,
    "neg": torch.neg,
}
BINARY = {
    "add": torch.add,
    "sub": torch.sub,
    "mul": torch.mul,
    "div": lambda a, b: a / (b * b + 1),
    "maximum": torch.maximum,
    "where": lambda a, b: torch.where(a > b, a * 2, b),
}
REDUCTIONS = {
    "sum": lambda t, d: t.sum(d, keepdim=True),
    "mean": lambda t, d: t.mean(d, keepdim=True),
    "amax": lambda t, d: t.amax(d, keepdim=True),
    "softmax": lambda t, d: torch.softmax(t, d),
}


@st.composite
def programs(draw):
    steps = []
    for _ in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["unary", "binary", "reduction"]))
        table = {"unary": UNARY, "binary": BINARY, "reduction": REDUCTIONS}[kind]
        name = draw(st.sampled_from(sorted(table)))
        steps.append((kind, name, draw(st.integers(0, 10)), draw(st.integers(0, 10)), draw(st.integers(0, 1))))
    return steps


def run(steps, x, y):
    env = [x, y]
    for kind, name, i, j, dim in steps:
        a, b = env[i % len(env)], env[j % len(env)]
        if kind == "unary":
            env.append(UNARY[name](a))
        elif kind == "binary":
            env.append(BINARY[name](a, b))
        else:
            env.append(REDUCTIONS[name](a, dim % a.ndim))
    return env[-1], env[-2]


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.integers(0, 2**16), st.sampled_from([(3, 4), (1, 5)]))
def test_random_elementwise_and_reduction_programs_match_eager_gradients(steps, seed, shape):
    note(str(steps))
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=generator)
    y = torch.randn(shape[-1], generator=generator)

    def program(x, y):
        return run(steps, x, y)

    check_gradients(program, [x, y], jfn=compiler.jit(program, executors=["torch"]), seed=seed)
