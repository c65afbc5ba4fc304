"""The strides of a tensor argument with symbolic sizes, written in those sizes.

A CUDA-graphed entry guards every tensor argument's strides (its graphs bake them in, and their
key leaves them out). With a symbolic size, the strides of a dense layout change with it: a
contiguous (2, n) tensor has strides (n, 1). Guarding the traced values would reject every other
n; guarding `(x_size1, 1)` accepts exactly the dense layouts of the same dim order, whatever n is.

A layout is dense when its dims with a nonzero stride, ordered by stride (innermost first), each
have the stride of the product of the sizes inside them; stride-0 dims (broadcast) stay 0. A
size-1 dim's stride is free in torch: where it equals one of those products it is written as that
product, else it stays a number. Whatever is written is guarded as an equality, so a layout that
does not fit only misses the entry.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

Multiply = Callable[[Any, Any], Any]


def dense_strides(sizes: Sequence[Any], strides: Sequence[int], values: Sequence[int], multiply: Multiply) -> tuple:
    """The strides of a tensor with these traced `sizes` (ints or symbolic sizes, whose values are
    `values`) and actual `strides`, as products of the sizes where the layout is dense (see the
    module); the strides themselves where it is not. `multiply(a, b)` records a product."""
    inner = sorted((d for d in range(len(sizes)) if strides[d] != 0 and values[d] != 1), key=lambda d: (strides[d], -d))
    written: list[Any] = list(strides)
    products: dict[int, Any] = {1: 1}  # value -> its expression, for each product along the chain
    running, running_value = 1, 1
    for d in inner:
        if strides[d] != running_value:
            return tuple(strides)
        written[d] = running
        running = multiply(running, sizes[d])
        running_value *= values[d]
        products[running_value] = running
    for d in range(len(sizes)):
        if values[d] == 1 and strides[d] != 0:
            written[d] = products.get(strides[d], strides[d])
    return tuple(written)
