"""nvFuser on a GPU: every case through real nvFuser vs eager, split3, GELU backward, write-backs,
attention, inspection. Run with `python3 -m pytest -m nvfuser tests/compiler -x -q` on the GPU
machine; skipped with a reason without CUDA or nvfuser_direct.

Tests marked NEEDS_INPLACE run the user-level in-place programs of issue 3 (`x.mul_(2).add_(y)`,
Adam, the KV-cache step); they skip, saying so, until the in-place branch lands. Tests needing
`Tensor.sum` from the ops branch skip the same way. The write-back machinery itself is covered
now through `prims.copy_to` programs.
"""

from __future__ import annotations

import math
import subprocess
import sys
import warnings

import pytest
import torch

import compiler
from compiler import examine
from compiler.executors import default_executor_names
from compiler.executors.nvfuser.diagnose.profiler_process import shared_profiler
from compiler.executors.nvfuser.executor import (
    WORKAROUNDS_CHECKED_ON,
    FusionFallbackWarning,
    nvfuser_version,
    region_fusions,
    workarounds_checked,
)
from suites.adam_step import BETA1, BETA2, EPS, LR, adam_step
from tests.support import rounding_cases
from tests.support.nvfuser_cases import (
    CASES,
    alibi_scores_softmax,
    flat,
    gelu_bias_backward,
    multi_query_heads,
    qk_norm_rotary,
    split3,
    tolerance,
    write_back,
)

pytestmark = pytest.mark.nvfuser
DEVICE = "cuda"


def jit(fn, numbers="constant", cuda_graphs=None, **fusion):
    executors = ["nvfuser", "sdpa", "torch"]
    return compiler.jit(
        fn, numbers=numbers, executors=executors, fusion=fusion, fallback=False, cuda_graphs=cuda_graphs
    )


def traceable(fn, *args, why: str) -> None:
    """Skips the test when the compiler cannot trace `fn` yet (a feature of another branch)."""
    try:
        compiler.jit(fn, executors=["torch"])(*[a.cpu() if isinstance(a, torch.Tensor) else a for a in args])
    except (NotImplementedError, compiler.TracingError, AttributeError, TypeError) as error:
        pytest.skip(f"{why}: {type(error).__name__}: {str(error).splitlines()[0]}")


def fusion_count(jfn) -> int:
    return len(region_fusions(compiler.last_traces(jfn)[-1]))


def kernels_per_call(fn, *args) -> list[str]:
    """Names of the CUDA kernels one call launches."""
    fn(*args)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn(*args)
        torch.cuda.synchronize()
    return [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]


def test_default_executors_on_a_gpu_include_nvfuser_and_sdpa():
    assert default_executor_names() == ["nvfuser", "sdpa", "torch"]


def test_the_installed_nvfuser_is_the_release_the_workarounds_were_checked_on():
    version = nvfuser_version()
    assert workarounds_checked(version), (
        f"nvfuser_direct {version} is not {WORKAROUNDS_CHECKED_ON}, the release the definitions' workarounds "
        f"were checked on: re-check each workaround whose comment names nvfuser_direct {WORKAROUNDS_CHECKED_ON} "
        "on this release, retire those it fixed, then move WORKAROUNDS_CHECKED_ON"
    )


@pytest.mark.parametrize(
    ("sizes", "strides"),
    [((2, 3, 4), (12, 4, 1)), ((1, 2, 3), (6, 3, 1)), ((2, 3, 4), (12, 1, 3)), ((4, 8), (16, 1)),
     ((2, 2, 2, 2), (8, 4, 0, 2)), ((3, 5), (0, 1)), ((5, 1, 7), (7, 7, 1)), ((4, 1, 1), (1, 4, 4))],
)  # fmt: skip
def test_our_descriptors_equal_nvfusers(sizes, strides):
    import nvfuser_direct

    from compiler.executors.nvfuser.define.translations import tensor_descriptor

    spec = tuple(1 if s == 1 else -1 for s in sizes)
    contiguity, order = nvfuser_direct.compute_tensor_descriptor(list(sizes), list(strides))
    assert tensor_descriptor(spec, sizes, strides) == (tuple(contiguity), tuple(order))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_every_case_through_nvfuser_matches_eager(case):
    args = case.make(DEVICE)
    jfn = jit(case.fn, min_region_size=1, **case.fusion)
    got = jfn(*args)
    for g, w in zip(flat(got), flat(case.fn(*args))):
        torch.testing.assert_close(g, w, **tolerance(w.dtype), equal_nan=True, check_dtype=case.check_dtype)
    assert fusion_count(jfn) >= 1 and examine.stats(jfn).fallbacks == 0


