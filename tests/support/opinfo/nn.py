"""Op cases: reductions, softmax, norms, losses, matmul/linear, attention."""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch
import torch.nn.functional as F

from tests.support.opinfo.samples import ALL, FLOATS, Maker, OpCase, Sample, method, named

# ---------------------------------------------------------------------------------------------
# Reductions


def _reduction_inputs(make: Maker, **kw: float) -> Iterator[torch.Tensor]:
    yield make(4, 5, 6, **kw)
    yield make(4, 5, 6, noncontiguous=True, **kw)
    yield make(3, 1, 7, transposed=True, **kw)


def _dim_samples(make: Maker, dims: tuple = (None, 0, -1, (0, 2), [1, -1], ()), **kw: float) -> Iterator[Sample]:
    for i, x in enumerate(_reduction_inputs(make, **kw)):
        yield Sample((x,))
        for dim in dims:
            if dim is None:
                continue
            yield Sample((x, dim), {"keepdim": bool(i % 2)})
    yield Sample((make(**kw),))  # 0-d
    yield Sample((make(**kw), 0))
    yield Sample((make(**kw), -1), {"keepdim": True})


def _sum_samples(make: Maker) -> Iterator[Sample]:
    yield from _dim_samples(make)
    yield Sample((make(6, 7), 1), {"keepdim": True, "dtype": torch.float64})
    yield Sample((make(6, 7),), {"dtype": torch.float32})
    yield Sample((make(6, 7, dtype=torch.bool), 0))
    yield Sample((make(0, 3), 0))


def _prod_samples(make: Maker) -> Iterator[Sample]:
    kw = {"low": 0.5, "high": 1.5} if make.is_float else {"low": -2, "high": 3}
    for i, x in enumerate(_reduction_inputs(make, **kw)):
        yield Sample((x,))
        yield Sample((x, -1), {"keepdim": bool(i % 2)})
    yield Sample((make(**kw), 0))
    yield Sample((make(3, 4, **kw), 1), {"dtype": torch.float64})
    yield Sample((make(3, 4, dtype=torch.bool),))


def _mean_samples(make: Maker) -> Iterator[Sample]:
    if not make.is_float:
        yield Sample((make(3, 4), 1), {"dtype": torch.float64})
        return
    yield from _dim_samples(make)
    yield Sample((make(3, 4),), {"dtype": torch.float64})


def _var_samples(make: Maker) -> Iterator[Sample]:
    for i, x in enumerate(_reduction_inputs(make)):
        yield Sample((x,))
        yield Sample((x, 1), {"keepdim": bool(i % 2)})
        yield Sample((x, (0, 2)), {"correction": 0})
        yield Sample((x, -1), {"correction": 2, "keepdim": True})
        yield Sample((x,), {"dim": [0, 1], "unbiased": False})
    yield Sample((make(3, 4), 1, True, True))  # the (dim, unbiased, keepdim) overload
    yield Sample((make(3, 4), False))  # the (unbiased) overload
    yield Sample((make(3, 4), 1), {"correction": 1.5})
    yield Sample((make(3, 1), 1))  # one element: 0 / 0 gives nan, as in eager
    yield Sample((make(),))


def _logsumexp_samples(make: Maker) -> Iterator[Sample]:
    for i, x in enumerate(_reduction_inputs(make)):
        for dim in (0, -1, (0, 2), [1, -1]):
            yield Sample((x, dim), {"keepdim": bool(i % 2)})
    yield Sample((make(), 0))  # 0-d: the element itself
    yield Sample((make(0, 3), 0))  # empty slices: -inf
    if make.is_float:
        yield Sample((make(4, 7, low=-1000, high=1000), 1))  # exp overflows without the shift
        x = make(3, 4)
        x[0] = -math.inf  # a row of -inf: -inf, not nan
        x[1, 2] = math.inf
        x[2, 1] = -math.inf
        yield Sample((x, 1))


