"""One nano run under five learning-rate schedules, to compare what each does to the loss.

    marin plot-lr experiments/tutorials/schedules.py --out lr-schedules.png   # draw them
    marin run experiments/tutorials/schedules.py                              # train all five

Warmup-then-cosine (the default), warmup-stable-decay with each of its three decay shapes over the
last 20% of the run, and WSD in two cycles, the second rising back to the peak over 20 steps. Every
schedule is a pure function of the step (`OptimizerConfig.lr_at`): the drawing is what the trainer
sets and what each run's metrics.jsonl records as `lr`.

Each schedule is trained with one seed, so the loss curves show what each schedule did to one run: a
gap between two of them is not measured against seed noise, and names no better schedule. To compare
schedules, train each with several seeds (`replicate(train_lm(...), seeds=(0, 1, 2))`) and read
`sweep_report` or `marin compare` (docs/evaluation.md, "What a difference means").
"""

from experiments.llama import llama_nano
from experiments.marin_tokenizer import marin_tokenizer
from marin.execution.step_runner import StepRunner
from marin.experiment.data import tokenized
from marin.experiment.train import train_lm
from marin.training.optim import AdamConfig

stories = tokenized(
    name="tokenized/tinystories-synth",
    source="marin://tinystories-synth",
    tokenizer=marin_tokenizer,
    sample_count=2000,
)

SCHEDULES = {
    "cosine": AdamConfig(learning_rate=3e-3, warmup=20),
    "wsd-linear": AdamConfig(learning_rate=3e-3, warmup=20, lr_schedule="wsd", min_lr_ratio=0.0),
    "wsd-cosine": AdamConfig(
        learning_rate=3e-3, warmup=20, lr_schedule="wsd", decay_shape="cosine", min_lr_ratio=0.0
    ),
    "wsd-1-sqrt": AdamConfig(
        learning_rate=3e-3, warmup=20, lr_schedule="wsd", decay_shape="1-sqrt", min_lr_ratio=0.0
    ),
    "wsd-2-cycles": AdamConfig(
        learning_rate=3e-3, warmup=20, lr_schedule="wsd", min_lr_ratio=0.1, cycles=2, rewarmup=20
    ),
}

runs = [
    train_lm(
        name=f"checkpoints/nano-{label}",
        model=llama_nano,
        optimizer=optimizer,
        datasets={stories: 1.0},
        batch_size=8,
        seq_len=256,
        num_train_steps=400,
        steps_per_eval=50,
    )
    for label, optimizer in SCHEDULES.items()
]

if __name__ == "__main__":
    StepRunner().run(runs)
