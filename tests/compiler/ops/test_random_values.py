"""torch.randn / torch.rand / randn_like / rand_like through the compiler (prims.random_values):
the same numbers as eager under the same seed, new numbers on every call, never merged, in order
with dropout's draws, gradients through the values they scale, and errors for what is refused."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import compiler

SEEDS = [0, 1, 2]


def _draws_as_eager(fn, *args, numbers: str = "constant") -> list:
    """Calls `fn` compiled and eagerly under each seed; every output equal, bit for bit."""
    jitted = compiler.jit(fn, numbers=numbers)
    outputs = []
    for seed in SEEDS:
        torch.manual_seed(seed)
        compiled = jitted(*args)
        torch.manual_seed(seed)
        torch.testing.assert_close(compiled, fn(*args), atol=0, rtol=0)
        outputs.append(compiled)
    return outputs


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_randn_and_rand_draw_as_eager_under_the_same_seed(dtype: torch.dtype) -> None:
    def noisy(x):
        return (
            x + torch.randn(x.shape[0], 5, dtype=dtype),
            torch.rand((3, 1, 5), dtype=dtype) * 2,
            torch.randn_like(x),
            torch.rand_like(x, dtype=torch.float64),
            torch.randn([]),
        )

    outputs = _draws_as_eager(noisy, torch.randn(4, 5, dtype=dtype))
    assert not torch.equal(outputs[0][2], outputs[1][2])  # each seed (and call) draws anew


def test_each_call_draws_new_numbers_and_equal_draws_are_not_merged() -> None:
    def two(x):
        return torch.randn_like(x), torch.randn_like(x), torch.rand(3)

    jitted = compiler.jit(two)
    x = torch.zeros(6)
    a, b, _ = jitted(x)
    c, _, _ = jitted(x)
    assert not torch.equal(a, b) and not torch.equal(a, c)
    assert compiler.cache_stats(jitted).misses == 1
    assert str(compiler.last_traces(jitted)[-1]).count("prims.random_values(") == 3


def test_draws_keep_their_order_with_dropout() -> None:
    def mixed(x):
        return F.dropout(x, 0.4) + torch.rand_like(x), torch.randn(2) * F.dropout(x, 0.2).sum()

    _draws_as_eager(mixed, torch.randn(8, 3))


def test_symbolic_sizes_draw_as_eager() -> None:
    def noisy(x):
        return x * torch.randn(x.shape[0], x.shape[1]) + torch.rand_like(x)

    for rows in (3, 5, 1):
        _draws_as_eager(noisy, torch.randn(rows, 4), numbers="symbolic")


def test_gradients_flow_through_what_the_noise_scales_not_into_the_noise() -> None:
    def loss(x):
        return (x * torch.randn_like(x) + torch.rand(x.shape[-1])).sin().sum()

    x = torch.randn(5, 4)
    mine, theirs = x.clone().requires_grad_(), x.clone().requires_grad_()
    torch.manual_seed(3)
    compiler.jit(loss)(mine).backward()
    torch.manual_seed(3)
    loss(theirs).backward()
    torch.testing.assert_close(mine.grad, theirs.grad)


def test_refused_arguments_name_the_problem() -> None:
    x = torch.randn(3)
    with pytest.raises(NotImplementedError, match="generator= is not supported"):
        compiler.jit(lambda x: x + torch.randn(3, generator=torch.Generator()))(x)
    with pytest.raises(TypeError, match=r"expected a floating point dtype, got torch\.int64"):
        compiler.jit(lambda x: x + torch.rand(3, dtype=torch.int64))(x)
    with pytest.raises(TypeError, match="must be tuple of ints"):  # torch's own argument check
        compiler.jit(lambda x: x + torch.randn(3.5))(x)


@pytest.mark.parametrize(("p", "training"), [(0.3, True), (0.0, True), (0.3, False), (1.0, True)])
def test_dropout_in_place_writes_its_input_as_eager(p: float, training: bool) -> None:
    def in_place(x):
        y = x * 2
        out = F.dropout(y, p, training, inplace=True)
        return out, y, out is y

    x = torch.randn(6, 4)
    for seed in SEEDS:
        torch.manual_seed(seed)
        got = compiler.jit(in_place)(x)
        torch.manual_seed(seed)
        want = in_place(x)
        torch.testing.assert_close(got[:2], want[:2], atol=0, rtol=0)
        assert got[2] == want[2]


def test_in_place_draws_match_eager_under_the_same_seed() -> None:
    """uniform_, normal_ and exponential_ (a router's jitter) draw eager's numbers, scaled as eager
    scales them (within a rounding: eager scales inside its kernel), and write into their target."""

    def jittered(x):
        gates = torch.empty_like(x, memory_format=torch.legacy_contiguous_format).exponential_().log()
        noise = torch.empty_like(x).uniform_(0.99, 1.01)
        y = x.clone()
        y.normal_(2.0, 0.5)
        return gates, x * noise, y, torch.empty(5, 7).exponential_(3.0), torch.empty(3).uniform_()

    x = torch.randn(4, 33)
    jitted = compiler.jit(jittered)
    for seed in SEEDS:
        torch.manual_seed(seed)
        got = jitted(x)
        torch.manual_seed(seed)
        expected = jittered(x)
        for index, (g, e) in enumerate(zip(got, expected, strict=True)):
            torch.testing.assert_close(g, e, atol=0, rtol=1e-6, msg=lambda m, index=index: f"output {index}: {m}")
    assert not torch.equal(got[0], jitted(x)[0]), "a new draw on every call"


def _conv_features(x: torch.Tensor) -> torch.Tensor:
    return torch.relu(x.transpose(1, 2))  # [batch, channels, length] read as [batch, length, channels]


@pytest.mark.parametrize(
    "layout",
    [_conv_features, lambda x: x.transpose(1, 2) * 2, lambda x: x.permute(2, 0, 1)[..., ::2], lambda x: x[:, ::2]],
    ids=["relu_of_transposed", "transposed_product", "permuted_slice", "slice_with_gaps"],
)
def test_dropout_of_a_strided_value_drops_what_eager_drops(layout) -> None:
    # eager fills empty_like(input) in memory order: the noise of a transposed value is drawn so too
    _draws_as_eager(lambda x: F.dropout(layout(x), 0.3), torch.randn(2, 6, 5))
    _draws_as_eager(lambda x: F.dropout(x, 0.3), layout(torch.randn(2, 6, 5)))  # such an input


def test_a_draw_nobody_reads_still_advances_the_generator_as_in_eager() -> None:
    def head_after_an_unread_branch(x):
        F.dropout(x * 3, 0.5)  # a branch the caller never reads (an encoder output a head ignores)
        torch.rand(4)
        return F.dropout(x * 2, 0.3)

    _draws_as_eager(head_after_an_unread_branch, torch.randn(8, 6))
