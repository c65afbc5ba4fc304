"""Tracing an `nn.Module`: its parameters and buffers become trace inputs, not constants.

`ModuleLayout` walks a module once and remembers where each parameter and buffer lives (a
tensor shared by several submodules, such as tied embedding weights, is one input under the
name it is first reached by). Each call reads the current tensors from there (`read`), so an
optimizer's in-place update, or a new tensor assigned to a parameter, is what the next call
sees; the prologue guards their metadata like any tensor argument's, never their values. The
train/eval mode of every submodule is passed along as a string the prologue guards
(`modes`). `forward` runs the module with the proxies of the trace installed in place of its
tensors, and returns its output as `(Spec, leaves)` (see structure.py).

Errors raised while tracing a module name the submodule that was running (its qualified name
in the model) besides the op. A forward that converts a submodule to the dtype and device it has
(`Module.to`) runs as a no-op (module_conversions.py).

Forward hooks and forward pre-hooks (transformers' gradient checkpointing registers one on the
input embeddings) run while tracing, as `Module.__call__` runs them: what they return or record is
in the trace like the forward's own ops. Which hooks are registered, anywhere in the model or
globally, is part of `modes` (`HookState`), so registering or removing one after a call compiles
again. A hook that stores a traced value outside the model (`activations[name] = output`, in a
dict or list it closes over or names as a global, or on the object it is a method of) is refused
with the hook's name: the value would be a proxy, not the call's tensor. Backward hooks and global
hooks are refused up front, naming the module.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator
from types import TracebackType
from typing import Any

import torch
from torch import nn
from torch.nn.modules import module as module_globals
from torch.utils.hooks import RemovableHandle

from compiler.core.errors import TracingError, check
from compiler.core.ir import Proxy
from compiler.tracing.module_conversions import TRACED_MODULE_CONVERSIONS
from compiler.tracing.structure import flatten

_TRACED_HOOK_TABLES = ("_forward_pre_hooks", "_forward_hooks")
_HOOK_TABLES = ("_backward_hooks", "_backward_pre_hooks")  # refused
_GLOBAL_HOOK_TABLES = (  # refused
    "_global_forward_hooks",
    "_global_forward_pre_hooks",
    "_global_backward_hooks",
    "_global_backward_pre_hooks",
)


def input_name(qualified_name: str) -> str:
    """The identifier a parameter or buffer is known by in traces ('h.0.attn.weight' -> 'h_0_attn_weight')."""
    return qualified_name.replace(".", "_")


class HookState:
    """The module hooks registered on `modules` and globally, as a string ("" when there are
    none): every registration takes a new key (`RemovableHandle.next_id`), so the keys of each
    table name its hooks. Made again only when a hook was registered since the last call (the
    counter moved) or a table that had hooks changed (one removed)."""

    def __init__(self, modules: list[nn.Module]) -> None:
        names = _TRACED_HOOK_TABLES + _HOOK_TABLES
        self.tables = [getattr(m, t) for m in modules for t in names] + [
            getattr(module_globals, t) for t in _GLOBAL_HOOK_TABLES
        ]
        self.counter = -1
        self.watched: list[dict] = []  # the tables that had hooks, and their keys then
        self.keys: list[tuple] = []
        self.last = ""

    def signature(self) -> str:
        """The registered hooks' keys, table by table ("" when there are none)."""
        if RemovableHandle.next_id == self.counter and (
            not self.watched or list(map(tuple, self.watched)) == self.keys
        ):
            return self.last
        self.counter = RemovableHandle.next_id
        held = [(i, t) for i, t in enumerate(self.tables) if t]
        self.watched = [t for _, t in held]
        self.keys = list(map(tuple, self.watched))
        self.last = "".join(f" hooks{i}:{','.join(map(str, t))}" for i, t in held)
        return self.last


