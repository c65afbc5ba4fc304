"""Complex numbers inside jitted programs (compiler/ops/complex_numbers.py, complex_arithmetic.py):
every op with a complex decomposition against eager on random inputs, forward and gradients
(complex values made from real inputs that require grad, complex arguments, complex outputs),
traces that hold real tensors only, and the one-line errors for what is not supported."""

from __future__ import annotations

import re
import types
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch

import compiler
from compiler import prims
from compiler.core.errors import TracingError
from compiler.core.ir import TensorProxy, proxies_in
from compiler.ops import registry
from compiler.ops.registry import COMPLEX_OPS
from compiler.passes.autodiff import differentiable_values
from compiler.tracing.frontend import leaves
from tests.support.nvfuser_helpers import prim_trace


@dataclass(frozen=True)
class Case:
    """`fn(c, d, r)` over complex c, d of shape [3, 4] and real r of that shape; `reaches`: the
    registered names of the complex decompositions it calls."""

    reaches: str
    fn: Callable


def _method(name: str) -> Callable:
    return lambda x, *args: getattr(x, name)(*args)


CASES = [
    # making complex values and reading them back
    Case("torch.view_as_complex", lambda c, d, r: torch.view_as_complex(torch.stack([r, 2 * r], -1))),
    Case("torch.view_as_real torch.Tensor.__mul__", lambda c, d, r: torch.view_as_real(c * d)),
    Case("torch.polar", lambda c, d, r: torch.polar(r.abs() + 0.5, 3 * r)),
    Case("torch.complex", lambda c, d, r: torch.complex(r, r.flip(0)[:1])),
    Case("torch.real torch.imag torch.Tensor.__mul__",
         lambda c, d, r: (torch.real(c * d), torch.imag(c * d), torch.real(r))),
    Case("", lambda c, d, r: c.real * c.imag - d.imag),
    Case("torch.Tensor.to torch.Tensor.__mul__", lambda c, d, r: (c.to(torch.complex128), r.to(torch.complex64) * c)),
    Case("torch.Tensor.to", lambda c, d, r: (c.to(dtype=torch.float32), c.to("cpu"), c.to(r), c.to(d))),
    Case("torch.Tensor.type_as torch.Tensor.__mul__", lambda c, d, r: (c.type_as(r), r.type_as(c) * d)),
    Case("torch.Tensor.type", lambda c, d, r: c.type(torch.complex128)),
    Case("torch.Tensor.float torch.Tensor.double torch.Tensor.half torch.Tensor.bfloat16",
         lambda c, d, r: (c.float(), c.double(), c.half(), c.bfloat16())),
    Case("torch.Tensor.cfloat torch.Tensor.cdouble torch.Tensor.__mul__",
         lambda c, d, r: (r.cfloat() * c, c.cdouble())),
    Case("torch.zeros_like torch.ones_like torch.empty_like torch.Tensor.__add__ torch.Tensor.__mul__",
         lambda c, d, r: torch.zeros_like(c) + torch.ones_like(c) * d + 0 * torch.empty_like(c).shape[0]),
    Case("torch.zeros torch.ones torch.Tensor.__add__",
         lambda c, d, r: torch.zeros(3, 4, dtype=torch.complex64) + torch.ones((3, 4), dtype=torch.complex64) + c),
    # arithmetic
    Case("torch.add torch.Tensor.add torch.Tensor.__add__ torch.Tensor.__radd__",
         lambda c, d, r: (torch.add(c, d, alpha=2), c.add(r), c + d, 2 + c, r + c, c + 1j, r + 1j)),
    Case("torch.sub torch.subtract torch.Tensor.sub torch.Tensor.__sub__",
         lambda c, d, r: (torch.sub(c, r, alpha=0.5), torch.subtract(c, d), c.sub(d), c - 1, r - c)),
    Case("torch.rsub torch.Tensor.__rsub__", lambda c, d, r: (torch.rsub(c, d), 1 - c, (2 + 1j) - c)),
    Case("torch.mul torch.multiply torch.Tensor.mul torch.Tensor.__mul__ torch.Tensor.__rmul__",
         lambda c, d, r: (torch.mul(c, d), torch.multiply(c, r[:1]), c.mul(2.5), 3 * c, c * (2 - 1j), r * 1j)),
    Case("torch.div torch.divide torch.true_divide torch.Tensor.div torch.Tensor.true_divide torch.Tensor.__truediv__",
         lambda c, d, r: (torch.div(c, d), torch.divide(c, r), torch.true_divide(c, 2), c.div(d),
                          c.true_divide(r + 3), c / (1 + 2j), r / c)),
    Case("torch.Tensor.__rtruediv__", lambda c, d, r: (1 / c, 1j / c)),
    Case("torch.neg torch.negative torch.Tensor.neg torch.Tensor.negative torch.Tensor.__pos__",
         lambda c, d, r: (torch.neg(c), torch.negative(c), c.neg(), c.negative(), -c, +c)),
    Case("torch.conj torch.Tensor.conj torch.conj_physical torch.Tensor.conj_physical torch.Tensor.__mul__",
         lambda c, d, r: (torch.conj(c) * d, c.conj() * 2, torch.conj_physical(c), c.conj_physical())),
    Case("torch.resolve_conj torch.Tensor.resolve_conj torch.resolve_neg torch.Tensor.resolve_neg torch.conj",
         lambda c, d, r: (torch.resolve_conj(torch.conj(c)), d.resolve_conj(), torch.resolve_neg(c), d.resolve_neg())),
    Case("torch.exp torch.Tensor.exp", lambda c, d, r: (torch.exp(c), d.exp())),
    Case("torch.log torch.Tensor.log", lambda c, d, r: (torch.log(c), d.log())),
    Case("torch.abs torch.absolute torch.Tensor.abs torch.Tensor.absolute",
         lambda c, d, r: (torch.abs(c), torch.absolute(d), c.abs(), abs(d), c.absolute())),
    Case("torch.angle torch.Tensor.angle", lambda c, d, r: (torch.angle(c), d.angle())),
    Case("torch.reciprocal torch.Tensor.reciprocal", lambda c, d, r: (torch.reciprocal(c), d.reciprocal())),
    Case("torch.square torch.Tensor.square", lambda c, d, r: (torch.square(c), d.square())),
    Case("torch.pow torch.Tensor.pow torch.Tensor.__pow__",
         lambda c, d, r: (torch.pow(c, 2), d.pow(0.5), c**3, d**-1.5)),
    Case("torch.where torch.Tensor.where",
         lambda c, d, r: (torch.where(r > 0, c, d), torch.where(r > 0, r.detach(), c), c.where(r > 0, 0.0))),
    # NOTE: r detached: eager's own backward of a real and a complex operand of where fails
    Case("torch.eq torch.Tensor.eq torch.Tensor.__eq__ torch.ne torch.Tensor.ne torch.Tensor.__ne__",
         lambda c, d, r: (torch.eq(c, d), c.eq(c), c == r, torch.ne(c, d), c.ne(c), c != d)),
    Case("torch.is_complex torch.Tensor.__mul__",
         lambda c, d, r: c * 2 if torch.is_complex(c) and c.is_complex() else r),
    Case("torch.cat torch.concat torch.concatenate",
         lambda c, d, r: (torch.cat([c, d]), torch.concat([c, r], 1), torch.concatenate([r, c]))),
    Case("torch.stack", lambda c, d, r: torch.stack([c, r, d], 1)),
    # Fourier transforms (values and norms: tests/compiler/ops/test_fourier.py)
    Case("torch.fft.fft torch.fft.ifft",
         lambda c, d, r: (torch.fft.fft(c), torch.fft.ifft(d, dim=0), torch.fft.fft(r))),
    Case("torch.fft.fftn torch.fft.ifftn torch.fft.fft2 torch.fft.ifft2",
         lambda c, d, r: (torch.fft.fftn(c), torch.fft.ifftn(d), torch.fft.fft2(r), torch.fft.ifft2(c))),
    Case("torch.fft.rfft torch.fft.irfft", lambda c, d, r: torch.fft.irfft(torch.fft.rfft(r) * 2, n=4)),
]  # fmt: skip

