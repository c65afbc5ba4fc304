"""In-place updates the way users write them, into inputs and into intermediates, through slices,
views and transposes, jitted against eager (outputs and every input's final contents):
tests/support/user_patterns.py. Inputs written into never require grad (eager forbids it for
leaves); writes into intermediates are checked with gradients."""

from __future__ import annotations

import pytest
import torch

import compiler
from tests.support.user_patterns import Arg, Pattern, check_pattern, fused_options

X = Arg(("B", "D"))
OUT = Arg(("B", "D"), written=True)
OUT3 = Arg(("B", "N", "D"), written=True)
# NOTE: a write of a value requiring grad into an input that does not is run, but the input is
# not made to require grad as eager makes it; values written into inputs carry no gradient here.
Y = Arg(("B", "D"), grad=False)
# NOTE: a slice write covering a whole intermediate leaves it requiring grad in eager (with zero
# gradients), not in the compiler; such writes are kept partial.
KEEP_3 = ({"B": 3, "N": 5, "D": 6}, {"B": 1, "N": 1, "D": 3}, {"B": 2, "N": 7, "D": 4})
KEEP_2 = ({"B": 3, "N": 5, "D": 6}, {"B": 1, "N": 1, "D": 2}, {"B": 2, "N": 7, "D": 4})


def slice_assign_input(out, y):
    out[:, :2] = y[:, :2] * 2
    return out.sum()


def slice_assign_scalar(out):
    out[..., -1] = 0.0
    out[0] = 1.0
    return out


def mul_add_chain(out, a, b):
    out.mul_(a).add_(b)
    return out


def add_alpha_and_addcmul(out, a, b):
    out.add_(a, alpha=-0.5).addcmul_(a, b, value=2.0)
    return out * 1


def copy_into_input(out, y):
    out.copy_(y.t().t() * 3)


def copy_broadcast_and_cast(out, w):
    out.copy_(w.double())
    return out


def clamp_in_place(out):
    out.clamp_(min=0)
    out.clamp_(max=0.5)
    return out.mean()


def masked_fill_in_place(out, m):
    out.masked_fill_(m, -1.0)
    return out


def index_add_in_place(out, idx, src):
    out.index_add_(0, idx, src)
    return out


def index_copy_and_fill(out, idx):
    out.index_fill_(0, idx, 2.0)
    return out


def scatter_add_in_place(out, idx, src):
    return out.scatter_add_(1, idx, src)


def write_through_view(out):
    v = out.view(-1)
    v[::2] = 5.0
    return out


def write_through_transpose(out, y):
    out.t()[0] += y[:, 0]
    out.transpose(0, 1)[1:].mul_(2)
    return out


def write_through_unsqueeze_and_select(out3):
    out3[:, 0].zero_()
    out3[..., 1:2].unsqueeze(0).mul_(3)
    return out3.sum(-1)


def intermediate_slice_assign(x, y):
    h = x * 2
    h[:, :2] = y[:, :2]
    return h.sin()


def intermediate_inplace_chain(x):
    h = x.clone()
    h.mul_(2).add_(1).relu_()
    h[h > 2] = 2.0
    return h


def intermediate_masked_scatter(x, y):
    h = x.clone()
    h[:, 1:] += y[:, :-1]
    h[:, 0] -= 1
    return h * x


def intermediate_index_put(x, idx, y):
    h = torch.zeros_like(x)
    h[idx] = y[: idx.shape[0]]
    return h + x


def accumulate_over_loop(x):
    acc = torch.zeros(x.shape[-1], dtype=x.dtype)
    for i in range(x.shape[0]):
        acc += x[i]
    return acc


def normalize_rows_in_place(out):
    out /= out.norm(dim=-1, keepdim=True).clamp(min=1e-6)
    return out


def exp_sub_in_place(x):
    h = x - x.amax(-1, keepdim=True)
    h.exp_()
    h /= h.sum(-1, keepdim=True)
    return h


def fill_diagonal_via_mask(x):
    h = x[:, None, :] * x[:, :, None]
    eye = torch.eye(x.shape[-1], dtype=torch.bool)
    h.masked_fill_(eye, 0.0)
    return h


def out_kwarg_style(x, out):
    torch.add(x, 1, out=out)
    return out


def where_in_place_update(out, y):
    out.copy_(torch.where(y > 0, y, out))
    return out


def input_returned_after_write(out):
    out.sub_(1)
    return out, out.view(-1)


def setitem_with_tensor_value(out, y):
    out[:, 1] = y.sum(-1)
    return out


def lerp_in_place(out, y):
    out.lerp_(y, 0.1)
    return out


def write_through_diagonal(out):
    out.diagonal().fill_(0.5)
    out.diagonal(1).mul_(2)
    return out


def write_through_diagonal_of_leading_dims(out3):
    out3.diagonal(0, 0, 1).zero_()
    out3.diagonal(-1, 1, 0)[1:] += 1
    return out3


def write_through_no_op_cast(out):
    out.float().mul_(2)  # float32 in, float32 out: eager returns `out` itself, and so writes into it
    out.to(torch.float32).add_(1)
    out.contiguous().neg_()
    return out


def write_through_reshape_of_contiguous(out):
    out.reshape(-1)[1::2] = 0.0
    out.flatten()[0] += 1
    return out


def cast_copy_then_write(x):
    h = x.double()
    h.mul_(3)
    g = x.to(torch.float32, copy=True)
    g.zero_()
    return h.float() + g, x


def zero_then_accumulate(out, y):
    out.zero_()
    out += y
    out *= 2
    return out


