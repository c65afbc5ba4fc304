"""A jitted `nn.Module`: each call reads the module's tensors and modes, then runs the cache.

The cache is the one of any jitted function (`JittedFunction`): the traced function takes the
module's state and modes as its two first arguments (see compiler/tracing/module.py), so the
prologue guards them like any argument, and a new shape, dtype, device or mode compiles a new
entry while new values do not.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import nn

from compiler.runtime.cache import CacheEntry, JittedFunction
from compiler.tracing.module import ModuleLayout, forward_signature


class JittedModule(JittedFunction):
    """Calls `module` through compiled traces; `module` itself is left unchanged."""

    def __init__(
        self,
        module: nn.Module,
        make_compile_entry: Callable[[Callable], Callable[..., CacheEntry]],
        *,
        automatic_dynamic: bool = False,
        dynamic: frozenset[str] = frozenset(),
    ) -> None:
        self.module = module
        self.layout = ModuleLayout(module)

        def traced(state: dict, modes: str, *args: Any, **kwargs: Any) -> tuple:
            return self.layout.forward(state, args, kwargs)

        traced.__signature__ = forward_signature(module)
        traced.__qualname__ = traced.__name__ = f"{type(module).__name__}.forward"
        super().__init__(traced, make_compile_entry(traced), automatic_dynamic=automatic_dynamic, dynamic=dynamic)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        state = self.layout.read()
        if state is None:
            self.layout = ModuleLayout(self.module)
            state = self.layout.read()
        spec, leaves = super().__call__(state, self.layout.modes(), *args, **kwargs)
        return spec.rebuild(leaves)

    def __repr__(self) -> str:
        return f"<jitted {type(self.module).__name__} module: {len(self.entries)} cache entries>"
