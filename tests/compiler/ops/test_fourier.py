"""torch.fft through the compiler (compiler/ops/fourier.py): values and gradients as eager's, for
real and complex inputs, every norm, lengths cut and padded, size-1 and non-contiguous inputs."""

from __future__ import annotations

import pytest
import torch

import compiler

CASES = {
    "fftn_real_part": lambda x: torch.fft.fftn(x, dim=(1, 2)).real,  # FNet's token mixing
    "fftn_all_dims": lambda x: torch.view_as_real(torch.fft.fftn(x)),
    "fft": lambda x: torch.view_as_real(torch.fft.fft(x)),
    "fft_padded": lambda x: torch.view_as_real(torch.fft.fft(x, n=8, dim=1)),
    "fft_cut_ortho": lambda x: torch.view_as_real(torch.fft.fft(x, n=3, norm="ortho")),
    "ifft_of_fft": lambda x: torch.view_as_real(torch.fft.ifft(torch.fft.fft(x))),
    "ifft2_forward_norm": lambda x: torch.view_as_real(torch.fft.ifft2(x, norm="forward")),
    "fft2_sizes": lambda x: torch.view_as_real(torch.fft.fft2(x, s=(4, 7))),
    "ifftn_backward_norm": lambda x: torch.view_as_real(torch.fft.ifftn(x, dim=0, norm="backward")),
    "rfft": lambda x: torch.view_as_real(torch.fft.rfft(x)),
    "rfft_padded_dim1": lambda x: torch.view_as_real(torch.fft.rfft(x, n=7, dim=1)),
    "irfft_of_rfft": lambda x: torch.fft.irfft(torch.fft.rfft(x), n=x.shape[-1]),
    "irfft_default_length": lambda x: torch.fft.irfft(torch.fft.fft(x)),
    "irfft_odd_length": lambda x: torch.fft.irfft(torch.fft.fft(x, dim=1), n=9, dim=1),
    "fft_of_complex": lambda x: torch.view_as_real(torch.fft.fft(torch.complex(x, x * 2), dim=0)),
    "fft_conv": lambda x: torch.fft.irfft(torch.fft.rfft(x, n=10) * torch.fft.rfft(x.flip(-1), n=10), n=10),
}
LAYOUTS = {
    "contiguous": lambda g, dtype: torch.randn(3, 6, 5, generator=g, dtype=dtype),
    "transposed": lambda g, dtype: torch.randn(3, 5, 6, generator=g, dtype=dtype).transpose(1, 2),
    "size_one": lambda g, dtype: torch.randn(1, 6, 5, generator=g, dtype=dtype),
}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_values_and_gradients_match_eager(case: str, layout: str, dtype: torch.dtype) -> None:
    fn = CASES[case]
    for seed in (0, 1):
        x = LAYOUTS[layout](torch.Generator().manual_seed(seed), dtype)
        leaves = [x.clone().requires_grad_() for _ in range(2)]
        want, got = fn(leaves[0]), compiler.jit(fn)(leaves[1])
        weights = torch.randn(want.shape, generator=torch.Generator().manual_seed(seed + 10), dtype=dtype)
        for out in (want, got):
            (out * weights).sum().backward()
        tolerance = {"rtol": 1e-5, "atol": 1e-5} if dtype is torch.float32 else {}
        torch.testing.assert_close(got, want, **tolerance)
        torch.testing.assert_close(leaves[1].grad, leaves[0].grad, **tolerance)


def test_a_bad_norm_is_named() -> None:
    with pytest.raises(ValueError, match="norm must be one of"):
        compiler.jit(lambda x: torch.fft.fft(x, norm="both").real)(torch.randn(4))