def _extremum_samples(make: Maker) -> Iterator[Sample]:
    yield from _dim_samples(make)
    yield Sample((make.small_values(6, 5), 1))  # ties


def _cumsum_samples(make: Maker) -> Iterator[Sample]:
    for x in _reduction_inputs(make):
        for dim in (0, -1, 1):
            yield Sample((x, dim))
    yield Sample((make(4, 6), 1), {"dtype": torch.float64})
    yield Sample((make(1, 5), 0))
    yield Sample((make(), 0))


def _cumprod_samples(make: Maker) -> Iterator[Sample]:
    kw = {"low": 0.5, "high": 1.5} if make.is_float else {"low": -2, "high": 3}
    for x in _reduction_inputs(make, **kw):
        for dim in (0, -1, 1):
            yield Sample((x, dim))
    with_zeros = make.small_values(4, 6)  # zeros and signs
    yield Sample((with_zeros, 1))
    yield Sample((make(4, 6, **kw), 1), {"dtype": torch.float64})
    yield Sample((make(1, 5, **kw), 0))
    yield Sample((make(**kw), 0))


def _sort_samples(make: Maker) -> Iterator[Sample]:
    for i, x in enumerate(_reduction_inputs(make)):
        yield Sample((x,))
        yield Sample((x, 0, bool(i % 2)))
        yield Sample((x,), {"dim": 1, "descending": True, "stable": True})
    ties = make.small_values(6, 5)
    yield Sample((ties,), {"dim": 1, "stable": True})
    yield Sample((ties,), {"dim": 0, "descending": True, "stable": True})
    yield Sample((make(1, 5), 0))
    yield Sample((make(),))
    if make.is_float:
        x = make(4, 5)
        x[1, 3] = x[2, 0] = float("nan")
        yield Sample((x, 1))
        yield Sample((x, 0, True))


def _topk_samples(make: Maker) -> Iterator[Sample]:
    for i, x in enumerate(_reduction_inputs(make)):
        yield Sample((x, 3))
        yield Sample((x, 2, 0, bool(i % 2)))
        yield Sample((x, 1), {"dim": -1, "largest": False})
    yield Sample((make(4, 6), 6, 1))
    yield Sample((make(4, 6), 0, 1))
    yield Sample((make(4, 6), 4), {"sorted": False})
    yield Sample((make(), 1))
    if make.is_float:
        x = make(4, 5)
        x[1, 3] = float("nan")
        yield Sample((x, 2))


def _msort_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(5, 3),))
    yield Sample((make(5, 3, noncontiguous=True),))


def _argmax_samples(make: Maker) -> Iterator[Sample]:
    for i, x in enumerate([*_reduction_inputs(make), make.small_values(6, 5)]):
        yield Sample((x,))
        yield Sample((x, 1), {"keepdim": bool(i % 2)})
        yield Sample((x, -1))
    yield Sample((make(3, 4),), {"keepdim": True})
    yield Sample((make(),))
    yield Sample((make(), 0))
    if make.is_float:
        x = make(4, 5)
        x[1, 3] = x[2, 0] = float("nan")
        yield Sample((x, 1))
        yield Sample((x,))


def _max_samples(make: Maker) -> Iterator[Sample]:
    for i, x in enumerate([*_reduction_inputs(make), make.small_values(6, 5)]):
        yield Sample((x,))
        yield Sample((x, 1), {"keepdim": bool(i % 2)})
        yield Sample((x,), {"dim": -1})
    yield Sample((make(), 0))
    yield Sample((make.small_values(3, 4) > 0, 1))  # bool: values and indices, unlike argmax
    yield Sample((make(3, 4), make(4)))  # the elementwise overload
    if make.is_float:
        x = make(4, 5)
        x[1, 3] = float("nan")
        yield Sample((x, 1))


