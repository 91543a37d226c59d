"""Learning-rate schedules, each a pure function of the step: `LrSchedule.lr(peak, step)`.

A run of `num_train_steps` is cut into cycles (one unless asked for more). Each cycle is
warmup, then stable, then decay:

- **warmup**: the first cycle rises linearly from 0 to the peak over `warmup` steps
  (`peak · (step + 1) / warmup`); a later cycle rises over `rewarmup` steps from the rate the cycle
  before ended on back to the peak.
- **decay** covers the cycle's last D steps, ending on `min_lr_ratio · peak` at its last step:
  at progress p = (step − decay start + 1) / D the rate is `peak · (m + (1 − m) · f(p))` with m the
  minimum ratio and f the shape: cosine `(1 + cos πp) / 2`, linear `1 − p`, 1-sqrt `1 − √p`
  (Hägele et al. 2024).
- **stable** holds the peak in between.

The schedule names fix D: "cosine" and "linear" decay over every step after warmup but the first
(which holds the peak, so the step right after warmup is at the peak, as in the usual
warmup-then-cosine); "constant" never decays; "wsd" (warmup-stable-decay) decays over the last
`decay_fraction` of each cycle with `decay_shape`. Nothing here keeps state: a resumed run, a plot and
the trainer all read the same function.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Literal

from marin.training.errors import TrainingConfigError

ScheduleName = Literal["cosine", "linear", "constant", "wsd"]
DecayShape = Literal["linear", "cosine", "1-sqrt"]
SCHEDULES: tuple[str, ...] = ("cosine", "linear", "constant", "wsd")
DECAY_SHAPES: tuple[str, ...] = ("linear", "cosine", "1-sqrt")


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


@dataclass(frozen=True)
class LrSchedule:
    """The schedule of one run: its cycles, decay shape and minimum ratio (see the module docstring)."""

    num_train_steps: int
    cycles: tuple[Cycle, ...]
    shape: str
    min_lr_ratio: float

    @classmethod
    def build(cls, num_train_steps: int, spec: ScheduleSpec) -> LrSchedule:
        """The schedule `spec` gives a run of `num_train_steps`."""
        bounds = cycle_starts(spec.cycles, num_train_steps) + [num_train_steps]
        shape = {"cosine": "cosine", "linear": "linear"}.get(spec.name, spec.decay_shape)
        built = []
        for i, (start, stop) in enumerate(zip(bounds, bounds[1:], strict=False)):
            length = stop - start
            rise = steps_of(spec.warmup, num_train_steps) if i == 0 else steps_of(spec.rewarmup, length)
            if spec.name == "constant":
                decay = 0
            elif spec.name == "wsd":
                decay = max(0, min(length - rise, max(1, round(spec.decay_fraction * length))))
            else:
                decay = max(0, length - rise - 1)
            built.append(Cycle(start, stop, rise, decay))
        return cls(num_train_steps, tuple(built), shape, spec.min_lr_ratio)

    def cycle_of(self, step: int) -> int:
        """The index of the cycle `step` falls in."""
        for i, cycle in enumerate(self.cycles):
            if step < cycle.stop:
                return i
        return len(self.cycles) - 1

    def lr(self, peak: float, step: int) -> float:
        """The learning rate of optimizer step `step` (0-based) for a peak rate of `peak`."""
        i = self.cycle_of(step)
        return self._lr_in(i, peak, step)

    def _lr_in(self, i: int, peak: float, step: int) -> float:
        cycle = self.cycles[i]
        into = step - cycle.start
        if into < cycle.warmup:
            if i == 0:
                return peak * (step + 1) / cycle.warmup
            if into + 1 == cycle.warmup:
                return peak
            previous = self._lr_in(i - 1, peak, cycle.start - 1)
            return previous + (peak - previous) * (into + 1) / cycle.warmup
        if step < cycle.decay_start:
            return peak
        progress = min(1.0, (step - cycle.decay_start + 1) / cycle.decay)
        m = self.min_lr_ratio
        return peak * (m + (1.0 - m) * decay_factor(self.shape, progress))


def cycle_starts(cycles: int | tuple[int, ...] | None, num_train_steps: int) -> list[int]:
    """The first step of each cycle: [0] for one cycle, k equal cycles for an int, or 0 and the given steps."""
    if cycles is None or cycles == 1:
        return [0]
    if isinstance(cycles, int):
        if cycles > num_train_steps:
            raise TrainingConfigError(
                f"optimizer.cycles={cycles} is more cycles than the run's {num_train_steps} steps"
            )
        return [round(i * num_train_steps / cycles) for i in range(cycles)]
    if cycles[-1] >= num_train_steps:
        raise TrainingConfigError(
            f"optimizer.cycles starts a cycle at step {cycles[-1]}, not before the run's last step "
            f"({num_train_steps} steps); give cycle starts below {num_train_steps}"
        )
    return [0, *cycles]


@dataclass(frozen=True)
class ScheduleSpec:
    """The fields that define a schedule, as an optimizer config holds them (see `OptimizerConfig`)."""

    name: str
    warmup: float
    min_lr_ratio: float
    decay_fraction: float
    decay_shape: str
    cycles: int | tuple[int, ...] | None
    rewarmup: float

    def build(self, num_train_steps: int) -> LrSchedule:
        """The schedule of a run of `num_train_steps`."""
        return LrSchedule.build(num_train_steps, self)

    def checked(self, where: str, default_decay: tuple[float, str]) -> ScheduleSpec:
        """This spec with `cycles` as a tuple or int; a field out of range, or one that does not apply
        to the schedule (`default_decay` is what decay_fraction and decay_shape default to), is a
        TrainingConfigError naming `where`.field."""
        if self.name not in SCHEDULES:
            raise TrainingConfigError(
                f"{where}.lr_schedule must be one of {list(SCHEDULES)}, got {self.name!r}"
            )
        if not 0 <= self.min_lr_ratio <= 1:
            raise TrainingConfigError(f"{where}.min_lr_ratio must be in [0, 1], got {self.min_lr_ratio!r}")
        if self.warmup < 0:
            raise TrainingConfigError(
                f"{where}.warmup must be ≥ 0 (steps, or a fraction < 1), got {self.warmup!r}"
            )
        if self.rewarmup < 0:
            raise TrainingConfigError(
                f"{where}.rewarmup must be ≥ 0 (steps, or a fraction < 1 of a cycle), got {self.rewarmup!r}"
            )
        if self.decay_shape not in DECAY_SHAPES:
            raise TrainingConfigError(
                f"{where}.decay_shape must be one of {list(DECAY_SHAPES)}, got {self.decay_shape!r}"
            )
        if not 0 < self.decay_fraction <= 1:
            raise TrainingConfigError(
                f"{where}.decay_fraction must be in (0, 1], got {self.decay_fraction!r}"
            )
        if self.name != "wsd" and (self.decay_fraction, self.decay_shape) != default_decay:
            raise TrainingConfigError(
                f"{where}.decay_fraction and decay_shape shape lr_schedule='wsd' only; this one is {self.name!r} "
                "(set lr_schedule='wsd', or leave them out)"
            )
        return replace(self, cycles=_checked_cycles(where, self.cycles))


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
