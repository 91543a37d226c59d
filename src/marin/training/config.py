"""`TrainConfig`: everything that defines a training run except where its data and output live.

It is the one place a run's parameters are declared: `marin.experiment.train.train_lm` takes its
fields as keyword arguments (the train step's handle extends this dataclass), the trainer reads it,
and a train step's cache key is derived from it (`marin.execution.keyed`). Fields that change how a
run executes but not what it computes are marked `metadata=NOT_KEY`: a checkpoint written under one
value resumes under another (e.g. on another number of processes), and they stay out of the key.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, fields
from enum import StrEnum
from typing import TYPE_CHECKING, ClassVar

from marin.execution.arguments import Checked
from marin.execution.keyed import NOT_KEY, hash_attrs_of
from marin.training.errors import TrainingConfigError
from marin.training.model import LlamaConfig
from marin.training.optim import AdamConfig

if TYPE_CHECKING:
    from marin.training.datasets import DatasetInput


class Parallelism(StrEnum):
    """How the processes of a run share the model.

    DDP: each process holds the whole model and optimizer, and gradients are all-reduced.
    FSDP: each process holds a 1/world shard of every transformer block's (and the root's) parameters,
    gradients and optimizer state (FSDP2 `fully_shard`); on GPU parameters and compute are bf16 with
    fp32 gradient reduction, on CPU all fp32. FSDP runs write sharded checkpoints.
    """

    DDP = "ddp"
    FSDP = "fsdp"


_POSITIVE = ("batch_size", "seq_len", "num_train_steps", "eval_max_tokens", "prefetch", "grad_accum_steps")
_POSITIVE_OR_NONE = ("steps_per_eval", "checkpoint_every", "keep_last_k", "num_processes", "cpu_threads")


@dataclass(frozen=True, kw_only=True)
class TrainConfig(Checked):
    """Everything that defines a training run except where its data and output live.

    `steps_per_eval` and `checkpoint_every` count optimizer steps (None: only at the end);
    `keep_last_k` checkpoints are kept. `eval_max_tokens` caps the validation tokens scored per
    dataset at each evaluation.
    `parallelism` is "ddp" or "fsdp" (see `Parallelism`).
    `grad_accum_steps` splits each process's share of the batch into that many microbatches whose
    gradients add up before the optimizer step: the global batch stays `batch_size` whatever the world
    size, and memory holds one microbatch.
    `num_processes` is the number of data-parallel processes (None: one per requested GPU, else 1;
    on CPU >1 uses gloo, which is how DDP is tested without GPUs). `device` is "auto", "cpu" or
    "cuda". `compile` wraps the model in `torch.compile`. `cpu_threads` pins torch's intra-op
    threads; float reductions depend on it, so pin it when you need bit-identical reruns across
    machines. `loggers` may name "tensorboard", "wandb". `peak_flops` is one device's peak for the
    MFU figure (None: looked up). `prefetch` is how many batches the loader prepares ahead.
    """

    # keyed even at their defaults: these keys were published before defaults stayed out (marin.execution.keyed)
    KEYED_AT_DEFAULT: ClassVar[tuple[str, ...]] = (
        "seed",
        "steps_per_eval",
        "eval_max_tokens",
        "checkpoint_every",
        "keep_last_k",
    )

    model: LlamaConfig
    optimizer: AdamConfig
    batch_size: int
    seq_len: int
    num_train_steps: int
    seed: int = 0
    steps_per_eval: int | None = None
    eval_max_tokens: int = 1 << 18
    checkpoint_every: int | None = None
    keep_last_k: int | None = 2
    num_processes: int | None = field(default=None, metadata=NOT_KEY)
    device: str = field(default="auto", metadata=NOT_KEY)
    compile: bool = field(default=False, metadata=NOT_KEY)
    cpu_threads: int | None = field(default=None, metadata=NOT_KEY)
    loggers: tuple[str, ...] = field(default=(), metadata=NOT_KEY)
    peak_flops: float | None = field(default=None, metadata=NOT_KEY)
    prefetch: int = field(default=4, metadata=NOT_KEY)
    grad_accum_steps: int = field(default=1, metadata=NOT_KEY)
    parallelism: Parallelism = field(default=Parallelism.DDP, metadata=NOT_KEY)

    def __post_init__(self) -> None:
        if not isinstance(self.model, LlamaConfig):
            raise TrainingConfigError(f"model must be a LlamaConfig, got {type(self.model).__name__}")
        if not isinstance(self.optimizer, AdamConfig):
            raise TrainingConfigError(
                f"optimizer must be a marin.training.optim.AdamConfig, got {type(self.optimizer).__name__}"
            )
        if self.parallelism not in tuple(Parallelism):
            raise TrainingConfigError(
                f"parallelism must be one of {[p.value for p in Parallelism]}, got {self.parallelism!r}"
            )
        object.__setattr__(self, "parallelism", Parallelism(self.parallelism))
        object.__setattr__(self, "loggers", tuple(self.loggers))
        for name in _POSITIVE:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise TrainingConfigError(f"{name} must be a positive int, got {value!r}")
        for name in _POSITIVE_OR_NONE:
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
                raise TrainingConfigError(f"{name} must be a positive int or None, got {value!r}")
        if self.seq_len > self.model.max_seq_len:
            raise TrainingConfigError(
                f"seq_len={self.seq_len} is above the model's max_seq_len={self.model.max_seq_len}; lower "
                "seq_len or use a model config with a larger max_seq_len"
            )
        if self.device not in ("auto", "cpu", "cuda"):
            raise TrainingConfigError(f"device must be 'auto', 'cpu' or 'cuda', got {self.device!r}")

    def to_json(self) -> dict:
        """The whole configuration as JSON (recorded with the run's metrics)."""
        out = asdict(self)
        out["loggers"] = list(self.loggers)
        return out

    def result_json(self) -> dict:
        """The fields that determine what a run computes (all but those marked NOT_KEY)."""
        return hash_attrs_of(self)

    def fingerprint(self, datasets: tuple[DatasetInput, ...]) -> str:
        """A hash of what determines the numbers a run computes, datasets included."""
        fields = self.result_json()
        fields["datasets"] = [[d.name, d.weight] for d in datasets]
        return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]


def config_of(value: TrainConfig) -> TrainConfig:
    """A plain TrainConfig with `value`'s run fields (`value` may be a subclass, e.g. a train step's handle)."""
    if type(value) is TrainConfig:
        return value
    return TrainConfig(**{f.name: getattr(value, f.name) for f in fields(TrainConfig)})