def _logical_reduction_samples(make: Maker) -> Iterator[Sample]:
    x = make.small_values(4, 5, 6)
    for dim in (None, 0, -1, (0, 2)):
        yield Sample((x,) if dim is None else (x, dim))
    yield Sample((make.small_values(4, 5, 6) > -3, 1), {"keepdim": True})
    yield Sample((make(3, 4, noncontiguous=True), 1))
    yield Sample((make(3, 4, dtype=torch.uint8), 0))  # uint8 in, uint8 out


def _reduction(name: str, samples: object, dtypes: tuple = ALL, **tolerances: tuple) -> OpCase:
    return OpCase(name, (getattr(torch, name), method(name)), samples, dtypes, _tolerances(**tolerances))


def _tolerances(**by_name: tuple) -> dict:
    names = {"f32": torch.float32, "f64": torch.float64, "bf16": torch.bfloat16}
    return {names[k]: v for k, v in by_name.items()}


REDUCTIONS = [
    _reduction("sum", _sum_samples, f32=(1e-5, 1e-4)),
    _reduction("prod", _prod_samples),
    _reduction("mean", _mean_samples),
    _reduction("var", _var_samples, FLOATS, f32=(1e-4, 1e-5), bf16=(2e-2, 2e-2)),
    _reduction("std", _var_samples, FLOATS, f32=(1e-4, 1e-5), bf16=(2e-2, 2e-2)),
    OpCase("var_mean", (torch.var_mean,), _var_samples, FLOATS, _tolerances(f32=(1e-4, 1e-5), bf16=(2e-2, 2e-2))),
    OpCase("std_mean", (torch.std_mean,), _var_samples, FLOATS, _tolerances(f32=(1e-4, 1e-5), bf16=(2e-2, 2e-2))),
    OpCase(
        "logsumexp",
        (torch.logsumexp, method("logsumexp"), torch.special.logsumexp),
        _logsumexp_samples,
        ALL,
        _tolerances(f32=(1e-5, 1e-5), bf16=(2e-2, 2e-2)),
    ),
    _reduction("amax", _extremum_samples),
    _reduction("amin", _extremum_samples),
    OpCase(
        "aminmax",
        (torch.aminmax, method("aminmax")),
        lambda make: [Sample((make(4, 5),)), Sample((make(3, 6, transposed=True),), {"dim": 0, "keepdim": True})],
    ),
    _reduction("argmax", _argmax_samples),
    _reduction("cumsum", _cumsum_samples, f32=(1e-5, 1e-5), bf16=(1.6e-2, 5e-2)),
    _reduction("cumprod", _cumprod_samples, f32=(1e-5, 1e-5), bf16=(1.6e-2, 5e-2)),
    _reduction("argmin", _argmax_samples),
    _reduction("sort", _sort_samples),
    _reduction("argsort", _sort_samples),
    _reduction("topk", _topk_samples),
    _reduction("msort", _msort_samples),
    _reduction("max", _max_samples),
    _reduction("min", _max_samples),
    _reduction("any", _logical_reduction_samples),
    _reduction("all", _logical_reduction_samples),
]

# ---------------------------------------------------------------------------------------------
# softmax, norms, losses


def _softmax_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(4, 7), -1))
    yield Sample((make(4, 7, low=-1000, high=1000), 1))  # large logits: stable only after subtracting the max
    yield Sample((make(3, 5, 6, noncontiguous=True), 0))
    yield Sample((make(3, 5, 6, transposed=True), 2))
    yield Sample((make(5, 1), 1))
    yield Sample((make(), 0))
    yield Sample((make(3, 4), 1), {"dtype": torch.float64})


def _softmax_int_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(3, 4), 1), {"dtype": torch.float32})


def _functional_softmax_samples(make: Maker) -> Iterator[Sample]:
    yield from _softmax_samples(make)
    yield Sample((make(3, 4),), {"dim": 1, "dtype": torch.float64})


