"""functionalize: a trace with in-place writes → a pure trace plus write-backs at the end.

Assumes: a trace as the frontend records it (op-level bound symbols, not yet flattened), in which
every mutation is a `prims.copy_(target, value)` leaf (value already of target's shape and dtype)
and tensors alias only through view prims (the IR's rule, `prims.VIEWS`: a view prim's output
aliases its first argument). The tracer has rejected writes through expanded views and through
reshapes whose eager aliasing it could not decide (`compiler/ops/aliasing.py`).

Guarantees:
- no in-place prim remains. Bound symbols that write nothing are kept whole (ops with their
  decompositions), reading the latest values: writing into `v` (a view chain of `root`) rebuilds
  the root functionally (a slice becomes `slice_update`, a permute/reshape/squeeze/unsqueeze is
  inverted), and any view of that root is recomputed from the new value right before it is read.
  So each in-place op becomes one functional update, e.g. `t1 = torch.Tensor.lerp(exp_avg, ...)`.
- every computation input whose contents changed gets exactly one
  `prims.copy_to(computed, input)`; the write-backs come after every other bound symbol except
  the views of written inputs that the trace returns (below).
  `computed` is the input's final value, defined in the trace by a prim that is not a view, and
  read by nothing after its write-back (nor returned): where the final value is an input, a view,
  a returned value, or the value of another write-back, a copy (`prims.mul(x, 1)`) is written
  back instead.
- a written input that the function returns is returned as the input itself: after the
  write-back the caller's tensor holds the new value, as eager returns that very tensor. A
  returned view of a written input is made again from the input by the same view prims, after
  the write-backs (the only prims that follow them), so it shares the caller's memory as in
  eager. Any other returned value that still lives in a written input's memory is copied out first,
  and so is a returned tensor the function created and wrote into whose value is a view of another
  tensor or an input, or the value of another returned tensor: eager's has memory of its own. Its
  returned views view that copy (made once), as they share its memory in eager; a returned view of
  any other tensor the function made and wrote into views that tensor's final value.
- a write autograd does not record (`prims.copy_(target, value, True)`, made under the program's
  `torch.no_grad()`, and any write through a `stop_gradient` link, a detached alias, into what it
  detaches) gives each tensor it changes the new value `updated_without_grad(stop_gradient(new),
  old)`: eager's tensor keeps its autograd history, so a later read's gradient goes to its old
  contents; its write-back writes `new` alone. A write autograd records into a tensor whose
  contents depend on an input, other than through a slice, gives it `overwritten(new, old)`: as in
  eager, it carries a gradient even where `new` does not (`zero_()`), and `old` gets a zero one.
Values, names of kept proxies and the order of kept bound symbols are unchanged.
"""

from __future__ import annotations

from typing import Any

import torch

from compiler.core.errors import check
from compiler.core.ir import BoundSymbol, Proxy, TensorProxy, Trace, TraceContext, map_proxies, proxies_in
from compiler.ops.aliasing import expands
from compiler.passes import trace_pass
from compiler.passes.vjp_rules import NONDIFFERENTIABLE
from compiler.prims import INPLACE, VIEWS, Prim
from compiler.tracing.frontend import leaves


def writes(bsym: BoundSymbol) -> bool:
    """Whether `bsym` (or its decomposition) mutates a tensor."""
    return any(leaf.sym in INPLACE for leaf in leaves([bsym]))


def _free_inputs(bsym: BoundSymbol) -> list[Proxy]:
    """Proxies `bsym` reads that it does not define itself (its arguments, and what its
    decomposition reads from outside)."""
    inside: set[int] = set()
    free: dict[int, Proxy] = {id(p): p for p in bsym.inputs}
    for leaf in leaves(list(bsym.subsymbols)):
        free.update((id(p), p) for p in leaf.inputs if id(p) not in inside)
        inside.update(id(p) for p in leaf.outputs)
    return list(free.values())


