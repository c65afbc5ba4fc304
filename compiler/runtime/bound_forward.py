"""`compiler.jit(model.forward)`: a module's bound method jitted as the module it belongs to.

A bound method reads its module's parameters as attributes, which a jitted function must receive
as arguments; jitted as a module, they are inputs of the traces. `BoundMethod` is that module: its
forward calls the method's function on the owner, so it runs the class's method even after the
user replaced `model.forward` by the jitted one (as `model.generate()` needs: it calls
`self.forward`), and it has the method's signature (which `generate` reads).
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

from torch import nn


def is_module_method(fn: Any) -> bool:
    """Whether `fn` is a method bound to an `nn.Module` (`model.forward`, `model.decode`, ...)."""
    return inspect.ismethod(fn) and isinstance(fn.__self__, nn.Module)


class BoundMethod(nn.Module):
    """`method` (bound to a module, its `owner` submodule here) as the forward of a module."""

    def __init__(self, method: Any) -> None:
        super().__init__()
        self.owner = method.__self__
        function = method.__func__
        owner = self.owner

        @functools.wraps(method)
        def forward(*args: Any, **kwargs: Any) -> Any:
            return function(owner, *args, **kwargs)

        self.forward = forward  # NOTE: an instance attribute, so that it carries the method's signature
