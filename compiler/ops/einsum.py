"""torch.einsum as permutes, sums, broadcast multiplies and (batched) matmuls.

The equation becomes a list of labels per operand and one for the output: a letter, or ".k" for
the k-th of the dims "..." covers (right-aligned across operands, so those dims broadcast). Each
operand first takes the diagonal of a repeated letter and drops a size-1 dim whose label is
larger elsewhere (it broadcasts). The operands are then contracted left to right, two at a time:
a label no later operand and not the output needs is summed as soon as one operand alone holds
it, and the labels the two share and that are not needed later are summed by one (batched)
matmul, as torch does; two operands sharing no such label are multiplied with broadcasting.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import torch

from compiler import prims
from compiler.core import dtypes
from compiler.core.errors import called_at, check
from compiler.core.ir import TensorProxy, same_size, size_product
from compiler.ops import reductions
from compiler.ops.elementwise import mul
from compiler.ops.linalg import _matmul
from compiler.ops.operands import to_dtype
from compiler.ops.registry import register
from compiler.ops.shape import reshape


def _einsum_check(cond: bool, equation: str, problem: Callable[[], str]) -> None:
    check(cond, lambda: f"einsum('{equation}'): {problem()}{called_at()}", ValueError)


def _describe(label: str) -> str:
    return f"subscript {label}" if label[0] != "." else f"dim {label[1:]} of '...'"


def _is_one(size: Any) -> bool:
    return type(size) is int and size == 1


_SUBLIST_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def _sublist_term(sublist: Any) -> str:
    """A term of the equation from torch's sublist format ([0, 1], [..., 2]: ints in [0, 52))."""
    letters = []
    for s in sublist:
        check(
            s is Ellipsis or (isinstance(s, int) and 0 <= s < len(_SUBLIST_LETTERS)),
            lambda s=s: f"einsum: subscript {s!r} in a sublist is not ... or an int in [0, 52){called_at()}",
            ValueError,
        )
        letters.append("..." if s is Ellipsis else _SUBLIST_LETTERS[s])
    return "".join(letters)


def _einsum_arguments(args: tuple) -> tuple[str, list]:
    """(equation, operands) of einsum(eq, *operands), einsum(eq, [operands]) or einsum(a, [0, 1], ...)."""
    if args and isinstance(args[0], TensorProxy):
        equation = ",".join(_sublist_term(s) for s in args[1::2])
        if len(args) % 2:
            equation += "->" + _sublist_term(args[-1])
        return equation, list(args[:-1:2] if len(args) % 2 else args[::2])
    check(
        bool(args) and isinstance(args[0], str),
        lambda: (
            f"einsum: expected the equation string first, got {type(args[0]).__name__ if args else 'nothing'}"
            f"{called_at()}"
        ),
        TypeError,
    )
    operands = args[1:]
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = operands[0]
    return args[0], list(operands)


def _parse_term(equation: str, term: str, where: str) -> list[str]:
    """One term's subscripts in order: letters, and '...' for its ellipsis."""
    items: list[str] = []
    i = 0
    while i < len(term):
        if term[i] == ".":
            _einsum_check(term.startswith("...", i), equation, lambda: f"a '.' in {where} is not part of '...'")
            _einsum_check("..." not in items, equation, lambda: f"more than one '...' in {where}")
            items.append("...")
            i += 3
            continue
        c = term[i]
        _einsum_check(
            c.isascii() and c.isalpha(),
            equation,
            lambda c=c: f"invalid character {c!r} in {where}: subscripts are letters a-z and A-Z",
        )
        items.append(c)
        i += 1
    return items


def _expand(term: list[str], ellipsis: list[str], covered: int) -> list[str]:
    """`term` with its '...' replaced by the last `covered` ellipsis labels."""
    if "..." not in term:
        return term
    at = term.index("...")
    return [*term[:at], *ellipsis[len(ellipsis) - covered :], *term[at + 1 :]]


