"""Stability recipes: the EMA of the weights and the guard that skips bad steps, each resumable exactly."""

import math

import torch

from marin.training.bad_steps import MIN_STEPS, BadStepGuard
from marin.training.callbacks.weight_average import WeightEma


def test_the_ema_follows_its_formula_and_continues_from_its_state():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    ema = WeightEma(model, decay=0.9)
    expected = {n: p.detach().clone() for n, p in model.named_parameters()}
    for _ in range(5):
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p))
        ema.update()
        expected = {n: 0.9 * expected[n] + 0.1 * p.detach() for n, p in model.named_parameters()}
    assert all(torch.allclose(ema.averages[n], expected[n], rtol=0, atol=1e-6) for n in expected)
    resumed = WeightEma(model, decay=0.9)
    resumed.load_state_dict(ema.state_dict())
    ema.update(), resumed.update()
    assert all(torch.equal(ema.averages[n], resumed.averages[n]) for n in expected)
    ema.copy_to(model)
    assert torch.equal(model.weight, ema.averages["weight"])


def test_the_guard_skips_non_finite_losses_and_spikes_once_it_has_a_mean():
    guard = BadStepGuard(factor=3.0)
    assert guard.should_skip(math.nan) and guard.should_skip(1.0, grad_norm=math.inf)
    assert not guard.should_skip(100.0)  # too few steps taken to judge a spike
    for _ in range(MIN_STEPS):
        assert not guard.should_skip(2.0)
    assert guard.running_mean < 3 * 2.0 * 10  # the early 100 is in it, decayed
    assert guard.should_skip(10 * guard.running_mean) and not guard.should_skip(guard.running_mean)
    assert guard.skipped == 3 and guard.taken == MIN_STEPS + 2
    again = BadStepGuard(factor=3.0)
    again.load_state_dict(guard.state_dict())
    assert again == guard
