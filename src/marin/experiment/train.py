"""`train_lm()`: declare a language-model training step. Declaring runs nothing.

    model = train_lm(name="checkpoints/nano", model=llama_nano, optimizer=AdamConfig(learning_rate=6e-4),
                     datasets={tinystories_tokenized: 1.0}, batch_size=4, seq_len=2048, num_train_steps=100)
    StepRunner().run([lower(model)])

The step's output holds `checkpoints/`, `metrics.jsonl` and `hf/` (a Hugging Face export); its
`.artifact.json` records `hf_path`, the final loss, eval loss and bits-per-byte, and the unigram
entropy of the training tokens. A rerun after a crash resumes from the latest checkpoint.

`init_from=` starts from existing weights: another train step (its handle or StepSpec, which
becomes a dependency), a train step's output folder, a checkpoint folder, or a Hugging Face model
folder. The source is part of the key: a step by its key, a folder by its absolute path and the
bytes of its files (declared as the step's inputs), so replacing the weights there reruns the step.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import storage
from fray.cluster import TpuConfig
from marin.execution.context import current
from marin.execution.keyed import hash_attrs_of
from marin.execution.lazy import LazyStep, StepOptions, lower
from marin.execution.step_spec import StepSpec
from marin.experiment.declared_names import check_harness_tasks
from marin.experiment.mixture import Mixture, PhasedMixture
from marin.training.checkpoint import CHECKSUMS, resume_note
from marin.training.config import TrainConfig, config_of
from marin.training.datasets import DatasetInput
from marin.training.errors import TrainingConfigError
from marin.training.mixture import MixtureSchedule
from marin.training.trainer import TrainJob

if TYPE_CHECKING:
    from marin.experiment.data import TokenizedData


@dataclass(frozen=True)
class TrainStepConfig:
    """What the train step's function needs: the run, and which dependency holds each dataset."""

    train: TrainConfig
    datasets: tuple[tuple[str, float], ...]
    run_name: str
    num_processes: int
    init_from_step: str | None = None  # the dependency whose output holds the starting weights
    init_from_path: str | None = None  # or a folder given by path
    init_optimizer: bool = False  # and its optimizer state
    # a mixture schedule: ((start_step, ((dataset step name, weight), ...)), ...); None: static weights
    mixture: tuple[tuple[int, tuple[tuple[str, float], ...]], ...] | None = None


def run_train_step(config: TrainStepConfig, output_path: str) -> dict:
    """The train step's `fn`: find the token caches, train (or resume), export; return the summary."""
    from marin.training.launch import run_job

    ctx = current()
    datasets = tuple(DatasetInput(name, ctx.path_of(name), weight) for name, weight in config.datasets)
    init_from = ctx.path_of(config.init_from_step) if config.init_from_step else config.init_from_path
    mixture = None
    if config.mixture is not None:
        names = [name for name, _ in config.datasets]
        mixture = MixtureSchedule.of(names, [(step, dict(weights)) for step, weights in config.mixture])
    job = TrainJob(
        config=config.train,
        datasets=datasets,
        output_path=output_path,
        run_name=config.run_name,
        init_from=init_from,
        init_optimizer=config.init_optimizer,
        mixture=mixture,
    )
    return run_job(job, config.num_processes)


