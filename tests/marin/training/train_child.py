"""A training process for the resume tests: `python train_child.py CACHE OUT STEPS [KILL_AFTER [ARCH]]`.

With KILL_AFTER (0: never) it SIGKILLs itself once step KILL_AFTER is recorded (and checkpointed
when due), as a preemption would. ARCH trains that architecture's nano size (`arch_config`)
instead of `tiny_config`'s Llama. Also the callbacks the trainer's tests share.
"""

import os
import signal
import sys
import time

from marin.training.callbacks import Callback
from marin.training.config import TrainConfig
from marin.training.datasets import DatasetInput
from marin.training.models import LlamaConfig
from marin.training.optim import AdamConfig
from marin.training.schedules import Cosine
from marin.training.trainer import TrainJob, train

# The length of the gang tests' runs, and of the one-process run they match (conftest's `single_run`).
GANG_STEPS = 20
# The length of the uninterrupted child run the kill-and-resume tests match (conftest's `straight_run`).
STRAIGHT_STEPS = 10


def tiny_config(num_train_steps: int, **overrides) -> TrainConfig:
    """The small run the resume and DDP tests share."""
    fields = dict(
        model=LlamaConfig(
            hidden_dim=32, intermediate_dim=64, num_layers=2, num_heads=4, num_kv_heads=2, max_seq_len=64
        ),
        optimizer=AdamConfig(learning_rate=3e-3, weight_decay=0.1, schedule=Cosine(warmup=2)),
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


def arch_config(arch: str, num_train_steps: int, **overrides) -> TrainConfig:
    """The nano size of architecture `arch` (experiments.models.NANO), trained as the architecture tests do."""
    from experiments.models import NANO

    fields = dict(
        model=NANO[arch],
        optimizer=AdamConfig(learning_rate=6e-3, schedule=Cosine(warmup=3)),
        batch_size=16,
        seq_len=64,
    )
    fields |= dict(seed=0, steps_per_eval=None, eval_max_tokens=1024, checkpoint_every=10)
    return tiny_config(num_train_steps, **(fields | overrides))


class Stop(Exception):
    """Ends a run on purpose, after a checkpoint."""


class KillAfterStep(Callback):
    """SIGKILLs the process in step `step + 1`, before its records: step `step` is written (and
    checkpointed when due), the next one never is."""

    def __init__(self, step: int):
        self.step = step

    def on_step_end(self, trainer, step) -> None:
        if step.step == self.step + 1:
            os.kill(os.getpid(), signal.SIGKILL)


class FailAfterStep(Callback):
    """Raises `Stop` on rank 0 in step `step + 1`, before its records and checkpoint."""

    def __init__(self, step: int):
        self.step = step

    def on_step_end(self, trainer, step) -> None:
        if step.step == self.step + 1 and os.environ.get("RANK", "0") == "0":
            raise Stop(f"stopped after step {self.step}")


class SleepEachStep(Callback):
    """Makes every step `seconds` slower (room to kill a process mid-run)."""

    def __init__(self, seconds: float):
        self.seconds = seconds

    def on_step_end(self, trainer, step) -> None:
        time.sleep(self.seconds)


if __name__ == "__main__":
    cache, out, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    kill_after = int(sys.argv[4]) if len(sys.argv) > 4 else None
    callbacks = (KillAfterStep(kill_after),) if kill_after else ()
    arch = sys.argv[5] if len(sys.argv) > 5 else None
    job = TrainJob(
        config=arch_config(arch, steps, callbacks=callbacks)
        if arch
        else tiny_config(steps, callbacks=callbacks),
        datasets=(DatasetInput("stories", cache, 1.0),),
        output_path=out,
    )
    train(job)
