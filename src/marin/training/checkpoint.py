"""Checkpoints that make a resumed run the run that would have happened.

A checkpoint is a folder `checkpoints/step-NNNNNNNN/` holding
- `model.safetensors`: the weights, by parameter name;
- `optimizer.safetensors`: AdamW's moments and step counts, keyed `{param name}/{field}`;
- `state.json`: the step, the data-loader state, the RNG states (python, numpy, torch) and a
  fingerprint of the run's configuration;
- `checksums.json`: the size and xxh3-128 digest of each of those three files, computed at save.
Nothing in it depends on how many processes trained, so a run may resume on a different number.

An FSDP run writes the sharded format instead: `dcp/` is a `torch.distributed.checkpoint` folder
(`.metadata` and one `__R_0.distcp` file of shards per rank, each rank writing its own), beside the
same `state.json` and a `checksums.json` that covers every file under `dcp/` too. Loading reshards:
a checkpoint written at one world size loads at any other, into an FSDP model or a plain one.
It is written into a temporary folder and renamed into place, so a killed writer never leaves a
half checkpoint that looks whole; `keep_last_k` prunes the oldest after each save. A load reads
every file, checks it against `checksums.json`, and only then touches the model: a checkpoint
damaged after it was written (a bad disk, a truncated copy) raises `CorruptCheckpointError` and
`load_latest_intact` falls back to the one before.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import torch
from safetensors.torch import load as load_safetensors
from safetensors.torch import save as save_safetensors
from torch import nn

import storage
from marin.execution.manifest import DIGEST, bytes_digest
from marin.training.errors import CheckpointError, CorruptCheckpointError

_PREFIX = "step-"
_TEMP_PREFIX = ".tmp-"
CHECKSUMS = "checksums.json"
_FILES = ("model.safetensors", "optimizer.safetensors", "state.json")
DCP = "dcp"  # the sharded format's torch.distributed.checkpoint folder
DCP_METADATA = f"{DCP}/.metadata"


@dataclass(frozen=True)
class TrainState:
    """What a checkpoint holds besides tensors."""

    step: int
    loader: dict[str, Any]
    rng: dict[str, Any]
    config_fingerprint: str
    extra: dict[str, Any]


def step_name(step: int) -> str:
    """The folder name of the checkpoint of `step` (`step-NNNNNNNN`)."""
    return f"{_PREFIX}{step:08d}"


def list_checkpoints(directory: str) -> list[int]:
    """The steps of the complete checkpoints under `directory`, ascending."""
    steps = []
    for name in storage.list_names(directory):
        if name.startswith(_PREFIX) and name[len(_PREFIX) :].isdigit():
            steps.append(int(name[len(_PREFIX) :]))
    return sorted(steps)


def save_checkpoint(
    directory: str,
    *,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    state: TrainState,
    keep_last_k: int | None,
    tensors: dict[str, dict[str, torch.Tensor]] | None = None,
) -> str:
    """Write a checkpoint for `state.step` atomically, prune old ones, and return its path.

    `tensors` adds named sets of tensors beside the model's (`ema` → `ema.safetensors`), covered by
    the checksums like the rest and read back by `load_checkpoint(..., tensors=)`."""
    final = storage.join(directory, step_name(state.step))
    temp = storage.join(directory, f"{_TEMP_PREFIX}{step_name(state.step)}-{uuid.uuid4().hex[:8]}")
    storage.makedirs(temp)
    names = parameter_names(model)
    weights = {name: p.detach().to("cpu").contiguous() for name, p in model.named_parameters()}
    files = {
        "model.safetensors": save_safetensors(weights, metadata={"format": "pt"}),
        "optimizer.safetensors": save_safetensors(_optimizer_tensors(optimizer, names)),
        "state.json": json.dumps(asdict(state)).encode(),
    }
    for name, named in (tensors or {}).items():
        files[f"{name}.safetensors"] = save_safetensors(
            {k: v.detach().to("cpu").contiguous() for k, v in named.items()}
        )
    for name, data in files.items():
        storage.write_bytes(storage.join(temp, name), data)
    checksums = {name: {"size": len(data), DIGEST: bytes_digest(data)} for name, data in files.items()}
    storage.write_bytes(storage.join(temp, CHECKSUMS), json.dumps(checksums, indent=1).encode())
    _publish(directory, temp, final, keep_last_k)
    return final


def _publish(directory: str, temp: str, final: str, keep_last_k: int | None) -> None:
    """Rename a written checkpoint into place, then prune old ones and what killed writers left."""
    storage.remove_tree(final)  # a rerun that reached the same step again replaces it
    storage.move(temp, final)
    if keep_last_k:
        for old in list_checkpoints(directory)[:-keep_last_k]:
            storage.remove_tree(storage.join(directory, step_name(old)))
    for name in storage.list_names(directory):  # what killed writers left behind
        if name.startswith(_TEMP_PREFIX) and storage.join(directory, name) != temp:
            storage.remove_tree(storage.join(directory, name))


def parameter_names(model: nn.Module) -> dict[torch.nn.Parameter, str]:
    """Each (deduplicated) parameter of `model` and its name."""
    return {p: name for name, p in model.named_parameters()}


def _optimizer_tensors(
    optimizer: torch.optim.Optimizer, names: dict[nn.Parameter, str]
) -> dict[str, torch.Tensor]:
    tensors = {}
    for param, slots in optimizer.state.items():
        for field, value in slots.items():
            tensors[f"{names[param]}/{field}"] = value.detach().to("cpu").contiguous()
    return tensors


def load_checkpoint(
    directory: str,
    step: int,
    *,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    config_fingerprint: str,
    tensors: dict[str, dict[str, torch.Tensor]] | None = None,
) -> TrainState:
    """Load the checkpoint of `step` into `model` and `optimizer` and return its TrainState.

    Every file is read and checked against `checksums.json` before the model is touched:
    CorruptCheckpointError (naming the file and why) when one is missing, altered or unparseable;
    CheckpointError when the checkpoint is whole but was written by another configuration.
    The checkpoint's extra tensor sets (see `save_checkpoint`) are put into `tensors` by name.
    """
    path = storage.join(directory, step_name(step))
    files = read_verified(path)
    sharded = DCP_METADATA in files
    try:
        state = json.loads(files["state.json"])
        if not sharded:
            weights = load_safetensors(files["model.safetensors"])
            moments = load_safetensors(files["optimizer.safetensors"])
            extra_sets = {
                name.removesuffix(".safetensors"): load_safetensors(data)
                for name, data in files.items()
                if name not in _FILES and name.endswith(".safetensors")
            }
    except Exception as e:  # matched checksums but will not parse: written corrupt
        raise CorruptCheckpointError(f"checkpoint {path} cannot be parsed: {type(e).__name__}: {e}") from None
    if state["config_fingerprint"] != config_fingerprint:
        raise CheckpointError(
            f"checkpoint {path} was written by a run with another configuration; delete the step's "
            "output (or force-run it) to start over, or resume with the configuration that wrote it"
        )
    if sharded:
        load_sharded(path, model, optimizer)
    else:
        copy_weights(weights, model, f"checkpoint {path}/model.safetensors")
        _load_optimizer(optimizer, moments, dict(model.named_parameters()))
        if tensors is not None:
            tensors.update(extra_sets)
    return TrainState(
        step=state["step"],
        loader=state["loader"],
        rng=state["rng"],
        config_fingerprint=state["config_fingerprint"],
        extra=state["extra"],
    )


def read_verified(folder: str) -> dict[str, bytes]:
    """The bytes of a checkpoint's files, each checked against its `checksums.json` entry."""
    raw = storage.read_bytes(storage.join(folder, CHECKSUMS))
    if raw is None:
        raise CorruptCheckpointError(f"checkpoint {folder} has no {CHECKSUMS}")
    try:
        checksums = json.loads(raw)
        names = _required_files(checksums)
        expected = {name: (int(checksums[name]["size"]), str(checksums[name][DIGEST])) for name in names}
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise CorruptCheckpointError(
            f"checkpoint {folder}/{CHECKSUMS} is unreadable: {type(e).__name__}: {e}"
        ) from None
    files = {}
    for name in names:
        data = storage.read_bytes(storage.join(folder, name))
        size, digest = expected[name]
        if data is None:
            raise CorruptCheckpointError(f"checkpoint {folder} has no {name}")
        if len(data) != size:
            raise CorruptCheckpointError(
                f"checkpoint {folder}/{name} has {len(data)} bytes, {size} were written"
            )
        if bytes_digest(data) != digest:
            raise CorruptCheckpointError(f"checkpoint {folder}/{name} does not match its {DIGEST} checksum")
        files[name] = data
    return files


