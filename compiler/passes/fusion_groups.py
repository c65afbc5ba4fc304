"""The group graph of the fusion pass: union-find over trace nodes, with what each group is.

`fuse.py` merges groups of prims (dataflow, then horizontally) and asks of every candidate pair
questions about the union: would it write a buffer twice, how many tensors would it read and
write, what shape does it iterate over. Rebuilding the answers from the members costs the size
of the groups per question, which made partitioning quadratic in the trace on big programs (a
GPT-2 backward, a 148-parameter Adam step). Here each group carries a `Summary`, and a merge
combines the two summaries in time proportional to the smaller sets involved; every answer is
exactly what recomputing it from the members gives (tests/compiler/passes/test_fusion_groups.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from compiler.core.ir import BoundSymbol, TensorProxy
from compiler.prims import VIEW_SHAPE_OPS, Prim


def static_numel(p: Any) -> int | None:
    """The number of elements of tensor `p` when its sizes are known (None otherwise, and for a number)."""
    if not isinstance(p, TensorProxy) or not all(isinstance(s, int) for s in p.shape):
        return None
    numel = 1
    for s in p.shape:
        numel *= s
    return numel


@dataclass
class Summary:
    """What a group of nodes is, as far as merging decisions go (ids are `id(proxy)`).

    compute_ops: members that cost torch a kernel: all but views (a cat copies).
    shape, numel: the largest concrete tensor shape a member writes (the first one of the largest
        size, members in group order), or (None, -1) when there is none.
    inputs: tensors the members read (those defined inside the group included).
    reads: tensors the members read that no member defines.
    defined: every value the members define; tensors: the tensors among them.
    escaping: tensors defined inside that the trace returns or a node outside the group reads.
    writes: buffers the group's write-backs (`copy_to`) write.
    conflict: the group writes a buffer twice, or writes a buffer it computes.
    """

    compute_ops: int
    shape: tuple | None
    numel: int
    inputs: set[int]
    reads: set[int]
    defined: set[int]
    tensors: set[int]
    escaping: set[int]
    writes: set[int]
    conflict: bool

    @staticmethod
    def of(bsym: BoundSymbol, escapes: bool) -> Summary:
        """The summary of a group holding `bsym` alone; `escapes`: whether its tensors leave it."""
        shape, numel = None, -1
        for p in bsym.outputs:
            size = static_numel(p)
            if size is not None and size > numel:
                shape, numel = tuple(p.shape), size
        inputs = {id(p) for p in bsym.inputs if isinstance(p, TensorProxy)}
        tensors = {id(p) for p in bsym.outputs if isinstance(p, TensorProxy)}
        defined = {id(p) for p in bsym.outputs}
        writes = {id(bsym.args[1])} if bsym.sym is Prim.COPY_TO else set()
        return Summary(
            compute_ops=int(bsym.sym not in VIEW_SHAPE_OPS),
            shape=shape,
            numel=numel,
            inputs=inputs,
            reads=inputs - tensors,
            defined=defined,
            tensors=tensors,
            escaping=set(tensors) if escapes else set(),
            writes=writes,
            conflict=bool(writes & defined),
        )


class Groups:
    """Union-find over the nodes of a trace, with group-level successor/predecessor sets and a
    `Summary` per group, kept by `merge` (only). `readers[id(p)]`: the nodes reading value p;
    `output_ids`: the values the trace returns."""

    def __init__(
        self,
        bsyms: list[BoundSymbol],
        edges: list[set[int]],
        claimed: list[bool],
        readers: dict[int, list[int]],
        output_ids: set[int],
    ) -> None:
        n = len(bsyms)
        self.bsyms = bsyms
        self.edges = edges
        self.readers = readers
        self.output_ids = output_ids
        self.parent = list(range(n))
        self.members = {i: [i] for i in range(n)}
        self.succ = {i: set(edges[i]) for i in range(n)}
        self.pred: dict[int, set[int]] = {i: set() for i in range(n)}
        for i in range(n):
            for j in edges[i]:
                self.pred[j].add(i)
        self.lo = {i: i for i in range(n)}
        self.hi = {i: i for i in range(n)}
        self.claimed = {i: claimed[i] for i in range(n)}
        self.refused: dict[int, list[str]] = {i: [] for i in range(n)}
        self.summary = {i: Summary.of(b, self._escapes_node(i, b)) for i, b in enumerate(bsyms)}
        self.scalars = {id(p) for b in bsyms for p in b.inputs if isinstance(p, TensorProxy) and p.shape == ()}
        # root -> the roots it reaches (bit r set for root r), once `track_descendants` was called
        self.descendants: dict[int, int] | None = None

    def _escapes_node(self, i: int, bsym: BoundSymbol) -> bool:
        # NOTE: a lone node's tensors leave it when returned or read by any other node.
        return any(
            id(p) in self.output_ids or any(j != i for j in self.readers.get(id(p), ()))
            for p in bsym.outputs
            if isinstance(p, TensorProxy)
        )

    def find(self, i: int) -> int:
        """The root of node i's group."""
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def path_via_other(self, src: int, dst: int) -> int | None:
        """A group other than src/dst on some path src -> ... -> dst, or None when there is none."""
        succ, lo, last = self.succ, self.lo, self.hi[dst]
        stack = [(s, s) for s in succ[src] if s != dst]
        seen = set()
        while stack:
            g, first = stack.pop()
            if g == dst:
                return first
            if g in seen or lo[g] >= last:
                continue  # NOTE: edges go forward in trace order, so g cannot reach dst.
            seen.add(g)
            # NOTE: entries the test above would skip when popped are not pushed (same result).
            stack.extend((s, first) for s in succ[g] if s == dst or (s not in seen and lo[s] < last))
        return None

    def track_descendants(self) -> None:
        """From now on, keep for each group the groups it reaches (a bit set over roots; `merge`
        updates them), so `reaches_via_other` answers without searching the graph."""
        indegree = {g: len(self.pred[g]) for g in self.members}
        order = [g for g, count in indegree.items() if count == 0]
        for g in order:  # NOTE: Kahn's algorithm; `order` grows while it is walked
            for s in self.succ[g]:
                indegree[s] -= 1
                if indegree[s] == 0:
                    order.append(s)
        if len(order) < len(self.members):
            return  # NOTE: a cycle (never made by the fusion pass): questions keep searching the graph
        descendants: dict[int, int] = {}
        for g in reversed(order):
            bits = 0
            for s in self.succ[g]:
                bits |= (1 << s) | descendants[s]
            descendants[g] = bits
        self.descendants = descendants

    def reaches_via_other(self, src: int, dst: int) -> bool:
        """Whether some path src -> ... -> dst goes through another group. From the tracked
        descendants when kept: then every such path counts, also one `path_via_other` misses by
        pruning at a group whose first node comes after dst's last (a merged group can reach back
        to early nodes); merging src and dst there would make a cycle."""
        if self.descendants is None:
            return self.path_via_other(src, dst) is not None
        # NOTE: a path through another group leaves src for a successor that reaches dst (dst
        # itself reaches nothing of itself: the graph is acyclic).
        bit = 1 << dst
        return any(self.descendants[s] & bit for s in self.succ[src])

    def moved(self, moves: dict[int, int]) -> Groups:
        """New groups: these, with each node i of `moves` in the group whose root is `moves[i]`
        (claimed) instead of its own; summaries, edges and descendants made anew, so merging may go
        on. The caller makes sure no move makes a cycle."""
        members: dict[int, list[int]] = {}
        for root, nodes in self.members.items():
            for m in nodes:
                members.setdefault(moves.get(m, root), []).append(m)
        claimed = [self.claimed[self.find(i)] for i in range(len(self.bsyms))]
        groups = Groups(self.bsyms, self.edges, claimed, self.readers, self.output_ids)
        for root, nodes in members.items():
            first = min(nodes)
            for m in nodes:
                if groups.find(m) != groups.find(first):
                    groups.merge(groups.find(first), groups.find(m))
            groups.refused[groups.find(first)] = list(self.refused.get(root, []))
        return groups

    # -- questions about the union of two groups (roots a and b) ------------------------------
    def conflict(self, a: int, b: int) -> bool:
        """Whether the union would write a buffer twice or write a buffer it computes."""
        return _conflict(self.summary[a], self.summary[b])

    def _escaping(self, a: int, b: int) -> set[int]:
        x, y = self.summary[a], self.summary[b]
        # NOTE: a value leaving one group stays leaving the union unless the other reads it; only
        # those are looked at again.
        kept = (x.escaping - y.inputs) | (y.escaping - x.inputs)
        inside = (a, b)
        for d in (x.escaping & y.inputs) | (y.escaping & x.inputs):
            if d in self.output_ids or any(self.find(j) not in inside for j in self.readers.get(d, ())):
                kept.add(d)
        return kept

    def tensor_count(self, a: int, b: int) -> int:
        """How many tensors the union would read and write."""
        x, y = self.summary[a], self.summary[b]
        return len(_reads(x, y)) + len(self._escaping(a, b))

    def shares_input(self, a: int, b: int) -> bool:
        """Whether the two groups read a common tensor of more than one element (a shared 0-d
        tensor, such as a step count read from a device scalar, saves no memory traffic merged)."""
        return any(i not in self.scalars for i in self.summary[a].inputs & self.summary[b].inputs)

    # -- merging --------------------------------------------------------------------------------
    def merge(self, a: int, b: int) -> int:
        """Merges group b into group a; returns a."""
        escaping = self._escaping(a, b)
        x, y = self.summary[a], self.summary.pop(b)
        x.conflict = _conflict(x, y)
        x.compute_ops += y.compute_ops
        if y.numel > x.numel:
            x.shape, x.numel = y.shape, y.numel
        x.reads = _reads(x, y)
        x.inputs, x.defined = _union(x.inputs, y.inputs), _union(x.defined, y.defined)
        x.tensors = _union(x.tensors, y.tensors)
        x.escaping = escaping
        x.writes |= y.writes
        for s in self.succ.pop(b):
            self.pred[s].discard(b)
            if s != a:
                self.pred[s].add(a)
                self.succ[a].add(s)
        for p in self.pred.pop(b):
            self.succ[p].discard(b)
            if p != a:
                self.succ[p].add(a)
                self.pred[a].add(p)
        self.succ[a].discard(a)
        self.pred[a].discard(a)
        self.parent[b] = a
        self.members[a] += self.members.pop(b)
        self.lo[a] = min(self.lo[a], self.lo.pop(b))
        self.hi[a] = max(self.hi[a], self.hi.pop(b))
        self.refused[a] += self.refused.pop(b)
        if self.descendants is not None:
            self._merge_descendants(a, b)
        return a

    def _merge_descendants(self, a: int, b: int) -> None:
        # NOTE: every new path goes through the merged group: a group reaching a or b now reaches
        # what either reached; the merged group reaches that, not itself.
        both = (1 << a) | (1 << b)
        merged = (self.descendants[a] | self.descendants.pop(b)) & ~both
        self.descendants[a] = merged
        for g, bits in self.descendants.items():
            if bits & both:
                self.descendants[g] = (bits & ~(1 << b)) | (1 << a) | merged

    def detach(self, i: int) -> int | None:
        """Takes node i out of its group into an unclaimed group of its own; returns the root of
        the rest (None when nothing is left). Only for after merging: the group-level summaries
        and edges are not updated."""
        root = self.find(i)
        rest = [m for m in self.members[root] if m != i]
        self.parent[i], self.members[i], self.lo[i], self.hi[i] = i, [i], i, i
        if not rest:
            self.claimed[i] = False
            return None
        new_root = root if root != i else min(rest)
        self.claimed[new_root], self.refused[new_root] = self.claimed[root], self.refused[root]
        if new_root != root:
            self.refused[i] = []
        for m in rest:
            self.parent[m] = new_root
        self.members[new_root], self.lo[new_root], self.hi[new_root] = rest, min(rest), max(rest)
        self.claimed[i] = False
        return new_root

    def roots(self) -> list[int]:
        """The groups' roots, in trace order of their first node."""
        return sorted(self.members, key=lambda g: self.lo[g])


def _reads(x: Summary, y: Summary) -> set[int]:
    """The tensors the union of x's and y's groups reads from outside it."""
    return (x.reads - y.tensors) | (y.reads - x.tensors)


def _union(mine: set[int], theirs: set[int]) -> set[int]:
    """mine | theirs, made by adding the smaller set to the larger (both are the merged groups' own)."""
    if len(mine) < len(theirs):
        mine, theirs = theirs, mine
    mine |= theirs
    return mine


def _conflict(x: Summary, y: Summary) -> bool:
    return (
        x.conflict
        or y.conflict
        or not x.writes.isdisjoint(y.writes)
        or not x.writes.isdisjoint(y.defined)
        or not y.writes.isdisjoint(x.defined)
    )
