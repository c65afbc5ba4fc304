"""The inductor executor: regions compiled by torch.compile's Inductor, checked against eager.

Each Inductor compilation costs seconds on CPU, so the programs are few and tiny, and each test
checks several things of one program; compiled regions are shared by structure (one compilation
for identical regions) within a test, and Inductor's on-disk cache serves a graph met again.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch._dynamo.utils import counters

import compiler
from compiler.core.executor import Reason
from compiler.executors import CPU_EXECUTORS_ENV, default_executor_names, inductor_compile, resolve
from compiler.executors.inductor import (
    LEFT_TO_OTHERS,
    InductorExecutor,
    InductorFallbackWarning,
    InductorFusion,
    inductor_fusions,
    unavailable_reason,
)
from compiler.executors.inductor_compile import GraphCall
from compiler.prims import Prim
from tests.support import rounding_cases

pytestmark = pytest.mark.skipif(unavailable_reason() is not None, reason=f"{unavailable_reason()}")

INDUCTOR = ["inductor", "torch"]


def _fusions(jfn: compiler.JittedFunction, backward: bool = False) -> list[InductorFusion]:
    traces = compiler.last_backward_traces(jfn) if backward else compiler.last_traces(jfn)
    return inductor_fusions(traces[-1])


def norm_gelu(x: torch.Tensor, w: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A norm, a cast round trip, where, a broadcast weight, a view and two reductions."""
    h = F.layer_norm(x.float(), (x.shape[-1],), w.float()).to(x.dtype)
    g = torch.where(mask, F.gelu(h, approximate="tanh"), h * 0.5)
    return g.reshape(-1).view(x.shape).sum(0), g.float().amax(-1)


def _inputs(seed: int, shape: tuple[int, ...], dtype: torch.dtype = torch.float32, transposed: bool = False):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(shape[::-1] if transposed else shape, generator=gen).to(dtype)
    x = x.transpose(0, 1) if transposed else x
    w = torch.randn(shape[-1], generator=gen).to(dtype)
    return x, w, torch.rand(shape, generator=gen) > 0.3


def _check_against_eager(jfn: compiler.JittedFunction, cases: list[tuple]) -> None:
    for shape, dtype, transposed, seed in cases:
        args = _inputs(seed, shape, dtype, transposed)
        tolerance = {"rtol": 2e-2, "atol": 2e-2} if dtype is torch.bfloat16 else {}
        for actual, expected in zip(jfn(*args), norm_gelu(*args)):
            assert actual.dtype == expected.dtype and actual.shape == expected.shape
            torch.testing.assert_close(actual, expected, **tolerance)
        (fusion,) = _fusions(jfn)
        assert fusion.name == "inductor0" and fusion.fallback_error is None


def test_regions_match_eager_over_seeds_with_broadcasting():
    jfn = compiler.jit(norm_gelu, executors=INDUCTOR, fallback=False)
    _check_against_eager(jfn, [((4, 8), torch.float32, False, seed) for seed in range(3)])
    assert compiler.cache_stats(jfn).misses == 1
    assert compiler.examine.stats(jfn).compiled == 1


@pytest.mark.slow
def test_regions_match_eager_on_size_one_dims_transposed_inputs_and_bf16():
    jfn = compiler.jit(norm_gelu, executors=INDUCTOR, fallback=False)
    cases = [((4, 8), torch.float32, False, 0), ((4, 8), torch.float32, True, 1), ((1, 8), torch.float32, False, 2)]
    _check_against_eager(jfn, [*cases, ((4, 8), torch.bfloat16, False, 3)])
    # the transposed input shares the first entry (the region is compiled again for its strides);
    # the size-1 dim and bf16 get entries of their own
    assert compiler.cache_stats(jfn).misses == 3
    (fusion,) = _fusions(jfn)
    assert fusion.last_inputs[0].dtype is torch.bfloat16


