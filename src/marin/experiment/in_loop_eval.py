"""Harness tasks scored on the live model during training: `train_lm(..., eval_tasks=..., eval_tasks_every=N)`.

`HarnessTasks` is a trainer callback (`marin.training.callbacks`). Every `every` optimizer steps,
and at the last step, it builds the Hugging Face model of the weights being trained in memory (the
export's conversion, `ModelConfig.hf`, without writing files), scores the tasks through the same
bridge as `evaluate()` (`marin.evaluation.harness.run_tasks`, loss-based tasks: multiple choice
and perplexity), and adds each metric and its stderr to the step's `metrics.jsonl` record as
`<task>/<metric>` and `<task>/<metric>_stderr`. The items are those a post-hoc `evaluate()` with
the same `harness_items` scores, so at the last step the two agree.

It lives in `marin.experiment` because it joins the two pipelines, training and evaluation, which
meet nowhere else. With several processes every rank builds the model (under FSDP the ranks gather
the whole weights together) and the ranks share the items: each scores its part, rank 0 gathers the
per-item scores and logs metrics equal to one process's (`run_tasks(..., distributed=True)`; a task
with few-shot examples is scored on rank 0 alone, see there).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

import storage
from marin.training.callbacks import Callback, StepOutput, TrainerView


class HarnessTasks(Callback):
    """Score harness `tasks` on the live model every `every` steps and at the last; log to metrics.jsonl."""

    def __init__(
        self, tasks: tuple[str, ...], every: int | None, items: int = 50, seed: int = 0, batch_size: int = 8
    ):
        self.tasks, self.every, self.items, self.seed, self.batch_size = (
            tuple(tasks),
            every,
            items,
            seed,
            batch_size,
        )
        self._work: str | None = None
        self._tokenizer: Any = None

    def on_train_start(self, trainer: TrainerView) -> None:
        from transformers import AutoTokenizer

        from marin.data.corpus import CORPUS_SIZE, stories
        from marin.evaluation.harness import write_own_tasks

        self._work = tempfile.mkdtemp(prefix=f"marin-in-loop-{trainer.rank}-")
        tokenizer_dir = os.path.join(self._work, "tokenizer")
        os.makedirs(tokenizer_dir)
        source = trainer.tokenizer_path
        for name in storage.list_names(source):
            storage.download(storage.join(source, name), os.path.join(tokenizer_dir, name))
        self._tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
        held_out = [str(s) for s in stories(CORPUS_SIZE - self.items, CORPUS_SIZE)]
        self._tasks_dir = write_own_tasks(self._work, held_out, self.items, seed=self.seed)
        trainer.on_close(lambda: shutil.rmtree(self._work, ignore_errors=True))

    def on_step_end(self, trainer: TrainerView, step: StepOutput) -> None:
        due = (self.every and step.step % self.every == 0) or (step.last and not trainer.interrupted)
        if not due or not self.tasks:
            return
        from marin.evaluation.harness import harness_tasks, run_tasks

        done = run_tasks(
            live_hf_model(trainer),
            self._tokenizer,
            harness_tasks(self.tasks),
            self._tasks_dir,
            batch_size=self.batch_size,
            seed=self.seed,
            distributed=trainer.world_size > 1,
        )
        for task, result in done.items():
            for name, metric in result.metrics.items():
                step.record[f"{task}/{name}"] = metric.value
                step.record[f"{task}/{name}_stderr"] = metric.stderr
                step.record[f"{task}/{name}_n"] = metric.n


def live_hf_model(trainer: TrainerView):
    """The Hugging Face model of the weights being trained, in memory, float32 on CPU, on every rank
    (under FSDP the ranks gather the whole weights together first)."""
    import torch
    import transformers

    from marin.data.hf_models import HF_MODEL_BUILD_LOCK

    config = trainer.model_config
    module = trainer.whole_model()
    hf_json = config.hf.config_json(config, eos_id=trainer.eos_id)
    hf_config = transformers.AutoConfig.for_model(**hf_json)
    with HF_MODEL_BUILD_LOCK:
        model = transformers.AutoModelForCausalLM.from_config(hf_config, dtype=torch.float32)
    weights = {k: v.detach().to("cpu", torch.float32) for k, v in module.named_parameters()}
    missing, unexpected = model.load_state_dict(config.hf.to_hf_state_dict(config, weights), strict=False)
    if unexpected or [m for m in missing if not (config.tie_embeddings and m == "lm_head.weight")]:
        raise RuntimeError(
            f"in-loop evaluation: the HF model does not take these weights (missing {missing}, unexpected {unexpected})"
        )
    if config.tie_embeddings:
        model.tie_weights()
    return model.eval()