def _relative_error(got: torch.Tensor, want: torch.Tensor) -> float:
    """The largest difference over the largest magnitude of `want`."""
    return ((got.float() - want.float()).abs().max() / want.float().abs().max().clamp_min(1e-6)).item()


@pytest.mark.parametrize("numbers", ["constant", "symbolic"])
@pytest.mark.parametrize(("shape", "dtype"), [((2, 8, 4, 8), torch.float32), ((3, 33, 6, 64), torch.bfloat16)])
def test_qk_norm_with_rotary_and_its_gradients_match_eager(numbers, shape, dtype):
    # nvfuser_direct 0.2.36 computed wrong rows of this fusion (Qwen3's) with a segment_set before
    # the slices of the normalized q and k (translations.py `_slice`)
    b, s, h, d = shape
    gen = torch.Generator(device=DEVICE).manual_seed(0)
    make = lambda *size: torch.randn(*size, device=DEVICE, generator=gen).to(dtype)
    args = [make(b, s, h, d), make(b, s, max(h // 2, 1), d), make(d // 2).float().abs(), make(d), make(d)]
    leaves = [[a.clone().requires_grad_(i != 2) for i, a in enumerate(args)] for _ in range(2)]
    jfn = jit(qk_norm_rotary, numbers=numbers)
    for fn, inputs in ((jfn, leaves[0]), (qk_norm_rotary, leaves[1])):
        outputs = fn(*inputs)
        sum((o.float() * (k + 1)).sum() for k, o in enumerate(outputs)).backward()
    for got, want in zip([*jfn(*leaves[0]), *(a.grad for a in leaves[0] if a.requires_grad)],
                         [*qk_norm_rotary(*leaves[1]), *(a.grad for a in leaves[1] if a.requires_grad)]):  # fmt: skip
        assert _relative_error(got, want) < (1e-5 if dtype is torch.float32 else 2e-2)
    assert fusion_count(jfn) >= 1 and examine.stats(jfn).fallbacks == 0


@pytest.mark.parametrize("numbers", ["constant", "symbolic"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rotary_backward_of_a_transposed_input_compiles_and_matches_eager(numbers, dtype):
    # without a segment_set before the slices of `grad * sin`, nvfuser_direct 0.2.36 fails an
    # internal assert in lowering (fusion.cpp:1020) on the rotary backward
    def rotary(q, cos, sin):
        half = q.shape[-1] // 2
        return q * cos + torch.cat((-q[..., half:], q[..., :half]), dim=-1) * sin

    jfn = jit(rotary, numbers=numbers)
    for s, expanded in ((6, False), (9, False), (7, True)):
        q = torch.randn(2, s, 4, 64, device=DEVICE, dtype=dtype).transpose(1, 2)
        cos, sin, grad = (torch.randn(*size, device=DEVICE, dtype=dtype) for size in ((s, 64), (s, 64), (2, 4, s, 64)))
        if expanded:  # as a forward fusion returns them, broadcast over batch and heads (Gemma-2's)
            cos, sin = cos.expand(2, 4, s, 64), sin.expand(2, 4, s, 64)
        got_q, want_q = q.clone().requires_grad_(), q.clone().requires_grad_()
        got, want = jfn(got_q, cos, sin), rotary(want_q, cos, sin)
        got.backward(grad)
        want.backward(grad)
        for g, w in ((got, want), (got_q.grad, want_q.grad)):  # bf16: eager rounds every op, nvFuser once
            assert _relative_error(g, w) < (1e-5 if dtype is torch.float32 else 2e-2)
    assert examine.stats(jfn).fallbacks == 0


def test_split3_compiles_one_definition_for_twenty_split_sizes():
    jfn = jit(split3, numbers="symbolic")
    a = torch.randn(8, 16, 4096, device=DEVICE)
    for d0 in range(1, 21):
        for got, want in zip(jfn(a, d0, 8), split3(a, d0, 8)):
            torch.testing.assert_close(got, want)
    stats = examine.stats(jfn)
    assert compiler.cache_stats(jfn).misses == 1 and fusion_count(jfn) == 1
    assert stats.definitions == 1
    # nvFuser's kernel for d0 = 1 (an extent of 1, concretized as a broadcast) is another than for
    # every other d0: that first call runs with torch, and only the shared kernel is compiled
    assert (stats.compilations, stats.deferred) == (1, 1), stats


@pytest.mark.parametrize("numbers", ["constant", "symbolic"])
def test_gelu_backward_is_one_fusion_and_correct(numbers):
    x = [torch.randn(16, 64, 256, device=DEVICE) for _ in range(3)]
    jfn = jit(gelu_bias_backward, numbers=numbers)
    for got, want in zip(jfn(0.1, 0.2, 0.3, 0.4, *x), gelu_bias_backward(0.1, 0.2, 0.3, 0.4, *x)):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-3)
    assert fusion_count(jfn) == 1
    assert [b.sym.name for b in compiler.last_traces(jfn)[-1].bsyms] == ["nvFusion0"]


def test_gelu_backward_as_plain_pytorch_is_one_fusion():
    def plain(s0, s1, s2, s3, t4, t5, t6):
        t16 = torch.tanh(0.797885 * (t6 + 0.044715 * t6**3))
        t28 = (t5 * (0.5 * t6)) * (1 - t16 * t16) * s3
        t38 = t28 + (t28 * s2 * s1) * t6**2 + (t5 * (1 + t16)) * s0
        return t4.sum((0, 1)), t38

    x = [torch.randn(16, 64, 256, device=DEVICE) for _ in range(3)]
    traceable(plain, 0.1, 0.2, 0.3, 0.4, *x, why="needs Tensor.sum from the ops branch")
    jfn = jit(plain)
    for got, want in zip(jfn(0.1, 0.2, 0.3, 0.4, *x), plain(0.1, 0.2, 0.3, 0.4, *x)):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-3)
    assert fusion_count(jfn) == 1


def test_write_back_fusion_writes_the_buffer_in_place_without_a_copy_kernel():
    jfn = jit(write_back, cuda_graphs=False)  # NOTE: the kernels a call launches, not a graph's replay
    x, y = torch.randn(256, 1024, device=DEVICE), torch.randn(256, 1024, device=DEVICE)
    x_eager = x.clone()
    want = write_back(x_eager, y)
    pointer = x.data_ptr()
    torch.testing.assert_close(jfn(x, y), want)
    torch.testing.assert_close(x, x_eager)
    assert x.data_ptr() == pointer and fusion_count(jfn) == 1
    names = kernels_per_call(jfn, x.clone(), y)
    assert len(names) == 1 and "copy" not in names[0].lower(), names


def test_segments_report_kernels_schedulers_and_bandwidth():
    x = [torch.randn(16, 64, 256, device=DEVICE) for _ in range(3)]
    jfn = jit(gelu_bias_backward)
    jfn(0.1, 0.2, 0.3, 0.4, *x)
    # torch.profiler keeps CUPTI subscribed, which makes nvFuser's in-process profiler end the
    # process; segments() must still work afterwards (it profiles in a child process).
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]):
        jfn(0.1, 0.2, 0.3, 0.4, *x)
    (report,) = examine.segments(jfn)
    assert report.kernels and all(k.time_ms > 0 and k.bandwidth_gbs > 0 for k in report.kernels)
    region = region_fusions(compiler.last_traces(jfn)[-1])[0].region
    assert sum(len(ops) for ops in report.ops_by_segment.values()) == len(region.bsyms)
    child = shared_profiler().pid
    text = str(examine.segments(jfn))
    assert "nvFusion0" in text and ("MULTI-KERNEL" in text) == (len(report.kernels) > 1)
    assert child is not None and shared_profiler().pid == child  # profiled again in the same long-lived child


def test_repro_script_runs_standalone(tmp_path):
    x = [torch.randn(16, 64, 256, device=DEVICE) for _ in range(3)]
    jfn = jit(gelu_bias_backward, numbers="symbolic")
    jfn(0.1, 0.2, 0.3, 0.4, *x)
    path = examine.repro(jfn, "nvFusion0", tmp_path / "gelu_repro.py")
    result = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "outputs match PyTorch" in result.stdout and " ms (median" in result.stdout


def test_a_fusion_nvfuser_rejects_falls_back_with_one_warning(monkeypatch):
    from compiler.executors.nvfuser.define import translations as nvfuser_translate
    from compiler.prims import Prim

    def broken(tx, bsym):
        tx.define(bsym.output, f"fd.ops.no_such_op({tx.tensor(bsym.args[0])})", bsym.output.dtype)

    monkeypatch.setitem(nvfuser_translate.TRANSLATIONS, Prim.SIN, broken)
    jfn = compiler.jit(lambda a: (a * 2).sin(), executors=["nvfuser"])
    a = torch.randn(64, device=DEVICE)
    with pytest.warns(FusionFallbackWarning, match="nvFusion0"):
        for _ in range(2):
            torch.testing.assert_close(jfn(a), (a * 2).sin())
    assert examine.stats(jfn).fallbacks == 1


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize(("sq", "causal", "mask"), [(1, False, False), (128, True, False), (128, False, True)])
def test_attention_runs_in_the_sdpa_executor_and_matches_eager(dtype, sq, causal, mask):
    from compiler.executors.attention import attention

    def attend(q, k, v, attn_mask):
        return torch.nn.functional.scaled_dot_product_attention(q * 2, k, v, attn_mask=attn_mask, is_causal=causal)

    q = torch.randn(2, 4, sq, 64, device=DEVICE, dtype=dtype)
    k, v = (torch.randn(2, 4, 128, 64, device=DEVICE, dtype=dtype) for _ in range(2))
    attn_mask = torch.rand(sq, 128, device=DEVICE) > 0.2 if mask else None
    jfn = jit(attend)
    torch.testing.assert_close(jfn(q, k, v, attn_mask), attend(q, k, v, attn_mask), **tolerance(dtype))
    computation = jfn.last_entry.computation
    impls = getattr(computation, "computation", computation).__globals__.values()  # under its CUDA graphs
    assert any(getattr(impl, "func", None) is attention for impl in impls)  # the sdpa executor's


# ---------------------------------------------------------------------------------------------
# NEEDS_INPLACE: user-level in-place programs (issue 3's functionalization must be present)


def test_inplace_mul_add_is_one_fusion_writing_in_place():
    def program(x, y):
        x.mul_(2).add_(y)

    x, y = torch.randn(256, 1024, device=DEVICE), torch.randn(256, 1024, device=DEVICE)
    traceable(program, x.clone(), y, why="NEEDS_INPLACE: Tensor.mul_/add_ come with the in-place branch (issue 3)")
    jfn = jit(program, cuda_graphs=False)  # NOTE: the kernels a call launches, not a graph's replay
    x_eager = x.clone()
    program(x_eager, y)
    jfn(x, y)
    torch.testing.assert_close(x, x_eager)
    assert fusion_count(jfn) == 1
    names = kernels_per_call(jfn, x, y)
    assert len(names) == 1 and "copy" not in names[0].lower(), names


def test_adam_step_fuses_per_parameter_or_better_and_matches_torch_optim():
    n = 8
    params = [torch.randn(256, 256, device=DEVICE) for _ in range(n)]
    state = [[torch.randn_like(p) for p in params] for _ in range(3)]
    grads, m, v = state[0], [torch.zeros_like(p) for p in params], [torch.zeros_like(p) for p in params]
    reference = [torch.nn.Parameter(p.clone()) for p in params]
    optimizer = torch.optim.Adam(reference, lr=LR, betas=(BETA1, BETA2), eps=EPS, foreach=False)
    # ungraphed: a step count changing every call is read from a device scalar under automatic
    # graphs, whose conversions (0-d copies) are kernels of their own; in place either way
    jfn = jit(adam_step, numbers="symbolic", cuda_graphs=False)
    for step in range(1, 4):
        for r, g in zip(reference, grads):
            r.grad = g.clone()
        optimizer.step()
        jfn(params, grads, m, v, step, LR, BETA1, BETA2, EPS)
    for p, r in zip(params, reference):
        torch.testing.assert_close(p, r.detach(), rtol=1e-5, atol=1e-6)
    assert fusion_count(jfn) <= n and compiler.cache_stats(jfn).misses == 1
    names = kernels_per_call(jfn, params, grads, m, v, 4, LR, BETA1, BETA2, EPS)
    assert not [k for k in names if "copy" in k.lower()], names


def test_kv_cache_step_matches_eager():
    def step(q, k_cache, v_cache, idx, k_new, v_new):
        k_cache.index_copy_(2, idx, k_new)
        v_cache.index_copy_(2, idx, v_new)
        return torch.nn.functional.scaled_dot_product_attention(q, k_cache, v_cache)

    b, h, s, d = 2, 4, 256, 64
    make = lambda *shape: torch.randn(*shape, device=DEVICE, dtype=torch.bfloat16)
    q, k_new, v_new = make(b, h, 1, d), make(b, h, 1, d), make(b, h, 1, d)
    k_cache, v_cache = make(b, h, s, d), make(b, h, s, d)
    idx = torch.tensor([7], device=DEVICE)
    traceable(step, q, k_cache.clone(), v_cache.clone(), idx, k_new, v_new,
              why="NEEDS_INPLACE: index_copy_ comes with the in-place branch (issue 3)")  # fmt: skip
    k_eager, v_eager = k_cache.clone(), v_cache.clone()
    want = step(q, k_eager, v_eager, idx, k_new, v_new)
    jfn = jit(step)
    torch.testing.assert_close(jfn(q, k_cache, v_cache, idx, k_new, v_new), want, **tolerance(torch.bfloat16))
    torch.testing.assert_close(k_cache, k_eager)
    torch.testing.assert_close(v_cache, v_eager)
    assert math.isfinite(float(want.float().abs().sum()))
    with warnings.catch_warnings():
        warnings.simplefilter("error", FusionFallbackWarning)
        jfn(q, k_cache, v_cache, idx, k_new, v_new)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_values_held_in_fp32_are_read_rounded_where_rounding_decides(dtype):
    """A max's backward finds its forward's maximum; comparisons, integer conversions and floor see
    eager's rounded values (tests/support/rounding_cases.py, on CPU through the fake nvFuser)."""
    executors = ["nvfuser", "sdpa", "torch"]
    for seed in range(3):
        for fn in rounding_cases.DIFFERENTIABLE.values():
            x = rounding_cases.random_input(seed, (8, 3, 16), dtype, DEVICE)
            rounding_cases.check_against_eager(fn, x, executors)
    rounding_cases.check_against_eager(rounding_cases.near_integers, rounding_cases.integers(dtype, DEVICE), executors)
    x = rounding_cases.random_input(4, (8, 33), torch.float32, DEVICE)
    rounding_cases.check_rounded_on_purpose(x, dtype, executors)  # `w.to(bf16)` of a float32 `w`


def _repeated_heads(q, k, contiguous):
    b, h, n, d = k.shape
    repeated = (k * 2 + 1)[:, :, None].expand(b, h, 2, n, d)
    repeated = (repeated.contiguous() if contiguous else repeated).reshape(b, 2 * h, n, d)
    return torch.matmul(q, repeated.transpose(-1, -2))


@pytest.mark.parametrize("contiguous", [False, True])
def test_repeated_key_value_heads_are_written_by_the_fusion_not_copied_by_torch(contiguous):
    # GQA's repeat_kv: nvFuser would return the expanded heads with stride 0, and torch's reshape
    # would copy them in a kernel of its own
    from tests.support.autodiff_util import AtenOps

    q = torch.randn(2, 6, 64, 32, device=DEVICE, dtype=torch.bfloat16)
    k = torch.randn(2, 3, 64, 32, device=DEVICE, dtype=torch.bfloat16)
    jfn = compiler.jit(lambda q, k: _repeated_heads(q, k, contiguous))
    jfn(q, k)
    with AtenOps() as ops:
        got = jfn(q, k)
    assert "clone" not in ops.names and "copy_" not in ops.names, ops.names
    torch.testing.assert_close(got, _repeated_heads(q, k, contiguous), atol=5e-2, rtol=5e-2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_bloom_decode_alibi_softmax_matches_eager(dtype):
    # the alibi merged over batch and heads in the fusion, then split back for the softmax: nvFuser
    # computed probabilities up to 12 in one segment (Bloom's decode step)
    h, n = 12, 513
    for seed in range(2):
        gen = torch.Generator(device=DEVICE).manual_seed(seed)
        slopes = torch.rand(h, device=DEVICE, generator=gen) * 0.01
        scores = torch.randn(8 * h, 1, n, device=DEVICE, generator=gen).to(dtype)
        got, want = jit(alibi_scores_softmax)(slopes, scores), alibi_scores_softmax(slopes, scores)
        torch.testing.assert_close(got[0], want[0], **tolerance(dtype))
        torch.testing.assert_close(got[1], want[1], **tolerance(dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_multi_query_heads_picked_by_a_list_index_match_eager(dtype):
    # Falcon's key and value heads, unit slices of the fused projection expanded over the query
    # heads: kept as iteration dims behind their segment, nvFuser's segmenter refused the fusion
    for seed, (b, s, heads) in enumerate([(8, 512, 12), (1, 7, 3)]):
        gen = torch.Generator(device=DEVICE).manual_seed(seed)
        qkv = torch.randn(b, s, heads + 2, 64, device=DEVICE, generator=gen).to(dtype)
        angles = torch.randn(1, 1, s, 64, device=DEVICE, generator=gen)
        cos, sin = angles.cos().to(dtype), angles.sin().to(dtype)
        got, want = jit(multi_query_heads)(qkv, cos, sin), multi_query_heads(qkv, cos, sin)
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w, **tolerance(dtype))