def _parse_equation(equation: str, operands: list[TensorProxy]) -> tuple[list[list[str]], list[str]]:
    """The labels of each operand's dims and of the output's dims (see above)."""
    lhs, arrow, rhs = equation.replace(" ", "").partition("->")
    terms = [_parse_term(equation, t, f"the subscripts of operand {k}") for k, t in enumerate(lhs.split(","))]
    _einsum_check(
        len(terms) == len(operands),
        equation,
        lambda: f"the equation has subscripts for {len(terms)} operand(s) but {len(operands)} operand(s) were given",
    )
    covered = []
    for k, (term, t) in enumerate(zip(terms, operands)):
        letters = len(term) - ("..." in term)
        _einsum_check(
            letters <= t.ndim if "..." in term else letters == t.ndim,
            equation,
            lambda k=k, t=t, letters=letters, term=term: (
                f"operand {k} has {t.ndim} dim(s) (shape {tuple(t.shape)}) but {letters} subscript(s); expected "
                + ("at most as many subscripts as dims around '...'" if "..." in term else "one subscript per dim")
            ),
        )
        covered.append(t.ndim - letters)
    ellipsis = [f".{i}" for i in range(max(covered, default=0))]
    inputs = [_expand(term, ellipsis, n) for term, n in zip(terms, covered)]
    if not arrow:  # torch's implicit output: '...', then the letters used once, sorted
        counts = Counter(s for term in terms for s in term if s != "...")
        return inputs, ellipsis + sorted(s for s, n in counts.items() if n == 1)
    output = _parse_term(equation, rhs, "the output's subscripts")
    for s in output:
        _einsum_check(
            s == "..." or any(s in term for term in terms),
            equation,
            lambda s=s: f"output subscript {s} does not appear in any operand's subscripts",
        )
        _einsum_check(output.count(s) == 1, equation, lambda s=s: f"output subscript {s} appears more than once")
    return inputs, _expand(output, ellipsis, len(ellipsis))


def _label_sizes(equation: str, inputs: list[list[str]], operands: list[TensorProxy]) -> dict[str, Any]:
    """Each label's size: the same in every operand, or 1 where it broadcasts (not within an operand)."""
    sizes: dict[str, Any] = {}
    for k, (labels, t) in enumerate(zip(inputs, operands)):
        own: dict[str, Any] = {}
        for label, size in zip(labels, t.shape):
            first = own.setdefault(label, size)
            _einsum_check(
                same_size(size, first),
                equation,
                lambda label=label, size=size, first=first, k=k: (
                    f"subscript {label} is repeated in operand {k} over dims of sizes {first} and {size}; "
                    "a diagonal needs equal sizes"
                ),
            )
        for label, size in own.items():
            seen = sizes.setdefault(label, size)
            if _is_one(seen):
                sizes[label] = size
                continue
            _einsum_check(
                _is_one(size) or same_size(size, seen),
                equation,
                lambda label=label, k=k, size=size, seen=seen: (
                    f"{_describe(label)} has size {size} in operand {k} but size {seen} in an earlier operand; "
                    "expected equal sizes (or 1, which broadcasts)"
                ),
            )
    return sizes


def _permuted(t: TensorProxy, perm: list[int]) -> TensorProxy:
    return t if perm == list(range(t.ndim)) else prims.permute(t, perm)


def _diagonal(t: TensorProxy, labels: list[str]) -> tuple[TensorProxy, list[str]]:
    """`t` with the dims of its first repeated label replaced by their diagonal, as its last dim."""
    label = next(s for s in labels if labels.count(s) > 1)
    dims = [d for d, s in enumerate(labels) if s == label]  # of equal sizes (_label_sizes checks)
    # The diagonal of n^r elements (the r dims flattened) is every (1 + n + ... + n^(r-1))-th one.
    # NOTE: a slice's step is an int, so a symbolic n is specialised (guarded).
    n = int(t.shape[dims[0]])
    rest = [d for d in range(t.ndim) if d not in dims]
    flat = reshape(_permuted(t, rest + dims), [*(t.shape[d] for d in rest), n ** len(dims)])
    steps = [1] * len(rest) + [sum(n**i for i in range(len(dims)))]
    return prims.slice(flat, [0] * flat.ndim, list(flat.shape), steps), [labels[d] for d in rest] + [label]


def _prepare(t: TensorProxy, labels: list[str], sizes: dict) -> tuple[TensorProxy, list]:
    """An operand with one dim per distinct label: diagonals taken, broadcasting size-1 dims dropped."""
    while len(set(labels)) < len(labels):
        t, labels = _diagonal(t, labels)
    dropped = [d for d, s in enumerate(labels) if _is_one(t.shape[d]) and not _is_one(sizes[s])]
    if dropped:
        t, labels = prims.squeeze(t, dropped), [s for d, s in enumerate(labels) if d not in dropped]
    return t, labels


