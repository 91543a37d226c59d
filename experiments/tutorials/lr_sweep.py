"""A learning-rate sweep in a few lines: three nano settings, each trained with three seeds, one
evaluation per model, one report.

    python -m experiments.tutorials.lr_sweep

The report step writes table.md, table.csv and plot.png (eval loss and bits-per-byte against
training tokens, one line per learning rate: the mean over its seeds with its interval); it names a
best learning rate only when it is separable from the runner-up over their seeds, and otherwise says
which are indistinguishable. `marin info reports/lr-sweep` shows its verdict.
"""

from experiments.llama import llama_nano
from experiments.marin_tokenizer import marin_tokenizer
from marin.execution.step_runner import StepRunner
from marin.experiment.data import tokenized
from marin.experiment.evaluate import evaluate, sweep_report
from marin.experiment.replicate import replicate
from marin.experiment.train import train_lm
from marin.training.optim import AdamConfig

stories = tokenized(
    name="tokenized/tinystories-synth",
    source="marin://tinystories-synth",
    tokenizer=marin_tokenizer,
    sample_count=2000,
)

models = {
    f"lr={lr:g}": replicate(
        train_lm(
            name=f"checkpoints/nano-lr{lr:g}",
            model=llama_nano,
            optimizer=AdamConfig(learning_rate=lr, weight_decay=0.1),
            datasets={stories: 1.0},
            batch_size=8,
            seq_len=256,
            num_train_steps=40,
            steps_per_eval=10,
            cpu_threads=1,
        ),
        seeds=(0, 1, 2),
    )
    for lr in (1e-3, 3e-3, 1e-2)
}
evaluations = {
    label: evaluate(
        f"eval/nano-{label.replace('=', '')}",
        model=replicates,
        datasets=[stories],
        harness_tasks=("marin_story_endings",),
        prompts=("Once upon a time",),
    )
    for label, replicates in models.items()
}
report = sweep_report("reports/lr-sweep", models)

if __name__ == "__main__":
    StepRunner().run([report, *(e for replicates in evaluations.values() for e in replicates)])
