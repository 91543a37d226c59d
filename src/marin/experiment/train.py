"""`train_lm()`: declare a language-model training step. Declaring runs nothing.

    model = train_lm(name="checkpoints/nano", model=llama_nano, optimizer=AdamConfig(learning_rate=6e-4),
                     datasets={tinystories_tokenized: 1.0}, batch_size=4, seq_len=2048, num_train_steps=100)
    StepRunner().run([lower(model)])

The step's output holds `checkpoints/`, `metrics.jsonl` and `hf/` (a Hugging Face export); its
`.artifact.json` records `hf_path`, the final loss, eval loss and bits-per-byte, and the unigram
entropy of the training tokens. A rerun after a crash resumes from the latest checkpoint.

`init_from=` starts from existing weights: another train step (its handle or StepSpec, which
becomes a dependency), a train step's output folder, a checkpoint folder, or a Hugging Face model
folder. The source is part of the key (a step by its key, a folder by its absolute path).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import storage
from marin.execution.context import current
from marin.execution.lazy import LazyStep, lower
from marin.execution.step_spec import StepSpec
from marin.training.datasets import DatasetInput
from marin.training.errors import TrainingConfigError
from marin.training.model import LlamaConfig
from marin.training.optim import AdamConfig
from marin.training.trainer import TrainConfig, TrainJob


@dataclass(frozen=True)
class TrainStepConfig:
    """What the train step's function needs: the run, and which dependency holds each dataset."""

    train: TrainConfig
    datasets: tuple[tuple[str, float], ...]
    run_name: str
    num_processes: int
    init_from_step: str | None = None  # the dependency whose output holds the starting weights
    init_from_path: str | None = None  # or a folder given by path


def run_train_step(config: TrainStepConfig, output_path: str) -> dict:
    """The train step's `fn`: find the token caches, train (or resume), export; return the summary."""
    from marin.training.launch import run_job

    ctx = current()
    datasets = tuple(DatasetInput(name, ctx.path_of(name), weight) for name, weight in config.datasets)
    init_from = ctx.path_of(config.init_from_step) if config.init_from_step else config.init_from_path
    job = TrainJob(
        config=config.train,
        datasets=datasets,
        output_path=output_path,
        run_name=config.run_name,
        init_from=init_from,
    )
    return run_job(job, config.num_processes)


@dataclass(frozen=True)
class TrainLm:
    """Lazy handle of a training step; `to_step_spec()` lowers its datasets' tokenize steps too."""

    name: str
    config: TrainConfig
    datasets: tuple[tuple[Any, float], ...]
    resources: Any = None
    version: str | None = None
    init_from: Any = None  # a train handle or StepSpec, or an absolute folder path
    adopt: bool = False  # take an existing run folder at the output path (see StepSpec.adopt)

    def to_step_spec(self) -> StepSpec:
        """The StepSpec: deps are the tokenize steps (and an `init_from` step), hash_attrs the run's configuration."""
        deps = [lower(handle) for handle, _ in self.datasets]
        weights = tuple((spec.name, weight) for spec, (_, weight) in zip(deps, self.datasets, strict=True))
        init_step = (
            None if self.init_from is None or isinstance(self.init_from, str) else lower(self.init_from)
        )
        step_config = TrainStepConfig(
            train=self.config,
            datasets=weights,
            run_name=self.name,
            num_processes=self.num_processes,
            init_from_step=init_step.name if init_step else None,
            init_from_path=self.init_from if isinstance(self.init_from, str) else None,
        )
        # execution fields (process count, device, ...) stay out: the same run on 1 or 8 processes is one step
        hash_attrs = self.config.result_json()
        hash_attrs["datasets"] = [{"step": name, "weight": weight} for name, weight in weights]
        if init_step is not None:  # its key enters through deps
            deps.append(init_step)
            hash_attrs["init_from"] = {"step": init_step.name}
        elif self.init_from is not None:
            hash_attrs["init_from"] = {"path": self.init_from}
        return StepSpec(
            name=self.name,
            fn=functools.partial(run_train_step, step_config),
            deps=deps,
            hash_attrs=hash_attrs,
            version=self.version,
            resources=self.resources,
            resumable=True,  # checkpoints are written atomically; a rerun resumes from the latest
            adopt=self.adopt,
        )

    @property
    def num_processes(self) -> int:
        """Data-parallel processes: `num_processes` if given, else one per requested GPU, else 1."""
        if self.config.num_processes:
            return self.config.num_processes
        return max(1, getattr(self.resources, "gpu_count", 0) or 1)


def _is_tokenized_handle(obj: Any) -> bool:
    from marin.experiment.data import TokenizedData

    return isinstance(obj, TokenizedData)


