"""Size-1 dims in fusion definitions (compiler/executors/nvfuser/define/broadcast.py): which inputs are
declared with iteration dims, squeezes before broadcasting a size-1 iteration dim, and write-backs
of broadcast values materialised; each program also runs end to end on the CPU double of nvFuser
and matches eager."""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F

import compiler
from compiler.executors.nvfuser.define.broadcast import iteration_inputs
from compiler.executors.nvfuser.define.translations import fusion_source
from compiler.executors.nvfuser.executor import region_fusions
from tests.support.nvfuser_cases import alibi_scores_softmax, multi_query_heads
from tests.support.nvfuser_helpers import fake_nvfuser  # noqa: F401  (fixture)

pytestmark = pytest.mark.usefixtures("fake_nvfuser")


def _fusions(fn, *args):
    jfn = compiler.jit(fn, executors=["nvfuser", "torch"], fallback=False)
    eager_args, jit_args = [a.clone() for a in args], [a.clone() for a in args]
    got, want = jfn(*jit_args), fn(*eager_args)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(jit_args, eager_args)
    fusions = region_fusions(compiler.last_traces(jfn)[-1])
    return [(f.region, fusion_source(f.region, f.descriptors())[0]) for f in fusions]


def embeddings_then_norm(wte, wpe, tokens, position):
    return F.layer_norm(F.embedding(tokens, wte) + F.embedding(position, wpe), (wte.shape[1],))


def test_indices_are_declared_with_iteration_dims():
    wte, wpe = torch.randn(50, 16), torch.randn(20, 16)
    for batch in (1, 3):
        tokens, position = torch.randint(0, 50, (batch, 1)), torch.tensor([7])
        [(region, source)] = _fusions(embeddings_then_norm, wte, wpe, tokens, position)
        # the tokens arrive flattened: torch makes that reshape of an input (peel_regions.peel_input_views)
        indices = {p.name for p in region.inputs} - {"wte", "wpe"}
        assert "position" in indices and "tokens" not in indices and len(indices) == 2
        assert iteration_inputs(region) == indices
        assert "position = fd.define_tensor(shape=[-1], contiguity=[True]" in source
        assert "wte = fd.define_tensor(shape=[-1, -1]" in source


def sum_written_elsewhere(a0, a1):
    v0 = torch.sum(a0, 0)
    a1.copy_(v0)
    return v0, torch.neg(a0)


def test_a_broadcast_value_written_back_is_materialised():
    [(region, source)] = _fusions(sum_written_elsewhere, torch.randn(2), torch.randn(2))
    assert region.written == {"a1"}
    assert "fd.ops.full(shape=[fd.ops.size(a1, dim=0)]" in source
    assert "alias_input=a1" in source


def test_a_written_value_without_broadcast_dims_is_not():
    def scale(a):
        a.mul_(2)
        return torch.neg(a)

    [(_, source)] = _fusions(scale, torch.randn(3, 4))
    assert "fd.ops.full" not in source


def add_size_one_slice(a0):
    return torch.neg(a0), a0 + a0[..., 1:2]


def test_a_size_one_slice_is_squeezed_before_it_is_broadcast():
    [(_, source)] = _fusions(add_size_one_slice, torch.randn(3, 5))
    assert "fd.ops.squeeze(" in source and "fd.ops.segment_set(" in source


def test_a_size_one_slice_read_otherwise_is_squeezed_segmented_and_broadcast_back():
    for seed, shape in enumerate([(2, 5, 6, 4), (1, 3, 4, 8)]):
        gen = torch.Generator().manual_seed(seed)
        qkv = torch.randn(shape, generator=gen)
        cos, sin = torch.randn(2, 1, 1, shape[1], shape[3], generator=gen)
        [(_, source)] = _fusions(multi_query_heads, qkv, cos, sin)
        lines = source.splitlines()
        squeezes = [k for k, line in enumerate(lines) if "fd.ops.squeeze(" in line]
        assert len(squeezes) == 2, source  # the key's and the value's head
        for k in squeezes:
            assert "fd.ops.slice(" in lines[k - 1], source
            assert "fd.ops.broadcast_in_dim(fd.ops.segment_set(" in lines[k + 1], source
        # their unit dims are broadcast dims: expanded over the heads with no sum behind the segment
        assert "fd.ops.sum(" not in source, source


def test_broadcast_size_one_inputs_are_broadcast_without_a_squeeze():
    def bias(x, b):
        return torch.relu(x + b)

    [(region, source)] = _fusions(bias, torch.randn(4, 6), torch.randn(1, 6))
    assert iteration_inputs(region) == set()
    assert "fd.ops.squeeze" not in source and "shape=[1, -1]" in source


