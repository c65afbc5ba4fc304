"""A benchmark case as data: what to run, on which inputs, what the right answer is, and how many
bytes the work must move at the least.

Suite modules (see `fusebench.cases.discovery`) declare `CASES = [Case(...), ...]`. A case never times
anything itself: `fusebench.measure.measure` does, for every variant in `fusebench.cases.variants`.

Parameter values are plain data (str, int, float, bool, or tuples of those) so that their
`repr` identifies them in ASV result files and round-trips through JSON.
"""

from __future__ import annotations

import importlib.util
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from fusebench.cases.variants import STANDARD_VARIANTS, Variant
from fusebench.errors import CaseError, check

Params = Mapping[str, Any]

# Default (rtol, atol) per dtype of the tensor being checked: |actual - expected| <= atol + rtol * |expected|.
DEFAULT_TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1e-4, 1e-5),
    torch.float16: (1e-3, 1e-3),
    torch.bfloat16: (1.6e-2, 1e-2),
}
TIMERS = ("device", "wall")


@dataclass(frozen=True)
class Case:
    """One benchmark: a function, its inputs over a parameter grid, a reference and a bytes model.

    name: identifier, unique within its suite (it names ASV benchmarks).
    fn: the function under test; every variant compiles or wraps it.
    make_inputs: (params, device, seed) -> tuple of positional arguments for `fn`.
    bytes_moved: params -> the fewest bytes the operation must read plus write (IOBytes).
    params: the parameter grid at GPU sizes, name -> list of values.
    quick_params: the grid for `--quick` (small sizes that run on CPU); defaults to `params`.
    headline: what a default `fusebench run` measures of the grid (`--all`, or `-k`, measure all
        of it): name -> the values that stand for that parameter, a sub-grid of `params` and
        `quick_params`. Per parameter, of the grid being run (full or quick):
        - named here: the grid's values listed here (when none of them is in this grid, as when
          only the full sizes are listed and the quick grid runs, the rule below picks);
        - not named: every value when the parameter has one or two (a dtype pair, constant vs
          symbolic: each a different code path), else its first value (a sweep over sizes or
          models, which one point stands for until `--all`).
        So a grid of one- and two-valued parameters runs whole by default.
    reference: computes the expected result eagerly; defaults to `fn`. It is called on a copy of
        the inputs upcast to `reference_dtype` (floating tensors only; None keeps dtypes).
    tolerances: (rtol, atol) per dtype of the checked tensor, over `DEFAULT_TOLERANCES`.
    rows_may_differ: params -> the fraction (in [0, 1)) of the rows of each checked tensor of two
        or more dimensions (its slices along the last dimension, such as one token's logits) that
        may disagree with the reference as a whole, rounded up to whole rows; each such row must
        still be finite, every other row agrees element by element. For a model that makes
        discrete choices from computed values, such as a mixture of experts routing each token to
        its top-k experts: where two choices nearly tie, a lower precision than the reference's
        may take the other one, for eager as for any compiled variant, and that token's row then
        differs entirely. An error that touches most rows (a wrong op, a shift) still fails.
        None: every element must agree.
    mutated_args: indices of arguments the function writes in place; they are restored between
        repeats (outside the timed region) and compared with the reference's after the first call.
    call: how one call runs given the (compiled) function and the arguments; defaults to
        `fn(*args)`. Sequences (several calls per sample) and autograd go here.
    forward_call: for a call that runs a forward then its backward (`cases.training`), the
        forward part alone; the harness then counts the backward's kernels separately (the
        call's kernels minus the forward's).
    jit_options: params -> options for compiling variants, e.g. {"cache": "symbolic"}.
    extra_variants: variants only this case has (a hand-written kernel, library baselines).
    headline_variants: names of opt-in variants (`Variant.default` False) this case measures by
        default too: e.g. the CUDA-graph variants for a launch-bound case, where they are the
        peer to beat.
    cold: every sample starts from a freshly compiled function, so compilation is part of the
        time (a sequence of calls with changing scalars); compile time is first minus warm call.
    timer: "device" (CUDA events on GPU, perf_counter on CPU) or "wall" (perf_counter with
        synchronization, for host overhead and cold sequences).
    calls_per_sample: calls inside one timed sample (for calls too short to time one by one);
        must be 1 when the case mutates its inputs.
    tokens: params -> the tokens one call processes (model cases): tokens/s is recorded too.
    mode: what a model case runs in the terms of PyTorch's performance dashboard ("inference",
        "training", "decode"): the dashboard gives each mode of a suite a row of its own.
    requires: modules the case imports (e.g. "transformers"); where one is missing every variant
        is skipped, with the reason.
    version: bump when the measured work changes; ASV drops results whose version differs.
    """

    name: str
    fn: Callable[..., Any]
    make_inputs: Callable[[Params, torch.device, int], tuple]
    bytes_moved: Callable[[Params], int]
    params: Mapping[str, Sequence[Any]]
    quick_params: Mapping[str, Sequence[Any]] | None = None
    headline: Mapping[str, Sequence[Any]] | None = None
    reference: Callable[..., Any] | None = None
    reference_dtype: torch.dtype | None = torch.float64
    tolerances: Mapping[torch.dtype, tuple[float, float]] = field(default_factory=dict)
    rows_may_differ: Callable[[Params], float] | None = None
    mutated_args: tuple[int, ...] = ()
    call: Callable[[Callable[..., Any], tuple], Any] | None = None
    forward_call: Callable[[Callable[..., Any], tuple], Any] | None = None
    jit_options: Callable[[Params], Mapping[str, Any]] | None = None
    extra_variants: tuple[Variant, ...] = ()
    headline_variants: tuple[str, ...] = ()
    cold: bool = False
    timer: str = "device"
    calls_per_sample: int = 1
    tokens: Callable[[Params], int] | None = None
    mode: str | None = None
    requires: tuple[str, ...] = ()
    version: str = "1"
    description: str = ""

    def __post_init__(self) -> None:
        check(self.name.isidentifier(), lambda: f"case name {self.name!r} is not a Python identifier", CaseError)
        check(
            self.forward_call is None or self.call is not None,
            lambda: f"{self.name}.forward_call is set but call is not: a forward part needs a call it is part of",
            CaseError,
        )
        for attr in ("fn", "make_inputs", "bytes_moved"):
            check(callable(getattr(self, attr)), lambda attr=attr: f"{self.name}.{attr} is not callable", CaseError)
        _validate_grid(self.name, "params", self.params)
        if self.quick_params is not None:
            _validate_grid(self.name, "quick_params", self.quick_params)
            check(
                list(self.quick_params) == list(self.params),
                lambda: (
                    f"{self.name}.quick_params names {list(self.quick_params)} differ from the params names "
                    f"{list(self.params)}"
                ),
                CaseError,
            )
        if self.headline is not None:
            _validate_headline(self)
        known = [v.name for v in variants_for(self)]
        for name in self.headline_variants:
            check(
                name in known,
                lambda name=name: f"{self.name}.headline_variants names {name!r}, not one of its variants {known}",
                CaseError,
            )
        check(self.timer in TIMERS, lambda: f"{self.name}.timer is {self.timer!r}; expected one of {TIMERS}", CaseError)
        check(
            isinstance(self.calls_per_sample, int) and self.calls_per_sample >= 1,
            lambda: f"{self.name}.calls_per_sample is {self.calls_per_sample!r}; expected an int >= 1",
            CaseError,
        )
        check(
            self.calls_per_sample == 1 or not self.mutated_args,
            lambda: f"{self.name}.calls_per_sample must be 1 when mutated_args is set (inputs are restored per call)",
            CaseError,
        )
        check(
            all(isinstance(i, int) and i >= 0 for i in self.mutated_args),
            lambda: f"{self.name}.mutated_args is {self.mutated_args!r}; expected non-negative argument indices",
            CaseError,
        )

    @property
    def param_names(self) -> list[str]:
        """The grid's parameter names, in declaration order."""
        return list(self.params)

    def grid(self, quick: bool) -> list[dict[str, Any]]:
        """Every parameter combination of the full or the quick grid, in declaration order."""
        grid = self.quick_params if quick and self.quick_params is not None else self.params
        names = list(grid)
        return [dict(zip(names, values)) for values in itertools.product(*(grid[n] for n in names))]

    def headline_grid(self, quick: bool) -> list[dict[str, Any]]:
        """The combinations of the full or quick grid a default run measures (see `headline`), in
        declaration order."""
        grid = self.quick_params if quick and self.quick_params is not None else self.params
        chosen = {name: headline_values(grid[name], (self.headline or {}).get(name)) for name in grid}
        return [dict(zip(chosen, values)) for values in itertools.product(*chosen.values())]

    def run(self, fn: Callable[..., Any], args: tuple) -> Any:
        """One call of `fn` on `args` the way this case calls it."""
        if self.call is not None:
            return self.call(fn, args)
        return fn(*args)

    def missing_requirement(self) -> str | None:
        """Why the case cannot run here (a module it requires is not installed), or None."""
        for module in self.requires:
            if importlib.util.find_spec(module) is None:
                return f"{module} is not installed (pip install {module})"
        return None

    def options(self, params: Params) -> dict[str, Any]:
        """Compile options for these parameters (empty unless the case declares `jit_options`)."""
        return dict(self.jit_options(params)) if self.jit_options is not None else {}

    def differing_rows(self, params: Params) -> float:
        """The fraction of a checked tensor's rows that may disagree as a whole (see `rows_may_differ`)."""
        return float(self.rows_may_differ(params)) if self.rows_may_differ is not None else 0.0

    def tolerance(self, dtype: torch.dtype) -> tuple[float, float]:
        """(rtol, atol) for a tensor of `dtype`; exact for non-floating dtypes."""
        if dtype in self.tolerances:
            return self.tolerances[dtype]
        return DEFAULT_TOLERANCES.get(dtype, (0.0, 0.0))


