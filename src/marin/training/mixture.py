"""Mixture schedules: the weight of each dataset at each step, and each batch's rows per dataset.

A schedule is a list of phases, `[(0, {"web": 1.0}), (800, {"web": 0.5, "code": 0.5})]`: each phase
holds from its step until the next phase's. Static weights `{"web": 3, "code": 1}` are one phase
from step 0. A batch of B rows drawn at step s takes from each dataset its largest-remainder share
of B under the phase's weights: the floor of B·wᵢ/Σw each, and the rows left over to the largest
fractional parts (ties to the dataset declared first). The count per dataset is therefore fixed by
the weights, with no sampling noise, and the same at any number of processes. Arithmetic is exact
(`fractions.Fraction` of the weights as given), so no rounding decides a tie.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from marin.training.errors import TrainingConfigError


def largest_remainder(weights: Sequence[float], total: int) -> tuple[int, ...]:
    """`total` split in proportion to `weights` (≥ 0, positive sum) by the largest-remainder method."""
    exact = [Fraction(w) for w in weights]
    whole = sum(exact)
    quotas = [total * w / whole for w in exact]
    counts = [int(q) for q in quotas]  # floor: quotas are ≥ 0
    left = total - sum(counts)
    by_remainder = sorted(range(len(quotas)), key=lambda i: (-(quotas[i] - counts[i]), i))
    for i in by_remainder[:left]:
        counts[i] += 1
    return tuple(counts)


@dataclass(frozen=True)
class MixturePhase:
    """From `start_step` on (until the next phase), datasets are drawn with `weights` (by dataset order)."""

    start_step: int
    weights: tuple[float, ...]


@dataclass(frozen=True)
class MixtureSchedule:
    """The phases of a run's mixture over the datasets `names` (see the module docstring)."""

    names: tuple[str, ...]
    phases: tuple[MixturePhase, ...]

    @classmethod
    def of(
        cls, names: Sequence[str], spec: Mapping[str, float] | Sequence[Any], where: str = "datasets"
    ) -> MixtureSchedule:
        """Parse static weights `{name: w}` or phases `[(step, {name: w}), ...]` over the declared `names`.

        Each bad input is one TrainingConfigError naming it: a weight that is not a number (static
        weights must be > 0, a phase's ≥ 0), a phase whose weights do not sum to a positive number,
        steps that do not start at 0 and increase, a name not among `names`.
        """
        names = tuple(names)
        if isinstance(spec, Mapping):
            weights = _phase_weights(names, spec, f"{where}", positive=True)
            return cls(names, (MixturePhase(0, weights),))
        if isinstance(spec, str | bytes) or not isinstance(spec, Sequence) or not spec:
            raise TrainingConfigError(
                f"{where} must be {{dataset: weight}} or a non-empty list of (step, {{dataset: weight}}) phases"
            )
        phases = []
        for i, entry in enumerate(spec):
            if not isinstance(entry, Sequence) or len(entry) != 2 or not isinstance(entry[1], Mapping):
                raise TrainingConfigError(
                    f"{where}[{i}] is {entry!r:.80}; each phase is (step, {{dataset: weight}})"
                )
            step, weights = entry
            if isinstance(step, bool) or not isinstance(step, int) or step < 0:
                raise TrainingConfigError(
                    f"{where}[{i}] starts at step {step!r}; a phase's step is an int ≥ 0"
                )
            if i == 0 and step != 0:
                raise TrainingConfigError(
                    f"{where}[0] starts at step {step}; the first phase must start at step 0"
                )
            if phases and step <= phases[-1].start_step:
                raise TrainingConfigError(
                    f"{where}: phase steps must increase, but phase {i} starts at step {step}, "
                    f"not after phase {i - 1}'s step {phases[-1].start_step}"
                )
            phases.append(
                MixturePhase(
                    step, _phase_weights(names, weights, f"{where}[{i}] (step {step})", positive=False)
                )
            )
        return cls(names, tuple(phases))

    @property
    def is_static(self) -> bool:
        return len(self.phases) == 1

    def phase_at(self, step: int) -> MixturePhase:
        """The phase in force at optimizer step `step`."""
        current = self.phases[0]
        for phase in self.phases[1:]:
            if phase.start_step > step:
                break
            current = phase
        return current

    def counts(self, step: int, batch_size: int) -> tuple[int, ...]:
        """The rows of each dataset in the batch of step `step` (largest remainder of the phase's weights)."""
        return largest_remainder(self.phase_at(step).weights, batch_size)

    def describe(self) -> list[dict[str, Any]]:
        """The schedule as JSON: [{"start_step", "weights": {name: w}}] (for keys and records)."""
        return [
            {"start_step": p.start_step, "weights": dict(zip(self.names, p.weights, strict=True))}
            for p in self.phases
        ]


def _phase_weights(
    names: tuple[str, ...], weights: Mapping[str, float], where: str, *, positive: bool
) -> tuple[float, ...]:
    unknown = [name for name in weights if name not in names]
    if unknown:
        raise TrainingConfigError(
            f"{where} names dataset {unknown[0]!r}, which the run does not declare; declared: {list(names)}"
        )
    out = []
    for name in names:
        w = weights.get(name, 0.0)
        if (
            isinstance(w, bool)
            or not isinstance(w, int | float)
            or w != w
            or w in (float("inf"), float("-inf"))
        ):
            raise TrainingConfigError(
                f"{where}: dataset {name!r} has weight {w!r}; weights are finite numbers"
            )
        if positive and not w > 0:
            raise TrainingConfigError(f"{where}: dataset {name!r} has weight {w!r}; weights must be > 0")
        if w < 0:
            raise TrainingConfigError(f"{where}: dataset {name!r} has weight {w!r}; weights must be ≥ 0")
        out.append(float(w))
    if not sum(out) > 0:
        raise TrainingConfigError(
            f"{where}: the weights sum to {sum(out)!r}; give at least one dataset a weight > 0"
        )
    return tuple(out)
