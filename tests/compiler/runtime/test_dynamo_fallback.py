"""The "fusebench" dynamo backend never raises on what this compiler cannot compile: an op it
lacks is split out of the graph and runs eagerly, a branch on a tensor value is dynamo's graph
break; each is warned about once (op and user line) and counted; results and gradients match eager."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

import compiler
from compiler.runtime import dynamo


class Spectrum(nn.Module):
    """Linear layers around `torch.linalg.eigvalsh`, which the compiler has no decomposition for."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.Linear(6, 6)
        self.outer = nn.Linear(6, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.tanh(self.inner(x))
        values = torch.linalg.eigvalsh(y @ y.mT + 1e-3)  # the unsupported op
        return self.outer(values.sin() * y.mean(-1)).relu() + 1


class Branchy(nn.Module):
    """A forward that branches on a tensor value."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(5, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        if y.sum() > 0:  # the data-dependent branch
            return y.sin() * 2
        return y.cos() - 1


def _line(marker: str, source: str = __file__) -> int:
    with open(source) as file:
        return next(i for i, line in enumerate(file, 1) if marker in line and "_line(" not in line)


def _fallback_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, compiler.UnsupportedFallback)]


@pytest.mark.parametrize("seed", [0, 1])
def test_an_unsupported_op_is_split_out_and_runs_eagerly(seed: int) -> None:
    torch._dynamo.reset()
    torch.manual_seed(seed)
    model = Spectrum()
    compiled = torch.compile(model, backend="fusebench")
    before, first_graph = compiler.examine.fallbacks_recorded(), dynamo.graphs_compiled()
    x = torch.randn(4, 6, 6)
    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always")
        torch.testing.assert_close(compiled(x), model(x))
        y = torch.randn(4, 6, 6)
        torch.testing.assert_close(compiled(y), model(y))
    (fallback,) = compiler.examine.fallbacks(since=before)
    assert fallback.what == "torch.linalg.eigvalsh" and fallback.kind == "op"
    assert fallback.where == f"{__file__}:{_line('# the unsupported op')}: " + (
        "values = torch.linalg.eigvalsh(y @ y.mT + 1e-3)  # the unsupported op"
    )
    assert "is not supported by the fusebench compiler" in fallback.reason
    messages = _fallback_warnings(caught)
    assert len(messages) <= 1 and all("torch.linalg.eigvalsh" in m for m in messages)
    # the pieces before and after the op are compiled by this compiler, and compiled once
    pieces = [g for g in dynamo.compiled_graphs(first_graph) if g.last_entry is not None]
    assert len(pieces) == 2
    assert all(compiler.cache_stats(p).misses == 1 and compiler.cache_stats(p).hits == 1 for p in pieces)
    assert "prims.matmul" in str(compiler.last_traces(pieces[0])[-1])
    assert "prims.sin" in str(compiler.last_traces(pieces[1])[-1])


def test_the_warning_is_shown_once_per_op_and_line_and_every_fallback_counted() -> None:
    model = Spectrum()
    x = torch.randn(2, 6, 6)
    before = compiler.examine.fallbacks_recorded()
    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always")
        for _ in range(2):  # each reset makes dynamo capture and our backend split the graph again
            torch._dynamo.reset()
            torch.testing.assert_close(torch.compile(model, backend="fusebench")(x), model(x))
    assert len(compiler.examine.fallbacks(since=before)) == 2
    assert len(_fallback_warnings(caught)) <= 1  # 0 when an earlier test of this process warned already


@pytest.mark.slow
def test_a_fresh_process_warns_once_naming_the_op_and_the_line() -> None:
    import subprocess
    import sys
    from pathlib import Path

    program = (
        "import warnings, torch, compiler\n"
        "from tests.compiler.runtime.test_dynamo_fallback import Spectrum\n"
        "model = Spectrum()\n"
        "f = torch.compile(model, backend='fusebench')\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    for _ in range(3):\n"
        "        f(torch.randn(2, 6, 6))\n"
        "for w in caught:\n"
        "    if w.category is compiler.UnsupportedFallback:\n"
        "        print('WARNING', w.filename, w.lineno, w.message)\n"
        "print('COUNT', len(compiler.examine.fallbacks()))\n"
    )
    root = Path(__file__).resolve().parents[3]
    done = subprocess.run([sys.executable, "-c", program], cwd=root, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    (warning,) = [line for line in done.stdout.splitlines() if line.startswith("WARNING")]
    assert f"{__file__} {_line('# the unsupported op')} fusebench: torch.linalg.eigvalsh at " in warning
    assert "runs eagerly" in warning and "not supported by the fusebench compiler" in warning
    assert "COUNT 1" in done.stdout


def test_training_through_a_split_graph_matches_eager() -> None:
    torch._dynamo.reset()
    torch.manual_seed(2)
    model = Spectrum()
    reference = Spectrum()
    reference.load_state_dict(model.state_dict())
    compiled = torch.compile(model, backend="fusebench")
    x = torch.randn(3, 6, 6, requires_grad=True)
    x_reference = x.detach().clone().requires_grad_()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", compiler.UnsupportedFallback)
        for _ in range(2):  # the second step runs the compiled pieces' cached entries
            model.zero_grad(), reference.zero_grad()
            x.grad = x_reference.grad = None
            loss, expected = compiled(x).square().sum(), reference(x_reference).square().sum()
            loss.backward(), expected.backward()
            torch.testing.assert_close(loss, expected)
            torch.testing.assert_close(x.grad, x_reference.grad)
            for (name, p), q in zip(model.named_parameters(), reference.parameters()):
                torch.testing.assert_close(p.grad, q.grad, msg=lambda m, name=name: f"{name}: {m}")
    pieces = [g for g in dynamo.compiled_graphs() if g.last_entry is not None and g.module.training]
    assert any(compiler.last_backward_traces(p) for p in pieces), "no piece compiled a backward"


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_a_branch_on_a_tensor_value_runs_through_dynamo_with_a_counted_fallback(sign: float) -> None:
    torch._dynamo.reset()
    torch.manual_seed(3)
    model = Branchy()
    with torch.no_grad():
        model.linear.bias.fill_(sign * 10)  # so the branch taken is known
    before = compiler.examine.fallbacks_recorded()
    x = torch.rand(4, 5) * 0.1
    with warnings.catch_warnings(record=True), torch.no_grad():
        warnings.simplefilter("always")
        torch.testing.assert_close(torch.compile(model, backend="fusebench")(x), model(x))
    (fallback,) = compiler.examine.fallbacks(since=before)
    assert fallback.kind == "graph break" and fallback.what == "a branch on a tensor value"
    line = _line("# the data-dependent branch")
    assert fallback.where == f"{__file__}:{line}: if y.sum() > 0:  # the data-dependent branch"


def test_compiler_jit_stays_strict_with_one_line_naming_op_module_and_line() -> None:
    with pytest.raises(NotImplementedError) as unsupported:
        compiler.jit(Spectrum())(torch.randn(2, 6, 6))
    message = str(unsupported.value)
    assert "\n" not in message and "torch.linalg.eigvalsh is not supported" in message
    assert f"{__file__}:{_line('# the unsupported op')}:" in message and "the model (Spectrum)" in message
    with pytest.raises(compiler.TracingError) as branch:
        compiler.jit(Branchy())(torch.randn(2, 5))
    message = str(branch.value)
    assert "\n" not in message and "the model (Branchy)" in message
    assert f"{__file__}:{_line('# the data-dependent branch')}: if y.sum() > 0:" in message


@pytest.mark.parametrize("module", [Spectrum, Branchy])
def test_jit_unsupported_eager_runs_the_whole_function_eagerly_once_warned(module: type[nn.Module]) -> None:
    torch.manual_seed(4)
    model = module()
    jitted = compiler.jit(model, unsupported="eager")
    inputs = [torch.randn(2, 6, 6) if module is Spectrum else torch.randn(2, 5) for _ in range(3)]
    before = compiler.examine.fallbacks_recorded()
    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always")
        for x in inputs:
            torch.testing.assert_close(jitted(x), model(x))
    (fallback,) = compiler.examine.fallbacks(jitted)
    assert compiler.examine.fallbacks(since=before) == [fallback]
    assert fallback.what == f"the whole of {module.__name__}.forward" and fallback.kind == "function"
    assert len(_fallback_warnings(caught)) <= 1
    assert compiler.cache_stats(jitted).misses == 0  # traced once, then never again
    assert fallback.where.startswith(f"{__file__}:")


def test_jit_unsupported_eager_still_compiles_what_it_can() -> None:
    f = compiler.jit(lambda x: (x.sin() * 2).sum(-1), unsupported="eager")
    x = torch.randn(3, 4)
    torch.testing.assert_close(f(x), (x.sin() * 2).sum(-1))
    assert compiler.cache_stats(f).misses == 1 and compiler.examine.fallbacks(f) == []
    assert "prims.sin" in str(compiler.last_traces(f)[-1])


def test_jit_unsupported_names_the_modes() -> None:
    with pytest.raises(ValueError, match=r"jit\(unsupported='skip'\): expected one of 'raise', 'eager'"):
        compiler.jit(lambda x: x, unsupported="skip")


def test_a_graph_no_single_node_is_to_blame_for_runs_eagerly_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dynamo, "unsupported_nodes", lambda graph_module, args: {})
    torch._dynamo.reset()
    model = Spectrum()
    before = compiler.examine.fallbacks_recorded()
    x = torch.randn(2, 6, 6)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore", compiler.UnsupportedFallback)
        torch.testing.assert_close(torch.compile(model, backend="fusebench")(x), model(x))
    (fallback,) = compiler.examine.fallbacks(since=before)
    assert fallback.kind == "graph" and fallback.what == "a whole dynamo graph"
    assert "torch.linalg.eigvalsh is not supported" in fallback.reason


def test_a_piece_that_fails_to_compile_runs_eagerly(monkeypatch: pytest.MonkeyPatch) -> None:
    def blame_tanh_only(graph_module, args):
        (tanh,) = [n for n in graph_module.graph.nodes if n.target in (torch.tanh, "tanh")]
        return {tanh: NotImplementedError("blamed by the test")}

    monkeypatch.setattr(dynamo, "unsupported_nodes", blame_tanh_only)
    torch._dynamo.reset()
    model = Spectrum()
    before, first_graph = compiler.examine.fallbacks_recorded(), dynamo.graphs_compiled()
    x = torch.randn(2, 6, 6)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore", compiler.UnsupportedFallback)
        compiled = torch.compile(model, backend="fusebench")
        for _ in range(2):
            torch.testing.assert_close(compiled(x), model(x))
    tanh, piece = compiler.examine.fallbacks(since=before)
    assert (tanh.kind, tanh.what, tanh.reason) == ("op", "torch.tanh", "NotImplementedError: blamed by the test")
    assert piece.kind == "graph" and "torch.linalg.eigvalsh is not supported" in piece.reason
    # the piece before tanh compiled; the one after it (with eigvalsh) runs eagerly from its first call on
    pieces = dynamo.compiled_graphs(first_graph)[1:]
    assert [len(p.entries) for p in pieces] == [1, 1]
    assert compiler.examine.fallbacks(pieces[1]) == [piece] and compiler.examine.fallbacks(pieces[0]) == []


class QuietSpectrum(nn.Module):
    """The unsupported op under `torch.no_grad()`: dynamo's graph turns grad mode off and on again
    in straight-line nodes around it."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(6, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.tanh(self.linear(x))
        with torch.no_grad():
            scale = torch.linalg.eigvalsh(y @ y.mT).mean()
        return (y * scale).square().sum()


def test_a_failed_compilation_leaves_grad_mode_as_it_was() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        torch.set_grad_enabled(False)
        values = torch.linalg.eigvalsh(x)
        torch.set_grad_enabled(True)
        return values

    with pytest.raises(NotImplementedError):
        compiler.jit(f)(torch.eye(3))
    assert torch.is_grad_enabled()


def test_training_through_a_split_graph_with_a_no_grad_region() -> None:
    torch._dynamo.reset()
    torch.manual_seed(5)
    model, reference = QuietSpectrum(), QuietSpectrum()
    reference.load_state_dict(model.state_dict())
    x = torch.randn(2, 6, 6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", compiler.UnsupportedFallback)
        loss = torch.compile(model, backend="fusebench")(x)
    assert torch.is_grad_enabled()
    expected = reference(x)
    loss.backward(), expected.backward()
    torch.testing.assert_close(loss, expected)
    torch.testing.assert_close(model.linear.weight.grad, reference.linear.weight.grad)


def test_another_backends_graph_breaks_are_not_ours() -> None:
    torch._dynamo.reset()
    model = Branchy()
    before = compiler.examine.fallbacks_recorded()
    x = torch.randn(3, 5)
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(model, backend="eager")(x), model(x))
        torch.testing.assert_close(torch.compile(model.linear, backend="fusebench")(x), model.linear(x))
    assert compiler.examine.fallbacks(since=before) == []