def _sum_labels(t: TensorProxy, labels: list[str], keep: set[str], alone: bool) -> tuple[TensorProxy, list[str]]:
    """`t` summed over the dims whose labels `keep` lacks: with torch.sum's dtypes when it is the
    only operand (integers give int64), else in its own dtype (accumulated in float32 or int64)."""
    dims = tuple(d for d, s in enumerate(labels) if s not in keep)
    if not dims:
        return t, labels
    kept = [s for s in labels if s in keep]
    if alone:
        return reductions.sum(t, dims), kept
    accumulate = dtypes.compute_dtype(t.dtype) if dtypes.is_float(t.dtype) else torch.int64
    return to_dtype(prims.sum(to_dtype(t, accumulate), dims), t.dtype), kept


def _aligned(t: TensorProxy, labels: list[str], target: list[str], shape: list) -> TensorProxy:
    """`t` with its dims in `target`'s order, broadcast to `shape` (one size per target label)."""
    t = _permuted(t, sorted(range(len(labels)), key=lambda d: target.index(labels[d])))
    dims = sorted(target.index(s) for s in labels)
    return t if len(dims) == len(shape) else prims.broadcast_in_dim(t, shape, dims)


def _contract(
    a: TensorProxy, la: list[str], b: TensorProxy, lb: list[str], keep: set[str]
) -> tuple[TensorProxy, list[str]]:
    """a times b, summed over the labels they share that `keep` lacks: one (batched) matmul."""
    a, la = _sum_labels(a, la, keep | set(lb), alone=False)
    b, lb = _sum_labels(b, lb, keep | set(la), alone=False)
    batch = [s for s in la if s in lb and s in keep]
    summed = [s for s in la if s in lb and s not in keep]
    left = [s for s in la if s not in lb]
    right = [s for s in lb if s not in la]
    labels = batch + left + right
    if not summed:  # an outer or elementwise product
        size = {**dict(zip(lb, b.shape)), **dict(zip(la, a.shape))}
        shape = [size[s] for s in labels]
        return mul(_aligned(a, la, labels, shape), _aligned(b, lb, labels, shape)), labels
    a = _permuted(a, [la.index(s) for s in batch + left + summed])
    b = _permuted(b, [lb.index(s) for s in batch + summed + right])
    nb, nl = len(batch), len(left)
    batch_sizes, left_sizes, summed_sizes = a.shape[:nb], a.shape[nb : nb + nl], a.shape[nb + nl :]
    right_sizes = b.shape[nb + len(summed) :]
    lead = [size_product(batch_sizes)] if batch else []
    k = size_product(summed_sizes)
    product = _matmul(
        reshape(a, [*lead, size_product(left_sizes), k]), reshape(b, [*lead, k, size_product(right_sizes)])
    )
    return reshape(product, [*batch_sizes, *left_sizes, *right_sizes]), labels


@register("torch.einsum")
def einsum(*args: Any) -> TensorProxy:
    """torch.einsum: explicit or implicit output, '...', diagonals, any number of operands."""
    equation, operands = _einsum_arguments(args)
    for k, t in enumerate(operands):
        check(
            isinstance(t, TensorProxy),
            lambda k=k, t=t: f"einsum('{equation}'): operand {k} must be a tensor, got {type(t).__name__}{called_at()}",
            TypeError,
        )
    inputs, output = _parse_equation(equation, operands)
    _einsum_check(
        all(t.dtype == operands[0].dtype for t in operands),
        equation,
        lambda: (
            "operands must share a dtype (torch does not promote in einsum), got "
            + ", ".join(f"{t.dtype} (operand {k})" for k, t in enumerate(operands))
        ),
    )
    sizes = _label_sizes(equation, inputs, operands)
    terms = [_prepare(t, labels, sizes) for t, labels in zip(operands, inputs)]
    result, labels = terms[0]
    if len(terms) == 1:
        result, labels = _sum_labels(result, labels, set(output), alone=True)
    for j in range(1, len(terms)):
        keep = set(output).union(*(later for _, later in terms[j + 1 :]))
        result, labels = _contract(result, labels, *terms[j], keep)
    return _permuted(result, [labels.index(s) for s in output])
