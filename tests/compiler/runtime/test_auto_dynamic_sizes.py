"""Automatic dynamic for tensor sizes: a size that made a call miss is symbolic from the next
compilation on (under either `numbers` mode), sizes 0 and 1 keep entries of their own, and every result
matches eager."""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import compiler
from compiler.executors.nvfuser.executor import FALLBACK_ENV, FusionFallbackWarning
from compiler.executors.torch import shape_matches
from compiler.prims import Prim
from compiler.runtime.auto_dynamic import explain, to_make_symbolic
from compiler.runtime.guard_source import compile_prologue, tensor_check_runs
from compiler.tracing import frontend
from suites._models.gpt import GPT, GPTConfig
from suites._models.llama import BlockDecoder, LlamaBlock, LlamaConfig
from suites.dynamic_lengths import norm_mlp as suite_block
from tests.support.nvfuser_helpers import fake_nvfuser  # noqa: F401 - a fixture


def norm_mlp(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Layer norm over the last dim, a linear layer, GELU, and a mean over the rows."""
    h = F.gelu(F.linear(F.layer_norm(x, (x.shape[-1],)), w, b))
    return h.softmax(-1) + h.mean(-2, keepdim=True)


def positions(x: torch.Tensor) -> torch.Tensor:
    """Adds each row's position (a range over a size) and a column of ones of that length."""
    n = x.shape[0]
    return x + torch.arange(n)[:, None] + torch.ones(n, 1) + torch.arange(1, n, 2).sum()


def _weights(seed: int, dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(6, 8, generator=g).to(dtype), torch.randn(6, generator=g).to(dtype)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_twenty_batch_sizes_compile_twice_and_match_eager(seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    w, b = _weights(seed)
    jfn = compiler.jit(norm_mlp)
    for n in range(2, 22):
        x = torch.randn(3, n, 8, generator=g)
        torch.testing.assert_close(jfn(x, w, b), norm_mlp(x, w, b))
    stats = compiler.cache_stats(jfn)
    assert (stats.misses, stats.hits) == (2, 18)
    (recompilation,) = compiler.examine.recompilations(jfn)
    assert recompilation.made_symbolic == ("x.size(1)",)
    assert "entry 0: size of x: expected (3, 2, 8), got (3, 3, 8)" in str(recompilation)
    prologue = str(compiler.last_prologue(jfn))
    assert "prims.check_tensor(x, (3, None, 8)" in prologue and "x_size1 = prims.size(x, 1)" in prologue


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda n, g: torch.randn(8, 2, n, generator=g).permute(2, 1, 0), id="non-contiguous"),
        pytest.param(lambda n, g: torch.randn(1, n, 8, generator=g), id="size-1-batch"),
        pytest.param(lambda n, g: torch.randn(n, 1, 8, generator=g).expand(n, 4, 8), id="broadcast-stride-0"),
        pytest.param(lambda n, g: torch.randn(2, n, 8, generator=g).to(torch.bfloat16), id="bf16"),
    ],
)
def test_symbolic_sizes_over_edge_layouts_and_dtypes(make) -> None:
    g = torch.Generator().manual_seed(0)
    jfn = compiler.jit(norm_mlp)
    for n in (3, 5, 9, 2, 17):
        x = make(n, g)
        w, b = _weights(n, x.dtype)
        torch.testing.assert_close(jfn(x, w, b), norm_mlp(x, w, b), **_tolerance(x.dtype))
    assert compiler.cache_stats(jfn).misses == 2


def _tolerance(dtype: torch.dtype) -> dict:
    return {"atol": 2e-2, "rtol": 2e-2} if dtype is torch.bfloat16 else {}


def test_sizes_zero_and_one_get_entries_of_their_own() -> None:
    jfn = compiler.jit(lambda x, y: (x + y).sum(0))
    y = torch.randn(1, 4)
    for n in (3, 4, 1, 5, 0, 1, 0, 6):
        x = torch.randn(n, 4)
        torch.testing.assert_close(jfn(x, y), (x + y).sum(0))
    assert compiler.cache_stats(jfn).misses == 4  # 3 (static), n >= 2 (symbolic), 1, 0
    one = compiler.examine.recompilations(jfn)[1]
    assert one.made_symbolic == () and "expected (≥2, 4), got (1, 4)" in str(one)


