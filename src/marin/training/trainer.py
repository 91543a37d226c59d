"""The trainer: one `train_step()` per optimizer step of an objective, and callbacks for everything else.

`train(job)` runs in each training process. With one process it is called directly; with several,
`marin.training.launch` starts them like torchrun (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
MASTER_PORT) and each calls `train`. Output layout under `job.output_path`:
`checkpoints/step-NNNNNNNN/`, `metrics.jsonl`, `hf/` (the Hugging Face export).

What a run computes is its `TrainConfig` and its objective (`marin.training.objective`: language
modelling on token caches by default; SFT and DPO are objectives of `marin.posttrain`). A run, in
order: open the objective's data, build the model from the seed (any registered architecture),
let the objective prepare it (starting weights, adapters), wrap its blocks (activation
checkpointing, compile, FSDP), resume from the newest intact checkpoint or load `init_from`, then
loop: `train_step()` (the objective's loss, backward, clip, optimizer step), then the callbacks
(`marin.training.callbacks`: weight average, evaluation, FLOPs, the user's, exports, metrics,
checkpoints, progress), which see the trainer only as a `TrainerView`. The loop ends at
`num_train_steps`, when a callback asks to stop (a clean end: checkpoint, export, summary), or on
SIGTERM / SIGINT (`stop_signals.py`): the step under way finishes, a checkpoint is written, and
`TrainingInterrupted` is raised so the step is never recorded as done. Last, rank 0 exports the model.
"""

from __future__ import annotations

import contextlib
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from marin.training.bad_steps import SkipBadSteps
from marin.training.blocks import checkpoint_blocks, compile_blocks, compile_wanted
from marin.training.callbacks.base import Callback, StepOutput, ordered
from marin.training.callbacks.checkpointing import Checkpointing
from marin.training.callbacks.evaluation import Evaluation
from marin.training.callbacks.exports import Exports
from marin.training.callbacks.flops import FlopsAccount
from marin.training.callbacks.metrics_writer import MetricsWriter
from marin.training.callbacks.progress import ProgressBar
from marin.training.callbacks.weight_average import WeightAverage
from marin.training.checkpoint import Checkpointer, TrainState, step_name
from marin.training.config import Parallelism, TrainConfig
from marin.training.datasets import DatasetInput
from marin.training.distributed import Distributed, init_distributed, pick_device, wants_cuda
from marin.training.errors import CheckpointError, TrainingConfigError, TrainingInterrupted
from marin.training.eval_metrics import EVAL_BPB, EVAL_LOSS, RatioSums, eval_metrics, score_sums
from marin.training.fsdp import gathered_model, local_tensor, shard_model
from marin.training.grad_accum import accumulate_gradients
from marin.training.init_weights import load_init_weights
from marin.training.language_modeling import LanguageModeling
from marin.training.loader import Batch
from marin.training.metrics import MetricsLog
from marin.training.mixture import MixtureSchedule
from marin.training.models import config_to_json
from marin.training.objective import Objective, RunContext
from marin.training.optim import set_scheduled_lr
from marin.training.rng import capture_rng, restore_rng
from marin.training.step_metrics import StepMetrics
from marin.training.stop_signals import StopSignals


@dataclass(frozen=True)
class TrainJob:
    """A TrainConfig bound to its objective and output location: what one training process runs.

    `objective` is what the run minimises and on which data (`marin.training.objective`); None is
    language modelling on `datasets` (token caches), mixed by their weights or by `mixture`."""

    config: TrainConfig
    datasets: tuple[DatasetInput, ...]
    output_path: str
    run_name: str = "train"
    init_from: str | None = (
        None  # weights to start from (see init_weights.load_init_weights); a checkpoint wins
    )
    init_optimizer: bool = False  # with init_from: its checkpoint's optimizer state too (a cooldown)
    mixture: MixtureSchedule | None = None  # the datasets' weights by step (None: their static weights)
    objective: Objective | None = None

    def make_objective(self) -> Objective:
        """The objective this job trains (a fresh one opens its data in each process)."""
        return self.objective if self.objective is not None else LanguageModeling(self.datasets, self.mixture)


def default_callbacks(config: TrainConfig) -> list[Callback]:
    """The run's callbacks: the built-in ones, each with its settings from `config`, and the user's,
    in order of priority (`marin.training.callbacks`). A user callback named like a built-in one is
    refused: their states are saved under their names."""
    built_in: list[Callback] = [
        WeightAverage(decay=config.ema, export=config.export_ema),
        Evaluation(every=config.steps_per_eval),
        FlopsAccount(),
        Exports(every=config.export_every),
        MetricsWriter(),
        Checkpointing(every=config.checkpoint_every, every_minutes=config.checkpoint_every_minutes),
        ProgressBar(),
    ]
    taken = {c.name for c in built_in} & {c.name for c in config.callbacks}
    if taken:
        raise TrainingConfigError(
            f"callbacks: {sorted(taken)} is the name of a built-in callback, under which its state is saved; "
            "give yours another name (set its `name`)"
        )
    return ordered([*built_in, *config.callbacks])


