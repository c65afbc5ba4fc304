"""torch's attention backend choice, remembered per layout and settings (executors/attention.py)."""

from __future__ import annotations

import contextlib
import types

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from compiler.executors import attention


@pytest.fixture
def asked(monkeypatch):
    """Counts the calls that reach `aten._fused_sdp_choice`, starting from an empty memory."""
    calls: list[int] = []

    def choice(*args, **kwargs):
        calls.append(1)
        return torch.ops.aten._fused_sdp_choice(*args, **kwargs)

    monkeypatch.setattr(attention, "_CHOICES", {})
    monkeypatch.setattr(attention, "_BACKENDS", {})
    monkeypatch.setattr(attention, "_ATEN", types.SimpleNamespace(_fused_sdp_choice=choice))
    return calls


def _qkv(dtype=torch.float32, kv_heads=4):
    return torch.randn(2, 4, 16, 8, dtype=dtype), *(torch.randn(2, kv_heads, 16, 8, dtype=dtype) for _ in range(2))


def test_the_same_layout_asks_torch_once(asked):
    q, k, v = _qkv()
    first = attention.torch_choice(q, k, v, None, True, None)
    q2, k2, v2 = _qkv()  # other tensors, same layout
    assert [attention.torch_choice(q2, k2, v2, None, True, None) for _ in range(3)] == [first] * 3
    assert len(asked) == 1


@pytest.mark.parametrize(
    "change",
    ["transposed query", "requires_grad", "dtype", "grouped heads", "not causal", "scale", "mask", "no grad"],
)
def test_anything_torch_decides_on_asks_again(change, asked):
    q, k, v = _qkv()
    attention.torch_choice(q, k, v, None, True, None)
    args, settings = _changed(change, q, k, v)
    with settings:
        attention.torch_choice(*args)
    assert len(asked) == 2


def _changed(change: str, q, k, v) -> tuple[tuple, contextlib.AbstractContextManager]:
    """The arguments `(q, k, v, mask, is_causal, scale)` of a call with one thing torch's choice
    reads changed from `(q, k, v, None, True, None)`, and the settings to make it under."""
    mask, causal, scale = None, True, None
    if change == "transposed query":
        q = q.transpose(1, 2).contiguous().transpose(1, 2)
    elif change == "offset":  # the same strides one row further in its storage (alignment may differ)
        q = torch.randn(q.numel() + 8)[8:].view(q.shape)
    elif change == "requires_grad":
        q = q.detach().requires_grad_()
    elif change == "dtype":
        q, k, v = _qkv(torch.float64)
    elif change == "grouped heads":
        q, k, v = _qkv(kv_heads=2)
    elif change == "size":
        q = torch.randn(2, 4, 15, 8)
    elif change == "not causal":
        causal = False
    elif change == "scale":
        scale = 0.5
    elif change == "mask":
        mask, causal = torch.ones(16, 16, dtype=torch.bool).tril(), False
    settings = sdpa_kernel([SDPBackend.MATH]) if change == "settings" else torch.set_grad_enabled(change != "no grad")
    return (q, k, v, mask, causal, scale), settings


def test_sdpa_kernel_settings_are_part_of_the_key(asked):
    q, k, v = _qkv()
    outside = attention.torch_choice(q, k, v, None, True, None)
    with sdpa_kernel([SDPBackend.MATH]):
        assert attention.torch_choice(q, k, v, None, True, None) == SDPBackend.MATH.value
    assert attention.torch_choice(q, k, v, None, True, None) == outside
    assert outside == torch.ops.aten._fused_sdp_choice(q, k, v, None, 0.0, True)
    assert len(asked) == 2


def test_the_memory_is_bounded(asked, monkeypatch):
    monkeypatch.setattr(attention, "_MAX_CHOICES", 3)
    for length in range(1, 7):
        q = torch.randn(1, 2, length, 8)
        attention.torch_choice(q, q, q, None, False, None)
    assert len(attention._CHOICES) == 3 and len(asked) == 6


