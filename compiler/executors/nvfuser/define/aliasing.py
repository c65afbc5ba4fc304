"""Write-backs nvFuser does not write right in place, and outputs it returns as views of inputs.

A write-back `copy_to(value, buffer)` is normally `fd.add_output(fd.ops.set(value),
alias_input=buffer)`: the fusion writes the buffer's memory and no copy kernel runs. In
nvfuser_direct 0.2.36 that aliasing gives wrong results in two shapes of region (found by
differential fuzzing, scripts/fuzz_nvfuser.py; `WORKAROUNDS_CHECKED_ON` in executor.py):

- the buffer is laid out other than row-major (a transposed buffer) and the fusion segments (a
  reduction next to the write): the buffer got the values in the wrong order;
- the buffer has gaps (a step slice `x[..., ::2]`, a column block of a wider tensor): half of its
  elements got wrong values (`out.masked_fill_(m, -1.0)` on `x[..., ::2]`, the user-pattern
  battery on CUDA);
- a regular output was computed from the written value, or from the buffer's old value in a
  region that is not purely elementwise (a slice, a reduction) or whose buffer has only size-1
  dims: that output was wrong (the write ran before a read of the old value).
Reading the old value in a purely elementwise region (`old = x - y; x.mul_(2)`) was right, in one
kernel, and stays aliased.

In those regions (`copied_write_backs`) the written values are returned as extra outputs after
the regular ones, and the runner copies them into their buffers once the fusion has run.
Separately, nvFuser returns some outputs as views of an input (a sum over size-1 dims is a
squeeze); when the trace writes that input afterwards, eager's output would be unchanged, so the
runner clones such outputs. And it returns one tensor for two outputs that compute the same value
(`x.float()` and `x.detach().float()`): marking one non-differentiable then marked both, and a write
into one changed the other; such repeats are cloned too (`distinct_outputs`, one pass for both).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from compiler.core.executor import Region
from compiler.core.ir import is_unit
from compiler.executors.nvfuser.define.descriptors import ScalarDesc, TensorDesc
from compiler.prims import ELEMENTWISE, Prim


def written_inputs(region: Region) -> list[int]:
    """Indices (into region.inputs) of the buffers the region's write-backs target, in write order."""
    positions = {id(p): i for i, p in enumerate(region.inputs)}
    return [positions[id(b.args[1])] for b in region.bsyms if b.sym is Prim.COPY_TO and id(b.args[1]) in positions]


def copied_write_backs(region: Region, descriptors: Sequence[TensorDesc | ScalarDesc]) -> bool:
    """True when this region's write-backs are returned and copied by the runner, not aliased."""
    written = written_inputs(region)
    if not written:
        return False
    for i in written:
        order = list(getattr(descriptors[i], "stride_order", ()))
        if order != sorted(order, reverse=True) or False in getattr(descriptors[i], "contiguity", ()):
            return True
    # the written value flowing into a regular output (not only into other write-backs: an Adam step
    # reads its new moments to update the parameter, and stays aliased in one kernel per parameter)
    if _reaches_an_output(region, {b.args[0].name for b in region.bsyms if b.sym is Prim.COPY_TO}):
        return True
    buffers = [region.inputs[i] for i in written]
    if not _reaches_an_output(region, {p.name for p in buffers}):
        return False
    size_one = any(all(map(is_unit, p.shape)) for p in buffers)
    elementwise = all(b.sym in ELEMENTWISE or b.sym is Prim.COPY_TO for b in region.bsyms)
    return size_one or not elementwise


def _reaches_an_output(region: Region, names: set[str]) -> bool:
    """True when a regular output of `region` is computed from one of the values `names`."""
    reached = set(names)
    for b in region.bsyms:
        if b.sym is not Prim.COPY_TO and any(p.name in reached for p in b.inputs):
            reached.update(p.name for p in b.outputs)
    return any(p.name in reached for p in region.outputs)


def shares_memory(output: object, buffers: Sequence[torch.Tensor]) -> bool:
    """True when `output` is a tensor living in the memory of one of `buffers`."""
    if not isinstance(output, torch.Tensor) or output.numel() == 0:
        return False
    pointer = output.untyped_storage().data_ptr()
    return any(b.untyped_storage().data_ptr() == pointer for b in buffers)


def distinct_outputs(outputs: list, buffers: Sequence[torch.Tensor] = ()) -> list:
    """`outputs` with each tensor that shares memory with one of `buffers` (the inputs the region
    writes) or with an earlier output (the same tensor twice, two views of one buffer) replaced by
    a copy."""
    seen = {b.untyped_storage().data_ptr() for b in buffers}
    distinct = []
    for output in outputs:
        if isinstance(output, torch.Tensor) and output.numel():
            pointer = output.untyped_storage().data_ptr()
            if pointer in seen:
                output = output.clone()
            else:
                seen.add(pointer)
        distinct.append(output)
    return distinct


def fresh_outputs(outputs: Sequence[object], inputs: Sequence[object]) -> bool:
    """True when every output tensor lives in memory of its own: shared with no other output and
    no input tensor (nvFuser allocated each), so `distinct_outputs` would copy none of them."""
    seen = {a.untyped_storage().data_ptr() for a in inputs if isinstance(a, torch.Tensor) and a.numel()}
    for output in outputs:
        if isinstance(output, torch.Tensor) and output.numel():
            pointer = output.untyped_storage().data_ptr()
            if pointer in seen:
                return False
            seen.add(pointer)
    return True
