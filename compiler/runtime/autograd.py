"""Running a compiled forward/backward pair under torch autograd, through ONE autograd.Function.

The Function's forward runs the compiled forward trace (autograd does not record it: a
Function's forward runs without grad), keeps what it saved with `ctx.save_for_backward` (numbers
such as symbolic sizes on `ctx`), and returns the outputs, marking the ones that carry no
gradient (integer tensors, values that no input requiring grad reaches) non-differentiable. Its
backward runs the compiled backward trace on the saved values and the outputs' cotangents.
Autograd passes None for the cotangent of an output nothing used (it is not asked to materialise
zeros): the backward then runs a backward trace compiled for the cotangents present, in which the
missing ones count as zero without being built. Each pattern's backward, the one for every
cotangent included, is compiled on first use and kept (a training step that uses only the loss
never compiles the backward for the logits' cotangent).
With `jit(..., cuda_graphs=True)` the forward and each backward are `GraphedComputation`s: the
forward lends its saved values from its graph's buffers (runtime/cuda_graphs.py `Lent`), which
the backward borrows and releases.
Everything that can be worked out ahead of a call is, in `CompiledAutograd.__init__` (and on
the first call, which tensor inputs there are: the entry's guards fix them from then on). A backward
given every cotangent (the usual `loss.backward()`) finds its compiled backward without building
the pattern of present cotangents.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch._functorch.utils import unwrap_dead_wrappers as _unwrap_dead_wrappers

from compiler.core.gather import picker
from compiler.core.ir import Proxy, TensorProxy, Trace, map_proxies
from compiler.ops import autocast
from compiler.runtime.cuda_graphs import GraphedComputation

_functorch_transforms_active = torch._C._are_functorch_transforms_active
_is_functorch_wrapped = torch._C._functorch.is_functorch_wrapped_tensor
_NONE = type(None)  # `None in cotangents` would compare each tensor with None through Tensor.__eq__


class CompiledAutograd:
    """The callable a cache entry runs when its inputs take part in autograd."""

    def __init__(
        self,
        name: str,
        forward: Callable[..., Any],
        compile_backward: Callable[[tuple[bool, ...]], tuple[Callable[..., Any], list[Trace]]],
        output_tree: Any,
        outputs: tuple[Proxy, ...],
        differentiable: tuple[bool, ...],
        saved_tensors: int,
        writes: list[tuple[int, int]] = (),
        inputs_returned: list[tuple[int, int]] = (),
    ) -> None:
        self.name = name
        self.lends = isinstance(forward, GraphedComputation)  # its saved values are lent, see `Lent`
        self.forward = forward
        self.compile_backward = compile_backward
        self.saved_tensors = saved_tensors
        self.differentiable = differentiable
        self.cotangent_positions = [i for i, d in enumerate(differentiable) if d]
        # which cotangents are present (not None) -> the backward compiled for them, on first need
        self.backwards: dict[tuple[bool, ...], Callable[..., Any]] = {}
        self.backward_traces: dict[tuple[bool, ...], list[Trace]] = {}  # each one's traces, after each pass
        self.last_present: tuple[bool, ...] | None = None  # the pattern the last backward() ran
        position = {id(p): i for i, p in enumerate(outputs)}
        single = isinstance(output_tree, Proxy)
        self.rebuild: Callable[[tuple], Any] = (
            (lambda values: values[0])
            if single
            else (lambda values: map_proxies(output_tree, lambda p: values[position[id(p)]]))
        )
        # the tensor outputs that carry no gradient (integer tensors, values no input requiring grad reaches)
        self.frozen = [i for i, p in enumerate(outputs) if isinstance(p, TensorProxy) and not differentiable[i]]
        self.tensor_positions = [i for i, p in enumerate(outputs) if isinstance(p, TensorProxy)]
        self.tensor_outputs = picker(self.tensor_positions)
        # (input, output) positions: the forward wrote that output, which depends on an input requiring
        # grad, into that input, which does not; it is written again under autograd so that the
        # input's later readers get its gradient (runtime/grad_mode.differentiable_writes)
        self.writes = list(writes)
        # (output, input) positions: the function returns that input itself; the caller gets the input
        # object, as from eager (after `writes`, with the history they gave it), not the Function's view
        # of it, which autograd forbids writing into once the input is written under autograd
        self.inputs_returned = list(inputs_returned)
        # the (output, input) positions of outputs that view an input, set by the forward just run
        self.views_of_inputs: list[tuple[int, int]] | None = None
        self.all_cotangents = (True,) * len(self.cotangent_positions)
        self.every_output_differentiable = all(differentiable)  # then the cotangents are `given` as they come
        self.full_backward: Callable[..., Any] | None = None  # the backward for every cotangent, once compiled
        self._tensors: Callable[[tuple], tuple] | None = None  # gathers the tensor inputs (see `__call__`)

    def last_backward_traces(self) -> list[Trace]:
        """The traces of the backward the last `backward()` ran ([] before any)."""
        return self.backward_traces[self.last_present] if self.last_present is not None else []

    def __call__(self, *inputs: Any) -> Any:
        if _functorch_transforms_active():
            return self._finish(_Function.apply(self, *inputs), inputs)
        # NOTE: what `Function.apply` does without functorch transforms, less its Python layer; its
        # unwrapping of dead functorch wrappers (a Python loop over every input) only where a tensor
        # input is a functorch wrapper at all, which one C-level map over the tensor inputs tells.
        if self._tensors is None:
            self._tensors = picker([i for i, value in enumerate(inputs) if isinstance(value, torch.Tensor)])
        if any(map(_is_functorch_wrapped, self._tensors(inputs))):
            inputs = _unwrap_dead_wrappers(inputs)
        return self._finish(_apply(self, *inputs), inputs)

    def _finish(self, outputs: tuple, inputs: tuple) -> Any:
        """What the caller gets of the Function's outputs: written inputs written again under
        autograd, views of inputs made again from them, inputs returned as themselves, as a tree.

        NOTE: an input is written again before views of it are made: a view made first, of an input
        that did not require grad yet, would not see the history the write gives it (an in-place
        write into that view then raises, as into a leaf requiring grad: Longformer's attention
        scores, a view of zeros written with the scores, added to under a graph break)."""
        if self.writes:
            _write_again(outputs, inputs, self.writes)
        if self.views_of_inputs is not None:
            outputs = self._with_views_of_inputs(outputs, inputs)
        if self.inputs_returned:
            outputs = _inputs_themselves(outputs, inputs, self.inputs_returned)
        return self.rebuild(outputs)

    def _with_views_of_inputs(self, outputs: tuple, inputs: tuple) -> tuple:
        """The outputs, each that views an input (found by the forward just run) made again from it."""
        of_inputs, self.views_of_inputs = self.views_of_inputs, None
        return _viewed_again(outputs, inputs, of_inputs)

    def backward_for(self, present: tuple[bool, ...]) -> Callable[..., Any]:
        """The backward compiled for the cotangents flagged present, compiled on first need; the
        pattern becomes the one `last_backward_traces` reports."""
        backward = self.backwards.get(present)
        if backward is None:
            backward, self.backward_traces[present] = self.compile_backward(present)
            self.backwards[present] = backward
            if present == self.all_cotangents:
                self.full_backward = backward
        self.last_present = present
        return backward


class _Function(torch.autograd.Function):
    """forward(runner, *inputs) -> outputs; backward(*cotangents) -> (None, *input gradients)."""

    @staticmethod
    def forward(ctx: Any, runner: CompiledAutograd, *inputs: Any) -> tuple:
        if runner.lends:  # a CUDA-graphed forward: its saved values may be the graph's own buffers
            (outputs, saved), ctx.lent = runner.forward.call_lending(inputs)
        else:
            (outputs, saved), ctx.lent = runner.forward(*inputs), None
        ctx.runner = runner
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(*saved[: runner.saved_tensors])
        ctx.numbers = saved[runner.saved_tensors :]
        if any(map(_is_view, runner.tensor_outputs(outputs))):
            outputs, runner.views_of_inputs = _views_of_own_memory_detached(outputs, inputs, runner.tensor_positions)
        if runner.frozen:  # NOTE: after the detaching above: autograd marks the very tensors returned
            ctx.mark_non_differentiable(*(outputs[i] for i in runner.frozen))
        return tuple(outputs)

    @staticmethod
    def backward(ctx: Any, *cotangents: Any) -> tuple:
        runner: CompiledAutograd = ctx.runner
        if torch.is_grad_enabled():
            raise NotImplementedError(
                f"double backward through the compiled function {runner.name} is not supported: its backward "
                "is compiled without autograd (create_graph=True asks for the backward's own graph)"
            )
        backward = runner.full_backward
        if backward is not None and runner.every_output_differentiable and _NONE not in map(type, cotangents):
            given = cotangents  # every cotangent present: the usual call, its backward compiled already
            runner.last_present = runner.all_cotangents
        else:
            given = [cotangents[i] for i in runner.cotangent_positions]
            backward = runner.backward_for(tuple([c is not None for c in given]))
            if runner.last_present != runner.all_cotangents:
                given = [c for c in given if c is not None]
        saved, numbers = ctx.saved_tensors, ctx.numbers  # autograd's checks of in-place changes run here
        if ctx.lent is not None:
            values = ctx.lent.borrow()
            saved, numbers = values[: runner.saved_tensors], values[runner.saved_tensors :]
        if _autocast_on():  # NOTE: a backward run inside torch.autocast: the trace holds its casts
            backward = autocast.without_autocast(backward, autocast.state())
        grads = backward(*saved, *numbers, *given)
        if ctx.lent is not None:
            ctx.lent.release()
        return (None, *grads)


_is_view = torch.Tensor._is_view
_autocast_on = torch._C._is_any_autocast_enabled
# NOTE: an input whose elements share memory (an expanded one) is not made into a view again with
# as_strided: autograd's as_strided backward cannot tell which of the overlapping elements a
# gradient belongs to (the result would be wrong); such an output stays the Function's own view.
_overlap = torch._debug_has_internal_overlap
_NO_OVERLAP = 0


def _views_of_own_memory_detached(
    outputs: Any, inputs: tuple, positions: list[int]
) -> tuple[tuple, list[tuple[int, int]] | None]:
    """(the outputs, each view whose memory no input and no other output shares detached (the same
    memory, no longer a view as autograd sees it); the (output, input) positions of each view whose
    memory only that one input shares, or None).

    NOTE: autograd forbids in-place writes into a view a Function returns (its view+inplace
    rebasing would bypass the Function's backward), where eager allows them: a program writes into
    what a compiled piece returned (`pos_query_layer /= scale` after a graph break in DeBERTa, on a
    head-split transpose). A view of an intermediate of the compiled function is the only way to
    that memory, so autograd loses nothing when it stops being a view. A view of one input is made
    again outside the Function (`CompiledAutograd.__call__`), as the same view of that input, which
    autograd tracks as eager does, unless that input's elements overlap (see `_overlap`). A view of
    memory several values share stays as it is: a write into it must reach the others' gradients,
    which only autograd's view tracking could give (it raises instead of computing a wrong
    gradient). Outputs without a gradient too: a buffer a piece
    returns may be written under autograd later (`_write_again`), which autograd refuses for a view
    a Function made.
    """
    views = {i: outputs[i].untyped_storage().data_ptr() for i in positions if _is_view(outputs[i])}
    views = {i: pointer for i, pointer in views.items() if pointer != 0}
    if not views:  # NOTE: the usual call (a loss, logits): no storage read of every input and output
        return tuple(outputs), None
    wanted = set(views.values())
    sharing: dict[int, list[tuple[str, int]]] = {}
    for kind, values in (("input", inputs), ("output", outputs)):
        for i, value in enumerate(values):
            if isinstance(value, torch.Tensor) and (pointer := value.untyped_storage().data_ptr()) in wanted:
                sharing.setdefault(pointer, []).append((kind, i))
    outputs = list(outputs)
    of_inputs = []
    for i, pointer in views.items():
        output = outputs[i]
        others = [place for place in sharing[pointer] if place != ("output", i)]
        if not others:
            outputs[i] = output.detach()
        elif len(others) == 1 and others[0][0] == "input" and _overlap(inputs[others[0][1]]) == _NO_OVERLAP:
            of_inputs.append((i, others[0][1]))
    return tuple(outputs), of_inputs or None


def _write_again(outputs: tuple, inputs: tuple, writes: list[tuple[int, int]]) -> None:
    """Writes each output into its input (which holds its value already) where autograd records it."""
    for i, k in writes:
        inputs[i].copy_(outputs[k])


def _inputs_themselves(outputs: tuple, inputs: tuple, inputs_returned: list[tuple[int, int]]) -> tuple:
    """The outputs, each that is an input returned as is replaced by that input."""
    outputs = list(outputs)
    for i, j in inputs_returned:
        outputs[i] = inputs[j]
    return tuple(outputs)


def _viewed_again(outputs: tuple, inputs: tuple, of_inputs: list[tuple[int, int]]) -> tuple:
    """The outputs, each that views an input made again as the same view of that input, under autograd."""
    outputs = list(outputs)
    for i, j in of_inputs:
        view = outputs[i]
        outputs[i] = inputs[j].as_strided(view.size(), view.stride(), view.storage_offset())
    return tuple(outputs)


# `torch._C._FunctionBase.apply` bound to `_Function`: the C call that `_Function.apply` (Python) ends in
_apply = super(torch.autograd.Function, _Function).apply
