"""Region fingerprints: a region whose fingerprint was written before reuses what writing it gave,
which is exactly what writing its own source gives (on CPU, against the fake of nvfuser_direct)."""

from __future__ import annotations

import pytest
import torch

import compiler
from compiler.core.executor import Region
from compiler.core.ir import BoundSymbol, NumberProxy, TensorProxy
from compiler.executors.nvfuser.define.descriptors import default_descriptor, structure_key
from compiler.executors.nvfuser.define.fingerprint import SOURCES, Sources, fingerprint
from compiler.executors.nvfuser.define.translations import fusion_source
from compiler.executors.nvfuser.executor import region_fusions
from compiler.prims import Prim
from tests.support.nvfuser_helpers import fake_nvfuser  # noqa: F401 - a fixture

CPU = torch.device("cpu")


class Block(torch.nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(width)
        self.fc = torch.nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.nn.functional.gelu(self.fc(self.norm(x)), approximate="tanh")


def _written_fresh(region: Region, descriptors: tuple) -> tuple:
    source, _, shape_scalars, taken = fusion_source(region, descriptors)
    positions = tuple(i for i, p in enumerate(region.inputs) if p.name in shape_scalars)
    return structure_key(source), positions, tuple(taken)


@pytest.mark.parametrize("seed", [0, 1])
def test_identical_layers_reuse_what_writing_the_first_gave(fake_nvfuser, seed):  # noqa: F811
    torch.manual_seed(seed)
    model = torch.nn.Sequential(*(Block(16) for _ in range(3)))
    x = torch.randn(4, 16)
    jitted = compiler.jit(model, executors=["nvfuser", "torch"])
    SOURCES.clear()
    out = jitted(x)
    out.sum().backward()
    expected = model(x)
    torch.testing.assert_close(out, expected)
    traces = [compiler.last_traces(jitted)[-1], compiler.last_backward_traces(jitted)[-1]]
    fusions = [f for trace in traces for f in region_fusions(trace)]
    keys = [fingerprint(f.region, f.descriptors()) for f in fusions]
    assert None not in keys and len(set(keys)) < len(keys)  # the layers' regions share fingerprints
    for fusion in fusions:
        written = SOURCES.written(fusion.region, fusion.descriptors())
        assert (written.structure, written.shape_scalars, written.taken) == _written_fresh(
            fusion.region, fusion.descriptors()
        )


def _region(constant: object, dtype: torch.dtype = torch.float32, names: tuple[str, str] = ("a", "b")) -> Region:
    a = TensorProxy((4, 3), dtype, CPU, name=names[0])
    out = TensorProxy((4, 3), dtype, CPU, name=names[1])
    return Region("nvFusion0", (BoundSymbol(Prim.ADD, (a, constant), {}, out),), (a,), (out,))


def _descriptors(region: Region) -> tuple:
    return tuple(default_descriptor(p) for p in region.inputs)


def test_renamed_regions_share_a_fingerprint_and_what_was_written():
    sources = Sources()
    first, renamed = _region(2.0), _region(2.0, names=("x", "y"))
    assert fingerprint(first, _descriptors(first)) == fingerprint(renamed, _descriptors(renamed))
    assert sources.written(renamed, _descriptors(renamed)) is sources.written(first, _descriptors(first))
    assert len(sources) == 1


@pytest.mark.parametrize(
    "left, right",
    [(0.0, -0.0), (1, 1.0), (1, True), (2.0, 3.0), (float("inf"), float("-inf"))],
)
def test_constants_that_print_apart_are_different_fingerprints(left, right):
    a, b = _region(left), _region(right)
    assert fingerprint(a, _descriptors(a)) != fingerprint(b, _descriptors(b))


def test_dtypes_shapes_and_symbolic_sizes_are_part_of_the_fingerprint():
    base = _region(2.0)
    half = _region(2.0, dtype=torch.bfloat16)
    size = NumberProxy(int, 4, name="n")
    a = TensorProxy((size, 3), torch.float32, CPU, name="a")
    out = TensorProxy((size, 3), torch.float32, CPU, name="b")
    symbolic = Region("nvFusion0", (BoundSymbol(Prim.ADD, (a, 2.0), {}, out),), (a,), (out,))
    keys = [fingerprint(r, _descriptors(r)) for r in (base, half, symbolic)]
    assert len(set(keys)) == 3


def test_clear_fusion_cache_forgets_the_written_sources():
    region = _region(2.0)
    SOURCES.written(region, _descriptors(region))
    assert len(SOURCES) > 0
    compiler.clear_fusion_cache()
    assert len(SOURCES) == 0
