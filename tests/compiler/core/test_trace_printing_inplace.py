"""Printed traces of in-place programs run as printed: `exec(str(trace))` in an empty namespace.

The passes replace an update and its write-back by an in-place call (`update_in_place`,
`update_fresh`); such a call is printed under a name of its own, and the trace's header must
import it, or the printed "runnable Python" raises NameError. Each program is checked against
eager on its outputs and on every argument it updates, for every trace the compiler kept.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F

import compiler


def kv_step(q, k_cache, v_cache, idx, k_new, v_new):
    k_cache.index_copy_(2, idx, k_new)
    v_cache.index_copy_(2, idx, v_new)
    return F.scaled_dot_product_attention(q, k_cache, v_cache)


def kv_inputs(gen: torch.Generator) -> tuple:
    def cache() -> torch.Tensor:
        return torch.randn(2, 3, 7, 4, generator=gen)

    def new() -> torch.Tensor:
        return torch.randn(2, 3, 2, 4, generator=gen)

    idx = torch.randperm(7, generator=gen)[:2]
    return torch.randn(2, 3, 1, 4, generator=gen), cache(), cache(), idx, new(), new()


def slice_write(cache, new, pos):
    cache[:, pos : pos + new.shape[1]] = new
    return cache.sum(1)


def scatter_into(buf, index, src):
    buf.scatter_(1, index, src)
    return buf * 2


def index_add_into(buf, index, src):
    buf.index_add_(0, index, src)
    return buf.exp()


def scatter_amax_into(buf, index, src):
    buf.scatter_reduce_(1, index, src, "amax", include_self=True)
    return buf.sum()


def write_into_temporary(x):
    y = x * 2
    y[:, 0] = 0
    return y.sum(1)


def add_into_zeros(index, src):
    z = torch.zeros(6, src.shape[1])
    z.index_add_(0, index, src)
    return z * 3


def copy_into_temporary(x, index, src):
    y = x + 1
    y.index_copy_(0, index, src)
    return y.mean(0)


def scatter_into_temporary(x, index, src):
    y = x.sin()
    y.scatter_(1, index, src)
    return y.sum(0)


def scatter_reduce_into_temporary(x, index, src):
    y = x.cos()
    y.scatter_reduce_(1, index, src, "sum")
    return y.sum(0)


def rows_index(gen: torch.Generator, rows: int, picked: int) -> torch.Tensor:
    return torch.randperm(rows, generator=gen)[:picked]


# program, its inputs from a generator, and the in-place call its final trace must print
PROGRAMS: dict[str, tuple[Callable, Callable[[torch.Generator], tuple], str]] = {
    "kv_cache": (kv_step, kv_inputs, "index_copy_("),
    "slice_assignment": (
        slice_write,
        lambda g: (torch.randn(2, 9, 3, generator=g), torch.randn(2, 3, 3, generator=g), 4),
        "slice_update_(",
    ),
    "scatter": (
        scatter_into,
        lambda g: (
            torch.randn(3, 5, generator=g),
            torch.randint(0, 5, (3, 2), generator=g),
            torch.randn(3, 2, generator=g),
        ),
        "torch.Tensor.scatter_(",
    ),
    "index_add": (
        index_add_into,
        lambda g: (torch.randn(6, 4, generator=g), rows_index(g, 6, 3), torch.randn(3, 4, generator=g)),
        "torch.Tensor.index_add_(",
    ),
    "scatter_reduce": (
        scatter_amax_into,
        lambda g: (
            torch.randn(3, 5, generator=g),
            torch.randint(0, 5, (3, 4), generator=g),
            torch.randn(3, 4, generator=g),
        ),
        "scatter_reduce_(",
    ),
    "slice_into_temporary": (write_into_temporary, lambda g: (torch.randn(4, 5, generator=g),), "slice_update_fresh("),
    "index_add_into_zeros": (
        add_into_zeros,
        lambda g: (rows_index(g, 6, 4), torch.randn(4, 3, generator=g)),
        "index_add_fresh(",
    ),
    "index_copy_into_temporary": (
        copy_into_temporary,
        lambda g: (torch.randn(6, 3, generator=g), rows_index(g, 6, 2), torch.randn(2, 3, generator=g)),
        "index_copy_fresh(",
    ),
    "scatter_into_temporary": (
        scatter_into_temporary,
        lambda g: (
            torch.randn(3, 5, generator=g),
            torch.randint(0, 5, (3, 2), generator=g),
            torch.randn(3, 2, generator=g),
        ),
        "scatter_fresh(",
    ),
    "scatter_reduce_into_temporary": (
        scatter_reduce_into_temporary,
        lambda g: (
            torch.randn(3, 5, generator=g),
            torch.randint(0, 5, (3, 4), generator=g),
            torch.randn(3, 4, generator=g),
        ),
        "scatter_reduce_fresh(",
    ),
}


def cloned(args: tuple) -> tuple:
    return tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)


def printed(trace: compiler.Trace) -> Callable:
    """The function the trace's printed source defines, executed in an empty namespace (as a user
    pasting it would)."""
    namespace: dict = {}
    exec(compile(str(trace), f"<printed {trace.name}>", "exec"), namespace)
    return namespace[trace.name]


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_printed_traces_of_in_place_programs_run_as_eager(name: str, seed: int) -> None:
    program, make_inputs, in_place_call = PROGRAMS[name]
    args = make_inputs(torch.Generator().manual_seed(seed))
    jfn = compiler.jit(program)
    jfn(*cloned(args))
    traces, prologue = compiler.last_traces(jfn), compiler.last_prologue(jfn)
    assert in_place_call in str(traces[-1]), str(traces[-1])
    for trace in (traces[0], *traces[1:-1], traces[-1]):
        eager_args, printed_args = cloned(args), cloned(args)
        expected = program(*eager_args)
        got = printed(trace)(*printed(prologue)(printed_args, {}))
        torch.testing.assert_close(got, expected, msg=lambda m, t=trace: f"{t.provenance}: {m}")
        # arguments the program updates in place are updated alike
        torch.testing.assert_close(printed_args, eager_args, msg=lambda m, t=trace: f"{t.provenance}: {m}")


def test_a_symbol_with_no_importable_implementation_gets_no_import() -> None:
    from compiler.core.ir import Symbol, import_line

    assert import_line(Symbol("nvFusion0", lambda *args: args)) is None
    assert import_line(Symbol("torch.Tensor.index_add_", torch.Tensor.index_add_)) is None
    assert import_line(Symbol("torch.add")) is None


@pytest.mark.gpu
def test_printed_traces_of_a_cuda_kv_cache_step_run_as_eager() -> None:
    args = tuple(a.cuda() for a in kv_inputs(torch.Generator().manual_seed(0)))
    jfn = compiler.jit(kv_step, executors=["sdpa", "torch"])
    jfn(*cloned(args))
    traces, prologue = compiler.last_traces(jfn), compiler.last_prologue(jfn)
    assert "index_copy_(" in str(traces[-1])
    for trace in traces:
        eager_args, printed_args = cloned(args), cloned(args)
        expected = kv_step(*eager_args)
        torch.testing.assert_close(printed(trace)(*printed(prologue)(printed_args, {})), expected)
        torch.testing.assert_close(printed_args, eager_args)
