"""A symbolic number passed to a builtin torch function (`torch.where(mask, x, fill)`,
`torch.add(p, g, alpha=-lr)`, `torch._foreach_mul_(params, lr)`) is traced as the number it is,
where torch's argument parser would refuse it: one entry for every value, eager's results; and a
number's bitwise not (`~n`) is recorded as one."""

from __future__ import annotations

import types

import pytest
import torch
import torch.nn.functional as F

import compiler
from compiler.tracing.patches import _number_parameters

CALLS = {
    "where, fill last": lambda x, v: torch.where(x > 0, x, v),
    "where, fill first": lambda x, v: torch.where(x > 0, v, x),
    "full_like": lambda x, v: torch.full_like(x, v) + x,
    "clamp min": lambda x, v: torch.clamp(x, min=v),
    "add alpha": lambda x, v: torch.add(x, x.flip(0), alpha=-v),
    "pow exponent": lambda x, v: torch.pow(x.abs() + 1, v),
    "pow base": lambda x, v: torch.pow(v + 1, x),
    "mul": lambda x, v: torch.mul(x, v),
    "addcmul value": lambda x, v: torch.addcmul(x, x, x, value=v),
    "nan_to_num": lambda x, v: torch.nan_to_num(x.log(), nan=v),
    "softplus beta": lambda x, v: torch.nn.functional.softplus(x, beta=v + 1),
    "layer_norm eps": lambda x, v: torch.nn.functional.layer_norm(x, (4,), eps=abs(v)),
    "foreach add alpha": lambda x, v: torch._foreach_add([x, x * 2], [x, x], alpha=v)[1],
    "foreach mul": lambda x, v: torch._foreach_mul([x, x.T], v)[1],
}


@pytest.mark.parametrize("name", sorted(CALLS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_symbolic_number_in_a_builtin_torch_function_is_one_entry_for_every_value(name, dtype):
    call = CALLS[name]
    jfn = compiler.jit(call, dynamic=["v"], executors=["torch"])
    for seed, value in enumerate((0.25, 1.5, -0.75)):
        x = torch.randn(4, 4, generator=torch.Generator().manual_seed(seed)).to(dtype)
        torch.testing.assert_close(jfn(x, value), call(x, value), equal_nan=True)
    assert len(jfn.entries) == 1, compiler.examine.recompilations(jfn)


def test_the_builtins_routed_to_the_ops_table_are_those_it_implements():
    found = _number_parameters()
    names = {name for module, name in found if module is torch}
    assert {"arange", "full", "linspace", "where", "clamp", "add", "_foreach_add_"} <= names
    assert (torch.nn.functional, "softplus") in found
    assert all(isinstance(getattr(module, name), types.BuiltinFunctionType) for module, name in found)
    assert (torch.nn.functional, "cross_entropy") not in found  # Python: the tracing mode sees its calls


def test_a_numbers_bitwise_not_is_pythons():
    def invert(x, n, flag):
        return x * (~n) + (~flag)

    jfn = compiler.jit(invert, dynamic=["n", "flag"])
    x = torch.randn(3)
    for n, flag in ((3, True), (-7, False), (0, True)):
        torch.testing.assert_close(jfn(x, n, flag), invert(x, n, flag))
    assert len(jfn.entries) == 1
    with pytest.raises(TypeError, match=r"bad operand type for unary ~: a float"):
        compiler.jit(lambda x, v: x * ~v, dynamic=["v"], fallback=False)(x, 0.5)


def test_a_roll_by_a_symbolic_shift_over_a_symbolic_length_compiles_once_for_every_nonzero_shift():
    def rolled(x, n):
        return x.roll(n, 1) + x.roll((n, -n), (1, 2))

    jfn = compiler.jit(rolled)
    for length, shift in ((6, 2), (9, 3), (13, 4), (7, -9), (5, 6), (11, 1)):
        x = torch.randn(2, length, 8)
        torch.testing.assert_close(jfn(x, shift), rolled(x, shift))
    assert len(jfn.entries) == 2, compiler.examine.recompilations(jfn)  # the first call's, then one symbolic
    x = torch.randn(2, 7, 8)
    torch.testing.assert_close(jfn(x, 0), rolled(x, 0))  # no shift: a branch of its own (a copy)


@pytest.mark.parametrize("mode", ["constant", "replicate", "circular"])
def test_a_pad_by_a_symbolic_width_compiles_once_for_every_width(mode):
    def padded(x, n):
        return F.pad(x, (1, n, n, 0), mode=mode) if mode != "constant" else F.pad(x, (0, n, -1, n), value=2.5)

    jfn = compiler.jit(padded)
    for length, width in ((6, 2), (9, 3), (13, 4), (7, 1), (8, 5)):
        x = torch.randn(2, length, 8)
        torch.testing.assert_close(jfn(x, width), padded(x, width))
    assert len(jfn.entries) == 2, compiler.examine.recompilations(jfn)  # the first call's, then one symbolic


def test_a_range_from_symbolic_ints_compiles_once_for_every_value():
    """arange's start and step stay symbolic beside its end (the length a formula of all three; the
    step's sign and an empty range guarded), where they were read as ints: one entry per value."""

    def ranges(x, n, step):
        return x + torch.arange(n, n + 4), torch.arange(2, 2 + 3 * step, step).sum() + torch.arange(n, -n, -step)

    jfn = compiler.jit(ranges, numbers="symbolic")
    x = torch.randn(4)
    for n, step in ((3, 2), (5, 1), (7, 4), (2, 3)):
        torch.testing.assert_close(jfn(x, n, step), ranges(x, n, step))
    assert len(jfn.entries) == 1, compiler.examine.recompilations(jfn)
