"""A minimum s-t cut (max-flow, Dinic's algorithm) over a small directed graph.

Nodes are integers `0 .. n-1`; capacities are non-negative integers (exact arithmetic), and
`INFINITE` marks edges that must not be cut. Used by `split_backward.py` to choose which forward values to save for the
backward; graphs there have a few thousand nodes at most.
"""

from __future__ import annotations

from collections import deque

INFINITE = 1 << 62


class FlowGraph:
    """A directed graph with capacities, as adjacency lists of edge indices (each edge paired with
    its reverse residual edge at index `e ^ 1`)."""

    def __init__(self, n: int) -> None:
        self.adjacent: list[list[int]] = [[] for _ in range(n)]
        self.head: list[int] = []
        self.capacity: list[int] = []

    def add_edge(self, u: int, v: int, capacity: int) -> None:
        """Adds the edge u -> v (capacities of parallel edges add up)."""
        for node, other, cap in ((u, v, capacity), (v, u, 0)):
            self.adjacent[node].append(len(self.head))
            self.head.append(other)
            self.capacity.append(cap)

    def _levels(self, source: int) -> list[int]:
        level = [-1] * len(self.adjacent)
        level[source] = 0
        queue = deque([source])
        while queue:
            u = queue.popleft()
            for e in self.adjacent[u]:
                v = self.head[e]
                if self.capacity[e] > 0 and level[v] < 0:
                    level[v] = level[u] + 1
                    queue.append(v)
        return level

    def _push(self, source: int, sink: int, level: list[int], cursor: list[int]) -> int:
        """Pushes one blocking path's worth of flow (iteratively, to avoid deep recursion)."""
        path: list[int] = []
        u = source
        while True:
            if u == sink:
                flow = min(self.capacity[e] for e in path)
                for e in path:
                    self.capacity[e] -= flow
                    self.capacity[e ^ 1] += flow
                return flow
            edges = self.adjacent[u]
            while cursor[u] < len(edges):
                e = edges[cursor[u]]
                v = self.head[e]
                if self.capacity[e] > 0 and level[v] == level[u] + 1:
                    break
                cursor[u] += 1
            if cursor[u] == len(edges):
                if not path:
                    return 0
                level[u] = -1  # a dead end: never visit it again in this phase
                e = path.pop()
                u = self.head[e ^ 1]
                cursor[u] += 1
                continue
            e = edges[cursor[u]]
            path.append(e)
            u = self.head[e]

    def min_cut(self, source: int, sink: int) -> tuple[int, set[int]]:
        """(the cut's capacity, the nodes on the source side of the minimum cut closest to the
        sink): of all minimum cuts, the one whose source side is largest."""
        total = 0
        while True:
            level = self._levels(source)
            if level[sink] < 0:
                break
            cursor = [0] * len(self.adjacent)
            while True:
                flow = self._push(source, sink, level, cursor)
                if flow <= 0:
                    break
                total += flow
        return total, set(range(len(self.adjacent))) - self._reaching(sink)

    def _reaching(self, sink: int) -> set[int]:
        """The nodes with a residual path to `sink`."""
        seen = {sink}
        queue = deque([sink])
        while queue:
            v = queue.popleft()
            for e in self.adjacent[v]:  # e: v -> u; its pair e ^ 1 is u -> v
                u = self.head[e]
                if u not in seen and self.capacity[e ^ 1] > 0:
                    seen.add(u)
                    queue.append(u)
        return seen
