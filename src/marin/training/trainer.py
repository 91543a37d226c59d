"""The training loop: composes the model, optimizer, loader, checkpoints, metrics and export.

`train(job)` runs in each training process. With one process it is called directly; with several,
`marin.training.launch` starts them like torchrun (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
MASTER_PORT) and each calls `train`. Output layout under `job.output_path`:
`checkpoints/step-NNNNNNNN/`, `metrics.jsonl`, `hf/` (the Hugging Face export).
"""

from __future__ import annotations

import contextlib
import math
import os
import random
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from tqdm import tqdm

from marin.training.checkpoint import TrainState, load_latest_intact, save_checkpoint, save_sharded_checkpoint
from marin.training.config import Parallelism, TrainConfig
from marin.training.datasets import DatasetInput, OpenedDataset, check_vocab, open_dataset, unigram_entropy
from marin.training.errors import TrainingConfigError
from marin.training.export import export_hf
from marin.training.fsdp import gathered_model, local_tensor, shard_model
from marin.training.grad_accum import accumulate_gradients
from marin.training.init_weights import load_init_weights
from marin.training.loader import NamedSource, Prefetcher, WindowMixture
from marin.training.metrics import MetricsLog
from marin.training.model import Llama, LlamaConfig
from marin.training.optim import set_learning_rate
from marin.training.rng import capture_rng, restore_rng
from marin.training.step_metrics import StepMetrics
from marin.training.validation import validation_metrics, validation_sums


@dataclass(frozen=True)
class TrainJob:
    """A TrainConfig bound to its data and output location: what one training process runs."""

    config: TrainConfig
    datasets: tuple[DatasetInput, ...]
    output_path: str
    run_name: str = "train"
    on_step_end: Callable[[int], None] | None = field(default=None, compare=False)
    init_from: str | None = (
        None  # weights to start from (see init_weights.load_init_weights); a checkpoint wins
    )


@dataclass
class _Distributed:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    owns_group: bool = False  # this process initialized torch.distributed (and tears it down)

    @property
    def is_main(self) -> bool:
        return self.rank == 0


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


def resolve_model_config(model: LlamaConfig, datasets: list[OpenedDataset]) -> LlamaConfig:
    """The model config with its vocabulary resolved from the tokenizer and checked against it."""
    tokenizer_vocab = max(ds.vocab_size for ds in datasets)
    if model.vocab_size is None:
        model = model.with_vocab_size(tokenizer_vocab)
    check_vocab(datasets, model.vocab_size)
    return model


def train(job: TrainJob) -> dict:
    """Train (resuming from the latest checkpoint when one exists) and return the run's summary."""
    config = job.config
    if config.cpu_threads:
        torch.set_num_threads(config.cpu_threads)
    wants_cuda = config.device == "cuda" or (config.device == "auto" and torch.cuda.is_available())
    device_type = "cuda" if wants_cuda else "cpu"
    env = _init_distributed(device_type, config.parallelism)
    try:
        return _Trainer(job, env, _pick_device(config, env.local_rank)).run()
    finally:
        if env.owns_group and dist.is_initialized():
            dist.destroy_process_group()