# layout ops and linear reductions, each as a torch function (where torch has one) and a method
LAYOUT = {
    "view": lambda f, c, r: f(c, 4, 3),
    "reshape": lambda f, c, r: f(c, (2, 6)),
    "flatten": lambda f, c, r: f(c),
    "unflatten": lambda f, c, r: f(c, 1, (2, 2)),
    "unsqueeze": lambda f, c, r: f(c, 1),
    "squeeze": lambda f, c, r: f(c[:1], 0),
    "permute": lambda f, c, r: f(c, (1, 0)),
    "transpose": lambda f, c, r: f(c, 0, 1),
    "swapaxes": lambda f, c, r: f(c, 0, 1),
    "movedim": lambda f, c, r: f(c, 0, 1),
    "moveaxis": lambda f, c, r: f(c, 1, 0),
    "expand": lambda f, c, r: f(c[:1], 2, 3, 4),
    "expand_as": lambda f, c, r: f(c[:, :1], c),
    "broadcast_to": lambda f, c, r: f(c, (2, 3, 4)),
    "contiguous": lambda f, c, r: f(c.t()),
    "clone": lambda f, c, r: f(c),
    "detach": lambda f, c, r: f(c) * r,
    "__getitem__": lambda f, c, r: f(c, (slice(1, None), None, slice(None, None, 2))),
    "select": lambda f, c, r: f(c, 1, 2),
    "narrow": lambda f, c, r: f(c, 1, 1, 2),
    "split": lambda f, c, r: f(c, 2, 1),
    "chunk": lambda f, c, r: f(c, 2, 0),
    "unbind": lambda f, c, r: f(c, 1),
    "repeat": lambda f, c, r: f(c, 2, 1),
    "tile": lambda f, c, r: f(c, (1, 2)),
    "flip": lambda f, c, r: f(c, (0,)),
    "roll": lambda f, c, r: f(c, 1, 0),
    "t": lambda f, c, r: f(c),
    "diagonal": lambda f, c, r: f(c),
    "view_as": lambda f, c, r: f(c.reshape(12), r.reshape(2, 6)),
    "reshape_as": lambda f, c, r: f(c, r.reshape(6, 2)),
    "sum": lambda f, c, r: (f(c), f(c, 0)),
    "mean": lambda f, c, r: f(c, 1, True),
    "cumsum": lambda f, c, r: f(c, 1),
    "tril": lambda f, c, r: f(c),
    "triu": lambda f, c, r: f(c, 1),
    "index_select": lambda f, c, r: f(c, 1, torch.arange(2)),
}
for _name, _sample in LAYOUT.items():
    for _qualified, _f in ((f"torch.{_name}", getattr(torch, _name, None)), (f"torch.Tensor.{_name}", _method(_name))):
        if _f is not None:
            CASES.append(Case(_qualified, lambda c, d, r, _sample=_sample, _f=_f: _sample(_f, c, r)))


