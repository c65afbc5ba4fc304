"""The programs of issue 3: a functional Adam step matching torch.optim.Adam, and KV-cache
attention steps updating their caches in place (index_copy_ and slice assignment, with the
position constant or symbolic)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import compiler
from tests.support.inplace_util import check_compiled, clone_args, count_writebacks


def adam_step(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, step, lr, beta1, beta2, eps,
              weight_decay, amsgrad):  # fmt: skip
    """torch.optim.Adam(foreach=False)'s arithmetic (`_single_tensor_adam`), with the step count
    passed as a number (eager reads it with `.item()`, which a trace cannot)."""
    for i, param in enumerate(params):
        grad = grads[i]
        exp_avg, exp_avg_sq, step_t = exp_avgs[i], exp_avg_sqs[i], state_steps[i]
        step_t += 1
        if weight_decay != 0:
            grad = grad.add(param, alpha=weight_decay)
        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        bias_correction1 = 1 - beta1**step
        bias_correction2 = 1 - beta2**step
        step_size = lr / bias_correction1
        bias_correction2_sqrt = bias_correction2**0.5
        if amsgrad:
            torch.maximum(max_exp_avg_sqs[i], exp_avg_sq, out=max_exp_avg_sqs[i])
            denom = (max_exp_avg_sqs[i].sqrt() / bias_correction2_sqrt).add_(eps)
        else:
            denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
        param.addcdiv_(exp_avg, denom, value=-step_size)


def _adam_state(shapes):
    zeros = lambda: [torch.zeros(s) for s in shapes]
    return zeros(), zeros(), zeros(), [torch.tensor(0.0) for _ in shapes]


@pytest.mark.parametrize("numbers", ["symbolic", "constant"])
@pytest.mark.parametrize("amsgrad", [False, True])
@pytest.mark.parametrize("weight_decay", [0.0, 0.05])
def test_adam_matches_torch_optim(numbers, amsgrad, weight_decay):
    torch.manual_seed(1)
    shapes = [(5, 3), (7,), (2, 3, 4), ()]
    reference = [torch.randn(s, requires_grad=True) for s in shapes]
    params = [p.detach().clone() for p in reference]
    optimizer = torch.optim.Adam(
        reference, lr=3e-2, betas=(0.8, 0.95), eps=1e-6, weight_decay=weight_decay, amsgrad=amsgrad, foreach=False
    )
    exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps = _adam_state(shapes)
    jfn = compiler.jit(adam_step, numbers=numbers)
    for k in range(5):
        grads = [torch.randn(s) for s in shapes]
        for p, g in zip(reference, grads):
            p.grad = g.clone()
        optimizer.step()
        hyper = (float(k + 1), 3e-2, 0.8, 0.95, 1e-6, weight_decay, amsgrad)
        assert jfn(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, *hyper) is None
    for i, p in enumerate(reference):
        state = optimizer.state[p]
        torch.testing.assert_close(params[i], p.detach())
        torch.testing.assert_close(exp_avgs[i], state["exp_avg"])
        torch.testing.assert_close(exp_avg_sqs[i], state["exp_avg_sq"])
        torch.testing.assert_close(steps[i], state["step"])
        if amsgrad:
            torch.testing.assert_close(max_exp_avg_sqs[i], state["max_exp_avg_sq"])
        else:
            assert not max_exp_avg_sqs[i].any()
    assert compiler.cache_stats(jfn).misses == (1 if numbers == "symbolic" else 2)  # automatic dynamic: step


def test_adam_every_pass():
    shapes = [(4, 3), (6,)]
    grads = [torch.randn(s) for s in shapes]
    args = ([torch.randn(s) for s in shapes], grads, *_adam_state(shapes), 3.0, 1e-2, 0.9, 0.99, 1e-8, 0.1, True)
    check_compiled(adam_step, *args, numbers="symbolic", exact=False)


@pytest.mark.parametrize(
    ("count", "amsgrad", "expected"), [(1, False, 4), (3, False, 12), (32, False, 128), (32, True, 160)]
)
def test_adam_one_writeback_per_mutated_buffer(count, amsgrad, expected):
    shapes = [(3, 2)] * count
    args = ([torch.randn(s) for s in shapes], [torch.randn(s) for s in shapes], *_adam_state(shapes))
    jfn = compiler.jit(adam_step, numbers="symbolic")
    jfn(*args, 1.0, 1e-3, 0.9, 0.999, 1e-8, 0.0, amsgrad)
    functionalized, final = compiler.last_traces(jfn)[1], compiler.last_traces(jfn)[-1]
    # params, exp_avgs, exp_avg_sqs, state_steps (and max_exp_avg_sqs with amsgrad): once each
    assert count_writebacks(functionalized) == count_writebacks(final) == expected
    written = [b.args[1].name for b in final.bsyms[-expected:]]
    assert len(set(written)) == expected and not any(name.startswith("grads") for name in written)
    # one pure update per in-place op: e.g. exp_avg.lerp_ became torch.Tensor.lerp
    text = str(functionalized)
    assert text.count("= torch.Tensor.lerp(") == count and "lerp_" not in text and "copy_(" not in text


def kv_step(q, k_cache, v_cache, idx, k_new, v_new):
    k_cache.index_copy_(2, idx, k_new)
    v_cache.index_copy_(2, idx, v_new)
    return F.scaled_dot_product_attention(q, k_cache, v_cache)


def kv_step_slice(q, k_cache, v_cache, pos, k_new, v_new):
    n = k_new.shape[2]
    k_cache[:, :, pos : pos + n] = k_new
    v_cache[:, :, pos : pos + n] = v_new
    return F.scaled_dot_product_attention(q, k_cache, v_cache)


def _kv_args(new: int, pos_or_idx):
    batch, heads, length, dim = 2, 3, 12, 8
    return (
        torch.randn(batch, heads, 4, dim),
        torch.randn(batch, heads, length, dim),
        torch.randn(batch, heads, length, dim),
        pos_or_idx,
        torch.randn(batch, heads, new, dim),
        torch.randn(batch, heads, new, dim),
    )


@pytest.mark.parametrize("idx", [torch.tensor([5]), torch.tensor([0, 7, 3]), torch.tensor(9)])
def test_kv_cache_index_copy(idx):
    new = idx.numel()
    jfn = check_compiled(kv_step, *_kv_args(new, idx), exact=False)
    functional = next(t for t in compiler.last_traces(jfn) if t.provenance.startswith("dce"))
    assert count_writebacks(functional) == 2
    assert [b.args[1].name for b in functional.bsyms[-2:]] == ["k_cache", "v_cache"]
    # update_in_place then turns each cache's update + write-back into one in-place index_copy_
    final = compiler.last_traces(jfn)[-1]
    assert count_writebacks(final) == 0
    assert [getattr(b.sym, "name", None) for b in final.bsyms].count("index_copy_") == 2


@pytest.mark.parametrize("numbers", ["constant", "symbolic"])
def test_kv_cache_slice_assignment(numbers):
    jfn = compiler.jit(kv_step_slice, numbers=numbers)
    positions = [0, 4, 9, 4]
    for pos in positions:
        args = _kv_args(3, pos)
        eager_args, jit_args = clone_args(args), clone_args(args)
        expected = kv_step_slice(*eager_args)
        torch.testing.assert_close(jfn(*jit_args), expected)
        torch.testing.assert_close(jit_args[1], eager_args[1], rtol=0, atol=0)
        torch.testing.assert_close(jit_args[2], eager_args[2], rtol=0, atol=0)
    stats = compiler.cache_stats(jfn)
    assert stats.misses == (1 if numbers == "symbolic" else 2) and stats.hits == len(positions) - stats.misses
    check_compiled(kv_step_slice, *_kv_args(3, 5), numbers=numbers, exact=False)


def test_kv_cache_slice_out_of_range_position_recompiles_not_miscomputes():
    jfn = compiler.jit(kv_step_slice, numbers="symbolic")
    jfn(*_kv_args(3, 2))
    with pytest.raises(RuntimeError):
        kv_step_slice(*_kv_args(3, 11))  # eager fails: the slice is shorter than k_new
    with pytest.raises(ValueError, match="do not broadcast"):
        jfn(*_kv_args(3, 11))  # a guard fails; the retrace sees the short slice
