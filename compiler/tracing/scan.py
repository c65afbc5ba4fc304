"""`torch._higher_order_ops.associative_scan` while tracing (installed by `patches.BYPASSES`).

torch's own function checks that its inputs are real tensors before anything a torch function
mode sees, so a traced program (transformers' Mamba takes this path where
`torch.compiler.is_compiling()`, which tracing sets) could not call it on proxies. The traced
function replaces torch's in its module, where a program imports it when it runs (as
transformers does); a program that imported it before tracing began still holds torch's. Traced, the scan
is a log-depth inclusive prefix scan (Hillis-Steele): at offset 1, 2, 4, ... every position at
least the offset away from the start combines the value that far before it with its own, so
position i ends up as x[0] + ... + x[i] in order, for any associative `combine_fn`. Each step is
the combine function traced on whole slices (elementwise work a fusion takes), not one call per
position; a sequential loop would trace as many calls as the scanned dimension is long.

Assumes: `combine_fn` is pure and associative, every leaf of `xs` has one shape (as torch
requires), and `combine_fn` treats a leading dimension as a batch of positions, as elementwise
ops, matmul and ops over trailing dimensions do: torch calls it on batches of positions too, in
"generic" mode through `vmap`, which tracing does not have. Guarantees: the result is torch's up
to the rounding of another association order, which torch's scan does not fix either.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import torch
import torch.utils._pytree as pytree

from compiler.core.errors import check
from compiler.core.ir import TensorProxy, proxies_in


def traced_scan(original: Callable) -> Callable:
    """`associative_scan` that scans proxies by `prefix_scan` and real tensors by `original`."""

    def associative_scan(
        combine_fn: Callable[[Any, Any], Any], xs: Any, dim: int, reverse: bool = False, combine_mode: str = "pointwise"
    ) -> Any:
        if not any(isinstance(p, TensorProxy) for p in proxies_in(xs)):
            return original(combine_fn, xs, dim, reverse=reverse, combine_mode=combine_mode)
        return prefix_scan(combine_fn, xs, dim, reverse)

    associative_scan.__wrapped__ = original  # type: ignore[attr-defined]
    return associative_scan


def prefix_scan(combine_fn: Callable[[Any, Any], Any], xs: Any, dim: int, reverse: bool = False) -> Any:
    """The inclusive scan of `xs` (a tensor or a pytree of same-shaped tensors) along `dim` with
    `combine_fn(earlier, later)`, from the end when `reverse`, in log2(length) combine calls."""
    leaves, spec = pytree.tree_flatten(xs)
    check(len(leaves) > 0, lambda: "associative_scan was given no tensors to scan (xs has no leaves)", ValueError)
    check(
        all(tuple(leaf.shape) == tuple(leaves[0].shape) for leaf in leaves),
        lambda: f"associative_scan's xs must have one shape; got {[tuple(x.shape) for x in leaves]}",
        ValueError,
    )
    dim = dim % leaves[0].dim()
    # NOTE: as torch does, the scan runs along a leading dimension, flipped when reversed
    leaves = [leaf.movedim(dim, 0) for leaf in leaves]
    if reverse:
        leaves = [leaf.flip(0) for leaf in leaves]
    length = leaves[0].shape[0]
    offset = 1
    while offset < length:
        earlier = spec.unflatten([leaf.narrow(0, 0, length - offset) for leaf in leaves])
        later = spec.unflatten([leaf.narrow(0, offset, length - offset) for leaf in leaves])
        combined = pytree.tree_leaves(combine_fn(earlier, later))
        leaves = [torch.cat([leaf.narrow(0, 0, offset), part], 0) for leaf, part in zip(leaves, combined)]
        offset *= 2
    if reverse:
        leaves = [leaf.flip(0) for leaf in leaves]
    return spec.unflatten([leaf.movedim(0, dim) for leaf in leaves])


def install() -> Callable[[], None]:
    """Puts `traced_scan` in place of torch's `associative_scan` (where programs import it from);
    returns how to put torch's back."""
    module = sys.modules.get("torch._higher_order_ops.associative_scan")
    if module is None:
        import torch._higher_order_ops.associative_scan  # noqa: F401

        module = sys.modules["torch._higher_order_ops.associative_scan"]
    original = module.associative_scan
    module.associative_scan = traced_scan(original)

    def undo() -> None:
        module.associative_scan = original

    return undo
