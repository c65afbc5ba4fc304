"""Codegen: implementations with a source form (a slice as narrows) run inline, with eager's views."""

from __future__ import annotations

import random

import pytest
import torch

import compiler
from compiler import prims
from tests.support.nvfuser_helpers import prim_trace


def split_heads(x):
    q, k, v = x.split(x.shape[-1] // 3, dim=-1)
    return q * 2, k, v


def computation_source(jfn) -> str:
    return jfn.last_entry.computation.__fusebench_source__


def assert_same_views(out, ref):
    for a, b in zip(out, ref):
        assert torch.equal(a, b)
        assert (a.shape, a.stride(), a.storage_offset()) == (b.shape, b.stride(), b.storage_offset())


def test_a_split_runs_as_one_narrow_per_piece_and_gives_eagers_views():
    x = torch.randn(8, 1, 12)
    jfn = compiler.jit(split_heads)
    assert_same_views(jfn(x), split_heads(x))
    source = computation_source(jfn)
    assert source.count(".narrow(2, ") == 3, source
    assert "_slice" not in source, source


def test_strided_slices_keep_the_call():
    def every_other(x):
        return x[:, ::2] + 1

    x = torch.randn(3, 7)
    jfn = compiler.jit(every_other)
    torch.testing.assert_close(jfn(x), every_other(x))
    assert "_slice" in computation_source(jfn)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_slices_with_symbolic_bounds_match_eager_views(seed):
    def cut(x, a, b, c):
        return x[a:, :b, c : x.shape[-1]]

    rng = random.Random(seed)
    jfn = compiler.jit(cut, numbers="symbolic")
    for _ in range(6):
        shape = [rng.randint(1, 6) for _ in range(3)]
        x = torch.randn(*shape).transpose(0, 2)  # not contiguous
        a, b, c = (rng.randint(0, s) for s in x.shape)
        assert_same_views([jfn(x, a, b, c)], [cut(x, a, b, c)])


def cache_step(k_cache, v_cache, positions, k_new, v_new, q):
    """A decode step: the new keys and values written into the caches, then attention over them
    (grouped-query where the caches have fewer heads than the queries)."""
    k_cache.index_copy_(2, positions, k_new)
    v_cache.index_copy_(2, positions, v_new)
    gqa = k_cache.shape[1] != q.shape[1]
    return torch.nn.functional.scaled_dot_product_attention(q, k_cache, v_cache, enable_gqa=gqa)


def _cache_inputs(heads: int, kv_heads: int, seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    caches = [torch.randn(2, kv_heads, 16, 8, generator=g) for _ in "kv"]
    new = [torch.randn(2, kv_heads, 2, 8, generator=g) for _ in "kv"]
    return [*caches, torch.tensor([3, 9]), *new, torch.randn(2, heads, 2, 8, generator=g)]


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize(("heads", "kv_heads"), [(4, 4), (4, 2)])
def test_a_decode_steps_cache_writes_and_attention_run_as_torchs_own_calls(heads, kv_heads, seed):
    args, expected_args = _cache_inputs(heads, kv_heads, seed), _cache_inputs(heads, kv_heads, seed)
    jfn = compiler.jit(cache_step)
    torch.testing.assert_close(jfn(*args), cache_step(*expected_args))
    torch.testing.assert_close(args[:2], expected_args[:2])  # the caches, written alike
    source = computation_source(jfn)
    assert source.count("= k_cache.index_copy_(2, positions, k_new)") == 1, source
    assert "_sdpa_" in source and "_attention" not in source, source  # grouped-query: q's groups as rows


def test_attention_whose_key_heads_serve_several_query_heads_keeps_its_call():
    from compiler.executors.attention import attention
    from compiler.executors.codegen import Globals

    trace = prim_trace(
        lambda q, k, v: prims.sdpa(q, k, v, None, True, None), *(((2, h, 5, 8), torch.float32) for h in (4, 2, 2))
    )
    (bsym,) = trace.bsyms
    assert attention.inline_source(bsym, Globals()) is None
    equal = prim_trace(lambda q, k, v: prims.sdpa(q, k, v, None, True, None), *(((2, 4, 5, 8), torch.float32),) * 3)
    g = Globals()
    (line,) = attention.inline_source(equal.bsyms[0], g)
    assert line.startswith(f"{equal.bsyms[0].output.name} = _sdpa_") and "is_causal=True" in line, line
    assert torch.nn.functional.scaled_dot_product_attention in g.scope.values()


def test_a_cache_write_of_a_megabyte_or_more_keeps_its_call_for_the_wide_rows():
    def prefill(cache, positions, new):
        return cache.index_copy_(2, positions, new) * 1.0

    cache, new = torch.zeros(1, 4, 1024, 64), torch.randn(1, 4, 1024, 64)  # 1 MiB of new rows
    jfn = compiler.jit(prefill)
    torch.testing.assert_close(jfn(cache, torch.arange(1024), new), new)
    source = computation_source(jfn)
    assert ".index_copy_(" not in source and "index_copy_" in source, source


@pytest.mark.parametrize(
    ("fn", "shapes", "inlined"),
    [
        (lambda x, w: x.expand(3, 4, 5) * w, [(4, 5), (5,)], True),  # a vector over rows, one over planes
        (lambda x, w: x.expand(2, 1, 5) + w, [(1, 5), ()], True),  # a size-1 dim expanded, a 0-d value
        (lambda x, w: x * w.unsqueeze(1), [(4, 5), (4,)], False),  # over columns: not torch's broadcasting
    ],
)
def test_broadcasts_torch_would_make_run_as_one_expand(fn, shapes, inlined):
    for seed in range(2):
        torch.manual_seed(seed)
        args = [torch.randn(s) for s in shapes]
        jfn = compiler.jit(fn, executors=["torch"])
        torch.testing.assert_close(jfn(*args), fn(*args))
        source = computation_source(jfn)
        assert ("_broadcast_in_dim" in source) is not inlined, source  # the unsqueeze keeps its call
        assert ".expand((" in source, source
