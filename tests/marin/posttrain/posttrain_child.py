"""A post-training process for the resume tests: `python posttrain_child.py MODEL_DIR OUT KIND STEPS [KILL_AFTER]`.

KIND is "sft" (full fine-tuning) or "dpo-lora" (DPO through LoRA adapters). With KILL_AFTER it
SIGKILLs itself once step KILL_AFTER is recorded (and checkpointed when due), as a preemption
would. `posttrain_job` is the run the tests share.
"""

import os
import signal
import sys

from marin.data.chat import ChatData
from marin.posttrain.lora import LoraConfig
from marin.posttrain.source import resolve
from marin.posttrain.trainer import Objective, PostTrainJob
from marin.training.callbacks import Callback
from marin.training.config import TrainConfig
from marin.training.optim import AdamConfig
from marin.training.schedules import Cosine
from marin.training.trainer import train

QA = "marin://tinystories-qa"


class KillAfterStep(Callback):
    """SIGKILLs the process in step `step + 1`, before its records."""

    def __init__(self, step: int):
        self.step = step

    def on_step_end(self, trainer, step) -> None:
        if step.step == self.step + 1:
            os.kill(os.getpid(), signal.SIGKILL)


def posttrain_job(model_dir: str, out: str, kind: str, steps: int, callbacks=()) -> PostTrainJob:
    """A few steps of SFT or DPO-with-LoRA on a handful of QA conversations or pairs."""
    weights = resolve(model_dir)
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
    return PostTrainJob(
        config=config,
        datasets=(),
        output_path=out,
        objective=Objective.DPO if dpo else Objective.SFT,
        data=ChatData(source=QA, sample_count=6),
        validation=ChatData(source=QA, split="validation", sample_count=2),
        weights=weights.hf_path,
        tokenizer_path=weights.hf_path,
        base_hf_path=weights.hf_path,
        lora=LoraConfig(rank=2, targets=("q_proj", "v_proj"), dropout=0.1) if dpo else None,
    )


if __name__ == "__main__":
    model_dir, out, kind, steps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    kill_after = int(sys.argv[5]) if len(sys.argv) > 5 else None
    train(posttrain_job(model_dir, out, kind, steps, (KillAfterStep(kill_after),) if kill_after else ()))
