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
from typing import Any, ClassVar

from marin.execution.arguments import Checked
from marin.execution.keyed import NOT_KEY, hash_attrs_of, key_as
from marin.training.blocks import ActivationCheckpointing
from marin.training.callbacks.base import Callback
from marin.training.errors import TrainingConfigError
from marin.training.models import ModelConfig, architectures, is_model_config, model_key
from marin.training.optim import OptimizerConfig


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
_POSITIVE_OR_NONE = (
    "steps_per_eval",
    "checkpoint_every",
    "export_every",
    "keep_last_k",
    "num_processes",
    "cpu_threads",
)
_COMPILE = ("auto", True, False)


@dataclass(frozen=True, kw_only=True)
class TrainRecipe(Checked):
    """How a run trains: everything of a `TrainConfig` but the model.

    Post-training (`marin.experiment.posttrain`: `sft()`, `dpo()`) declares a recipe and finds the
    model in what it fine-tunes; `TrainConfig` is a recipe and the model it trains.
    `steps_per_eval` counts optimizer steps (None: only at the end). A checkpoint is written every
    `checkpoint_every_minutes` of wall time (default 10, None: never by time), every
    `checkpoint_every` optimizer steps (None: never by count), at the end,
    and when the run is stopped (a callback's `request_stop`, SIGTERM or SIGINT: the trainer
    finishes the step it is in, writes a checkpoint and exits; a second signal exits at once).
    `keep_last_k` checkpoints are kept. `export_every` also writes a Hugging Face export of the model
    every that many optimizer steps, to `hf/step-NNNNNNNN/` (the final one stays in `hf/`), so an
    evaluation can score every checkpoint (`evaluate(..., checkpoints="all")`). `eval_max_tokens`
    caps the validation tokens scored per dataset at each evaluation.
    `parallelism` is "ddp" or "fsdp" (see `Parallelism`).
    `grad_accum_steps` splits each process's share of the batch into that many microbatches whose
    gradients add up before the optimizer step: the global batch stays `batch_size` whatever the world
    size, and memory holds one microbatch.
    `num_processes` is the number of data-parallel processes (None: one per requested GPU, else 1;
    on CPU >1 uses gloo, which is how DDP is tested without GPUs). `device` is "auto", "cpu" or
    "cuda". `compile` is "auto" (torch.compile each block on CUDA, nothing on CPU), True (each
    block, on any device) or False. `activation_checkpointing` is "none", "full" or "selective"
    (see `ActivationCheckpointing`). `cpu_threads` pins torch's intra-op threads; float reductions
    depend on it, so pin it when you need bit-identical reruns across machines. `loggers` may name
    "tensorboard", "wandb". `peak_flops` is one device's peak for the MFU figure (None: looked up).
    `prefetch` is how many batches the loader prepares ahead. `callbacks` are called at each step
    (`marin.training.callbacks.Callback`), after the built-in ones of lower priority; they must
    pickle (module-level classes), run on every process, and are not part of the key: a callback
    that changes what the run computes (one that stops it early) belongs with a `version`. Each
    callback's state is checkpointed under its name; a checkpoint holding the state of a callback
    the run no longer has is refused unless `drop_callback_state` names it (that state is then
    dropped).

    The recipes (docs/training.md): `z_loss` is the coefficient of the z-loss on the logits (0: off;
    1e-4 is PaLM's); `ema` the decay of an exponential moving average of the weights (None: none),
    which the export holds instead of the last weights while `export_ema`; `skip_bad_steps` k skips
    the update of a step whose loss is not finite or above k times its running mean (None: never);
    `document_masking` keeps attention within the documents of a window (at EOS) and restarts
    positions at each.
    """

    # keyed even at their defaults: these keys were published before defaults stayed out (marin.execution.keyed)
    KEYED_AT_DEFAULT: ClassVar[tuple[str, ...]] = (
        "seed",
        "steps_per_eval",
        "eval_max_tokens",
        "checkpoint_every",
        "keep_last_k",
    )

    optimizer: OptimizerConfig
    batch_size: int
    seq_len: int
    num_train_steps: int
    seed: int = 0
    steps_per_eval: int | None = None
    eval_max_tokens: int = 1 << 18
    checkpoint_every: int | None = None
    keep_last_k: int | None = 2
    export_every: int | None = None
    z_loss: float = 0.0
    ema: float | None = None
    export_ema: bool = True
    skip_bad_steps: float | None = None
    document_masking: bool = False
    num_processes: int | None = field(default=None, metadata=NOT_KEY)
    device: str = field(default="auto", metadata=NOT_KEY)
    compile: bool | str = field(default="auto", metadata=NOT_KEY)
    activation_checkpointing: ActivationCheckpointing = field(
        default=ActivationCheckpointing.NONE, metadata=NOT_KEY
    )
    checkpoint_every_minutes: float | None = field(default=10.0, metadata=NOT_KEY)
    callbacks: tuple[Callback, ...] = field(default=(), metadata=NOT_KEY)
    drop_callback_state: tuple[str, ...] = field(default=(), metadata=NOT_KEY)
    cpu_threads: int | None = field(default=None, metadata=NOT_KEY)
    loggers: tuple[str, ...] = field(default=(), metadata=NOT_KEY)
    peak_flops: float | None = field(default=None, metadata=NOT_KEY)
    prefetch: int = field(default=4, metadata=NOT_KEY)
    grad_accum_steps: int = field(default=1, metadata=NOT_KEY)
    parallelism: Parallelism = field(default=Parallelism.DDP, metadata=NOT_KEY)

    def __post_init__(self) -> None:
        if not isinstance(self.optimizer, OptimizerConfig):
            raise TrainingConfigError(
                "optimizer must be a marin.training.optim OptimizerConfig (AdamConfig, MuonConfig), got "
                f"{type(self.optimizer).__name__}"
            )
        if self.parallelism not in tuple(Parallelism):
            raise TrainingConfigError(
                f"parallelism must be one of {[p.value for p in Parallelism]}, got {self.parallelism!r}"
            )
        object.__setattr__(self, "parallelism", Parallelism(self.parallelism))
        if self.activation_checkpointing not in tuple(ActivationCheckpointing):
            raise TrainingConfigError(
                "activation_checkpointing must be one of "
                f"{[m.value for m in ActivationCheckpointing]}, got {self.activation_checkpointing!r}"
            )
        object.__setattr__(
            self, "activation_checkpointing", ActivationCheckpointing(self.activation_checkpointing)
        )
        if not any(
            self.compile is c or self.compile == c and type(self.compile) is type(c) for c in _COMPILE
        ):
            raise TrainingConfigError(f"compile must be 'auto', True or False, got {self.compile!r}")
        minutes = self.checkpoint_every_minutes
        if minutes is not None and (
            isinstance(minutes, bool) or not isinstance(minutes, int | float) or not minutes > 0
        ):
            raise TrainingConfigError(
                f"checkpoint_every_minutes must be a number > 0 or None, got {minutes!r}"
            )
        object.__setattr__(self, "loggers", tuple(self.loggers))
        object.__setattr__(self, "callbacks", tuple(self.callbacks))
        object.__setattr__(self, "drop_callback_state", tuple(self.drop_callback_state))
        self._check_callbacks()
        for name in _POSITIVE:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise TrainingConfigError(f"{name} must be a positive int, got {value!r}")
        for name in _POSITIVE_OR_NONE:
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
                raise TrainingConfigError(f"{name} must be a positive int or None, got {value!r}")
        self.optimizer.check_run(self.num_train_steps, sharded=self.parallelism == Parallelism.FSDP)
        self._check_recipes()
        if self.device not in ("auto", "cpu", "cuda"):
            raise TrainingConfigError(f"device must be 'auto', 'cpu' or 'cuda', got {self.device!r}")

    def _check_callbacks(self) -> None:
        names: set[str] = set()
        for callback in self.callbacks:
            if not isinstance(callback, Callback):
                raise TrainingConfigError(
                    f"callbacks take marin.training.callbacks.Callback instances, got {type(callback).__name__}"
                )
            if callback.name in names:
                raise TrainingConfigError(
                    f"callbacks: two are named {callback.name!r}, and each callback's state is saved under its "
                    "name; give one another name (set its `name`)"
                )
            names.add(callback.name)

    def _check_recipes(self) -> None:
        z = self.z_loss
        if isinstance(z, bool) or not isinstance(z, int | float) or not 0 <= z < float("inf"):
            raise TrainingConfigError(f"z_loss must be a coefficient ≥ 0 (e.g. 1e-4; 0 is off), got {z!r}")
        if self.ema is not None and not (isinstance(self.ema, int | float) and 0 < self.ema < 1):
            raise TrainingConfigError(f"ema must be a decay in (0, 1), e.g. 0.999, or None, got {self.ema!r}")
        if self.ema is not None and self.parallelism == Parallelism.FSDP:
            raise TrainingConfigError(
                "ema keeps a whole copy of the weights beside each process's model, which FSDP shards; "
                "use parallelism='ddp' with ema"
            )
        k = self.skip_bad_steps
        if k is not None and (isinstance(k, bool) or not isinstance(k, int | float) or not k > 1):
            raise TrainingConfigError(
                f"skip_bad_steps must be a factor > 1 (skip a step whose loss is above that many times "
                f"its running mean, e.g. 3.0) or None, got {k!r}"
            )

    def recipe_fields(self) -> dict[str, Any]:
        """This recipe's fields by name (of a subclass too: only those a TrainRecipe has)."""
        return {f.name: getattr(self, f.name) for f in fields(TrainRecipe)}


