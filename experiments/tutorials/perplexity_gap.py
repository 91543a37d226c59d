"""Where two models differ: two nano models with different tokenizers (byte-level BPEs of 4,096 and
1,024 ids), trained alike on the same stories, compared byte by byte on the same held-out text:

    marin run experiments/tutorials/perplexity_gap.py
    marin gap evaluations/gap-bpe4k evaluations/gap-bpe1k

The `perplexity_gap` step writes `gap.md` and `gap.json` (the gap in bits per byte, split by byte class
and domain, and where each model wins); `marin gap` prints the same report for the two evaluations.
See docs/evaluation.md, "Where two models differ".
"""

from pathlib import Path

from experiments.llama import llama_nano
from marin.evaluation.documents import TextDataset
from marin.experiment.data import tokenized, train_tokenizer
from marin.experiment.evaluate import evaluate, perplexity_gap
from marin.experiment.train import train_lm
from marin.training.optim import AdamConfig

TEXTS = TextDataset(
    "gap_texts", (str(Path(__file__).parent / "data" / "gap_texts.jsonl"),), domain_field="kind"
)

models = {}
for label, vocab in (("bpe4k", 4096), ("bpe1k", 1024)):
    tokenizer = train_tokenizer(
        name=f"tokenizers/gap-{label}",
        source="marin://tinystories-synth",
        vocab_size=vocab,
        sample_count=5000,
    )
    stories = tokenized(
        name=f"tokenized/gap-{label}",
        tokenizer=tokenizer,
        source="marin://tinystories-synth",
        sample_count=1000,
    )
    models[label] = train_lm(
        name=f"checkpoints/gap-{label}",
        model=llama_nano,
        optimizer=AdamConfig(learning_rate=6e-3, weight_decay=0.1),
        datasets={stories: 1.0},
        batch_size=4,
        seq_len=256,
        num_train_steps=60,
        cpu_threads=1,
    )

gap = perplexity_gap("gaps/bpe4k-bpe1k", model_a=models["bpe4k"], model_b=models["bpe1k"], datasets=[TEXTS])
evaluations = [evaluate(f"evaluations/gap-{label}", model=m, datasets=[TEXTS]) for label, m in models.items()]