INPLACE_PATTERNS = [
    Pattern(slice_assign_input, (OUT, Y), sizes=KEEP_2),
    Pattern(slice_assign_scalar, (OUT,)),
    Pattern(mul_add_chain, (OUT, Y, Arg(("D",), grad=False))),
    Pattern(add_alpha_and_addcmul, (OUT, Y, Y)),
    Pattern(copy_into_input, (OUT, Y)),
    Pattern(copy_broadcast_and_cast, (OUT, Arg(("D",), grad=False))),
    Pattern(clamp_in_place, (OUT,)),
    Pattern(masked_fill_in_place, (OUT, Arg(("B", "D"), kind="bool"))),
    Pattern(index_add_in_place, (OUT, Arg(("K",), kind="long:B"), Arg(("K", "D"), grad=False))),
    Pattern(index_copy_and_fill, (OUT, Arg(("K",), kind="long:B"))),
    Pattern(scatter_add_in_place, (OUT, Arg(("B", "K"), kind="long:D"), Arg(("B", "K"), grad=False))),
    Pattern(write_through_view, (OUT,)),
    Pattern(write_through_transpose, (OUT, Y), sizes=KEEP_2),
    Pattern(write_through_unsqueeze_and_select, (OUT3,), sizes=KEEP_2),
    Pattern(intermediate_slice_assign, (X, Y), sizes=KEEP_3),
    Pattern(intermediate_inplace_chain, (X,)),
    Pattern(intermediate_masked_scatter, (X, Y), sizes=KEEP_2),
    Pattern(intermediate_index_put, (X, Arg(("K",), kind="long:B"), Y)),
    Pattern(accumulate_over_loop, (X,)),
    Pattern(normalize_rows_in_place, (OUT,)),
    Pattern(exp_sub_in_place, (X,)),
    Pattern(fill_diagonal_via_mask, (X,)),
    Pattern(out_kwarg_style, (X, OUT)),
    Pattern(where_in_place_update, (OUT, Y)),
    Pattern(input_returned_after_write, (OUT,)),
    Pattern(setitem_with_tensor_value, (OUT, Y), sizes=KEEP_2),
    Pattern(lerp_in_place, (OUT, Y)),
    Pattern(write_through_diagonal, (OUT,)),
    Pattern(write_through_diagonal_of_leading_dims, (OUT3,)),
    Pattern(write_through_no_op_cast, (OUT,), dtypes=(torch.float32,)),
    Pattern(write_through_reshape_of_contiguous, (OUT,), layouts=("contiguous",)),
    Pattern(cast_copy_then_write, (X,)),
    Pattern(zero_then_accumulate, (OUT, Y)),
]


@pytest.mark.parametrize("pattern", INPLACE_PATTERNS, ids=lambda p: p.name)
def test_inplace_pattern_matches_eager(pattern: Pattern) -> None:
    check_pattern(pattern)


@pytest.mark.parametrize("pattern", INPLACE_PATTERNS[::4], ids=lambda p: p.name)
def test_inplace_pattern_matches_eager_through_the_fusion_pass(pattern: Pattern) -> None:
    check_pattern(pattern, **fused_options())


def sgd_update(params, grads, lr):
    with torch.no_grad():
        for p, g in zip(params, grads):
            p.sub_(lr * g)
            p.clamp_(-1.0, 1.0)
    return params[0]


@pytest.mark.parametrize("shape", [(3, 4), (1, 5), (0, 2)])
def test_update_under_no_grad_of_inputs_requiring_grad_matches_eager(shape: tuple[int, ...]) -> None:
    """An SGD-style update inside the function, of leaves that require grad, as eager allows it:
    same contents, the leaves stay leaves requiring grad, the returned input is that input."""
    jfn = compiler.jit(sgd_update)
    for scale in (1.0, 3.0):  # NOTE: a second call, other values, the same entry
        weights = [torch.randn(shape) * scale, torch.randn(shape[-1])]
        grads = [torch.randn_like(w) for w in weights]
        eager = [w.clone().requires_grad_() for w in weights]
        jitted = [w.clone().requires_grad_() for w in weights]
        sgd_update(eager, grads, 0.5)
        returned = jfn(jitted, grads, 0.5)
        assert returned is jitted[0]
        for got, want in zip(jitted, eager):
            torch.testing.assert_close(got.detach(), want.detach())
            assert got.is_leaf and got.requires_grad and got.grad_fn is None


def loss_then_clamp(w, x):
    loss = (w * x).sum()
    with torch.no_grad():
        w.clamp_(-0.5, 0.5)
    return loss


def test_update_under_no_grad_beside_a_differentiable_output_matches_eager() -> None:
    """The loss's gradient is eager's, the clamp is written, the leaf stays a leaf requiring grad."""
    jfn = compiler.jit(loss_then_clamp)
    for seed in range(2):
        generator = torch.Generator().manual_seed(seed)
        w, x = torch.randn(4, generator=generator), torch.randn(4, generator=generator)
        results = []
        for fn in (loss_then_clamp, jfn):
            leaf = w.clone().requires_grad_()
            loss = fn(leaf, x)
            loss.backward()
            assert leaf.is_leaf and leaf.requires_grad and leaf._version == 1
            results.append((loss.detach(), leaf.detach(), leaf.grad))
        for got, want in zip(*reversed(results)):
            torch.testing.assert_close(got, want)


def test_a_write_into_a_leaf_requiring_grad_outside_no_grad_raises_as_eager() -> None:
    def scale(w):
        w.mul_(2)

    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place operation"):
        scale(torch.randn(3, requires_grad=True))
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place operation"):
        compiler.jit(scale)(torch.randn(3, requires_grad=True))
