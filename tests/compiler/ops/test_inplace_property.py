"""Property test: random short programs of in-place and out-of-place ops over inputs and views of
them (and of intermediates) agree with eager PyTorch on every value they return and on every
input's final contents, and share memory among them where eager's do; every pass is checked on the
way (tests/support/inplace_util.py).

A program is drawn step by step while running it eagerly on example tensors: a step eager
rejects (shapes that do not broadcast, a `view` that needs a copy) is dropped. Never drawn:
writes into expanded views, which the compiler rejects on purpose, and writes whose source
partially overlaps the target, whose eager result depends on the kernel's iteration order (the
compiled program reads the whole source first). The program returns every value it made, inputs
included.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import compiler
from tests.support.inplace_util import assert_same, check_passes, clone_args, sharing

SHAPES = [(4, 6), (6,), (2, 3, 4), (1, 6)]


@dataclass(frozen=True)
class Step:
    """One statement: `run(env)` returns a new value (appended to env) or None (a write)."""

    text: str
    run: Callable[[list], Any]


def interpret(steps: list[Step], inputs: tuple) -> tuple:
    env = list(inputs)
    for step in steps:
        result = step.run(env)
        if result is not None:
            env.append(result)
    return tuple(env)


def _dims(data: Any, t: torch.Tensor) -> int:
    return data.draw(st.integers(0, t.ndim - 1))


def _view(data: Any, i: int, t: torch.Tensor, reshapes: bool = True) -> tuple[Step, bool] | None:
    """A view of env[i]: (the step, whether writes into it stay allowed); a reshape or `view` only
    with `reshapes`."""
    kinds = ["unsqueeze", *(["reshape", "view"] if reshapes else []), "contiguous", "none_ellipsis"]
    if t.ndim >= 1:
        kinds += ["slice", "index", "narrow", "split", "chunk", "expand", "squeeze"]
    if t.ndim >= 2:
        kinds += ["transpose", "permute"]
    kind = data.draw(st.sampled_from(kinds))
    if kind in ("slice", "index", "narrow", "split", "chunk", "squeeze"):
        d = _dims(data, t)
        size = t.shape[d]
        lead = (slice(None),) * d
        if kind == "slice":
            a, b = data.draw(st.integers(-size, size)), data.draw(st.integers(-size, size))
            s = data.draw(st.sampled_from([1, 1, 2]))
            key = (*lead, slice(a, b, s))
            return Step(f"x{i}[{key}]", lambda env: env[i][key]), True
        if kind == "index":
            key = (*lead, data.draw(st.integers(-size, max(size - 1, -size))))
            return Step(f"x{i}[{key}]", lambda env: env[i][key]), True
        if kind == "narrow":
            start = data.draw(st.integers(0, size))
            length = data.draw(st.integers(0, size - start))
            return Step(f"x{i}.narrow({d}, {start}, {length})", lambda env: env[i].narrow(d, start, length)), True
        if kind == "squeeze":
            return Step(f"x{i}.squeeze({d})", lambda env: env[i].squeeze(d)), True
        if size == 0:
            return None  # NOTE: ops/shape.py's chunk of an empty dim returns one piece, eager `chunks`
        pieces = data.draw(st.integers(1, 3))
        j = data.draw(st.integers(0, 2))
        method = "split" if kind == "split" else "chunk"
        return Step(f"x{i}.{method}({pieces}, {d})[{j}]", lambda env: getattr(env[i], method)(pieces, d)[j]), True
    if kind in ("transpose", "permute"):
        perm = data.draw(st.permutations(range(t.ndim)))
        if kind == "transpose":
            d0, d1 = _dims(data, t), _dims(data, t)
            return Step(f"x{i}.transpose({d0}, {d1})", lambda env: env[i].transpose(d0, d1)), True
        return Step(f"x{i}.permute({perm})", lambda env: env[i].permute(perm)), True
    if kind == "unsqueeze":
        d = data.draw(st.integers(0, t.ndim))
        return Step(f"x{i}.unsqueeze({d})", lambda env: env[i].unsqueeze(d)), True
    if kind in ("reshape", "view"):
        numel = t.numel()
        first = data.draw(st.sampled_from([n for n in (1, 2, 3, 4, 6, 8, 12) if numel % n == 0] or [1]))
        shape = data.draw(st.sampled_from([(-1,), (first, -1), (-1, first, 1)]))
        return Step(f"x{i}.{kind}({shape})", lambda env: getattr(env[i], kind)(shape)), True
    if kind == "contiguous":
        return Step(f"x{i}.contiguous()", lambda env: env[i].contiguous()), True
    if kind == "expand":
        return Step(
            f"x{i}.unsqueeze(0).expand(2, ...)", lambda env: env[i].unsqueeze(0).expand(2, *env[i].shape)
        ), False
    return Step(f"x{i}[None, ..., :2]", lambda env: env[i][None, ..., :2] if env[i].ndim else env[i][None]), True


def _broadcasts_to(shape: torch.Size, target: torch.Size) -> bool:
    return len(shape) <= len(target) and all(s in (1, t) for s, t in zip(reversed(shape), reversed(target)))


def _partially_overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether writing `a` while reading `b` has an order-dependent result in eager mode (eager
    does not always reject it: `x.add_(x[:, 4:5])` reads column 4 after updating it)."""
    if a.untyped_storage().data_ptr() != b.untyped_storage().data_ptr() or not a.numel() or not b.numel():
        return False
    same = a.data_ptr() == b.data_ptr() and a.shape == b.shape and a.stride() == b.stride()
    return not same