def test_a_range_over_a_symbolic_size_stays_symbolic() -> None:
    jfn = compiler.jit(positions)
    for n in (3, 4, 7, 10, 2, 1):
        x = torch.randn(n, 5)
        torch.testing.assert_close(jfn(x), positions(x))
    assert compiler.cache_stats(jfn).misses == 3  # 3, then n >= 2 symbolic, then 1
    assert "prims.iota(x_size0, 0, 1" in str(jfn.entries[1].traces[-1])
    assert "check_value(x_size0" not in str(compiler.examine.recompilations(jfn))


def test_an_integer_range_with_float_bounds_given_as_numbers_stays_symbolic() -> None:
    # XLNet's relative positions: arange(beg, end, -1.0, dtype=torch.int64) over the length; torch
    # truncates the float bounds of an integer range, so the symbolic ones need not be specialised
    def relative(x):
        length = x.shape[0]
        return (
            x
            + torch.arange(length, -length, -1.0, dtype=torch.int64)[:length, None]
            + torch.arange(0.5, length, 2.0, dtype=torch.int64).sum()
        )

    jfn = compiler.jit(relative)
    for n in (3, 4, 7, 10):
        x = torch.randn(n, 2)
        torch.testing.assert_close(jfn(x), relative(x))
    assert len(jfn.entries) == 2
    with pytest.raises(RuntimeError, match="step must be nonzero"):
        compiler.jit(lambda x: torch.arange(0, x.shape[0], 0.5, dtype=torch.int64))(torch.randn(3))


def test_a_python_loop_over_a_symbolic_size_stays_guarded() -> None:
    def rows(x):
        return sum(x[i] * i for i in range(x.shape[0]))  # unrolled: the trace depends on the size

    jfn = compiler.jit(rows)
    for n in (3, 4, 5, 4):
        x = torch.randn(n, 2)
        torch.testing.assert_close(jfn(x), rows(x))
    assert compiler.cache_stats(jfn).misses == 3  # 3 (static), 4 and 5: each guards its value
    assert "check_value(x_size0, 4)" in str(compiler.last_prologue(jfn))


def test_symbolic_cache_mode_and_opting_out() -> None:
    w, b = _weights(0)
    symbolic = compiler.jit(norm_mlp, numbers="symbolic")
    static = compiler.jit(norm_mlp, automatic_dynamic=False)
    for n in (2, 3, 4, 5):
        x = torch.randn(n, 8)
        torch.testing.assert_close(symbolic(x, w, b), norm_mlp(x, w, b))
        torch.testing.assert_close(static(x, w, b), norm_mlp(x, w, b))
    assert compiler.cache_stats(symbolic).misses == 2
    assert compiler.cache_stats(static).misses == 4
    assert all(not r.made_symbolic for r in compiler.examine.recompilations(static))


def test_gradients_over_changing_batch_sizes() -> None:
    g = torch.Generator().manual_seed(3)
    w, b = (t.requires_grad_() for t in _weights(3))
    jfn = compiler.jit(norm_mlp)
    for n in (2, 5, 7, 4):
        x = torch.randn(n, 8, generator=g, requires_grad=True)
        out = jfn(x, w, b)
        grads = torch.autograd.grad((out * out).sum(), (x, w, b))
        expected = norm_mlp(x, w, b)
        torch.testing.assert_close(out, expected)
        for got, want in zip(grads, torch.autograd.grad((expected * expected).sum(), (x, w, b))):
            torch.testing.assert_close(got, want)
    assert compiler.cache_stats(jfn).misses == 2
    assert "x_size0" in [p.name for p in compiler.last_backward_traces(jfn)[-1].inputs]