def test_every_complex_decomposition_is_reached_by_a_case() -> None:
    reached = {name for case in CASES for name in case.reaches.split()}
    registered = {op.name for op in COMPLEX_OPS.values()}
    assert registered - reached == set(), "complex decompositions no case calls"
    assert reached <= registered


def _weights(x: torch.Tensor) -> torch.Tensor:
    return torch.linspace(-1.0, 2.0, x.numel(), dtype=x.dtype).view(x.shape)


def _loss(output: object) -> torch.Tensor | None:
    """A weighted sum of every floating or complex output that carries a gradient (complex ones by
    their real views), or None when none does."""
    outputs = output if isinstance(output, (tuple, list)) else (output,)
    total = None
    for y in outputs:
        if not isinstance(y, torch.Tensor) or not y.requires_grad:
            continue
        real = torch.view_as_real(y.resolve_conj()) if y.is_complex() else y
        term = (real * _weights(real)).sum().double()
        total = term if total is None else total + term
    return total


def _run(fn: Callable, inputs: tuple[torch.Tensor, ...]) -> tuple[object, tuple]:
    """(fn's output, the inputs' gradients of `_loss` of it)."""
    inputs = tuple(t.detach().clone().requires_grad_(t.is_floating_point() or t.is_complex()) for t in inputs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NOTE: eager's own, for complex-to-real conversions
        output = fn(*inputs)
    loss = _loss(output)
    if loss is not None:
        loss.backward()
    return output, tuple(t.grad for t in inputs)


def _assert_same(got: object, want: object, where: str) -> None:
    if isinstance(want, (tuple, list)):
        assert type(got) is type(want) and len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want)):
            _assert_same(g, w, f"{where}[{i}]")
    elif isinstance(want, torch.Tensor):
        assert isinstance(got, torch.Tensor) and got.dtype == want.dtype, f"{where}: {got!r} against {want!r}"
        tolerance = {"atol": 1e-5, "rtol": 1e-5} if want.dtype not in (torch.float16, torch.bfloat16) else {}
        torch.testing.assert_close(got.resolve_conj(), want.resolve_conj(), **tolerance, msg=lambda m: f"{where}: {m}")
    else:
        assert got == want, where