def _other(data: Any, env: list, t: torch.Tensor) -> int | None:
    """An env index whose value broadcasts to `t`'s shape and does not partially overlap it."""
    fits = [j for j, e in enumerate(env) if _broadcasts_to(e.shape, t.shape) and not _partially_overlaps(t, e)]
    return data.draw(st.sampled_from(fits)) if fits else None


def _pure(data: Any, i: int, env: list) -> Step:
    kind = data.draw(st.sampled_from(["sin", "scale", "add", "clone", "where"]))
    if kind == "sin":
        return Step(f"x{i}.sin()", lambda env: env[i].sin())
    if kind == "scale":
        c = data.draw(st.sampled_from([2, -0.5, 3.0]))
        return Step(f"x{i} * {c}", lambda env: env[i] * c)
    if kind == "clone":
        return Step(f"x{i}.clone()", lambda env: env[i].clone())
    j = data.draw(st.integers(0, len(env) - 1))
    if kind == "add":
        return Step(f"torch.add(x{i}, x{j}, alpha=2)", lambda env: torch.add(env[i], env[j], alpha=2))
    return Step(f"torch.where(x{i} > 0, x{i}, x{j})", lambda env: torch.where(env[i] > 0, env[i], env[j]))


def _statement(text: str, call: Callable[[list], Any]) -> Step:
    """A write: runs `call` for its effect and yields no new value."""

    def run(env: list) -> None:
        call(env)

    return Step(text, run)


def _write(data: Any, i: int, env: list) -> Step | None:
    t = env[i]
    kinds = ["add_", "mul_", "copy_", "zero_", "fill_", "setitem", "iadd", "lerp_", "addcmul_", "clamp_", "neg_", "out"]
    kind = data.draw(st.sampled_from(kinds))
    if kind == "zero_":
        return _statement(f"x{i}.zero_()", lambda env: env[i].zero_())
    if kind == "neg_":
        return _statement(f"x{i}.neg_()", lambda env: env[i].neg_())
    if kind == "clamp_":
        return _statement(f"x{i}.clamp_(-0.5, 0.7)", lambda env: env[i].clamp_(-0.5, 0.7))
    if kind == "fill_":
        c = data.draw(st.sampled_from([0.25, -3.0, 7]))
        return _statement(f"x{i}.fill_({c})", lambda env: env[i].fill_(c))
    if kind == "setitem":
        d = _dims(data, t) if t.ndim else None
        key = Ellipsis if d is None else (*(slice(None),) * d, slice(data.draw(st.integers(0, t.shape[d])), None))
        c = data.draw(st.sampled_from([1.5, -2.0]))
        return _statement(f"x{i}[{key}] = {c}", lambda env: operator.setitem(env[i], key, c))
    j = _other(data, env, t)
    if j is None:
        return None
    calls = {
        "add_": (f"x{i}.add_(x{j}, alpha=-0.5)", lambda env: env[i].add_(env[j], alpha=-0.5)),
        "mul_": (f"x{i}.mul_(x{j})", lambda env: env[i].mul_(env[j])),
        "copy_": (f"x{i}.copy_(x{j})", lambda env: env[i].copy_(env[j])),
        "iadd": (f"x{i} += x{j}", lambda env: operator.iadd(env[i], env[j])),
        "lerp_": (f"x{i}.lerp_(x{j}, 0.25)", lambda env: env[i].lerp_(env[j], 0.25)),
        "addcmul_": (f"x{i}.addcmul_(x{j}, x{j}, value=0.5)", lambda env: env[i].addcmul_(env[j], env[j], value=0.5)),
        "out": (f"torch.mul(x{j}, 3, out=x{i})", lambda env: torch.mul(env[j], 3, out=env[i])),
    }  # fmt: skip
    if kind == "out" and env[j].shape != t.shape:
        return None
    text, call = calls[kind]
    return _statement(text, call)