SOFTMAX_TOL = _tolerances(bf16=(1.6e-2, 2e-2))
NN = [
    OpCase("softmax", (torch.softmax, method("softmax"), torch.special.softmax), _softmax_samples, FLOATS, SOFTMAX_TOL),
    OpCase(
        "log_softmax",
        (torch.log_softmax, method("log_softmax"), torch.special.log_softmax),
        _softmax_samples,
        FLOATS,
        SOFTMAX_TOL,
    ),
    OpCase(
        "softmax_int",
        (torch.softmax, method("softmax"), torch.log_softmax, method("log_softmax")),
        _softmax_int_samples,
        (torch.int64,),
    ),
    OpCase("F.softmax", (F.softmax,), _functional_softmax_samples, FLOATS, SOFTMAX_TOL),
    OpCase("F.log_softmax", (F.log_softmax,), _functional_softmax_samples, FLOATS, SOFTMAX_TOL),
]


def _layer_norm_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(4, 8), (8,)))
    yield Sample((make(4, 8, low=50, high=60), [8], make(8), make(8)))  # a large mean
    yield Sample((make(2, 3, 8, noncontiguous=True), (3, 8), make(3, 8), None, 1e-3))
    yield Sample((make(3, 6, transposed=True), (6,)), {"weight": make(6), "eps": 0.1})
    yield Sample((make(5), [5]), {"bias": make(5)})


def _rms_norm_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(4, 8), (8,)))
    yield Sample((make(4, 8), [8], make(8)))
    yield Sample((make(2, 3, 8, noncontiguous=True), (3, 8), make(3, 8), 1e-3))
    yield Sample((make(3, 6, transposed=True), (6,)), {"weight": make(6), "eps": 0.1})
    yield Sample((make(4, 8, low=-1e-3, high=1e-3), (8,)))  # tiny values: the default eps matters
    if make.dtype == torch.bfloat16:
        yield Sample((make(4, 8), (8,), make(8, dtype=torch.float32)))


NORM_TOL = _tolerances(f32=(1e-4, 1e-5), bf16=(2e-2, 3e-2))
NN += [
    OpCase("layer_norm", (F.layer_norm, torch.layer_norm), _layer_norm_samples, FLOATS, NORM_TOL),
    OpCase("rms_norm", (F.rms_norm, torch.rms_norm), _rms_norm_samples, FLOATS, NORM_TOL),
]


def _targets(classes: int, *shape: int, ignored: bool = True) -> torch.Tensor:
    target = torch.randint(0, classes, shape)
    if ignored and target.numel() > 2:
        target.view(-1)[1] = -100
    return target


def _cross_entropy_samples(make: Maker) -> Iterator[Sample]:
    for reduction in ("mean", "sum", "none"):
        yield Sample((make(6, 5), _targets(5, 6)), {"reduction": reduction})
        yield Sample((make(6, 5), _targets(5, 6)), {"reduction": reduction, "weight": make(5, low=0.1, high=2)})
        yield Sample((make(3, 4, 5, noncontiguous=True), _targets(4, 3, 5)), {"reduction": reduction})
        yield Sample(
            (make(6, 5, transposed=True), _targets(5, 6)),
            {"reduction": reduction, "label_smoothing": 0.1, "weight": make(5, low=0.1, high=2)},
        )
        yield Sample((make(6, 5), _targets(5, 6)), {"reduction": reduction, "label_smoothing": 0.25})
        probabilities = torch.softmax(make(6, 5), 1)
        yield Sample((make(6, 5), probabilities), {"reduction": reduction, "label_smoothing": 0.2})
        yield Sample((make(6, 5), probabilities), {"reduction": reduction, "weight": make(5, low=0.1, high=2)})
    yield Sample((make(5), _targets(5)))  # a single example: (C,) and a 0-d target
    yield Sample((make(6, 5), _targets(5, 6, ignored=False)), {"ignore_index": 2})
    yield Sample((make(3, 5), torch.full((3,), -100)))  # everything ignored: nan, as in eager


