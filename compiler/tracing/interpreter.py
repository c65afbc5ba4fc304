"""The reference interpreter: evaluates a trace bound symbol by bound symbol over an env dict.

Tests use it to check that passes preserve meaning: evaluating before == evaluating after.
"""

from __future__ import annotations

from typing import Any

import torch

from compiler import prims
from compiler.core.ir import BoundSymbol, Proxy, Trace, map_proxies
from compiler.prims import Prim

_CONTIGUOUS = "torch.Tensor.contiguous"


def _run(bsym: BoundSymbol, env: dict[str, Any]) -> None:
    args = map_proxies(bsym.args, lambda p: env[p.name])
    kwargs = map_proxies(bsym.kwargs, lambda p: env[p.name])
    if isinstance(bsym.sym, Prim):
        output = prims.evaluate(bsym.sym, args)
    elif bsym.sym.name == _CONTIGUOUS and bsym.subsymbols:
        # NOTE: its copy (`x * 1`) is row-major by the trace's layout model, as eager's; torch
        # would keep x's layout, and a later reshape of it would copy where the trace views
        output = torch.empty_like(args[0], memory_format=torch.contiguous_format).copy_(args[0])
    elif bsym.sym.impl is not None:
        output = bsym.sym.impl(*args, **kwargs)
    else:
        for sub in bsym.subsymbols:
            _run(sub, env)
        return
    if isinstance(bsym.output, Proxy):
        env[bsym.output.name] = output
    elif bsym.output is not None:
        for p, value in zip(bsym.output, output):
            if isinstance(p, Proxy):
                env[p.name] = value


def eval_trace(trace: Trace, *args: Any) -> Any:
    """The value of `trace` on concrete arguments (one per trace input)."""
    env = {p.name: a for p, a in zip(trace.inputs, args)}
    for bsym in trace.bsyms:
        _run(bsym, env)
    return map_proxies(trace.output, lambda p: env[p.name])
