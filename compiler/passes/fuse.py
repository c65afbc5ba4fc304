"""fuse: partitions an execution trace into regions that a fusion executor (nvFuser, Inductor) claims.

Assumes: a flattened trace (prims only; write-backs as `prims.copy_to`, usually at the end).
Guarantees: every region becomes ONE bound symbol named by its executor (`nvFusionN`, `inductorN`:
`FusionExecutor.region_prefix`) whose subsymbols are its prims
(`print(trace)` shows them as comments), placed so the trace stays topologically ordered; the
prims left outside keep their order relative to everything they depend on. The result runs to the
same values as the input trace.

How regions are formed (`partition`, pure and deterministic, so `compiler.examine` can replay
it and say why an op was left out):

1. Every prim is a node of a dataflow graph; a write-back also gets ordering edges to every
   other reader of its buffer or of a view of it, so a fusion can never write a buffer before it
   has been read.
2. Dataflow merging: each claimed node joins its claimed producers' groups, unless the merged
   group would sit on both ends of a path through an unclaimed node (a cycle).
3. Horizontal merging: independent groups (no path either way) merge when they share an input
   tensor, when one is small, or (`merge_same_shape`, off by default) when both iterate over the
   same shape (the 32 parameter updates of an Adam step in one fusion, which nvFuser segments
   into 32 kernels anyway). Sharing a scalar (a symbolic step number, or a 0-d tensor such as one
   read from a device scalar) is no reason to merge.
4. Groups with fewer compute ops than `min_region_size` go back to torch (compute ops: prims that
   cost torch a kernel, i.e. all but views; a cat copies, so permuted reshapes joined by a cat and
   summed, as a fused QKV projection's backward does, are two), and so do groups of views and
   copies of them alone, whatever their size (`is_copy`); the fuel knob keeps only the first N
   regions (to bisect a bad fusion).
5. Views torch makes for free leave each region: those only its outputs need (`peel_views`),
   reshapes of its inputs and slices of them it also returns (`peel_input_views`). For nvFuser,
   so do resizes of small tensors computed from the region's inputs alone (`peel_small_resizes`:
   a causal LM's labels shifted by one).

NOTE: number prims (scalar arithmetic such as split bounds `d0 + d1`) are never fused: they run
in Python on the host and reach a fusion as symbolic scalar inputs, so one fusion definition
serves every value they take. Their counterpart on 0-d tensors (`scalar_prologue`: values computed
from the trace's float64, int64 and bool 0-d inputs alone, numbers read from device scalars) runs
with torch and reaches the regions as 0-d inputs.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence

from compiler.core.errors import check
from compiler.core.executor import Executor, FusionOptions, Reason, Region, fusion_executor
from compiler.core.ir import BoundSymbol, Proxy, Symbol, TensorProxy, Trace, map_proxies, proxies_in
from compiler.passes import trace_pass
from compiler.passes.duplicate_widenings import is_broadcast, is_widening, scalar_prologue
from compiler.passes.fusion_groups import Groups
from compiler.passes.peel_regions import Peeling
from compiler.passes.regions import Decision, Partition
from compiler.prims import REDUCTIONS, RESIZES, SHAPE_OPS, VIEW_SHAPE_OPS, VIEWS, Prim
from compiler.tracing.check_writebacks import views_after_writebacks


def _compute_ops(bsyms: Sequence[BoundSymbol]) -> int:
    """The members that cost torch a kernel of their own: every prim but the views (a cat copies)."""
    return sum(1 for b in bsyms if b.sym not in VIEW_SHAPE_OPS)


def is_copy(bsym: BoundSymbol) -> bool:
    """Whether `bsym` is a copy as the tracer records one (`aliasing.fresh_copy`: `x * 1`, `x & True`)."""
    if bsym.sym is Prim.MUL:
        return type(bsym.args[1]) is int and bsym.args[1] == 1
    return bsym.sym is Prim.BITWISE_AND and bsym.args[1] is True


# A region of views and copies of them (a DynamicCache's keys and values, views of a fused QKV
# projection that `torch.cat` onto an empty cache copies): each copy is one kernel in torch as in
# the fusion, whose execute costs several times a torch op's host time.
_COPIES_ALONE = "views and copies of them alone: torch copies each with one kernel, at less host cost"


_SCALAR_PROLOGUE = "a 64-bit scalar computed from 0-d inputs alone: once by torch, not per element in regions"


def _first_line(bsym: BoundSymbol) -> str:
    return str(bsym).splitlines()[0].split("  #")[0]


def _is_host(bsym: BoundSymbol) -> bool:
    return not any(isinstance(p, TensorProxy) for p in (*bsym.inputs, *bsym.outputs))


class _Partitioner(Peeling):
    def __init__(self, trace: Trace, executors: Sequence[Executor]) -> None:
        self.trace = trace
        self.fuser = fusion_executor(executors)
        check(self.fuser is not None, lambda: "partition needs a fusion executor (one with region_impl)", ValueError)
        self.options: FusionOptions = self.fuser.options
        self.others = [e for e in executors if e is not self.fuser and e.name != "torch"]
        self.precedes = {e.name for e in executors[: list(executors).index(self.fuser)]}
        self.bsyms = list(trace.bsyms)
        self.reasons: dict[int, tuple[Reason, str]] = {}
        self.output_ids = {id(p) for p in proxies_in(trace.output)}
        self.written = {b.args[1].name for b in self.bsyms if b.sym is Prim.COPY_TO}  # write-back targets
        self.readers: dict[int, list[int]] = {}
        self.producer: dict[int, int] = {}
        self.dropped: set[int] = set()  # nodes left out altogether (`drop_copies`)
        self.memory: dict[int, Proxy] = {}  # id of a view -> the tensor whose memory it views
        for i, bsym in enumerate(self.bsyms):
            for p in bsym.inputs:
                self.readers.setdefault(id(p), []).append(i)
            for p in bsym.outputs:
                self.producer[id(p)] = i
            if bsym.sym in VIEWS:
                root = self.memory.get(id(bsym.args[0]), bsym.args[0])
                for p in bsym.outputs:
                    self.memory[id(p)] = root

    # -- step 0: who may be fused ----------------------------------------------------------
    def classify(self, bsym: BoundSymbol) -> tuple[Reason, str] | None:
        if not isinstance(bsym.sym, Prim):
            return Reason.CLAIMED, f"already a region of {getattr(bsym.sym, 'executor', None)}"
        if _is_host(bsym):
            return Reason.HOST, ""
        claimers = [e.name for e in self.others if e.implementation(bsym) is not None]
        before = [name for name in claimers if name in self.precedes]
        if before:
            return Reason.CLAIMED, f"the {before[0]} executor comes first"
        refusal = self.fuser.claim(bsym)
        if refusal is not None and refusal[0] is Reason.LEFT_TO_TORCH and claimers:
            return Reason.CLAIMED, f"runs in the {claimers[0]} executor"
        return refusal

    # -- step 1: the graph -----------------------------------------------------------------
    def graph(self) -> list[set[int]]:
        edges: list[set[int]] = [set() for _ in self.bsyms]
        for i, bsym in enumerate(self.bsyms):
            for p in bsym.inputs:
                j = self.producer.get(id(p))
                if j is not None:
                    edges[j].add(i)
        views_of: dict[int, list[int]] = {}
        for view, root in self.memory.items():
            views_of.setdefault(id(root), []).append(view)
        for i, bsym in enumerate(self.bsyms):
            if bsym.sym is Prim.COPY_TO:
                buffer = id(bsym.args[1])
                readers = [j for v in (buffer, *views_of.get(buffer, ())) for j in self.readers.get(v, [])]
                for j in readers:
                    if j < i:
                        edges[j].add(i)
                    elif j > i:
                        edges[i].add(j)
        return edges

    # -- merging ---------------------------------------------------------------------------
    def try_merge(self, g: Groups, a: int, b: int, horizontal: bool) -> bool:
        """Merges the groups of nodes a and b when that is safe; True when they end up together."""
        a, b = g.find(a), g.find(b)
        if a == b or not (g.claimed[a] and g.claimed[b]):
            return a == b
        for src, dst in ((a, b), (b, a)):
            if horizontal:
                if g.reaches_via_other(src, dst):
                    return False
                continue
            via = g.path_via_other(src, dst)
            if via is not None:
                blocker = _first_line(self.bsyms[min(g.members[via])])
                for x in (a, b):
                    g.refused[x].append(f"merging with its producer's region would create a cycle through `{blocker}`")
                return False
        if g.conflict(a, b):
            return False
        if horizontal and g.tensor_count(a, b) > self.options.max_region_tensors:
            return False
        g.merge(a, b)
        return True

    def dataflow(self, g: Groups, edges: list[set[int]]) -> None:
        producers: list[list[int]] = [[] for _ in self.bsyms]
        for j, targets in enumerate(edges):
            for i in targets:
                producers[i].append(j)
        for i in range(len(self.bsyms)):
            if g.claimed[g.find(i)]:
                for j in sorted(producers[i]):
                    self.try_merge(g, j, i, horizontal=False)

    def horizontal(self, g: Groups) -> None:
        small_size, same_shape = self.options.small_region_size, self.options.merge_same_shape
        g.track_descendants()
        changed = True
        while changed:
            changed = False
            roots = [r for r in g.roots() if g.claimed[r]]
            for x, a in enumerate(roots):
                if g.find(a) != a:
                    continue
                for b in roots[x + 1 :]:
                    a = g.find(a)
                    if g.find(b) != b or a == b:
                        continue
                    sa, sb = g.summary[a], g.summary[b]
                    small = min(sa.compute_ops, sb.compute_ops) <= small_size
                    same = same_shape and sa.shape is not None and sa.shape == sb.shape
                    if (small or same or g.shares_input(a, b)) and self.try_merge(g, a, b, horizontal=True):
                        changed = True

    # -- finishing -------------------------------------------------------------------------
    def run(self) -> Partition:
        claimed = []
        for i, bsym in enumerate(self.bsyms):
            refusal = self.classify(bsym)
            if refusal is not None:
                self.reasons[i] = refusal
            claimed.append(refusal is None)
        for i in scalar_prologue(self.trace.inputs, self.bsyms):
            claimed[i] = False
            self.reasons[i] = (Reason.LEFT_TO_TORCH, _SCALAR_PROLOGUE)
        for i in views_after_writebacks(self.bsyms):
            claimed[i] = False
            self.reasons[i] = (Reason.LEFT_TO_TORCH, f"a view of {self.bsyms[i].args[0].name} after its write-back")
        self.refuse_outside_writebacks(claimed)
        self.refuse_writebacks_reductions_read(claimed)
        edges = self.graph()
        g = Groups(self.bsyms, edges, claimed, self.readers, self.output_ids)
        self.dataflow(g, edges)
        g = self.sink_widenings(g)
        if self.options.horizontal:
            self.horizontal(g)
        keep = set()
        for root in g.roots():
            if not g.claimed[root]:
                continue
            bsyms = [self.bsyms[i] for i in g.members[root]]
            compute_ops = _compute_ops(bsyms)
            if compute_ops < self.options.min_region_size and all(b.sym in SHAPE_OPS for b in bsyms):
                reason = (Reason.SHAPE_ONLY, "shape ops alone are views or copies torch does as well")
            elif all(b.sym in VIEW_SHAPE_OPS or is_copy(b) for b in bsyms):
                reason = (Reason.SHAPE_ONLY, _COPIES_ALONE)
            elif compute_ops < self.options.min_region_size:
                reason = (
                    Reason.TOO_SMALL,
                    f"{compute_ops} compute op(s) < min_region_size={self.options.min_region_size}",
                )
                if g.refused[root]:
                    reason = (Reason.CYCLE, g.refused[root][0])
            else:
                left = self.peel_small_resizes(g, root) if self.fuser.resize_splits else root
                left = self.peel_views(g, left, self.fuser.resize_splits) if left is not None else None
                left = self.peel_input_views(g, left) if left is not None else None
                left = self.drop_foreign_writebacks(g, left) if left is not None else None
                if left is not None:  # else the group was only a write-back of another region's value
                    keep.add(left)
                continue
            for i in g.members[root]:
                self.reasons[i] = reason
        return self.emit(g, edges, keep)

    def refuse_outside_writebacks(self, claimed: list[bool]) -> None:
        """A write-back of a value nvFuser does not compute stays with torch (it would be a copy kernel)."""
        for i, bsym in enumerate(self.bsyms):
            if bsym.sym is Prim.COPY_TO and claimed[i]:
                j = self.producer.get(id(bsym.args[0]))
                if j is None or not claimed[j]:
                    claimed[i] = False
                    self.reasons[i] = (
                        Reason.LEFT_TO_TORCH,
                        f"writes back {bsym.args[0].name}, which torch computes: in a fusion it would only be a copy",
                    )

    def refuse_writebacks_reductions_read(self, claimed: list[bool]) -> None:
        """A write-back of a buffer whose value flows into a fused reduction stays with torch.

        NOTE: nvFuser splits a fusion with a reduction into segments and may run the one writing a
        buffer before the one reading it (nvfuser_direct 0.2.36, found by scripts/fuzz_nvfuser.py:
        `sum(a)` and `a.add_(...)` in one fusion return the sum of the new values). Outside the fusion the
        write-back is one copy after it, which is always right.
        """
        readers: dict[int, list[int]] = {}
        for i, bsym in enumerate(self.bsyms):
            if bsym.sym is not Prim.COPY_TO:
                for p in bsym.inputs:
                    readers.setdefault(id(p), []).append(i)
        for i, bsym in enumerate(self.bsyms):
            if bsym.sym is not Prim.COPY_TO or not claimed[i]:
                continue
            stack, seen = list(readers.get(id(bsym.args[1]), [])), set()
            while stack:
                j = stack.pop()
                if j in seen or not claimed[j]:  # a value torch computes is not the same fusion's
                    continue
                seen.add(j)
                if self.bsyms[j].sym in REDUCTIONS:
                    claimed[i] = False
                    self.reasons[i] = (
                        Reason.LEFT_TO_TORCH,
                        f"a fused reduction reads {bsym.args[1].name}: nvFuser may write it before that read",
                    )
                    break
                stack.extend(k for p in self.bsyms[j].outputs for k in readers.get(id(p), []))

    def sink_widenings(self, g: Groups) -> Groups:
        """The groups with each widening (an upcast, a broadcast) whose readers are all in one
        other region moved into that region.

        Dataflow merging puts a widening in its producer's region (merged first); when only
        another region reads it, the producer would write the wide value (a bf16 residual as
        float32, in every block of a transformer; the rotary embedding's cos broadcast to a
        layer's heads) for the reader to read again. Moved, the producer writes the narrow value,
        and the reader widens it as it loads it; regions that then read one narrow value may merge
        (horizontal merging comes next: a layer's query and key rotations). Last first, so that a
        chain of widenings (a broadcast, then its upcast) moves whole. No move makes a cycle: the
        reader's region already depended on what the widening reads.

        NOTE: for nvFuser (`resize_splits`), no broadcast moves into or out of a region that both
        reduces and resizes, and such a region drops the broadcasts `duplicate_widenings` copied
        (its outputs stay as they were when only upcasts moved): nvFuser 0.2.36 failed to compile
        a segment of such a region once its outputs changed so (a Llama backward's fusion
        recomputing the rotary's cos beside the rotation of the first layer and the sums over
        repeated key/value heads: `Invalid domains to map` in `registerExactMapping`), and ran the
        region with torch.
        """
        moves: dict[int, int] = {}  # node -> the root of the group it moves to
        for root in self.fragile(g):
            self.drop_copies(g, root)
        fragile = self.fragile(g)  # NOTE: the same groups, whose roots a drop may have changed

        def place(j: int) -> int:
            return moves.get(j, g.find(j))

        for i in reversed(range(len(self.bsyms))):
            bsym = self.bsyms[i]
            if not is_widening(bsym) or id(bsym.output) in self.output_ids or not g.claimed[g.find(i)]:
                continue
            targets = {place(j) for j in self.readers.get(id(bsym.output), ())}
            if len(targets) != 1:
                continue
            (target,) = targets
            if target == g.find(i) or not g.claimed[target]:
                continue
            if not is_broadcast(bsym) or not {target, g.find(i)} & fragile:
                moves[i] = target
        return g.moved(moves) if moves or self.dropped else g

    def drop_copies(self, g: Groups, root: int) -> None:
        """Drops from group `root` each broadcast that repeats one before it in the group (the same
        op on the same values: a copy `duplicate_widenings` made), its readers reading the first
        one's value instead. A dropped node is left out of the partition (`dropped`)."""
        first: dict[tuple, Proxy] = {}
        same: dict[int, Proxy] = {}  # id(a dropped copy's output) -> the value it repeats
        for i in sorted(g.members[root]):
            bsym = self.bsyms[i]
            if not is_broadcast(bsym):
                continue
            args = [same.get(id(a), a) for a in bsym.args]
            key = (bsym.sym, *(id(a) if isinstance(a, Proxy) else repr(a) for a in args))
            if key not in first:
                first[key] = bsym.output
                continue
            same[id(bsym.output)] = first[key]
            g.detach(i)
            self.dropped.add(i)
            # NOTE: its readers now hang on the first one's producer; the node leaves the graph
            producer = self.producer[id(first[key])]
            for k in g.edges[i]:
                g.edges[producer].add(k)
            g.edges[i] = set()
            for p in bsym.inputs:
                if (j := self.producer.get(id(p))) is not None:
                    g.edges[j].discard(i)
                if i in self.readers.get(id(p), ()):
                    self.readers[id(p)].remove(i)
        for copy, value in same.items():
            for k in self.readers.pop(copy, ()):
                if k not in self.dropped:
                    bsym = self.bsyms[k]
                    self.bsyms[k] = bsym.replace(
                        args=map_proxies(bsym.args, lambda q: same.get(id(q), q)),
                        kwargs=map_proxies(bsym.kwargs, lambda q: same.get(id(q), q)),
                    )
                    self.readers.setdefault(id(value), []).append(k)

    def fragile(self, g: Groups) -> set[int]:
        """For nvFuser (`resize_splits`), the roots of the claimed groups holding both a reduction
        and a cat or slice (see `sink_widenings`)."""
        if not self.fuser.resize_splits:
            return set()
        found = set()
        for root in g.roots():
            syms = {self.bsyms[i].sym for i in g.members[root]}
            if g.claimed[root] and not syms.isdisjoint(REDUCTIONS) and not syms.isdisjoint(RESIZES):
                found.add(root)
        return found

    def drop_foreign_writebacks(self, g: Groups, root: int) -> int | None:
        """Removes write-backs whose value another region computes (copy_to's contract: same
        region); returns the root of what is left (None when nothing is)."""
        members = g.members[root]
        defined = {id(p) for i in members for p in self.bsyms[i].outputs}
        left: int | None = root
        for i in list(members):
            bsym = self.bsyms[i]
            if bsym.sym is Prim.COPY_TO and id(bsym.args[0]) not in defined:
                left = g.detach(i)  # and it becomes a group of its own, outside every region
                self.reasons[i] = (Reason.CYCLE, f"{bsym.args[0].name} is computed in another region")
        return left

    def emit(self, g: Groups, edges: list[set[int]], keep: set[int]) -> Partition:
        unit_of = [g.find(i) if g.find(i) in keep else -1 - i for i in range(len(self.bsyms))]
        units = sorted(set(unit_of), key=lambda u: u if u >= 0 else -1 - u)
        lo = {u: (g.lo[u] if u >= 0 else -1 - u) for u in units}
        indegree = dict.fromkeys(units, 0)
        succ: dict[int, set[int]] = {u: set() for u in units}
        for i, targets in enumerate(edges):
            for j in targets:
                if unit_of[i] != unit_of[j] and unit_of[j] not in succ[unit_of[i]]:
                    succ[unit_of[i]].add(unit_of[j])
                    indegree[unit_of[j]] += 1
        ready = [(lo[u], u) for u in units if indegree[u] == 0]
        heapq.heapify(ready)
        ordered: list[int] = []
        while ready:
            _, u = heapq.heappop(ready)
            ordered.append(u)
            for s in succ[u]:
                indegree[s] -= 1
                if indegree[s] == 0:
                    heapq.heappush(ready, (lo[s], s))
        check(
            len(ordered) == len(units),
            lambda: "fuse: the region graph has a cycle (a bug in partition)",
            AssertionError,
        )
        fuel = self.options.fuel
        result: list[Region | BoundSymbol] = []
        for u in ordered:
            if u < 0:
                if -1 - u not in self.dropped:
                    result.append(self.bsyms[-1 - u])
                continue
            members = sorted(g.members[u])
            if fuel is not None and len([r for r in result if isinstance(r, Region)]) >= fuel:
                for i in members:
                    self.reasons[i] = (Reason.FUEL, f"fuel={fuel} regions already formed")
                    result.append(self.bsyms[i])
                continue
            result.append(self.region(members, len([r for r in result if isinstance(r, Region)])))
        decisions = [Decision(self.bsyms[i], *self.reasons[i]) for i in sorted(self.reasons)]
        return Partition(result, decisions)

    def region(self, members: list[int], number: int) -> Region:
        inside = set(members)
        return Region.of(
            f"{self.fuser.region_prefix}{number}",
            [self.bsyms[i] for i in members],
            lambda key: key in self.output_ids or any(j not in inside for j in self.readers.get(key, ())),
            self.written,
        )


def partition(trace: Trace, executors: Sequence[Executor]) -> Partition:
    """Splits `trace` into fused regions and ops left to other executors (with reasons)."""
    return _Partitioner(trace, executors).run()


def region_bsym(region: Region, impl: Callable, executor: str = "nvfuser") -> BoundSymbol:
    """The bound symbol `outputs = nvFusionN(*inputs)` (the region's name) standing for `region`."""
    return BoundSymbol(Symbol(region.name, impl, executor), region.inputs, {}, region.outputs, region.bsyms)


@trace_pass("fuse")
def fuse(trace: Trace, executors: Sequence[Executor]) -> Trace:
    """The trace with each region of the fusion executor replaced by one bound symbol (`nvFusionN`, `inductorN`)."""
    fuser = fusion_executor(executors)
    if fuser is None:
        return trace.with_bsyms(list(trace.bsyms))
    bsyms = [
        region_bsym(u, fuser.region_impl(u), fuser.name) if isinstance(u, Region) else u
        for u in partition(trace, executors).units
    ]
    return trace.with_bsyms(bsyms)
