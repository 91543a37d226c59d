"""The main demo: tiny_llm.py's pipeline on the embedded story corpus, offline, on CPU.

    bash scripts/demo.sh            # or: python -m experiments.tutorials.demo

Its arguments are `marin run`'s (`bash scripts/demo.sh --force-run-failed`, `--prefix DIR`, ...):
it runs as `marin run experiments/tutorials/demo.py ARGS` does, then prints its summary.

It is `tiny_llm.py` with one change, the source: the project's own generated children's stories
(`marin://tinystories-synth`) instead of TinyStories from the Hugging Face hub, so it runs without
network. (`llama_nano` scales its output logits by 8, see experiments/llama.py: without that, a
32-wide model trained at lr 6e-4 for 100 steps cannot even learn word frequencies.)
It adds an evaluation step and prints what the run learned: the final training loss next to the
unigram entropy of the training tokens (the loss of a model that knows only word frequencies), and
the evaluation's bits-per-byte with its 95% interval. A second run finds every step cached.
`MARIN_DEMO_TRAIN_STEPS` shortens the training (the object-store tests run the demo that way).
"""

import os
import sys

from experiments.llama import llama_nano
from experiments.marin_tokenizer import marin_tokenizer
from fray.cluster import ResourceConfig
from marin.cli import run_with_marin
from marin.execution.artifact import read_artifact
from marin.execution.step_runner import RunResult
from marin.experiment.data import tokenized
from marin.experiment.evaluate import evaluate
from marin.experiment.train import train_lm
from marin.training.optim import AdamConfig

tinystories_tokenized = tokenized(
    name="tokenized/tinystories",
    source="marin://tinystories-synth",
    tokenizer=marin_tokenizer,
    sample_count=1000,
)

nano_tinystories_model = train_lm(
    name="checkpoints/marin-nano-tinystories",
    version="v1",
    model=llama_nano,
    optimizer=AdamConfig(learning_rate=6e-4, weight_decay=0.1),
    datasets={tinystories_tokenized: 1.0},
    batch_size=4,
    seq_len=2048,
    num_train_steps=int(os.environ.get("MARIN_DEMO_TRAIN_STEPS", "100")),
    resources=ResourceConfig.with_cpu(),
)

nano_tinystories_eval = evaluate(
    name="evaluations/marin-nano-tinystories",
    model=nano_tinystories_model,
    datasets=[tinystories_tokenized],
    harness_tasks=("marin_story_endings",),
    prompts=("Once upon a time",),
)


def main(argv: list[str] | None = None) -> None:
    """Run the pipeline as `marin run` with `argv` (default: the command line's), then print the
    headline figures from the steps' records."""
    run = run_with_marin(__file__, sys.argv[1:] if argv is None else argv)
    if not isinstance(run, RunResult):  # --dry-run: the plan was printed, nothing ran
        return
    train = read_artifact(run.output_path(nano_tinystories_model)).result
    scores = read_artifact(run.output_path(nano_tinystories_eval)).result
    print()
    print(f"final training loss      {train['final_loss']:.3f} nats/token")
    print(
        f"unigram entropy          {train['train_unigram_entropy']:.3f} nats/token  (a model "
        "that knows only word frequencies)"
    )
    headline = scores["headline"]
    lo, hi = headline["ci95"]
    print(
        f"evaluation               {headline['metric']} = {headline['value']:.3f}  "
        f"(95% interval {lo:.3f}-{hi:.3f}, {headline['n']} documents)"
    )
    print(f"Hugging Face export      {train['hf_path']}")


if __name__ == "__main__":
    main()
