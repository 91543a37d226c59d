"""Learning-rate schedules as objects: `optimizer=AdamConfig(schedule=WSD(warmup=20))`.

A schedule is a frozen dataclass with one method, `lr(step, num_train_steps, peak)`: the rate of
optimizer step `step` (0-based) of a run of `num_train_steps` whose peak rate is `peak`. Nothing
keeps state, so a resumed run, `marin plot-lr`, Marina's Runs page and the trainer all read the same
function. A new schedule is one subclass of `Schedule` (see docs/training.md, "Adding a schedule").

The four built in share one shape, cut into cycles (one unless asked for more), each warmup, then
stable, then decay:

- **warmup**: the first cycle rises linearly from 0 to the peak over `warmup` steps
  (`peak · (step + 1) / warmup`; `warmup` ≥ 1 is steps, below 1 a fraction of the run); a later
  cycle rises over `rewarmup` steps (or that fraction of the cycle) from the rate the cycle before
  ended on back to the peak.
- **decay** covers the cycle's last D steps, ending on `min_lr_ratio · peak` at its last step: at
  progress p = (step − decay start + 1) / D the rate is `peak · (m + (1 − m) · f(p))`, m the minimum
  ratio and f the shape: cosine `(1 + cos πp) / 2`, linear `1 − p`, 1-sqrt `1 − √p` (Hägele et al. 2024).
- **stable** holds the peak in between.

`Cosine` and `Linear` decay over every step after warmup but the first (which holds the peak, so
the step right after warmup is at the peak, as in the usual warmup-then-cosine); `Constant` never
decays; `WSD` (warmup-stable-decay) decays over the last `decay_fraction` of each cycle with
`decay_shape`.

Keys: an optimizer's key spells a built-in schedule in the fields optimizers held before schedules
were objects (`warmup`, `lr_schedule`, `min_lr_ratio`, and `decay_fraction`, `decay_shape`,
`cycles`, `rewarmup` when set), so every key published then still names the same runs
(`optimizer_key_fields`). Any other schedule is keyed as `{"schedule": {"name": ..., fields}}`.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Literal

from marin.execution.arguments import Checked
from marin.execution.keyed import key_fields, key_json
from marin.training.errors import TrainingConfigError

DecayShape = Literal["linear", "cosine", "1-sqrt"]

_SCHEDULES: dict[str, type[Schedule]] = {}  # every Schedule subclass, by class name (to read keys back)


@dataclass(frozen=True)
class Schedule(Checked):
    """A learning-rate schedule: a frozen dataclass whose `lr(step, num_train_steps, peak)` is the rate.

    Subclasses define `lr`, and may define `check_run` to refuse, when declared, a run they cannot
    shape. They must pickle (module-level classes), as the run's config travels to its processes.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _SCHEDULES[cls.__name__] = cls

    def lr(self, step: int, num_train_steps: int, peak: float) -> float:
        """The learning rate of optimizer step `step` (0-based) of a run of `num_train_steps` at peak `peak`."""
        raise NotImplementedError(f"{type(self).__name__} must define lr(step, num_train_steps, peak)")

    def check_run(self, num_train_steps: int) -> None:
        """Refuse a run of `num_train_steps` this schedule cannot shape (TrainingConfigError)."""

    def describe(self) -> dict[str, Any]:
        """The key form of a schedule that is not built in: its class name and its fields."""
        return {"name": type(self).__name__, **key_fields(self)}


def steps_of(value: float, total: int) -> int:
    """`value` as a number of steps: itself when ≥ 1, else that fraction of `total` (rounded down)."""
    return int(value * total) if value < 1 else int(value)


def decay_factor(shape: str, progress: float) -> float:
    """f(p) of a decay shape: 1 at p = 0, 0 at p = 1."""
    if shape == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * progress))
    if shape == "linear":
        return 1.0 - progress
    return 1.0 - math.sqrt(progress)


@dataclass(frozen=True)
class Cycle:
    """One cycle's steps: [start, stop), `warmup` steps rising, the last `decay` steps decaying."""

    start: int
    stop: int
    warmup: int
    decay: int

    @property
    def decay_start(self) -> int:
        return self.stop - self.decay


# What optimizers held before schedules were objects, and their defaults: a key that names a field
# at this value left it out (unless its optimizer keyed it at its default).
_LEGACY_DEFAULTS: dict[str, Any] = {
    "warmup": 0.01,
    "lr_schedule": "cosine",
    "min_lr_ratio": 0.1,
    "decay_fraction": 0.2,
    "decay_shape": "linear",
    "cycles": None,
    "rewarmup": 0.0,
}
_LEGACY_ALWAYS = ("warmup", "lr_schedule", "min_lr_ratio")  # AdamConfig's published keys spell these out
SCHEDULE_KEY_NAMES = frozenset({*_LEGACY_DEFAULTS, "schedule"})  # the names a schedule takes in a key


