"""A training process for the resume tests: `python train_child.py CACHE OUT STEPS [KILL_AT]`.

With KILL_AT it SIGKILLs itself right after step KILL_AT, as a preemption would.
"""

import os
import signal
import sys

from marin.training.config import TrainConfig
from marin.training.datasets import DatasetInput
from marin.training.model import LlamaConfig
from marin.training.optim import AdamConfig
from marin.training.trainer import TrainJob, train


def tiny_config(num_train_steps: int, **overrides) -> TrainConfig:
    """The small run the resume and DDP tests share."""
    fields = dict(
        model=LlamaConfig(
            hidden_dim=32, intermediate_dim=64, num_layers=2, num_heads=4, num_kv_heads=2, max_seq_len=64
        ),
        optimizer=AdamConfig(learning_rate=3e-3, weight_decay=0.1, warmup=2),
        batch_size=4,
        seq_len=32,
        num_train_steps=num_train_steps,
        seed=3,
        steps_per_eval=4,
        eval_max_tokens=512,
        checkpoint_every=3,
        keep_last_k=2,
        cpu_threads=1,
    )
    fields.update(overrides)
    return TrainConfig(**fields)


def _kill_at(step: int):
    def hook(done: int) -> None:
        if done == step:
            os.kill(os.getpid(), signal.SIGKILL)

    return hook


if __name__ == "__main__":
    cache, out, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    kill_at = int(sys.argv[4]) if len(sys.argv) > 4 else None
    job = TrainJob(
        config=tiny_config(steps),
        datasets=(DatasetInput("stories", cache, 1.0),),
        output_path=out,
        on_step_end=_kill_at(kill_at) if kill_at else None,
    )
    train(job)
