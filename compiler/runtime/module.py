"""A jitted `nn.Module`: each call reads the module's tensors and modes, then runs the cache.

The cache is the one of any jitted function (`JittedFunction`): the traced function takes the
module's state and modes as its two first arguments (see compiler/tracing/module.py), so the
prologue guards them like any argument, and a new shape, dtype, device or mode compiles a new
entry while new values do not. What the traces baked in besides is checked before each call: the
submodules are still where they were (a replaced `model.lin` is a new layout), and the plain
values the forward read (`tracing/settings.py`: `self.scale`, `self.config.use_cache`) are
unchanged; either change starts a new generation of entries (a number in the modes), which
compiles again.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from compiler.runtime.cache import CacheEntry, JittedFunction
from compiler.tracing.captured_tensors import OWNERS
from compiler.tracing.module import ModuleLayout, forward_signature
from compiler.tracing.settings import Settings, recording_reads, watched_objects

_NONE = type(None)
_training = operator.attrgetter("training")
_training_entry = operator.itemgetter("training")


class LayoutReader:
    """`ModuleLayout.read()` and `.modes()` with every tensor and mode gathered by C-level maps (a
    model's hundreds of parameters and submodules are read on every call; per-tensor Python
    would cost more than the prologue's guards of them), meaning exactly what they mean there."""

    def __init__(self, layout: ModuleLayout) -> None:
        self.layout = layout
        self.keys = [key for _, _, key in layout.first_slots]
        self.tables = [table for table, _, _ in layout.first_slots]
        self.names = [local for _, local, _ in layout.first_slots]
        # the other places a shared tensor lives (tied weights): each must hold that same tensor
        position = {key: i for i, key in enumerate(self.keys)}
        first = {id(slot) for slot in layout.first_slots}
        others = [slot for slot in layout.slots if id(slot) not in first]
        self.other_tables = [table for table, _, _ in others]
        self.other_names = [local for _, local, _ in others]
        self.other_positions = [position[key] for _, _, key in others]
        self.modules = [module for _, module in layout.submodules]
        self.child_tables = [table for table, _, _ in layout.children]
        self.child_names = [name for _, name, _ in layout.children]
        self.children = [child for _, _, child in layout.children]
        # NOTE: `module.training` goes through nn.Module's attribute lookup; read from each
        # instance's __dict__ instead where that is where it lives (no class defines it otherwise)
        plain = all("training" in vars(m) and not hasattr(type(m), "training") for m in self.modules)
        dicts = [vars(m) for m in self.modules]
        self.flags: Callable[[], tuple] = (
            (lambda: tuple(map(_training_entry, dicts))) if plain else (lambda: tuple(map(_training, self.modules)))
        )
        self.last_flags: tuple | None = None
        self.last_modes = ""

    def read(self) -> dict[str, torch.Tensor] | None:
        """The module's tensors by input key, or None when it no longer has this layout."""
        try:
            if not all(map(operator.is_, map(operator.getitem, self.child_tables, self.child_names), self.children)):
                return None
            if list(map(len, self.layout.child_tables)) != self.layout.child_counts:
                return None
            values = list(map(operator.getitem, self.tables, self.names))
            if self.other_tables and not all(
                map(
                    operator.is_,
                    map(operator.getitem, self.other_tables, self.other_names),
                    map(values.__getitem__, self.other_positions),
                )
            ):
                return None
        except KeyError:
            return None
        if _NONE in map(type, values):
            return None
        return dict(zip(self.keys, values))

    def modes(self) -> str:
        """'T' or 'E' per submodule, in order, then the registered hooks (`ModuleLayout.modes`),
        made again only when a submodule's `training` changed since the last call."""
        flags = self.flags()
        if flags != self.last_flags:
            self.last_flags, self.last_modes = flags, "".join("T" if f else "E" for f in flags)
        return self.layout.generation_mark + self.last_modes + self.layout.hooks.signature()


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
        self.reader = LayoutReader(self.layout)
        self.settings = Settings()

        def traced(state: dict, modes: str, *args: Any, **kwargs: Any) -> tuple:
            objects = watched_objects(m for _, m in self.layout.submodules)
            with recording_reads(objects) as reads:
                result = self.layout.forward(state, args, kwargs)
            self.settings.watch(objects, reads)
            return result

        traced.__signature__ = forward_signature(module)
        setattr(traced, OWNERS, lambda: self.layout.submodules)  # their attributes are provenance of tensors
        traced.__qualname__ = traced.__name__ = f"{type(module).__name__}.forward"
        super().__init__(traced, make_compile_entry(traced), automatic_dynamic=automatic_dynamic, dynamic=dynamic)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        state = self.reader.read()
        if state is None or self.settings.changed():
            self._new_generation()
            state = self.reader.read()
        spec, leaves = super().__call__(state, self.reader.modes(), *args, **kwargs)
        return spec.rebuild(leaves)

    def _new_generation(self) -> None:
        # entries of an older generation were traced with other submodules or settings
        self.layout = ModuleLayout(self.module, self.layout.generation + 1)
        self.reader = LayoutReader(self.layout)
        self.settings = Settings()

    def __repr__(self) -> str:
        return f"<jitted {type(self.module).__name__} module: {len(self.entries)} cache entries>"
