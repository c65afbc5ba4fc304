"""Objects as arguments of a jitted function (tracing/objects.py): a cache object's attributes are
inputs and guards, what the call does to it is written back onto the caller's object, and a cache
of another structure compiles its own entry instead of reusing a wrong one."""

from __future__ import annotations

import copy

import pytest
import torch

import compiler


class Layer:
    """A DynamicLayer-like cache layer: created empty, initialised on first update, grown by cat."""

    def __init__(self) -> None:
        self.keys: torch.Tensor | None = None
        self.is_initialized = False

    def update(self, keys: torch.Tensor) -> torch.Tensor:
        if not self.is_initialized:
            self.keys = torch.tensor([], dtype=keys.dtype)
            self.is_initialized = True
        self.keys = torch.cat([self.keys, keys], dim=-2)
        return self.keys


class StaticLayer:
    """A StaticLayer-like cache layer: preallocated, written in place at a position it counts."""

    def __init__(self, length: int, width: int) -> None:
        self.keys = torch.zeros(2, length, width)
        self.length = torch.tensor(0)

    def update(self, keys: torch.Tensor) -> torch.Tensor:
        position = torch.arange(keys.shape[-2]) + self.length
        self.keys.index_copy_(1, position, keys)
        self.length.add_(keys.shape[-2])
        return self.keys


class Cache:
    def __init__(self, layers: list) -> None:
        self.layers = layers


class LazyCache:
    """Appends its layers while the first call runs (as a DynamicCache built without a config)."""

    def __init__(self) -> None:
        self.layers: list[Layer] = []

    def layer(self, index: int) -> Layer:
        while len(self.layers) <= index:
            self.layers.append(Layer())
        return self.layers[index]


def decode(x: torch.Tensor, cache: Cache) -> tuple[torch.Tensor, Cache]:
    for layer in cache.layers:
        x = torch.tanh(layer.update(x).mean(-2, keepdim=True) + x)
    return x, cache


def decode_lazily(x: torch.Tensor, cache: LazyCache) -> torch.Tensor:
    for index in range(2):
        x = torch.tanh(cache.layer(index).update(x).sum(-2, keepdim=True) * 0.1 + x)
    return x


def _assert_same_layers(got: Cache, want: Cache) -> None:
    assert [type(layer) for layer in got.layers] == [type(layer) for layer in want.layers]
    for layer, expected in zip(got.layers, want.layers):
        assert vars(layer).keys() == vars(expected).keys()
        for name, value in vars(expected).items():
            if isinstance(value, torch.Tensor):
                torch.testing.assert_close(getattr(layer, name), value)
            else:
                assert getattr(layer, name) == value, name


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_growing_cache_is_written_back_and_returned_as_the_callers_object(seed: int) -> None:
    torch.manual_seed(seed)
    jitted = compiler.jit(decode)
    cache, expected_cache = Cache([Layer(), Layer()]), Cache([Layer(), Layer()])
    x = expected = torch.randn(2, 3, 4)
    for _ in range(5):
        (x, returned), (expected, _) = jitted(x, cache), decode(expected, expected_cache)
        assert returned is cache
        torch.testing.assert_close(x, expected)
        _assert_same_layers(cache, expected_cache)
    # uninitialised, then a first and a second length; every later length reuses the symbolic entry
    assert compiler.cache_stats(jitted).misses == 3


@pytest.mark.parametrize("seed", [0, 1])
def test_in_place_writes_into_a_static_cache_reach_the_callers_tensors(seed: int) -> None:
    torch.manual_seed(seed)
    jitted = compiler.jit(decode)
    cache = Cache([StaticLayer(8, 4), StaticLayer(8, 4)])
    expected_cache = copy.deepcopy(cache)
    buffers = [(layer.keys, layer.keys.data_ptr(), layer.length) for layer in cache.layers]
    x = expected = torch.randn(2, 1, 4)
    for _ in range(6):
        (x, _), (expected, _) = jitted(x, cache), decode(expected, expected_cache)
        torch.testing.assert_close(x, expected)
        _assert_same_layers(cache, expected_cache)
    assert [(layer.keys, layer.keys.data_ptr(), layer.length) for layer in cache.layers] == buffers
    assert compiler.cache_stats(jitted).misses == 1  # the position is a tensor: one entry for every step


def test_a_cache_of_another_structure_compiles_its_own_entry() -> None:
    jitted = compiler.jit(decode)
    x = torch.randn(2, 1, 4)
    initialised = Cache([Layer(), Layer()])
    jitted(x, initialised)
    for cache in (Cache([Layer()]), Cache([Layer(), Layer(), Layer()]), Cache([Layer(), Layer()]), initialised):
        expected_cache = copy.deepcopy(cache)
        got, _ = jitted(x, cache)
        expected, _ = decode(x, expected_cache)
        torch.testing.assert_close(got, expected)
        _assert_same_layers(cache, expected_cache)
    # one layer, three layers and the initialised two-layer cache each miss; a fresh two-layer one hits
    stats = compiler.cache_stats(jitted)
    assert (stats.misses, stats.hits) == (4, 1)
    kinds = {miss.kind for recompilation in jitted.recompilations for miss in recompilation.misses}
    assert "structure" in kinds


def test_a_layer_of_another_class_misses() -> None:
    jitted = compiler.jit(decode)
    x = torch.randn(2, 1, 4)
    jitted(x, Cache([Layer()]))
    cache = Cache([StaticLayer(4, 4)])
    expected_cache = copy.deepcopy(cache)
    torch.testing.assert_close(jitted(x, cache)[0], decode(x, expected_cache)[0])
    _assert_same_layers(cache, expected_cache)
    assert compiler.cache_stats(jitted).misses == 2


def test_layers_appended_during_the_call_land_in_the_callers_list() -> None:
    jitted = compiler.jit(decode_lazily)
    cache, expected_cache = LazyCache(), LazyCache()
    layers = cache.layers
    x = expected = torch.randn(2, 1, 4)
    for _ in range(3):
        x, expected = jitted(x, cache), decode_lazily(expected, expected_cache)
        torch.testing.assert_close(x, expected)
    assert cache.layers is layers and len(layers) == 2
    _assert_same_layers(cache, expected_cache)
    fresh = LazyCache()
    jitted(torch.randn(2, 1, 4), fresh)  # the layers it creates are new objects per call
    assert len(fresh.layers) == 2 and all(a is not b for a, b in zip(fresh.layers, cache.layers))


def test_objects_are_flattened_in_the_prologue_by_their_attributes() -> None:
    jitted = compiler.jit(decode)
    jitted(torch.randn(2, 1, 4), Cache([Layer()]))
    prologue = str(compiler.last_prologue(jitted))
    assert "prims.check_type(cache, Cache)" in prologue
    assert "object_state(cache_layers_0)" in prologue
    assert "prims.check_value(cache_layers_0_keys, None)" in prologue


def test_trace_names_trace_call_for_a_call_that_changes_its_arguments() -> None:
    from compiler.tracing import frontend

    args = (torch.randn(2, 1, 4), Cache([Layer()]))
    traced = frontend.trace_call(decode, args, {})
    assert [w.name for w in traced.writes.writes] == ["keys", "is_initialized"]
    assert traced.prologue.output[-len(traced.writes.targets) :] == traced.writes.targets
    with pytest.raises(NotImplementedError, match=r"frontend\.trace_call writes it back"):
        frontend.trace(decode, args, {})
