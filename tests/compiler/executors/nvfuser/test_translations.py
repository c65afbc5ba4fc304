# ruff: noqa: E501 - golden fusion definitions keep their generated line length
"""Translation of regions to FusionDefinition source: golden text, descriptors, table coverage."""

from __future__ import annotations

import pytest
import torch

import compiler
from compiler import prims
from compiler.core.executor import Region
from compiler.executors.nvfuser.define.claims import LEFT_TO_TORCH, POLICY_TORCH
from compiler.executors.nvfuser.define.translations import (
    TRANSLATIONS,
    TranslationError,
    fusion_source,
    tensor_descriptor,
)
from compiler.executors.nvfuser.diagnose.repro import TORCH_SOURCE
from compiler.executors.nvfuser.executor import region_fusions
from compiler.prims import Prim
from tests.support.nvfuser_cases import gelu_bias_backward, qk_norm_rotary, split3, write_back
from tests.support.nvfuser_helpers import fake_nvfuser  # noqa: F401  (fixture)


def source_of(fn, *args, numbers="constant", index=0):
    jfn = compiler.jit(fn, numbers=numbers, executors=["nvfuser"], fusion={"runner": "torch"})
    jfn(*args)
    fusion = region_fusions(compiler.last_traces(jfn)[-1])[index]
    return fusion_source(fusion.region, fusion.descriptors())[0]


def test_translation_table_covers_every_prim_or_says_why_not():
    assert set(TRANSLATIONS).isdisjoint(LEFT_TO_TORCH)
    assert set(TRANSLATIONS) | set(LEFT_TO_TORCH) == set(Prim)
    assert set(LEFT_TO_TORCH) == {
        Prim.ARGMAX, Prim.INDEX_COPY, Prim.EMPTY, Prim.SDPA,
        Prim.UNPACK_SEQUENCE, Prim.UNPACK_DICT, Prim.CHECK_TENSOR, Prim.CHECK_TYPE, Prim.CHECK_VALUE,
        Prim.CHECK_STRIDES, Prim.CHECK_ALIASING, Prim.COPY_, Prim.SLICE_UPDATE, Prim.INDEX_ADD,
        Prim.DROPOUT_NOISE, Prim.SDPA_FORWARD, Prim.SDPA_BACKWARD, Prim.CHECK_REQUIRES_GRAD, Prim.CHECK_AUTOCAST,
        Prim.STOP_GRADIENT,
        Prim.UPDATED_WITHOUT_GRAD,
        Prim.OVERWRITTEN,
        Prim.SIZE, Prim.CUMSUM, Prim.CUMPROD, Prim.ARGSORT, Prim.TOPK, Prim.RANDOM_VALUES,
        Prim.SCATTER, Prim.SCATTER_REDUCE, Prim.CONVOLUTION, Prim.CONVOLUTION_BACKWARD,
        Prim.CONVOLUTION_TRANSPOSE,
        Prim.GROUPED_MM, Prim.DEVICE_PUT,
    }  # fmt: skip
    assert set(POLICY_TORCH) == {Prim.MATMUL, Prim.LINEAR} and set(POLICY_TORCH) <= set(TRANSLATIONS)
    assert set(TORCH_SOURCE) == set(TRANSLATIONS)  # repro scripts can check every translated prim


