"""What the fusion pass takes back out of a region once it is formed (`fuse.py`, step 5): views
torch makes for free, and for nvFuser, resizes of small tensors that would split the fusion.

`Peeling` is a part of the fusion pass's partitioner: it reads the trace's nodes (`bsyms`), who
produces and who reads each value, the buffers written back, and records why a node left
(`reasons`).
"""

from __future__ import annotations

from compiler.core.executor import Reason
from compiler.core.ir import BoundSymbol, Proxy, is_unit
from compiler.passes.fusion_groups import Groups, static_numel
from compiler.prims import RESIZES, VIEWS, Prim, expanded_unit_dims

# Views a region leaves to torch when only its outputs need them (`peel_views`).
_PEELED = frozenset({Prim.RESHAPE, Prim.PERMUTE, Prim.SQUEEZE, Prim.SLICE, Prim.BROADCAST_IN_DIM})
_RESIZING = frozenset({Prim.SLICE, Prim.BROADCAST_IN_DIM})
# A resize whose tensor has at most 1/SMALL_RESIZE of the elements of the region's largest is small.
SMALL_RESIZE = 64


def _expands(bsym: BoundSymbol) -> bool:
    """Whether `bsym` broadcasts to a size other than 1 a dim of size 1 or a new dim (torch: an
    expand, stride 0)."""
    if bsym.sym is not Prim.BROADCAST_IN_DIM:
        return False
    _, shape, dims = bsym.args
    new = (d for d in range(len(shape)) if d not in dims)
    return bool(expanded_unit_dims(bsym)) or any(not is_unit(shape[d]) for d in new)


