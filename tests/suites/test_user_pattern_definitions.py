"""suites/user_patterns.py through nvFuser's CPU fake: each form of a pattern compiles to the fusion
definitions of the pattern as written (the same ops, casts aside; the same bytes read; results of
the same shapes), and matches eager, forward and gradients, over dtypes, layouts and edge sizes."""

from __future__ import annotations

import functools
import re
from collections import Counter
from dataclasses import dataclass

import pytest
import torch
import torch.nn.functional as F

import compiler
from compiler import examine
from compiler.core.ir import TensorProxy
from compiler.prims import VIEWS
from suites.user_patterns import FORMS, PATTERNS, Form, Pattern, written
from tests.support.nvfuser_helpers import fake_nvfuser  # noqa: F401 - a fixture

_OPS = re.compile(r"fd\.ops\.(\w+)\(")
# casts differ by form (a float32 result, the writer's fp32 compute); sizes are how shapes are read
_NOT_COMPARED = frozenset({"cast", "size"})


def _bytes(tensors: list) -> int | None:
    """The bytes of these tensors; None where a size is symbolic."""
    if any(type(size) is not int for p in tensors for size in p.shape):
        return None
    return sum(p.dtype.itemsize * int(torch.Size(p.shape).numel()) for p in tensors)


@dataclass(frozen=True)
class Definition:
    """What one fusion reads, the shapes it writes and the nvFuser ops its definition uses."""

    bytes_read: int | None
    output_shapes: tuple[tuple[int, ...], ...]
    ops: tuple[tuple[str, int], ...]


def _definitions(jfn: compiler.JittedFunction) -> tuple[list[Definition], list[str]]:
    """The fusion definitions of the last call, and the tensor prims left outside them (views aside)."""
    definitions, outside = [], []
    for bsym in compiler.last_traces(jfn)[-1].bsyms:
        if getattr(bsym.sym, "executor", None) != "nvfuser":
            tensors = any(isinstance(p, TensorProxy) for p in (*bsym.inputs, *bsym.outputs))
            if bsym.sym not in VIEWS and tensors:  # sizes computed on the host are no tensor work
                outside.append(str(bsym.sym))
            continue
        source = examine.fusion_source_of(jfn, bsym.sym.name)
        ops = Counter(op for op in _OPS.findall(source) if op not in _NOT_COMPARED)
        definitions.append(
            Definition(
                _bytes([p for p in bsym.inputs if isinstance(p, TensorProxy)]),
                tuple(tuple(p.shape) for p in bsym.outputs),
                tuple(sorted(ops.items())),
            )
        )
    return definitions, outside


def _inputs(pattern: Pattern, tokens: int, width: int, dtype: torch.dtype, seed: int, strided: bool) -> list:
    """The pattern's inputs; `strided`: the [tokens, width] ones every other column of a wider tensor."""
    gen = torch.Generator().manual_seed(seed)

    def tensor(*shape: int) -> torch.Tensor:
        if strided and len(shape) == 2:
            return (torch.randn(shape[0], 2 * shape[1], generator=gen) * pattern.scale).to(dtype)[:, ::2]
        return (torch.randn(*shape, generator=gen) * pattern.scale).to(dtype)

    args = [tensor(tokens, width) for _ in range(pattern.floating)]
    args += [tensor(width) for _ in range(pattern.vectors)]
    if pattern.targets:
        args.append(torch.randint(0, width, (tokens,), generator=gen))
    return args


@functools.cache
def _as_written(pattern: Pattern) -> tuple[list[Definition], list[str]]:
    jfn = compiler.jit(written(pattern, FORMS[0]), executors=["nvfuser", "torch"])
    jfn(*_inputs(pattern, 16, pattern.quick_width, torch.bfloat16, 0, False))
    return _definitions(jfn)


@pytest.mark.parametrize("form", FORMS[1:], ids=lambda f: f.name)
@pytest.mark.parametrize("pattern", PATTERNS, ids=lambda p: p.name)
def test_each_form_compiles_to_the_definitions_of_the_pattern_as_written(
    pattern: Pattern,
    form: Form,
    fake_nvfuser,  # noqa: F811
) -> None:
    """`.float()` before a loss, `.to` round trips and views added around a pattern must not give
    nvFuser other work: a gather from a computed float32 copy instead of the bf16 input (its own
    kernels, the copy written out and read back), or a reshape of an input inside the fusion."""
    expected = _as_written(pattern)
    assert FORMS[0].name == "as_written" and expected[0], expected
    jfn = compiler.jit(written(pattern, form), executors=["nvfuser", "torch"])
    jfn(*_inputs(pattern, 16, pattern.quick_width, torch.bfloat16, 0, False))
    definitions, outside = _definitions(jfn)
    assert outside == expected[1] == [], examine.why_not_fused(jfn)
    assert definitions == expected[0], (examine.fusions(jfn), expected[0])


def _transformers_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The loss of transformers' causal LMs: the [batch, seq, vocab] logits upcast, then flattened."""
    logits = logits.float()
    return F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1), ignore_index=-100)


def _loss_without_upcast(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1), ignore_index=-100)