def _stored_proxy(hook: Any) -> str | None:
    """Where `hook` keeps a traced value outside the trace (one level into a dict, list or object
    it closes over, names as a global, or is a method of), or None."""
    target = getattr(hook, "func", hook)  # a functools.partial
    code = getattr(target, "__code__", None)
    places: dict[str, Any] = {}
    for name, cell in zip(getattr(code, "co_freevars", ()), getattr(target, "__closure__", None) or ()):
        with contextlib.suppress(ValueError):  # NOTE: a cell not filled yet
            places[name] = cell.cell_contents
    scope = getattr(target, "__globals__", {})
    places.update({name: scope[name] for name in getattr(code, "co_names", ()) if name in scope})
    if hasattr(target, "__self__"):
        places["self"] = target.__self__
    for name, value in places.items():
        items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, set)) else ()
        if not items and not isinstance(value, (type, nn.Module)) and hasattr(value, "__dict__"):
            items = vars(value).values()
        if any(isinstance(v, Proxy) for v in items):
            return name
    return None


class ModuleLayout:
    """Where each parameter and buffer of a module lives, and the module's submodules."""

    def __init__(self, module: nn.Module, generation: int = 0) -> None:
        self.module = module
        self.generation = generation  # a new one when what the traces baked in changed (runtime/module.py)
        self.generation_mark = f"g{generation} " if generation else ""
        self.submodules = list(module.named_modules())
        # where each submodule hangs: (its parent's _modules, its name there, the submodule)
        self.children = [(m._modules, name, child) for _, m in self.submodules for name, child in m._modules.items()]
        self.child_tables = [m._modules for _, m in self.submodules]  # and how many each parent has
        self.child_counts = list(map(len, self.child_tables))
        self.hooks = HookState([m for _, m in self.submodules])
        self.module_names = {id(m): name for name, m in self.submodules}
        # every place a tensor is stored: (the owner's _parameters or _buffers dict, local name, input key)
        self.slots: list[tuple[dict, str, str]] = []
        self.keys: list[str] = []  # one per distinct tensor, in the order they are first reached
        key_of: dict[int, str] = {}
        for prefix, owner in module.named_modules(remove_duplicate=False):
            for table in (owner._parameters, owner._buffers):
                for local, tensor in table.items():
                    if tensor is None:
                        continue
                    key = key_of.get(id(tensor))
                    if key is None:
                        key = key_of[id(tensor)] = self._fresh_key(f"{prefix}.{local}" if prefix else local)
                        self.keys.append(key)
                    self.slots.append((table, local, key))
        self.first_slots = [next(s for s in self.slots if s[2] == key) for key in self.keys]

    def _fresh_key(self, qualified_name: str) -> str:
        key = input_name(qualified_name)
        while key in self.keys:
            key += "_"
        return key

    def read(self) -> dict[str, torch.Tensor] | None:
        """The module's tensors by input key, or None when the module no longer has this layout (a
        submodule replaced or removed, a parameter removed or set to None, or tensors once shared
        no longer the same object)."""
        try:
            if any(table[name] is not child for table, name, child in self.children):
                return None
            if list(map(len, self.child_tables)) != self.child_counts:
                return None
            state = {key: table[local] for table, local, key in self.first_slots}
            if len(self.slots) > len(self.first_slots):
                for table, local, key in self.slots:
                    if table[local] is not state[key]:
                        return None
        except KeyError:
            return None
        if any(t is None for t in state.values()):
            return None
        return state

    def modes(self) -> str:
        """'T' or 'E' (train or eval) per submodule, in order, then the registered hooks
        (`HookState`): the prologue guards it as a value."""
        modes = "".join("T" if m.training else "E" for _, m in self.submodules)
        return self.generation_mark + modes + self.hooks.signature()

    def check_traceable(self) -> None:
        """Rejects backward and global hooks, which run Python the tracer does not see; the error
        names the module."""
        for table in _GLOBAL_HOOK_TABLES:
            check(
                not getattr(module_globals, table, None),
                lambda table=table: (
                    f"a global module hook is registered ({table.removeprefix('_global_')}), which the fusebench "
                    "compiler cannot trace; remove it to compile the model"
                ),
                NotImplementedError,
            )
        for name, m in self.submodules:
            check(
                not isinstance(m, nn.RNNBase),
                lambda m=m: (
                    f"{self.describe(m)} is a recurrent layer, which compiler.jit does not support (its forward "
                    "keeps weak references to its parameters); use torch.compile(model, backend='fusebench'), "
                    "which runs it eagerly"
                ),
                NotImplementedError,
            )
            for table in _HOOK_TABLES:
                check(
                    not getattr(m, table, None),
                    lambda name=name, m=m, table=table: (
                        f"{self.describe(m)} has {table.strip('_').replace('_', ' ')}, which the fusebench "
                        "compiler cannot trace; remove them to compile the model"
                    ),
                    NotImplementedError,
                )

    def describe(self, m: nn.Module) -> str:
        """'module 'h.0.attn' (CausalSelfAttention)', or 'the model (GPT)' for the root."""
        name = self.module_names.get(id(m))
        return f"the model ({type(m).__name__})" if not name else f"module '{name}' ({type(m).__name__})"

    def forward(self, state: dict[str, Any], args: tuple, kwargs: dict) -> tuple:
        """Runs the module with `state`'s values (proxies) in place of its tensors; returns
        `(spec, leaves)` of its output."""
        self.check_traceable()
        with self._installed(state), TRACED_MODULE_CONVERSIONS.applied():
            try:
                output = self.module(*args, **kwargs)
            except (TracingError, NotImplementedError) as error:
                where = self._innermost_module(error.__traceback__)
                if where is None:
                    raise
                raise type(error)(f"{error} [while tracing {self.describe(where)}]") from error
        self._check_hooks_keep_nothing()
        leaves, spec = flatten(output)
        return spec, leaves

    def _check_hooks_keep_nothing(self) -> None:
        for _, m in self.submodules:
            for table in _TRACED_HOOK_TABLES:
                for hook in getattr(m, table).values():
                    place = _stored_proxy(hook)
                    check(
                        place is None,
                        lambda m=m, hook=hook, place=place: (
                            f"the forward hook {getattr(hook, '__qualname__', hook)!r} of {self.describe(m)} "
                            f"keeps a traced value in {place!r}, outside the model: a compiled call cannot fill "
                            "it with its tensors; return the value from the model instead, or use "
                            "torch.compile(model, backend='fusebench'), which runs such hooks"
                        ),
                        NotImplementedError,
                    )

    @contextlib.contextmanager
    def _installed(self, state: dict[str, Any]) -> Iterator[None]:
        saved = [(table, local, table[local]) for table, local, _ in self.slots]
        try:
            for table, local, key in self.slots:
                table[local] = state[key]
            yield
        finally:
            for table, local, tensor in saved:
                table[local] = tensor

    def _innermost_module(self, tb: TracebackType | None) -> nn.Module | None:
        found = None
        while tb is not None:
            candidate = tb.tb_frame.f_locals.get("self")
            if isinstance(candidate, nn.Module) and id(candidate) in self.module_names:
                found = candidate
            tb = tb.tb_next
        return found


def forward_signature(module: nn.Module) -> inspect.Signature:
    """The signature of the traced function: `(state, modes, <the module's forward parameters>)`."""
    try:
        forward = list(inspect.signature(module.forward).parameters.values())
    except (TypeError, ValueError):
        forward = [inspect.Parameter("args", inspect.Parameter.VAR_POSITIONAL)]
    taken = {p.name for p in forward}
    leading = [inspect.Parameter(n + "_" * (n in taken), inspect.Parameter.POSITIONAL_ONLY) for n in ("state", "modes")]
    return inspect.Signature(leading + forward)
