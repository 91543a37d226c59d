"""Learning-rate schedules: warmup-stable-decay with three decay shapes, cycles with rewarmup, pure in the
step; and a schedule written outside the package trains, enters the key and plots."""

import math
from dataclasses import dataclass

import pytest
from train_child import tiny_config

import storage
from marin.execution.arguments import DeclarationError
from marin.execution.lazy import lower
from marin.experiment.data import tokenized
from marin.experiment.lr_plot import plot_curves, schedule_curve
from marin.experiment.train import train_lm
from marin.training.datasets import DatasetInput
from marin.training.errors import TrainingConfigError
from marin.training.optim import AdamConfig
from marin.training.schedules import WSD, Cosine, Schedule
from marin.training.trainer import TrainJob, train


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
        schedule=WSD(warmup=10, decay_fraction=0.25, decay_shape=shape, min_lr_ratio=0.0),
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
    kwargs = dict(warmup=0, decay_fraction=0.5, min_lr_ratio=0.0)
    sqrt = AdamConfig(learning_rate=1.0, schedule=WSD(decay_shape="1-sqrt", **kwargs))
    linear = AdamConfig(learning_rate=1.0, schedule=WSD(decay_shape="linear", **kwargs))
    assert sqrt.lr_at(50 + 24, 100) == pytest.approx(1 - math.sqrt(0.5))  # half way through the decay
    assert linear.lr_at(50 + 24, 100) == pytest.approx(0.5)


def test_cycles_restart_with_a_rewarmup_from_where_the_last_cycle_ended():
    adam = AdamConfig(
        learning_rate=1.0,
        schedule=WSD(warmup=4, decay_fraction=0.2, min_lr_ratio=0.1, cycles=(50,), rewarmup=5),
    )
    lrs = [adam.lr_at(s, 100) for s in range(100)]
    assert lrs[49] == pytest.approx(0.1)  # the first cycle decays to the minimum at its last step
    assert lrs[50:55] == pytest.approx(
        [0.1 + 0.9 * k / 5 for k in range(1, 6)]
    )  # then rises back to the peak
    assert lrs[55:90] == [1.0] * 35 and lrs[99] == pytest.approx(0.1)
    equal = AdamConfig(learning_rate=1.0, schedule=Cosine(warmup=0, cycles=4))
    assert [equal.lr_at(s, 100) for s in (0, 25, 50, 75)] == [
        1.0
    ] * 4  # four equal cosine cycles, no rewarmup
    assert equal.lr_at(24, 100) == pytest.approx(0.1)


def test_a_schedule_is_a_pure_function_of_the_step():
    adam = AdamConfig(
        learning_rate=2e-3, schedule=WSD(warmup=0.1, decay_shape="cosine", cycles=3, rewarmup=0.1)
    )
    forward = [adam.lr_at(s, 90) for s in range(90)]
    assert [adam.lr_at(s, 90) for s in reversed(range(90))] == forward[::-1]


def test_bad_schedule_fields_are_one_error_naming_the_field():
    with pytest.raises(DeclarationError, match="Cosine: unknown keyword decay_shape="):
        AdamConfig(schedule=Cosine(decay_shape="1-sqrt"))  # a decay shape is WSD's
    with pytest.raises(DeclarationError, match="decay_shape=.sqrt. is not one of"):
        AdamConfig(schedule=WSD(decay_shape="sqrt"))
    with pytest.raises(TrainingConfigError, match="decay_fraction must be in"):
        AdamConfig(schedule=WSD(decay_fraction=0.0))
    with pytest.raises(TrainingConfigError, match="increasing"):
        AdamConfig(schedule=Cosine(cycles=(50, 50)))
    with pytest.raises(TrainingConfigError, match="not before the run's last step"):
        AdamConfig(schedule=Cosine(cycles=(50, 120))).check_run(100, sharded=False)


@dataclass(frozen=True)
class Halving(Schedule):
    """Halves the rate every `every` steps: a schedule the package does not have, written as a user would."""

    every: int = 2

    def lr(self, step: int, num_train_steps: int, peak: float) -> float:
        return peak * 0.5 ** (step // self.every)


def test_a_schedule_defined_outside_the_package_trains_keys_and_plots(story_cache, tmp_path):
    optimizer = AdamConfig(learning_rate=3e-3, schedule=Halving(every=3))
    out = str(tmp_path / "run")
    train(TrainJob(tiny_config(6, optimizer=optimizer), (DatasetInput("stories", story_cache, 1.0),), out))
    records = storage.read_records(f"{out}/metrics.jsonl")
    assert [r["lr"] for r in records] == [3e-3 * 0.5 ** (s // 3) for s in range(6)]

    data = tokenized("tokenized/x", tokenizer="gpt2", source="marin://tinystories-synth", sample_count=10)
    handle = train_lm(
        name="checkpoints/halving",
        model=tiny_config(6).model,
        optimizer=optimizer,
        datasets={data: 1.0},
        batch_size=4,
        seq_len=32,
        num_train_steps=6,
    )
    assert lower(handle).hash_attrs["optimizer"]["schedule"] == {"name": "Halving", "every": 3}
    png = plot_curves([schedule_curve("halving", handle)], str(tmp_path / "lr.png"))
    assert open(png, "rb").read()[:8] == b"\x89PNG\r\n\x1a\n"
    assert schedule_curve("halving", handle).rates["lr"] == [r["lr"] for r in records]