def _required_files(checksums: dict[str, Any]) -> list[str]:
    """The files a checkpoint must hold: the safetensors set and any extra tensor sets it lists, or
    state.json and every listed `dcp/` file."""
    if DCP_METADATA in checksums:
        return ["state.json", *sorted(name for name in checksums if name.startswith(f"{DCP}/"))]
    return [*_FILES, *sorted(name for name in checksums if name not in _FILES)]


def save_sharded_checkpoint(
    directory: str,
    *,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    state: TrainState,
    keep_last_k: int | None,
) -> str:
    """Write a sharded checkpoint for `state.step`; every rank of the process group calls it.

    Each rank writes its own shards into one temporary folder (rank 0 names it); rank 0 then writes
    `state.json` and the checksums of every file, renames the folder into place and prunes. Returns
    the checkpoint's path.
    """
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    final = storage.join(directory, step_name(state.step))
    main = dist.get_rank() == 0
    named = [storage.join(directory, f"{_TEMP_PREFIX}{step_name(state.step)}-{uuid.uuid4().hex[:8]}")]
    dist.broadcast_object_list(named, src=0)
    temp = named[0]
    if main:
        storage.makedirs(storage.join(temp, DCP))
    dist.barrier()
    model_state, optimizer_state = get_state_dict(model, optimizer)
    dcp.save(
        {"model": model_state, "optimizer": optimizer_state},
        storage_writer=_dcp_writer(storage.join(temp, DCP)),
    )
    dist.barrier()  # every rank's shards are on storage
    if main:
        storage.write_bytes(storage.join(temp, "state.json"), json.dumps(asdict(state)).encode())
        checksums = {}
        for name, _size in sorted(storage.walk_files(temp)):
            data = storage.read_bytes(storage.join(temp, name))
            assert data is not None
            checksums[name] = {"size": len(data), DIGEST: bytes_digest(data)}
        storage.write_bytes(storage.join(temp, CHECKSUMS), json.dumps(checksums, indent=1).encode())
        _publish(directory, temp, final, keep_last_k)
    dist.barrier()
    return final


