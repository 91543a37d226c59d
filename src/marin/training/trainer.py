"""The trainer: one `train_step()` per optimizer step, and callbacks for everything else.

`train(job)` runs in each training process. With one process it is called directly; with several,
`marin.training.launch` starts them like torchrun (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
MASTER_PORT) and each calls `train`. Output layout under `job.output_path`:
`checkpoints/step-NNNNNNNN/`, `metrics.jsonl`, `hf/` (the Hugging Face export).

A run, in order: build the model from the seed (any registered architecture, `job.config.model`),
wrap its blocks (activation checkpointing, compile, FSDP), resume from the newest intact checkpoint
or load `init_from`, then loop: `train_step()` (forward with the model's own loss, backward,
clip, optimizer step), then the callbacks (`marin.training.callbacks`: evaluation, the user's,
metrics, checkpoints, progress). The loop ends at `num_train_steps`, when a callback asks to stop
(a clean end: checkpoint, export, summary), or on SIGTERM / SIGINT (`stop_signals.py`): the step
under way finishes, a checkpoint is written, and `TrainingInterrupted` is raised so the step is
never recorded as done. Last, rank 0 exports the model.
"""

from __future__ import annotations

import contextlib
import copy
import math
import os
import random
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from marin.training.bad_steps import BadStepGuard
from marin.training.blocks import checkpoint_blocks, compile_blocks, compile_wanted
from marin.training.callbacks import Callback, StepOutput, default_callbacks, export_step_name, export_steps
from marin.training.checkpoint import Checkpointer, TrainState, step_name
from marin.training.config import Parallelism, TrainConfig
from marin.training.datasets import DatasetInput, OpenedDataset, check_vocab, open_dataset, unigram_entropy
from marin.training.ema import WeightEma
from marin.training.errors import TrainingConfigError, TrainingInterrupted
from marin.training.export import export_hf
from marin.training.fsdp import gathered_model, local_tensor, shard_model
from marin.training.grad_accum import accumulate_gradients, lm_objective
from marin.training.init_weights import load_init_weights
from marin.training.loader import Batch, NamedSource, Prefetcher, WindowMixture
from marin.training.metrics import MetricsLog
from marin.training.mixture import MixtureSchedule
from marin.training.models import ModelConfig, config_to_json
from marin.training.optim import set_scheduled_lr
from marin.training.rng import capture_rng, restore_rng
from marin.training.step_metrics import StepMetrics
from marin.training.stop_signals import StopSignals
from marin.training.validation import validation_metrics, validation_sums


@dataclass(frozen=True)
class TrainJob:
    """A TrainConfig bound to its data and output location: what one training process runs."""

    config: TrainConfig
    datasets: tuple[DatasetInput, ...]
    output_path: str
    run_name: str = "train"
    init_from: str | None = (
        None  # weights to start from (see init_weights.load_init_weights); a checkpoint wins
    )
    init_optimizer: bool = False  # with init_from: its checkpoint's optimizer state too (a cooldown)
    mixture: MixtureSchedule | None = None  # the datasets' weights by step (None: their static weights)

    def make_trainer(self, env: _Distributed, device: torch.device, signals: StopSignals) -> Trainer:
        """The trainer that runs this job: a job of another kind (post-training) returns its own."""
        return Trainer(self, env, device, signals)


@dataclass
class _Distributed:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    owns_group: bool = False  # this process initialized torch.distributed (and tears it down)


def _init_distributed(device_type: str, parallelism: Parallelism) -> _Distributed:
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    backend = "nccl" if device_type == "cuda" else "gloo"
    if world_size == 1:
        if parallelism != Parallelism.FSDP or dist.is_initialized():
            return _Distributed()
        # FSDP and sharded checkpoints work on a process group, even one of a single process.
        dist.init_process_group(backend=backend, store=dist.HashStore(), rank=0, world_size=1)
        return _Distributed(owns_group=True)
    env = _Distributed(int(os.environ["RANK"]), world_size, int(os.environ.get("LOCAL_RANK", "0")))
    if not dist.is_initialized():
        dist.init_process_group(
            backend=backend,
            store=rendezvous_store(env.rank, world_size),
            rank=env.rank,
            world_size=world_size,
        )
        env.owns_group = True
    return env