def test_a_model_over_changing_sequence_lengths_compiles_twice_and_trains() -> None:
    torch.manual_seed(0)
    config = GPTConfig.tiny()
    model = GPT(config).eval()
    jmodel = compiler.jit(model)
    for length in (5, 8, 13, 2):
        tokens = torch.randint(0, config.vocab_size, (2, length))
        targets = torch.randint(0, config.vocab_size, (2, length))
        loss = jmodel(tokens, targets)["loss"]
        grads = torch.autograd.grad(loss, list(model.parameters()))
        expected = model(tokens, targets)["loss"]
        torch.testing.assert_close(loss, expected)
        for got, want in zip(grads, torch.autograd.grad(expected, list(model.parameters()))):
            torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)
    assert compiler.cache_stats(jmodel).misses == 2
    assert compiler.examine.recompilations(jmodel)[0].made_symbolic == ("targets.size(1)", "tokens.size(1)")


def test_the_prologue_guard_and_its_inline_form_reject_sizes_below_two_and_other_ranks() -> None:
    jfn = compiler.jit(lambda x: x * 2)
    jfn(torch.randn(3, 4))
    jfn(torch.randn(5, 4))
    prologue = compiler.last_prologue(jfn)
    (check,) = [b for b in prologue.bsyms if b.sym is Prim.CHECK_TENSOR]
    assert check.args[1] == (None, 4) and tensor_check_runs(prologue.bsyms) == []
    inline = compile_prologue(prologue)
    assert inline((torch.randn(9, 4),), {})[1] == 9
    for rejected in (torch.randn(1, 4), torch.randn(0, 4), torch.randn(9, 5), torch.randn(9, 4, 1)):
        with pytest.raises(compiler.GuardFailure):
            inline((rejected,), {})
        assert [m.kind for m in explain(0, prologue, (rejected,), {})] == ["size"]
    assert shape_matches((2, 4), (None, 4)) and not shape_matches((1, 4), (None, 4))
    assert not shape_matches((2, 4, 1), (None, 4))


def test_only_rejected_dims_of_the_same_rank_become_symbolic() -> None:
    jfn = compiler.jit(lambda x: x * 2)
    jfn(torch.randn(3, 4))
    prologue = compiler.last_prologue(jfn)
    assert to_make_symbolic(explain(0, prologue, (torch.randn(3, 7),), {})) == {"x.size(1)"}
    assert to_make_symbolic(explain(0, prologue, (torch.randn(3, 4, 1),), {})) == set()
    assert to_make_symbolic(explain(0, prologue, (torch.randn(3, 7, dtype=torch.float64),), {})) == set()


def test_symbolic_sizes_through_generated_fusion_definitions(fake_nvfuser, tmp_path) -> None:  # noqa: F811
    w, b = _weights(1)
    jfn = compiler.jit(norm_mlp, executors=["nvfuser", "torch"], fusion={"min_region_size": 1})
    with warnings.catch_warnings():
        warnings.simplefilter("error", FusionFallbackWarning)
        for n in (3, 6, 11, 4):
            x = torch.randn(2, n, 8)
            torch.testing.assert_close(jfn(x, w, b), norm_mlp(x, w, b))
    assert compiler.cache_stats(jfn).misses == 2
    # the symbolic entry reuses the static entry's layer norm (its broadcasts keep their operand's
    # sizes); the other fusion divides by the length, a constant 3 in the static entry's
    fusions = compiler.examine.fusions(jfn)
    stats = compiler.examine.stats(jfn)
    assert len(fusions) == 2 and (stats.definitions, stats.reused) == (3, 1)
    # what a user inspects of a fusion over symbolic sizes: its inputs as last called, a repro
    listing = str(fusions)
    assert "x: torch.float32 [2, 4, 8]" in listing and "x_size1: int = 4" in listing
    assert "cpu f32[2, x_size1, 6]" in listing
    script = compiler.examine.repro(jfn, "nvFusion0", tmp_path / "repro.py").read_text()
    assert "define_scalar(None" not in script and "DEFINITION_INPUTS = [0]" in script
    assert "shape=[fd.ops.size(t1, dim=0), fd.ops.size(t1, dim=1), fd.ops.size(x, dim=2)]" in script
    assert "def reference(x, x_size1):" in script


