"""How tracing specialises a call's int/float/bool arguments: `jit(numbers=...)`."""

from __future__ import annotations

import enum


class Numbers(enum.Enum):
    """`CONSTANT`: each number is baked into the trace and its value guarded by the prologue (a new
    value compiles a new entry, or makes that number symbolic under automatic dynamic);
    `SYMBOLIC`: numbers are symbolic inputs (NumberProxy), only the branches taken on them guarded."""

    CONSTANT = "constant"
    SYMBOLIC = "symbolic"
