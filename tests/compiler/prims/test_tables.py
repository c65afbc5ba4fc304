"""Every table keyed by the Prim enum covers it, so coverage is visible in one place."""

from __future__ import annotations

from compiler.executors.torch import IMPLS
from compiler.prims import META, NUMBER_IMPLS, PROLOGUE_ONLY, Prim


def test_meta_table_covers_every_prim() -> None:
    assert set(META) == set(Prim)


def test_torch_executor_implements_every_prim() -> None:
    assert set(IMPLS) == set(Prim)


def test_number_semantics_cover_the_elementwise_prims() -> None:
    from compiler.prims import ELEMENTWISE

    assert set(NUMBER_IMPLS) >= ELEMENTWISE
    assert not (set(NUMBER_IMPLS) & PROLOGUE_ONLY)