def test_the_backend_is_remembered_with_the_choice_and_follows_the_settings(asked):
    q, k, v = _qkv()
    first = attention.attention_backend(q, k, v, None, True, None)
    assert [attention.attention_backend(*_qkv(), None, True, None) for _ in range(3)] == [first] * 3
    with sdpa_kernel([SDPBackend.MATH]):
        assert attention.attention_backend(q, k, v, None, True, None) is None
    assert attention.attention_backend(q, k, v, None, True, None) == first
    assert len(asked) == 2


def test_a_choice_torch_cannot_make_is_remembered_too(monkeypatch):
    """None (torch raised) is an answer: the same layout does not ask again."""
    calls: list[int] = []

    def failing(*args, **kwargs):
        calls.append(1)
        raise RuntimeError("no backend")

    monkeypatch.setattr(attention, "_CHOICES", {})
    monkeypatch.setattr(attention, "_ATEN", types.SimpleNamespace(_fused_sdp_choice=failing))
    q, k, v = _qkv()
    assert [attention.torch_choice(q, k, v, None, True, None) for _ in range(3)] == [None] * 3
    assert len(calls) == 1


def test_the_key_reads_every_argument_of_the_mask():
    """A mask's layout is part of the key like the query's, and no mask is not a mask."""
    q, k, v = _qkv()
    mask = torch.ones(16, 16, dtype=torch.bool)
    keys = {
        attention._choice_key(q, k, v, None, False, None),
        attention._choice_key(q, k, v, mask, False, None),
        attention._choice_key(q, k, v, mask.t(), False, None),
        attention._choice_key(q, k, v, mask.float(), False, None),
    }
    assert len(keys) == 4


def _remembered():
    """A `RememberedAtSite` of an answer that counts its calls and returns their number."""
    calls: list[tuple] = []

    def answer(*args):
        calls.append(args)
        return len(calls)

    return attention.RememberedAtSite(answer), calls


def test_a_call_site_answers_again_only_when_what_torch_reads_changed():
    site, calls = _remembered()
    q, k, v = _qkv()
    assert [site(q, k, v, None, True, None) for _ in range(3)] == [1, 1, 1]
    q2, k2, v2 = _qkv()  # other tensors laid out the same
    assert site(q2, k2, v2, None, True, None) == 1 and len(calls) == 1


@pytest.mark.parametrize(
    "change",
    [
        *("transposed query", "offset", "requires_grad", "dtype", "size", "grouped heads"),
        *("not causal", "scale", "mask", "no grad", "settings"),
    ],
)
def test_a_call_site_asks_again_for_anything_torch_decides_on(change):
    site, calls = _remembered()
    q, k, v = _qkv()
    site(q, k, v, None, True, None)
    args, settings = _changed(change, q, k, v)
    with settings:
        assert site(*args) == 2
    assert calls[-1][0] is args[0]


def test_each_attention_the_sdpa_executor_runs_gets_its_own_memo_of_torchs_choice():
    from compiler.executors.sdpa import SdpaExecutor
    from compiler.prims import Prim

    query = types.SimpleNamespace(device=torch.device("cuda"), dtype=torch.bfloat16)  # what the executor reads
    bsym = types.SimpleNamespace(sym=Prim.SDPA, args=(query,))
    first, second = SdpaExecutor().implementation(bsym), SdpaExecutor().implementation(bsym)
    assert first.func is attention.attention and first.keywords["choice"].answer is attention.torch_choice
    assert first.keywords["choice"] is not second.keywords["choice"]
    backward = types.SimpleNamespace(sym=Prim.SDPA_BACKWARD, args=(None, query))
    impl = SdpaExecutor().implementation(backward)
    assert impl.func is attention.attention_backward
    assert impl.keywords["backend_of"].answer is attention.attention_backend
