"""One object, list or dict reached at several places of a jitted function's arguments
(tracing/objects.py, `Places`): unpacked once, every place sees the same stand-in, its writes are
written back once, and the guard on `first_places` keeps a call that shares otherwise off the entry."""

from __future__ import annotations

import copy

import pytest
import torch

import compiler
from tests.compiler.tracing.test_object_arguments import Cache, Layer, StaticLayer, _assert_same_layers, decode


def _steps(jitted, cache: Cache, expected_cache: Cache, x: torch.Tensor, steps: int) -> torch.Tensor:
    expected = x
    for _ in range(steps):
        (x, returned), (expected, _) = jitted(x, cache), decode(expected, expected_cache)
        assert returned is cache
        torch.testing.assert_close(x, expected)
        _assert_same_layers(cache, expected_cache)
    return x


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_layers_sharing_one_growing_layer_grow_it_twice_per_call_as_eager_does(seed: int) -> None:
    torch.manual_seed(seed)
    shared, expected_shared = Layer(), Layer()
    cache, expected_cache = Cache([shared, Layer(), shared]), Cache([expected_shared, Layer(), expected_shared])
    jitted = compiler.jit(decode)
    _steps(jitted, cache, expected_cache, torch.randn(2, 3, 4), steps=4)
    assert cache.layers[0] is cache.layers[2] is shared and cache.layers[1] is not shared
    assert shared.keys.shape[-2] == 3 * 2 * 4  # two updates per call, each of 3 positions, 4 calls


@pytest.mark.parametrize("seed", [0, 1])
def test_in_place_writes_through_both_places_of_a_shared_static_layer_are_written_back_once(seed: int) -> None:
    torch.manual_seed(seed)
    shared = StaticLayer(12, 4)
    cache = Cache([shared, shared])
    expected_cache = copy.deepcopy(cache)  # deepcopy keeps the sharing
    assert expected_cache.layers[0] is expected_cache.layers[1]
    keys, length = shared.keys, shared.length
    jitted = compiler.jit(decode)
    _steps(jitted, cache, expected_cache, torch.randn(2, 1, 4), steps=5)
    assert shared.keys is keys and shared.length is length and int(length) == 10
    assert compiler.cache_stats(jitted).misses == 1
    prologue = str(compiler.last_prologue(jitted))
    # the places, children first: both layers hold the first layer's object, the list and the cache their own
    assert "places = first_places((cache_layers_0, cache_layers_1, cache_layers, cache))" in prologue
    assert "prims.check_value(places, (0, 0, 2, 3))" in prologue


def test_a_list_holding_one_layer_twice_is_traced_with_that_layer_once() -> None:
    def update_twice(x: torch.Tensor, layers: list) -> torch.Tensor:
        for layer in layers:
            x = torch.tanh(layer.update(x).sum(-2, keepdim=True) * 0.5 + x)
        return x

    jitted = compiler.jit(update_twice)
    layer, expected_layer = Layer(), Layer()
    x = expected = torch.randn(3, 1, 5)
    for _ in range(3):
        x, expected = jitted(x, [layer, layer]), update_twice(expected, [expected_layer, expected_layer])
        torch.testing.assert_close(x, expected)
        torch.testing.assert_close(layer.keys, expected_layer.keys)
    prologue = str(compiler.last_prologue(jitted))
    assert prologue.count("object_state(") == 1  # the second place is not unpacked


def test_a_call_that_shares_otherwise_than_the_traced_one_does_not_reuse_its_entry() -> None:
    jitted = compiler.jit(decode)
    x = torch.randn(2, 1, 4)

    def check(cache: Cache) -> None:
        expected_cache = copy.deepcopy(cache)
        got, _ = jitted(x, cache)
        torch.testing.assert_close(got, decode(x, expected_cache)[0])
        _assert_same_layers(cache, expected_cache)

    shared = StaticLayer(8, 4)
    check(Cache([shared, shared]))  # traced shared
    check(Cache([StaticLayer(8, 4), StaticLayer(8, 4)]))  # distinct: a miss, its own entry
    check(Cache([StaticLayer(8, 4), StaticLayer(8, 4)]))  # distinct again: that entry
    other = StaticLayer(8, 4)
    check(Cache([other, other]))  # shared again: the first entry
    stats = compiler.cache_stats(jitted)
    assert (stats.misses, stats.hits) == (2, 2)


