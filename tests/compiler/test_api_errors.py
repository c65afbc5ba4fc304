"""Every public entry point of the compiler, given a wrong type or value, raises one line naming
the argument, the value and what was expected (the CLI's flags: tests/harness/commands/test_cli_errors.py)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

import compiler
from compiler import examine
from compiler.core.executor import FUEL_ENV


def _f(x: torch.Tensor) -> torch.Tensor:
    return (x.sin() * 2).cos()


def _called(**options: object) -> compiler.JittedFunction:
    """jit(_f) called once; with the torch executor alone unless told (the same on a GPU machine)."""
    jfn = compiler.jit(_f, **{"executors": ["torch"], **options})
    jfn(torch.randn(3))
    return jfn


def _fused() -> compiler.JittedFunction:
    """One fusion, nvFusion0, formed by the fusion pass and run with torch (no GPU needed)."""
    return _called(executors=["nvfuser"], fusion={"runner": "torch"})


JIT_CASES = [
    (lambda: compiler.jit(3), TypeError, "jit(fn=3): expected a callable"),
    (lambda: compiler.jit(torch.ones(9, 9)), TypeError, "jit(fn=tensor([[1., 1., "),
    (
        lambda: compiler.jit(_f, numbers="dynamic"),
        ValueError,
        "jit(numbers='dynamic'): expected one of 'constant', 'symb",
    ),
    (lambda: compiler.jit(_f, numbers=True), ValueError, "jit(numbers=True): expected one of 'constant', 'symbolic'"),
    (lambda: compiler.jit(_f, cache="dynamic"), ValueError, "jit(cache='dynamic'): expected one of 'constant', 'symbo"),
    (lambda: compiler.jit(_f, numbers="symbolic", cache="symbolic"), TypeError, "pass numbers= alone"),
    (lambda: compiler.jit(_f, executors="torch"), TypeError, "jit(executors='torch'): expected a list of executor"),
    (lambda: compiler.jit(_f, executors=3), TypeError, "jit(executors=3): expected a list"),
    (lambda: compiler.jit(_f, executors=[torch]), TypeError, "jit(executors=[<module 'torch'"),
    (lambda: compiler.jit(_f, executors=["tpu"]), ValueError, "unknown executor 'tpu'; expected names from ['nvfuser'"),
    (lambda: compiler.jit(_f, executors=["sdpa", "sdpa"]), ValueError, "'sdpa' is named twice"),
    (lambda: compiler.jit(_f, fusion=3), TypeError, "jit(fusion=3): expected a FusionOptions, a dict"),
    (lambda: compiler.jit(_f, fusion={"fusel": 1}), TypeError, "unknown option(s) ['fusel']; expected keys from"),
    (lambda: compiler.jit(_f, fusion={1: 1}), TypeError, "unknown option(s) [1]"),
    (lambda: compiler.jit(_f, fusion={"min_region_size": "2"}), ValueError, "min_region_size='2': expected an int"),
    (lambda: compiler.jit(_f, fusion={"min_region_size": 0}), ValueError, "min_region_size=0: expected an int >= 1"),
    (lambda: compiler.jit(_f, fusion={"horizontal": "yes"}), ValueError, "horizontal='yes': expected True or False"),
    (lambda: compiler.jit(_f, fusion={"merge_same_shape": 1}), ValueError, "merge_same_shape=1: expected True"),
    (lambda: compiler.jit(_f, fusion={"small_region_size": -1}), ValueError, "small_region_size=-1: expected an int"),
    (lambda: compiler.jit(_f, fusion={"max_region_tensors": True}), ValueError, "max_region_tensors=True: expected"),
    (lambda: compiler.jit(_f, fusion={"fuel": 1.5}), ValueError, "fuel=1.5: expected None or an int >= 0"),
    (lambda: compiler.jit(_f, fusion={"fuel": -1}), ValueError, "fuel=-1: expected None or an int >= 0"),
    (lambda: compiler.jit(_f, fusion={"matmul": None}), ValueError, "matmul=None: expected True or False"),
    (lambda: compiler.jit(_f, fusion={"runner": "triton"}), ValueError, "runner='triton': expected 'nvfuser' or"),
    (lambda: compiler.FusionOptions(runner=None), ValueError, "FusionOptions.runner=None: expected"),
    (lambda: compiler.jit(_f, fallback="no"), TypeError, "jit(fallback='no'): expected True or False or None"),
    (lambda: compiler.jit(_f, automatic_dynamic=1), TypeError, "jit(automatic_dynamic=1): expected True or False"),
    (lambda: compiler.jit(_f, cuda_graphs="yes"), TypeError, "jit(cuda_graphs='yes'): expected True or False or None"),
]

INSPECTION_CASES = [
    (lambda: compiler.last_traces(_f), TypeError, "last_traces(<function _f at"),
    (lambda: compiler.last_traces(_f), TypeError, "expected a function returned by compiler.jit, got function"),
    (lambda: compiler.last_traces(compiler.jit(_f)), RuntimeError, "it has not been called yet; call it once first"),
    (lambda: compiler.last_prologue(3), TypeError, "last_prologue(3): expected a function returned by compiler.jit"),
    (lambda: compiler.last_backward_traces(None), TypeError, "last_backward_traces(None): expected a function"),
    (lambda: compiler.cache_stats("f"), TypeError, "cache_stats('f'): expected a function returned by compiler.jit"),
    (lambda: examine.fusions(_f), TypeError, "examine.fusions(<function _f at"),
    (lambda: examine.why_not_fused(compiler.jit(_f)), RuntimeError, "examine.why_not_fused(<jitted _f: 0 cache"),
    (lambda: examine.saved_for_backward([]), TypeError, "examine.saved_for_backward([]): expected a function"),
    (lambda: examine.recompilations(1.5), TypeError, "examine.recompilations(1.5): expected"),
    (lambda: examine.stats(_called()), ValueError, "this function has no nvFuser executor"),
    (lambda: examine.cuda_graphs(_called(cuda_graphs=False)), ValueError, "was jitted with cuda_graphs=False"),
    (
        lambda: examine.repro(_called(), "nvFusion0", "r.py"),
        ValueError,
        "this function has no fusions (executors: ['torch'",
    ),
    (
        lambda: examine.repro(_fused(), "nvFusion7", "r.py"),
        ValueError,
        "repro(name='nvFusion7'): no fusion of that name; ",
    ),
    (lambda: examine.repro(_fused(), "nvFusion7", "r.py"), ValueError, "expected one of ['nvFusion0']"),
    (lambda: examine.fusion_source_of(_fused(), "x"), ValueError, "fusion_source_of(name='x'): no fusion of that name"),
    (lambda: examine.segments(_fused(), ["nvFusion2"]), ValueError, "segments(names='nvFusion2'): no fusion of that"),
    (
        lambda: examine.repro(_fused(), "nvFusion0", Path("/nonexistent-folder/r.py")),
        ValueError,
        "repro(path='/nonexistent-folder/r.py'): expected a file path in an existing folder",
    ),
    (lambda: examine.repro(_fused(), "nvFusion0", Path(sys.prefix)), ValueError, "expected a file path in an existing"),
]


@pytest.mark.parametrize("call, error, expected", JIT_CASES + INSPECTION_CASES)
def test_a_bad_argument_is_one_line_naming_it(call: Callable, error: type[Exception], expected: str) -> None:
    with pytest.raises(error) as raised:
        call()
    message = str(raised.value)
    assert expected in message
    assert "\n" not in message


def test_an_unwritable_repro_path_is_named(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    with pytest.raises(ValueError, match=r"repro\(path='.*a-file/r.py'\): expected a file path in an existing folder"):
        examine.repro(_fused(), "nvFusion0", tmp_path / "a-file" / "r.py")
    too_long = tmp_path / ("r" * 300 + ".py")
    with pytest.raises(ValueError, match=r"repro\(path='.*\.py'\): cannot write there \(File name too long\)"):
        examine.repro(_fused(), "nvFusion0", too_long)


def test_the_fuel_environment_variable_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FUEL_ENV, "lots")
    with pytest.raises(ValueError, match=f"{FUEL_ENV}='lots': expected a whole number >= 0"):
        compiler.jit(_f)


def test_an_unavailable_executor_says_why_in_one_line() -> None:
    if torch.cuda.is_available():
        pytest.skip("nvFuser may be available here")
    with pytest.raises(RuntimeError, match="the nvfuser executor is unavailable on this machine") as raised:
        compiler.jit(_f, executors=["nvfuser"])
    assert "\n" not in str(raised.value)


def test_an_unsupported_op_inside_a_torch_module_names_the_call_not_the_generated_dispatcher() -> None:
    model = torch.nn.Sequential(torch.nn.Identity(), torch.nn.FractionalMaxPool2d(2, output_size=2))
    with pytest.raises(NotImplementedError) as raised:
        compiler.jit(model)(torch.ones(1, 1, 4, 4))  # the pool's forward is torch's: this line is the program's
    message = str(raised.value)
    assert "<fusebench" not in message and f"{__file__}:" in message, message