def test_the_symbolic_entry_reuses_every_definition_of_the_static_entry(fake_nvfuser) -> None:  # noqa: F811
    # suites/dynamic_lengths.py's block: nothing in its fusions depends on the length but the
    # broadcasts' sizes, which are their operands' own, so the second entry builds no definition
    torch.manual_seed(3)
    weights = (torch.randn(32, 8), torch.randn(32), torch.randn(8, 32), torch.randn(8))
    jfn = compiler.jit(suite_block, executors=["nvfuser", "torch"])
    with warnings.catch_warnings():
        warnings.simplefilter("error", FusionFallbackWarning)
        for n in (4, 6, 9):
            x = torch.randn(2, n, 8)
            torch.testing.assert_close(jfn(x, *weights), suite_block(x, *weights))
    fusions = compiler.examine.fusions(jfn)
    stats = compiler.examine.stats(jfn)
    assert compiler.cache_stats(jfn).misses == 2 and len(fusions) >= 2
    assert (stats.definitions, stats.reused) == (len(fusions), len(fusions))


def test_a_gpt_over_a_new_length_builds_only_its_embedding_definition_again(fake_nvfuser) -> None:  # noqa: F811
    # the layer norms broadcast their weights over (batch, length): those sizes are read from the
    # residual stream's tensor, so only the embedding's fusion (its reshape and its iota over the
    # length keep the trace's numbers) is a new definition of the symbolic entry
    torch.manual_seed(0)
    config = GPTConfig.tiny()
    model = GPT(config).eval()
    jmodel = compiler.jit(model, executors=["nvfuser", "torch"])
    built = []
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", FusionFallbackWarning)
        for length in (5, 16, 33):
            tokens = torch.randint(0, config.vocab_size, (2, length))
            torch.testing.assert_close(jmodel(tokens)["logits"], model(tokens)["logits"], atol=1e-4, rtol=1e-4)
            built.append(compiler.examine.stats(jmodel).definitions)
    assert compiler.cache_stats(jmodel).misses == 2
    assert built[1] - built[0] == 1 and built[2] == built[1]


@pytest.mark.nvfuser
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_symbolic_sizes_through_nvfuser_on_cuda(dtype: torch.dtype, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FALLBACK_ENV, "0")  # an nvFuser error fails the test instead of falling back
    w, b = (t.cuda() for t in _weights(2, dtype))
    jfn = compiler.jit(norm_mlp)
    for n in (3, 64, 100, 7, 1, 513):
        x = torch.randn(4, n, 8, device="cuda", dtype=dtype)
        torch.testing.assert_close(jfn(x, w, b), norm_mlp(x, w, b), **_tolerance(dtype))
    assert compiler.cache_stats(jfn).misses == 3  # 3 (static), n >= 2 (symbolic), 1
    assert compiler.examine.stats(jfn).definitions >= 1


@pytest.mark.nvfuser
def test_a_model_over_changing_sequence_lengths_on_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FALLBACK_ENV, "0")
    torch.manual_seed(0)
    config = GPTConfig.tiny()
    model = GPT(config).cuda().eval()
    jmodel = compiler.jit(model)
    with torch.no_grad():
        for length in (5, 16, 33, 64):
            tokens = torch.randint(0, config.vocab_size, (2, length), device="cuda")
            torch.testing.assert_close(jmodel(tokens)["logits"], model(tokens)["logits"], atol=1e-4, rtol=1e-4)
    assert compiler.cache_stats(jmodel).misses == 2