GELU_GOLDEN = """\
def nvfusion_0(fd):
    t6 = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=DataType.Float, stride_order=[2, 1, 0])
    t5 = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=DataType.Float, stride_order=[2, 1, 0])
    s3 = fd.define_scalar(None, dtype=DataType.Double)
    s2 = fd.define_scalar(None, dtype=DataType.Double)
    s1 = fd.define_scalar(None, dtype=DataType.Double)
    s0 = fd.define_scalar(None, dtype=DataType.Double)
    t4 = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=DataType.Float, stride_order=[2, 1, 0])
    t0 = fd.ops.mul(fd.ops.mul(t6, t6), t6)
    t1 = fd.ops.mul(t0, fd.define_scalar(0.044715, dtype=DataType.Float))
    t2 = fd.ops.add(t6, t1)
    t3 = fd.ops.mul(t2, fd.define_scalar(0.797885, dtype=DataType.Float))
    t7 = fd.ops.tanh(t3)
    t8 = fd.ops.mul(t6, fd.define_scalar(0.5, dtype=DataType.Float))
    t9 = fd.ops.mul(t5, t8)
    t10 = fd.ops.mul(t7, t7)
    t11 = fd.ops.sub(fd.define_scalar(1.0, dtype=DataType.Float), t10)
    t12 = fd.ops.mul(t9, t11)
    s3_f32 = fd.ops.cast(s3, dtype=DataType.Float)
    t13 = fd.ops.mul(t12, s3_f32)
    s2_f32 = fd.ops.cast(s2, dtype=DataType.Float)
    t14 = fd.ops.mul(t13, s2_f32)
    s1_f32 = fd.ops.cast(s1, dtype=DataType.Float)
    t15 = fd.ops.mul(t14, s1_f32)
    t16 = fd.ops.mul(t6, t6)
    t17 = fd.ops.mul(t15, t16)
    t18 = fd.ops.add(t13, t17)
    t19 = fd.ops.add(t7, fd.define_scalar(1.0, dtype=DataType.Float))
    t20 = fd.ops.mul(t5, t19)
    s0_f32 = fd.ops.cast(s0, dtype=DataType.Float)
    t21 = fd.ops.mul(t20, s0_f32)
    t22 = fd.ops.add(t18, t21)
    t23 = fd.ops.sum(t4, dims=[0, 1])
    fd.add_output(t22)
    fd.add_output(t23)
"""


def test_golden_gelu_backward_is_one_fusion_with_symbolic_scalars():
    x = torch.randn(2, 3, 8)
    assert source_of(gelu_bias_backward, 0.1, 0.2, 0.3, 0.4, x, x, x, numbers="symbolic") == GELU_GOLDEN


SPLIT3_GOLDEN = """\
def nvfusion_0(fd):
    a = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=DataType.Float, stride_order=[2, 1, 0])
    d0 = fd.define_scalar(None, dtype=DataType.Int)
    i2 = fd.define_scalar(None, dtype=DataType.Int)
    i3 = fd.define_scalar(None, dtype=DataType.Int)
    t0 = fd.ops.slice(a, start_indices=[0, 0, 0], end_indices=[fd.ops.size(a, dim=0), fd.ops.size(a, dim=1), d0], strides=[1, 1, 1], manual_normalization=True)
    t1 = fd.ops.slice(a, start_indices=[0, 0, d0], end_indices=[fd.ops.size(a, dim=0), fd.ops.size(a, dim=1), i2], strides=[1, 1, 1], manual_normalization=True)
    t2 = fd.ops.slice(a, start_indices=[0, 0, i2], end_indices=[fd.ops.size(a, dim=0), fd.ops.size(a, dim=1), i3], strides=[1, 1, 1], manual_normalization=True)
    t3 = fd.ops.mul(t0, fd.define_scalar(2.0, dtype=DataType.Float))
    t4 = fd.ops.add(t1, fd.define_scalar(1.0, dtype=DataType.Float))
    t5 = fd.ops.sin(t2)
    fd.add_output(t3)
    fd.add_output(t4)
    fd.add_output(t5)
"""


def test_golden_split3_takes_its_bounds_as_scalar_inputs():
    assert source_of(split3, torch.randn(8, 16, 64), 3, 8, numbers="symbolic") == SPLIT3_GOLDEN


WRITE_BACK_GOLDEN = """\
def nvfusion_0(fd):
    x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float, stride_order=[1, 0])
    y = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float, stride_order=[1, 0])
    t0 = fd.ops.sub(x, y)
    t1 = fd.ops.mul(x, fd.define_scalar(2.0, dtype=DataType.Float))
    t2 = fd.ops.add(t1, y)
    fd.add_output(fd.ops.set(t2), alias_input=x)
    fd.add_output(t0)
"""


