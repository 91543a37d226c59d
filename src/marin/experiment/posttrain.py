"""`sft()` and `dpo()`: declare post-training steps. Declaring runs nothing.

    chat = sft("checkpoints/nano-sft", model=base, dataset="marin://tinystories-qa",
               optimizer=AdamConfig(learning_rate=1e-3), batch_size=8, seq_len=512, num_train_steps=300)
    aligned = dpo("checkpoints/nano-dpo", model=chat, dataset="marin://tinystories-qa", beta=0.1, ...)

Each is a train step: the same recipe fields as `train_lm` (`marin.training.config.TrainRecipe`:
optimizer, batch_size, seq_len, num_train_steps, seed, schedules, z_loss, EMA, checkpoints,
parallelism, ...), the same checkpoints and exact resume, the same `hf/` export (with the chat
template and a generation config that stops at the end of a turn). `model` is what is fine-tuned: a
step (its handle or StepSpec: a dependency, its `hf/` export the starting weights), a folder (a step's
output or a Hugging Face model folder: its files enter the key) or a hub id (`ORG/NAME[@REVISION]`).
The model's tokenizer must have a chat template (`train_tokenizer(..., chat_template="llama3")`, or a
hub tokenizer's own). `lora=LoraConfig(...)` trains adapters instead of the weights; the step then
also writes `adapter/` in PEFT's format. See docs/post_training.md.
"""

from __future__ import annotations

import functools
import os
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, ClassVar

import storage
from fray.cluster import TpuConfig
from marin.data.chat import ChatData, ChatDataError
from marin.data.tinystories_qa import SOURCE_NAME as QA_SOURCE
from marin.execution.context import current
from marin.execution.keyed import NOT_KEY, hash_attrs_of
from marin.execution.lazy import LazyStep, StepOptions, lower
from marin.execution.step_spec import StepSpec
from marin.experiment.declared_names import check_chat_template, check_lora_targets
from marin.posttrain.lora import LoraConfig
from marin.posttrain.source import (
    WeightsSource,
    declared_inputs,
    download_hub_model,
    looks_like_hub_id,
    resolve,
)
from marin.posttrain.trainer import Objective, PostTrainJob
from marin.training.config import Parallelism, TrainConfig, TrainRecipe
from marin.training.errors import TrainingConfigError

ModelArg = StepSpec | LazyStep | str | os.PathLike


@dataclass(frozen=True)
class PostTrainStepConfig:
    """What a post-training step's function needs; its key is every field but the execution-only ones."""

    recipe: TrainRecipe
    objective: Objective
    model: WeightsSource
    data: ChatData
    validation: ChatData | None = None
    lora: LoraConfig | None = None
    beta: float = 0.1
    label_smoothing: float = 0.0
    reference: WeightsSource | None = None
    run_name: str = field(default="posttrain", metadata=NOT_KEY)
    num_processes: int = field(default=1, metadata=NOT_KEY)


def _folder(source: WeightsSource) -> str:
    """The folder a source is at, inside the running step (a hub model is fetched first)."""
    if source.step is not None:
        return current().path_of(source.step)
    if source.path is not None:
        return source.path
    return download_hub_model(source.hub, source.revision)


def run_posttrain_step(config: PostTrainStepConfig, output_path: str) -> dict:
    """The step's `fn`: resolve the starting weights, post-train (or resume), export; return the summary."""
    from marin.training.launch import run_job

    weights = resolve(_folder(config.model))
    reference = resolve(_folder(config.reference)).hf_path if config.reference is not None else None
    train = TrainConfig(model=weights.model_config, **config.recipe.recipe_fields())
    job = PostTrainJob(
        config=train,
        datasets=(),
        output_path=output_path,
        run_name=config.run_name,
        objective=config.objective,
        data=config.data,
        validation=config.validation,
        weights=weights.hf_path,
        tokenizer_path=weights.hf_path,
        base_hf_path=weights.hf_path,
        lora=config.lora,
        beta=config.beta,
        label_smoothing=config.label_smoothing,
        reference=reference,
    )
    return run_job(job, config.num_processes)