def test_examine_reports_inductor_regions_and_why_ops_stay_outside():
    def program(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        y = (x * 2).exp() @ w  # the matmul goes to torch (the BLAS)
        return F.dropout(y, 0.5).relu() + torch.sigmoid(y)

    jfn = compiler.jit(program, executors=INDUCTOR)
    x, w = torch.randn(3, 4), torch.randn(4, 5)
    torch.manual_seed(0)
    actual = jfn(x, w)
    torch.manual_seed(0)
    torch.testing.assert_close(actual, program(x, w))
    text = str(compiler.examine.fusions(jfn))
    assert "inductor0:" in text and "runs with inductor" in text and "x: torch.float32 [3, 4]" in text
    reasons = {d.bsym.sym.value: (d.reason, d.detail) for d in compiler.examine.why_not_fused(jfn)}
    assert reasons["matmul"] == (Reason.LEFT_TO_TORCH, LEFT_TO_OTHERS[Prim.MATMUL])
    assert "the BLAS" in LEFT_TO_OTHERS[Prim.MATMUL]
    assert reasons["dropout_noise"][0] is Reason.LEFT_TO_TORCH and "generator" in reasons["dropout_noise"][1]
    source = compiler.examine.fusion_source_of(jfn, "inductor0")
    assert source.startswith("def region(v0):") and "exp" in source
    stats = compiler.examine.stats(jfn)
    assert stats.compiled == len(_fusions(jfn)) and stats.fallbacks == 0
    with pytest.raises(ValueError, match="repro scripts are written for nvFuser fusions"):
        compiler.examine.repro(jfn, "inductor0", "unused.py")


def test_claims_leave_matmul_attention_random_and_partial_updates_to_others():
    executor = InductorExecutor()
    matmul_executor = InductorExecutor(compiler.FusionOptions(matmul=True))

    def program(q, k, v, cache, x):
        attn = F.scaled_dot_product_attention(q, k, v)
        cache[:, :1] = x  # a partial update of an input
        return attn.float() @ q.transpose(-1, -2), torch.randn(2)

    q = k = v = torch.randn(1, 2, 3, 4)
    jfn = compiler.jit(program, executors=["torch"])
    jfn(q, k, v, torch.zeros(1, 2, 3, 4), torch.ones(1, 1, 3, 4))
    # NOTE: every trace's prims: the last has the partial update as update_in_place's own symbol
    prims = [b for t in compiler.last_traces(jfn) for b in t.bsyms if isinstance(b.sym, Prim)]
    claims = {b.sym.value: executor.claim(b) for b in prims}
    for prim in ("sdpa", "matmul", "random_values", "slice_update"):
        assert claims[prim][0] is Reason.LEFT_TO_TORCH, prim
    matmul = next(b for b in prims if b.sym is Prim.MATMUL)
    assert matmul_executor.claim(matmul) is None
    assert claims["copy_to"] is None


def test_in_place_updates_are_written_back_and_same_structure_regions_compile_once():
    def adam_like(params, grads, exp_avgs, exp_avg_sqs, lr: float):
        for p, g, m, v in zip(params, grads, exp_avgs, exp_avg_sqs):
            m.lerp_(g, 0.1)
            v.mul_(0.99).addcmul_(g, g, value=0.01)
            p.addcdiv_(m, v.sqrt().add_(1e-8), value=-lr)

    gen = torch.Generator().manual_seed(0)
    shapes = [(3, 5), (3, 5), (7,)]  # two parameters of one shape: one compilation for both
    state = [[torch.randn(s, generator=gen) for s in shapes] for _ in range(2)]
    state += [[torch.zeros(s) for s in shapes], [torch.zeros(s) for s in shapes]]
    expected = [[t.clone() for t in ts] for ts in state]
    # NOTE: unbatched (`batch_numel=0`): batched, the three would be one region (test_batch_regions.py)
    jfn = compiler.jit(adam_like, executors=INDUCTOR, fallback=False, fusion={"batch_numel": 0})
    for _ in range(3):
        grads = [torch.randn(s, generator=gen) for s in shapes]
        jfn(state[0], grads, state[2], state[3], 1e-2)
        adam_like(expected[0], grads, expected[2], expected[3], 1e-2)
        for actual, reference in zip(state, expected):
            for a, r in zip(actual, reference):
                torch.testing.assert_close(a, r)
    fusions = _fusions(jfn)
    assert [f.name for f in fusions] == ["inductor0", "inductor1", "inductor2"]
    assert all(f.region.written for f in fusions)
    assert fusions[0].compilations is fusions[1].compilations
    assert fusions[0].compilations is not fusions[2].compilations
    stats = compiler.examine.stats(jfn)
    assert (stats.compiled, stats.reused) == (2, 1)


def test_static_compilations_assert_no_sizes_the_prologue_and_layout_check_guard(monkeypatch):
    # NOTE: Inductor's code binds `assert_size_stride` when it is loaded: counted from here on
    import torch._C._dynamo.guards as guards

    calls = []
    asserted = guards.assert_size_stride
    monkeypatch.setattr(guards, "assert_size_stride", lambda *a: calls.append(a) or asserted(*a))

    def writes(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x.mul_(3).add_(y)
        return torch.tanh(y * 2)

    jfn = compiler.jit(writes, executors=INDUCTOR, fallback=False)
    for seed in range(2):
        gen = torch.Generator().manual_seed(seed)
        x, y = torch.randn(5, 6, generator=gen), torch.randn(5, 6, generator=gen)
        want_x, want = x * 3 + y, torch.tanh(y * 2)
        torch.testing.assert_close(jfn(x, y), want)
        torch.testing.assert_close(x, want_x)
    assert calls == []
    x, y = torch.randn(6, 5).t(), torch.randn(5, 6)  # a new layout: compiled again, then right
    want_x = x * 3 + y
    jfn(x, y)
    torch.testing.assert_close(x, want_x)


def test_a_region_writing_no_input_runs_inductors_code_without_the_aot_wrapper():
    def program(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        centred = x - x.mean(-1, keepdim=True)
        return torch.tanh(centred * w), centred.sum(0), x.reshape(-1)  # the last a view of an input

    jfn = compiler.jit(program, executors=INDUCTOR, fallback=False)
    # NOTE: static sizes only (a third size would make them symbolic: a Dynamo-compiled region)
    for seed, shape, transposed in [(0, (4, 8), False), (1, (4, 8), True), (2, (1, 8), False)]:
        gen = torch.Generator().manual_seed(seed)
        x, w = torch.randn(shape[::-1] if transposed else shape, generator=gen), torch.randn(shape[-1], generator=gen)
        x = x.t() if transposed else x
        for actual, expected in zip(jfn(x, w), program(x, w)):
            torch.testing.assert_close(actual, expected)
        (fusion,) = _fusions(jfn)
        assert isinstance(fusion._compiled, GraphCall) and fusion.fallback_error is None

    def writes(x: torch.Tensor) -> torch.Tensor:
        x.mul_(2)
        return x.sum()

    x = torch.randn(4, 8)
    expected_x = x * 2
    jfn = compiler.jit(writes, executors=INDUCTOR, fallback=False)
    torch.testing.assert_close(jfn(x), expected_x.sum())
    torch.testing.assert_close(x, expected_x)
    (fusion,) = _fusions(jfn)
    assert not isinstance(fusion._compiled, GraphCall)  # written buffers: through compile_fx's functionalization


def test_an_output_viewing_a_written_buffer_keeps_its_values():
    def program(x: torch.Tensor) -> torch.Tensor:
        before = (x * 1).sum(0)  # computed before the write: eager's value is the old one
        x.mul_(3).add_(1)
        return before

    x = torch.randn(1, 4)
    expected_x, expected = x.clone(), None
    expected = program(expected_x)
    jfn = compiler.jit(program, executors=INDUCTOR, fallback=False)
    actual = jfn(x)
    torch.testing.assert_close(actual, expected)
    torch.testing.assert_close(x, expected_x)


def test_an_output_inductor_simplifies_to_an_input_gets_memory_of_its_own():
    """`x + 2 * zeros` is `x` to Inductor, which returns x's own buffer; eager's sum is a tensor of
    its own, and a view of an input returned by a region stays that input's view."""

    def program(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y.zero_()
        total = torch.add(x, y, alpha=2)
        return x, total, x.contiguous()

    x, y = torch.randn(4, 6), torch.randn(4, 6)
    jfn = compiler.jit(program, executors=INDUCTOR, fallback=False)
    for call in range(2):  # the second call takes the checked compiled function's path
        args, eager_args = (x.clone(), y.clone()), (x.clone(), y.clone())
        got, want = jfn(*args), program(*eager_args)
        for actual, expected in zip(got, want):
            torch.testing.assert_close(actual, expected)
        assert got[1].data_ptr() != args[0].data_ptr(), call  # eager's sum is not x
        assert got[2] is args[0]  # x.contiguous() is x, in eager and here
    (fusion,) = _fusions(jfn)
    assert fusion._own_memory == [0]


def test_only_outputs_eager_allocates_must_have_memory_of_their_own():
    from compiler import prims
    from compiler.core.executor import Region
    from compiler.executors.inductor import allocated_outputs
    from tests.support.nvfuser_helpers import prim_trace

    def fn(x):
        view = prims.reshape(prims.permute(x, [1, 0]), [24])
        doubled = prims.mul(x, 2.0)
        return view, doubled, prims.reshape(doubled, [24])

    trace = prim_trace(fn, ((4, 6), torch.float32))
    region = Region("r", tuple(trace.bsyms), trace.inputs, tuple(trace.output), frozenset())
    assert allocated_outputs(region) == [1, 2]  # a view of an input may share its memory; the others not


@pytest.mark.slow
def test_a_training_step_runs_forward_and_backward_regions_through_inductor():
    def step(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        h = F.gelu(F.layer_norm(x, (x.shape[-1],), b) @ w)
        return F.cross_entropy(h.float(), target)

    gen = torch.Generator().manual_seed(0)
    x, target = torch.randn(6, 8, generator=gen), torch.randint(0, 5, (6,), generator=gen)
    weights = [torch.randn(8, 5, generator=gen) / 3, torch.randn(8, generator=gen)]
    jfn = compiler.jit(step, executors=INDUCTOR, fallback=False)
    ours = [w.clone().requires_grad_() for w in weights]
    theirs = [w.clone().requires_grad_() for w in weights]
    loss = jfn(x, ours[0], ours[1], target)
    loss.backward()
    expected = step(x, theirs[0], theirs[1], target)
    expected.backward()
    torch.testing.assert_close(loss, expected)
    for a, e in zip(ours, theirs):
        torch.testing.assert_close(a.grad, e.grad)
    assert _fusions(jfn) and _fusions(jfn, backward=True)
    assert all(f.fallback_error is None for f in _fusions(jfn) + _fusions(jfn, backward=True))
    assert "inductor0" in [f.name for f in compiler.examine.fusions(jfn, backward=True)]


def test_symbolic_sizes_compile_once_for_every_length():
    def program(x: torch.Tensor, scale: float) -> torch.Tensor:
        return torch.softmax(x * scale, -1).sum(-1)

    jfn = compiler.jit(program, executors=INDUCTOR, fallback=False, dynamic=["x.size(0)", "scale"])
    graphs = counters["stats"]["unique_graphs"]
    for length, scale in ((5, 0.5), (9, 2.0), (17, 3.5)):
        x = torch.randn(length, 6)
        torch.testing.assert_close(jfn(x, scale), program(x, scale))
    assert compiler.cache_stats(jfn).misses == 1
    assert compiler.examine.stats(jfn).compiled == 1
    assert counters["stats"]["unique_graphs"] - graphs == 1  # one Dynamo graph, so one Inductor compilation


def test_numbers_meeting_float_tensors_in_arithmetic_compile_once_statically_as_0d_tensors():
    def step(params, grads, exp_avgs, lr: float, correction: float, count: int):
        for p, g, m in zip(params, grads, exp_avgs):
            m.mul_(0.9).add_(g, alpha=0.1)
            p.sub_(lr * (m / correction) * count)

    gen = torch.Generator().manual_seed(0)
    state = [[torch.randn(3, 5, generator=gen) for _ in range(2)] for _ in range(3)]
    expected = [[t.clone() for t in ts] for ts in state]
    jfn = compiler.jit(step, executors=INDUCTOR, fallback=False, numbers="symbolic")
    graphs = counters["stats"]["unique_graphs"]
    for lr, correction, count in ((1e-2, 0.1, 1), (3e-3, 0.19, 2), (0.25, 0.271, 3)):
        jfn(*state, lr, correction, count)
        step(*expected, lr, correction, count)
        for actual, reference in zip(state, expected):
            for a, r in zip(actual, reference):
                torch.testing.assert_close(a, r)
    assert compiler.cache_stats(jfn).misses == 1
    fusions = _fusions(jfn)
    assert fusions and all(f.compilations.dynamo is None and f.compilations.scalars for f in fusions)
    assert compiler.examine.stats(jfn).compiled == 1  # two parameters of one shape, every value
    assert counters["stats"]["unique_graphs"] == graphs  # no Dynamo graph: no guards on each call

    def scaled_index(x: torch.Tensor, offset: int) -> torch.Tensor:
        return (torch.arange(4) + offset).float() * x  # an integer tensor meets the number: Dynamo's way

    jfn = compiler.jit(scaled_index, executors=INDUCTOR, fallback=False, numbers="symbolic")
    x = torch.randn(4)
    torch.testing.assert_close(jfn(x, 3), scaled_index(x, 3))
    assert all(f.compilations.dynamo is not None for f in _fusions(jfn))


def test_a_number_meeting_a_0d_tensor_keeps_its_dtype_value_after_value():
    def normed(x: torch.Tensor, eps: float) -> torch.Tensor:
        return F.layer_norm(x, (x.shape[-1],), eps=eps) + x / (x.var() + eps)

    jfn = compiler.jit(normed, executors=INDUCTOR, fallback=False)  # eps symbolic from its second value
    for seed, eps in enumerate((1e-5, 1e-3, 0.5)):
        x = torch.randn(3, 6, generator=torch.Generator().manual_seed(seed))
        torch.testing.assert_close(jfn(x, eps), normed(x, eps))  # float32, as eager's
    assert all(f.compilations.dynamo is not None for f in _fusions(jfn))  # not the 0-d float64 eps


def test_a_failing_compilation_falls_back_to_torch_with_one_warning(monkeypatch):
    def refuse(fn, args, writes_inputs=True, exact_casts=False):
        raise RuntimeError("no kernel for you")

    monkeypatch.setattr(inductor_compile, "compile_static", refuse)
    program = lambda x: (x + 1).exp().sum(0)
    x = torch.randn(3, 4)
    jfn = compiler.jit(program, executors=INDUCTOR)
    with pytest.warns(InductorFallbackWarning, match=r"Inductor failed on inductor0 \(RuntimeError: no kernel"):
        torch.testing.assert_close(jfn(x), program(x))
    torch.testing.assert_close(jfn(x), program(x))  # falls back from then on, without warning again
    assert compiler.examine.stats(jfn).fallbacks == 1
    assert "FELL BACK: " in str(compiler.examine.fusions(jfn))
    strict = compiler.jit(lambda x: (x + 2).exp().sum(0), executors=INDUCTOR, fallback=False)
    with pytest.raises(RuntimeError, match="no kernel for you"):
        strict(x)


def test_cpu_defaults_come_from_the_environment_and_inductor_where_it_compiles(monkeypatch):
    monkeypatch.delenv(CPU_EXECUTORS_ENV, raising=False)
    assert default_executor_names("cpu") == ["inductor", "torch"]
    assert [e.name for e in resolve(None)] in (["inductor", "torch"], ["nvfuser", "sdpa", "torch"])
    monkeypatch.setenv(CPU_EXECUTORS_ENV, "torch")
    assert default_executor_names("cpu") == ["torch"]
    monkeypatch.setenv(CPU_EXECUTORS_ENV, "inductor,sdpa")
    assert default_executor_names("cpu") == ["inductor", "sdpa"]
    monkeypatch.setenv(CPU_EXECUTORS_ENV, "inductor,blas")
    with pytest.raises(ValueError, match=r"FUSEBENCH_CPU_EXECUTORS='inductor,blas': expected comma-separated names"):
        default_executor_names("cpu")
    with pytest.raises(ValueError, match=r"device='tpu'\): expected 'cpu', 'cuda' or None"):
        default_executor_names("tpu")


def attention_block(q: torch.Tensor, w: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention (the sdpa executor's), a matmul (the BLAS), and the norm around them (Inductor's)."""
    a = F.scaled_dot_product_attention(q, q, q, is_causal=True)
    return norm_gelu(a.flatten(0, 2) @ w, w[0], mask)


@pytest.mark.gpu
@pytest.mark.parametrize("cuda_graphs", [False, True])
def test_on_cuda_regions_run_as_triton_kernels_beside_sdpa_and_the_blas(cuda_graphs: bool):
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(2, 4, 16, 8, generator=gen).to("cuda", torch.bfloat16)
    w = torch.randn(8, 8, generator=gen).to("cuda", torch.bfloat16)
    mask = (torch.rand(8 * 16, 8, generator=gen) > 0.3).cuda()
    executors = ["inductor", "sdpa", "torch"]
    jfn = compiler.jit(attention_block, executors=executors, fallback=False, cuda_graphs=cuda_graphs)
    for _ in range(3):  # with CUDA graphs: captured, then replayed
        for actual, expected in zip(jfn(q, w, mask), attention_block(q, w, mask)):
            torch.testing.assert_close(actual, expected, rtol=2e-2, atol=2e-2)
    trace = compiler.last_traces(jfn)[-1]
    assert [b.sym.executor for b in trace.bsyms if b.sym.name.startswith("inductor")] == ["inductor"]
    assert any(b.sym is Prim.SDPA for b in trace.bsyms) and any(b.sym is Prim.MATMUL for b in trace.bsyms)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_values_held_in_fp32_are_read_rounded_where_rounding_decides(dtype: torch.dtype) -> None:
    """A max's backward finds the maximum its forward found, and comparisons, integer conversions
    and floor see eager's rounded values (tests/support/rounding_cases.py)."""
    x = rounding_cases.random_input(0, (8, 3, 16), dtype)
    rounding_cases.check_against_eager(rounding_cases.max_of_max, x, INDUCTOR)
    rounding_cases.check_against_eager(rounding_cases.near_integers, rounding_cases.integers(dtype), INDUCTOR)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_bf16_softmax_gradient_is_as_close_to_exact_as_eagers(seed: int) -> None:
    """The backward recomputes exp(x * scale - max) from the forward's saved max: with x * scale
    rounded to bf16 as the forward rounded it, not in float32 (a softmax gradient several times
    further from exact than eager's)."""
    gen = torch.Generator().manual_seed(seed)
    x, cotangent = torch.randn(4, 16, generator=gen).bfloat16(), torch.randn(4, 16, generator=gen).double()

    def gradient(fn, x: torch.Tensor) -> torch.Tensor:
        x = x.detach().requires_grad_()
        return torch.autograd.grad((fn(x).double() * cotangent).sum(), x)[0].double()

    for softmax in (lambda x: (x * 9.0).softmax(-1), lambda x: (x * 9.0).log_softmax(-1)):
        exact = gradient(softmax, x.double())
        eager_error = (gradient(softmax, x) - exact).abs().max()
        assert (gradient(compiler.jit(softmax, executors=INDUCTOR), x) - exact).abs().max() <= 1.5 * eager_error


def test_roundings_are_kept_in_a_backwards_regions_and_where_a_max_reads_them_only() -> None:
    """Keeping every bf16 rounding costs a CPU region half its time or more: a forward region
    without a max or comparison computes in float32 between the trace's casts (as torch.compile),
    a backward region, which recomputes forward values, keeps them."""

    def gelu(x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x * 2.0, approximate="tanh") * 3.0

    x = torch.randn(8, 64).bfloat16().requires_grad_()
    jfn = compiler.jit(gelu, executors=INDUCTOR)
    jfn(x).sum().backward()
    (forward,), (backward,) = _fusions(jfn), _fusions(jfn, backward=True)
    assert not forward.compilations.exact_casts and backward.compilations.exact_casts
    softmax = compiler.jit(lambda x: (x * 9.0).softmax(-1), executors=INDUCTOR)
    softmax(x.detach())
    assert all(f.compilations.exact_casts for f in _fusions(softmax))  # a max reads the rounded values


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("seed", [0, 1])
def test_a_rounding_the_program_asks_of_float32_values_is_kept(dtype: torch.dtype, seed: int) -> None:
    """`w.to(bf16).float()` of a float32 `w` (fake quantization, a precision check) rounds as in
    eager; Inductor would elide the round trip."""
    x = torch.randn(8, 33, generator=torch.Generator().manual_seed(seed))
    rounding_cases.check_rounded_on_purpose(x, dtype, INDUCTOR)


def test_a_padded_max_pool_compiles_in_inductor() -> None:
    """The max pool's mask of windows still holding padding only, made from indices alone, is
    negated with bitwise_not: `eq(mask, False)` broke Inductor's value range analysis (it orders
    the bounds of bools) and the region fell back to torch after a page of critical log."""
    pool = torch.nn.MaxPool2d(3, 2, 1, ceil_mode=True)
    jfn = compiler.jit(pool, executors=INDUCTOR, fallback=False)
    x = torch.randn(1, 2, 8, 7)
    torch.testing.assert_close(jfn(x), pool(x), rtol=0, atol=0)
    assert all(f.fallback_error is None for f in _fusions(jfn))
