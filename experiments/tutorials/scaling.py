"""An isoflop sweep of tiny Llamas on the embedded story corpus, and the scaling law it implies.

    python -m experiments.tutorials.scaling                                  # 4 budgets x 4 sizes
    MARIN_SCALING_TUTORIAL=reduced python -m experiments.tutorials.scaling   # CI's size: 3 x 3, tiny

At each of four compute budgets (3e10 to 1e12 model FLOPs), four widths of a two-layer Llama train
on as many tokens as the budget buys them (model FLOPs = budget, to within half a batch), chosen
from the family's widths around 5 tokens per parameter. `scaling_fit` then fits the final validation bits per byte both
ways (Approach 2: a parabola per budget; Approach 3: L(N, D) = E + A/N^alpha + B/D^beta with 1,000
bootstrap resamples) and predicts the loss at 10x the largest budget. The script prints the
exponents with their 95% intervals and that prediction, with a warning for each way it reaches beyond
what the runs can say (an extrapolation, a loose optimum); `table.md` and the plots are in the fit's
output folder and on its page in `marin ui`. A second run finds every step cached, and adding a
budget trains only that budget's runs. docs/scaling.md shows and reads this output.
"""

from __future__ import annotations

import os

from marin.data.corpus import SOURCE_NAME
from marin.execution.artifact import read_artifact
from marin.execution.lazy import lower
from marin.execution.step_runner import StepRunner
from marin.experiment.data import tokenized, train_tokenizer
from marin.experiment.scaling import ModelFamily, TrainRecipe, isoflop_sweep, scaling_fit
from marin.scaling_laws.report import summary_lines
from marin.training.models import LlamaConfig
from marin.training.optim import AdamConfig

REDUCED = os.environ.get("MARIN_SCALING_TUTORIAL", "").strip() == "reduced"
VOCAB_SIZE = 512 if REDUCED else 1024
SEQ_LEN = 64 if REDUCED else 128
BATCH_SIZE = 8
BUDGETS = [2e9, 4e9, 8e9] if REDUCED else [3e10, 1e11, 3e11, 1e12]
WIDTHS = (8, 16, 32) if REDUCED else (8, 12, 16, 24, 32, 48, 64, 96, 128)
# Where the sweep centres each budget's sizes. Hoffmann et al. found 20 tokens per parameter; models
# this small, trained this briefly, do best on far fewer (a sweep centred at 20 found the best model
# of 1e11 FLOPs at its largest size, 4 tokens per parameter), so the grid is centred at 5.
TOKENS_PER_PARAM = 5.0

bpe = train_tokenizer(
    name=f"tokenizers/scaling-bpe-{VOCAB_SIZE}",
    source=SOURCE_NAME,
    vocab_size=VOCAB_SIZE,
    sample_count=2_000 if REDUCED else 20_000,
)
stories = tokenized(
    name="tokenized/scaling-stories",
    source=SOURCE_NAME,
    tokenizer=bpe,
    sample_count=2_000 if REDUCED else 50_000,
)


def tiny_llama(width: int) -> LlamaConfig:
    """A two-layer Llama of the given width (two heads, a 4x MLP), sized for the tutorial's tokenizer."""
    return LlamaConfig(
        hidden_dim=width,
        intermediate_dim=4 * width,
        num_layers=2,
        num_heads=2,
        num_kv_heads=2,
        max_seq_len=SEQ_LEN,
        vocab_size=VOCAB_SIZE,
        output_multiplier=8.0,
    )


family = ModelFamily(tiny_llama, sizes=WIDTHS)
recipe = TrainRecipe(
    datasets={stories: 1.0},
    optimizer=AdamConfig(learning_rate=3e-3, weight_decay=0.1, warmup=0.05),
    batch_size=BATCH_SIZE,
    seq_len=SEQ_LEN,
    # one thread per run: the runs of a budget train side by side, one per core
    options={"eval_max_tokens": 1 << (12 if REDUCED else 16), "cpu_threads": 1},
)
sweep = isoflop_sweep(
    "scaling/tiny-llama",
    budgets=BUDGETS,
    family=family,
    recipe=recipe,
    points=3 if REDUCED else 4,
    tokens_per_param=TOKENS_PER_PARAM,
)
fit = scaling_fit("scaling/tiny-llama-fit", sweep, metric="eval_bpb", bootstrap=200 if REDUCED else 1000)


def main() -> None:
    """Run the sweep and the fit, then print the exponents, the prediction and its warnings from the fit's record."""
    step = lower(fit)
    run = StepRunner().run([step])
    print()
    for line in summary_lines(read_artifact(run.output_path(step)).result):
        print(line)
    print(f"report: {run.output_path(step)}/table.md")


if __name__ == "__main__":
    main()