def _nll_loss_samples(make: Maker) -> Iterator[Sample]:
    for reduction in ("mean", "sum", "none"):
        yield Sample((torch.log_softmax(make(6, 5), 1), _targets(5, 6)), {"reduction": reduction})
        yield Sample(
            (torch.log_softmax(make(3, 4, 5, noncontiguous=True), 1), _targets(4, 3, 5)),
            {"reduction": reduction, "weight": make(4, low=0.1, high=2)},
        )


LOSS_TOL = _tolerances(f32=(1e-5, 1e-4), bf16=(2e-2, 5e-2))
NN += [
    OpCase("cross_entropy", (F.cross_entropy,), _cross_entropy_samples, FLOATS, LOSS_TOL),
    OpCase("nll_loss", (F.nll_loss,), _nll_loss_samples, FLOATS, LOSS_TOL),
]

# ---------------------------------------------------------------------------------------------
# matmul, linear, attention


def _matmul_samples(make: Maker) -> Iterator[Sample]:
    kw = {} if make.is_float else {"low": -3, "high": 4}
    shapes = [
        ((3, 4), (4, 5)),
        ((4,), (4,)),
        ((4,), (4, 5)),
        ((3, 4), (4,)),
        ((2, 3, 4), (4, 5)),
        ((2, 3, 4), (4,)),
        ((4,), (2, 4, 5)),
        ((2, 1, 3, 4), (5, 4, 2)),
        ((3, 4), (2, 4, 5)),
    ]
    for i, (a, b) in enumerate(shapes):
        yield Sample((make(*a, noncontiguous=i % 3 == 1, **kw), make(*b, transposed=len(b) > 1 and i % 2 == 0, **kw)))


def _bmm_samples(make: Maker) -> Iterator[Sample]:
    kw = {} if make.is_float else {"low": -3, "high": 4}
    yield Sample((make(2, 3, 4, **kw), make(2, 4, 5, **kw)))
    yield Sample((make(2, 3, 4, transposed=True, **kw), make(2, 4, 1, noncontiguous=True, **kw)))


def _mm_samples(make: Maker) -> Iterator[Sample]:
    kw = {} if make.is_float else {"low": -3, "high": 4}
    yield Sample((make(3, 4, **kw), make(4, 5, transposed=True, **kw)))


def _linear_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(3, 4), make(5, 4)))
    yield Sample((make(3, 4), make(5, 4), make(5)))
    yield Sample((make(2, 3, 4, noncontiguous=True), make(5, 4, transposed=True), make(5)))
    yield Sample((make(4), make(5, 4), make(5)))
    yield Sample((make(3, 4), make(4)))
    yield Sample((make(3, 4), make(5, 4), make()))  # a bias that broadcasts


def _sdpa_samples(make: Maker) -> Iterator[Sample]:
    q, k, v = make(2, 3, 5, 8), make(2, 3, 6, 8), make(2, 3, 6, 4)
    yield Sample((q, k, v))
    yield Sample((make(2, 3, 6, 8, noncontiguous=True), k, v), {"is_causal": True})
    yield Sample((q, k, v), {"attn_mask": make(5, 6, dtype=torch.bool)})
    yield Sample((q, k, v), {"attn_mask": make(2, 1, 5, 6), "scale": 0.3})
    yield Sample((make(4, 8), make(6, 8), make(6, 8)), {"scale": 1.0})
    grouped_q, grouped_k, grouped_v = make(2, 4, 5, 8), make(2, 2, 6, 8), make(2, 2, 6, 4)  # enable_gqa
    yield Sample((grouped_q, grouped_k, grouped_v), {"is_causal": True, "enable_gqa": True})
    yield Sample((grouped_q, grouped_k, grouped_v), {"attn_mask": make(5, 6, dtype=torch.bool), "enable_gqa": True})
    yield Sample((make(2, 4, 1, 8), grouped_k, grouped_v), {"enable_gqa": True})


