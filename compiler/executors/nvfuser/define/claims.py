"""Which prims nvFuser runs inside a fusion (`unsupported`), and why the others go elsewhere.

`TRANSLATIONS` (nvfuser_translate.py) lists what can be translated; `LEFT_TO_TORCH` lists every
other prim with the reason the fusion pass reports; `POLICY_TORCH` lists translated prims sent
to another executor unless asked (GEMMs go to cuBLAS).
"""

from __future__ import annotations

import torch

from compiler.core.executor import Reason
from compiler.core.ir import BoundSymbol, TensorProxy
from compiler.executors.nvfuser.define.translations import NV_DTYPES, TRANSLATIONS
from compiler.prims import Prim

# Prims deliberately not translated, and why (the fusion pass reports these words).
LEFT_TO_TORCH: dict[Prim, str] = {
    Prim.ARGMAX: "not translated (nvfuser_direct 0.2.36 exposes no argmax op we rely on); runs in torch",
    Prim.CUMSUM: "a scan: not translated (nvFuser schedules no scan we rely on); runs in torch",
    Prim.CUMPROD: "a scan: not translated (nvFuser schedules no scan we rely on); runs in torch",
    Prim.ARGSORT: "a sort: nvFuser has none; runs in torch (the values' gather can fuse)",
    Prim.TOPK: "a selection: nvFuser has none; runs in torch (the values' gather can fuse)",
    Prim.INDEX_COPY: "index_copy is a scatter into a copy of the whole tensor; torch does it in one kernel",
    Prim.EMPTY: "uninitialised memory needs no kernel; torch allocates it",
    Prim.STOP_GRADIENT: "a returned detach() is a view torch makes without a kernel (others are gone before fusion)",
    Prim.UPDATED_WITHOUT_GRAD: "a returned one is its value, no kernel (others are gone before fusion)",
    Prim.OVERWRITTEN: "a returned one is its value, no kernel (others are gone before fusion)",
    Prim.SDPA: "attention runs in the sdpa executor (torch's fused attention kernels)",
    Prim.SDPA_FORWARD: "attention runs in the sdpa executor (torch's fused attention kernels)",
    Prim.SDPA_BACKWARD: "attention's backward runs in the sdpa executor (torch's fused attention kernels)",
    Prim.CONVOLUTION: "nvFuser has no convolution; torch runs it (cuDNN on CUDA)",
    Prim.CONVOLUTION_BACKWARD: "nvFuser has no convolution; torch runs its backward (cuDNN on CUDA)",
    Prim.CONVOLUTION_TRANSPOSE: "nvFuser has no convolution; torch runs the transposed one (cuDNN on CUDA)",
    Prim.GROUPED_MM: "a grouped GEMM: nvFuser has none we rely on; torch runs it (CUTLASS on CUDA)",
    Prim.DEVICE_PUT: "a copy between devices: a fusion runs on one device; torch copies it",
    Prim.UNPACK_SEQUENCE: "prologue-only prim",
    Prim.UNPACK_DICT: "prologue-only prim",
    Prim.SIZE: "prologue-only prim",
    Prim.CHECK_TENSOR: "prologue-only prim",
    Prim.CHECK_TYPE: "prologue-only prim",
    Prim.CHECK_VALUE: "prologue-only prim",
    Prim.CHECK_STRIDES: "prologue-only prim",
    Prim.CHECK_ALIASING: "prologue-only prim",
    Prim.CHECK_REQUIRES_GRAD: "prologue-only prim",
    Prim.CHECK_AUTOCAST: "prologue-only prim",
    Prim.COPY_: "in-place writes are removed by functionalization before fusion",
    Prim.SLICE_UPDATE: "writing a slice into a copy of the whole tensor; runs in torch",
    Prim.INDEX_ADD: "an accumulating scatter into a copy of the whole tensor; runs in torch",
    Prim.SCATTER: "a scatter into a copy of the whole tensor (repeated positions: torch's rule); runs in torch",
    Prim.SCATTER_REDUCE: "an accumulating scatter into a copy of the whole tensor; runs in torch",
    Prim.DROPOUT_NOISE: "random numbers come from torch's generator (as eager draws them); runs in torch",
    Prim.RANDOM_VALUES: "random numbers come from torch's generator (as eager draws them); runs in torch",
}
# Translated, but sent to torch unless FusionOptions(matmul=True): cuBLAS is the faster GEMM.
POLICY_TORCH: dict[Prim, str] = {
    Prim.MATMUL: "matmul goes to torch (cuBLAS) unless FusionOptions(matmul=True)",
    Prim.LINEAR: "linear goes to torch (cuBLAS) unless FusionOptions(matmul=True)",
}


def unsupported(bsym: BoundSymbol, *, matmul: bool = False) -> tuple[Reason, str] | None:
    """Why nvFuser cannot (or should not) run `bsym` inside a fusion, or None when it can."""
    prim = bsym.sym
    if prim in LEFT_TO_TORCH:
        return Reason.LEFT_TO_TORCH, LEFT_TO_TORCH[prim]
    if prim not in TRANSLATIONS:
        return Reason.NO_TRANSLATION, f"prims.{prim.value}"
    if prim in POLICY_TORCH and not matmul:
        return Reason.LEFT_TO_TORCH, POLICY_TORCH[prim]
    for p in (*bsym.inputs, *bsym.outputs):
        if isinstance(p, TensorProxy) and p.dtype not in NV_DTYPES:
            return Reason.DTYPE, f"{p.name} is {p.dtype}"
    if prim is Prim.SLICE and any(s != 1 for s in bsym.args[3]):
        return Reason.NO_TRANSLATION, "nvFuser slices only with step 1"
    if prim is Prim.DIV and not bsym.output.dtype.is_floating_point:
        return Reason.DTYPE, "prims.div is translated for floating-point tensors only"
    if prim is Prim.FLOOR_DIVIDE and (bsym.output.dtype.is_floating_point or bsym.output.dtype is torch.bool):
        return Reason.LEFT_TO_TORCH, "floor division of floating-point values runs in torch (integers fuse)"
    if prim in (Prim.SUM, Prim.PROD) and bsym.args[0].dtype is torch.bool:
        return Reason.DTYPE, f"{prim.value} of a bool tensor"
    return None
