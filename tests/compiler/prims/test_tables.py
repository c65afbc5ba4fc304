"""Every table keyed by the Prim enum, with exactly the prims it covers, in one place.

Each table covers every prim, the prims of named categories (`prims.KINDS` partitions the enum),
or every prim but a named set of deliberate omissions defined beside the table. Adding a prim
therefore fails `test_kinds_partition_the_prims` until it has a kind, and the tests of the tables
its kind (or every prim) belongs to until each covers it or names it among its omissions. A
module-level table keyed by Prim that is missing here fails `test_every_prim_keyed_table_is_listed`.
"""

from __future__ import annotations

import ast
from collections.abc import Collection, Mapping
from pathlib import Path

import pytest

import compiler
from compiler import prims
from compiler.core import proxies
from compiler.executors import inductor, sdpa
from compiler.executors import torch as torch_executor
from compiler.executors.nvfuser.define.claims import LEFT_TO_TORCH, POLICY_TORCH
from compiler.executors.nvfuser.define.translations import TRANSLATIONS
from compiler.executors.nvfuser.diagnose import repro
from compiler.executors.nvfuser.diagnose.repro import TORCH_SOURCE
from compiler.passes import (
    fold_conversions,
    update_fresh,
    update_in_place,
    vjp_attention,
    vjp_library,
    vjp_rules,
    vjp_scatter,
    vjp_structural,
)
from compiler.prims import (
    ATTENTION,
    BINARY,
    ELEMENTWISE,
    GATHERS,
    KINDS,
    LIBRARY,
    LINALG,
    PROLOGUE_ONLY,
    UPDATES,
    Prim,
)
from compiler.prims.meta_library import LIBRARY_META
from compiler.prims.meta_linalg import LINALG_META
from compiler.runtime import guard_source

EVERY_PRIM = frozenset(Prim)

# "module:NAME" -> (the table, the prims it must cover exactly)
TABLES: dict[str, tuple[Mapping, Collection[Prim]]] = {
    # every prim
    "compiler.prims.meta:META": (prims.META, EVERY_PRIM),
    "compiler.prims:IMPLS": (prims.IMPLS, EVERY_PRIM),
    "compiler.executors.torch:IMPLS": (torch_executor.IMPLS, EVERY_PRIM),
    # every prim but the deliberate omissions defined beside the table
    "compiler.executors.nvfuser.define.translations:TRANSLATIONS": (TRANSLATIONS, EVERY_PRIM - set(LEFT_TO_TORCH)),
    "compiler.executors.nvfuser.define.claims:LEFT_TO_TORCH": (LEFT_TO_TORCH, EVERY_PRIM - set(TRANSLATIONS)),
    "compiler.executors.nvfuser.diagnose.repro:TORCH_SOURCE": (TORCH_SOURCE, EVERY_PRIM - set(LEFT_TO_TORCH)),
    "compiler.passes.vjp_rules:VJP": (vjp_rules.VJP, EVERY_PRIM - vjp_rules.NONDIFFERENTIABLE - vjp_rules.REWRITTEN),
    # the prims of named categories
    "compiler.prims.prim:NUMBER_IMPLS": (prims.NUMBER_IMPLS, ELEMENTWISE),
    "compiler.core.proxies:_NUMBER_OPS": ({Prim(name): ops for name, ops in proxies._NUMBER_OPS.items()}, BINARY),
    "compiler.prims.meta_linalg:LINALG_META": (LINALG_META, LINALG | ATTENTION),
    "compiler.prims.meta_library:LIBRARY_META": (LIBRARY_META, LIBRARY),
    "compiler.executors.inductor:LEFT_TO_OTHERS": (
        inductor.LEFT_TO_OTHERS,
        EVERY_PRIM - inductor.CLAIMED - PROLOGUE_ONLY,
    ),
    "compiler.executors.sdpa:_IMPLS": (sdpa._IMPLS, ATTENTION),
    "compiler.executors.nvfuser.define.claims:POLICY_TORCH": (POLICY_TORCH, LINALG),
    "compiler.passes.update_in_place:IN_PLACE": (update_in_place.IN_PLACE, UPDATES),
    "compiler.passes.update_fresh:FRESH": (update_fresh.FRESH, UPDATES),
    # conversions fold in chains and move after the gathers that read them; reshapes fold in
    # chains; constants are made on the device they are moved to; multiplications by 1 fold;
    # exact elementwise prims of fills, and cats of fills of one value, fold to fills; a slice between
    # two permutes is a slice of the input
    "compiler.passes.fold_conversions:RULES": (
        fold_conversions.RULES,
        GATHERS
        | {Prim.CONVERT_ELEMENT_TYPE, Prim.RESHAPE, Prim.DEVICE_PUT, Prim.CAT, Prim.PERMUTE}
        | fold_conversions.EXACT_ON_CONSTANTS,
    ),
    "compiler.runtime.guard_source:INLINE_GUARDS": (
        guard_source.INLINE_GUARDS,
        PROLOGUE_ONLY - guard_source.INLINED_PER_PROLOGUE,
    ),
    # single prims, each the only one of its kind that needs an entry
    "compiler.prims:TRACING_REWRITES": (prims.TRACING_REWRITES, {Prim.RESHAPE}),  # eager's reshape may copy
    "compiler.passes.vjp_attention:FORWARD_REWRITES": (vjp_attention.FORWARD_REWRITES, {Prim.SDPA}),
    "compiler.passes.vjp_attention:ATTENTION_RULES": (vjp_attention.ATTENTION_RULES, {Prim.SDPA_FORWARD}),
}

