"""check_writebacks: validates the contract of every `prims.copy_to(computed, buffer)`.

The contract (what executors rely on; an nvFuser fusion turns each write-back into an output
aliased to `buffer`, i.e. it writes `computed` straight into the buffer's memory):
- `buffer` is an input of the computation (a whole tensor the caller passed in, never a view);
  each buffer is written back at most once.
- `computed` has `buffer`'s shape and dtype, is defined inside the trace, and, when the
  write-back sits inside an executor's region, inside that region.
- nothing reads `computed` after the write-back (the trace output included);
- nothing reads `buffer`, or a view of it, after the write-back, except the trace output, which
  may name `buffer` itself: the caller's tensor, holding the new value.
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

    for leaf, region in _regions(trace):
        is_writeback = leaf.sym is Prim.COPY_TO
        for i, p in enumerate(leaf.inputs):
            if p.name in consumed:
                fail(f"{p.name} is read by `{_line(leaf)}` after `{_line(consumed[p.name])}` handed it to a buffer")
            memory = memory_of(p.name)
            if memory in written and not (is_writeback and i == 1):
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
            consumed[computed.name] = written[buffer.name] = leaf
        for p in leaf.outputs:
            defined_in[p.name] = region
            if leaf.sym in VIEWS:
                view_of[p.name] = leaf.args[0].name
    for p in proxies_in(trace.output):
        if p.name in consumed:
            fail(f"the output returns {p.name} after `{_line(consumed[p.name])}` handed it to a buffer")
        memory = memory_of(p.name)
        if memory in written and memory != p.name:
            fail(f"the output returns {p.name}, a view of {memory}, after `{_line(written[memory])}` overwrote it")
    return trace
