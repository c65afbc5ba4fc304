"""The op table against eager PyTorch, and the coverage of the registry by that table.

Every case in `tests/support/opinfo/*.CASES` runs for each of its dtypes (see `samples.run_case` for what is
checked). `test_every_registered_op_is_exercised` makes coverage visible: a torch callable
registered in `compiler.ops.OPS` must be reached by some sample or be listed in `NOT_EXERCISED`
with the reason.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import compiler
from compiler.core import proxies
from compiler.ops import OPS, resolve
from compiler.runtime.pipeline import compile_entry, make_options
from compiler.tracing import frontend
from compiler.tracing.check_trace import check_trace
from compiler.tracing.frontend import size_name
from tests.support.opinfo import (
    activations as opinfo_activations,
)
from tests.support.opinfo import (
    cumulative as opinfo_cumulative,
)
from tests.support.opinfo import (
    elementwise as opinfo_elementwise,
)
from tests.support.opinfo import (
    foreach as opinfo_foreach,
)
from tests.support.opinfo import (
    group_norm as opinfo_group_norm,
)
from tests.support.opinfo import (
    indexing as opinfo_indexing,
)
from tests.support.opinfo import (
    inverse_trig as opinfo_inverse_trig,
)
from tests.support.opinfo import (
    matrix_compositions as opinfo_matrix_compositions,
)
from tests.support.opinfo import (
    models as opinfo_models,
)
from tests.support.opinfo import (
    nn as opinfo_nn,
)
from tests.support.opinfo import (
    numeric_compositions as opinfo_numeric_compositions,
)
from tests.support.opinfo import (
    pooling as opinfo_pooling,
)
from tests.support.opinfo import (
    scatter as opinfo_scatter,
)
from tests.support.opinfo import (
    shape as opinfo_shape,
)
from tests.support.opinfo import (
    shape_compositions as opinfo_shape_compositions,
)
from tests.support.opinfo import (
    special as opinfo_special,
)
from tests.support.opinfo import (
    spellings as opinfo_spellings,
)
from tests.support.opinfo import (
    torch_compositions as opinfo_torch_compositions,
)
from tests.support.opinfo import (
    transcendental as opinfo_transcendental,
)
from tests.support.opinfo import (
    triangular_solve as opinfo_triangular_solve,
)
from tests.support.opinfo import (
    zoo as opinfo_zoo,
)
from tests.support.opinfo.samples import as_function, assert_matches, iter_calls, run_case, samples_for
from tests.support.seeding import manual_seed

# Eager PyTorch warns on some samples on purpose (zero degrees of freedom, x.T on 3-D tensors, ...).
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

CASES = (
    opinfo_elementwise.CASES
    + opinfo_nn.CASES
    + opinfo_shape.CASES
    + opinfo_shape_compositions.CASES
    + opinfo_numeric_compositions.CASES
    + opinfo_foreach.CASES
    + opinfo_indexing.CASES
    + opinfo_models.CASES
    + opinfo_group_norm.CASES
    + opinfo_scatter.CASES
    + opinfo_special.CASES
    + opinfo_inverse_trig.CASES
    + opinfo_triangular_solve.CASES
    + opinfo_activations.CASES
    + opinfo_zoo.CASES
    + opinfo_pooling.CASES
    + opinfo_matrix_compositions.CASES
    + opinfo_cumulative.CASES
    + opinfo_torch_compositions.CASES
    + opinfo_transcendental.CASES
    + opinfo_spellings.CASES
)

# Registered torch callables that no sample reaches, each with the reason. Keep it short.
_DATA_DEPENDENT = "raises: its result's shape depends on values (test_indexing.py checks the message)"
NOT_EXERCISED: dict[str, str] = {
    name: _DATA_DEPENDENT
    for fn in ("nonzero", "argwhere", "masked_select", "unique")
    for name in (f"torch.{fn}", f"torch.Tensor.{fn}")
} | {
    "torch.Tensor.cuda": "copies to a GPU: test_devices.py checks it on CUDA",
    "torch.nn.functional.multi_head_attention_forward": "a module's worth of weights: test_multi_head_attention.py",
    **{
        f"torch.Tensor.{name}_": "random draws, compared with eager's under one seed in test_random_values.py"
        for name in ("uniform", "normal", "exponential")
    },
    # NOTE: each checked against eager (values, dtypes, gradients) in the test file of its op module
    **{
        name: f"test_{module}.py"
        for module, names in (
            (
                "numeric_compositions",
                "torch.fmax torch.Tensor.fmax torch.fmin torch.Tensor.fmin torch.sinc "
                "torch.special.sinc torch.Tensor.sinc",
            ),
            (
                "shape_compositions",
                "torch.hsplit torch.Tensor.hsplit torch.vsplit torch.Tensor.vsplit torch.dsplit torch.Tensor.dsplit",
            ),
            ("activations", "torch.prelu torch.Tensor.prelu"),
            ("bernoulli", "torch.bernoulli torch.Tensor.bernoulli torch.Tensor.bernoulli_"),
            (
                "stochastic_layers",
                "torch.nn.functional.rrelu torch.rrelu torch.rrelu_ torch.nn.functional.alpha_dropout "
                "torch.alpha_dropout torch.nn.functional.feature_alpha_dropout torch.feature_alpha_dropout "
                "torch.nn.functional.gumbel_softmax",
            ),
            (
                "margin_losses",
                " ".join(
                    f"torch.nn.functional.{n}_loss"
                    for n in (
                        "margin_ranking",
                        "hinge_embedding",
                        "soft_margin",
                        "cosine_embedding",
                        "triplet_margin",
                        "multi_margin",
                        "multilabel_margin",
                        "multilabel_soft_margin",
                    )
                ),
            ),
            ("likelihood_losses", "torch.nn.functional.poisson_nll_loss torch.nn.functional.gaussian_nll_loss"),
            ("local_response_norm", "torch.nn.functional.local_response_norm"),
            ("linalg", "torch.bilinear torch.linalg.cross torch.cross torch.Tensor.cross"),
            ("norms", "torch.linalg.matrix_norm torch.renorm torch.Tensor.renorm"),
            ("matrix_compositions", "torch.pdist torch.block_diag"),
            ("integration", "torch.trapezoid torch.trapz"),
            ("index_combinations", "torch.tril_indices torch.triu_indices torch.cartesian_prod"),
            ("torch_compositions", "torch.channel_shuffle torch.native_channel_shuffle"),
            ("bucketing", "torch.searchsorted torch.bucketize"),
            ("conv_transpose", "torch.conv_transpose1d torch.conv_transpose2d torch.conv_transpose3d"),
            ("as_strided", "torch.as_strided torch.Tensor.as_strided"),
            ("fold", "torch.nn.functional.fold"),
            ("embedding_bag", "torch.nn.functional.embedding_bag"),
            ("grid_sample", "torch.nn.functional.grid_sample torch.nn.functional.affine_grid"),
            ("foreach_norm", "torch._foreach_norm"),
            ("quantiles", "torch.quantile torch.Tensor.quantile torch.nanquantile torch.Tensor.nanquantile"),
            ("scatter", "torch.index_reduce torch.Tensor.index_reduce"),
            ("spellings", "torch.negative_ torch.fix_"),
        )
        for name in names.split()
    },
}


def _id(case: Any, dtype: torch.dtype) -> str:
    return f"{case.name}-{str(dtype).removeprefix('torch.')}"


PARAMS = [pytest.param(case, dtype, id=_id(case, dtype)) for case in CASES for dtype in case.dtypes]


def test_case_names_are_unique() -> None:
    names = [case.name for case in CASES]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)


@pytest.mark.parametrize(("case", "dtype"), PARAMS)
def test_op_matches_eager(case: Any, dtype: torch.dtype) -> None:
    assert run_case(case, dtype) > 0, f"{case.name} has no samples for {dtype}"


def _exercised(monkeypatch: pytest.MonkeyPatch) -> set[Any]:
    """The registry keys the table's samples reach from user code (not from inside other ops)."""
    reached: set[Any] = set()
    depth = [0]
    dispatch = proxies.HOOKS.dispatch

    def recording_dispatch(fn: Callable, args: tuple, kwargs: dict) -> Any:
        if depth[0] == 0:
            reached.add(fn)
        depth[0] += 1
        try:
            return dispatch(fn, args, kwargs)
        finally:
            depth[0] -= 1

    # NOTE: proxies and the tracing mode look `dispatch` up in `proxies.HOOKS` at each call.
    monkeypatch.setattr(proxies.HOOKS, "dispatch", recording_dispatch)
    for _, variant, sample in iter_calls(CASES):
        fn, tensors = as_function(variant, sample)
        frontend.trace(fn, tuple(tensors), {})
    return reached