def rendezvous_store(rank: int, world_size: int) -> dist.TCPStore:
    """The group's TCPStore at MASTER_ADDR:MASTER_PORT, as `env://` makes it but listening on that
    address only: torch's own server listens on every interface (`*`), which exposes the store
    to every network the node is on. Rank 0 binds the socket itself and hands it to the store.
    Under torchrun, whose agent already serves the store there, every rank is a client (as `env://`)."""
    address, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    timeout = dist.constants.default_pg_timeout
    if rank != 0 or os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
        return dist.TCPStore(address, port, world_size, False, timeout)
    family, kind, proto, _, where = socket.getaddrinfo(address, port, type=socket.SOCK_STREAM)[0]
    listener = socket.socket(family, kind, proto)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(where)
    listener.listen(128)
    return dist.TCPStore(address, port, world_size, True, timeout, master_listen_fd=listener.detach())


def _pick_device(config: TrainConfig, local_rank: int) -> torch.device:
    if config.device == "cpu" or (config.device == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise TrainingConfigError("device='cuda' was asked for but torch sees no CUDA device")
    torch.cuda.set_device(local_rank)
    return torch.device("cuda", local_rank)


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def resolve_model_config(model: ModelConfig, datasets: list[OpenedDataset]) -> ModelConfig:
    """The model config with its vocabulary resolved from the tokenizer and checked against it."""
    tokenizer_vocab = max(ds.vocab_size for ds in datasets)
    if model.vocab_size is None:
        model = model.with_vocab_size(tokenizer_vocab)
    check_vocab(datasets, model.vocab_size)
    return model


def recipe_forward_options(config: TrainConfig, datasets: list[OpenedDataset]) -> dict[str, Any]:
    """What the model's forward takes for this run's recipes: `document_eos` (document masking, at the
    datasets' one EOS id) and `z_loss`; empty for a run with neither, so its forward is as it was."""
    options: dict[str, Any] = {}
    if config.document_masking:
        eos = {d.eos_id for d in datasets}
        if len(eos) != 1 or None in eos:
            raise TrainingConfigError(
                f"document_masking splits windows at the EOS token, but the datasets' tokenizers end documents "
                f"with {sorted(map(str, eos))}; train on caches of one tokenizer"
            )
        options["document_eos"] = eos.pop()
    if config.z_loss:
        options["z_loss"] = float(config.z_loss)
    return options


def train(job: TrainJob) -> dict:
    """Train (resuming from the latest checkpoint when one exists) and return the run's summary."""
    config = job.config
    if config.cpu_threads:
        torch.set_num_threads(config.cpu_threads)
    wants_cuda = config.device == "cuda" or (config.device == "auto" and torch.cuda.is_available())
    device_type = "cuda" if wants_cuda else "cpu"
    env = _init_distributed(device_type, config.parallelism)
    try:
        with StopSignals() as signals:
            return job.make_trainer(env, _pick_device(config, env.local_rank), signals).run()
    finally:
        if env.owns_group and dist.is_initialized():
            dist.destroy_process_group()


class Trainer:
    """One process's view of a run: `train_step()` and the loop that calls it and the callbacks.

    What callbacks may use (see `marin.training.callbacks`): `config`, `model_config`, `model` (the
    module being trained: FSDP-sharded under FSDP, never the DDP wrapper), `optimizer`, `step`
    (optimizer steps done), `rank`, `world_size`, `is_main`, `output_path`, `metrics`,
    `evaluate()`, `save_checkpoint()`, `request_stop(reason)`, `stopping`, `interrupted`.

    Another kind of training (post-training: `marin.posttrain`) is a subclass that replaces what
    depends on the data and the objective, and nothing else: `_open_data()` (the data, the model
    config and the run's fingerprint), `_prepare_model()` (after the model is built: load weights,
    add adapters), `trainable` (the module whose parameters train and are checkpointed),
    `_make_loader()` and `_batches()`, `_forward_options()`, `_gradients(batch)` (the objective's
    gradient), `evaluate()`, `_export()` (what an export writes) and `_summarize()` (what the run's
    summary adds).
    """

    def __init__(self, job: TrainJob, env: _Distributed, device: torch.device, signals: StopSignals):
        self.job, self.config, self.env, self.device, self.signals = job, job.config, env, device, signals
        self.rank, self.world_size = env.rank, env.world_size
        self.is_main = env.rank == 0
        self.output_path = job.output_path.rstrip("/")
        self._open_data()
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
        self.callbacks: list[Callback] = default_callbacks(self.config.callbacks)
        self.init_record: dict | None = None  # where the starting weights came from (init_from)
        self.step = 0
        self.stop_reason: str | None = None
        self.interrupted: str | None = None  # the signal that stopped the run
        self._loader_state: dict[str, Any] = {}
        self._closers: list[Callable[[], None]] = []
        self._last_record: dict[str, Any] = {}
        self._batch_domains: tuple[dict[str, int], dict[str, float]] = ({}, {})

    def _open_data(self) -> None:
        """Open the token caches: `datasets`, the `model_config` resolved against their tokenizer, and
        the `fingerprint` of what the run computes (checked by every resume)."""
        self.datasets = [open_dataset(d) for d in self.job.datasets]
        self.model_config = resolve_model_config(self.config.model, self.datasets)
        self.fingerprint = self.config.fingerprint(self.job.datasets, self.job.mixture)

    # ----- what callbacks use -----

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

    def evaluate(self) -> dict:
        """Mean next-token loss and bits per byte over the validation splits, summed over ranks
        (collective: every rank calls it)."""
        sums = validation_sums(
            self.model,
            self.datasets,
            seq_len=self.config.seq_len,
            max_tokens=self.config.eval_max_tokens,
            batch_size=self.config.batch_size,
            rank=self.rank,
            world_size=self.world_size,
            lockstep=self.fsdp,
            autocast=self.autocast,
            document_eos=self.forward_options.get("document_eos"),
        )
        return validation_metrics(*self._all_sum(sums))

    def save_checkpoint(self) -> str:
        """Write the checkpoint of the current step (collective: every rank calls it); its path."""
        self.metrics.flush()  # before the checkpoint: a resume finds every record up to it
        extra: dict[str, Any] = {"model": config_to_json(self.model_config)}
        if self.init_record:
            extra["init_from"] = self.init_record
        if self.guard is not None:
            extra["bad_steps"] = self.guard.state_dict()
        states = {_callback_key(i, cb): cb.state_dict() for i, cb in enumerate(self.callbacks)}
        states = {k: v for k, v in states.items() if v}
        if states:
            extra["callbacks"] = states
        state = TrainState(self.step, self._loader_state, capture_rng(), self.fingerprint, extra)
        tensors = {"ema": self.ema.state_dict()} if self.ema is not None else None
        return self.checkpointer.save(
            model=self.trainable, optimizer=self.optimizer, state=state, tensors=tensors
        )

    def export_hf(self, out_dir: str) -> str:
        """Write the model's Hugging Face export to `out_dir` (collective under FSDP: every rank calls it):
        the weights being trained, or their moving average when the run keeps one and exports it."""
        export_model = gathered_model(self.model, self.model_config) if self.fsdp else self.model
        if self.ema is not None and self.config.export_ema:
            export_model = copy.deepcopy(self.model)
            self.ema.copy_to(export_model)
        if self.is_main:
            self._export(export_model, out_dir)
        return out_dir

    def on_close(self, fn: Callable[[], None]) -> None:
        """Call `fn` when the loop ends, however it ends (a callback's cleanup)."""
        self._closers.append(fn)

    # ----- the run -----

    def _build(self) -> None:
        _seed_everything(self.config.seed)
        self.model: nn.Module = self.model_config.build().to(self.device)
        self.trainable: nn.Module = self._prepare_model()
        blocks = self.model_config.blocks(self.model)
        checkpoint_blocks(blocks, self.config.activation_checkpointing)
        if compile_wanted(self.config.compile, self.device):
            compile_blocks(blocks)
        if self.fsdp:
            shard_model(self.model, blocks, self.device)
        self.optimizer = self.config.optimizer.build(self.trainable, fused=self.device.type == "cuda")
        self.loader = self._make_loader()
        self.forward_options = self._forward_options()
        self.guard = BadStepGuard(self.config.skip_bad_steps) if self.config.skip_bad_steps else None
        self.ema = WeightEma(self.model, self.config.ema) if self.config.ema else None
        self._loader_state = self.loader.state_dict()
        self.train_model: nn.Module = self.model
        if self.world_size > 1 and not self.fsdp:
            ids = [self.device.index] if self.device.type == "cuda" else None
            self.train_model = nn.parallel.DistributedDataParallel(self.model, device_ids=ids)
        self.rates = StepMetrics.of(self.config, self.model_config, self.device, self.world_size)
        self.params = [p for p in self.trainable.parameters() if p.requires_grad]
        # modules that report what is not a loss (a mixture-of-experts' per-expert token fractions)
        self._metric_modules = [m for m in self.model.modules() if callable(getattr(m, "step_metrics", None))]
        self.max_norm = self.config.optimizer.max_grad_norm or math.inf

    def _prepare_model(self) -> nn.Module:
        """Called right after the model is built from the seed, before it is wrapped or sharded; the
        module whose parameters train and are checkpointed (here: the whole model)."""
        return self.model

    def _make_loader(self) -> Any:
        """The batch source: `state_dict()` / `load_state_dict()` (checkpointed), read by `_batches()`."""
        return WindowMixture(
            [NamedSource(d.input.name, d.train, d.input.weight) for d in self.datasets],
            seq_len=self.config.seq_len,
            batch_size=self.config.batch_size,
            seed=self.config.seed,
            rank=self.rank,
            world_size=self.world_size,
            schedule=self.job.mixture,
        )

    def _batches(self) -> Prefetcher:
        """What the loop takes batches from: `next()` -> Batch, `close()`, `wait_seconds`, `last_wait_seconds`."""
        return Prefetcher(self.loader, self.device, depth=self.config.prefetch)

    def _forward_options(self) -> dict[str, Any]:
        """The keyword arguments of the model's forward for this run's recipes."""
        return recipe_forward_options(self.config, self.datasets)

    def _gradients(self, batch: Batch) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Accumulate the gradient of the objective on `batch`; (the loss, the auxiliary losses and any
        other named figures to log, each detached and to be averaged over processes)."""
        return accumulate_gradients(
            self.train_model,
            batch.inputs,
            batch.targets,
            self.config.grad_accum_steps,
            self.autocast,
            self.world_size,
            self.forward_options,
            objective=self._objective,
        )

    # What a microbatch's gradient is of (`grad_accum.Objective`): the model's loss plus its auxiliary
    # losses; a post-training objective (DPO's) replaces it.
    _objective = staticmethod(lm_objective)

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
        if self.guard is not None:
            self.guard.load_state_dict(state.extra["bad_steps"])
        if self.ema is not None:
            self.ema.load_state_dict(tensors["ema"])
        callback_states = state.extra.get("callbacks", {})
        for i, callback in enumerate(self.callbacks):
            if _callback_key(i, callback) in callback_states:
                callback.load_state_dict(callback_states[_callback_key(i, callback)])
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

    def _init_from(self, source: str) -> None:
        """Load the starting weights before step 0, and score them on the validation data.

        The evaluation draws no random numbers, so the run's data order and RNG are those of a run
        without `init_from`; what it records (source, digest, eval loss) goes into every checkpoint,
        so a resumed run reports it too.
        """
        optimizer = self.optimizer if self.job.init_optimizer else None
        record = load_init_weights(source, self.model, self.model_config, optimizer)
        if self.ema is not None:  # the average starts from the weights the run starts from
            self.ema = WeightEma(self.model, self.config.ema)
        record.update({f"init_{k}": v for k, v in self.evaluate().items()})
        self.init_record = record
        if self.is_main:
            print(f"[marin.train] initialized from {record['path']} ({record['kind']})", flush=True)

    def train_step(self, batch: Batch, clock: float) -> StepOutput:
        """One optimizer step on `batch`: the learning rate of this step on every parameter group,
        the gradient of the model's loss (and auxiliary losses) over `grad_accum_steps`
        microbatches, clipping, the update (skipped when `skip_bad_steps` judges the loss bad), the
        EMA. The loss, gradient norm, auxiliary losses, the stop signal and rank 0's `clock` are
        agreed over the processes in one all-reduce: after the update, or before it when the
        decision to skip needs the agreed loss."""
        config = self.config
        lr = set_scheduled_lr(self.optimizer, config.optimizer, self.step, config.num_train_steps)
        loss, aux = self._gradients(batch)
        grad_norm = local_tensor(torch.nn.utils.clip_grad_norm_(self.params, self.max_norm))
        names = sorted(aux)
        skipped = False
        if self.guard is None:
            self.optimizer.step()
            agreed = self._agree(loss, grad_norm, aux, names, clock)
        else:
            agreed = self._agree(loss, grad_norm, aux, names, clock)
            skipped = self.guard.should_skip(agreed[0], agreed[1])
            if not skipped:
                self.optimizer.step()
        if self.ema is not None and not skipped:
            self.ema.update()
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
        prefetcher = self._batches()
        self.on_close(prefetcher.close)
        self.on_close(self.metrics.close)
        train_seconds = 0.0
        began = time.perf_counter()
        try:
            for callback in self.callbacks:
                callback.on_train_start(self)
            tick = time.perf_counter()
            while self.step < config.num_train_steps and not self.stopping:
                batch = prefetcher.next()
                out = self.train_step(batch, clock=time.perf_counter() - began)
                if self.interrupted is None and self.world_size == 1 and self.signals.received:
                    self.interrupted = self.signals.received
                out.seconds = time.perf_counter() - tick
                out.data_wait = prefetcher.last_wait_seconds
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
        summary = self._finish(train_seconds, prefetcher.wait_seconds, start)
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
        record["skipped_steps"] = self.guard.skipped if self.guard is not None else 0
        if out.skipped:
            record["skipped"] = True
        record["ema"] = self.ema is not None
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
        if self.stop_reason is not None and "eval_loss" not in last:
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
            "final_eval_loss": last.get("eval_loss"),
            "final_eval_bpb": last.get("eval_bpb"),
            "vocab_size": self.model_config.vocab_size,
            "num_parameters": self.model_config.num_parameters(),
            "train_seconds_this_run": train_seconds,
            "data_wait_seconds_this_run": data_wait,
            "data_wait_fraction": data_wait / train_seconds if train_seconds else 0.0,
            "init_from": self.init_record,
            "world_size": self.world_size,
            "grad_accum_steps": self.config.grad_accum_steps,
            "parallelism": str(self.config.parallelism),
            "skipped_steps": self.guard.skipped if self.guard is not None else 0,
            "exported_weights": "ema" if self.ema is not None and self.config.export_ema else "last",
        }
        self.export_hf(hf_path)
        if self.config.export_every:
            summary["exports"] = {
                str(s): f"hf/{export_step_name(s)}" for s in export_steps(self.config.export_every, self.step)
            }
            summary["tokens_per_step"] = self.config.batch_size * self.config.seq_len
        if self.is_main:
            self._summarize(summary)
        self._barrier()
        return summary

    def _export(self, model: nn.Module, out_dir: str) -> None:
        """On rank 0: write the Hugging Face export of `model` (the weights to export, whole) at `out_dir`."""
        first = self.datasets[0]
        export_hf(model, self.model_config, out_dir, tokenizer_dir=first.tokenizer_path, eos_id=first.eos_id)

    def _summarize(self, summary: dict[str, Any]) -> None:
        """On rank 0, at the run's end, after the export: add what this kind of run reports to `summary`."""
        summary["train_unigram_entropy"] = unigram_entropy(
            [d.train for d in self.datasets], self.model_config.vocab_size
        )


def _callback_key(index: int, callback: Callback) -> str:
    return f"{index}:{type(callback).__qualname__}"


def _log(line: str) -> None:
    print(line, flush=True)
