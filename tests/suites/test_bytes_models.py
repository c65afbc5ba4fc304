"""Bytes models, computed by hand for small parameters."""

from __future__ import annotations

import math

import torch

from fusebench.cases import dtype_named
from suites import (
    adam_step,
    dynamic_lengths,
    dynamic_split,
    gelu_backward,
    host_overhead,
    kv_cache_sdpa,
    training_steps,
)


def case(module, name: str):
    return next(c for c in module.CASES if c.name == name)


def test_gelu_bias_backward_reads_three_tensors_and_writes_two_gradients() -> None:
    bytes_moved = case(gelu_backward, "gelu_bias_backward").bytes_moved
    # [2, 3, 4]: 24 elements; 3 inputs + grad_input of 24 elements + grad_bias of 4, float32
    assert bytes_moved({"shape": (2, 3, 4), "dtype": "float32"}) == (3 * 24 + 24 + 4) * 4 == 400
    assert bytes_moved({"shape": (2, 3, 4), "dtype": "bfloat16"}) == 200
    # PEERS.md: 3x[16,512,4096] f32 in, 2 out; floor 0.127 ms at 4.23 TB/s
    full = bytes_moved({"shape": (16, 512, 4096), "dtype": "float32"})
    assert round(full / 4.23e12 * 1e3, 3) == 0.127


def test_gelu_autograd_moves_five_tensors() -> None:
    bytes_moved = case(gelu_backward, "gelu_autograd").bytes_moved
    assert bytes_moved({"shape": (2, 4), "dtype": "float32"}) == 5 * 8 * 4 == 160


def test_adam_reads_four_and_writes_three_values_per_element() -> None:
    bytes_moved = case(adam_step, "adam_step").bytes_moved
    assert bytes_moved({"parameters": "4x256x256", "dtype": "float32"}) == 7 * 4 * 65536 * 4 == 7_340_032
    assert bytes_moved({"parameters": "32x1024x1024", "dtype": "float32"}) == 939_524_096  # PEERS floor 0.222 ms
    # gpt-tiny (vocab 512, block 64, 2 layers of width 64):
    # wte 32768 + wpe 4096 + 2 x 49984 per layer + final LayerNorm 128 = 136960 elements
    assert bytes_moved({"parameters": "gpt-tiny", "dtype": "float32"}) == 7 * 136_960 * 4


def test_gpt2_small_has_124m_parameters_in_148_tensors() -> None:
    shapes = adam_step.PARAMETER_SETS["gpt2-small"]
    elements = sum(math.prod(shape) for shape in shapes)
    assert (len(shapes), elements) == (148, 124_475_904)  # nanoGPT: 123.69M without the position embedding


def test_kv_cache_reads_the_caches_once_and_writes_the_new_rows() -> None:
    bytes_moved = case(kv_cache_sdpa, "kv_cache_sdpa").bytes_moved
    # B1 H2 S8 D4, 1 new token, bf16: caches 2 x 7 rows read, k/v/q 3 rows read, 2 rows written,
    # 1 output row written: 20 rows of B*H*D = 8 elements, 2 bytes each, plus 8 bytes of positions
    assert bytes_moved({"shape": (1, 2, 8, 4, 1), "dtype": "bfloat16"}) == 20 * 8 * 2 + 8 == 328
    decode = bytes_moved({"shape": (4, 32, 2048, 128, 1), "dtype": "bfloat16"})
    assert round(decode / 4.23e12 * 1e3, 3) == 0.032  # PEERS floor


def test_dynamic_split_and_host_overhead() -> None:
    split = case(dynamic_split, "dynamic_split").bytes_moved
    assert split({"shape": (2, 4, 32), "dtype": "float32", "cache": "constant"}) == 20 * 2 * 256 * 4
    assert case(host_overhead, "one_op").bytes_moved({"numel": 4}) == 32


def test_dynamic_lengths_reads_x_and_the_weights_and_writes_x_per_call() -> None:
    lengths = case(dynamic_lengths, "dynamic_lengths").bytes_moved
    # lengths 2..21 (sum 230), batch 1, 2 channels, hidden 3: x read and written, 2*3*2 + 3 + 2 weights
    assert lengths({"shape": (1, 2, 3), "step": 1, "dtype": "float32"}) == (2 * 230 * 2 + 20 * 17) * 4