def test_golden_write_back_is_an_output_aliased_to_the_buffer():
    assert source_of(write_back, torch.randn(4, 8), torch.randn(4, 8)) == WRITE_BACK_GOLDEN


BF16_GOLDEN = """\
def nvfusion_0(fd):
    a = fd.define_tensor(shape=[-1, 1], contiguity=[True, None], dtype=DataType.BFloat16, stride_order=[1, 0])
    b = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16, stride_order=[0, 1])
    t0 = fd.ops.cast(a, dtype=DataType.Float)
    t1 = fd.ops.mul(t0, fd.define_scalar(2.0, dtype=DataType.Float))
    t3_f32 = fd.ops.broadcast_in_dim(t1, shape=[fd.ops.size(t1, dim=0), fd.ops.size(b, dim=1)], broadcast_dims=[0, 1])
    t5 = fd.ops.cast(b, dtype=DataType.Float)
    t6 = fd.ops.add(t3_f32, t5)
    t9 = fd.ops.sin(t6)
    t10 = fd.ops.cast(t9, dtype=DataType.BFloat16)
    fd.add_output(t10)
"""


def test_golden_bf16_computes_in_fp32_and_casts_only_at_the_boundary():
    b = torch.randn(8, 4).to(torch.bfloat16).t()
    got = source_of(lambda a, b: (a * 2 + b).sin(), torch.randn(4, 1).to(torch.bfloat16), b)
    assert got == BF16_GOLDEN
    assert got.count("DataType.BFloat16)") == 1  # one cast down, at the output


@pytest.mark.parametrize(
    ("sizes", "strides", "contiguity", "order"),
    [
        ((2, 3, 4), (12, 4, 1), (True, True, True), (2, 1, 0)),
        ((1, 2, 3), (6, 3, 1), (None, True, True), (2, 1, 0)),
        ((2, 3, 4), (12, 1, 3), (True, True, True), (2, 0, 1)),  # permuted but dense
        ((4, 8), (16, 1), (False, True), (1, 0)),  # a slice of wider rows
        ((2, 2, 2, 2), (8, 4, 0, 2), (True, True, None, False), (3, 2, 1, 0)),  # nvFuser's own example
        ((3, 5), (0, 1), (None, True), (1, 0)),  # expanded
    ],
)
def test_descriptor_matches_nvfusers_definition(sizes, strides, contiguity, order):
    spec = tuple(1 if s == 1 else -1 for s in sizes)
    assert tensor_descriptor(spec, sizes, strides) == (contiguity, order)


def test_a_write_back_into_a_value_the_region_computes_is_refused():
    from tests.support.nvfuser_helpers import prim_trace

    trace = prim_trace(lambda a: prims.copy_to(prims.sin(a), prims.exp(a)), ((4,), torch.float32))
    region = Region("nvFusion0", tuple(trace.bsyms), trace.inputs, ())
    with pytest.raises(TranslationError, match="not an input"):
        fusion_source(region)


def test_a_squeezed_slice_of_a_tensor_read_elsewhere_gets_a_segment_boundary():
    a = torch.randn(4, 33)
    # nvfuser_direct 0.2.36 asserts in loop promotion on this pair without the segment_set; the
    # squeeze is in front of it (see the next test)
    both = source_of(lambda t: (t[1:3, 2:20] * 2, t[0] + 1), a)
    assert both.count("segment_set") == 1 and "fd.ops.segment_set(fd.ops.squeeze(t2, dims=[0]))" in both, both


def test_a_slice_making_a_size_one_dim_of_a_longer_one_is_its_own_segment():
    # nvfuser_direct 0.2.36 read the first row for `a[-1:]` (H100, bf16/f16/f32) without it.
    for fn in (lambda t: (t[0] + 1).exp(), lambda t: (t[-1:] * 1.5).exp(), lambda t: (t[:, 3:4] * 2).exp()):
        assert source_of(fn, torch.randn(4, 33)).count("fd.ops.segment_set(") == 1
    for a in (torch.randn(4, 33), torch.randn(4, 1)):  # a longer slice; a dim that was size 1 already
        assert "segment_set" not in source_of(lambda t: (t[1:3] * 2).exp(), a)


