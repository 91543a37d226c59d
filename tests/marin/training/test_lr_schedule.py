"""Learning-rate schedules: warmup-stable-decay with three decay shapes, cycles with rewarmup, pure in the step."""

import math

import pytest

from marin.execution.arguments import DeclarationError
from marin.training.errors import TrainingConfigError
from marin.training.optim import AdamConfig


def _wsd_formula(step, *, n, peak, warmup, decay, shape, m):
    """WSD written out independently: linear warmup, the peak, then the last `decay` steps decaying."""
    if step < warmup:
        return peak * (step + 1) / warmup
    if step < n - decay:
        return peak
    p = (step - (n - decay) + 1) / decay
    f = {"linear": 1 - p, "cosine": (1 + math.cos(math.pi * p)) / 2, "1-sqrt": 1 - math.sqrt(p)}[shape]
    return peak * (m + (1 - m) * f)


@pytest.mark.parametrize("shape", ["linear", "cosine", "1-sqrt"])
def test_wsd_warms_up_holds_the_peak_then_decays_over_its_last_fraction(shape):
    adam = AdamConfig(
        learning_rate=3e-3,
        warmup=10,
        lr_schedule="wsd",
        decay_fraction=0.25,
        decay_shape=shape,
        min_lr_ratio=0.0,
    )
    lrs = [adam.lr_at(s, 200) for s in range(200)]
    expected = [
        _wsd_formula(s, n=200, peak=3e-3, warmup=10, decay=50, shape=shape, m=0.0) for s in range(200)
    ]
    assert lrs == pytest.approx(expected, rel=1e-12, abs=0)
    assert lrs[9] == lrs[10] == lrs[149] == 3e-3  # warmup reaches the peak, which holds until the decay
    assert lrs[150] < 3e-3 and lrs[-1] == 0.0
    assert all(a >= b for a, b in zip(lrs[150:], lrs[151:], strict=False))


def test_one_minus_sqrt_drops_faster_than_linear_early_in_the_decay():
    kwargs = dict(learning_rate=1.0, warmup=0, lr_schedule="wsd", decay_fraction=0.5, min_lr_ratio=0.0)
    sqrt, linear = AdamConfig(decay_shape="1-sqrt", **kwargs), AdamConfig(decay_shape="linear", **kwargs)
    assert sqrt.lr_at(50 + 24, 100) == pytest.approx(1 - math.sqrt(0.5))  # half way through the decay
    assert linear.lr_at(50 + 24, 100) == pytest.approx(0.5)


def test_cycles_restart_with_a_rewarmup_from_where_the_last_cycle_ended():
    adam = AdamConfig(
        learning_rate=1.0,
        warmup=4,
        lr_schedule="wsd",
        decay_fraction=0.2,
        min_lr_ratio=0.1,
        cycles=(50,),
        rewarmup=5,
    )
    lrs = [adam.lr_at(s, 100) for s in range(100)]
    assert lrs[49] == pytest.approx(0.1)  # the first cycle decays to the minimum at its last step
    assert lrs[50:55] == pytest.approx(
        [0.1 + 0.9 * k / 5 for k in range(1, 6)]
    )  # then rises back to the peak
    assert lrs[55:90] == [1.0] * 35 and lrs[99] == pytest.approx(0.1)
    equal = AdamConfig(learning_rate=1.0, warmup=0, lr_schedule="cosine", cycles=4)
    assert [equal.lr_at(s, 100) for s in (0, 25, 50, 75)] == [
        1.0
    ] * 4  # four equal cosine cycles, no rewarmup
    assert equal.lr_at(24, 100) == pytest.approx(0.1)


def test_a_schedule_is_a_pure_function_of_the_step():
    adam = AdamConfig(
        learning_rate=2e-3, warmup=0.1, lr_schedule="wsd", decay_shape="cosine", cycles=3, rewarmup=0.1
    )
    forward = [adam.lr_at(s, 90) for s in range(90)]
    assert [adam.lr_at(s, 90) for s in reversed(range(90))] == forward[::-1]


def test_bad_schedule_fields_are_one_error_naming_the_field():
    with pytest.raises(
        TrainingConfigError, match="decay_fraction and decay_shape shape lr_schedule='wsd' only"
    ):
        AdamConfig(lr_schedule="cosine", decay_shape="1-sqrt")
    with pytest.raises(DeclarationError, match="decay_shape=.sqrt. is not one of"):
        AdamConfig(lr_schedule="wsd", decay_shape="sqrt")
    with pytest.raises(TrainingConfigError, match="decay_fraction must be in"):
        AdamConfig(lr_schedule="wsd", decay_fraction=0.0)
    with pytest.raises(TrainingConfigError, match="increasing"):
        AdamConfig(cycles=(50, 50))
    with pytest.raises(TrainingConfigError, match="not before the run's last step"):
        AdamConfig(cycles=(50, 120)).check_run(100, sharded=False)