def _dcp_writer(path: str) -> Any:
    from torch.distributed.checkpoint import FileSystemWriter
    from torch.distributed.checkpoint._fsspec_filesystem import FsspecWriter

    return FileSystemWriter(storage.local_path(path)) if storage.is_local(path) else FsspecWriter(path)


def _dcp_reader(path: str) -> Any:
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint._fsspec_filesystem import FsspecReader

    return FileSystemReader(storage.local_path(path)) if storage.is_local(path) else FsspecReader(path)


def load_sharded(folder: str, model: nn.Module, optimizer: torch.optim.Optimizer | None) -> None:
    """Load a sharded checkpoint's weights (and optimizer state) into `model`, resharding as needed.

    Works for an FSDP model at any world size and for a plain module (without a process group).
    """
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import (
        get_model_state_dict,
        get_state_dict,
        set_model_state_dict,
        set_state_dict,
    )

    reader = _dcp_reader(storage.join(folder, DCP))
    no_dist = not dist.is_initialized()  # a plain model in a process of its own
    try:
        if optimizer is None:
            model_state = get_model_state_dict(model)
            dcp.load({"model": model_state}, storage_reader=reader, no_dist=no_dist)
            set_model_state_dict(model, model_state)
            return
        model_state, optimizer_state = get_state_dict(model, optimizer)
        loaded = {"model": model_state, "optimizer": optimizer_state}
        dcp.load(loaded, storage_reader=reader, no_dist=no_dist)
    except (RuntimeError, ValueError, KeyError) as e:
        raise CheckpointError(
            f"checkpoint {folder}/{DCP} does not fit the model: {type(e).__name__}: {str(e)[:500]}; it was written "
            "for another model config"
        ) from None
    set_state_dict(model, optimizer, model_state_dict=loaded["model"], optim_state_dict=loaded["optimizer"])