def variants_for(case: Case) -> list[Variant]:
    """The standard variants followed by the case's own."""
    return [*STANDARD_VARIANTS, *case.extra_variants]


def default_variants_for(case: Case) -> list[Variant]:
    """The variants a default run measures on `case`: those marked `default`, and the opt-in ones
    the case names in `headline_variants`, in `variants_for` order."""
    return [v for v in variants_for(case) if v.default or v.name in case.headline_variants]


# NOTE: one or two values are kept whole: such a parameter is a choice between code paths (two
# dtypes, constant vs symbolic caching), not a sweep that one point stands for.
MAX_WHOLE_AXIS = 2


def headline_values(values: Sequence[Any], preferred: Sequence[Any] | None) -> list[Any]:
    """The values of one parameter's grid a default run keeps: those in `preferred` (a case's
    `headline`) when any is in the grid, else all of up to `MAX_WHOLE_AXIS` values, else the first."""
    if preferred is not None:
        wanted = {repr(value) for value in preferred}
        kept = [value for value in values if repr(value) in wanted]
        if kept:
            return kept
    return list(values) if len(values) <= MAX_WHOLE_AXIS else [values[0]]


def format_params(params: Params) -> str:
    """'shape=(2, 8, 64), dtype=float32': parameters as people read them."""
    return ", ".join(f"{name}={value}" for name, value in params.items())