@st.composite
def programs(draw: Any) -> tuple[tuple, list[Step]]:
    data = draw(st.data())
    shapes = draw(st.lists(st.sampled_from(SHAPES), min_size=1, max_size=3))
    generator = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    inputs = [torch.randn(s, generator=generator) for s in shapes]
    if len(inputs) > 1 and shapes[0] == shapes[1] and draw(st.booleans()):
        inputs[1] = inputs[0]  # the same tensor passed twice
    env = list(clone_args(tuple(inputs)))
    writable = [True] * len(env)
    # NOTE: values laid out otherwise than eager's (a `.contiguous()` copy of a non-contiguous tensor,
    # and what is made from it: the xfailed test_a_returned_reshape_of_a_contiguous_copy_shares_the_copys_memory
    # in test_inplace_aliasing.py) are never reshaped or viewed, where eager's view would be ours' copy
    unlike = [False] * len(env)
    steps: list[Step] = []
    for _ in range(draw(st.integers(3, 10))):
        # half the time act on the newest value (often a view just made), else on any
        i = len(env) - 1 if draw(st.booleans()) else draw(st.sampled_from(range(len(env))))
        kind = draw(st.sampled_from(["view", "view", "pure", "write", "write", "write"]))
        allowed = True
        if kind == "view":
            view = _view(data, i, env[i], reshapes=not unlike[i])
            step, allowed = view if view is not None else (None, False)
            allowed = allowed and writable[i]
        elif kind == "pure":
            step = _pure(data, i, env)
        else:
            step = _write(data, i, env) if writable[i] else None
        if step is None:
            continue
        read = {int(k) for k in re.findall(r"\bx(\d+)", step.text)}
        try:
            result = step.run(env)
        except (RuntimeError, IndexError, ValueError):
            continue  # eager rejects it
        if result is not None:
            copied = step.text.endswith(".contiguous()") and not env[i].is_contiguous()
            step = Step(f"x{len(env)} = {step.text}", step.run)
            env.append(result)
            writable.append(allowed)
            unlike.append(copied or any(unlike[k] for k in read))
        steps.append(step)
    return tuple(inputs), steps


# NOTE: derandomized: the same 300 programs every run, so CI is deterministic; a known layout limit
# (a fresh copy laid out as its permuted operand: the xfailed test in test_inplace_aliasing.py) fails
# on rare programs, found by a random seed (x1 = x0.sin(); x2 = x1.reshape(-1); x1.transpose(0, 1).zero_())
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(programs())
def test_random_inplace_programs_agree_with_eager(program):
    inputs, steps = program
    note("\n".join(step.text for step in steps))

    def fn(*args):
        return interpret(steps, args)

    eager_args, jit_args = clone_args(inputs), clone_args(inputs)
    expected = fn(*eager_args)
    jfn = compiler.jit(fn)
    actual = jfn(*jit_args)
    # NOTE: lerp_/addcmul_ round differently from ATen's fused kernels, and squaring repeats
    # that; wrong aliasing gives O(1) errors.
    assert_same(actual, expected, exact=1e-4, what="output")
    assert_same(jit_args, eager_args, exact=1e-4, what="inputs after the call")
    # which returned values and inputs share memory, as in eager (a write into one reaches the others)
    assert sharing((*jit_args, *actual)) == sharing((*eager_args, *expected))
    check_passes(jfn, inputs, expected, eager_args, exact=1e-4)
