"""torch-level operations, each written as a decomposition into prims.

`registry.py` holds the table (`OPS`) and `dispatch`; each module below registers the ops of one
family. Importing this package registers them all and installs `dispatch` as what proxies call
for torch functions, Tensor methods and operators (`compiler.core.proxies.HOOKS`).
"""

from __future__ import annotations

from compiler.core import proxies
from compiler.ops import (  # noqa: F401  (each module registers its ops)
    activations,
    advanced_indexing,
    as_strided,
    batch_norm,
    bernoulli,
    bit_shifts,
    bucketing,
    complex_arithmetic,
    complex_numbers,
    conv_transpose,
    conversion,
    convolution,
    cumulative,
    einsum,
    elementwise,
    embedding,
    embedding_bag,
    experts,
    factory,
    fold,
    foreach,
    fourier,
    grid_sample,
    index_combinations,
    indexing,
    inplace,
    integration,
    interpolate,
    inverse_trig,
    layout_queries,
    likelihood_losses,
    linalg,
    local_response_norm,
    losses,
    margin_losses,
    masks,
    matrix_compositions,
    multi_head_attention,
    nn,
    norms,
    numeric_compositions,
    padding,
    pooling,
    quantiles,
    random,
    rearrange,
    reductions,
    repeat,
    scatter,
    shape,
    shape_compositions,
    sorting,
    special,
    spellings,
    stochastic_layers,
    tensor_literal,
    torch_compositions,
    triangular_solve,
    unfold,
    window_pooling,
)
from compiler.ops.registry import OPS, Op, dispatch, register, resolve, torch_name

__all__ = ["OPS", "Op", "dispatch", "register", "resolve", "torch_name"]

proxies.HOOKS.dispatch = dispatch