@dataclass(frozen=True, kw_only=True)
class TrainConfig(TrainRecipe):
    """Everything that defines a training run except where its data and output live: a `TrainRecipe`
    (see it for every field but one) and `model`, any registered architecture's config
    (`marin.training.models`: `LlamaConfig`, `Qwen3Config`, `Olmo2Config`, ...)."""

    model: ModelConfig = field(metadata=key_as(model_key))

    def __post_init__(self) -> None:
        if not is_model_config(self.model):
            known = ", ".join(f"{cls.__name__} ({name})" for name, cls in sorted(architectures().items()))
            raise TrainingConfigError(
                f"model must be the config of a registered architecture ({known}), got {type(self.model).__name__}"
            )
        super().__post_init__()
        if self.seq_len > self.model.max_seq_len:
            raise TrainingConfigError(
                f"seq_len={self.seq_len} is above the model's max_seq_len={self.model.max_seq_len}; lower "
                "seq_len or use a model config with a larger max_seq_len"
            )

    def to_json(self) -> dict[str, Any]:
        """The whole configuration as JSON (recorded with the run's metrics); callbacks by class name."""
        out = _plain(
            {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("model", "callbacks")}
        )
        out["model"] = {"architecture": self.model.architecture, **asdict(self.model)}
        out["callbacks"] = [type(c).__qualname__ for c in self.callbacks]
        return out

    def result_json(self) -> dict:
        """The fields that determine what a run computes (all but those marked NOT_KEY)."""
        return hash_attrs_of(self)

    def fingerprint(self, objective_fields: dict[str, Any]) -> str:
        """A hash of what determines the numbers a run computes: these fields and the objective's (its
        data, its loss's settings: `Objective.fingerprint_fields`). A checkpoint carries it."""
        fields = self.result_json()
        fields.update(objective_fields)
        return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]


def _plain(values: dict[str, Any]) -> dict[str, Any]:
    """Dataclass values as dicts, tuples as lists: JSON-ready."""
    out = {}
    for name, value in values.items():
        if hasattr(value, "__dataclass_fields__"):
            value = asdict(value)
        elif isinstance(value, tuple):
            value = list(value)
        out[name] = value
    return out


def config_of(value: TrainConfig) -> TrainConfig:
    """A plain TrainConfig with `value`'s run fields (`value` may be a subclass, e.g. a train step's handle)."""
    if type(value) is TrainConfig:
        return value
    return TrainConfig(**{f.name: getattr(value, f.name) for f in fields(TrainConfig)})