def _matmul_method(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a @ b


def _rmatmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return b.__rmatmul__(a)


MATMUL_TOL = _tolerances(f32=(1e-5, 1e-5), bf16=(1.6e-2, 2e-2))
NN += [
    OpCase(
        "matmul",
        (torch.matmul, method("matmul"), named("@", _matmul_method), named("rmatmul", _rmatmul), torch.linalg.matmul),
        _matmul_samples,
        ALL,
        MATMUL_TOL,
    ),
    OpCase("bmm", (torch.bmm, method("bmm")), _bmm_samples, ALL, MATMUL_TOL),
    OpCase("mm", (torch.mm, method("mm")), _mm_samples, ALL, MATMUL_TOL),
    OpCase("linear", (F.linear,), _linear_samples, FLOATS, MATMUL_TOL),
    OpCase("scaled_dot_product_attention", (F.scaled_dot_product_attention,), _sdpa_samples, FLOATS, MATMUL_TOL),
]

CASES = REDUCTIONS + NN

# ---------------------------------------------------------------------------------------------
# Vector norms, normalize, cosine_similarity


def _with_zero_row(make: Maker) -> torch.Tensor:
    x = make(4, 6)
    x[1] = 0  # an all-zero row: norm 0, count 0
    return x


def _vector_norm_samples(make: Maker) -> Iterator[Sample]:
    for ord in (2, 1, math.inf, -math.inf, 0, 3, 0.5):
        for i, x in enumerate(_reduction_inputs(make)):
            yield Sample((x, ord))
            yield Sample((x, ord, -1 if i else (0, 2), bool(i % 2)))
        yield Sample((_with_zero_row(make), ord, 1))
        yield Sample((make(), ord))  # 0-d
    yield Sample((make(3, 4),), {"dim": [0, 1], "keepdim": True})
    yield Sample((make(3, 4), 2.5, 1), {"dtype": torch.float64})


def _norm_samples(make: Maker) -> Iterator[Sample]:
    for p in ("fro", 2, 1, math.inf, -math.inf, 0, 3.0):
        for i, x in enumerate(_reduction_inputs(make)):
            yield Sample((x, p))
            yield Sample((x, p, -1 if i else (0, 1), bool(i % 2)))
        yield Sample((_with_zero_row(make),), {"p": p, "dim": 1})
    yield Sample((make(3, 4),))
    yield Sample((make(),))
    yield Sample((make(3, 4), 2, 1), {"dtype": torch.float64})


def _normalize_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(4, 6),))
    yield Sample((_with_zero_row(make),), {"dim": 1})  # a zero row stays zero (the norm clamps to eps)
    yield Sample((make(3, 5, 6, noncontiguous=True),), {"p": 1.0, "dim": 2})
    yield Sample((make(3, 6, transposed=True), math.inf, 0))
    yield Sample((make(4, 6, low=-1e-3, high=1e-3), 2.0, -1, 0.1))  # norms below eps
    yield Sample((make(5), 3.0, 0))


def _cosine_similarity_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(4, 6), make(4, 6)))
    yield Sample((make(3, 5, 6, noncontiguous=True), make(3, 5, 6, transposed=True)), {"dim": -1})
    yield Sample((make(4, 6), make(1, 6)))  # broadcasting
    yield Sample((make(2, 1, 6), make(3, 6)), {"dim": 2})
    yield Sample((_with_zero_row(make), make(4, 6)))  # a zero vector: similarity 0
    yield Sample((make(4, 6, low=-1e-9, high=1e-9), make(4, 6)), {"eps": 1e-6})  # norms below eps
    yield Sample((make(6), make(6)), {"dim": 0})


def _pairwise_distance_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(4, 6), make(4, 6)))
    yield Sample((make(3, 5, 6, noncontiguous=True), make(1, 6)), {"p": 1.0, "keepdim": True})
    yield Sample((make(4, 6), make(4, 6, transposed=True)), {"eps": 0.0, "p": 3.0})
    yield Sample((make(6), make(6)))


