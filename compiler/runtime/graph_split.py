"""Splitting an FX graph this compiler failed to compile: the nodes it cannot trace run eagerly.

As ThunderFX's splitter does for thunder: `unsupported_nodes` asks the compiler, node by node,
whether it can trace that node alone (the node's inputs are the values a run of the graph under
fake tensors gives them, so nothing real runs and no input is written); `split_graph` cuts the
graph with `torch.fx.passes.split_module` into runs of consecutive nodes of the same kind (in
node order, so the pieces run in the graph's order); each run of supported nodes is compiled by
`compile_piece`, each run of unsupported ones stays an eager `GraphModule`. Autograd flows
through the pieces as through any modules, so a split graph trains.

A node that traces alone may still fail in its piece (its inputs aliased as they were not
alone, symbolic sizes); `compile_piece` then decides (the dynamo backend runs that piece eagerly).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.fx
import torch.utils._pytree as pytree
from torch.fx.passes.split_module import split_module

from compiler.ops.registry import torch_name
from compiler.runtime.fallbacks import Fallback, one_line, record, user_line
from compiler.tracing import frontend

_CALLS = ("call_function", "call_method")
_GRAD_MODE_SWITCHES = (torch._C._set_grad_enabled,)


class _Unknown:
    """The value of a node after one that fake tensors could not run (a data-dependent size)."""


_Values = dict[torch.fx.Node, Any]


def _fake_values(gm: torch.fx.GraphModule, args: tuple) -> tuple[_Values, dict[torch.fx.Node, Exception]]:
    """(every node's value when the graph runs on fake copies of `args`, the nodes that failed
    to run that way with their errors); nodes that read a failed one are `_Unknown`."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    values: dict[torch.fx.Node, Any] = {}
    failed: dict[torch.fx.Node, Exception] = {}

    class Recording(torch.fx.Interpreter):
        def run_node(self, node: torch.fx.Node) -> Any:
            inputs = node.all_input_nodes
            if any(isinstance(values.get(n), _Unknown) for n in inputs):
                values[node] = _Unknown()
                return values[node]
            try:
                values[node] = super().run_node(node)
            except Exception as error:
                failed[node] = error
                values[node] = _Unknown()
            return values[node]

    grad = torch.is_grad_enabled()
    try:
        with FakeTensorMode(allow_non_fake_inputs=True) as mode:
            fake = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args]
            Recording(gm).run(*fake)
    finally:
        torch.set_grad_enabled(grad)  # NOTE: a graph may switch grad mode (`with torch.no_grad()` inside)
    return values, failed


def _real(value: Any, real_inputs: dict[int, torch.Tensor]) -> Any:
    """A real tensor with the metadata of fake tensor `value` (its data unset: tracing reads none)."""
    if not isinstance(value, torch.Tensor):
        return value
    real = real_inputs.get(id(value))
    if real is not None:
        return real
    return torch.empty_strided(
        value.shape, value.stride(), dtype=value.dtype, device=value.device, requires_grad=value.requires_grad
    )


def _call(node: torch.fx.Node, args: tuple, kwargs: dict) -> Any:
    if node.op == "call_method":
        return getattr(args[0], node.target)(*args[1:], **kwargs)
    return node.target(*args, **kwargs)


def _trace_error(node: torch.fx.Node, args: tuple, kwargs: dict) -> Exception | None:
    """What tracing `node` alone on these (real) arguments raised, or None when it traced."""
    leaves, spec = pytree.tree_flatten((args, kwargs))
    positions = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]

    def one_node(*tensors: torch.Tensor) -> Any:
        filled = list(leaves)
        for i, tensor in zip(positions, tensors):
            filled[i] = tensor
        node_args, node_kwargs = pytree.tree_unflatten(filled, spec)
        return _call(node, node_args, node_kwargs)

    grad = torch.is_grad_enabled()
    try:
        frontend.trace(one_node, tuple(leaves[i] for i in positions), {})  # numbers baked in, as dynamo gives them
    except Exception as error:
        return error
    finally:
        torch.set_grad_enabled(grad)
    return None


def unsupported_nodes(gm: torch.fx.GraphModule, args: tuple) -> dict[torch.fx.Node, Exception]:
    """The call nodes of `gm` this compiler cannot trace on their own for a call with `args`, with
    the error each raised (a node fake tensors cannot run, such as one whose output size depends
    on values, among them). Nodes after such a node are not asked (their inputs are unknown)."""
    values, failed = _fake_values(gm, args)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    real_inputs = {id(values[n]): a for n, a in zip(placeholders, args) if isinstance(a, torch.Tensor)}
    found: dict[torch.fx.Node, Exception] = dict(failed)
    for node in gm.graph.nodes:
        if node.op not in _CALLS or node in failed or isinstance(values.get(node), _Unknown):
            continue
        node_args, node_kwargs = torch.fx.node.map_arg((node.args, node.kwargs), lambda n: values[n])
        node_args, node_kwargs = pytree.tree_map(lambda v: _real(v, real_inputs), (node_args, node_kwargs))
        error = _trace_error(node, node_args, node_kwargs)
        if error is not None:
            found[node] = error
    return found


def op_name(node: torch.fx.Node) -> str:
    """The torch callable a call node runs ('torch.linalg.eigvalsh', 'torch.Tensor.tolist')."""
    if node.op == "call_method":
        return f"torch.Tensor.{node.target}"
    return torch_name(node.target)


class _Compiled(torch.nn.Module):
    """A supported piece of a split graph, run by its compiled form (`run`)."""

    def __init__(self, piece: torch.fx.GraphModule, run: Callable[..., Any]) -> None:
        super().__init__()
        self.piece = piece
        self.run = run

    def forward(self, *args: Any) -> Any:
        return self.run(*args)


def split_graph(
    gm: torch.fx.GraphModule,
    unsupported: dict[torch.fx.Node, Exception],
    compile_piece: Callable[[torch.fx.GraphModule], Callable[..., Any]],
) -> torch.fx.GraphModule:
    """`gm` cut into pieces of consecutive supported or unsupported nodes (each unsupported node
    recorded as a fallback, with its op and the user's source line), the supported ones run by
    `compile_piece(piece)`, the others eagerly."""
    for node, error in unsupported.items():
        record(Fallback(op_name(node), user_line(node.meta.get("stack_trace")), one_line(error, located=False), "op"))
    # NOTE: a grad-mode switch runs eagerly too: a compiled piece runs it only while tracing, and
    # the pieces after it must run in the mode it sets
    eager = {node for node in gm.graph.nodes if node in unsupported or node.target in _GRAD_MODE_SWITCHES}
    partition_of: dict[torch.fx.Node, int] = {}
    partition, previous = 0, None
    for node in gm.graph.nodes:
        if node.op in ("placeholder", "output", "get_attr"):
            continue
        if previous is not None and (node in eager) != previous:
            partition += 1
        partition_of[node], previous = partition, node in eager
    eager_partitions = {partition_of[node] for node in eager}
    split = split_module(gm, gm, lambda node: partition_of[node], keep_original_order=True)
    for name, piece in list(split.named_children()):
        if name.startswith("submod_") and int(name.removeprefix("submod_")) not in eager_partitions:
            setattr(split, name, _Compiled(piece, compile_piece(piece)))
    return split
