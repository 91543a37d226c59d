"""Is model A better than model B? Two nano models that differ only in learning rate, each evaluated on
the same held-out stories and the same 50 story-ending items, then compared:

    marin run experiments/tutorials/compare_models.py
    marin compare evaluations/nano-lr6e-4 evaluations/nano-lr6e-3

`marin compare` shows the parameter that differs, every metric with its 95% interval, and for each
metric scored on the same items the paired difference with its interval and p-value (see
docs/evaluation.md, "Is model A better than model B?").
"""

from experiments.llama import llama_nano
from experiments.marin_tokenizer import marin_tokenizer
from marin.experiment.data import tokenized
from marin.experiment.evaluate import evaluate
from marin.experiment.train import train_lm
from marin.training.optim import AdamConfig

stories = tokenized(
    name="tokenized/tinystories",
    source="marin://tinystories-synth",
    tokenizer=marin_tokenizer,
    sample_count=1000,
)

LEARNING_RATES = {"6e-4": 6e-4, "6e-3": 6e-3}

models = {
    label: train_lm(
        name=f"checkpoints/nano-lr{label}",
        model=llama_nano,
        optimizer=AdamConfig(learning_rate=lr, weight_decay=0.1),
        datasets={stories: 1.0},
        batch_size=4,
        seq_len=256,
        num_train_steps=40,
        cpu_threads=1,
    )
    for label, lr in LEARNING_RATES.items()
}
evaluations = [
    evaluate(
        f"evaluations/nano-lr{label}",
        model=model,
        datasets=[stories],
        harness_tasks=("marin_story_endings",),
    )
    for label, model in models.items()
]
