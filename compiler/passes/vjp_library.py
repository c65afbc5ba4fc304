"""VJP rules of the prims torch runs with library kernels: convolution and the transposed
convolution (cuDNN) and grouped_mm (a mixture of experts' GEMMs).

A convolution's input cotangent and its weight's (with the bias's) are two
`prims.convolution_backward` lines, so dead-code elimination drops the input's where nothing needs
it (a model's first convolution reads pixels or audio samples that require no gradient); torch
computes the two with separate kernels anyway. A transposed convolution is the convolution's input
cotangent, so its operand's cotangent is the convolution of the incoming one and its weight's is a
convolution's weight cotangent with the roles of input and output cotangent swapped (where an
`output_padding` of the stride or more gives that convolution more positions than the operand has,
the operand's cotangent is cut to them and the operand is grown by zeros for the weight's); its bias's is the sum
over all dims but the channels. A grouped_mm's cotangents are grouped_mms with the
same offsets, in the mode that sums over each group's rows for the per-group matrices.
"""

from __future__ import annotations

from compiler import prims
from compiler.core.ir import BoundSymbol, TensorProxy
from compiler.passes.vjp_structural import Cotangents, sliced, transpose, zeros_shaped
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
    x, weight, bias, stride, padding, dilation, groups, output_padding = bsym.args
    geometry = (stride, padding, dilation, groups)
    # NOTE: along a dim whose output_padding reaches the stride, the convolution of g has more positions
    # than x (output_padding // stride more): x's cotangent is cut to its own, and the weight's takes x
    # with zeros there (positions that add nothing)
    grown = x
    for d, (o, s) in enumerate(zip(output_padding, stride), start=2):
        if o >= s:
            grown = prims.cat([grown, zeros_shaped(grown, d, o // s)], d)
    (weight_grad,) = prims.convolution_backward(grown, g, weight, *geometry, (False, True, False))
    x_grad = sliced(prims.convolution(g, weight, None, *geometry), [0] * x.ndim, list(x.shape))
    cotangents = [(x, x_grad), (weight, weight_grad)]
    if isinstance(bias, TensorProxy):
        cotangents.append((bias, prims.sum(g, (0, *range(2, g.ndim)))))
    return cotangents


def _grouped_mm(bsym: BoundSymbol, g: TensorProxy) -> Cotangents:
    a, b, offs = bsym.args
    if b.ndim == 3:  # a [rows, k] @ b [groups, k, n]: g [rows, n]
        return [(a, prims.grouped_mm(g, transpose(b), offs)), (b, prims.grouped_mm(transpose(a), g, offs))]
    # a [k, rows] @ b [rows, n] -> g [groups, k, n]
    a_grad = transpose(prims.grouped_mm(b, transpose(g), offs))
    return [(a, a_grad), (b, prims.grouped_mm(transpose(a), g, offs))]


LIBRARY_RULES = {
    Prim.CONVOLUTION: _convolution,
    Prim.CONVOLUTION_TRANSPOSE: _transposed_convolution,
    Prim.GROUPED_MM: _grouped_mm,
}
