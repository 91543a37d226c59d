"""The tiny-LLM example as Levanter users write it, changed in one import (AdamConfig is ours, not Levanter's).

It tokenizes 1,000 TinyStories from the Hugging Face hub, so it needs network access (or a warm HF
cache). `experiments/tutorials/demo.py` is the same pipeline on the embedded corpus, offline. Its
step names end in `-hub`, apart from the demo's: the two pipelines read different data, and one
name's outputs under one prefix belong to one pipeline (else each would plan `run: changed`
against the other's).
"""

from experiments.llama import llama_nano
from experiments.marin_tokenizer import marin_tokenizer
from fray.cluster import ResourceConfig
from marin.execution.lazy import lower
from marin.execution.step_runner import StepRunner
from marin.experiment.data import tokenized
from marin.experiment.train import train_lm
from marin.training.optim import AdamConfig

# 1️⃣  Tokenize a small dataset – nothing is downloaded yet.

tinystories_tokenized = tokenized(
    name="tokenized/tinystories-hub",
    source="roneneldan/TinyStories",
    tokenizer=marin_tokenizer,
    sample_count=1000,
)

# 2️⃣  Train a tiny LLM on the tokenized data.

nano_tinystories_model = train_lm(
    name="checkpoints/marin-nano-tinystories-hub",
    version="v1",
    model=llama_nano,
    optimizer=AdamConfig(learning_rate=6e-4, weight_decay=0.1),
    datasets={tinystories_tokenized: 1.0},
    batch_size=4,
    seq_len=2048,
    num_train_steps=100,
    resources=ResourceConfig.with_cpu(),
)

if __name__ == "__main__":
    StepRunner().run([lower(nano_tinystories_model)])