def test_a_kv_cache_decode_over_changing_batches_and_cache_lengths_updates_in_place() -> None:
    torch.manual_seed(1)
    config = LlamaConfig.tiny()
    block = LlamaBlock(config)
    decoder = BlockDecoder(block)
    jdecoder = compiler.jit(decoder)
    with torch.no_grad():
        for batch, length in ((2, 16), (3, 16), (4, 24), (2, 40), (5, 9)):
            cache = block.empty_cache(batch, length, torch.float32, torch.device("cpu"))
            for c in cache:
                c.normal_()
            expected_cache = tuple(c.clone() for c in cache)
            x, position = torch.randn(batch, 1, config.dim), torch.tensor([length // 2])
            torch.testing.assert_close(jdecoder(x, position, cache), decoder(x, position, expected_cache))
            for got, want in zip(cache, expected_cache):
                torch.testing.assert_close(got, want)
    # the first shape, then batch symbolic (the second call), then the cache length symbolic too
    assert compiler.cache_stats(jdecoder).misses == 3
    assert [r.made_symbolic for r in compiler.examine.recompilations(jdecoder)] == [
        ("cache_0.size(0)", "cache_1.size(0)", "x.size(0)"),
        ("cache_0.size(2)", "cache_1.size(2)"),
    ]


def test_a_size_compared_with_itself_records_no_guard() -> None:
    def clamp_rows(x):
        n = x.shape[0]
        assert (n == n, n <= n, n >= n, n != n, n < n, n > n) == (True, True, True, False, False, False)
        return x[: min(n, n)] * 2

    jfn = compiler.jit(clamp_rows)
    for n in (3, 4, 5):
        x = torch.randn(n, 2)
        torch.testing.assert_close(jfn(x), x * 2)
    assert compiler.cache_stats(jfn).misses == 2
    assert "(x_size0, x_size0)" not in str(compiler.last_prologue(jfn))


def test_chunks_and_splits_of_a_symbolic_size_guard_the_number_of_pieces_only() -> None:
    def halves_and_pairs(x):
        first, second = x.chunk(2, 0)  # two pieces for every size of at least 2
        return first.sum(0), second.sum(0), [p.sum(0) for p in x.split(4, 0)]

    jfn = compiler.jit(halves_and_pairs)
    for n in (3, 5, 6, 8, 7, 12, 9, 11, 2):
        x = torch.randn(n, 3)
        got, want = jfn(x), halves_and_pairs(x)
        torch.testing.assert_close(got[:2], want[:2])
        assert len(got[2]) == len(want[2])
        torch.testing.assert_close(got[2], want[2])
    # 3 (static), then one entry per number of split(4) pieces: 2 (5..8), 3 (9..12), 1 (2)
    assert compiler.cache_stats(jfn).misses == 4
    assert "check_value(x_size0" not in str(compiler.last_prologue(jfn))


SIZE_FORMULAS = {
    "tensor_split": lambda x: [p * 2 for p in x.tensor_split(3, dim=2)],
    "unfold": lambda x: x.unfold(2, 3, 2) * 2,
    "diagonal": lambda x: x.diagonal(-1, 1, 2) + x.diagonal(1, 2, 1),  # symbolic columns, symbolic rows
}


@pytest.mark.parametrize("name", sorted(SIZE_FORMULAS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_pieces_windows_and_diagonals_of_a_symbolic_size_compile_twice(name: str, dtype: torch.dtype) -> None:
    """tensor_split's pieces, Tensor.unfold's window count and a diagonal's length are formulas of
    the size (a diagonal over symbolic columns is read along the transposed dims, whose column
    count, the slice's step, is an int); they read it as an int, one entry per size."""
    op = SIZE_FORMULAS[name]
    jfn = compiler.jit(op)
    for seed, n in enumerate((7, 8, 11, 12, 15)):
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(1, n, 5, generator=g).to(dtype).transpose(1, 2)  # a size-1 dim, not contiguous
        results = []
        for fn in (jfn, op):
            leaf = x.detach().requires_grad_()
            out = fn(leaf)
            out = out if isinstance(out, list) else [out]
            weights = [torch.randn(o.shape, generator=torch.Generator().manual_seed(seed)).to(dtype) for o in out]
            loss = sum((o * w).sum() for o, w in zip(out, weights))
            results.append((out, torch.autograd.grad(loss, leaf)[0]))
        torch.testing.assert_close(results[0], results[1])
    assert len(jfn.entries) == 2, compiler.examine.recompilations(jfn)  # the first call's, then one symbolic


RESIZES = {
    "nearest": lambda x: F.interpolate(x, scale_factor=1.7),
    "bilinear": lambda x: F.interpolate(x, scale_factor=(2.0, 0.6), mode="bilinear"),
    "Upsample": torch.nn.Upsample(scale_factor=2),
    "size from a size": lambda x: F.interpolate(x, size=(x.shape[-1] * 2 - 1, x.shape[-2]), mode="bilinear"),
}


@pytest.mark.parametrize("name", sorted(RESIZES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_interpolating_a_symbolic_size_compiles_twice(name: str, dtype: torch.dtype) -> None:
    """F.interpolate's output size is eager's floor(size * scale) recorded on a symbolic size (or
    the size given, symbolic too), where it was read as an int: one entry per size."""
    resize = RESIZES[name]
    jfn = compiler.jit(resize)
    for seed, n in enumerate((7, 8, 11, 12, 9)):
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(2, 1, n + 2, n, generator=g).to(dtype)
        x = x if seed % 2 else x.mT.contiguous().mT
        results = []
        for fn in (jfn, resize):
            leaf = x.detach().requires_grad_()
            out = fn(leaf)
            weights = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed)).to(dtype)
            results.append((out, torch.autograd.grad((out * weights).sum(), leaf)[0]))
        torch.testing.assert_close(results[0][0], results[1][0])
        # NOTE: eager's bf16 backward rounds as it accumulates, where the decomposition's accumulates in float32
        tolerance = {"rtol": 1.6e-2, "atol": 2e-2} if dtype == torch.bfloat16 else {}
        torch.testing.assert_close(results[0][1], results[1][1], **tolerance)
    assert len(jfn.entries) == 2, compiler.examine.recompilations(jfn)  # the first call's, then one symbolic


@pytest.mark.parametrize(
    ("make", "written"),
    [
        pytest.param(lambda n: torch.randn(2, n), "(x_size1, 1)", id="contiguous"),
        pytest.param(lambda n: torch.randn(2, 1, n), "(x_size2, x_size2, 1)", id="size-1-dim"),
        pytest.param(lambda n: torch.randn(n, 2).T, "(1, x_size0)", id="transposed"),
        pytest.param(lambda n: torch.randn(2, 1).expand(2, n), "(1, 0)", id="expanded"),
    ],
)
def test_a_graphed_entry_guards_dense_strides_in_its_symbolic_sizes(make, written: str) -> None:
    """A CUDA-graphed entry (exact_strides) accepts every size of a dense layout, no other layout."""
    prologue, _ = frontend.trace(lambda x: x * 2, (make(7),), {}, dynamic=_X_SIZES, exact_strides=True)
    assert f"prims.check_strides(x, {written})" in str(prologue)
    guards = compile_prologue(prologue)
    for n in (2, 7, 30):
        guards((make(n),), {})
    x = make(9)
    reverse = tuple(reversed(range(x.dim())))
    for other in (x.contiguous(), x.permute(reverse).contiguous().permute(reverse)):  # row- and column-major
        if other.stride() != x.stride():
            with pytest.raises(compiler.GuardFailure):
                guards((other,), {})
            assert [m.kind for m in explain(0, prologue, (other,), {})] == ["layout"]


_X_SIZES = frozenset({"x.size(0)", "x.size(1)", "x.size(2)"})


def test_a_layout_that_is_not_dense_keeps_its_strides() -> None:
    x = torch.randn(3, 14)[:, ::2]
    prologue, _ = frontend.trace(lambda x: x * 2, (x,), {}, dynamic=_X_SIZES, exact_strides=True)
    assert "prims.check_strides(x, (14, 2))" in str(prologue)
    (miss,) = explain(0, prologue, (torch.randn(3, 18)[:, ::2],), {})
    assert (miss.kind, miss.expected, miss.actual) == ("layout", (14, 2), (18, 2))


def test_torch_arange_and_full_are_themselves_again_after_tracing_even_when_it_fails() -> None:
    arange, full = torch.arange, torch.full

    def fails(x):
        assert torch.arange is not arange  # the bypass is installed while tracing
        raise ValueError("stop")

    with pytest.raises(ValueError, match="stop"):
        compiler.jit(fails)(torch.randn(3))
    assert torch.arange is arange and torch.full is full


def test_a_trace_ending_in_one_thread_leaves_its_torch_changes_to_a_trace_in_another() -> None:
    arange = torch.arange
    a_tracing, b_tracing, a_done = threading.Event(), threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def a(x):
        a_tracing.set()
        assert b_tracing.wait(10)
        return x * 2

    def b(x):
        b_tracing.set()
        assert a_done.wait(10)  # a's trace has ended: torch.arange must still take a symbolic size
        assert torch.compiler.is_compiling()
        return x + torch.arange(x.shape[0])

    jb = compiler.jit(b, dynamic=["x.size(0)"])

    def run(fn: Callable[[], Any], done: threading.Event | None = None) -> None:
        try:
            fn()
        except BaseException as error:  # the test asserts there were none
            errors.append(error)
        finally:
            if done is not None:
                done.set()

    ta = threading.Thread(target=run, args=(lambda: compiler.jit(a)(torch.randn(3)), a_done))
    ta.start()
    assert a_tracing.wait(10)
    tb = threading.Thread(target=run, args=(lambda: jb(torch.randn(4)),))
    tb.start()
    ta.join(10)
    tb.join(10)
    assert not errors, errors
    for n in (5, 9):
        x = torch.randn(n)
        torch.testing.assert_close(jb(x), x + torch.arange(n))
    assert compiler.cache_stats(jb).misses == 1  # the arange's length stayed symbolic
    assert torch.arange is arange  # restored once both traces ended
    assert not torch.compiler.is_compiling()  # each trace set it; the last one to end put it back


def test_sizes_and_numbers_named_dynamic_are_symbolic_from_the_first_compilation() -> None:
    def scaled(x, w, b, n):
        return norm_mlp(x, w, b) * n

    w, b = _weights(0)
    jfn = compiler.jit(scaled, dynamic=["x.size(1)", "n"])
    for length, n in ((3, 1), (5, 2), (9, 3), (2, 4)):
        x = torch.randn(2, length, 8)
        torch.testing.assert_close(jfn(x, w, b, n), scaled(x, w, b, n))
    assert compiler.cache_stats(jfn).misses == 1 and compiler.examine.recompilations(jfn) == []
    config = GPTConfig.tiny()
    model = GPT(config).eval()
    jmodel = compiler.jit(model, dynamic=["tokens.size(1)"])
    with torch.no_grad():
        for length in (4, 7, 12):
            tokens = torch.randint(0, config.vocab_size, (2, length))
            torch.testing.assert_close(jmodel(tokens)["logits"], model(tokens)["logits"])
    assert compiler.cache_stats(jmodel).misses == 1


def test_a_dynamic_name_that_is_not_an_input_is_an_error_listing_the_inputs() -> None:
    jfn = compiler.jit(lambda x, n: x * n, dynamic=["y.size(0)", "x.size(3)"])
    with pytest.raises(ValueError, match=r"'x.size\(3\)', 'y.size\(0\)' names no number argument or tensor size"):
        jfn(torch.randn(2, 3), 2)
    with pytest.raises(ValueError, match=r"it has x.size\(0\), x.size\(1\), n"):
        jfn(torch.randn(2, 3), 2)
    for bad in ("x.size(1)", ["x.shape[1]"], [1]):
        with pytest.raises(TypeError, match=r"expected a list of input names"):
            compiler.jit(lambda x: x, dynamic=bad)
