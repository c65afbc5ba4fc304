"""FusionDefinitions shared by every jitted function of the process, keyed by structure.

nvFuser keeps a definition's compiled kernels in the definition itself (its executor cache), so
a definition built once serves every region of the same structure (the generated source with
canonical names, `structure_key`): the same Adam update of many parameters, the same fusion in a
function jitted again, a recompilation whose fusion did not change, the forward of a grad-mode
and of a no-grad entry. Kernels are compiled once per process, as nvFuser's own (legacy) frontend
and Inductor's caches do for their users.

The cache holds the `MAX_DEFINITIONS` used last; `clear()` (`compiler.clear_fusion_cache()`)
drops them all, so the next compilation starts from nvFuser's cold compile again. Entries are
keyed by the nvFuser module too, so a stand-in module (the CPU test fake) never sees another's.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

MAX_DEFINITIONS = 1024


class SharedDefinitions:
    """A bounded map (nvFuser module, structure key) -> FusionDefinition, least recently used out."""

    def __init__(self, capacity: int = MAX_DEFINITIONS) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[tuple[Any, str], Any] = OrderedDict()

    def get(self, module: Any, structure: str) -> Any | None:
        """The definition built for `structure` with `module`, or None."""
        key = (module, structure)
        fd = self._entries.get(key)
        if fd is not None:
            self._entries.move_to_end(key)
        return fd

    def put(self, module: Any, structure: str, fd: Any) -> None:
        """Keeps `fd` for `structure`, dropping the least recently used beyond the capacity."""
        self._entries[(module, structure)] = fd
        self._entries.move_to_end((module, structure))
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)

    def clear(self) -> None:
        """Drops every definition (and with it, once nobody else holds it, its kernels)."""
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


DEFINITIONS = SharedDefinitions()