def test_every_registered_op_is_exercised(monkeypatch: pytest.MonkeyPatch) -> None:
    reached = _exercised(monkeypatch)
    assert reached, "recording dispatch saw no calls: the frontend no longer calls proxies.HOOKS.dispatch"
    skipped = {resolve(name) for name in NOT_EXERCISED}
    # In-place ops (compiler.ops.inplace) have their own sample tables in test_inplace_*.py.
    inplace = {fn for fn, op in OPS.items() if op.impl.__module__ == "compiler.ops.inplace"}
    missing = sorted(OPS[fn].name for fn in OPS if fn not in reached and fn not in skipped | inplace)
    assert not missing, f"registered ops that no sample exercises (add samples, or justify a skip): {missing}"
    stale = sorted(name for name in NOT_EXERCISED if resolve(name) in reached or resolve(name) not in OPS)
    assert not stale, f"NOT_EXERCISED entries that are exercised or no longer registered: {stale}"


def _split_statistics(a: torch.Tensor, d0: int) -> tuple:
    x, y = torch.split(a, (d0, a.size(0) - d0))
    return x.mean(0), y.var(0), torch.softmax(y, 0), y.sum(0, keepdim=True), x.std(), F.layer_norm(y.T, y.T.shape[1:])


def test_reductions_and_norms_over_symbolic_sizes_compile_once() -> None:
    """Counts that are NumberProxy sizes (symbolic split sections) stay symbolic in mean/var/std."""
    jfn = compiler.jit(_split_statistics, numbers="symbolic")
    a = torch.randn(10, 3)
    for d0 in range(1, 6):
        for got, want in zip(jfn(a, d0), _split_statistics(a, d0), strict=True):
            torch.testing.assert_close(got, want)
    assert compiler.cache_stats(jfn).misses == 1
    for trace in compiler.last_traces(jfn):
        check_trace(trace)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_op_matches_eager_with_every_input_size_symbolic(case: Any) -> None:
    """Each sample traced with every tensor size symbolic (automatic dynamic's entries) matches eager,
    or declines (an in-place write through a reshape whose aliasing needs concrete sizes, or a question
    about the memory layout); declining is safe: automatic dynamic then keeps the sizes constant
    (compiler/runtime/cache.py)."""
    dtype = torch.float32 if torch.float32 in case.dtypes else case.dtypes[0]
    options = make_options("constant", None)
    checked = declined = 0
    for sample in samples_for(case, dtype, seed=0):
        for variant in case.variants:
            fn, tensors = as_function(variant, sample)
            manual_seed(0)  # NOTE: before both calls: random ops must draw alike
            expected = fn(*[t.clone() for t in tensors])
            sizes = frozenset(size_name(f"arg{i}", d) for i, t in enumerate(tensors) for d in range(t.dim()))
            try:
                entry = compile_entry(fn, options, tuple(tensors), {}, sizes)
            except NotImplementedError as error:
                assert "reshaped" in str(error) or "memory layout" in str(error), error
                declined += 1
                continue
            manual_seed(0)
            got = entry.computation(*entry.prologue(tuple(t.clone() for t in tensors), {}))
            if case.compare_values:
                assert_matches(got, expected, case)
            checked += 1
    assert checked + declined > 0, f"{case.name} has no samples for {dtype}"


def test_tracing_trace_with_symbolic_sizes_passes_check_trace() -> None:
    jfn = compiler.jit(lambda a, d0: torch.split(a, (d0, a.size(0) - d0))[1].mean(0), numbers="symbolic")
    jfn(torch.randn(10, 3), 2)
    check_trace(compiler.last_traces(jfn)[0])
