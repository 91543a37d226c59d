"""The annealing experiment as two cached steps: a base run at a constant rate, then a cooldown that
continues its weights and optimizer on a new data mix while the rate decays to zero.

    marin plot-lr experiments/tutorials/annealing.py --out annealing-lr.png   # the two schedules
    marin run experiments/tutorials/annealing.py                              # train both

The base trains on the embedded stories at a constant rate after warmup (the "stable" part of a
warmup-stable-decay run). The cooldown starts from the base's last checkpoint, weights and AdamW
moments (`init_optimizer=True`), and decays the rate linearly from the same peak to zero over its
own steps on half stories, half curated web text (the curation tutorial's output). A second
cooldown from the same base, with another mix or length, reuses the cached base: only the new
cooldown runs. This is upstream Marin's annealing recipe (`default_anneal`), two steps here.
"""

from __future__ import annotations

from typing import Any

from experiments.llama import llama_nano
from experiments.marin_tokenizer import marin_tokenizer
from experiments.tutorials.curate import curated_tokens
from marin.execution.step_runner import StepRunner
from marin.experiment.data import tokenized
from marin.experiment.train import TrainLm, train_lm
from marin.training.optim import AdamConfig
from marin.training.schedules import WSD, Constant

PEAK_LR = 3e-3


def anneal(
    name: str,
    base_data: dict[Any, float],
    cooldown_data: dict[Any, float],
    *,
    base_steps: int,
    cooldown_steps: int,
    **run: Any,
) -> tuple[TrainLm, TrainLm]:
    """A base run of `base_steps` at a constant rate, and a cooldown of `cooldown_steps` from it on
    `cooldown_data`, its rate decaying linearly from the base's to zero; `run` are train_lm's other fields."""
    base = train_lm(
        name=f"checkpoints/{name}-base",
        optimizer=AdamConfig(learning_rate=PEAK_LR, schedule=Constant(warmup=0.1), weight_decay=0.1),
        datasets=base_data,
        num_train_steps=base_steps,
        **run,
    )
    cooldown = train_lm(
        name=f"checkpoints/{name}-cooldown",
        optimizer=AdamConfig(
            learning_rate=PEAK_LR,
            schedule=WSD(warmup=0, decay_fraction=1.0, min_lr_ratio=0.0),
            weight_decay=0.1,
        ),
        datasets=cooldown_data,
        num_train_steps=cooldown_steps,
        init_from=base,
        init_optimizer=True,
        **run,
    )
    return base, cooldown


stories = tokenized(
    name="tokenized/tinystories-synth",
    source="marin://tinystories-synth",
    tokenizer=marin_tokenizer,
    sample_count=2000,
)

base, cooldown = anneal(
    "nano-anneal",
    {stories: 1.0},
    {stories: 0.5, curated_tokens: 0.5},
    base_steps=300,
    cooldown_steps=60,
    model=llama_nano,
    batch_size=8,
    seq_len=256,
    steps_per_eval=30,
)

if __name__ == "__main__":
    StepRunner().run([cooldown])