def dtype_named(name: str) -> torch.dtype:
    """The torch dtype called `name` ('float32', 'bfloat16', ...)."""
    dtype = getattr(torch, name, None)
    check(
        isinstance(dtype, torch.dtype),
        lambda: f"dtype parameter {name!r} is not a torch dtype name like 'float32'",
        CaseError,
    )
    return dtype


def random_tensor(
    shape: Sequence[int], dtype: torch.dtype, device: torch.device, generator: torch.Generator, scale: float = 1.0
) -> torch.Tensor:
    """Normal random values drawn on CPU (the same values on every device) then moved to `device`."""
    values = torch.randn(tuple(shape), generator=generator, dtype=torch.float32) * scale
    return values.to(device=device, dtype=dtype)


def generator(seed: int) -> torch.Generator:
    """A CPU generator seeded with `seed`, for `random_tensor`."""
    return torch.Generator().manual_seed(seed)


_PARAM_TYPES = (str, int, float, bool)


def _is_param_value(value: Any) -> bool:
    if isinstance(value, tuple):
        return all(_is_param_value(v) for v in value)
    return isinstance(value, _PARAM_TYPES)


def _validate_headline(case: Case) -> None:
    """A headline names parameters of the grid, each with values of `params` or `quick_params`."""
    headline = case.headline
    check(
        isinstance(headline, Mapping),
        lambda: f"{case.name}.headline is not a mapping of parameter name -> list of values",
        CaseError,
    )
    assert headline is not None
    for name, values in headline.items():
        where = f"{case.name}.headline[{name!r}]"
        check(
            name in case.params,
            lambda where=where: f"{where}: not a parameter of the grid {case.param_names}",
            CaseError,
        )
        check(
            isinstance(values, (list, tuple)) and len(values) > 0,
            lambda where=where: f"{where} is not a non-empty list",
            CaseError,
        )
        known = [*case.params[name], *(case.quick_params or {}).get(name, [])]
        for value in values:
            check(
                repr(value) in {repr(v) for v in known},
                lambda where=where, value=value: (
                    f"{where} holds {value!r}, which is in neither params nor quick_params"
                ),
                CaseError,
            )


def _validate_grid(case: str, attr: str, grid: Any) -> None:
    check(
        isinstance(grid, Mapping),
        lambda: f"{case}.{attr} is not a mapping of parameter name -> list of values",
        CaseError,
    )
    for name, values in grid.items():
        where = f"{case}.{attr}[{name!r}]"
        check(
            isinstance(name, str) and name.isidentifier(),
            lambda where=where: f"{where} is not an identifier",
            CaseError,
        )
        check(name != "variant", lambda where=where: f"{where}: 'variant' is reserved for the variant axis", CaseError)
        check(
            isinstance(values, (list, tuple)) and len(values) > 0,
            lambda where=where: f"{where} is not a non-empty list",
            CaseError,
        )
        for value in values:
            check(
                _is_param_value(value),
                lambda where=where, value=value: (
                    f"{where} holds {value!r} of type {type(value).__name__}; "
                    "expected str, int, float, bool or a tuple of those"
                ),
                CaseError,
            )
        reprs = [repr(v) for v in values]
        check(
            len(set(reprs)) == len(reprs),
            lambda where=where, reprs=reprs: f"{where} repeats a value: {reprs}",
            CaseError,
        )