class Checkpointer:
    """A run's checkpoints under `directory`, in the one format its parallelism calls for.

    `sharded=False`: the whole format (safetensors), written by rank 0 alone: under DDP every rank
    holds the same state. `sharded=True` (FSDP): `torch.distributed.checkpoint`, every rank writing
    its own shards. Either loads at any world size. `save` is collective: every rank calls it, and
    it returns when the checkpoint is in place.
    """

    def __init__(self, directory: str, *, sharded: bool, keep_last_k: int | None):
        self.directory, self.sharded, self.keep_last_k = directory, sharded, keep_last_k

    def save(
        self,
        *,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        state: TrainState,
        tensors: dict[str, dict[str, torch.Tensor]] | None = None,
    ) -> str:
        """Write the checkpoint of `state.step` (pruning beyond `keep_last_k`), with any extra tensor
        sets (the whole format only); its path."""
        import torch.distributed as dist

        distributed = dist.is_initialized() and dist.get_world_size() > 1
        if self.sharded:
            if tensors:
                raise CheckpointError(
                    "extra tensor sets (an EMA) are saved in whole checkpoints only, not FSDP's"
                )
            return save_sharded_checkpoint(
                self.directory, model=model, optimizer=optimizer, state=state, keep_last_k=self.keep_last_k
            )
        path = storage.join(self.directory, step_name(state.step))
        if not distributed or dist.get_rank() == 0:
            path = save_checkpoint(
                self.directory,
                model=model,
                optimizer=optimizer,
                state=state,
                keep_last_k=self.keep_last_k,
                tensors=tensors,
            )
        if distributed:
            dist.barrier()
        return path

    def load_latest(
        self,
        *,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        config_fingerprint: str,
        log: Callable[[str], None] = print,
        tensors: dict[str, dict[str, torch.Tensor]] | None = None,
    ) -> TrainState | None:
        """Load the newest intact checkpoint into `model` and `optimizer` (see `load_latest_intact`)."""
        return load_latest_intact(
            self.directory,
            model=model,
            optimizer=optimizer,
            config_fingerprint=config_fingerprint,
            log=log,
            tensors=tensors,
        )


def resume_note(output_path: str) -> str:
    """What a rerun of the train step at `output_path` starts from, as the plan says it:
    "resumes from step N" (its newest checkpoint that looks intact) or "restarts: no checkpoint".

    Intact here is what a listing shows without reading the weights (the plan must stay fast on a
    bucket of gigabyte checkpoints): `checksums.json` parses and every file it lists is there with
    the size written. The digests are checked when the run loads it, which falls back to an older
    checkpoint if this one was damaged in place.
    """
    directory = storage.join(output_path, "checkpoints")
    for step in reversed(list_checkpoints(directory)):
        if _looks_intact(storage.join(directory, step_name(step))):
            return f"resumes from step {step}"
    return "restarts: no checkpoint"


def _looks_intact(folder: str) -> bool:
    try:
        checksums = json.loads(storage.read_bytes(storage.join(folder, CHECKSUMS)) or b"")
        expected = {name: int(checksums[name]["size"]) for name in _required_files(checksums)}
    except (ValueError, KeyError, TypeError, AttributeError):
        return False
    sizes = dict(storage.walk_files(folder))
    return all(sizes.get(name) == size for name, size in expected.items())


