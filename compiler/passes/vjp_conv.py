"""The VJP rule of `prims.convolution`: torch's convolution backward, one line per need.

The input's cotangent and the weight's (with the bias's) are two `prims.convolution_backward`
lines, so dead-code elimination drops the input's where nothing needs it (a model's first
convolution reads pixels or audio samples that require no gradient); torch computes the two
with separate kernels anyway.
"""

from __future__ import annotations

from compiler import prims
from compiler.core.ir import BoundSymbol, TensorProxy
from compiler.passes.vjp_structural import Cotangents
from compiler.prims import Prim


def _convolution(bsym: BoundSymbol, g: TensorProxy) -> Cotangents:
    a, weight, bias, stride, padding, dilation, groups = bsym.args
    geometry = (stride, padding, dilation, groups)
    (input_grad,) = prims.convolution_backward(g, a, weight, *geometry, (True, False, False))
    has_bias = isinstance(bias, TensorProxy)
    parameter_grads = prims.convolution_backward(g, a, weight, *geometry, (False, True, has_bias))
    cotangents = [(a, input_grad), (weight, parameter_grads[0])]
    return cotangents + ([(bias, parameter_grads[1])] if has_bias else [])


CONVOLUTION_RULES = {Prim.CONVOLUTION: _convolution}
