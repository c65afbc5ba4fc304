"""`Module.to` / `.float()` / `.half()` / `.cuda()` ... called inside a traced forward.

Some models convert a submodule on every call to the dtype they want it in (SwitchTransformers'
router: `self.classifier = self.classifier.to(self.dtype)`); with the module's own dtype and device
that changes nothing. Each of these methods goes through `nn.Module._apply(fn)`, which would swap
the parameters' `.data` for `fn`'s results, something torch refuses on the trace's proxies. While a
module is traced (`applied`), `_apply` on a module whose tensors are proxies asks `fn` of every
parameter and buffer: where each comes back as itself (the conversion ops return their input when
nothing changes, as torch does), the call is a no-op that returns the module; where one would really
change, it is one line naming the method, the tensor and the user's source line (the module is
named by the error's `[while tracing ...]` suffix, `ModuleLayout.forward`). Modules whose tensors are
real (not traced here, or another thread's) run torch's own `_apply`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from itertools import chain
from typing import Any

from torch import nn

from compiler.core.errors import called_at
from compiler.core.ir import TensorProxy
from compiler.tracing.patches import _SharedPatch

_TORCH_APPLY = nn.Module._apply


def _traced_apply(module: nn.Module, fn: Callable[[Any], Any], recurse: bool = True) -> nn.Module:
    """`nn.Module._apply` over traced tensors: the module itself when `fn` changes none of them."""
    tensors = list(chain(module.named_parameters(recurse=recurse), module.named_buffers(recurse=recurse)))
    if not any(type(tensor) is TensorProxy for _, tensor in tensors):
        return _TORCH_APPLY(module, fn, recurse)
    method = sys._getframe(1).f_code.co_name  # to, float, half, cuda, ...: the nn.Module method that called
    for name, tensor in tensors:
        converted = fn(tensor)
        if converted is not tensor:
            raise NotImplementedError(
                f"Module.{method}() inside the traced forward would convert {name!r} ({tensor.dtype} on "
                f"{tensor.device} -> {converted.dtype} on {converted.device}), which the fusebench compiler "
                f"cannot trace: convert the model before compiling it{called_at()}"
            )
    return module


def _install() -> Callable[[], None]:
    nn.Module._apply = _traced_apply

    def undo() -> None:
        nn.Module._apply = _TORCH_APPLY

    return undo


# NOTE: shared by the traces of every thread, as the other patches (patches._SharedPatch)
TRACED_MODULE_CONVERSIONS = _SharedPatch(_install)
