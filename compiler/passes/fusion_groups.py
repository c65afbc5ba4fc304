"""The group graph of the fusion pass: union-find over trace nodes, with what each group is.

`fuse.py` merges groups of prims (dataflow, then horizontally) and asks of every candidate pair
questions about the union: would it write a buffer twice, how many tensors would it read and
write, what shape does it iterate over. Rebuilding the answers from the members costs the size
of the groups per question, which made partitioning quadratic in the trace on big programs (a
GPT-2 backward, a 148-parameter Adam step). Here each group carries a `Summary`, and a merge
combines the two summaries in time proportional to the smaller sets involved; every answer is
exactly what recomputing it from the members gives (tests/compiler/test_fusion_groups.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from compiler.core.ir import BoundSymbol, TensorProxy
from compiler.prims import SHAPE_OPS, Prim


@dataclass
class Summary:
    """What a group of nodes is, as far as merging decisions go (ids are `id(proxy)`).

    compute_ops: members that are not shape ops.
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
            if isinstance(p, TensorProxy) and all(isinstance(s, int) for s in p.shape):
                size = 1
                for s in p.shape:
                    size *= s
                if size > numel:
                    shape, numel = tuple(p.shape), size
        inputs = {id(p) for p in bsym.inputs if isinstance(p, TensorProxy)}
        tensors = {id(p) for p in bsym.outputs if isinstance(p, TensorProxy)}
        defined = {id(p) for p in bsym.outputs}
        writes = {id(bsym.args[1])} if bsym.sym is Prim.COPY_TO else set()
        return Summary(
            compute_ops=int(bsym.sym not in SHAPE_OPS),
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

    # -- questions about the union of two groups (roots a and b) ------------------------------
    def conflict(self, a: int, b: int) -> bool:
        """Whether the union would write a buffer twice or write a buffer it computes."""
        return _conflict(self.summary[a], self.summary[b])

    def _escaping(self, a: int, b: int) -> set[int]:
        x, y = self.summary[a], self.summary[b]
        inside = (a, b)
        return {
            d
            for d in (*x.escaping, *y.escaping)
            if d in self.output_ids or any(self.find(j) not in inside for j in self.readers.get(d, ()))
        }

    def tensor_count(self, a: int, b: int) -> int:
        """How many tensors the union would read and write."""
        x, y = self.summary[a], self.summary[b]
        reads = {d for d in x.reads if d not in y.tensors} | {d for d in y.reads if d not in x.tensors}
        return len(reads) + len(self._escaping(a, b))

    def shares_input(self, a: int, b: int) -> bool:
        """Whether the two groups read a common tensor."""
        return not self.summary[a].inputs.isdisjoint(self.summary[b].inputs)

    # -- merging --------------------------------------------------------------------------------
    def merge(self, a: int, b: int) -> int:
        """Merges group b into group a; returns a."""
        escaping = self._escaping(a, b)
        x, y = self.summary[a], self.summary.pop(b)
        x.conflict = _conflict(x, y)
        x.compute_ops += y.compute_ops
        if y.numel > x.numel:
            x.shape, x.numel = y.shape, y.numel
        x.reads = {d for d in x.reads if d not in y.tensors} | {d for d in y.reads if d not in x.tensors}
        for mine, theirs in ((x.inputs, y.inputs), (x.defined, y.defined), (x.tensors, y.tensors)):
            mine |= theirs
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
        return a

    def roots(self) -> list[int]:
        """The groups' roots, in trace order of their first node."""
        return sorted(self.members, key=lambda g: self.lo[g])


def _conflict(x: Summary, y: Summary) -> bool:
    return (
        x.conflict
        or y.conflict
        or not x.writes.isdisjoint(y.writes)
        or not x.writes.isdisjoint(y.defined)
        or not y.writes.isdisjoint(x.defined)
    )