def load_latest_intact(
    directory: str,
    *,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    config_fingerprint: str,
    log: Callable[[str], None] = print,
    tensors: dict[str, dict[str, torch.Tensor]] | None = None,
) -> TrainState | None:
    """Load the newest checkpoint under `directory` that verifies (its extra tensor sets into
    `tensors`); None when there is none.

    Each corrupt one is skipped with a `log` line naming it and why; the older ones are tried in
    turn. When checkpoints exist but none is intact, CheckpointError lists them all: starting over
    silently would throw away the run.
    """
    steps = list_checkpoints(directory)
    skipped = []
    for step in reversed(steps):
        try:
            return load_checkpoint(
                directory,
                step,
                model=model,
                optimizer=optimizer,
                config_fingerprint=config_fingerprint,
                tensors=tensors,
            )
        except CorruptCheckpointError as e:
            skipped.append(str(e))
            log(f"[marin.train] skipped checkpoint {storage.join(directory, step_name(step))}: {e}")
    if skipped:
        raise CheckpointError(
            f"every checkpoint under {directory} failed verification ({'; '.join(skipped)}); delete them, or "
            "force-run the step, to train from the start"
        )
    return None


def copy_weights(weights: dict[str, torch.Tensor], model: nn.Module, where: str) -> None:
    """Copy `weights` into `model` in place; CheckpointError naming what differs if names or shapes do not match."""
    params = dict(model.named_parameters())
    if set(weights) != set(params):
        raise CheckpointError(
            f"{where} has other parameters than the model: {sorted(set(weights) ^ set(params))[:5]}; "
            "it was written for another model config (init_from needs the source's architecture)"
        )
    wrong = [
        f"{n} {tuple(weights[n].shape)} vs {tuple(p.shape)}"
        for n, p in params.items()
        if weights[n].shape != p.shape
    ]
    if wrong:
        raise CheckpointError(
            f"{where} has parameters of other shapes than the model: {wrong[:3]} (stored vs model); "
            "it was written for another model config (init_from needs the source's, vocabulary "
            "included)"
        )
    with torch.no_grad():
        for name, param in params.items():
            param.copy_(_like(weights[name], param))


def _like(value: torch.Tensor, param: torch.Tensor) -> torch.Tensor:
    """`value` (a whole tensor) laid out as `param`: this rank's shard when `param` is an FSDP DTensor."""
    from torch.distributed.tensor import DTensor, distribute_tensor

    if isinstance(param, DTensor):
        return distribute_tensor(
            value.to(param.device), param.device_mesh, param.placements, src_data_rank=None
        )
    return value


def load_optimizer_state(
    optimizer: torch.optim.Optimizer, tensors: dict[str, torch.Tensor], model: nn.Module, where: str
) -> None:
    """Load saved optimizer state (`{param name}/{field}` tensors) into `optimizer` over `model`, after
    checking that it is the state this optimizer keeps for these parameters (CheckpointError naming
    `where` and what differs: another optimizer's, or another model's)."""
    from marin.training.optim import state_slots

    params = dict(model.named_parameters())
    saved: dict[str, set[str]] = {}
    for key in tensors:
        name, field = key.rsplit("/", 1)
        saved.setdefault(name, set()).add(field)
    unknown = sorted(set(saved) - set(params))
    if unknown:
        raise CheckpointError(f"{where} holds optimizer state of parameters the model lacks: {unknown[:5]}")
    expected = state_slots(optimizer)
    for name, fields_ in saved.items():
        kind, slots = expected.get(id(params[name]), ("", frozenset(fields_)))
        if fields_ != slots:
            raise CheckpointError(
                f"{where} holds {sorted(fields_)} for {name}, but this run's {kind} keeps {sorted(slots)}: it was "
                "written by another optimizer; init_optimizer needs the optimizer that wrote it"
            )
    _load_optimizer(optimizer, tensors, params)


def _load_optimizer(
    optimizer: torch.optim.Optimizer, tensors: dict[str, torch.Tensor], params: dict[str, nn.Parameter]
) -> None:
    fused = any(group.get("fused") for group in optimizer.param_groups)
    optimizer.state.clear()
    for key, value in tensors.items():
        name, field = key.rsplit("/", 1)
        param = params[name]
        if field == "step" and not fused:
            optimizer.state[param][field] = value.clone()
        else:
            optimizer.state[param][field] = _like(value.to(param.device, dtype=value.dtype), param)
