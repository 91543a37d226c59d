"""A learning curve on held-out text, without the harness: every 10 steps' export scored on the same stories.

    marin run experiments/tutorials/checkpoint_curve.py

See docs/evaluation.md, "Checkpoints and curves".
"""

from marin.experiment.data import tokenized, train_tokenizer
from marin.experiment.evaluate import evaluate
from marin.experiment.train import train_lm
from marin.training.models import LlamaConfig
from marin.training.optim import AdamConfig

tokenizer = train_tokenizer(
    name="tokenizers/curve-bpe", source="marin://tinystories-synth", vocab_size=512, sample_count=2000
)
stories = tokenized(
    name="tokenized/curve-stories", tokenizer=tokenizer, source="marin://tinystories-synth", sample_count=400
)
model = train_lm(
    "checkpoints/curve",
    model=LlamaConfig(hidden_dim=32, intermediate_dim=64, num_layers=2, num_heads=2, max_seq_len=128),
    optimizer=AdamConfig(learning_rate=3e-3),
    datasets={stories: 1.0},
    batch_size=4,
    seq_len=128,
    num_train_steps=40,
    export_every=10,
    cpu_threads=1,
)
ev = evaluate("eval/curve", model=model, datasets=[stories], checkpoints="all")