def test_the_transformers_loss_compiles_to_the_definition_of_the_loss_without_its_upcast(
    fake_nvfuser,  # noqa: F811
) -> None:
    """`logits.float().view(-1, vocab)`: the view moves before the upcast, so torch views the bf16
    logits and the fusion gathers the targets from its input (`take_along_axis`)."""
    logits = torch.randn(2, 8, 64, generator=torch.Generator().manual_seed(0)).bfloat16()
    labels = torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(1))
    labels[0, 3] = -100
    found = []
    for fn in (_loss_without_upcast, _transformers_loss):
        jfn = compiler.jit(fn, executors=["nvfuser", "torch"])
        torch.testing.assert_close(jfn(logits, labels).float(), fn(logits, labels).float(), rtol=1.6e-2, atol=2e-2)
        found.append(_definitions(jfn))
    assert found[1] == found[0] and found[0][1] == [], found
    assert dict(found[0][0][0].ops).get("take_along_axis") == 1


@pytest.mark.parametrize("form", FORMS, ids=lambda f: f.name)
def test_a_loss_over_token_counts_that_vary_gathers_in_fusion(form: Form, fake_nvfuser) -> None:  # noqa: F811
    """The third token count compiles symbolic sizes (automatic dynamic): the logits' and the
    targets' token counts are then two symbols, and the gather must still be nvFuser's in-fusion
    `take_along_axis` (its translator once compared those sizes by recording prims, and recursed)."""
    pattern = next(p for p in PATTERNS if p.name == "cross_entropy")
    fn = written(pattern, form)
    jfn = compiler.jit(fn, executors=["nvfuser", "torch"], fallback=False)
    for tokens in (8, 12, 20):
        args = _inputs(pattern, tokens, 32, torch.bfloat16, tokens, strided=False)
        torch.testing.assert_close(jfn(*args), fn(*args), rtol=1.6e-2, atol=2e-2)
    assert compiler.cache_stats(jfn).misses == 2
    (definition,), outside = _definitions(jfn)
    assert outside == [], outside
    assert dict(definition.ops).get("take_along_axis") == 1 and "gather" not in dict(definition.ops), definition


_TOLERANCES = {torch.bfloat16: (1.6e-2, 2e-2), torch.float16: (2e-3, 2e-3), torch.float32: (2e-5, 2e-5)}


def _check_against_eager(pattern: Pattern, form: Form, dtype: torch.dtype, tokens: int, strided: bool) -> None:
    fn = written(pattern, form)
    jfn = compiler.jit(fn, executors=["nvfuser", "torch"])
    rtol, atol = _TOLERANCES[dtype]
    for seed in (0, 1):
        args = _inputs(pattern, tokens, pattern.quick_width // 4, dtype, seed, strided)
        differentiable = [a for a in args if a.is_floating_point()]
        for a in differentiable:
            a.requires_grad_(True)
        expected, actual = fn(*args), jfn(*args)
        assert actual.dtype == expected.dtype and actual.shape == expected.shape
        # NOTE: a bf16 round trip of a float32 result (cast_after) is rounded in eager only: the
        # nvFuser writer keeps that value in fp32, so it is checked with bf16's tolerance.
        result_tolerance = _TOLERANCES[torch.bfloat16] if form.rounded else (rtol, atol)
        torch.testing.assert_close(actual, expected, rtol=result_tolerance[0], atol=result_tolerance[1])
        cotangent = torch.randn(expected.shape, generator=torch.Generator().manual_seed(seed)).to(expected.dtype)
        expected_grads = torch.autograd.grad(expected, differentiable, cotangent)
        actual_grads = torch.autograd.grad(actual, differentiable, cotangent)
        for position, e, a in zip(range(len(differentiable)), expected_grads, actual_grads):
            assert a.dtype == e.dtype and a.shape == e.shape, position
            # NOTE: a weight's or bias's gradient sums over tokens: its bf16 rounding grows with its
            # size (and the writer keeps the bf16-rounded cotangent of `.float()` in fp32).
            scale = max(1.0, float(e.abs().max()))
            torch.testing.assert_close(
                a, e, rtol=rtol, atol=atol * scale, msg=lambda m, n=position: f"gradient of input {n}: {m}"
            )


@pytest.mark.parametrize("form", FORMS, ids=lambda f: f.name)
@pytest.mark.parametrize("pattern", PATTERNS, ids=lambda p: p.name)
def test_each_form_matches_eager_forward_and_gradients(pattern: Pattern, form: Form, fake_nvfuser) -> None:  # noqa: F811
    _check_against_eager(pattern, form, torch.bfloat16, 16, strided=False)


# (dtype, tokens, strided): fp16; float32 inputs that are every other column of a wider tensor;
# two tokens (the viewed form's [2, tokens / 2, width] has a size-1 dim), strided, in bf16.
_VARIANTS = ((torch.float16, 16, False), (torch.float32, 16, True), (torch.bfloat16, 2, True))


@pytest.mark.slow
@pytest.mark.parametrize("form", FORMS, ids=lambda f: f.name)
@pytest.mark.parametrize("pattern", PATTERNS, ids=lambda p: p.name)
def test_each_form_matches_eager_over_dtypes_layouts_and_edge_sizes(pattern: Pattern, form: Form, fake_nvfuser) -> None:  # noqa: F811
    for dtype, tokens, strided in _VARIANTS:
        _check_against_eager(pattern, form, dtype, tokens, strided)
