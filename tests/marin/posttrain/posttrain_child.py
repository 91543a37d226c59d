"""A post-training process for the resume tests: `python posttrain_child.py MODEL_DIR OUT KIND STEPS [KILL_AFTER]`.

KIND is "sft" (full fine-tuning) or "dpo-lora" (DPO through LoRA adapters). With KILL_AFTER it
SIGKILLs itself once step KILL_AFTER is recorded (and checkpointed when due), as a preemption
would. `posttrain_job` is the run the tests share.
"""

import os
import signal
import sys

from marin.data.chat import ChatData
from marin.posttrain.dpo import DpoObjective
from marin.posttrain.lora import LoraConfig
from marin.posttrain.sft import SftObjective
from marin.training.callbacks import Callback
from marin.training.config import TrainConfig
from marin.training.loading import exported_model
from marin.training.optim import AdamConfig
from marin.training.schedules import Cosine
from marin.training.trainer import TrainJob, train

QA = "marin://tinystories-qa"


class KillAfterStep(Callback):
    """SIGKILLs the process in step `step + 1`, before its records."""

    def __init__(self, step: int):
        self.step = step

    def on_step_end(self, trainer, step) -> None:
        if step.step == self.step + 1:
            os.kill(os.getpid(), signal.SIGKILL)


def posttrain_job(model_dir: str, out: str, kind: str, steps: int, callbacks=()) -> TrainJob:
    """A few steps of SFT or DPO-with-LoRA on a handful of QA conversations or pairs."""
    weights = exported_model(model_dir)
    config = TrainConfig(
        model=weights.model_config,
        optimizer=AdamConfig(learning_rate=3e-3, schedule=Cosine(warmup=1)),
        batch_size=2,
        seq_len=448,
        num_train_steps=steps,
        seed=5,
        steps_per_eval=3,
        checkpoint_every=2,
        keep_last_k=2,
        cpu_threads=1,
        document_masking=kind == "sft",
        callbacks=callbacks,
    )
    dpo = kind == "dpo-lora"
    data = ChatData(source=QA, sample_count=6)
    validation = ChatData(source=QA, split="validation", sample_count=2)
    if dpo:
        lora = LoraConfig(rank=2, targets=("q_proj", "v_proj"), dropout=0.1)
        objective = DpoObjective(data, validation, weights=weights.hf_path, lora=lora)
    else:
        objective = SftObjective(data, validation, weights=weights.hf_path)
    return TrainJob(config=config, datasets=(), output_path=out, objective=objective)


if __name__ == "__main__":
    model_dir, out, kind, steps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    kill_after = int(sys.argv[5]) if len(sys.argv) > 5 else None
    train(posttrain_job(model_dir, out, kind, steps, (KillAfterStep(kill_after),) if kill_after else ()))