def chat_data(name: str, helper: str, value: Any, split: str) -> ChatData:
    """`value` as ChatData: itself, the embedded QA source's `split`, or files (a path or a list of them)."""
    if isinstance(value, ChatData):
        return value
    try:
        if value == QA_SOURCE:
            return ChatData(source=QA_SOURCE, split=split)
        if isinstance(value, str | os.PathLike):
            return ChatData(paths=(storage.absolute(os.fspath(value)),))
        if isinstance(value, list | tuple) and all(isinstance(v, str | os.PathLike) for v in value):
            return ChatData(paths=tuple(storage.absolute(os.fspath(v)) for v in value))
    except ChatDataError as e:
        raise ChatDataError(f"{helper} {name!r}: {e}") from None
    raise ChatDataError(
        f"{helper} {name!r}: dataset must be ChatData(...), {QA_SOURCE!r} or JSONL/Parquet paths, "
        f"got {type(value).__name__}"
    )


def weights_source(
    name: str, helper: str, value: Any, field_name: str
) -> tuple[WeightsSource, StepSpec | None]:
    """`value` (a step, a folder, a hub id) as a WeightsSource, and the dependency it makes (if a step)."""
    if isinstance(value, StepSpec | LazyStep) and not isinstance(value, type | str):
        spec = lower(value)
        return WeightsSource(step=spec.name), spec
    if isinstance(value, str | os.PathLike):
        text = os.fspath(value)
        if not text:
            raise TrainingConfigError(f"{helper} {name!r}: {field_name} is an empty string")
        if isinstance(value, str) and looks_like_hub_id(text):
            hub, _, revision = text.partition("@")
            return WeightsSource(hub=hub, revision=revision or None), None
        return WeightsSource(path=storage.absolute(text)), None
    raise TrainingConfigError(
        f"{helper} {name!r}: {field_name} must be a train_lm()/sft()/dpo() handle, a StepSpec, a model folder "
        f"or a hub id, got {type(value).__name__}"
    )


@dataclass(frozen=True)
class _PostTrain(TrainRecipe, StepOptions):
    """What `sft()` and `dpo()` share (see the module docstring)."""

    objective: ClassVar[Objective]
    _: KW_ONLY
    model: ModelArg
    dataset: ChatData | str | os.PathLike | tuple | list
    validation: ChatData | str | os.PathLike | tuple | list | None = None
    lora: LoraConfig | None = None

    def __post_init__(self) -> None:
        name, helper = self.name, self.helper
        if not isinstance(name, str) or not name:
            raise TrainingConfigError(f"{helper} name must be a non-empty string, got {name!r}")
        try:
            super().__post_init__()
        except TrainingConfigError as exc:
            raise TrainingConfigError(f"{helper} {name!r}: {exc}") from None
        object.__setattr__(self, "dataset", chat_data(name, helper, self.dataset, "train"))
        if self.validation is not None:
            object.__setattr__(self, "validation", chat_data(name, helper, self.validation, "validation"))
        if self.lora is not None and not isinstance(self.lora, LoraConfig):
            raise TrainingConfigError(
                f"{helper} {name!r}: lora must be a LoraConfig, got {type(self.lora).__name__}"
            )
        if self.lora is not None and self.parallelism == Parallelism.FSDP:
            raise TrainingConfigError(
                f"{helper} {name!r}: LoRA with parallelism='fsdp' is not supported (its adapters are small); use 'ddp'"
            )
        if self.lora is not None and self.ema is not None:
            raise TrainingConfigError(
                f"{helper} {name!r}: ema averages every weight, and LoRA trains only its adapters; drop ema or lora"
            )
        if self.resources is not None and isinstance(self.resources.device, TpuConfig):
            raise TrainingConfigError(
                f"{helper} {name!r}: resources ask for a TPU ({self.resources.device.type}); marin's trainer runs "
                "on CPUs and CUDA GPUs only"
            )
        world = self.processes_per_replica * (self.resources.replicas if self.resources else 1)
        if self.batch_size % (world * self.grad_accum_steps):
            raise TrainingConfigError(
                f"{helper} {name!r}: batch_size={self.batch_size} does not split over {world} processes x "
                f"grad_accum_steps={self.grad_accum_steps}; use a multiple of their product"
            )
        check_chat_template(f"{helper} {name!r}", self.model)
        if self.lora is not None:
            check_lora_targets(f"{helper} {name!r}", self.model, self.lora.targets)

    @property
    def processes_per_replica(self) -> int:
        """Data-parallel processes per host: `num_processes` if given, else one per requested GPU, else 1."""
        if self.num_processes:
            return self.num_processes
        return max(1, self.resources.gpu_count if self.resources else 0)

    def _objective_fields(self) -> dict[str, Any]:
        return {}

    def to_step_spec(self) -> StepSpec:
        """The StepSpec: deps are the model step (and a reference step); the key is the step config's."""
        source, dep = weights_source(self.name, self.helper, self.model, "model")
        deps = [dep] if dep is not None else []
        extra = self._objective_fields()
        reference = extra.pop("reference", None)
        if reference is not None:
            ref_source, ref_dep = weights_source(self.name, self.helper, reference, "reference")
            if ref_dep is not None and ref_dep not in deps:
                deps.append(ref_dep)
            extra["reference"] = ref_source
        config = PostTrainStepConfig(
            recipe=TrainRecipe(**self.recipe_fields()),
            objective=self.objective,
            model=source,
            data=self.dataset,
            validation=self.validation,
            lora=self.lora,
            run_name=self.name,
            num_processes=self.processes_per_replica,
            **extra,
        )
        inputs = list(declared_inputs(source)) + list(self.dataset.inputs())
        if self.validation is not None:
            inputs += list(self.validation.inputs())
        if isinstance(extra.get("reference"), WeightsSource):
            inputs += list(declared_inputs(extra["reference"]))
        return StepSpec(
            fn=functools.partial(run_posttrain_step, config),
            deps=deps,
            hash_attrs=hash_attrs_of(config),
            inputs=tuple(dict.fromkeys(inputs)),
            resumable=True,  # checkpoints are written atomically; a rerun resumes from the latest
            **self.spec_options(),
        )