def test_distinct_layers_traced_then_one_layer_twice_is_a_miss_where_the_call_writes_back() -> None:
    jitted = compiler.jit(decode)
    x = torch.randn(2, 3, 4)
    first, second = Cache([Layer(), Layer()]), Cache([Layer(), Layer()])
    jitted(x, first)
    jitted(x, second)  # distinct again: the entry, which writes back onto each layer
    shared = Layer()
    cache, expected_cache = Cache([shared, shared]), Cache([Layer()])
    expected_cache.layers.append(expected_cache.layers[0])
    for _ in range(2):
        got, _ = jitted(x, cache)
        torch.testing.assert_close(got, decode(x, expected_cache)[0])
        _assert_same_layers(cache, expected_cache)
    assert cache.layers[0] is cache.layers[1]
    # the shared layer would take both places' writes through the distinct entry: it misses, twice
    # (uninitialised, then grown)
    stats = compiler.cache_stats(jitted)
    assert (stats.misses, stats.hits) == (3, 1)


def test_the_same_list_passed_twice_is_one_list_for_the_function() -> None:
    def append_then_count(x: torch.Tensor, into: list, seen: list) -> torch.Tensor:
        into.append(x * 2)
        return x + len(seen)

    jitted = compiler.jit(append_then_count)
    x = torch.randn(3)
    items: list = []
    torch.testing.assert_close(jitted(x, items, items), x + 1)
    assert len(items) == 1
    torch.testing.assert_close(items[0], x * 2)
    apart: list = []
    torch.testing.assert_close(jitted(x, apart, []), x)  # distinct lists: not the shared entry
    assert len(apart) == 1


def test_an_object_that_holds_itself_is_rejected_with_its_name() -> None:
    layer = Layer()
    layer.parent = layer
    message = r"argument cache_layers_0_parent is the Layer cache_layers_0 it is part of: .* holds itself"
    with pytest.raises(NotImplementedError, match=message):
        compiler.jit(decode)(torch.randn(2, 1, 4), Cache([layer]))


@pytest.mark.parametrize("kind", ["dynamic", "static"])
def test_a_transformers_cache_whose_layers_are_one_layer_object_matches_eager(kind: str) -> None:
    transformers = pytest.importorskip("transformers")

    def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cache: object) -> torch.Tensor:
        for index in range(2):  # both indices reach the one layer: it is updated twice per call
            keys, values = cache.update(k * (index + 1), v, index)
            q = torch.softmax(q @ keys.transpose(-1, -2), dim=-1) @ values
        return q

    def make_cache() -> object:
        config = transformers.LlamaConfig(num_hidden_layers=1, hidden_size=16, num_attention_heads=2)
        if kind == "static":
            cache = transformers.StaticCache(config=config, max_cache_len=8)
        else:
            cache = transformers.DynamicCache(config=config)
        cache.layers.append(cache.layers[0])
        return cache

    jitted = compiler.jit(attend)
    cache, expected_cache = make_cache(), make_cache()
    generator = torch.Generator().manual_seed(0)
    for _ in range(3):
        q, k, v = (torch.randn(1, 2, 1, 8, generator=generator) for _ in range(3))
        torch.testing.assert_close(jitted(q, k, v, cache), attend(q, k, v, expected_cache))
        assert cache.layers[0] is cache.layers[1]
        for name, value in vars(expected_cache.layers[0]).items():
            if isinstance(value, torch.Tensor):
                torch.testing.assert_close(getattr(cache.layers[0], name), value)