def negative_log_likelihood(logits, targets):
    return -torch.gather(logits.reshape(-1, logits.shape[-1]).log_softmax(-1), 1, targets).squeeze(1).mean()


def _gathered(source: str) -> str:
    ops = ("fd.ops.gather(", "fd.ops.take_along_axis(")
    return next(line for line in source.splitlines() if any(op in line for op in ops)).split(" = ")[0].strip()


def test_a_gathers_size_one_dim_along_an_index_input_is_summed_away_not_squeezed():
    logits, targets = torch.randn(2, 4, 9), torch.randint(0, 9, (8, 1))
    [(region, source)] = _fusions(negative_log_likelihood, logits, targets)
    assert iteration_inputs(region) == {"targets"}
    assert f"fd.ops.sum({_gathered(source)}, dims=[1])" in source and "fd.ops.squeeze(" not in source, source


@pytest.mark.parametrize(("dtype", "low"), [(torch.bfloat16, "BFloat16"), (torch.float16, "Half")])
def test_a_low_precision_size_one_dim_is_summed_in_f32_and_cast_back(dtype, low):
    # nvFuser cannot add bf16 values (its reduction fails to compile); the fake refuses the same.
    def pick(x, targets):
        return torch.gather(x, 1, targets).squeeze(1) * 2

    x, targets = torch.randn(8, 9, dtype=dtype), torch.randint(0, 9, (8, 1))
    [(_, source)] = _fusions(pick, x, targets)
    summed = f"fd.ops.sum(fd.ops.cast({_gathered(source)}, dtype=DataType.Float), dims=[1])"
    assert f"fd.ops.cast({summed}, dtype=DataType.{low})" in source, source


def test_a_bool_size_one_dim_is_summed_in_int32_and_cast_back():
    def pick(mask, targets, x):
        return torch.where(torch.gather(mask, 1, targets).squeeze(1), x, 0.0)

    mask, targets, x = torch.rand(8, 9) > 0.5, torch.randint(0, 9, (8, 1)), torch.randn(8)
    [(_, source)] = _fusions(pick, mask, targets, x)
    summed = f"fd.ops.sum(fd.ops.cast({_gathered(source)}, dtype=DataType.Int32), dims=[1])"
    assert f"fd.ops.cast({summed}, dtype=DataType.Bool)" in source, source


def test_take_along_axis_for_an_input_and_an_index_of_its_sizes_else_gather():
    # take_along_axis fuses with the ops around it; gather is nvFuser's own ATen segment. On an H100
    # take_along_axis failed for an index smaller off `dim` and for a value computed in the fusion.
    def pick(x, index):
        return torch.gather(x, 1, index) * 2

    def pick_computed(x, index):
        return torch.gather(x.exp(), 1, index)

    x = torch.randn(6, 9)
    [(_, exact)] = _fusions(pick, x, torch.randint(0, 9, (6, 4)))
    [(_, smaller)] = _fusions(pick, x, torch.randint(0, 9, (5, 4)))
    [(_, computed)] = _fusions(pick_computed, x, torch.randint(0, 9, (6, 4)))
    assert "fd.ops.take_along_axis(x, " in exact and "fd.ops.gather(" not in exact, exact
    for source in (smaller, computed):
        assert "fd.ops.gather(" in source and "fd.ops.take_along_axis(" not in source, source


def sums_of_expanded_rows(x):
    return (x * 2).sum(-1), x.permute(1, 0).sum(-1), x.amax(0, keepdim=True), x[:, 1:3].flip(-1).sum(-1)


def test_a_reduction_of_an_expanded_input_is_materialised_first():
    # nvFuser holds a stride-0 dim as a broadcast dim; reducing next to it returned shape [1]
    expanded = torch.randn(1, 4).expand(3, 4)
    jfn = compiler.jit(sums_of_expanded_rows, executors=["nvfuser", "torch"], fallback=False)
    torch.testing.assert_close(jfn(expanded), sums_of_expanded_rows(expanded))
    [fusion] = region_fusions(compiler.last_traces(jfn)[-1])
    source = fusion_source(fusion.region, fusion.descriptors())[0]
    assert "x = fd.define_tensor(shape=[-1, -1], contiguity=[None, True]" in source
    assert source.count("fd.ops.full(") == 4, source
    dense = compiler.jit(sums_of_expanded_rows, executors=["nvfuser", "torch"], fallback=False)
    dense(torch.randn(3, 4))
    [fusion] = region_fusions(compiler.last_traces(dense)[-1])
    assert "fd.ops.full(" not in fusion_source(fusion.region, fusion.descriptors())[0]


