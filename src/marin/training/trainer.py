"""The training loop: composes the model, optimizer, loader, checkpoints, metrics and export.

`train(job)` runs in each training process. With one process it is called directly; with several,
`marin.training.launch` starts them like torchrun (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
MASTER_PORT) and each calls `train`. Output layout under `job.output_path`:
`checkpoints/step-NNNNNNNN/`, `metrics.jsonl`, `hf/` (the Hugging Face export).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import random
import socket
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from enum import StrEnum

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor
from tqdm import tqdm

from marin.training.checkpoint import (
    TrainState,
    capture_rng,
    load_init_weights,
    load_latest_intact,
    restore_rng,
    save_checkpoint,
    save_sharded_checkpoint,
)
from marin.training.datasets import DatasetInput, OpenedDataset, check_vocab, open_dataset, unigram_entropy
from marin.training.errors import TrainingConfigError
from marin.training.export import export_hf
from marin.training.loader import NamedSource, Prefetcher, WindowMixture
from marin.training.metrics import MetricsLog, peak_flops_per_device
from marin.training.model import Llama, LlamaConfig
from marin.training.optim import AdamConfig, set_learning_rate

# Fields that change how a run executes but not what it computes: a checkpoint written under one
# value resumes under another (e.g. on a different number of processes), and they stay out of a
# train step's cache key.
EXECUTION_FIELDS = (
    "num_processes",
    "device",
    "compile",
    "cpu_threads",
    "loggers",
    "peak_flops",
    "prefetch",
    "grad_accum_steps",
    "parallelism",
)


class Parallelism(StrEnum):
    """How the processes of a run share the model.

    DDP: each process holds the whole model and optimizer, and gradients are all-reduced.
    FSDP: each process holds a 1/world shard of every transformer block's (and the root's) parameters,
    gradients and optimizer state (FSDP2 `fully_shard`); on GPU parameters and compute are bf16 with
    fp32 gradient reduction, on CPU all fp32. FSDP runs write sharded checkpoints.
    """

    DDP = "ddp"
    FSDP = "fsdp"


@dataclass(frozen=True)
class TrainConfig:
    """Everything that defines a training run except where its data and output live.

    `steps_per_eval` and `checkpoint_every` count optimizer steps (None: only at the end).
    `parallelism` is "ddp" or "fsdp" (see `Parallelism`).
    `grad_accum_steps` splits each process's share of the batch into that many microbatches whose
    gradients add up before the optimizer step: the global batch stays `batch_size` whatever the world
    size, and memory holds one microbatch.
    `num_processes` is the number of data-parallel processes (None: one per requested GPU, else 1;
    on CPU >1 uses gloo, which is how DDP is tested without GPUs). `device` is "auto", "cpu" or
    "cuda". `cpu_threads` pins torch's intra-op threads; float reductions depend on it, so pin it
    when you need bit-identical reruns across machines. `loggers` may name "tensorboard", "wandb".
    """

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
    num_processes: int | None = None
    device: str = "auto"
    compile: bool = False
    cpu_threads: int | None = None
    loggers: tuple[str, ...] = ()
    peak_flops: float | None = None
    prefetch: int = 4
    grad_accum_steps: int = 1
    parallelism: Parallelism = Parallelism.DDP

    def __post_init__(self) -> None:
        if self.parallelism not in tuple(Parallelism):
            raise TrainingConfigError(
                f"parallelism must be one of {[p.value for p in Parallelism]}, got {self.parallelism!r}"
            )
        object.__setattr__(self, "parallelism", Parallelism(self.parallelism))
        for name in (
            "batch_size",
            "seq_len",
            "num_train_steps",
            "eval_max_tokens",
            "prefetch",
            "grad_accum_steps",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise TrainingConfigError(f"{name} must be a positive int, got {value!r}")
        for name in ("steps_per_eval", "checkpoint_every", "keep_last_k", "num_processes", "cpu_threads"):
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
        """The configuration as JSON (a step's hash_attrs)."""
        out = asdict(self)
        out["loggers"] = list(self.loggers)
        return out

    def result_json(self) -> dict:
        """The fields that determine what a run computes (all but `EXECUTION_FIELDS`)."""
        return {k: v for k, v in self.to_json().items() if k not in EXECUTION_FIELDS}

    def fingerprint(self, datasets: tuple[DatasetInput, ...]) -> str:
        """A hash of what determines the numbers a run computes, datasets included."""
        fields = self.result_json()
        fields["datasets"] = [[d.name, d.weight] for d in datasets]
        return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class TrainJob:
    """A TrainConfig bound to its data and output location: what one training process runs."""

    config: TrainConfig
    datasets: tuple[DatasetInput, ...]
    output_path: str
    run_name: str = "train"
    on_step_end: Callable[[int], None] | None = field(default=None, compare=False)
    init_from: str | None = (
        None  # weights to start from (see checkpoint.load_init_weights); a checkpoint wins
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
            _shard(self.model, self.device)
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
        tokens_per_step = config.batch_size * config.seq_len
        flops_per_token = self.model_config.flops_per_token(config.seq_len)
        peak = peak_flops_per_device(self.device, config.peak_flops) * self.env.world_size
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
        data_wait = 0.0
        loader_state = self.loader.state_dict()
        try:
            tick = time.perf_counter()
            for step in range(start, config.num_train_steps):
                lr = config.optimizer.lr_at(step, config.num_train_steps)
                set_learning_rate(self.optimizer, lr)
                batch = prefetcher.next()
                loss = self._forward_backward(train_model, batch.inputs, batch.targets)
                grad_norm = _local(torch.nn.utils.clip_grad_norm_(params, max_norm))
                self.optimizer.step()
                self.optimizer.zero_grad(set_to_none=True)
                loss_value, grad_value = self._all_sum([loss.item() / self.env.world_size, grad_norm.item()])
                grad_value /= self.env.world_size
                now = time.perf_counter()
                elapsed, tick = now - tick, now
                train_seconds += elapsed
                data_wait += prefetcher.last_wait_seconds
                loader_state = batch.loader_state
                done = step + 1
                record = {
                    "step": done,
                    "loss": loss_value,
                    "lr": lr,
                    "grad_norm": grad_value,
                    "tokens": done * tokens_per_step,
                    "tokens_per_s": tokens_per_step / elapsed,
                    "mfu": tokens_per_step / elapsed * flops_per_token / peak,
                    "step_seconds": elapsed,
                    "data_wait_s": prefetcher.last_wait_seconds,
                    "world_size": self.env.world_size,
                    "grad_accum_steps": config.grad_accum_steps,
                    "parallelism": str(config.parallelism),
                }
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
        return self._finish(last, train_seconds, data_wait, start)

    def _forward_backward(
        self, model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor
    ) -> torch.Tensor:
        """Accumulate the gradient of the mean loss over `grad_accum_steps` equal microbatches (DDP
        and FSDP reduce gradients only on the last); returns that mean loss."""
        steps = self.config.grad_accum_steps
        if inputs.shape[0] % steps:
            raise TrainingConfigError(
                f"grad_accum_steps={steps} does not split this process's {inputs.shape[0]} rows of the batch "
                f"(batch_size={self.config.batch_size} over world size {self.env.world_size}); make batch_size a "
                "multiple of world size x grad_accum_steps"
            )
        total = torch.zeros((), device=inputs.device)
        for i, (x, y) in enumerate(zip(inputs.chunk(steps), targets.chunk(steps), strict=False)):
            last = i == steps - 1
            sync = (
                model.no_sync()
                if not last and isinstance(model, nn.parallel.DistributedDataParallel)
                else contextlib.nullcontext()
            )
            if isinstance(model, FSDPModule):
                model.set_requires_gradient_sync(last)
            with sync:
                with self.autocast:
                    logits = model(x)
                    loss = F.cross_entropy(logits.flatten(0, 1).float(), y.flatten()) / steps
                loss.backward()
            total += loss.detach()
        return total

    @torch.no_grad()
    def _evaluate(self) -> dict:
        """Mean next-token loss and bits per byte over the validation splits (sharded over ranks).

        Windows of up to `seq_len + 1` tokens are taken in order, up to `eval_max_tokens` per dataset;
        the split's tail that fills no whole window is left out. Bytes are estimated as the split's
        average bytes per token times the tokens predicted, so this bits-per-byte is a training-time
        estimate; the evaluation step (`marin.experiment.evaluate`) counts each document's own bytes.
        """
        model = self.model
        model.eval()
        nll, count, nbytes = 0.0, 0.0, 0.0
        try:
            for ds in self.datasets:
                split = ds.validation
                if split is None:
                    continue
                window = min(self.config.seq_len + 1, split.num_tokens)
                stride = window - 1
                n_windows = min(
                    max(1, (split.num_tokens - 1) // stride), max(1, self.config.eval_max_tokens // window)
                )
                mine = list(range(self.env.rank, n_windows, self.env.world_size))
                per_batch = max(1, self.config.batch_size // self.env.world_size)
                # FSDP gathers each block's weights from every rank, so all ranks run as many forwards as
                # rank 0 (which has the most windows); a rank out of windows runs one and discards it.
                batches = len(range(0, n_windows, self.env.world_size)) if self.fsdp else len(mine)
                for i in range(0, batches, per_batch):
                    rows = [split.tokens(w * stride, w * stride + window) for w in mine[i : i + per_batch]]
                    if not rows:
                        with self.autocast:
                            model(torch.zeros((1, window - 1), dtype=torch.long, device=self.device))
                        continue
                    tokens = torch.from_numpy(np.stack(rows).astype(np.int64)).to(self.device)
                    with self.autocast:
                        logits = model(tokens[:, :-1])
                    loss = F.cross_entropy(
                        logits.flatten(0, 1).float(), tokens[:, 1:].flatten(), reduction="sum"
                    )
                    nll += loss.item()
                    predicted = tokens[:, 1:].numel()
                    count += predicted
                    nbytes += predicted * split.num_bytes / split.num_tokens
        finally:
            model.train()
        nll, count, nbytes = self._all_sum([nll, count, nbytes])
        if count == 0:
            return {}
        return {"eval_loss": nll / count, "eval_bpb": nll / math.log(2) / nbytes if nbytes else float("nan")}

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
        export_model = _gathered(self.model, self.model_config) if self.fsdp else self.model
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


def _shard(model: Llama, device: torch.device) -> None:
    """Apply FSDP2 to each transformer block, then to the root (embedding, final norm, output).

    On GPU, parameters are gathered and computed in bf16 with gradients reduced in fp32; on CPU
    everything stays fp32.
    """
    policy = (
        MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        if device.type == "cuda"
        else MixedPrecisionPolicy()
    )
    for block in model.layers:
        fully_shard(block, mp_policy=policy)
    fully_shard(model, mp_policy=policy)


def _local(value: torch.Tensor) -> torch.Tensor:
    """A plain tensor for `value`, which FSDP may return as a replicated DTensor."""
    return value.full_tensor() if isinstance(value, DTensor) else value


def _gathered(model: nn.Module, config: LlamaConfig) -> nn.Module:
    """On rank 0, a plain CPU Llama holding an FSDP model's whole weights (elsewhere the model itself).

    Every rank must call it: the shards are gathered collectively.
    """
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    weights = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    if dist.get_rank() != 0:
        return model
    whole = Llama(config)
    whole.load_state_dict(weights)
    return whole