def test_slices_of_a_product_with_an_expanded_input_before_a_cat_get_a_segment_boundary():
    # nvfuser_direct 0.2.36 fails an exact-mapping assert (fusion.cpp:1020) on a rotary backward
    # whose `sin` comes in expanded over the heads (a forward fusion returned it broadcast)
    def rotary_grad(g, sin):
        u = g * sin
        return torch.cat((u[..., 4:], -u[..., :4]), -1)

    g, sin = torch.randn(2, 3, 5, 8), torch.randn(2, 1, 5, 8)
    assert source_of(rotary_grad, g, sin.expand(2, 3, 5, 8)).count("fd.ops.segment_set(") == 1
    assert "segment_set" not in source_of(rotary_grad, g, sin.expand(2, 3, 5, 8).contiguous())


def test_a_size_one_slice_only_squeezed_is_squeezed_in_front_of_its_segment_set():
    # nvfuser_direct 0.2.36's segmenter refuses the squeeze behind the segment_set where a
    # reduction follows (a ViT's class token, then its LayerNorm)
    def class_token_norm(t):
        return torch.nn.functional.layer_norm((t * 2)[:, 0], (33,))

    source = source_of(class_token_norm, torch.randn(2, 17, 33))
    assert source.count("fd.ops.segment_set(") == 1, source
    assert "fd.ops.segment_set(fd.ops.squeeze(" in source, source
    # a source sliced into several such parts (a fused QKV's) squeezes each in front
    source = source_of(lambda t: (t[:, 0] + t[:, 1]).sum(-1), torch.randn(2, 17, 33))
    assert source.count("fd.ops.segment_set(fd.ops.squeeze(") == 2, source
    # a slice read another way too keeps the squeeze behind the segment_set
    source = source_of(lambda t: ((t[:, 0] + 1).sum(-1), t[:, 0:1] * 2), torch.randn(2, 17, 33))
    assert "fd.ops.segment_set(fd.ops.squeeze(" not in source, source


def test_slices_of_a_broadcast_product_that_are_cat_share_one_segment_boundary():
    # nvfuser_direct 0.2.36 fails an exact-mapping assert in lowering on this (a rotary backward's
    # shape, H100) without the segment_set; slices of an input (the forward's) need none.
    def rotated(g, sin):
        u = g * sin
        return torch.cat((u[..., 4:], -u[..., :4]), dim=-1) + g

    source = source_of(rotated, torch.randn(2, 3, 8), torch.randn(3, 8))
    assert source.count("fd.ops.segment_set(") == 1 and "t1_seg = fd.ops.segment_set(t1)" in source, source
    assert source.count("fd.ops.slice(t1_seg,") == 2, source
    forward = source_of(
        lambda q, c: torch.cat((-q[..., 4:], q[..., :4]), dim=-1) * c, torch.randn(2, 3, 8), torch.randn(3, 8)
    )
    assert "segment_set" not in forward, forward


def test_fills_at_the_ends_of_a_cat_pad_the_pieces_between():
    # nvfuser_direct 0.2.36 fails "Invalid domains to map" (fusion.cpp:1020) where the zeros a shift
    # cats in take their extents from another input of the same sizes; a pad maps no extents
    # between pieces (a cat pads each piece and maps the others' extents to it)
    def shifted(v, k):
        doubled = v * 2
        return torch.cat([k[..., 1:], torch.zeros(2, 3, 1)], -1) + doubled

    source = source_of(shifted, torch.randn(2, 3, 8), torch.randn(2, 3, 8))
    assert "fd.ops.cat(" not in source and "fd.ops.full(" not in source, source
    [padded] = [line for line in source.splitlines() if "fd.ops.pad(" in line]
    assert "fd.ops.pad(t" in padded and "[0, 1], fd.define_scalar(0.0, dtype=DataType.Float))" in padded, source

    def both_ends(k):
        left = torch.full((2, 1, 8), float("-inf"), dtype=k.dtype)
        return torch.cat([left, k[:, 1:], k[:, :1], torch.ones(2, 2, 8, dtype=k.dtype)], 1) * 3

    source = source_of(both_ends, torch.randn(2, 3, 8))
    assert "fd.ops.cat([" in source and source.count("fd.ops.pad(") == 2, source
    assert "[0, 0, 1, 0]" in source and "[0, 0, 0, 2]" in source, source


