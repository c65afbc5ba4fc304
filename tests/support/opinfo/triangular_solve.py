"""Op cases: torch.linalg.solve_triangular (compiler/ops/triangular_solve.py): lower and upper, left and
right, unit diagonals, broadcast batch dims, one-element and vector-like right-hand sides."""

from __future__ import annotations

from collections.abc import Iterator

import torch

from tests.support.opinfo.samples import Maker, OpCase, Sample


def _triangle(make: Maker, *shape: int) -> torch.Tensor:
    """A well-conditioned square matrix (or batch of them): random entries, a dominant diagonal."""
    n = shape[-1]
    return make(*shape, low=-0.5, high=0.5) + 2 * torch.eye(n, dtype=make.dtype)


def _samples(make: Maker) -> Iterator[Sample]:
    yield Sample((_triangle(make, 5, 5), make(5, 3)), {"upper": False})
    yield Sample((_triangle(make, 2, 4, 4), make(2, 4, 2)), {"upper": True})
    yield Sample((_triangle(make, 3, 6, 6), make(6, 2)), {"upper": False, "unitriangular": True})  # broadcast
    yield Sample((_triangle(make, 4, 4), make(3, 4)), {"upper": True, "left": False})
    yield Sample((_triangle(make, 1, 2, 8, 8), make(1, 2, 8, 8)), {"upper": False, "unitriangular": True})
    yield Sample((_triangle(make, 1, 1), make(1, 1)), {"upper": True})
    yield Sample((_triangle(make, 5, 5), make(5, 1)), {"upper": True, "unitriangular": True, "left": True})


# NOTE: eager has no bf16 triangular solve on the CPU
CASES = [OpCase("solve_triangular", (torch.linalg.solve_triangular,), _samples, (torch.float32, torch.float64))]
