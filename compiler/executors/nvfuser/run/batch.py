"""One fusion for many small regions of the same structure: an optimizer step's tiny parameters.

An Adam step over GPT-2 small has 98 parameters of at most 3072 elements (biases and norm
weights). Each is its own region, so each costs a kernel launch and a fusion call on the host,
while its bytes take far less time to move than either. `BatchedFusion` runs such
regions (same prims, same dtypes, elementwise, writing only into their inputs; found by
`passes/batch_regions.py`) as ONE fusion over their inputs laid end to end:

    flat_j = cat(member_k input j, flattened, for every member k)   # one kernel per input
    flat fusion(flat_0, flat_1, ...)                                 # writes into the flat_j it updates
    member_k input j <- its piece of flat_j, for every written j    # one copy kernel each

so a step launches a few kernels for all of them instead of one per parameter. The copies in and
out move each small tensor twice more; below `FusionOptions.batch_numel` elements that is cheaper
than a launch. nvFuser batches this way (`nvBatchN`); Inductor instead compiles the members' prims
as one region (`inductorBatchN`, `FusionExecutor.batch_flat`): on CPU the copies in and out cost
more than the calls they save.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from compiler.core.executor import Region
from compiler.core.ir import TensorProxy

# NOTE: 1-D members (biases, norm weights) are gathered by `torch.cat` and scattered back by
# `torch.split_with_sizes_copy(out=...)`, neither making a view per member; others go through
# torch's C++ helpers behind DDP's bucket flattening, which view each member (a view per member
# costs host time per call that an optimizer step over many small parameters pays every step).
_flatten = torch._C._nn.flatten_dense_tensors
_unflatten = torch._C._nn.unflatten_dense_tensors


class BatchedFusion:
    """The callable behind an `nvBatchN` bound symbol: its members' inputs in, nothing out.

    `flat` runs the members' common region over 1-D inputs of all their elements (it writes the
    updated values into the flat inputs it writes back). The call's arguments are each member's
    region inputs in turn; a member's scalar inputs are the same as the first member's.
    """

    def __init__(
        self,
        flat: Callable[..., Any],
        numels: Sequence[int],
        one_dim: bool,
        width: int,
        tensors: Sequence[int],
        written: Sequence[int],
        expanded: Sequence[tuple[int, tuple[int, ...]]] = (),
        order: Sequence[int] | None = None,
    ) -> None:
        """`flat`: the fusion over 1-D inputs; `numels`: each member's elements; `one_dim`: every
        member's tensors are 1-D; `width`: inputs per member, of which `tensors` are tensors (the
        others scalars) and `written` are written back; `expanded`: (input, shape) of the 0-d inputs
        `flat` reads expanded to that shape, appended after the inputs; `order`: the indices, among
        the inputs and those, of the arguments `flat` takes (None: the inputs as they are)."""
        self.flat = flat
        self.numels = list(numels)
        self.one_dim = one_dim
        self.width = width
        self.tensors = list(tensors)
        self.written = list(written)
        self.expanded = list(expanded)
        self.order = None if order is None else list(order)
        self._gather = torch.cat if one_dim else _flatten

    @classmethod
    def of(
        cls, flat: Callable[..., Any], region: Region, numels: Sequence[int], one_dim: bool, runs: Region | None = None
    ) -> BatchedFusion:
        """`flat`, the callable running `region` (the members' common region over 1-D inputs), run
        over members of `numels` elements each (1-D ones when `one_dim`). Where `flat` runs `runs`,
        `region` with broadcasts of its 0-d inputs read as inputs (passes/expanded_inputs.py), those
        are expanded from the 0-d inputs on each call (views: no kernel)."""
        inputs = region.inputs
        tensors = [k for k, p in enumerate(inputs) if isinstance(p, TensorProxy) and p.shape != ()]  # 0-d: shared
        written = [k for k, p in enumerate(inputs) if p.name in region.written]
        if runs is None:
            return cls(flat, numels, one_dim, len(inputs), tensors, written)
        position = {p.name: k for k, p in enumerate(inputs)}
        read = {p.name for p in runs.inputs} - set(position)
        broadcasts = [b for b in region.bsyms if any(p.name in read for p in b.outputs)]
        for k, b in enumerate(broadcasts):
            position[b.output.name] = len(inputs) + k
        expanded = [(position[b.args[0].name], tuple(b.output.shape)) for b in broadcasts]
        order = [position[p.name] for p in runs.inputs]
        return cls(flat, numels, one_dim, len(inputs), tensors, written, expanded, order)

    def __call__(self, *args: Any) -> None:
        width = self.width
        flat_args = list(args[:width])
        columns = {j: args[j::width] for j in self.tensors}
        for j, column in columns.items():
            flat_args[j] = self._gather(column)
        if self.order is None:
            self.flat(*flat_args)
        else:
            flat_args += [flat_args[j].expand(shape) for j, shape in self.expanded]
            self.flat(*[flat_args[k] for k in self.order])
        for j in self.written:
            column = columns[j]
            if self.one_dim:
                torch.split_with_sizes_copy(flat_args[j], self.numels, out=column)
            else:
                torch._foreach_copy_(column, _unflatten(flat_args[j], column))

    def __repr__(self) -> str:
        return f"<batch of {len(self.numels)} regions: {self.flat!r}>"
