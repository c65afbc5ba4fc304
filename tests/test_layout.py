"""The layout's rules: no import cycle in `compiler/` or `fusebench/`, and the compiler's layers
import only downward.

The graph is built from the source with `ast`, so imports inside functions and under
`if TYPE_CHECKING:` count too. Module A imports B when any import statement in A names B, or
names something defined in B (`from pkg import sub` imports the submodule `pkg.sub`). A parent
package's `__init__` that Python runs on the way is not an edge: it is how packages load, not a
dependency the code chose.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("compiler", "fusebench")

# The compiler's layers, bottom first. A module may import modules of its own layer or below.
COMPILER_LAYERS = (
    ("compiler.core",),  # IR values: errors, dtypes, the tracing context, proxies, traces
    ("compiler.prims",),  # the Prim enum, its meta table, calling prims
    ("compiler.ops",),  # torch-level ops as decompositions into prims, the aliasing model
    ("compiler.tracing",),  # the frontend (prologue + computation traces), checkers, interpreter
    ("compiler.passes",),  # Trace -> Trace passes
    ("compiler.executors",),  # torch, nvFuser, SDPA, codegen
    ("compiler.runtime",),  # the cache and the pipeline from a call to a cache entry
    ("compiler", "compiler.examine", "compiler.dynamo"),  # the public API
)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))}


def import_graph() -> dict[str, set[str]]:
    """Module name -> the project modules it imports (anywhere in its source)."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = name.split(".") if is_package else name.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                targets = [f"{module}.{a.name}" if f"{module}.{a.name}" in modules else module for a in node.names]
            else:
                continue
            for target in targets:
                # `import a.b.c` names a.b.c; a name inside a module maps to the module.
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    deps.add(target)
        graph[name] = deps
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as [a, b, ..., a], or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                return path[path.index(dep) :] + [dep]
            if dep not in state and (cycle := visit(dep)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def _layer(module: str) -> int:
    for rank, prefixes in reversed(list(enumerate(COMPILER_LAYERS))):
        if any(module == p or module.startswith(p + ".") for p in prefixes if p != "compiler"):
            return rank
    assert module in ("compiler", "compiler.examine"), f"{module} is in no layer of COMPILER_LAYERS"
    return len(COMPILER_LAYERS) - 1


def test_find_cycle_finds_one() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_graph_sees_imports_inside_functions() -> None:
    graph = import_graph()
    assert "compiler.examine" in graph["compiler"] or "compiler.runtime.pipeline" in graph["compiler"]
    assert graph["compiler.core.ir"] >= {"compiler.core.context", "compiler.core.proxies"}


def test_no_import_cycles() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_compiler_imports_point_down_the_layers() -> None:
    graph = import_graph()
    upward = [
        f"{module} ({COMPILER_LAYERS[_layer(module)][0]}) imports {dep} ({COMPILER_LAYERS[_layer(dep)][0]})"
        for module, deps in graph.items()
        if module.startswith("compiler")
        for dep in sorted(deps)
        if dep.startswith("compiler") and _layer(dep) > _layer(module)
    ]
    assert not upward, "imports that point up the compiler's layers:\n" + "\n".join(upward)


def test_the_compiler_root_holds_only_the_public_api() -> None:
    root_modules = sorted(p.name for p in (ROOT / "compiler").glob("*.py"))
    assert root_modules == ["__init__.py", "examine.py"], root_modules
