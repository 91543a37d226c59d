"""Optimizers behind one seam, `OptimizerConfig`: `AdamConfig` (AdamW) and `MuonConfig` (Muon + AdamW).

Every optimizer config holds a learning-rate `schedule` (an object: `marin.training.schedules`) and
`max_grad_norm`, and says how to build its torch optimizer over a model. Each parameter group of
what `build` returns carries its own `peak_lr`; `set_scheduled_lr` sets every group to the schedule
at that peak, so an optimizer with two rates (Muon's matrices, AdamW's embeddings) follows one
schedule shape. Adding an optimizer is one subclass with `build` (and `peak_rates` when it has more
than one rate).
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from marin.execution.arguments import Checked
from marin.execution.keyed import key_fields
from marin.training.errors import TrainingConfigError
from marin.training.schedules import (
    SCHEDULE_KEY_NAMES,
    Cosine,
    Schedule,
    optimizer_key_fields,
    schedule_from_key,
)

if TYPE_CHECKING:  # torch is imported where an optimizer is built, so reading configs (the UI) needs none
    import torch
    from torch import nn

_EMBEDDING_AND_OUTPUT = ("embed_tokens", "lm_head")  # Hugging Face's names, every architecture's
_OPTIMIZERS: dict[str, type[OptimizerConfig]] = {}  # every OptimizerConfig subclass, by class name


@dataclass(frozen=True)
class OptimizerConfig(Checked):
    """What every optimizer shares: its peak rate, weight decay, clipping and the schedule.

    `learning_rate` is the peak rate (of the main parameter group: Muon's matrices for Muon).
    `schedule` shapes every rate over the run (`Cosine()`, `Linear()`, `Constant()`, `WSD()`, or any
    `marin.training.schedules.Schedule`). `max_grad_norm` clips the global gradient norm; `None` or
    0 turns clipping off.
    """

    learning_rate: float = 6e-4
    weight_decay: float = 0.0
    max_grad_norm: float | None = 1.0
    schedule: Schedule = Cosine()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _OPTIMIZERS[cls.__name__] = cls

    @classmethod
    def from_key(cls, key: dict[str, Any]) -> OptimizerConfig:
        """The optimizer config whose key form (`describe()`, as a step's hash_attrs hold it) is `key`:
        the fields it names, the rest at their defaults. TrainingConfigError when it names no optimizer."""
        fields_ = dict(key)
        kind = _OPTIMIZERS.get(fields_.pop("optimizer", "AdamConfig"))
        if kind is None:
            raise TrainingConfigError(
                f"no optimizer config named {key.get('optimizer')!r}; known: {sorted(_OPTIMIZERS)}"
            )
        schedule = schedule_from_key(fields_)
        fields_ = {k: v for k, v in fields_.items() if k not in SCHEDULE_KEY_NAMES}
        try:
            return kind(schedule=schedule, **fields_)
        except TypeError as e:
            raise TrainingConfigError(f"{kind.__name__} has no such fields: {e}") from None

    def __post_init__(self) -> None:
        where = type(self).__name__
        if not self.learning_rate > 0:
            raise TrainingConfigError(f"{where}.learning_rate must be > 0, got {self.learning_rate!r}")
        if self.weight_decay < 0:
            raise TrainingConfigError(f"{where}.weight_decay must be ≥ 0, got {self.weight_decay!r}")

    def describe(self) -> dict[str, Any]:
        """The key form: the fields (a built-in schedule as the fields it replaced, so keys published
        before schedules were objects stay), and for any optimizer but AdamW its name (two optimizers
        whose fields agree are still different runs)."""
        out = key_fields(self)
        out.pop("schedule", None)
        keyed_at_default = "schedule" in getattr(type(self), "KEYED_AT_DEFAULT", ())
        out.update(optimizer_key_fields(self.schedule, keyed_at_default=keyed_at_default))
        if not isinstance(self, AdamConfig):
            out["optimizer"] = type(self).__name__
        return out

    def to_json(self) -> dict:
        """The fields as a JSON object, with the optimizer's and the schedule's class names."""
        out = asdict(self)
        out["schedule"] = {"name": type(self.schedule).__name__, **out["schedule"]}
        out["optimizer"] = type(self).__name__
        return out

    def lr_at(self, step: int, num_train_steps: int) -> float:
        """The (main) learning rate for optimizer step `step` (0-based) of a run of `num_train_steps`."""
        return self.schedule.lr(step, num_train_steps, self.learning_rate)

    def peak_rates(self) -> dict[str, float]:
        """Each named peak rate this optimizer schedules (`lr` is `learning_rate`)."""
        return {"lr": self.learning_rate}

    def check_run(self, num_train_steps: int, *, sharded: bool) -> None:
        """Refuse, before anything runs, a run this optimizer cannot train (cycles past its end, ...)."""
        self.schedule.check_run(num_train_steps)

    def build(self, model: nn.Module, *, fused: bool = False) -> Any:
        """The torch optimizer over `model`'s parameters; every group carries its `peak_lr`."""
        raise NotImplementedError(f"{type(self).__name__} must define build()")


@dataclass(frozen=True)
class AdamWMoments:
    """AdamW's moment decay rates and epsilon: AdamConfig's, and the AdamW part's of MuonConfig."""

    beta1: float = 0.9
    beta2: float = 0.95
    epsilon: float = 1e-8

    def __post_init__(self) -> None:
        super().__post_init__()  # the OptimizerConfig checks, next in the MRO
        for name in ("beta1", "beta2"):
            if not 0 <= getattr(self, name) < 1:
                raise TrainingConfigError(
                    f"{type(self).__name__}.{name} must be in [0, 1), got {getattr(self, name)!r}"
                )


@dataclass(frozen=True)
class AdamConfig(AdamWMoments, OptimizerConfig):
    """AdamW; weight decay applies to matrices (dim ≥ 2) only. See `OptimizerConfig` for the schedule."""

    # keyed even at their defaults: these keys were published before defaults stayed out (marin.execution.keyed)
    KEYED_AT_DEFAULT: ClassVar[tuple[str, ...]] = (
        "learning_rate",
        "weight_decay",
        "beta1",
        "beta2",
        "epsilon",
        "max_grad_norm",
        "schedule",
    )

    def build(self, model: nn.Module, *, fused: bool = False) -> torch.optim.AdamW:
        """AdamW over `model`'s parameters; weight decay applies to matrices (dim ≥ 2) only.

        Parameter groups are ordered by `named_parameters()`, so the optimizer state lines up by
        index with the model whatever the number of processes that trained it.
        """
        decay, no_decay = [], []
        for param in model.parameters():
            if param.requires_grad:
                (decay if param.dim() >= 2 else no_decay).append(param)
        return _adamw(self, decay, no_decay, self.learning_rate, fused)


@dataclass(frozen=True)
class MuonConfig(AdamWMoments, OptimizerConfig):
    """Muon (`torch.optim.Muon`) on the 2-D hidden matrices, AdamW on embeddings, output and norms.

    `learning_rate` is Muon's peak rate and `adam_learning_rate` the AdamW part's; both follow the
    one schedule. `adjust_lr_fn` is torch's per-matrix scaling: "original" (Keller Jordan's,
    √max(1, rows/cols), with rates near 0.02) or "match_rms_adamw" (Moonshot's, 0.2·√max(rows, cols),
    which lets Muon reuse an AdamW rate). `weight_decay` applies to Muon's matrices and to the
    embedding and output matrices (decoupled, as AdamW's), never to norms. `momentum`, `nesterov`
    and `ns_steps` (Newton–Schulz iterations) are Muon's; `beta1`, `beta2`, `epsilon` AdamW's.
    Muon's update of a matrix needs the whole matrix: it runs under DDP, not FSDP.
    """

    learning_rate: float = 0.02
    adam_learning_rate: float = 6e-4
    momentum: float = 0.95
    nesterov: bool = True
    ns_steps: int = 5
    adjust_lr_fn: Literal["original", "match_rms_adamw"] = "original"

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.adam_learning_rate > 0:
            raise TrainingConfigError(
                f"MuonConfig.adam_learning_rate must be > 0, got {self.adam_learning_rate!r}"
            )
        if not 0 <= self.momentum < 1:
            raise TrainingConfigError(f"MuonConfig.momentum must be in [0, 1), got {self.momentum!r}")
        if (
            isinstance(self.ns_steps, bool)
            or not isinstance(self.ns_steps, int)
            or not 1 <= self.ns_steps < 100
        ):
            raise TrainingConfigError(
                f"MuonConfig.ns_steps must be an int in [1, 100), got {self.ns_steps!r}"
            )
        if self.adjust_lr_fn not in ("original", "match_rms_adamw"):
            raise TrainingConfigError(
                f"MuonConfig.adjust_lr_fn must be 'original' or 'match_rms_adamw', got {self.adjust_lr_fn!r}"
            )

    def peak_rates(self) -> dict[str, float]:
        return {"lr": self.learning_rate, "adam_lr": self.adam_learning_rate}

    def check_run(self, num_train_steps: int, *, sharded: bool) -> None:
        super().check_run(num_train_steps, sharded=sharded)
        if sharded:
            raise TrainingConfigError(
                "MuonConfig needs each matrix whole for its orthogonalized update and FSDP shards them; "
                "train Muon with parallelism='ddp', or use AdamConfig with FSDP"
            )

    def build(self, model: nn.Module, *, fused: bool = False) -> OptimizerChain:
        """Muon over the hidden matrices and AdamW over the rest, stepped as one."""
        hidden, matrices, vectors = [], [], []
        for name, param in model.named_parameters():
            if not param.requires_grad:
                continue
            if param.dim() == 2 and not any(part in _EMBEDDING_AND_OUTPUT for part in name.split(".")):
                hidden.append(param)
            else:
                (matrices if param.dim() >= 2 else vectors).append(param)
        import torch

        parts: list[torch.optim.Optimizer] = []
        if hidden:
            parts.append(
                torch.optim.Muon(
                    [{"params": hidden, "peak_lr": self.learning_rate}],
                    lr=self.learning_rate,
                    weight_decay=self.weight_decay,
                    momentum=self.momentum,
                    nesterov=self.nesterov,
                    ns_steps=self.ns_steps,
                    adjust_lr_fn=self.adjust_lr_fn,
                )
            )
        parts.append(_adamw(self, matrices, vectors, self.adam_learning_rate, fused))
        return OptimizerChain(parts)


def _adamw(
    config: Any, decay: list[nn.Parameter], no_decay: list[nn.Parameter], peak: float, fused: bool
) -> torch.optim.AdamW:
    import torch

    groups = [
        {"params": decay, "weight_decay": config.weight_decay, "peak_lr": peak},
        {"params": no_decay, "weight_decay": 0.0, "peak_lr": peak},
    ]
    kwargs = {"fused": True} if fused else {"foreach": True}
    return torch.optim.AdamW(
        groups, lr=peak, betas=(config.beta1, config.beta2), eps=config.epsilon, **kwargs
    )


class _ChainedState(MutableMapping):
    """The `state` of an OptimizerChain: each parameter's slots, kept by the optimizer that owns it."""

    def __init__(self, optimizers: Sequence[torch.optim.Optimizer]):
        self._optimizers = optimizers
        self._owner = {id(p): o for o in optimizers for g in o.param_groups for p in g["params"]}

    def _of(self, param: torch.Tensor) -> torch.optim.Optimizer:
        owner = self._owner.get(id(param))
        if owner is None:
            raise KeyError("parameter is not one this optimizer updates")
        return owner

    def __getitem__(self, param: torch.Tensor) -> Any:
        return self._of(param).state[param]

    def __setitem__(self, param: torch.Tensor, value: Any) -> None:
        self._of(param).state[param] = value

    def __delitem__(self, param: torch.Tensor) -> None:
        del self._of(param).state[param]

    def __iter__(self) -> Iterator[torch.Tensor]:
        for optimizer in self._optimizers:
            yield from optimizer.state

    def __len__(self) -> int:
        return sum(len(o.state) for o in self._optimizers)

    def clear(self) -> None:
        for optimizer in self._optimizers:
            optimizer.state.clear()


class OptimizerChain:
    """Several torch optimizers over disjoint parameters, used as one: `step`, `zero_grad`,
    `param_groups` (all of theirs, in order) and `state` (each parameter's slots, whoever owns it),
    so checkpoints save and load it like a single optimizer."""

    def __init__(self, optimizers: Sequence[torch.optim.Optimizer]):
        self.optimizers = list(optimizers)
        self.state = _ChainedState(self.optimizers)

    @property
    def param_groups(self) -> list[dict[str, Any]]:
        return [group for optimizer in self.optimizers for group in optimizer.param_groups]

    def step(self) -> None:
        for optimizer in self.optimizers:
            optimizer.step()

    def zero_grad(self, set_to_none: bool = True) -> None:
        for optimizer in self.optimizers:
            optimizer.zero_grad(set_to_none=set_to_none)

    def state_dict(self) -> dict[str, Any]:
        return {"optimizers": [o.state_dict() for o in self.optimizers]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for optimizer, part in zip(self.optimizers, state["optimizers"], strict=True):
            optimizer.load_state_dict(part)


_SLOTS = {
    "AdamW": ("step", "exp_avg", "exp_avg_sq"),
    "Adam": ("step", "exp_avg", "exp_avg_sq"),
    "Muon": ("momentum_buffer",),
}


def state_slots(optimizer: Any) -> dict[int, tuple[str, frozenset[str]]]:
    """For each parameter (by id) its optimizer's name and the state fields it keeps for it, for the
    torch optimizers marin builds (an OptimizerChain's parts included); others are left out."""
    out: dict[int, tuple[str, frozenset[str]]] = {}
    for part in getattr(optimizer, "optimizers", [optimizer]):
        name = type(part).__name__
        if name not in _SLOTS:
            continue
        for group in part.param_groups:
            slots = set(_SLOTS[name]) | ({"max_exp_avg_sq"} if group.get("amsgrad") else set())
            out.update({id(p): (name, frozenset(slots)) for p in group["params"]})
    return out


def set_scheduled_lr(optimizer: Any, config: OptimizerConfig, step: int, num_train_steps: int) -> float:
    """Set every parameter group to the schedule's rate at `step` for its own `peak_lr`; returns the
    main rate (`config.lr_at(step, num_train_steps)`)."""
    schedule = config.schedule
    for group in optimizer.param_groups:
        group["lr"] = schedule.lr(step, num_train_steps, group.get("peak_lr", config.learning_rate))
    return schedule.lr(step, num_train_steps, config.learning_rate)


def set_learning_rate(optimizer: Any, lr: float) -> None:
    """Set the groups to the main rate `lr` (that of the first group's peak): a group of another peak
    gets `lr` scaled by the ratio of the peaks, so every group keeps the same schedule shape."""
    groups = optimizer.param_groups
    main = groups[0].get("peak_lr") if groups else None
    for group in groups:
        own = group.get("peak_lr")
        group["lr"] = lr if main is None or own is None or own == main else lr * own / main
