"""check_writebacks: validates the contract of every `prims.copy_to(computed, buffer)`.

The contract (what executors rely on; an nvFuser fusion turns each write-back into an output
aliased to `buffer`, i.e. it writes `computed` straight into the buffer's memory):
- `buffer` is an input of the computation (a whole tensor the caller passed in, never a view);
  each buffer is written back at most once.
- `computed` has `buffer`'s shape and dtype, is defined inside the trace, and, when the
  write-back sits inside an executor's region, inside that region.
- nothing reads `computed` after the write-back (the trace output included), except when the
  write-back sits inside a region that also returns `computed`: the region hands out a tensor
  of its own (nvFuser's runner copies such a write-back rather than aliasing it, and clones an
  output sharing a written buffer's memory), e.g. `a.add_(e); y = a @ w` with the matmul left
  to torch;
- nothing reads `buffer`, or a view of it, after the write-back, except the trace output, which
  may name `buffer` itself (the caller's tensor, holding the new value), and view prims of
  `buffer` (or of such views) outside every region that feed only the trace output: a returned
  view of an updated input, made from the caller's tensor after the write-back as eager's
  result aliases it (`views_after_writebacks` finds them; fusion leaves them to torch).
It runs on the final trace in the pipeline (see pipeline.Options.check_writebacks) and in tests
after every pass; `WritebackError` names the proxies and the lines at fault.
"""

from __future__ import annotations

from compiler.core.ir import BoundSymbol, Symbol, Trace, proxies_in
from compiler.prims import VIEWS, Prim
from compiler.tracing.check_trace import TraceError
from compiler.tracing.frontend import leaves


class WritebackError(TraceError):
    """A write-back would let an executor write `computed` into `buffer` and get a wrong result."""


def _line(bsym: BoundSymbol) -> str:
    """The bound symbol as its line of Python, without decomposition or type comments."""
    return str(bsym).split("\n")[0].split("  #")[0]


def _regions(trace: Trace) -> list[tuple[BoundSymbol, BoundSymbol | None]]:
    """Every prim in execution order, with the executor region (if any) it runs inside."""
    result = []
    for bsym in trace.bsyms:
        region = bsym if isinstance(bsym.sym, Symbol) and bsym.sym.impl is not None and bsym.subsymbols else None
        result.extend((leaf, region) for leaf in leaves([bsym]))
    return result


def check_writebacks(trace: Trace) -> Trace:
    """Raises WritebackError unless every write-back of `trace` keeps the contract; returns it."""
    inputs = {p.name for p in trace.inputs}
    defined_in: dict[str, BoundSymbol | None] = {}
    view_of: dict[str, str] = {}
    consumed: dict[str, BoundSymbol] = {}  # computed name → its write-back
    written: dict[str, BoundSymbol] = {}  # buffer name → its write-back

    def memory_of(name: str) -> str:
        while name in view_of:
            name = view_of[name]
        return name

    def fail(message: str) -> None:
        raise WritebackError(f"{trace.name}: {message}")

    late: set[str] = set()  # views of a buffer made after its write-back
    for leaf, region in _regions(trace):
        is_writeback = leaf.sym is Prim.COPY_TO
        for i, p in enumerate(leaf.inputs):
            if p.name in consumed:
                fail(f"{p.name} is read by `{_line(leaf)}` after `{_line(consumed[p.name])}` handed it to a buffer")
            memory = memory_of(p.name)
            if memory in written and leaf.sym in VIEWS and i == 0:
                if region is not None:
                    fail(f"`{_line(leaf)}` views {memory} after its write-back inside {region.sym.name}")
                late.update(q.name for q in leaf.outputs)
            elif memory in written and not (is_writeback and i == 1):
                fail(f"{memory} is read (as {p.name}) by `{_line(leaf)}` after `{_line(written[memory])}` overwrote it")
        if is_writeback:
            computed, buffer = leaf.args
            if buffer.name not in inputs:
                fail(f"`{_line(leaf)}` writes into {buffer.name}, which is not an input of the computation")
            if computed.name in inputs or computed.name not in defined_in:
                fail(f"`{_line(leaf)}` writes back {computed.name}, which is not computed in the trace")
            if region is not None and defined_in[computed.name] is not region:
                fail(f"`{_line(leaf)}` in {region.sym.name} writes back {computed.name}, computed outside that region")
            if buffer.name in written:
                fail(f"{buffer.name} is written back twice: `{_line(written[buffer.name])}` and `{_line(leaf)}`")
            written[buffer.name] = leaf
            if region is None or not any(q.name == computed.name for q in region.outputs):
                consumed[computed.name] = leaf
        for p in leaf.outputs:
            defined_in[p.name] = region
            if leaf.sym in VIEWS:
                view_of[p.name] = leaf.args[0].name
    for p in proxies_in(trace.output):
        if p.name in consumed:
            fail(f"the output returns {p.name} after `{_line(consumed[p.name])}` handed it to a buffer")
        memory = memory_of(p.name)
        if memory in written and memory != p.name and p.name not in late:
            fail(f"the output returns {p.name}, a view of {memory}, after `{_line(written[memory])}` overwrote it")
    return trace


def views_after_writebacks(bsyms: list[BoundSymbol]) -> set[int]:
    """Positions in `bsyms` (a flat trace) of view prims of a written-back buffer, or of such
    views, placed after that write-back: they read the buffer's new value, so they must run after
    it, outside any fusion, and are not the same value as an equal view made before it."""
    written: set[str] = set()
    late: set[str] = set()
    found = set()
    for i, bsym in enumerate(bsyms):
        if bsym.sym is Prim.COPY_TO:
            written.add(bsym.args[1].name)
        elif bsym.sym in VIEWS and (bsym.args[0].name in written or bsym.args[0].name in late):
            late.update(p.name for p in bsym.outputs)
            found.add(i)
    return found