@dataclass(frozen=True)
class Sft(_PostTrain):
    """Declare supervised fine-tuning of `model` on the conversations of `dataset`.

    `sft` is this class: `name`, then by keyword `model`, `dataset` (`ChatData`, "marin://tinystories-qa"
    or JSONL/Parquet paths), `validation` (held-out conversations, scored as `eval_loss`: nats per
    reply token), `lora`, every `TrainRecipe` field and the `StepOptions`. The loss is on the
    assistant's tokens only; conversations are packed whole into windows of `seq_len` with
    `document_masking` (on by default), so none attends to another.
    """

    helper: ClassVar[str] = "sft"
    objective: ClassVar[Objective] = Objective.SFT
    _: KW_ONLY
    document_masking: bool = True


@dataclass(frozen=True)
class Dpo(_PostTrain):
    """Declare DPO of `model` on the preference pairs of `dataset` (prompt, chosen, rejected).

    `dpo` is this class: `name`, then by keyword `model`, `dataset`, `validation` (held-out pairs:
    `eval_loss`, `eval_rewards/accuracies`, `eval_rewards/margins`), `beta` (the KL penalty's weight),
    `label_smoothing` (conservative DPO), `reference` (the frozen reference policy: a step, folder or
    hub id; None: the starting weights, which with LoRA are the model with its adapters off), `lora`,
    every `TrainRecipe` field and the `StepOptions`. Each step logs `rewards/chosen`,
    `rewards/rejected`, `rewards/margins` and `rewards/accuracies` (TRL's names).
    """

    helper: ClassVar[str] = "dpo"
    objective: ClassVar[Objective] = Objective.DPO
    _: KW_ONLY
    beta: float = 0.1
    label_smoothing: float = 0.0
    reference: ModelArg | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.beta, bool) or not isinstance(self.beta, int | float) or not self.beta > 0:
            raise TrainingConfigError(f"dpo {self.name!r}: beta must be a number > 0, got {self.beta!r}")
        ls = self.label_smoothing
        if isinstance(ls, bool) or not isinstance(ls, int | float) or not 0 <= ls < 0.5:
            raise TrainingConfigError(f"dpo {self.name!r}: label_smoothing must be in [0, 0.5), got {ls!r}")

    def _objective_fields(self) -> dict[str, Any]:
        return {
            "beta": float(self.beta),
            "label_smoothing": float(self.label_smoothing),
            "reference": self.reference,
        }


sft = Sft
dpo = Dpo