def _linalg_norm_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(3, 5, 6, noncontiguous=True),))  # the flattened 2-norm
    yield Sample((make(4, 6),), {"dim": -1})
    yield Sample((make(6),), {"ord": 1})
    yield Sample((make(3, 6, transposed=True), 3.0, 0, True))
    yield Sample((make(3, 4, 5),), {"dim": (0, 2), "keepdim": True})  # Frobenius over two dims
    yield Sample((make(4, 6), "fro"))
    yield Sample((make(4, 6),), {"ord": math.inf, "dim": (1,)})


NORMS_TOL = _tolerances(f32=(1e-4, 1e-5), bf16=(2e-2, 3e-2))
NORMS_AND_LOSSES = [
    OpCase("linalg.vector_norm", (torch.linalg.vector_norm,), _vector_norm_samples, FLOATS, NORMS_TOL),
    OpCase("norm", (torch.norm, method("norm")), _norm_samples, FLOATS, NORMS_TOL),
    OpCase("F.normalize", (F.normalize,), _normalize_samples, FLOATS, NORMS_TOL),
    OpCase(
        "cosine_similarity",
        (F.cosine_similarity, torch.cosine_similarity),
        _cosine_similarity_samples,
        FLOATS,
        NORMS_TOL,
    ),
    OpCase("linalg.norm", (torch.linalg.norm,), _linalg_norm_samples, FLOATS, NORMS_TOL),
    OpCase(
        "pairwise_distance",
        (F.pairwise_distance, torch.pairwise_distance),
        _pairwise_distance_samples,
        FLOATS,
        NORMS_TOL,
    ),
]
CASES += NORMS_AND_LOSSES

# ---------------------------------------------------------------------------------------------
# Pointwise losses


REDUCTIONS_MODES = ("mean", "sum", "none")


def _regression_samples(make: Maker, weighted: bool = True) -> Iterator[Sample]:
    for reduction in REDUCTIONS_MODES:
        yield Sample((make(4, 6), make(4, 6)), {"reduction": reduction})
        yield Sample((make(3, 5, 6, noncontiguous=True), make(3, 5, 6, transposed=True)), {"reduction": reduction})
        if weighted:
            yield Sample((make(4, 6), make(4, 6)), {"reduction": reduction, "weight": make(4, 6, low=0.1, high=2)})
    yield Sample((make(), make()))  # 0-d
    yield Sample((make(4, 6), make(4, 6)), {"size_average": False})  # the legacy arguments
    if make.dtype == torch.bfloat16:
        yield Sample((make(4, 6), make(4, 6, dtype=torch.float32)))  # promotes to float32


def _l1_samples(make: Maker) -> Iterator[Sample]:
    # NOTE: no weight=: torch 2.13's F.l1_loss drops it on the __torch_function__ path (proxies).
    yield from _regression_samples(make, weighted=False)


def _smooth_l1_samples(make: Maker) -> Iterator[Sample]:
    yield from _regression_samples(make, weighted=False)
    for beta in (0.0, 0.5, 3.0):
        yield Sample((make(4, 6), make(4, 6)), {"beta": beta, "reduction": "none"})


def _huber_samples(make: Maker) -> Iterator[Sample]:
    for reduction in REDUCTIONS_MODES:
        yield Sample((make(4, 6), make(4, 6)), {"reduction": reduction, "delta": 0.5})
        yield Sample((make(3, 6, transposed=True), make(3, 6)), {"reduction": reduction})
        yield Sample((make(4, 6), make(4, 6)), {"reduction": reduction, "weight": make(4, 6, low=0.1, high=2)})
    yield Sample((make(), make()), {"delta": 3.0})


def _probabilities(make: Maker, *shape: int, **kw: bool) -> torch.Tensor:
    return make(*shape, low=0.0, high=1.0, **kw)