def train(job: TrainJob) -> dict:
    """Train (resuming from the latest checkpoint when one exists) and return the run's summary."""
    config = job.config
    if config.cpu_threads:
        torch.set_num_threads(config.cpu_threads)
    env = init_distributed("cuda" if wants_cuda(config) else "cpu", config.parallelism)
    try:
        with StopSignals() as signals:
            return Trainer(job, env, pick_device(config, env.local_rank), signals).run()
    finally:
        if env.owns_group and dist.is_initialized():
            dist.destroy_process_group()


class Trainer:
    """One process's view of a run: `train_step()` and the loop that calls it and the callbacks.

    What callbacks may use is `marin.training.callbacks.TrainerView`: `step`, `num_train_steps`,
    `rank`, `world_size`, `is_main`, `output_path`, `model` (the module being trained: FSDP-sharded
    under FSDP, never the DDP wrapper), `optimizer`, `model_config`, `metrics`, `rates`,
    `tokenizer_path`, `eos_id`, `interrupted`, `stopping`, `evaluate()`, `save_checkpoint()`,
    `export_hf(dir)`, `request_stop(reason)`, `on_close(fn)` and `whole_model()`. What depends on
    the data and the loss is the job's objective; nothing subclasses this class.
    """

    def __init__(self, job: TrainJob, env: Distributed, device: torch.device, signals: StopSignals):
        self.job, self.config, self.env, self.device, self.signals = job, job.config, env, device, signals
        self.rank, self.world_size = env.rank, env.world_size
        self.is_main = env.rank == 0
        self.num_train_steps = self.config.num_train_steps
        self.output_path = job.output_path.rstrip("/")
        self.objective = job.make_objective()
        self.model_config = self.objective.open(
            RunContext(self.config, self.rank, self.world_size, device, self.output_path)
        )
        self.tokenizer_path, self.eos_id = self.objective.tokenizer_path, self.objective.eos_id
        self.fingerprint = self.config.fingerprint(self.objective.fingerprint_fields())
        self.fsdp = self.config.parallelism == Parallelism.FSDP
        self.checkpointer = Checkpointer(
            f"{self.output_path}/checkpoints", sharded=self.fsdp, keep_last_k=self.config.keep_last_k
        )
        self.metrics = MetricsLog(
            f"{self.output_path}/metrics.jsonl",
            loggers=self.config.loggers if self.is_main else (),
            run_name=job.run_name,
            config=self.config.to_json(),
        )
        # FSDP casts parameters to bf16 itself (its mixed-precision policy); DDP uses autocast.
        self.autocast = (
            torch.autocast("cuda", dtype=torch.bfloat16)
            if device.type == "cuda" and not self.fsdp
            else contextlib.nullcontext()
        )
        self.callbacks = default_callbacks(self.config)
        self.init_record: dict | None = None  # where the starting weights came from
        self.step = 0
        self.stop_reason: str | None = None
        self.interrupted: str | None = None  # the signal that stopped the run
        self._loader_state: dict[str, Any] = {}
        self._closers: list[Callable[[], None]] = []
        self._last_record: dict[str, Any] = {}
        self._batch_domains: tuple[dict[str, int], dict[str, float]] = ({}, {})

    # ----- what callbacks use (TrainerView) -----

    @property
    def stopping(self) -> bool:
        """Whether the run ends after the current step (a stop request or a signal).

        A signal counts from the end of the step it arrived in (one process) or from the next step's
        all-reduce (several, so every process stops after the same step): taken once per step, before
        the callbacks, so the step that stops is the step that is checkpointed."""
        return self.stop_reason is not None or self.interrupted is not None

    def request_stop(self, reason: str) -> None:
        """End the run cleanly after the current step: checkpoint, export and summary as at the end."""
        if self.stop_reason is None:
            self.stop_reason = reason

    def evaluate(self) -> dict[str, Any]:
        """The objective's validation scores, with the loss it trains with, summed over ranks
        (collective: every rank calls it): `eval_<score>`, its stderr and its n."""
        options = {k: v for k, v in self.forward_options.items() if k != "z_loss"}
        self.model.eval()
        try:
            with torch.no_grad(), self.autocast:
                batches = self.objective.eval_batches(lockstep=self.fsdp)
                sums = score_sums(self.objective, self.model, batches, options)
        finally:
            self.model.train()
        names = sorted(sums)
        totals = self._all_sum([x for name in names for x in sums[name].as_list()])
        return eval_metrics({name: RatioSums.of(totals[6 * i : 6 * i + 6]) for i, name in enumerate(names)})

    def save_checkpoint(self) -> str:
        """Write the checkpoint of the current step (collective: every rank calls it); its path."""
        self.metrics.flush()  # before the checkpoint: a resume finds every record up to it
        extra: dict[str, Any] = {"model": config_to_json(self.model_config)}
        if self.init_record:
            extra["init_from"] = self.init_record
        if self.skipper is not None:
            extra["bad_steps"] = self.skipper.guard.state_dict()
        states = {c.name: state for c in self.callbacks if (state := c.state_dict())}
        if states:
            extra["callbacks"] = states
        tensors = {c.name: named for c in self.callbacks if (named := c.tensor_state())}
        state = TrainState(self.step, self._loader_state, capture_rng(), self.fingerprint, extra)
        return self.checkpointer.save(
            model=self.trainable, optimizer=self.optimizer, state=state, tensors=tensors or None
        )

    def export_hf(self, out_dir: str) -> str:
        """Write the Hugging Face export to `out_dir` (collective under FSDP: every rank calls it): the
        weights being trained, or what a callback exports in their place (a weight average)."""
        model = gathered_model(self.model, self.model_config) if self.fsdp else self.model
        for callback in self.callbacks:
            model = callback.export_weights(model)
        if self.is_main:
            self.objective.export(model, self.model_config, out_dir)
        return out_dir

    def whole_model(self) -> nn.Module:
        """The model with its whole weights on every rank (collective under FSDP, which gathers them)."""
        return gathered_model(self.model, self.model_config, every_rank=True) if self.fsdp else self.model

    def on_close(self, fn: Callable[[], None]) -> None:
        """Call `fn` when the loop ends, however it ends (a callback's cleanup)."""
        self._closers.append(fn)

    # ----- the run -----

    def _build(self) -> None:
        config = self.config
        _seed_everything(config.seed)
        self.model: nn.Module = self.model_config.build().to(self.device)
        self.trainable: nn.Module = self.objective.prepare_model(self.model)
        self.init_record = self.objective.starting_weights
        blocks = self.model_config.blocks(self.model)
        checkpoint_blocks(blocks, config.activation_checkpointing)
        if compile_wanted(config.compile, self.device):
            compile_blocks(blocks)
        if self.fsdp:
            shard_model(self.model, blocks, self.device)
        self.optimizer = config.optimizer.build(self.trainable, fused=self.device.type == "cuda")
        # what steps the weights: the optimizer, or its wrapper that skips bad steps
        self.skipper = SkipBadSteps(self.optimizer, config.skip_bad_steps) if config.skip_bad_steps else None
        self.stepper = self.skipper if self.skipper is not None else self.optimizer
        self.loader = self.objective.train_loader()
        self._loader_state = self.loader.state_dict()
        self.forward_options = self._forward_options()
        self.train_model: nn.Module = self.model
        if self.world_size > 1 and not self.fsdp:
            ids = [self.device.index] if self.device.type == "cuda" else None
            self.train_model = nn.parallel.DistributedDataParallel(self.model, device_ids=ids)
        self.rates = StepMetrics.of(
            self.model_config,
            batch_size=config.batch_size,
            seq_len=config.seq_len,
            device=self.device,
            world_size=self.world_size,
            grad_accum_steps=config.grad_accum_steps,
            parallelism=config.parallelism,
            peak_flops=config.peak_flops,
        )
        self.params = [p for p in self.trainable.parameters() if p.requires_grad]
        # modules that report what is not a loss (a mixture-of-experts' per-expert token fractions)
        self._metric_modules = [m for m in self.model.modules() if callable(getattr(m, "step_metrics", None))]
        self.max_norm = config.optimizer.max_grad_norm or math.inf

    def _forward_options(self) -> dict[str, Any]:
        """The keyword arguments of the model's forward for this run's recipes: `document_eos`
        (document masking, at the objective's EOS) and `z_loss`; empty for a run with neither."""
        options: dict[str, Any] = {}
        if self.config.document_masking:
            options["document_eos"] = self.eos_id
        if self.config.z_loss:
            options["z_loss"] = float(self.config.z_loss)
        return options

    def _resume(self) -> int:
        """Load the newest intact checkpoint (corrupt ones are skipped, and logged); the step to start at."""
        tensors: dict[str, dict[str, torch.Tensor]] = {}
        state = self.checkpointer.load_latest(
            model=self.trainable,
            optimizer=self.optimizer,
            config_fingerprint=self.fingerprint,
            log=_log if self.is_main else lambda line: None,
            tensors=tensors,
        )
        if state is None:
            if self.is_main:
                self.metrics.truncate_after(0)
            if self.job.init_from:
                self._init_from(self.job.init_from)
            return 0
        self.init_record = state.extra.get("init_from")
        if self.skipper is not None:
            self.skipper.guard.load_state_dict(state.extra["bad_steps"])
        self._load_callback_states(state, tensors)
        restore_rng(state.rng)
        self.loader.load_state_dict(state.loader)
        self._loader_state = state.loader
        if self.is_main:
            self.metrics.truncate_after(state.step)
            print(
                f"[marin.train] resumed from {self.checkpointer.directory}/{step_name(state.step)}",
                flush=True,
            )
        return state.step

    def _load_callback_states(self, state: TrainState, tensors: dict[str, dict[str, torch.Tensor]]) -> None:
        """Give each callback the state its name holds in the checkpoint; a state no callback of this
        run claims is refused, unless `drop_callback_state` names it."""
        saved = state.extra.get("callbacks", {})
        names = {c.name for c in self.callbacks}
        orphans = sorted((set(saved) | set(tensors)) - names - set(self.config.drop_callback_state))
        if orphans:
            raise CheckpointError(
                f"checkpoint {self.checkpointer.directory}/{step_name(state.step)} holds the state of callback(s) "
                f"{orphans}, which this run does not have; add them back to callbacks=, or resume without their "
                f"state with drop_callback_state={tuple(orphans)!r}"
            )
        for callback in self.callbacks:
            if callback.name in saved:
                callback.load_state_dict(saved[callback.name])
            if callback.name in tensors:
                callback.load_tensor_state(tensors[callback.name])

    def _init_from(self, source: str) -> None:
        """Load the starting weights before step 0, and score them on the validation data.

        The evaluation draws no random numbers, so the run's data order and RNG are those of a run
        without `init_from`; what it records (source, digest, eval loss) goes into every checkpoint,
        so a resumed run reports it too.
        """
        optimizer = self.optimizer if self.job.init_optimizer else None
        record = load_init_weights(source, self.model, self.model_config, optimizer)
        record.update({f"init_{k}": v for k, v in self.evaluate().items()})
        self.init_record = record
        if self.is_main:
            print(f"[marin.train] initialized from {record['path']} ({record['kind']})", flush=True)

    def train_step(self, batch: Batch, clock: float) -> StepOutput:
        """One optimizer step on `batch`: the learning rate of this step on every parameter group,
        the gradient of the objective over `grad_accum_steps` microbatches, clipping, then one
        all-reduce agreeing on the loss, gradient norm, auxiliary losses, stop signal and rank 0's
        `clock`, then the update (which `skip_bad_steps` skips when the agreed loss is bad)."""
        config = self.config
        lr = set_scheduled_lr(self.optimizer, config.optimizer, self.step, config.num_train_steps)
        loss, aux = accumulate_gradients(
            self.train_model,
            batch.inputs,
            batch.targets,
            config.grad_accum_steps,
            self.autocast,
            self.world_size,
            self.forward_options,
            self.objective.loss,
        )
        grad_norm = local_tensor(torch.nn.utils.clip_grad_norm_(self.params, self.max_norm))
        names = sorted(aux)
        agreed = self._agree(loss, grad_norm, aux, names, clock)
        skipped = self.skipper is not None and self.skipper.judge(agreed[0], agreed[1])
        self.stepper.step()
        self.optimizer.zero_grad(set_to_none=True)
        if agreed[-2] > 0 and self.interrupted is None:
            self.interrupted = self.signals.received or "a signal on another process"
        self.step += 1
        self._loader_state = batch.loader_state
        self._batch_domains = (batch.domain_tokens, batch.domain_epochs)
        return StepOutput(
            step=self.step,
            loss=agreed[0],
            aux_losses=dict(zip(names, agreed[2 : 2 + len(names)], strict=True)),
            lr=lr,
            grad_norm=agreed[1],
            seconds=0.0,
            data_wait=0.0,
            clock=agreed[-1],
            last=self.step == config.num_train_steps or self.stopping,
            skipped=skipped,
        )

    def _agree(
        self,
        loss: torch.Tensor,
        grad_norm: torch.Tensor,
        aux: dict[str, torch.Tensor],
        names: list[str],
        clock: float,
    ) -> list[float]:
        """[loss, grad norm, *aux (by `names`), signalled, clock] averaged (summed) over processes."""
        world = self.world_size
        signalled = 1.0 if self.signals.received else 0.0
        values = [loss.item() / world, grad_norm.item() / world, *(aux[n].item() / world for n in names)]
        values += [signalled, clock if self.is_main else 0.0]
        return self._all_sum(values)

    def run(self) -> dict:
        config = self.config
        self._build()
        start = self.step = self._resume()
        stream = self.objective.batch_stream(self.loader, config.prefetch)
        self.on_close(stream.close)
        self.on_close(self.metrics.close)
        train_seconds = 0.0
        began = time.perf_counter()
        try:
            for callback in self.callbacks:
                callback.on_train_start(self)
            tick = time.perf_counter()
            while self.step < config.num_train_steps and not self.stopping:
                batch = stream.next()
                out = self.train_step(batch, clock=time.perf_counter() - began)
                if self.interrupted is None and self.world_size == 1 and self.signals.received:
                    self.interrupted = self.signals.received
                out.seconds = time.perf_counter() - tick
                out.data_wait = stream.last_wait_seconds
                train_seconds += out.seconds
                out.record = self._record(out)
                for callback in self.callbacks:
                    callback.on_step_end(self, out)
                self._last_record = out.record
                tick = time.perf_counter()
        finally:
            for close in reversed(self._closers):
                close()
        if self.interrupted is not None and self.step < config.num_train_steps:
            raise TrainingInterrupted(
                f"training stopped by {self.interrupted} after step {self.step}; its checkpoint "
                f"{self.checkpointer.directory}/{step_name(self.step)} is written and a rerun resumes from it"
            )
        if start == config.num_train_steps and self.is_main:  # finished before; only the export was left
            self._last_record = (self.metrics.read() or [{}])[-1]
        summary = self._finish(train_seconds, stream.wait_seconds, start)
        for callback in self.callbacks:
            callback.on_train_end(self, summary)
        return summary

    def _record(self, out: StepOutput) -> dict[str, Any]:
        """The step's `metrics.jsonl` record: loss, auxiliary losses, rates, and the model's own metrics."""
        record = self.rates.record(
            out.step,
            loss=out.loss,
            lr=out.lr,
            grad_norm=out.grad_norm,
            seconds=out.seconds,
            data_wait=out.data_wait,
        )
        record.update(out.aux_losses)
        domain_tokens, domain_epochs = self._batch_domains
        record["domain_tokens"], record["domain_epochs"] = domain_tokens, domain_epochs
        record["skipped_steps"] = self.skipper.skipped if self.skipper is not None else 0
        if out.skipped:
            record["skipped"] = True
        for module in self._metric_modules:
            record.update(module.step_metrics())
        return record

    def _all_sum(self, values: list[float]) -> list[float]:
        if self.world_size == 1:
            return values
        t = torch.tensor(values, dtype=torch.float64, device=self.device)
        dist.all_reduce(t)
        return t.tolist()

    def _barrier(self) -> None:
        if self.world_size > 1:
            dist.barrier()

    def _finish(self, train_seconds: float, data_wait: float, start: int) -> dict:
        last = self._last_record
        if self.stop_reason is not None and EVAL_LOSS not in last:
            last = {**last, **self.evaluate()}  # a stopped run's final scores, as a finished run has them
        hf_path = f"{self.output_path}/hf"
        summary = {
            "hf_path": hf_path,
            "checkpoint_path": f"{self.checkpointer.directory}/{step_name(self.step)}",
            "metrics_path": self.metrics.path,
            "architecture": self.model_config.architecture,
            "num_train_steps": self.config.num_train_steps,
            "steps_done": self.step,
            "stopped": self.stop_reason,
            "resumed_from_step": start,
            "final_loss": last.get("loss"),
            "final_eval_loss": last.get(EVAL_LOSS),
            "final_eval_bpb": last.get(EVAL_BPB),
            "vocab_size": self.model_config.vocab_size,
            "num_parameters": self.model_config.num_parameters(),
            "train_seconds_this_run": train_seconds,
            "data_wait_seconds_this_run": data_wait,
            "data_wait_fraction": data_wait / train_seconds if train_seconds else 0.0,
            "init_from": self.init_record,
            "world_size": self.world_size,
            "grad_accum_steps": self.config.grad_accum_steps,
            "parallelism": str(self.config.parallelism),
            "skipped_steps": self.skipper.skipped if self.skipper is not None else 0,
        }
        self.export_hf(hf_path)
        if self.is_main:
            self.objective.summarize(summary)
        self._barrier()
        return summary


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _log(line: str) -> None:
    print(line, flush=True)