def _substitute(bsym: BoundSymbol, replacement: dict[int, Proxy]) -> BoundSymbol:
    swap = lambda p: replacement.get(id(p), p)
    return bsym.replace(
        args=map_proxies(bsym.args, swap),
        kwargs=map_proxies(bsym.kwargs, swap),
        subsymbols=tuple(_substitute(sub, replacement) for sub in bsym.subsymbols),
    )


class _Functionalizer:
    """Walks the trace once, tracking for every tensor (by its name in the input trace) the proxy
    that holds its latest value, and for every view the link that made it."""

    def __init__(self, trace: Trace) -> None:
        self.names = TraceContext(reserved=trace.names())
        self.input_names = {p.name for p in trace.inputs}
        self.bsyms: list[BoundSymbol] = []
        self.link: dict[str, BoundSymbol] = {}  # view name → the view prim that made it
        self.latest: dict[str, Proxy] = {}  # tensor name → proxy holding its latest value
        self.seen: dict[str, int] = {}  # view name → its root's write count when `latest` was made
        self.write_count: dict[str, int] = {}  # root name → how many writes its memory has seen
        self.view_source: dict[str, Proxy] = {}  # name defined by a view prim here → what it views
        self.stopped: set[str] = set()  # names defined by `stop_gradient` here
        # an `updated_without_grad` or `overwritten` output → its value alone, what a write-back writes
        self.written_value: dict[str, TensorProxy] = {}
        self.from_inputs: set[str] = set(self.input_names)  # names whose value depends on an input
        self.reads: dict[str, set[str]] = {}  # name defined here → what its line's differentiable prims read

    # emitting ---------------------------------------------------------------------------------
    def emit(self, bsym: BoundSymbol) -> None:
        self.bsyms.append(bsym)
        leaf_prims = list(leaves([bsym]))
        if any(p.name in self.from_inputs for p in _free_inputs(bsym)):
            self.from_inputs.update(p.name for p in bsym.outputs)
        read = {p.name for leaf in leaf_prims if leaf.sym not in NONDIFFERENTIABLE for p in leaf.inputs}
        self.reads.update((p.name, read) for p in bsym.outputs)
        self.view_source.update((leaf.output.name, leaf.args[0]) for leaf in leaf_prims if leaf.sym in VIEWS)
        self.stopped.update(leaf.output.name for leaf in leaf_prims if leaf.sym is Prim.STOP_GRADIENT)

    def emit_prim(self, prim: Prim, args: tuple, like: TensorProxy) -> TensorProxy:
        out = TensorProxy(like.shape, like.dtype, like.device, name=self.names.fresh("t"))
        self.emit(BoundSymbol(prim, args, {}, out))
        return out

    def emit_copy(self, t: TensorProxy) -> TensorProxy:
        if t.dtype == torch.bool:
            return self.emit_prim(Prim.BITWISE_AND, (t, True), like=t)
        return self.emit_prim(Prim.MUL, (t, 1), like=t)

    # aliasing -----------------------------------------------------------------------------------
    def root(self, t: Proxy) -> Proxy:
        link = self.link.get(t.name)
        while link is not None:
            t = link.args[0]
            link = self.link.get(t.name)
        return t

    def current(self, t: Any) -> Any:
        """The proxy holding `t`'s latest value, recomputing a stale view from its parent."""
        if not isinstance(t, TensorProxy):
            return t
        link = self.link.get(t.name)
        if link is None or self.seen[t.name] == self.write_count.get(self.root(t).name, 0):
            return self.latest.get(t.name, t)
        fresh = self.emit_prim(link.sym, (self.current(link.args[0]), *link.args[1:]), like=t)
        self.latest[t.name] = fresh
        self.seen[t.name] = self.write_count.get(self.root(t).name, 0)
        return fresh

    def inverse(self, link: BoundSymbol, parent_now: Proxy, child_new: Proxy) -> TensorProxy:
        """The parent's new value after its view (made by `link`) took the value `child_new`."""
        parent = link.args[0]
        if link.sym is Prim.SLICE:
            return self.emit_prim(Prim.SLICE_UPDATE, (parent_now, child_new, *link.args[1:]), like=parent)
        if link.sym is Prim.PERMUTE:
            perm = link.args[1]
            return self.emit_prim(
                Prim.PERMUTE, (child_new, sorted(range(len(perm)), key=perm.__getitem__)), like=parent
            )
        check(
            not (link.sym is Prim.BROADCAST_IN_DIM and expands(link)),
            lambda: f"functionalize: cannot write through the expanded view made by {link}",
            ValueError,
        )
        return self.emit_prim(Prim.RESHAPE, (child_new, list(parent.shape)), like=parent)

    # the walk ---------------------------------------------------------------------------------
    def visit(self, bsym: BoundSymbol) -> None:
        if bsym.sym in INPLACE:
            self.write(*bsym.args)
        elif writes(bsym):
            for sub in bsym.subsymbols:
                self.visit(sub)
        else:
            replacement = {}
            for p in _free_inputs(bsym):
                now = self.current(p)
                if now is not p:
                    replacement[id(p)] = now
            for leaf in leaves([bsym]):
                if leaf.sym in VIEWS:
                    self.link[leaf.output.name] = leaf
                    self.seen[leaf.output.name] = self.write_count.get(self.root(leaf.output).name, 0)
            self.emit(_substitute(bsym, replacement) if replacement else bsym)

    def write(self, target: TensorProxy, value: Any, without_grad: bool = False) -> None:
        """`target` (and so its root and every view between) takes `value`; `without_grad`: where
        autograd does not record (the program's `torch.no_grad()`), as is a write through a
        detached alias into what it detaches from."""
        node, new = target, self.current(value)
        if not without_grad:
            new = self.overwriting(target, new)
        chain = []
        while True:
            chain.append(node.name)
            self.latest[node.name] = self.keeping_history(node, new) if without_grad else new
            link = self.link.get(node.name)
            if link is None:
                break
            new = self.inverse(link, self.current(link.args[0]), new)
            without_grad = without_grad or link.sym is Prim.STOP_GRADIENT
            node = link.args[0]
        count = self.write_count.get(node.name, 0) + 1
        self.write_count[node.name] = count
        self.seen.update((name, count) for name in chain)

    def overwriting(self, target: TensorProxy, new: TensorProxy) -> TensorProxy:
        """`target`'s new contents `new`, written where autograd records: where its old contents
        may carry a gradient, `overwritten(new, old)`, so that, as in eager, the tensor carries one
        even when `new` does not (`zero_()`), and `old` gets a zero one. A write through a slice
        needs no marker (its `slice_update` reads the old contents), nor one whose value is made
        from them by a differentiable prim (`add_`)."""
        link = self.link.get(target.name)
        while link is not None and link.sym is not Prim.SLICE:
            link = self.link.get(link.args[0].name)
        if link is not None:
            return new
        old = self.current(target)
        if old.name not in self.from_inputs or old.name in self.reads.get(new.name, ()):
            return new
        marked = self.emit_prim(Prim.OVERWRITTEN, (new, old), like=target)
        self.written_value[marked.name] = new
        return marked

    def keeping_history(self, node: TensorProxy, new: TensorProxy) -> TensorProxy:
        """`node`'s new contents `new`, written where autograd does not record: its value, with the
        gradient going to `node`'s contents before (eager's tensor keeps its autograd history)."""
        if new.name not in self.stopped:
            new = self.emit_prim(Prim.STOP_GRADIENT, (new,), like=new)
        kept = self.emit_prim(Prim.UPDATED_WITHOUT_GRAD, (new, self.current(node)), like=node)
        self.written_value[kept.name] = new
        return kept

    def memory(self, p: Proxy) -> Proxy:
        """The proxy whose memory `p` views in the output trace (itself when fresh)."""
        while p.name in self.view_source:
            p = self.view_source[p.name]
        return p

    def finish(self, trace: Trace) -> Trace:
        written = {p.name for p in trace.inputs if p.name in self.write_count}

        replays: list[BoundSymbol] = []
        own: dict[str, TensorProxy] = {}  # a made and overwritten tensor's name → its returned copy

        # NOTE: tensors the function made whose memory it returns (themselves or views of them) are
        # distinct in eager; here two may hold one value (`b = zeros(...).copy_(a)` returned with
        # `a`, or a view of `a`): all but the first get a copy of their own
        holder: dict[str, str] = {}  # memory in the output trace → the first returned tensor in it
        sharing: set[str] = set()
        for p in proxies_in(trace.output):
            root = self.root(p) if isinstance(p, TensorProxy) else None
            if root is None or root.name in self.input_names:
                continue
            first = holder.setdefault(self.memory(self.current(root)).name, root.name)
            if first != root.name:
                sharing.add(root.name)

        def borrowed(root: Proxy) -> bool:
            # NOTE: a tensor the function made and then wrote into (`zeros(...).copy_(x[-k:])`, a
            # cache's new state) has memory of its own in eager; its value here may be a view of
            # another tensor or an input, which the caller would then share (and keep alive), or
            # still lie in a written input's memory, which the write-backs overwrite
            if root.name in sharing:
                return True
            if root.name in self.input_names or root.name not in self.write_count:
                return False
            value = self.current(root)
            value = self.written_value.get(value.name, value)  # a marker's memory is its value's
            shared = value.name in self.view_source or value.name in self.input_names
            return shared or self.memory(value).name in written

        def final(p: Any) -> Any:
            if not isinstance(p, TensorProxy) or p.name in written:
                return p  # a written input is returned as itself: the caller's tensor, updated
            root = self.root(p)
            if root.name in written:
                return self.replay(p, replays)  # a view of a written input views it after the write-back
            if borrowed(root):
                # one copy per such tensor: it and its returned views share that memory, as in eager
                if root.name not in own:
                    own[root.name] = self.emit_copy(self.current(root))
                return own[root.name] if p is root else self.replay(p, self.bsyms, base=own[root.name])
            if p is not root and root.name in self.write_count:
                # a returned view of a tensor the function made and wrote into views its final value
                return self.replay(p, self.bsyms, base=self.current(root))
            value = self.current(p)
            # NOTE: a value still held in a written input's memory (its old contents) must be
            # copied out before the write-backs overwrite that memory.
            if self.memory(value).name in written:
                return self.emit_copy(value)
            return value

        output = map_proxies(trace.output, final)
        returned = {id(p) for p in proxies_in(output)}
        claimed: set[int] = set()
        writebacks = []
        for buffer in trace.inputs:
            value = self.latest.get(buffer.name, buffer)
            if buffer.name not in written or value is buffer:
                continue
            value = self.written_value.get(value.name, value)
            if value.name in self.input_names or value.name in self.view_source or id(value) in returned | claimed:
                value = self.emit_copy(value)
            claimed.add(id(value))
            writebacks.append(BoundSymbol(Prim.COPY_TO, (value, buffer), {}, None))
        return trace.with_bsyms(self.bsyms + writebacks + replays, output=output)

    def replay(self, view: TensorProxy, into: list[BoundSymbol], base: TensorProxy | None = None) -> TensorProxy:
        """`view`'s chain of view prims made again from its root (a written input's, into the
        replays emitted after the write-backs, so the result views the caller's tensor holding the
        new value), or from `base` in the root's place."""
        link = self.link[view.name]
        parent = link.args[0]
        if parent.name in self.link:
            source = self.replay(parent, into, base)
        else:
            source = parent if base is None else base
        out = TensorProxy(view.shape, view.dtype, view.device, name=self.names.fresh("t"))
        into.append(BoundSymbol(link.sym, (source, *link.args[1:]), {}, out))
        return out


@trace_pass("functionalize")
def functionalize(trace: Trace) -> Trace:
    """The trace without in-place writes, plus one write-back per written input (see the module)."""
    if not any(writes(bsym) for bsym in trace.bsyms):
        return trace.with_bsyms(list(trace.bsyms))
    walker = _Functionalizer(trace)
    for bsym in trace.bsyms:
        walker.visit(bsym)
    return walker.finish(trace)