def _bce_with_logits_samples(make: Maker) -> Iterator[Sample]:
    for reduction in REDUCTIONS_MODES:
        yield Sample((make(4, 6), _probabilities(make, 4, 6)), {"reduction": reduction})
        yield Sample(
            (make(3, 5, 6, noncontiguous=True), _probabilities(make, 3, 5, 6, transposed=True)),
            {"reduction": reduction, "weight": make(5, 6, low=0.1, high=2)},
        )
        yield Sample(
            (make(4, 6), _probabilities(make, 4, 6)),
            {"reduction": reduction, "pos_weight": make(6, low=0.1, high=3), "weight": make(1, 6, low=0.1, high=2)},
        )
    yield Sample((make(4, 6, low=-1000, high=1000), _probabilities(make, 4, 6)))  # exp overflows naively
    yield Sample((make(4, 6, low=-100, high=100), _probabilities(make, 4, 6)), {"reduction": "none"})
    yield Sample((make(), _probabilities(make)))


def _bce_samples(make: Maker) -> Iterator[Sample]:
    for reduction in REDUCTIONS_MODES:
        yield Sample((_probabilities(make, 4, 6), _probabilities(make, 4, 6)), {"reduction": reduction})
        yield Sample(
            (_probabilities(make, 3, 6, transposed=True), _probabilities(make, 3, 6, noncontiguous=True)),
            {"reduction": reduction, "weight": make(3, 6, low=0.1, high=2)},
        )
    x = _probabilities(make, 4, 6)
    x[0, :3] = 0.0  # log(0) clamps to -100
    x[1, :3] = 1.0
    yield Sample((x, _probabilities(make, 4, 6)))
    yield Sample((_probabilities(make), _probabilities(make)))


def _kl_div_samples(make: Maker) -> Iterator[Sample]:
    for reduction in ("batchmean", "sum", "none", "mean"):
        log_p = torch.log_softmax(make(4, 6), 1)
        yield Sample((log_p, torch.softmax(make(4, 6), 1)), {"reduction": reduction})
        yield Sample((log_p, torch.log_softmax(make(4, 6), 1)), {"reduction": reduction, "log_target": True})
    target = _probabilities(make, 3, 6, noncontiguous=True)
    target[:, ::2] = 0.0  # zero targets contribute 0 (xlogy), not nan
    yield Sample((make(3, 6, transposed=True), target), {"reduction": "batchmean"})
    yield Sample((make(3, 6), target), {"reduction": "none"})
    yield Sample((make(2, 3, 6), _probabilities(make, 3, 6)), {"reduction": "batchmean"})  # broadcasting
    yield Sample((make(), _probabilities(make)), {"reduction": "batchmean"})  # 0-d: no batch to divide by


LOSSES_TOL = _tolerances(f32=(1e-5, 1e-4), bf16=(2e-2, 5e-2))
NORMS_AND_LOSSES += [
    OpCase("mse_loss", (F.mse_loss,), _regression_samples, FLOATS, LOSSES_TOL),
    OpCase("l1_loss", (F.l1_loss,), _l1_samples, FLOATS, LOSSES_TOL),
    OpCase("smooth_l1_loss", (F.smooth_l1_loss,), _smooth_l1_samples, FLOATS, LOSSES_TOL),
    OpCase("huber_loss", (F.huber_loss,), _huber_samples, FLOATS, LOSSES_TOL),
    OpCase(
        "binary_cross_entropy_with_logits",
        (F.binary_cross_entropy_with_logits,),
        _bce_with_logits_samples,
        FLOATS,
        LOSSES_TOL,
    ),
    OpCase("binary_cross_entropy", (F.binary_cross_entropy,), _bce_samples, FLOATS, LOSSES_TOL),
    OpCase("kl_div", (F.kl_div,), _kl_div_samples, FLOATS, LOSSES_TOL),
]
CASES += NORMS_AND_LOSSES[-7:]