def test_a_fill_between_pieces_takes_the_extents_of_the_piece_beside_it():
    def between(v, k):
        return torch.cat([k[..., 2:], torch.zeros(2, 3, 1), k[..., :1]], -1) + v * 2

    source = source_of(between, torch.randn(2, 3, 8), torch.randn(2, 3, 8))
    lines = {line.split(" = ")[0].strip(): line for line in source.splitlines() if " = " in line}
    [cat] = [line for line in lines.values() if "fd.ops.cat(" in line]
    [piece, fill, _] = cat.split("[", 1)[1].split("]")[0].split(", ")
    assert "fd.ops.slice(k," in lines[piece] and fill.endswith("_beside"), source
    assert f"shape=[fd.ops.size({piece}, dim=0), fd.ops.size({piece}, dim=1), 1]" in lines[fill], source
    assert source.count("fd.ops.full(") == 1, source  # not also the fill as the trace has it, dead


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cats_with_fills_run_as_eager_on_the_cpu_double(fake_nvfuser, dtype):  # noqa: F811
    def shifts(x):
        right = torch.cat([torch.zeros_like(x[..., :1]), x[..., :-1]], -1)
        left = torch.cat([-x[..., 1:], torch.zeros_like(x[..., :1])], -1)
        middle = torch.cat([x[:, :1], torch.full_like(x[:, :2], 7.0), x[:, 1:]], 1)
        ends = torch.cat([torch.full_like(x[:, :1], float("-inf")), x, torch.ones_like(x[:, :3])], 1)
        return right * 2 + left, middle + 1, ends.exp()

    for shape in [(2, 3, 8), (1, 1, 2), (3, 5, 1)]:
        x = torch.randn(shape, dtype=dtype)
        x[..., 0] = float("nan")
        jfn = compiler.jit(shifts, executors=["nvfuser", "torch"], fallback=False)
        for got, want in zip(jfn(x), shifts(x)):
            torch.testing.assert_close(got, want, equal_nan=True)
        assert region_fusions(compiler.last_traces(jfn)[-1])


def _transcendental(x, y, u):
    return (
        torch.log2(x), torch.log10(y), torch.tan(u), torch.sinh(u), torch.cosh(u), torch.asinh(u),
        torch.acosh(y), torch.atanh(u), torch.erfc(u),
    )  # fmt: skip


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_log2_log10_and_the_hyperbolics_are_nvfusers_ops_of_their_names(fake_nvfuser, dtype):  # noqa: F811
    """Each is one fd.ops call (log2, not log / ln 2), so powers of two and of ten stay exact, as in eager."""
    x = torch.exp2(torch.arange(-10, 10).to(dtype))
    y = torch.tensor([10.0**k for k in range(0, 20)]).to(dtype)
    u = torch.linspace(-0.9, 0.9, 20).to(dtype)
    jfn = compiler.jit(_transcendental, executors=["nvfuser", "torch"], fallback=False)
    got, want = jfn(x, y, u), _transcendental(x, y, u)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w)
    assert torch.equal(got[0], torch.log2(x)) and torch.equal(got[1], torch.log10(y))
    [fusion] = region_fusions(compiler.last_traces(jfn)[-1])
    source = fusion_source(fusion.region, fusion.descriptors())[0]
    for op in ("log2", "log10", "tan", "sinh", "cosh", "asinh", "acosh", "atanh", "erfc"):
        assert source.count(f"fd.ops.{op}(") == 1, source
    assert "fd.ops.log(" not in source, source