def test_llm_norms_read_their_inputs_and_write_their_outputs_once() -> None:
    from suites import llm_norms

    bf16 = {"dtype": "bfloat16"}
    assert case(llm_norms, "softmax").bytes_moved({"shape": (2, 8), **bf16}) == 2 * 16 * 2
    assert case(llm_norms, "cross_entropy").bytes_moved({"shape": (2, 8), **bf16}) == 16 * 2 + 2 * 8
    assert case(llm_norms, "rms_norm").bytes_moved({"shape": (2, 8), **bf16}) == (2 * 16 + 8) * 2
    assert case(llm_norms, "layer_norm").bytes_moved({"shape": (2, 8), **bf16}) == (2 * 16 + 2 * 8) * 2
    assert case(llm_norms, "swiglu").bytes_moved({"shape": (2, 8), **bf16}) == 3 * 16 * 2
    # q read and written (1 x 2 x 3 x 4 = 24 elements), cos and sin of [3, 4]
    assert case(llm_norms, "rotary").bytes_moved({"shape": (1, 2, 3, 4), **bf16}) == (2 * 24 + 2 * 12) * 2
    # LLaMA-7B logits: 4096 x 32000 bf16 read and written, 524 MB
    assert case(llm_norms, "softmax").bytes_moved({"shape": (4096, 32000), **bf16}) == 524_288_000


def test_gelu_bias_autograd_counts_the_forward_and_the_backward() -> None:
    bytes_moved = case(gelu_backward, "gelu_bias_autograd").bytes_moved
    # [2, 3, 4]: forward reads x (24) and bias (4), writes y (24); backward reads x, bias and the
    # output gradient (52), writes the input (24) and bias (4) gradients
    assert bytes_moved({"shape": (2, 3, 4), "dtype": "float32"}) == (52 + 80) * 4


def test_training_steps_count_the_forward_and_the_backward() -> None:
    bytes_of = {c.name: c.bytes_moved for c in training_steps.CASES}
    # mlp: tokens 2, width 3, hidden 12: inputs x 6 + w1 36 + b1 12 + w2 36 + b2 3 = 93, output 6;
    # forward 93 + 6, backward 6 + 93 + 93 (a gradient per input), bfloat16
    assert bytes_of["mlp_block"]({"shape": (2, 3), "dtype": "bfloat16"}) == 2 * (99 + 192)
    # rmsnorm [2, 3]: inputs 6 + 3, output 6; forward 15, backward 6 + 9 + 9
    assert bytes_of["rmsnorm"]({"shape": (2, 3), "dtype": "float32"}) == 4 * (15 + 24)
    assert bytes_of["layernorm"]({"shape": (2, 3), "dtype": "float32"}) == 4 * (18 + 30)
    # cross-entropy [2, 5] bf16 logits: forward logits 20 B + targets 16 B + loss 2 B, backward
    # logits and targets read again and the logits gradient written
    assert bytes_of["cross_entropy"]({"shape": (2, 5), "dtype": "bfloat16"}) == 38 + (20 + 16 + 20)
    # 8192 x 32000 bf16: about 1.57 GB, 0.37 ms at 4.23 TB/s
    assert round(bytes_of["cross_entropy"]({"shape": (8192, 32000), "dtype": "bfloat16"}) / 1e9, 2) == 1.57
    # block, width 128 (one head), batch 1 x 2 tokens: x 256 + norms 4 x 128 + qkv 3 x 128^2 +
    # projection 128^2 + fc 4 x 128^2 + 512 + out 4 x 128^2 + 128 = 198_016 inputs, output 256
    block = bytes_of["transformer_block"]({"shape": (1, 2, 128), "dtype": "bfloat16"})
    assert block == 2 * (3 * 198_016 + 2 * 256)


def test_every_training_step_reads_at_least_its_inputs_twice_and_writes_its_gradients() -> None:
    from fusebench.measure.measure import Settings, prepare_case
    from fusebench.measure.snapshot import tensor_leaves

    cpu = Settings(device=torch.device("cpu"))
    for module in (training_steps, gelu_backward):
        for step in (c for c in module.CASES if c.forward_call is not None):
            for params in step.grid(quick=True):
                prepared = prepare_case(module.__name__, step, params, cpu)
                assert prepared.error is None, prepared.error
                inputs = sum(t.numel() * t.element_size() for t in tensor_leaves(prepared.args[:-1]))
                gradients = sum(t.numel() * t.element_size() for t in tensor_leaves(prepared.expected_output[1]))
                assert gradients > 0
                # the reference ran in float64: gradients are counted at the inputs' element size
                assert prepared.bytes_moved >= 2 * inputs + gradients * params_itemsize(params) // 8, step.name


def params_itemsize(params) -> int:
    return dtype_named(params["dtype"]).itemsize