class _Trainer:
    """One process's view of a run; `run()` is the loop."""

    def __init__(self, job: TrainJob, env: _Distributed, device: torch.device):
        self.job, self.config, self.env, self.device = job, job.config, env, device
        self.datasets = [open_dataset(d) for d in job.datasets]
        self.model_config = resolve_model_config(self.config.model, self.datasets)
        self.fingerprint = self.config.fingerprint(job.datasets)
        self.checkpoint_dir = f"{job.output_path.rstrip('/')}/checkpoints"
        self.metrics = MetricsLog(
            f"{job.output_path.rstrip('/')}/metrics.jsonl",
            loggers=self.config.loggers if env.is_main else (),
            run_name=job.run_name,
            config=self.config.to_json(),
        )
        self.fsdp = self.config.parallelism == Parallelism.FSDP
        # FSDP casts parameters to bf16 itself (its mixed-precision policy); DDP uses autocast.
        self.autocast = (
            torch.autocast("cuda", dtype=torch.bfloat16)
            if device.type == "cuda" and not self.fsdp
            else contextlib.nullcontext()
        )
        self.init_record: dict | None = None  # where the starting weights came from (init_from)

    def _build(self) -> None:
        _seed_everything(self.config.seed)
        self.model = Llama(self.model_config).to(self.device)
        if self.fsdp:
            shard_model(self.model, self.device)
        self.optimizer = self.config.optimizer.build(self.model, fused=self.device.type == "cuda")
        self.loader = WindowMixture(
            [NamedSource(d.input.name, d.train, d.input.weight) for d in self.datasets],
            seq_len=self.config.seq_len,
            batch_size=self.config.batch_size,
            seed=self.config.seed,
            rank=self.env.rank,
            world_size=self.env.world_size,
        )

    def _resume(self) -> int:
        """Load the newest intact checkpoint (corrupt ones are skipped, and logged); the step to start at."""
        state = load_latest_intact(
            self.checkpoint_dir,
            model=self.model,
            optimizer=self.optimizer,
            config_fingerprint=self.fingerprint,
            log=self._log if self.env.is_main else lambda line: None,
        )
        if state is None:
            if self.env.is_main:
                self.metrics.truncate_after(0)
            if self.job.init_from:
                self._init_from(self.job.init_from)
            return 0
        self.init_record = state.extra.get("init_from")
        restore_rng(state.rng)
        self.loader.load_state_dict(state.loader)
        if self.env.is_main:
            self.metrics.truncate_after(state.step)
            print(f"[marin.train] resumed from {self.checkpoint_dir}/step-{state.step:08d}", flush=True)
        return state.step

    @staticmethod
    def _log(line: str) -> None:
        print(line, flush=True)

    def _init_from(self, source: str) -> None:
        """Load the starting weights before step 0, and score them on the validation data.

        The evaluation draws no random numbers, so the run's data order and RNG are those of a run
        without `init_from`; what it records (source, digest, eval loss) goes into every checkpoint,
        so a resumed run reports it too.
        """
        record = load_init_weights(source, self.model)
        record.update({f"init_{k}": v for k, v in self._evaluate().items()})
        self.init_record = record
        if self.env.is_main:
            print(f"[marin.train] initialized from {record['path']} ({record['kind']})", flush=True)

    def _checkpoint(self, step: int, loader_state: dict) -> None:
        state = TrainState(
            step,
            loader_state,
            capture_rng(),
            self.fingerprint,
            {"init_from": self.init_record} if self.init_record else {},
        )
        if self.fsdp:  # every rank writes its own shards
            save_sharded_checkpoint(
                self.checkpoint_dir,
                model=self.model,
                optimizer=self.optimizer,
                state=state,
                keep_last_k=self.config.keep_last_k,
            )
        elif self.env.is_main:
            save_checkpoint(
                self.checkpoint_dir,
                model=self.model,
                optimizer=self.optimizer,
                state=state,
                keep_last_k=self.config.keep_last_k,
            )
        self._barrier()

    def _barrier(self) -> None:
        if self.env.world_size > 1:
            dist.barrier()

    def _all_sum(self, values: list[float]) -> list[float]:
        if self.env.world_size == 1:
            return values
        t = torch.tensor(values, dtype=torch.float64, device=self.device)
        dist.all_reduce(t)
        return t.tolist()

    def run(self) -> dict:
        config = self.config
        self._build()
        start = self._resume()
        train_model: nn.Module = self.model
        if config.compile:
            train_model = torch.compile(train_model)
        if self.env.world_size > 1 and not self.fsdp:
            ids = [self.device.index] if self.device.type == "cuda" else None
            train_model = nn.parallel.DistributedDataParallel(train_model, device_ids=ids)
        rates = StepMetrics.of(config, self.model_config, self.device, self.env.world_size)
        params = [p for p in self.model.parameters()]
        max_norm = config.optimizer.max_grad_norm or math.inf
        prefetcher = Prefetcher(self.loader, self.device, depth=config.prefetch)
        progress = tqdm(
            total=config.num_train_steps,
            initial=start,
            disable=not self.env.is_main,
            desc="train",
            mininterval=1.0,
            dynamic_ncols=True,
        )
        last = {"loss": float("nan")}
        train_seconds = 0.0
        loader_state = self.loader.state_dict()
        try:
            tick = time.perf_counter()
            for step in range(start, config.num_train_steps):
                lr = config.optimizer.lr_at(step, config.num_train_steps)
                set_learning_rate(self.optimizer, lr)
                batch = prefetcher.next()
                loss = accumulate_gradients(
                    train_model,
                    batch.inputs,
                    batch.targets,
                    config.grad_accum_steps,
                    self.autocast,
                    self.env.world_size,
                )
                grad_norm = local_tensor(torch.nn.utils.clip_grad_norm_(params, max_norm))
                self.optimizer.step()
                self.optimizer.zero_grad(set_to_none=True)
                loss_value, grad_value = self._all_sum([loss.item() / self.env.world_size, grad_norm.item()])
                grad_value /= self.env.world_size
                now = time.perf_counter()
                elapsed, tick = now - tick, now
                train_seconds += elapsed
                loader_state = batch.loader_state
                done = step + 1
                record = rates.record(
                    done,
                    loss=loss_value,
                    lr=lr,
                    grad_norm=grad_value,
                    seconds=elapsed,
                    data_wait=prefetcher.last_wait_seconds,
                )
                last_step = done == config.num_train_steps
                if (config.steps_per_eval and done % config.steps_per_eval == 0) or last_step:
                    record.update(self._evaluate())
                    tick = time.perf_counter()
                if self.env.is_main:
                    self.metrics.write(record)
                last = record
                progress.update(1)
                progress.set_postfix(loss=f"{loss_value:.3f}", refresh=False)
                if (config.checkpoint_every and done % config.checkpoint_every == 0) or last_step:
                    self.metrics.flush()  # before the checkpoint: a resume finds every record up to it
                    self._checkpoint(done, loader_state)
                    tick = time.perf_counter()
                if self.job.on_step_end is not None:
                    self.job.on_step_end(done)
        finally:
            prefetcher.close()
            progress.close()
            self.metrics.close()
        if start == config.num_train_steps and self.env.is_main:  # finished before; only the export was left
            last = (self.metrics.read() or [last])[-1]
        return self._finish(last, train_seconds, prefetcher.wait_seconds, start)

    def _evaluate(self) -> dict:
        """Mean next-token loss and bits per byte over the validation splits, summed over ranks."""
        sums = validation_sums(
            self.model,
            self.datasets,
            seq_len=self.config.seq_len,
            max_tokens=self.config.eval_max_tokens,
            batch_size=self.config.batch_size,
            rank=self.env.rank,
            world_size=self.env.world_size,
            lockstep=self.fsdp,
            autocast=self.autocast,
        )
        return validation_metrics(*self._all_sum(sums))

    def _finish(self, last: dict, train_seconds: float, data_wait: float, start: int) -> dict:
        out = self.job.output_path.rstrip("/")
        hf_path = f"{out}/hf"
        summary = {
            "hf_path": hf_path,
            "checkpoint_path": f"{self.checkpoint_dir}/step-{self.config.num_train_steps:08d}",
            "metrics_path": self.metrics.path,
            "num_train_steps": self.config.num_train_steps,
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
            "world_size": self.env.world_size,
            "grad_accum_steps": self.config.grad_accum_steps,
            "parallelism": str(self.config.parallelism),
        }
        export_model = gathered_model(self.model, self.model_config) if self.fsdp else self.model
        if self.env.is_main:
            first = self.datasets[0]
            export_hf(
                export_model,
                self.model_config,
                hf_path,
                tokenizer_dir=first.tokenizer_path,
                eos_id=first.eos_id,
            )
            summary["train_unigram_entropy"] = unigram_entropy(
                [d.train for d in self.datasets], self.model_config.vocab_size
            )
        self._barrier()
        return summary
