"""Values inside a computation's output, named by paths, and a computation whose output has those
values replaced after every call (complex outputs made complex again, row-major outputs made
contiguous: tracing/complex_values.py, ops/row_major.py).

Where the computation is generated code (codegen's `__fusebench_source__`) and each path leads
through the tuple, list and dict literals of its `return`, the replacement is written into that
`return` (`return _replaced_3(t10)`, or `return t10.contiguous()` where `replace` names the tensor method it
calls as its `method`): still generated code, which the dispatcher inlines whole
(runtime/dispatch.py), where a wrapper object would cost two Python calls per call of a
function returning a softmax."""

from __future__ import annotations

import ast
import types
from collections.abc import Callable
from typing import Any

from compiler.core.proxies import rebuild_tuple
from compiler.core.python_code import code_for

Path = tuple  # the keys and indices leading to a value inside tuples, lists and dicts


class ReplacedAtPaths:
    """Runs `computation`, then replaces the value at each of `paths` in its output by `replace(value)`."""

    def __init__(self, computation: Callable, paths: tuple[Path, ...], replace: Callable[[Any], Any]) -> None:
        self.computation = computation
        self.paths = paths
        self.replace = replace

    def __call__(self, *inputs: Any) -> Any:
        output = self.computation(*inputs)
        for path in self.paths:
            output = replaced_at(output, path, self.replace)
        return output

    def __getattr__(self, name: str) -> Any:  # NOTE: runners' own attributes (a graphed entry's stats)
        return getattr(self.computation, name)


def replaced_at_paths(computation: Callable, paths: tuple[Path, ...], replace: Callable[[Any], Any]) -> Callable:
    """`computation` with the values at `paths` of its output replaced by `replace(value)` after
    every call: generated code where `computation` is and its `return` spells those paths out
    (see the module), else a `ReplacedAtPaths`."""
    if not paths:
        return computation
    rewritten = _rewritten(computation, paths, replace)
    return rewritten if rewritten is not None else ReplacedAtPaths(computation, paths, replace)


def _rewritten(computation: Callable, paths: tuple[Path, ...], replace: Callable[[Any], Any]) -> Callable | None:
    source = getattr(computation, "__fusebench_source__", None)
    if source is None or type(computation) is not types.FunctionType:
        return None
    module = ast.parse(source)
    function = module.body[0] if len(module.body) == 1 else None
    if not isinstance(function, ast.FunctionDef) or not isinstance(function.body[-1], ast.Return):
        return None
    scope = dict(computation.__globals__)
    method = getattr(replace, "method", None)
    if method is not None:
        wrap = lambda node: ast.Call(ast.Attribute(node, method, ast.Load()), [], [])
    else:
        name = f"_replaced_{len(scope)}"
        while name in scope:
            name += "_"
        scope[name] = replace
        wrap = lambda node: ast.Call(ast.Name(name, ast.Load()), [node], [])
    returned = function.body[-1]
    for path in paths:
        value = _wrapped(returned.value, path, wrap)
        if value is None:
            return None
        returned.value = value
    text = ast.unparse(module) + "\n"
    exec(code_for(text, computation.__code__.co_filename), scope)
    made = scope[function.name]
    made.__dict__.update(computation.__dict__)
    made.__fusebench_source__ = text
    return made


def _wrapped(node: ast.expr | None, path: Path, wrap: Callable[[ast.expr], ast.expr]) -> ast.expr | None:
    """`node` (a returned expression) with the value at `path` inside its literals `wrap`ped; None
    where the path leaves the literals."""
    if node is None:
        return None
    if not path:
        return wrap(node)
    key, rest = path[0], path[1:]
    if (
        isinstance(node, (ast.Tuple, ast.List))
        and type(key) is int
        and not any(isinstance(e, ast.Starred) for e in node.elts)
    ):
        if not 0 <= key < len(node.elts) or (inner := _wrapped(node.elts[key], rest, wrap)) is None:
            return None
        node.elts[key] = inner
        return node
    if isinstance(node, ast.Dict) and all(isinstance(k, ast.Constant) for k in node.keys):
        at = [i for i, k in enumerate(node.keys) if k.value == key]  # type: ignore[union-attr]
        if len(at) != 1 or (inner := _wrapped(node.values[at[0]], rest, wrap)) is None:
            return None
        node.values[at[0]] = inner
        return node
    return None


def replaced_at(value: Any, path: Path, replace: Callable[[Any], Any]) -> Any:
    """`value` with the value at `path` replaced by `replace(it)` (containers rebuilt, not changed)."""
    if not path:
        return replace(value)
    key, rest = path[0], path[1:]
    if isinstance(value, tuple):
        items = list(value)
        items[key] = replaced_at(items[key], rest, replace)
        return rebuild_tuple(type(value), items)
    value = list(value) if isinstance(value, list) else dict(value)
    value[key] = replaced_at(value[key], rest, replace)
    return value
