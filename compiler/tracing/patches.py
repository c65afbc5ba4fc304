"""What tracing changes while a function runs on proxies: every torch function goes to the ops table
(`TracingMode`), the builtin torch functions take symbolic numbers (`torch.arange(n)`,
`torch.where(mask, x, fill)`) and `associative_scan` takes proxies (`BYPASSES`),
`torch.compiler.is_compiling()` is True (`compiling`), and the program's own
`isinstance(x, torch.Tensor)` holds for a traced tensor (`program_running`). The changes are
shared by the traces of every thread (`_SharedPatch`).
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import sys
import threading
from collections.abc import Callable, Iterator
from types import BuiltinFunctionType
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from compiler.core import proxies
from compiler.core.ir import NumberProxy, TensorProxy, current, proxies_in
from compiler.ops.complex_proxy import ComplexProxy
from compiler.tracing import scan


class TracingMode(TorchFunctionMode):
    """Routes every torch function called while tracing (factories included) to the ops table,
    except where the program builds a module (`_building_a_module`)."""

    def __torch_function__(self, func: Callable, types: Any, args: tuple = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        func = getattr(func, "__fusebench_builtin__", func)  # torch names a builtin by its module's attribute
        context = current()
        if context is not None:
            traced = list(proxies_in((args, kwargs)))
            numbers = {id(p) for p in traced if isinstance(p, NumberProxy)}
            if numbers:
                context.drop_argument_parser_guards(sys._getframe(1), numbers)
            if not traced and _building_a_module(sys._getframe(1)):
                return func(*args, **kwargs)  # NOTE: this mode is off inside its own handler
        return proxies.HOOKS.dispatch(func, args, kwargs)


def _building_a_module(frame: Any) -> bool:
    """Whether an `nn.Module`'s `__init__` is running below `frame`'s callers: the program builds a
    module while it runs (BigBird replaces its block-sparse attention by full attention on a short
    sequence, new layers whose weights it then swaps for its own). What it computes there from no
    traced value (its new parameters, drawn as torch draws them) is made as in eager, not traced.
    Only the program's frames count: the walk stops at the tracer's own (a function jitted and
    first called inside some module's `__init__` is traced as any other)."""
    while frame is not None and frame.f_globals.get("__name__") != "compiler.tracing.frontend":
        if frame.f_code.co_name == "__init__" and isinstance(frame.f_locals.get("self"), torch.nn.Module):
            return True
        frame = frame.f_back
    return False


@functools.cache  # NOTE: the ops table is complete once compiler.ops is imported; tracing installs these per trace
def _number_parameters() -> list[tuple[Any, str]]:
    """The torch functions whose argument parser takes a number argument only as a Python number
    (not through `__index__`, as it does for sizes), as (module, name): the builtins the ops table
    implements, of `torch` and of its namespaces (`torch.nn.functional.softplus`, `torch.special`).
    Called with a NumberProxy while tracing, they go straight to the ops table (`torch.arange(n)`
    over a symbolic size n, `torch.where(mask, x, fill)`, `torch.add(p, g, alpha=-lr)`,
    `F.softplus(x, beta=b)` over a symbolic number), where the parser would refuse the call before
    the tracing mode saw it."""
    from compiler.ops.registry import OPS, resolve

    def module_named(dotted: str) -> Any:
        return torch if dotted == "torch" else resolve(dotted)

    found = set()
    for op in OPS.values():
        module_name, _, name = op.name.rpartition(".")
        in_torch = module_name.split(".")[0] == "torch" and not module_name.startswith("torch.Tensor")
        if in_torch and isinstance(getattr(module_named(module_name), name, None), BuiltinFunctionType):
            found.add((module_name, name))
    return [(module_named(module_name), name) for module_name, name in sorted(found)]


def _number_parameters_bypass(name: str, original: Callable) -> Callable:
    def bypass(*args: Any, **kwargs: Any) -> Any:
        if current() is not None and any(isinstance(p, NumberProxy) for p in proxies_in((args, kwargs))):
            return proxies.HOOKS.dispatch(original, args, kwargs)
        return original(*args, **kwargs)

    bypass.__name__ = bypass.__qualname__ = name
    bypass.__wrapped__ = bypass.__fusebench_builtin__ = original  # NOTE: the ops table's key (registry.dispatch)
    return bypass


class _SharedPatch:
    """A change to `torch` that traces share: the first to enter makes it (`make` returns how to
    undo it), the last to leave undoes it, whatever the threads (and traces inside traces).

    Before, each trace saved what it found and put it back when it ended: a trace that ended while
    another thread traced undid the change under it (torch's own `arange` refused that trace's
    symbolic size), or put back the other's change for good (`torch.compiler.is_compiling()` stayed
    True after both had ended).
    """

    def __init__(self, make: Callable[[], Callable[[], None]]) -> None:
        self.make = make
        self.lock = threading.Lock()
        self.entered = 0
        self.undo: Callable[[], None] | None = None

    @contextlib.contextmanager
    def applied(self) -> Iterator[None]:
        """The change, made for the block."""
        with self.lock:
            if self.entered == 0:
                self.undo = self.make()
            self.entered += 1
        try:
            yield
        finally:
            with self.lock:
                self.entered -= 1
                if self.entered == 0 and self.undo is not None:
                    self.undo()
                    self.undo = None


def _checking_symbolic_conditions(original: Callable) -> Callable:
    """`torch._check_with` taking a symbolic condition (a relation of symbolic sizes, as
    `F.multi_head_attention_forward` checks its key padding mask's length with): decided as an `if`
    on it is, the relation guarded."""

    @functools.wraps(original)
    def check_with(error_type: Any, cond: Any, message: Any = None) -> None:
        return original(error_type, bool(cond) if isinstance(cond, NumberProxy) else cond, message)

    return check_with


def _grouped_by_device_and_dtype(tensorlistlist: list[list[Any]], with_indices: bool = False) -> dict:
    """torch's grouping of the tensors of foreach calls (`get_total_norm(foreach=True)`), whose C
    function refuses traced tensors: each list's tensors by the device and dtype of the first
    list's, with their indices."""
    groups: dict[tuple, tuple[list[list[Any]], list[int]]] = {}
    for i, t in enumerate(tensorlistlist[0]):
        lists, indices = groups.setdefault((t.device, t.dtype), ([[] for _ in tensorlistlist], []))
        for grouped, tensors in zip(lists, tensorlistlist):
            grouped.append(tensors[i])
        indices.append(i)
    return groups


def _install_bypasses() -> Callable[[], None]:
    """Installs the bypasses of `_number_parameters()` on torch's modules, `torch._check_with` taking
    symbolic conditions, torch's foreach grouping and support check taking traced tensors, and the
    traced `associative_scan` (scan.py); returns how to remove them."""
    replacements = {(m, name): _number_parameters_bypass(name, getattr(m, name)) for m, name in _number_parameters()}
    replacements[(torch, "_check_with")] = _checking_symbolic_conditions(torch._check_with)
    for module in (torch.utils._foreach_utils, torch.nn.utils.clip_grad):
        replacements[(module, "_group_tensors_by_device_and_dtype")] = _grouped_by_device_and_dtype
    foreach_types = torch.utils._foreach_utils._foreach_supported_types
    replacements[(torch.utils._foreach_utils, "_foreach_supported_types")] = [*foreach_types, TensorProxy]
    originals = {(module, name): getattr(module, name) for module, name in replacements}
    for (module, name), replacement in replacements.items():
        setattr(module, name, replacement)
    undo_scan = scan.install()

    def undo() -> None:
        undo_scan()
        for (module, name), original in originals.items():
            setattr(module, name, original)

    return undo


def _set_compiling_flag() -> Callable[[], None]:
    """Sets torch's "compiling" flag (see `compiling`); returns how to put it back."""
    previous = torch.compiler._is_compiling_flag
    torch.compiler._is_compiling_flag = True

    def undo() -> None:
        torch.compiler._is_compiling_flag = previous

    return undo


BYPASSES = _SharedPatch(_install_bypasses)
_COMPILING = _SharedPatch(_set_compiling_flag)


def compiling() -> contextlib.AbstractContextManager[None]:
    """`torch.compiler.is_compiling()` is True inside the block, as while torch.compile traces
    (shared by the traces of every thread: `_SharedPatch`).

    NOTE: torch reads the module global `torch.compiler._is_compiling_flag` (torch 2.11 to 2.13;
    2.13's `_compile_session_context` sets the same flag, 2.11 has no such helper).
    """
    return _COMPILING.applied()


_TracingMode = TracingMode  # NOTE: the name tests/compiler/ops/test_inplace_aliasing.py enters by


class _Program(threading.local):
    """Whether the traced program's own code runs now in this thread, not the compiler's."""

    running = False


_PROGRAM = _Program()
_isinstance = builtins.isinstance


def _names_tensor(classes: Any) -> bool:
    if classes is torch.Tensor:
        return True
    return type(classes) is tuple and any(_names_tensor(c) for c in classes)


# torch's own pure-Python helpers that only ask isinstance to tell a tensor from None or another value
# before reading its metadata (nn.MultiheadAttention's masks): (module, function)
_TORCH_TYPE_CHECKS = frozenset({("torch.nn.functional", "_none_or_dtype")})


_TRACED_TENSORS = (TensorProxy, ComplexProxy)

# NOTE: `torch.is_tensor` is `isinstance(obj, torch.Tensor)` in torch's Python: a program asks it
# where it would ask isinstance.
_IS_TENSOR_CODE = torch.is_tensor.__code__


def _program_isinstance(obj: Any, classes: Any, /) -> bool:
    """`isinstance`, True for a TensorProxy (or ComplexProxy) against torch.Tensor while the program runs, asked by
    the program's code (not torch's own).

    NOTE: programs tell tensors from other values with it (transformers takes a prepared 4-d
    attention mask as is only when `isinstance(mask, torch.Tensor)`). torch's own Python hands the
    tensors it finds so to its C functions (`autograd.Function.apply`), which would reject a proxy;
    a proxy answering through `__class__` instead would crash torch's C argument parser. torch's
    helpers in `_TORCH_TYPE_CHECKS` only read the tensor's metadata, so they see a tensor too."""
    if _PROGRAM.running and type(obj) in _TRACED_TENSORS and _names_tensor(classes):
        frame = sys._getframe(1)
        if frame.f_code is _IS_TENSOR_CODE:  # `torch.is_tensor(x)`: whoever asked torch answers
            frame = frame.f_back
        module = frame.f_globals.get("__name__", "")
        programs = module != "torch" and not module.startswith("torch.")
        if programs or (module, frame.f_code.co_name) in _TORCH_TYPE_CHECKS:
            return True
    return _isinstance(obj, classes)


def _compiler_code(hook: Callable) -> Callable:
    """`hook` (where the program calls into the compiler) run as the compiler's code."""

    def run(*args: Any) -> Any:
        if not _PROGRAM.running:
            return hook(*args)
        _PROGRAM.running = False
        try:
            return hook(*args)
        finally:
            _PROGRAM.running = True

    return run


def _install_program_isinstance() -> Callable[[], None]:
    """`_program_isinstance` as the builtin, the proxies' hooks as `_compiler_code`; returns how
    to undo both."""
    hooks = proxies.HOOKS
    dispatch, bind_prim = hooks.dispatch, hooks.bind_prim
    hooks.dispatch, hooks.bind_prim = _compiler_code(dispatch), _compiler_code(bind_prim)
    builtins.isinstance = _program_isinstance

    def undo() -> None:
        builtins.isinstance = _isinstance
        hooks.dispatch, hooks.bind_prim = dispatch, bind_prim

    return undo


_PROGRAM_ISINSTANCE = _SharedPatch(_install_program_isinstance)


@contextlib.contextmanager
def program_running() -> Iterator[None]:
    """The traced program runs in the block (see `_program_isinstance`); the ops it calls run as
    the compiler's code, which sees proxies as they are."""
    with _PROGRAM_ISINSTANCE.applied():
        previous, _PROGRAM.running = _PROGRAM.running, True
        try:
            yield
        finally:
            _PROGRAM.running = previous
