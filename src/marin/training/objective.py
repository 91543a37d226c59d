"""The objective seam: what a run minimises, on which data, and how it is scored.

The trainer (`marin.training.trainer`) is the loop, the optimizer, the callbacks, checkpoints, the
processes and the export; everything that depends on the data and the loss is an `Objective`, an
object the run is given (`TrainJob(objective=...)`), as a model is given by its `ModelConfig`.
Language modelling on token caches is `marin.training.language_modeling.LanguageModeling` (the
default); supervised fine-tuning and DPO (`marin.posttrain`) are objectives too. The trainer calls,
in this order:

1. `open(run)`, before the model is built: read the data (each process its share), and return the
   model config to build (the vocabulary resolved). Afterwards `tokenizer_path` and `eos_id` say
   which tokenizer the data was made with, and `fingerprint_fields()` what the run computes beyond
   its TrainConfig: a checkpoint written under other fields is refused.
2. `prepare_model(model)`, right after the model is built from the seed and before it is wrapped
   (compile, FSDP): load starting weights, add adapters; it returns the module whose parameters
   train and are checkpointed. `starting_weights` then records where weights came from, if any.
3. `train_loader()` (its state is checkpointed) and `batch_stream(loader, prefetch)`: the batches.
4. Every microbatch: `loss(model, inputs, targets, options)`, an `ObjectiveLoss`.
5. `Trainer.evaluate()`: `scores(model, batch, options)` on each of `eval_batches(lockstep)`, with
   the same loss: per unit (a window, a pair), a value and a weight for each name of `score_names`,
   summed over processes into `eval_<name>` (the weighted mean), `eval_<name>_stderr` and
   `eval_<name>_n` (`marin.training.eval_metrics`).
6. `export(model, out_dir)` on rank 0 with the weights to export whole, then `summarize(summary)`.

`options` are the model's forward options the run's recipes ask for (`document_eos`, `z_loss`);
evaluation leaves out `z_loss`, a training regularizer.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

if TYPE_CHECKING:
    import torch
    from torch import nn

    from marin.training.config import TrainConfig
    from marin.training.loader import Batch
    from marin.training.models import ModelConfig


@dataclass(frozen=True)
class RunContext:
    """What an objective knows of the run it serves: its config, this process's place, its device, and
    where the run writes."""

    config: TrainConfig
    rank: int
    world_size: int
    device: torch.device
    output_path: str


@dataclass
class ObjectiveLoss:
    """One microbatch's objective: `minimised` (what backward runs on: the loss plus any auxiliary
    losses), `loss` (what the run reports as `loss`) and `logged` (auxiliary figures, each logged
    under its name and averaged over microbatches and processes)."""

    minimised: torch.Tensor
    loss: torch.Tensor
    logged: dict[str, torch.Tensor]


@dataclass
class EvalBatch:
    """Rows to score: `inputs` and `targets` on the device. `scored=False` marks a filler a process
    runs only so that every process runs as many forwards (FSDP gathers weights from all of them).
    `info` carries what the objective's scores need besides the rows (a split's bytes per token)."""

    inputs: torch.Tensor
    targets: torch.Tensor
    scored: bool = True
    info: dict[str, Any] | None = None


class Loader(Protocol):
    """Where training batches are drawn from; its state goes into every checkpoint."""

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


class BatchStream(Protocol):
    """What the loop takes batches from, in order; it may read ahead."""

    wait_seconds: float  # time `next()` spent blocked, so far
    last_wait_seconds: float  # that of the last `next()`

    def next(self) -> Batch: ...

    def close(self) -> None: ...


class Objective:
    """What a run minimises, on which data, and how it is scored (see the module docstring).

    A subclass implements every method that raises here; the others have defaults that fit a run
    with no starting weights, adapters or summary of its own.
    """

    kind: ClassVar[str] = "objective"  # the run's summary says which (`objective`)
    score_names: ClassVar[tuple[str, ...]] = ("loss",)
    tokenizer_path: str | None = None
    eos_id: int | None = None
    starting_weights: dict[str, Any] | None = None

    def open(self, run: RunContext) -> ModelConfig:
        """Read the data for this process and return the model config to build."""
        raise NotImplementedError(f"{type(self).__name__} must define open()")

    def fingerprint_fields(self) -> dict[str, Any]:
        """What the run computes beyond its TrainConfig (its data, its loss's settings), as JSON."""
        raise NotImplementedError(f"{type(self).__name__} must define fingerprint_fields()")

    def prepare_model(self, model: nn.Module) -> nn.Module:
        """After the model is built from the seed: the module whose parameters train (here: all)."""
        return model

    def train_loader(self) -> Loader:
        """The training batches' source, at the start of the run (a resume loads its state)."""
        raise NotImplementedError(f"{type(self).__name__} must define train_loader()")

    def batch_stream(self, loader: Loader, prefetch: int) -> BatchStream:
        """The batches of `loader`, on the run's device, read up to `prefetch` ahead where it helps."""
        raise NotImplementedError(f"{type(self).__name__} must define batch_stream()")

    def loss(
        self, model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor, options: dict[str, Any]
    ) -> ObjectiveLoss:
        """The objective on one microbatch, for backward."""
        raise NotImplementedError(f"{type(self).__name__} must define loss()")

    def eval_batches(self, lockstep: bool) -> Iterator[EvalBatch]:
        """This process's share of the validation rows; with `lockstep`, as many batches on every
        process (fillers marked `scored=False`)."""
        return iter(())

    def scores(
        self, model: nn.Module, batch: EvalBatch, options: dict[str, Any]
    ) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """For each name of `score_names`, per unit of `batch` (a row, a pair): its value and its
        weight, from the same loss as `loss()`; the score is the weighted mean over all units."""
        raise NotImplementedError(f"{type(self).__name__} must define scores()")

    def export(self, model: nn.Module, model_config: ModelConfig, out_dir: str) -> None:
        """On rank 0: write the Hugging Face export of `model` (the weights to export, whole)."""
        raise NotImplementedError(f"{type(self).__name__} must define export()")

    def summarize(self, summary: dict[str, Any]) -> None:
        """On rank 0, at the run's end, after the export: add what this objective reports."""
