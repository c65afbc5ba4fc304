"""A frame dynamo gives up on whole (it runs that frame's code eagerly, as LongT5 without an attention
mask) is a counted fallback of the "fusebench" backend: kind 'frame', naming the frame and the line
where dynamo stopped, after a `torch._dynamo.reset()` too; another backend's are not ours, and a frame
that compiles records none."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

import compiler
from compiler.runtime import dynamo


class _MaskOnlyInEager(nn.Module):
    """Builds its mask only outside compilation (as transformers' LongT5 does without an attention
    mask): traced by dynamo, it indexes None, so dynamo runs the frame eagerly."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mask = None if torch.compiler.is_compiling() else torch.ones(1, 4)
        return self.linear(x) * mask[0]  # dynamo stops here


class _Plain(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x).relu()


def _run(model: nn.Module, backend: str, watch: bool) -> tuple[torch.Tensor, list]:
    torch._dynamo.reset()
    if watch:
        dynamo.watch_skipped_frames()
    before = compiler.examine.fallbacks_recorded()
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        output = torch.compile(model, backend=backend)(x)
    torch.testing.assert_close(output, model(x))
    return output, [f for f in compiler.examine.fallbacks(since=before) if f.kind == "frame"]


def test_a_skipped_frame_is_a_counted_fallback_naming_frame_and_line() -> None:
    _, frames = _run(_MaskOnlyInEager(), "fusebench", watch=True)
    assert len(frames) == 1, frames
    (frame,) = frames
    assert frame.what == "the whole frame forward"
    assert frame.where.startswith(f"{__file__}:") and frame.where.endswith(
        "return self.linear(x) * mask[0]  # dynamo stops here"
    )
    assert frame.reason.startswith("Unsupported: "), frame.reason


def test_without_watching_again_after_a_reset_the_first_skips_are_not_seen() -> None:
    """Why the harness watches again after its reset: dynamo's reset drops the callback."""
    _, frames = _run(_MaskOnlyInEager(), "fusebench", watch=False)
    assert frames == []


@pytest.mark.parametrize(("model", "backend"), [(_MaskOnlyInEager, "eager"), (_Plain, "fusebench")])
def test_other_backends_skips_and_compiled_frames_record_none(model: type[nn.Module], backend: str) -> None:
    _, frames = _run(model(), backend, watch=True)
    assert frames == []


def test_a_frame_compiled_while_an_exception_is_handled_records_none() -> None:
    """Compiled inside an `except` block, the frame's end sees that exception: not a failure of its."""
    torch._dynamo.reset()
    dynamo.watch_skipped_frames()
    model = _Plain()
    compiled = torch.compile(model, backend="fusebench")
    before = compiler.examine.fallbacks_recorded()
    x = torch.randn(3, 4)
    try:
        raise KeyError("the caller's own")
    except KeyError:
        torch.testing.assert_close(compiled(x), model(x))
    assert [f for f in compiler.examine.fallbacks(since=before) if f.kind == "frame"] == []
