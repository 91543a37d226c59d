"""Is configuration A better than configuration B? Two nano configurations that differ only in learning
rate, each trained with three seeds, each model evaluated on the same held-out stories and the same 50
story-ending items, then compared:

    marin run experiments/tutorials/compare_models.py
    marin compare evaluations/nano-lr6e-4-seed0 evaluations/nano-lr6e-4-seed1 evaluations/nano-lr6e-4-seed2 \
        evaluations/nano-lr6e-3-seed0 evaluations/nano-lr6e-3-seed1 evaluations/nano-lr6e-3-seed2

`marin compare` recognises the three evaluations of each learning rate as replicates (their keys differ
only in `seed`), and shows each configuration's mean over its seeds with an interval that counts the
seed noise and the item noise, the seeds' spread, and the difference between the two configurations
with its p-value (see docs/evaluation.md, "What a difference means"). Two of the evaluations alone
(`marin compare evaluations/nano-lr6e-4-seed0 evaluations/nano-lr6e-3-seed0`) compare two models, not
two configurations, and say so.

`MARIN_COMPARE_TRAIN_STEPS` shortens the trainings (40 steps; tests/marin/evaluation/test_compare.py runs
20: the tenfold learning rate is still told apart over the seeds).
"""

import os

from experiments.llama import llama_nano
from experiments.marin_tokenizer import marin_tokenizer
from marin.experiment.data import tokenized
from marin.experiment.evaluate import evaluate
from marin.experiment.replicate import replicate
from marin.experiment.train import train_lm
from marin.training.optim import AdamConfig

stories = tokenized(
    name="tokenized/tinystories",
    source="marin://tinystories-synth",
    tokenizer=marin_tokenizer,
    sample_count=1000,
)

LEARNING_RATES = {"6e-4": 6e-4, "6e-3": 6e-3}
SEEDS = (0, 1, 2)

models = {
    label: replicate(
        train_lm(
            name=f"checkpoints/nano-lr{label}",
            model=llama_nano,
            optimizer=AdamConfig(learning_rate=lr, weight_decay=0.1),
            datasets={stories: 1.0},
            batch_size=4,
            seq_len=256,
            num_train_steps=int(os.environ.get("MARIN_COMPARE_TRAIN_STEPS", "40")),
            cpu_threads=1,
        ),
        seeds=SEEDS,
    )
    for label, lr in LEARNING_RATES.items()
}
evaluations = {
    label: evaluate(
        f"evaluations/nano-lr{label}",
        model=replicates,
        datasets=[stories],
        harness_tasks=("marin_story_endings",),
    )
    for label, replicates in models.items()
}