def train_lm(
    name: str,
    model: LlamaConfig,
    optimizer: AdamConfig,
    datasets: Mapping[Any, float],
    batch_size: int,
    seq_len: int,
    num_train_steps: int,
    resources: Any = None,
    version: str | None = None,
    *,
    steps_per_eval: int | None = None,
    eval_max_tokens: int = 1 << 18,
    checkpoint_every: int | None = None,
    keep_last_k: int | None = 2,
    seed: int = 0,
    num_processes: int | None = None,
    device: str = "auto",
    compile: bool = False,
    cpu_threads: int | None = None,
    loggers: Sequence[str] = (),
    peak_flops: float | None = None,
    init_from: Any = None,
    adopt: bool = False,
    grad_accum_steps: int = 1,
    parallelism: str = "ddp",
) -> TrainLm:
    """Declare training `model` with `optimizer` on a weighted mixture of `tokenized()` datasets.

    `datasets` maps each tokenized handle to its mixture weight (> 0). `steps_per_eval` and
    `checkpoint_every` count steps (None: at the end only); `keep_last_k` checkpoints are kept.
    Several processes (DDP) run when `resources` asks for several GPUs or `num_processes` > 1 (on
    CPU that uses gloo), and across hosts when `resources` has `replicas=R` (a gang of R processes,
    see docs/clusters.md). `grad_accum_steps` splits each process's share of the batch into
    microbatches, so `batch_size` is the global batch at any world size. `parallelism` is "ddp"
    (every process holds the whole model) or "fsdp" (FSDP2: each holds a shard of every block; bf16
    on GPU; sharded checkpoints that resume at any world size). `loggers` may name
    "tensorboard" and "wandb". `init_from` starts from
    existing weights (loaded before step 0; a resume still starts from the run's own checkpoint):
    another train step's handle or StepSpec (a dependency), or the path of a train step's output, a
    checkpoint folder or a Hugging Face model folder; the model config must match its shapes.
    Everything that can be checked without data is checked here; the token caches are checked
    before the first step.
    `adopt=True` takes an existing run folder (with `hf/`) at the step's output path without training.
    """
    if not isinstance(model, LlamaConfig):
        raise TrainingConfigError(
            f"train_lm {name!r}: model must be a LlamaConfig, got {type(model).__name__}"
        )
    if not isinstance(optimizer, AdamConfig):
        raise TrainingConfigError(
            f"train_lm {name!r}: optimizer must be a marin.training.optim.AdamConfig, got {type(optimizer).__name__}"
        )
    if not isinstance(datasets, Mapping) or not datasets:
        raise TrainingConfigError(
            f"train_lm {name!r}: datasets must be a non-empty {{tokenized(...): weight}} dict"
        )
    for handle, weight in datasets.items():
        if not _is_tokenized_handle(handle):
            raise TrainingConfigError(
                f"train_lm {name!r}: dataset {handle!r:.80} is a {type(handle).__name__}, not a tokenized handle; "
                "pass the value tokenized(...) returns"
            )
        if isinstance(weight, bool) or not isinstance(weight, int | float) or not weight > 0:
            raise TrainingConfigError(
                f"train_lm {name!r}: dataset {handle.name!r} has weight {weight!r}; every weight must be a number > 0"
            )
    init_from = _init_source(name, init_from)
    try:
        config = TrainConfig(
            model=model,
            optimizer=optimizer,
            batch_size=batch_size,
            seq_len=seq_len,
            num_train_steps=num_train_steps,
            seed=seed,
            steps_per_eval=steps_per_eval,
            eval_max_tokens=eval_max_tokens,
            checkpoint_every=checkpoint_every,
            keep_last_k=keep_last_k,
            num_processes=num_processes,
            device=device,
            compile=compile,
            cpu_threads=cpu_threads,
            loggers=tuple(loggers),
            peak_flops=peak_flops,
            grad_accum_steps=grad_accum_steps,
            parallelism=parallelism,
        )
    except TrainingConfigError as exc:
        raise TrainingConfigError(f"train_lm {name!r}: {exc}") from None
    handle = TrainLm(
        name=name,
        config=config,
        datasets=tuple((h, float(w)) for h, w in datasets.items()),
        resources=resources,
        version=version,
        init_from=init_from,
        adopt=adopt,
    )
    world = handle.num_processes * getattr(resources, "replicas", 1)
    if config.batch_size % (world * config.grad_accum_steps):
        raise TrainingConfigError(
            f"train_lm {name!r}: batch_size={batch_size} does not split over {world} processes x "
            f"grad_accum_steps={config.grad_accum_steps}; use a multiple of their product"
        )
    return handle


def _init_source(name: str, init_from: Any) -> Any:
    """`init_from` as TrainLm holds it: None, a step (handle or StepSpec), or an absolute path."""
    if init_from is None or isinstance(init_from, StepSpec) or isinstance(init_from, TrainLm):
        return init_from
    if isinstance(init_from, os.PathLike | str):
        path = os.fspath(init_from)
        if not path:
            raise TrainingConfigError(f"train_lm {name!r}: init_from is an empty path")
        return storage.absolute(path)
    if isinstance(init_from, LazyStep) and not isinstance(init_from, type):
        return init_from
    raise TrainingConfigError(
        f"train_lm {name!r}: init_from is a {type(init_from).__name__}; give another train step (its handle or "
        "StepSpec) or the path of a train output, a checkpoint folder or a Hugging Face model folder"
    )