@dataclass(frozen=True, kw_only=True)
class WarmupCycles(Schedule):
    """The built-in shape (see the module docstring): warmup, stable, decay, in one or more cycles.

    `warmup`: steps when ≥ 1, else a fraction of the run. `cycles`: an int for that many equal
    cycles, or the steps later cycles start at. `rewarmup`: the rise of each later cycle, steps or a
    fraction of the cycle (0: back to the peak at once). A subclass says how long each cycle decays
    (`decay_steps`) and with which shape (`shape`).
    """

    lr_schedule: ClassVar[str]  # its name in keys
    warmup: float = 0.01
    cycles: int | tuple[int, ...] | None = None
    rewarmup: float = 0.0

    def __post_init__(self) -> None:
        where = type(self).__name__
        if self.warmup < 0:
            raise TrainingConfigError(
                f"{where}.warmup must be ≥ 0 (steps, or a fraction < 1), got {self.warmup!r}"
            )
        if self.rewarmup < 0:
            raise TrainingConfigError(
                f"{where}.rewarmup must be ≥ 0 (steps, or a fraction < 1 of a cycle), got {self.rewarmup!r}"
            )
        object.__setattr__(self, "cycles", _checked_cycles(where, self.cycles))

    @property
    def shape(self) -> str:
        """The decay shape: "cosine", "linear" or "1-sqrt"."""
        return "linear"

    @property
    def floor(self) -> float:
        """The fraction of the peak the decay ends on."""
        return 1.0

    def decay_steps(self, length: int, rise: int) -> int:
        """How many of a cycle's `length` steps decay, after a rise of `rise` steps."""
        return 0

    def warmup_steps(self, num_train_steps: int) -> int:
        """The first cycle's rise in steps, for a run of `num_train_steps`."""
        return steps_of(self.warmup, num_train_steps)

    def check_run(self, num_train_steps: int) -> None:
        _cycle_starts(type(self).__name__, self.cycles, num_train_steps)

    def lr(self, step: int, num_train_steps: int, peak: float) -> float:
        cycles = _cycles_of(self, num_train_steps)
        return self._lr_in(cycles, _cycle_index(cycles, step), peak, step)

    def _lr_in(self, cycles: tuple[Cycle, ...], i: int, peak: float, step: int) -> float:
        cycle = cycles[i]
        into = step - cycle.start
        if into < cycle.warmup:
            if i == 0:
                return peak * (step + 1) / cycle.warmup
            if into + 1 == cycle.warmup:
                return peak
            previous = self._lr_in(cycles, i - 1, peak, cycle.start - 1)
            return previous + (peak - previous) * (into + 1) / cycle.warmup
        if step < cycle.decay_start:
            return peak
        progress = min(1.0, (step - cycle.decay_start + 1) / cycle.decay)
        m = self.floor
        return peak * (m + (1.0 - m) * decay_factor(self.shape, progress))

    def legacy_fields(self) -> dict[str, Any]:
        """This schedule in the fields optimizers held before schedules were objects (its key form)."""
        out = dict(_LEGACY_DEFAULTS)
        out.update({f.name: getattr(self, f.name) for f in fields(self)})
        out["lr_schedule"] = self.lr_schedule
        return out


@dataclass(frozen=True, kw_only=True)
class Constant(WarmupCycles):
    """Warmup, then the peak to the end of each cycle."""

    lr_schedule: ClassVar[str] = "constant"


@dataclass(frozen=True, kw_only=True)
class _Decaying(WarmupCycles):
    """A built-in schedule that decays to `min_lr_ratio` of the peak at the end of each cycle."""

    min_lr_ratio: float = 0.1

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0 <= self.min_lr_ratio <= 1:
            raise TrainingConfigError(
                f"{type(self).__name__}.min_lr_ratio must be in [0, 1], got {self.min_lr_ratio!r}"
            )

    @property
    def floor(self) -> float:
        return self.min_lr_ratio

    def decay_steps(self, length: int, rise: int) -> int:
        return max(0, length - rise - 1)


@dataclass(frozen=True, kw_only=True)
class Cosine(_Decaying):
    """Warmup, then a cosine decay over every later step of the cycle to `min_lr_ratio · peak`."""

    lr_schedule: ClassVar[str] = "cosine"

    @property
    def shape(self) -> str:
        return "cosine"


@dataclass(frozen=True, kw_only=True)
class Linear(_Decaying):
    """Warmup, then a linear decay over every later step of the cycle to `min_lr_ratio · peak`."""

    lr_schedule: ClassVar[str] = "linear"


@dataclass(frozen=True, kw_only=True)
class WSD(_Decaying):
    """Warmup-stable-decay: the peak holds until the last `decay_fraction` of each cycle, which decays
    with `decay_shape` ("linear", "cosine" or "1-sqrt") to `min_lr_ratio · peak`."""

    lr_schedule: ClassVar[str] = "wsd"
    decay_fraction: float = 0.2
    decay_shape: DecayShape = "linear"

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0 < self.decay_fraction <= 1:
            raise TrainingConfigError(f"WSD.decay_fraction must be in (0, 1], got {self.decay_fraction!r}")

    @property
    def shape(self) -> str:
        return self.decay_shape

    def decay_steps(self, length: int, rise: int) -> int:
        return max(0, min(length - rise, max(1, round(self.decay_fraction * length))))


