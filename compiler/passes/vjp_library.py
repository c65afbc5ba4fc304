"""VJP rules of the prims torch runs with library kernels: convolution (cuDNN) and grouped_mm
(a mixture of experts' GEMMs).

A convolution's input cotangent and its weight's (with the bias's) are two
`prims.convolution_backward` lines, so dead-code elimination drops the input's where nothing needs
it (a model's first convolution reads pixels or audio samples that require no gradient); torch
computes the two with separate kernels anyway. A grouped_mm's cotangents are grouped_mms with the
same offsets, in the mode that sums over each group's rows for the per-group matrices.
"""

from __future__ import annotations

from compiler import prims
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


def _grouped_mm(bsym: BoundSymbol, g: TensorProxy) -> Cotangents:
    a, b, offs = bsym.args
    if b.ndim == 3:  # a [rows, k] @ b [groups, k, n]: g [rows, n]
        return [(a, prims.grouped_mm(g, transpose(b), offs)), (b, prims.grouped_mm(transpose(a), g, offs))]
    # a [k, rows] @ b [rows, n] -> g [groups, k, n]
    a_grad = transpose(prims.grouped_mm(b, transpose(g), offs))
    return [(a, a_grad), (b, prims.grouped_mm(transpose(a), g, offs))]


LIBRARY_RULES = {Prim.CONVOLUTION: _convolution, Prim.GROUPED_MM: _grouped_mm}