@dataclass(frozen=True)
class TrainLm(TrainConfig, StepOptions):
    """Declare training `model` with `optimizer` on a weighted mixture of `tokenized()` datasets.

    `train_lm` is this class: its parameters are `name`, then, by keyword, every field of
    `marin.training.config.TrainConfig` (the run: model, optimizer, batch_size, seq_len,
    num_train_steps, seed, steps_per_eval, ...; see its docstring), the `StepOptions` every step has
    (version, adopt, resources) and the step's own wiring below.
    Declared once there, they need no list here, and editors complete and type-check the call like
    any dataclass's. A train step's cache key is the TrainConfig's key fields (those not marked
    execution-only) plus its datasets' steps and weights and its `init_from` source.

    `datasets` maps each tokenized handle to its mixture weight (> 0), or is a mixture schedule,
    `[(0, {web: 1.0}), (800, {web: 0.5, code: 0.5})]`: phases from increasing steps, the first at 0,
    each giving the weights (≥ 0, summing to more than 0) that hold until the next; a phase may name
    a dataset by its handle or by its step name (`"tokenized/web"`), and the handles the phases
    name are the step's datasets. Each batch takes from each dataset its largest-remainder share
    of the batch under the weights of its step (`marin.training.mixture`). Several processes (DDP) run
    when `resources` asks for several GPUs or `num_processes` > 1 (on CPU that uses gloo), and
    across hosts when `resources` has `replicas=R` (a gang of R processes, see docs/clusters.md).
    `grad_accum_steps` splits each process's share of the batch into microbatches, so `batch_size`
    is the global batch at any world size. `parallelism` is "ddp" (every process holds the whole
    model) or "fsdp" (FSDP2: each holds a shard of every block; bf16 on GPU; sharded checkpoints
    that resume at any world size). `loggers` may name "tensorboard" and "wandb". `resources` may
    ask for CPUs or GPUs; a TPU request is an error (there is no TPU trainer). `init_from` starts
    from existing weights (loaded before step 0; a resume still starts from the run's own
    checkpoint): another train step's handle or StepSpec (a dependency), or the path of a train
    step's output, a checkpoint folder or a Hugging Face model folder; the model config must match
    its shapes. `init_optimizer=True` also takes its checkpoint's optimizer state (moments and step
    counts; the same optimizer must have written it): a cooldown continues the base run with its own
    schedule and mixture. Everything that can be checked without data is checked here; the token caches are
    checked before the first step. `adopt=True` takes an existing run folder (with `hf/`) at the
    step's output path without training.
    """

    helper: ClassVar[str] = "train_lm"
    _: KW_ONLY
    datasets: Mapping[TokenizedData, float] | Sequence[tuple[int, Mapping[Any, float]]]
    init_from: TrainLm | StepSpec | LazyStep | str | os.PathLike | None = None
    init_optimizer: bool = False
    eval_tasks: tuple[str, ...] = ()  # harness tasks scored on the live model (marin.experiment.in_loop_eval)
    eval_tasks_every: int | None = None  # None: only at the last step
    eval_task_items: int = 50

    def __post_init__(self) -> None:
        name = self.name
        if not isinstance(name, str) or not name:
            raise TrainingConfigError(f"train_lm name must be a non-empty string, got {name!r}")
        try:
            super().__post_init__()
        except TrainingConfigError as exc:
            raise TrainingConfigError(f"train_lm {name!r}: {exc}") from None
        object.__setattr__(self, "datasets", _mixture(name, self.datasets))
        object.__setattr__(self, "init_from", _init_source(name, self.init_from))
        if self.init_optimizer and self.init_from is None:
            raise TrainingConfigError(
                f"train_lm {name!r}: init_optimizer=True continues the optimizer of init_from, which is not given"
            )
        if self.resources is not None and isinstance(self.resources.device, TpuConfig):
            raise TrainingConfigError(
                f"train_lm {name!r}: resources ask for a TPU ({self.resources.device.type}), and marin's trainer "
                "runs on CPUs and CUDA GPUs only; ask for ResourceConfig.with_gpu(...) or ResourceConfig.with_cpu()"
            )
        world = self.processes_per_replica * (self.resources.replicas if self.resources else 1)
        if self.batch_size % (world * self.grad_accum_steps):
            raise TrainingConfigError(
                f"train_lm {name!r}: batch_size={self.batch_size} does not split over {world} processes x "
                f"grad_accum_steps={self.grad_accum_steps}; use a multiple of their product"
            )
        check_harness_tasks(f"train_lm {name!r}", "eval_tasks", self.eval_tasks)

    @functools.cached_property
    def config(self) -> TrainConfig:
        """The run's TrainConfig (this handle's TrainConfig fields), what the trainer reads; with
        `eval_tasks`, their in-loop evaluator among its callbacks."""
        config = config_of(self)
        if not self.eval_tasks:
            return config
        from marin.experiment.in_loop_eval import HarnessTasks

        evaluator = HarnessTasks(self.eval_tasks, self.eval_tasks_every, self.eval_task_items)
        return dataclasses.replace(config, callbacks=(*config.callbacks, evaluator))

    @property
    def processes_per_replica(self) -> int:
        """Data-parallel processes per host: `num_processes` if given, else one per requested GPU, else 1."""
        if self.num_processes:
            return self.num_processes
        return max(1, self.resources.gpu_count if self.resources else 0)

    def to_step_spec(self) -> StepSpec:
        """The StepSpec: deps are the tokenize steps (and an `init_from` step), hash_attrs the run's key fields."""
        deps = [lower(handle) for handle in self.datasets]
        phased = isinstance(self.datasets, PhasedMixture)
        phases = self.datasets.phases if phased else ((0, self.datasets),)
        names = {handle: spec.name for handle, spec in zip(self.datasets, deps, strict=True)}
        schedule = tuple(
            (step, tuple((names[h], weights.get(h, 0.0)) for h in self.datasets)) for step, weights in phases
        )
        weights = schedule[0][1]
        init_step = (
            None if self.init_from is None or isinstance(self.init_from, str) else lower(self.init_from)
        )
        step_config = TrainStepConfig(
            train=self.config,
            datasets=weights,
            run_name=self.name,
            num_processes=self.processes_per_replica,
            init_from_step=init_step.name if init_step else None,
            init_from_path=self.init_from if isinstance(self.init_from, str) else None,
            init_optimizer=self.init_optimizer,
            mixture=schedule if phased else None,
        )
        # the datasets' and init_from step's own keys enter through deps; here, their names and weights
        hash_attrs = hash_attrs_of(self.config)
        hash_attrs["datasets"] = [{"step": name, "weight": weight} for name, weight in weights]
        if phased:  # a schedule's key is its phases, each with its datasets' weights
            hash_attrs["datasets"] = [
                {"start_step": step, "weights": [{"step": n, "weight": w} for n, w in ws]}
                for step, ws in schedule
            ]
        if self.eval_tasks:  # what metrics.jsonl holds, not what the weights become
            hash_attrs["eval_tasks"] = {
                "tasks": list(self.eval_tasks),
                "every": self.eval_tasks_every,
                "items": self.eval_task_items,
            }
        if init_step is not None:
            deps.append(init_step)
            hash_attrs["init_from"] = {"step": init_step.name}
        elif self.init_from is not None:
            hash_attrs["init_from"] = {"path": self.init_from}
        if self.init_optimizer:
            hash_attrs["init_from"]["optimizer"] = True
        return StepSpec(
            inputs=_init_weight_inputs(self.init_from) if isinstance(self.init_from, str) else (),
            fn=functools.partial(run_train_step, step_config),
            deps=deps,
            hash_attrs=hash_attrs,
            resumable=True,  # checkpoints are written atomically; a rerun resumes from the latest
            resume_note=resume_note,  # the plan says from which step, or that none is there
            **self.spec_options(),
        )