def repeat_kv(k):
    b, h, n, d = k.shape
    return k[:, :, None].expand(b, h, 2, n, d).reshape(b, 2 * h, n, d) * 2 + 1


def test_a_reshape_merging_an_expanded_dim_is_materialised_first():
    [(_, source)] = _fusions(repeat_kv, torch.randn(2, 3, 5, 4))
    assert re.search(r"fd\.ops\.reshape\(t\d+_full,", source), source
    [(_, source)] = _fusions(lambda x: (x * 2).reshape(6, 4) * 3, torch.randn(2, 3, 4))
    assert "fd.ops.full(" not in source


def repeated_then_attended(q, k):
    # transformers' repeat_kv: the heads repeated by expand + reshape, a copy in eager
    b, h, n, d = k.shape
    repeated = (k * 2 + 1)[:, :, None].expand(b, h, 2, n, d).reshape(b, 2 * h, n, d)
    return torch.matmul(q, repeated.transpose(-1, -2))


def repeated_contiguous(q, k):
    b, h, n, d = k.shape
    repeated = (k * 2 + 1)[:, :, None].expand(b, h, 2, n, d).contiguous().reshape(b, 2 * h, n, d)
    return torch.matmul(q, repeated.transpose(-1, -2))


def test_repeated_heads_are_written_dense_by_the_fusion():
    # nvFuser holds an expanded value as a broadcast dim and returns it with stride 0, where torch
    # would then copy it to reshape it: the reshape stays in the fusion (which writes it dense), and
    # a computed value with an expanded dim (a `.contiguous()` copy, dense in eager) is returned dense
    q, k = torch.randn(2, 6, 5, 4), torch.randn(2, 3, 5, 4)
    [(region, source)] = _fusions(repeated_then_attended, q, k)
    assert [len(p.shape) for p in region.outputs] == [4] and "fd.ops.reshape(" in source, source
    [(region, source)] = _fusions(repeated_contiguous, q, k)
    [returned] = region.outputs
    assert "fd.ops.reshape(" in source or re.search(rf"{returned.name}\w* = fd\.ops\.add\(", source), source
    [(_, source)] = _fusions(lambda x, y: (x * 2)[:, None].expand(3, 2, 4) + y, torch.randn(3, 4), torch.randn(3, 2, 4))
    assert "fd.ops.full(" not in source  # a sum with a dense tensor: nvFuser writes it dense


def test_a_value_split_by_a_reshape_after_merging_a_broadcast_gets_a_segment_boundary():
    slopes, scores = torch.rand(4) * 0.1, torch.randn(12, 1, 9)
    [(_, source)] = _fusions(alibi_scores_softmax, slopes, scores)
    merged = re.search(r"(\w+) = fd\.ops\.reshape\(\w+_full, new_shape=\[12, 1, 9\]\)", source)
    assert merged, source
    assert re.search(r"= fd\.ops\.reshape\(\w+_seg, new_shape=\[3, 4, 1, 9\]\)", source), source
    # scores merged by the caller, none merged in the fusion: no boundary
    [(_, source)] = _fusions(lambda s: torch.softmax((s * 2).reshape(3, 4, 1, 9), -1), scores)
    assert "segment_set" not in source, source


def test_a_reduction_output_loses_its_size_one_dims_through_a_copy():
    # nvFuser counts a reduction output's reduced dims among the positions it squeezes (DeBERTa's
    # backward failed so); a set in between has none. A reshape that only adds dims needs no copy.
    def reshaped(g):
        return g.reshape(8, 12, 1, 16, 1, 64).sum(0).reshape(1, 12, 16, 64) * 2

    def squeezed(g):
        return g.reshape(3, 4, 1, 5).sum(0).squeeze(1).exp()

    def kept(g):
        return g.sum(-1).reshape(12, 5, 1) * g

    # bf16: the sum is converted back to bf16 before the reshape, which reads the float32 sum
    cases = [(reshaped, (96, 16, 64), torch.float32), (reshaped, (96, 16, 64), torch.bfloat16)]
    cases += [(squeezed, (12, 5), torch.bfloat16), (kept, (12, 5, 7), torch.float32)]
    for fn, shape, dtype in cases:
        [(_, source)] = _fusions(fn, torch.randn(*shape).to(dtype))
        assert (re.search(r"\w+_set = fd\.ops\.set\(\w+\)", source) is not None) == (fn is not kept), source
