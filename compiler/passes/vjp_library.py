"""VJP rules of the prims torch runs with library kernels: convolution (cuDNN) and grouped_mm
(a mixture of experts' GEMMs).

A convolution's input cotangent and its weight's (with the bias's) are two
`prims.convolution_backward` lines, so dead-code elimination drops the input's where nothing needs
it (a model's first convolution reads pixels or audio samples that require no gradient); torch
computes the two with separate kernels anyway. A `prims.convolution_backward` that asks for the
input's cotangent alone is a transposed convolution (ops/conv_transpose.py): its operand's cotangent
is the convolution of the incoming one, and the weight's is a convolution's weight cotangent with
the roles of input and output cotangent swapped; other masks (a convolution's double backward) are
refused. It returns a tuple of one output (`TUPLE_OUTPUTS`). A grouped_mm's cotangents are grouped_mms with the
same offsets, in the mode that sums over each group's rows for the per-group matrices.
"""

from __future__ import annotations

from compiler import prims
from compiler.core.errors import check
from compiler.core.ir import BoundSymbol, TensorProxy
from compiler.passes.vjp_structural import Cotangents, transpose
from compiler.prims import Prim


def _convolution(bsym: BoundSymbol, g: TensorProxy) -> Cotangents:
    a, weight, bias, stride, padding, dilation, groups = bsym.args
    geometry = (stride, padding, dilation, groups)
    (input_grad,) = prims.convolution_backward(g, a, weight, *geometry, (True, False, False))
    has_bias = isinstance(bias, TensorProxy)
    parameter_grads = prims.convolution_backward(g, a, weight, *geometry, (False, True, has_bias))
    cotangents = [(a, input_grad), (weight, parameter_grads[0])]
    return cotangents + ([(bias, parameter_grads[1])] if has_bias else [])


def _transposed_convolution(bsym: BoundSymbol, g: TensorProxy) -> Cotangents:
    x, _stand_in, weight, stride, padding, dilation, groups, output_mask = bsym.args
    check(
        tuple(output_mask) == (True, False, False),
        lambda: (
            f"autodiff: no VJP rule for a convolution's backward with output_mask {output_mask} (a double "
            "backward); only the input's cotangent alone (a transposed convolution) is differentiated"
        ),
        NotImplementedError,
    )
    geometry = (stride, padding, dilation, groups)
    (weight_grad,) = prims.convolution_backward(x, g, weight, *geometry, (False, True, False))
    return [(x, prims.convolution(g, weight, None, *geometry)), (weight, weight_grad)]


def _grouped_mm(bsym: BoundSymbol, g: TensorProxy) -> Cotangents:
    a, b, offs = bsym.args
    if b.ndim == 3:  # a [rows, k] @ b [groups, k, n]: g [rows, n]
        return [(a, prims.grouped_mm(g, transpose(b), offs)), (b, prims.grouped_mm(transpose(a), g, offs))]
    # a [k, rows] @ b [rows, n] -> g [groups, k, n]
    a_grad = transpose(prims.grouped_mm(b, transpose(g), offs))
    return [(a, a_grad), (b, prims.grouped_mm(transpose(a), g, offs))]


LIBRARY_RULES = {
    Prim.CONVOLUTION: _convolution,
    Prim.CONVOLUTION_BACKWARD: _transposed_convolution,
    Prim.GROUPED_MM: _grouped_mm,
}
# Prims returning a tuple whose first output alone takes a cotangent.
TUPLE_OUTPUTS = frozenset({Prim.CONVOLUTION_BACKWARD})