# Tables that are parts of a table above, merged into it (each must stay inside it; the VJP parts
# must not overlap, since a merged dict would silently keep only one rule).
PARTS: dict[str, tuple[Mapping, str]] = {
    "compiler.passes.vjp_rules:_ELEMENTWISE_RULES": (vjp_rules._ELEMENTWISE_RULES, "compiler.passes.vjp_rules:VJP"),
    "compiler.passes.vjp_structural:STRUCTURAL_RULES": (
        vjp_structural.STRUCTURAL_RULES,
        "compiler.passes.vjp_rules:VJP",
    ),
    "compiler.passes.vjp_scatter:SCATTER_RULES": (vjp_scatter.SCATTER_RULES, "compiler.passes.vjp_rules:VJP"),
    "compiler.passes.vjp_library:LIBRARY_RULES": (vjp_library.LIBRARY_RULES, "compiler.passes.vjp_rules:VJP"),
    "compiler.executors.nvfuser.diagnose.repro:_OPERATORS": (
        repro._OPERATORS,
        "compiler.executors.nvfuser.diagnose.repro:TORCH_SOURCE",
    ),
}


def test_kinds_partition_the_prims() -> None:
    seen: dict[Prim, str] = {}
    for kind, members in KINDS.items():
        for prim in members:
            assert prim not in seen, f"prims.{prim.value} is of two kinds: {seen[prim]!r} and {kind!r}"
            seen[prim] = kind
    missing = sorted(p.value for p in EVERY_PRIM - set(seen))
    assert not missing, f"prims without a kind (add each to one of prims.KINDS, then decide each table): {missing}"


@pytest.mark.parametrize("name", sorted(TABLES))
def test_table_covers_exactly_its_prims(name: str) -> None:
    table, expected = TABLES[name]
    covered = set(table)
    assert covered == set(expected), (
        f"{name}: missing {sorted(p.value for p in set(expected) - covered)}, "
        f"unexpected {sorted(p.value for p in covered - set(expected))}"
    )


def test_translations_and_their_omissions_do_not_overlap() -> None:
    assert set(TRANSLATIONS).isdisjoint(LEFT_TO_TORCH)
    assert set(vjp_rules.VJP).isdisjoint(vjp_rules.NONDIFFERENTIABLE | vjp_rules.REWRITTEN)
    assert not (vjp_rules.NONDIFFERENTIABLE & vjp_rules.REWRITTEN)


def test_parts_lie_inside_their_tables_and_vjp_parts_do_not_overlap() -> None:
    for name, (part, whole) in PARTS.items():
        assert set(part) <= set(TABLES[whole][0]), f"{name} has prims {whole} lacks"
    vjp = "compiler.passes.vjp_rules:VJP"
    vjp_parts = [part for part, whole in PARTS.values() if whole == vjp] + [vjp_attention.ATTENTION_RULES]
    assert sum(len(p) for p in vjp_parts) == len(vjp_rules.VJP), "the VJP parts overlap, or VJP has rules of its own"


def test_only_slice_broadcast_and_attention_have_an_inline_source_form() -> None:
    """codegen writes an implementation's `inline_source` in place of its call; in the torch
    executor only the slice (a chain of `narrow`s, sparing a call per slice), the broadcast (one
    `expand` where torch's broadcasting does it) and attention (torch's own call where no key/value
    head serves several query heads) have one."""
    inline = {p for p, impl in torch_executor.IMPLS.items() if hasattr(impl, "inline_source")}
    assert inline == {Prim.SLICE, Prim.BROADCAST_IN_DIM, Prim.SDPA}


def _annotation_keyed_by_prim(annotation: ast.expr | None) -> bool:
    if not isinstance(annotation, ast.Subscript) or not isinstance(annotation.value, ast.Name):
        return False
    key = annotation.slice.elts[0] if isinstance(annotation.slice, ast.Tuple) else annotation.slice
    return annotation.value.id in ("dict", "Mapping") and isinstance(key, ast.Name) and key.id == "Prim"


def _literal_keyed_by_prim(value: ast.expr | None) -> bool:
    if isinstance(value, ast.Dict) and value.keys and value.keys[0] is not None:
        key = value.keys[0]
        return isinstance(key, ast.Attribute) and isinstance(key.value, ast.Name) and key.value.id == "Prim"
    return False


def _prim_keyed_tables() -> set[str]:
    """ "module:NAME" of each module-level table in compiler/ annotated as keyed by Prim, or a dict
    literal whose first key is a `Prim.X`."""
    root = Path(compiler.__file__).parent
    found = set()
    for path in sorted(root.rglob("*.py")):
        module = ".".join(path.relative_to(root.parent).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                if _annotation_keyed_by_prim(node.annotation) or _literal_keyed_by_prim(node.value):
                    found.add(f"{module}:{node.target.id}")
            elif isinstance(node, ast.Assign) and _literal_keyed_by_prim(node.value):
                found |= {f"{module}:{t.id}" for t in node.targets if isinstance(t, ast.Name)}
    return found


def test_every_prim_keyed_table_is_listed() -> None:
    found = _prim_keyed_tables()
    assert "compiler.passes.vjp_rules:VJP" in found and "compiler.executors.sdpa:_IMPLS" in found  # the scan works
    unlisted = sorted(found - set(TABLES) - set(PARTS))
    assert not unlisted, f"Prim-keyed tables with no coverage entry in TABLES or PARTS: {unlisted}"
