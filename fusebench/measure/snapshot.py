"""Keeping a case's inputs pristine: copies taken once, restored in place between calls.

In-place cases (an optimizer step, a KV-cache update) change their arguments on every call. The
harness restores the mutated tensors in place (same objects, so compiled functions' guards and
optimizers' references stay valid) before each timed call, outside the timed region, and checks
that no variant wrote into an argument the case does not declare as mutated.

Argument trees are tuples, lists and dicts of tensors and Python values.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import torch


def map_tensors(fn: Callable[[torch.Tensor], Any], value: Any) -> Any:
    """`value` with every tensor inside tuples, lists and dicts replaced by `fn(tensor)`."""
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, tuple):
        return tuple(map_tensors(fn, v) for v in value)
    if isinstance(value, list):
        return [map_tensors(fn, v) for v in value]
    if isinstance(value, dict):
        return {k: map_tensors(fn, v) for k, v in value.items()}
    return value


def iter_leaves(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """(path, leaf) for every non-container value, paths like '[0][3]' or "['key']"."""
    if isinstance(value, (tuple, list)):
        for i, v in enumerate(value):
            yield from iter_leaves(v, f"{path}[{i}]")
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from iter_leaves(v, f"{path}[{k!r}]")
    else:
        yield path, value


def tensor_leaves(value: Any) -> list[torch.Tensor]:
    """The tensors inside `value`, in order."""
    return [leaf for _, leaf in iter_leaves(value) if isinstance(leaf, torch.Tensor)]


def upcast_copy(args: tuple, dtype: torch.dtype | None) -> tuple:
    """A deep copy of `args` with floating tensors converted to `dtype` (None keeps dtypes).

    Tensors that required grad still do (as new leaves), so a reference can run autograd.
    """

    def copy(tensor: torch.Tensor) -> torch.Tensor:
        target = dtype if dtype is not None and tensor.is_floating_point() else tensor.dtype
        result = tensor.detach().to(dtype=target, copy=True)
        return result.requires_grad_(tensor.requires_grad)

    return map_tensors(copy, args)


class InputSnapshot:
    """Copies of every tensor argument, taken when constructed; restores them in place on demand."""

    def __init__(self, args: tuple, mutated_args: tuple[int, ...]) -> None:
        if any(i >= len(args) for i in mutated_args):
            raise IndexError(f"mutated_args {mutated_args} names an argument beyond the {len(args)} inputs")
        self.args = args
        self.mutated_args = mutated_args
        self._saved: list[tuple[int, str, torch.Tensor, torch.Tensor]] = []
        seen: set[int] = set()
        for index, arg in enumerate(args):
            for path, leaf in iter_leaves(arg, f"argument {index}"):
                if isinstance(leaf, torch.Tensor) and id(leaf) not in seen:
                    seen.add(id(leaf))
                    self._saved.append((index, path, leaf, leaf.detach().clone()))
        self._mutated = [(live, saved) for index, _, live, saved in self._saved if index in mutated_args]

    def restore_mutated(self) -> None:
        """Copies the saved values back into the arguments the case mutates."""
        with torch.no_grad():
            for live, saved in self._mutated:
                live.copy_(saved)

    def restore_all(self) -> None:
        """Copies the saved values back into every tensor argument."""
        with torch.no_grad():
            for _, _, live, saved in self._saved:
                live.copy_(saved)

    def modified_unmutated(self) -> list[str]:
        """Paths of tensors outside `mutated_args` whose values changed since the snapshot."""
        return [
            path
            for index, path, live, saved in self._saved
            if index not in self.mutated_args and not torch.equal(live.detach(), saved)
        ]