train_lm = TrainLm


def _mixture(name: str, datasets: Any) -> Mixture | PhasedMixture:
    """`datasets` as a Mixture (static weights, each a number > 0) or a PhasedMixture (a schedule,
    checked by `MixtureSchedule.of`: one line naming what is wrong); each key a tokenized handle."""
    if isinstance(datasets, Mapping):
        if not datasets:
            raise TrainingConfigError(
                f"train_lm {name!r}: datasets must be a non-empty {{tokenized(...): weight}} dict, or a schedule"
            )
        for handle, weight in datasets.items():
            _check_handle(name, handle)
            if isinstance(weight, bool) or not isinstance(weight, int | float) or not weight > 0:
                raise TrainingConfigError(
                    f"train_lm {name!r}: dataset {handle.name!r} has weight {weight!r}; every weight must be a "
                    "number > 0"
                )
        return datasets if isinstance(datasets, Mixture) else Mixture(datasets)
    if isinstance(datasets, PhasedMixture):
        return datasets
    if isinstance(datasets, str | bytes) or not isinstance(datasets, Sequence) or not datasets:
        raise TrainingConfigError(
            f"train_lm {name!r}: datasets must be {{tokenized(...): weight}} or a schedule "
            "[(step, {tokenized(...): weight}), ...]"
        )
    for i, entry in enumerate(datasets):
        if not (isinstance(entry, Sequence) and len(entry) == 2 and isinstance(entry[1], Mapping)):
            raise TrainingConfigError(
                f"train_lm {name!r}: datasets[{i}] is {entry!r:.80}; each phase is (step, {{tokenized(...): weight}})"
            )
    declared = {}  # the handles the phases name, in order; a phase may also name one by its step name
    for _, weights in datasets:
        for key in weights:
            if not isinstance(key, str):
                _check_handle(name, key)
                declared.setdefault(key.name, key)
    by_name = [(step, {getattr(k, "name", k): w for k, w in weights.items()}) for step, weights in datasets]
    try:
        schedule = MixtureSchedule.of(list(declared), by_name, where="datasets")
    except TrainingConfigError as exc:
        raise TrainingConfigError(f"train_lm {name!r}: {exc}") from None
    handles = list(declared.values())
    return PhasedMixture(
        tuple(
            (phase.start_step, Mixture({h: w for h, w in zip(handles, phase.weights, strict=True) if w > 0}))
            for phase in schedule.phases
        )
    )


def _check_handle(name: str, handle: Any) -> None:
    from marin.experiment.data import TokenizedData

    if not isinstance(handle, TokenizedData):
        raise TrainingConfigError(
            f"train_lm {name!r}: dataset {handle!r:.80} is a {type(handle).__name__}, not a tokenized handle; "
            "pass the value tokenized(...) returns"
        )


def _init_weight_inputs(path: str) -> tuple[str, ...]:
    """The files of an `init_from` path, declared as the step's inputs so that their bytes are part of
    its key: replacing the weights there reruns the step (a step source's key already covers it).

    A checkpoint carries `checksums.json`, the digest of each of its files written at save and
    checked before any weight is loaded, so it stands for the checkpoint's bytes: a local train step's
    output contributes its checkpoints' `checksums.json` (the newest intact one is loaded), a
    checkpoint folder its own, without hashing gigabytes of weights and optimizer state. A Hugging
    Face folder declares all its files. A local folder with no files yet declares none: the step then
    fails at run time, saying what `init_from` needs, and records nothing to reuse. Elsewhere (an
    object store) the folder's objects, by the checksums the store reports, without a listing at
    declaration.
    """
    if not storage.is_local(path):
        return (storage.join(path, "**"),)
    local = storage.local_path(path)
    checkpoints = os.path.join(local, "checkpoints")
    if _holds_files(checkpoints):
        return (storage.join(path, "checkpoints", "*", CHECKSUMS),)
    if os.path.isfile(os.path.join(local, CHECKSUMS)):
        return (storage.join(path, CHECKSUMS),)
    return (storage.join(path, "**"),) if _holds_files(local) else ()


def _holds_files(folder: str) -> bool:
    """Whether a local folder holds a file a `**` glob matches (not hidden), stopping at the first."""
    for _, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        if any(not f.startswith(".") for f in files):
            return True
    return False


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