class Peeling:
    """The peeling steps of the partitioner (`fuse._Partitioner`, which sets these attributes)."""

    bsyms: list[BoundSymbol]
    producer: dict[int, int]  # id of a value -> the node that defines it
    readers: dict[int, list[int]]  # id of a value -> the nodes reading it
    output_ids: set[int]  # ids of the values the trace returns
    memory: dict[int, Proxy]  # id of a view -> the tensor whose memory it views
    written: set[str]  # names of the buffers written back
    reasons: dict[int, tuple[Reason, str]]

    def views_written_buffer(self, p: Proxy) -> bool:
        """Whether `p` is (a view of) a buffer the trace writes back: torch's view of it would see the new values."""
        return self.memory.get(id(p), p).name in self.written

    def peel_views(self, g: Groups, root: int, resized_copies: bool = False) -> int | None:
        """Leaves to torch the views that only make a region's outputs (a reshape or permute of a
        value for a matmul to read): in a fusion each is one more tensor written, as torch a view.

        A reshape of an expanding broadcast stays (as torch it is a copy: GQA's `repeat_kv`). A
        reshape of a permute of a value the region computes stays (as torch it could be a copy
        of its own; of a region input, the region would only copy it too), unless
        `resized_copies` and the region resizes (a cat or slice: rotary embeddings): nvFuser
        then copies it in a segment of its own, with no kernel of its own, at a fusion's host cost,
        where torch's copy costs one launch. A slice or
        broadcast of a value the region would not return otherwise (returning the whole
        value would write more). Views of a buffer written back stay: as torch they would see the
        new values. Returns the root of what is left (None when nothing is).
        """
        # NOTE: peeling a view only ever makes others peelable (one reader fewer inside, one value
        # fewer defined inside), so each pass peels all it can, until a pass peels nothing.
        changed = True
        left: int | None = root
        resized_copies = resized_copies and any(self.bsyms[i].sym in RESIZES for i in g.members[root])
        while changed and left is not None:
            changed = False
            inside = set(g.members[left])
            defined = {id(p) for i in inside for p in self.bsyms[i].outputs}
            for i in sorted(inside, reverse=True):
                bsym = self.bsyms[i]
                if bsym.sym not in _PEELED or any(j in inside for j in self.readers.get(id(bsym.output), ())):
                    continue
                source = bsym.args[0]
                producer = self.producer.get(id(source))
                returned_anyway = id(source) in self.output_ids or any(
                    j != i and j not in inside for j in self.readers.get(id(source), ())
                )
                if (
                    (
                        not resized_copies
                        and bsym.sym is Prim.RESHAPE
                        and producer is not None
                        and self.bsyms[producer].sym is Prim.PERMUTE
                        and id(self.bsyms[producer].args[0]) in defined
                    )
                    or (bsym.sym is Prim.RESHAPE and producer is not None and _expands(self.bsyms[producer]))
                    or (bsym.sym in _RESIZING and id(source) in defined and not returned_anyway)
                    or self.views_written_buffer(source)
                ):
                    continue
                left = g.detach(i)
                self.reasons[i] = (Reason.LEFT_TO_TORCH, "a view only the region's outputs need: torch makes it")
                changed = True
                inside.discard(i)
                defined.difference_update(id(p) for p in bsym.outputs)
        return left

    def peel_small_resizes(self, g: Groups, root: int) -> int | None:
        """Leaves to torch each cat or slice of a small tensor that the region computes from its
        inputs alone, with all of the region it depends on (a causal LM's loss shifting its labels
        by one, in the fusion reading the logits): nvFuser's resize scheduler, which any resize
        picks, takes no reductions, so the fusion would split into several kernels. Small: at most
        1/SMALL_RESIZE of the region's largest tensor, sizes known. Only when every resize of the
        region is small: where a large one stays (a decode step appending to its key/value cache),
        the region keeps its resize scheduling anyway, and each peeled op (a rotary embedding's
        halves) would only cost a torch launch more. Returns the root of what is left.
        """
        largest, peeled = g.summary[root].numel, set()
        for i in sorted(g.members[root]):
            if self.bsyms[i].sym not in RESIZES or i in peeled:
                continue
            ancestry = self.small_ancestry(g, i, root, largest)
            if not ancestry:
                return root
            peeled |= ancestry
        left: int | None = root
        why = (Reason.LEFT_TO_TORCH, "a resize of a small tensor: in nvFuser it would split its region")
        for j in sorted(peeled):
            self.reasons[j] = why
            if (left := g.detach(j)) is None:
                return None
        return left

    def small_ancestry(self, g: Groups, i: int, root: int, largest: int) -> set[int]:
        """Node i with the nodes of group `root` it depends on, when all are small and none slices
        a buffer written back; else nothing."""
        found, stack = set(), [i]
        while stack:
            j = stack.pop()
            if j in found:
                continue
            bsym = self.bsyms[j]
            sizes = [static_numel(p) for p in bsym.outputs]
            if any(size is None or size * SMALL_RESIZE > largest for size in sizes):
                return set()
            if bsym.sym is Prim.SLICE and self.views_written_buffer(bsym.args[0]):
                return set()
            found.add(j)
            stack.extend(k for p in bsym.inputs if (k := self.producer.get(id(p))) is not None and g.find(k) == root)
        return found

    def peel_input_views(self, g: Groups, root: int) -> int | None:
        """Leaves to torch the reshapes of a region's inputs, and its slices of inputs that it
        also returns: as torch each is a view of the tensor its op wrote.

        A reshape (GPT-2's [b, s, vocab] logits read as [b * s, vocab] by the cross entropy):
        nvFuser splits a reduction over a reshaped input into more kernels. Only of a trace input
        or of a value a non-view op computed: the result of a permute or slice could be strided,
        and torch would copy it. A returned slice (GPT-J's rotary half `k[..., :rotary_dim]`, which
        torch slices again with a step): nvFuser returns it as an alias of its input, in a segment
        of its own that launches nothing at a fusion's host cost; the region reads the slice
        instead. Views of a buffer written back stay (as torch they would see the new values).
        Returns the root of what is left.
        """
        left: int | None = root
        for i in sorted(g.members[root]):
            bsym = self.bsyms[i]
            if bsym.sym not in (Prim.RESHAPE, Prim.SLICE) or left is None:
                continue
            source = bsym.args[0]
            producer = self.producer.get(id(source))
            if producer is not None and g.find(producer) == left:
                continue
            if bsym.sym is Prim.RESHAPE and producer is not None and self.bsyms[producer].sym in VIEWS:
                continue
            if bsym.sym is Prim.SLICE and not self.returned_by(g, left, i):
                continue
            if self.views_written_buffer(source):
                continue
            left = g.detach(i)
            what = "reshape" if bsym.sym is Prim.RESHAPE else "returned slice"
            self.reasons[i] = (Reason.LEFT_TO_TORCH, f"a {what} of the region's input {source.name}: torch makes it")
        return left

    def returned_by(self, g: Groups, root: int, i: int) -> bool:
        """Whether node i's value leaves group `root`: the trace returns it or a node outside reads it."""
        value = self.bsyms[i].output
        return id(value) in self.output_ids or any(g.find(j) != root for j in self.readers.get(id(value), ()))