def _program(case: Case) -> Callable:
    def program(x: torch.Tensor, y: torch.Tensor, r: torch.Tensor) -> object:
        return case.fn(torch.view_as_complex(x), torch.view_as_complex(y), r)

    return program


@pytest.fixture
def reached(monkeypatch: pytest.MonkeyPatch) -> set[str]:
    """The registered names of the complex decompositions called while the test traces."""
    names: set[str] = set()
    dispatch_complex = registry._dispatch_complex

    def recording(fn: object, args: tuple, kwargs: dict) -> object:
        if fn in COMPLEX_OPS:
            names.add(COMPLEX_OPS[fn].name)
        return dispatch_complex(fn, args, kwargs)

    monkeypatch.setattr(registry, "_dispatch_complex", recording)
    return names


@pytest.mark.parametrize("case", CASES, ids=[(case.reaches or "parts").split()[0] for case in CASES])
def test_complex_op_matches_eager_with_gradients(case: Case, reached: set[str]) -> None:
    program = _program(case)
    compiled = compiler.jit(program)
    for seed in range(2):
        generator = torch.Generator().manual_seed(seed)
        inputs = (torch.randn(3, 4, 2, generator=generator), torch.randn(3, 4, 2, generator=generator))
        inputs += (torch.randn(3, 4, generator=generator),)
        (want, want_grads), (got, got_grads) = _run(program, inputs), _run(compiled, inputs)
        _assert_same(got, want, "output")
        _assert_same(got_grads, want_grads, "gradients")
    assert reached >= set(case.reaches.split())
    _assert_traces_real(compiled)


def _assert_traces_real(compiled: Callable) -> None:
    for trace in compiler.last_traces(compiled):
        for bsym in leaves(list(trace.bsyms)):
            for p in proxies_in((bsym.args, bsym.output)):
                assert not (isinstance(p, TensorProxy) and p.dtype.is_complex), f"{p.name} in {bsym}"


def test_complex_arguments_and_outputs_carry_eagers_gradients() -> None:
    """A complex argument that requires grad enters as its real view, complex outputs (in a tuple
    and a dict) leave as complex tensors: eager's values and complex gradients."""

    def program(z: torch.Tensor, w: torch.Tensor, r: torch.Tensor) -> tuple:
        rotated = (z * w.conj()).exp() * r
        return rotated, {"abs": rotated.abs(), "z": z[:, None] + w}

    compiled = compiler.jit(program)
    for seed, rows in ((0, 3), (1, 3), (2, 1)):
        generator = torch.Generator().manual_seed(seed)
        z = torch.randn(rows, 4, dtype=torch.complex64, generator=generator)
        w = torch.randn(4, dtype=torch.complex64, generator=generator)
        inputs = (z, w, torch.randn(rows, 4, generator=generator))
        (want, want_grads), (got, got_grads) = _run(program, inputs), _run(compiled, inputs)
        _assert_same([got[0], got[1]["abs"], got[1]["z"]], [want[0], want[1]["abs"], want[1]["z"]], "output")
        _assert_same(got_grads, want_grads, "gradients")
    _assert_traces_real(compiled)


def test_a_complex_argument_passed_twice_and_in_float64() -> None:
    program = lambda a, b: (a * b.conj()).sum(0)
    z = torch.randn(5, 3, dtype=torch.complex128)
    torch.testing.assert_close(compiler.jit(program)(z, z), program(z, z))