BUILT_IN: dict[str, type[WarmupCycles]] = {cls.lr_schedule: cls for cls in (Cosine, Linear, Constant, WSD)}


def optimizer_key_fields(schedule: Schedule, *, keyed_at_default: bool) -> dict[str, Any]:
    """How an optimizer's key holds `schedule`: a built-in one in the fields optimizers held before
    schedules were objects, each only when it differs from that field's default (`warmup`,
    `lr_schedule`, `min_lr_ratio` always when `keyed_at_default`, as AdamConfig's published keys
    have them); any other as `{"schedule": {"name", fields}}`."""
    if not isinstance(schedule, WarmupCycles) or type(schedule) not in BUILT_IN.values():
        return {"schedule": key_json(schedule, "schedule")}
    out = {}
    for name, value in schedule.legacy_fields().items():
        value = key_json(value, f"schedule.{name}")
        default = key_json(_LEGACY_DEFAULTS[name])
        if (keyed_at_default and name in _LEGACY_ALWAYS) or value != default:
            out[name] = value
    return out


def schedule_from_key(key: dict[str, Any]) -> Schedule:
    """The schedule an optimizer's key form (`optimizer_key_fields`) names; TrainingConfigError when it
    names none this process knows."""
    if "schedule" in key:
        spec = dict(key["schedule"])
        cls = _SCHEDULES.get(spec.pop("name", ""))
        if cls is None:
            raise TrainingConfigError(
                f"no schedule class named {key['schedule'].get('name')!r} is imported here"
            )
        return cls(**spec)
    legacy = {name: key[name] for name in _LEGACY_DEFAULTS if name in key}
    cls = BUILT_IN.get(legacy.pop("lr_schedule", "cosine"))
    if cls is None:
        raise TrainingConfigError(f"no schedule named {key.get('lr_schedule')!r}; known: {sorted(BUILT_IN)}")
    if isinstance(legacy.get("cycles"), list):
        legacy["cycles"] = tuple(legacy["cycles"])
    names = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in legacy.items() if k in names})


@functools.lru_cache(maxsize=256)
def _cycles_of(schedule: WarmupCycles, num_train_steps: int) -> tuple[Cycle, ...]:
    """A built-in schedule's cycles over a run of `num_train_steps` (built once per run length: the
    trainer asks every step)."""
    where = type(schedule).__name__
    bounds = _cycle_starts(where, schedule.cycles, num_train_steps) + [num_train_steps]
    built = []
    for i, (start, stop) in enumerate(zip(bounds, bounds[1:], strict=False)):
        length = stop - start
        rise = schedule.warmup_steps(num_train_steps) if i == 0 else steps_of(schedule.rewarmup, length)
        built.append(Cycle(start, stop, rise, schedule.decay_steps(length, rise)))
    return tuple(built)


def _cycle_index(cycles: tuple[Cycle, ...], step: int) -> int:
    for i, cycle in enumerate(cycles):
        if step < cycle.stop:
            return i
    return len(cycles) - 1


def _cycle_starts(where: str, cycles: int | tuple[int, ...] | None, num_train_steps: int) -> list[int]:
    """The first step of each cycle: [0] for one cycle, k equal cycles for an int, or 0 and the given steps."""
    if cycles is None or cycles == 1:
        return [0]
    if isinstance(cycles, int):
        if cycles > num_train_steps:
            raise TrainingConfigError(
                f"{where}.cycles={cycles} is more cycles than the run's {num_train_steps} steps"
            )
        return [round(i * num_train_steps / cycles) for i in range(cycles)]
    if cycles[-1] >= num_train_steps:
        raise TrainingConfigError(
            f"{where}.cycles starts a cycle at step {cycles[-1]}, not before the run's last step "
            f"({num_train_steps} steps); give cycle starts below {num_train_steps}"
        )
    return [0, *cycles]


def _checked_cycles(where: str, cycles: Any) -> int | tuple[int, ...] | None:
    if cycles is None:
        return None
    if isinstance(cycles, int) and not isinstance(cycles, bool):
        if cycles < 1:
            raise TrainingConfigError(f"{where}.cycles must be ≥ 1, got {cycles!r}")
        return cycles
    starts = tuple(cycles) if isinstance(cycles, list | tuple) else ()
    if not starts or any(isinstance(s, bool) or not isinstance(s, int) for s in starts):
        raise TrainingConfigError(f"{where}.cycles must be an int or a list of step numbers, got {cycles!r}")
    if starts[0] <= 0 or any(b <= a for a, b in zip(starts, starts[1:], strict=False)):
        raise TrainingConfigError(
            f"{where}.cycles lists the steps later cycles start at; they must be > 0 and increasing, "
            f"got {list(starts)}"
        )
    return starts