def rotary(q, cos, sin):
    half = q.shape[-1] // 2
    return q * cos + torch.cat((-q[..., half:], q[..., :half]), dim=-1) * sin


def test_a_static_broadcast_next_to_a_cat_is_written_with_the_traces_numbers():
    # nvFuser indexes a cat faster when it knows every extent (rotary: 46.3 against 62.9 us, H200)
    q, cos, sin = torch.randn(2, 4, 16, 8), torch.randn(16, 8), torch.randn(16, 8)
    source = source_of(rotary, q, cos, sin)
    assert "fd.ops.broadcast_in_dim(cos, shape=[2, 4, 16, 8], broadcast_dims=[2, 3])" in source
    # and so are its inputs' sizes: beside those numbers, symbolic input extents made nvFuser
    # refuse GPT-J's rotary ("Invalid domains to map")
    assert "q = fd.define_tensor(shape=[2, 4, 16, 8]," in source
    assert "cos = fd.define_tensor(shape=[16, 8]," in source
    assert "q = fd.define_tensor(shape=[-1, -1, -1, -1]," in source_of(lambda q, cos: q * cos + 1.0, q, cos)  # no cat
    jfn = compiler.jit(
        rotary, executors=["nvfuser"], fusion={"runner": "torch"}, dynamic=["q.size(2)", "cos.size(0)", "sin.size(0)"]
    )
    torch.testing.assert_close(jfn(q, cos, sin), rotary(q, cos, sin))
    [fusion] = region_fusions(compiler.last_traces(jfn)[-1])
    symbolic = fusion_source(fusion.region, fusion.descriptors())[0]
    assert (
        "fd.ops.broadcast_in_dim(cos, shape=[fd.ops.size(q, dim=0), fd.ops.size(q, dim=1), fd.ops.size(cos, dim=0)"
        in symbolic
    )
    assert "q = fd.define_tensor(shape=[-1, -1, -1, -1]," in symbolic


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_cat_of_a_piece_held_in_fp32_is_done_in_fp32(seed):
    # rotary's negated half stays fp32 into the cat (nvFuser's kernel 37.0 against 44.2 us, H200)
    gen = torch.Generator().manual_seed(seed)
    q, cos, sin = (torch.randn(*s, generator=gen).to(torch.bfloat16) for s in ((2, 4, 16, 8), (16, 8), (16, 8)))
    source = source_of(rotary, q, cos, sin)
    assert "fd.ops.cat([t7, t9_f32], dim=3)" in source, source
    assert "DataType.BFloat16)" not in source.replace("t19 = fd.ops.cast(t18, dtype=DataType.BFloat16)", ""), source
    jfn = compiler.jit(rotary, executors=["nvfuser"], fusion={"runner": "torch"})
    torch.testing.assert_close(jfn(q, cos, sin), rotary(q, cos, sin))
    moved = source_of(lambda a, b: torch.cat((a[:, :2], b), dim=1).exp(), q, q)  # no piece in fp32: cat in bf16
    assert "fd.ops.cat([t0, b], dim=1)" in moved, moved


def test_slices_of_a_normalized_value_are_not_behind_a_segment_set():
    # nvfuser_direct 0.2.36 computed wrong rows of Qwen3's fusion (q/k RMSNorm + rotary, H200)
    # with a segment_set before the slices of the normalized q and k; without one it is right
    q, k = torch.randn(2, 8, 4, 8, requires_grad=True), torch.randn(2, 8, 2, 8, requires_grad=True)
    inv_freq, wq, wk = torch.rand(4), torch.randn(8, requires_grad=True), torch.randn(8, requires_grad=True)
    jfn = compiler.jit(qk_norm_rotary, executors=["nvfuser"], fusion={"runner": "torch"})
    jfn(q, k, inv_freq, wq, wk)
    (fusion,) = region_fusions(compiler.last_traces(jfn)[-1])
    source = fusion_source(fusion.region, fusion.descriptors())[0]
    assert source.count("fd.ops.slice(") == 4 and "segment_set" not in source, source