ERRORS = [
    (lambda c: torch.sin(c), "torch.sin on complex tensors is not supported by the fusebench compiler (called at "),
    (lambda c: c.mul_(2), "torch.Tensor.mul_: writing into a complex tensor is not supported by the fusebench"),
    (lambda c: c.__setitem__(0, 1j), "torch.Tensor.__setitem__: writing into a complex tensor is not supported"),
    (lambda c: c @ c.t(), "torch.Tensor.__matmul__ on complex tensors is not supported"),
    (lambda c: torch.randn(3, dtype=torch.complex64), "torch.randn making a torch.complex64 tensor is not supported"),
    (lambda c: torch.view_as_complex(c.real), "torch.view_as_complex: expected a float16, float32 or float64 tensor"),
    (lambda c: torch.view_as_real(c.real), "torch.view_as_real: expected a complex tensor, got torch.float32"),
]


@pytest.mark.parametrize(("fn", "message"), ERRORS, ids=[m.split(":")[0].split(" ")[0] for _, m in ERRORS])
def test_unsupported_complex_use_is_one_line_naming_op_and_line(fn: Callable, message: str) -> None:
    with pytest.raises((NotImplementedError, ValueError, TypeError), match=re.escape(message)) as raised:
        compiler.jit(fn)(torch.randn(3, 4, dtype=torch.complex64))
    assert "\n" not in str(raised.value) and "test_complex_numbers.py:" in str(raised.value)


def test_a_real_tensors_conj_is_the_tensor_itself_for_gradients_too() -> None:
    program = lambda x: (x.conj() * torch.conj(x)).sum()
    x = torch.randn(5)
    (want,), (got,) = _run(program, (x,))[1], _run(compiler.jit(program), (x,))[1]
    torch.testing.assert_close(got, want)


def _with_unsupported_op(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    c = torch.view_as_complex((x @ w).reshape(x.shape[0], -1, 2))
    return torch.view_as_real(torch.sin(c) * c.conj()).sum(-1)


def test_dynamo_runs_an_unsupported_complex_op_eagerly_between_compiled_pieces() -> None:
    """torch.sin of a complex tensor runs eagerly (one counted fallback); the pieces around it take
    and return complex tensors, and the gradients are eager's."""
    torch._dynamo.reset()
    compiled = torch.compile(_with_unsupported_op, backend="fusebench")
    before = compiler.examine.fallbacks_recorded()
    inputs = (torch.randn(3, 4), torch.randn(4, 6))
    (want, want_grads), (got, got_grads) = _run(_with_unsupported_op, inputs), _run(compiled, inputs)
    _assert_same((got, got_grads), (want, want_grads), "output and gradients")
    fallbacks = compiler.examine.fallbacks(since=before)
    assert len(fallbacks) == 1 and "torch.sin on complex tensors is not supported" in str(fallbacks), fallbacks


def test_autodiff_still_refuses_a_complex_tensor_carrying_a_gradient() -> None:
    """Tracing never makes one; a trace built by hand with one is refused rather than differentiated
    as if it were real."""
    trace = prim_trace(lambda a: prims.mul(a, a), ((3,), torch.complex64))
    with pytest.raises(NotImplementedError, match=r"the complex tensor a0 .* carries a gradient"):
        differentiable_values(trace, (True,))


def test_a_complex_tensor_without_a_place_is_named_as_any_tensor_is() -> None:
    # NOTE: one a closure holds is an input (tests/compiler/tracing/test_captured_tensors.py); one an
    # object holds has no place the tracer follows
    holder = types.SimpleNamespace(freqs_cis=torch.polar(torch.ones(4), torch.rand(4)))
    programs = {
        "torch.Tensor.__mul__": lambda x: torch.view_as_complex(x) * holder.freqs_cis,
        "torch.view_as_real": lambda x: torch.view_as_real(holder.freqs_cis) * x,
    }
    for op, program in programs.items():
        with pytest.raises(TracingError, match=re.escape(f"{op} received a real torch.Tensor that is not an argument")):
            compiler.jit(program)(torch.randn(4, 2))
