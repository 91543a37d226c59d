"""The records of a comparison: the evaluations read back, their configurations (replicates grouped),
each configuration's metrics over its seeds, the differences tested, and the power figures.

`marin.evaluation.compare` reads and groups them, `marin.evaluation.differences` makes the tests, and
`marin.evaluation.compare_render` prints them (Markdown, CSV, JSON).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import orjson

from marin.evaluation import stats
from marin.evaluation.multiple_testing import Adjustment
from marin.evaluation.replicates import Configuration
from marin.evaluation.results import Aggregation, MetricResult
from marin.evaluation.signal_noise import SignalNoise

ALPHA = 0.05
NOT_TESTED = (Aggregation.EXP_RATIO, Aggregation.EXP_MEAN)  # perplexities: tested through bpb / loss
HOW_TO_ADD_SEEDS = (
    "train each configuration with several seeds (marin.experiment.replicate.replicate(train_lm(...), "
    "seeds=(0, 1, 2)), evaluate each, and compare all the evaluations"
)


@dataclass(frozen=True)
class Evaluated:
    """One evaluation read back: its label, step name, where it is, its parameters, metrics, per-item
    scores, its model's compute, its configuration (seeds aside) and each metric's chance level."""

    label: str
    path: str
    params: dict[str, Any]
    metrics: dict[str, MetricResult]  # by flat name (`EvaluationResults.flat_metrics`)
    items: dict[str, stats.ItemScores] = field(default_factory=dict)
    flops: dict[str, Any] = field(default_factory=dict)  # the model step's result `flops`, if any
    name: str = ""
    configuration: Configuration = field(default_factory=lambda: Configuration("", {}))
    chance: dict[str, float] = field(default_factory=dict)
    curves: dict[str, list[float]] = field(default_factory=dict)  # checkpoint values per metric, by step


@dataclass(frozen=True)
class Group:
    """A configuration: its label and its evaluations, one per seed (one when trained once)."""

    label: str
    members: tuple[Evaluated, ...]

    @property
    def seeds(self) -> list[str]:
        """Each member's seeds that differ between the members, as `field=value` text (`field=default`
        where a member leaves it at its default, which keeps it out of the key)."""
        by_field = [_by_field(m.configuration.seeds) for m in self.members]
        fields = list(dict.fromkeys(f for seeds in by_field for f in seeds))
        varying = [f for f in fields if len({repr(seeds.get(f)) for seeds in by_field}) > 1]
        return [
            ", ".join(f"{path}={seeds.get((path, i), 'default')}" for path, i in varying) or "defaults"
            for seeds in by_field
        ]


def _by_field(seeds: dict[str, Any]) -> dict[tuple[str, int], Any]:
    """A member's seeds by field path, numbered where two of its steps have the same path: each replicate's
    upstream steps are named for its seed, so a field is matched across replicates by its path."""
    out: dict[tuple[str, int], Any] = {}
    for key, value in seeds.items():
        path = key.split(": ")[-1]
        out[path, sum(p == path for p, _ in out)] = value
    return out


class Kind(StrEnum):
    """What a difference is between."""

    CONFIGURATION = "configuration"  # two configurations, over their seeds
    MODEL = "model"  # two trained models: seed variance unmeasured
    SEED_NOISE = "seed noise"  # two replicates of one configuration


@dataclass(frozen=True)
class ConfigurationMetric:
    """A configuration's mean of a metric over its seeds, with an interval counting seed and item noise.

    `seed_noise` says where its seed spread comes from: "measured" (two or more seeds), "borrowed"
    (trained once: the other configurations' pooled spread) or "unmeasured" (the item interval alone).
    """

    configuration: str
    metric: str
    value: float
    stderr: float | None
    ci95: tuple[float, float] | None
    df: float | None
    seeds: int
    seed_sd: float | None
    items: int
    seed_noise: str

    def to_json(self) -> dict[str, Any]:
        return _plain(dataclasses.asdict(self))


@dataclass(frozen=True)
class Difference:
    """a - b of one metric, its interval and test, its p-value adjusted for the table's tests, and which
    of a and b is better (configuration level, or these two models) where the adjusted p < 0.05."""

    kind: Kind
    metric: str
    a: str
    b: str
    value: float
    stderr: float | None
    ci95: tuple[float, float] | None
    n: int
    test: str
    p_value: float | None = None
    p_adjusted: float | None = None
    better: str | None = None
    df: float | None = None
    a_only: int | None = None
    b_only: int | None = None

    @property
    def significant(self) -> bool:
        return self.p_adjusted is not None and self.p_adjusted < ALPHA

    def to_json(self) -> dict[str, Any]:
        out = _plain(dataclasses.asdict(self))
        out["significant"] = self.significant if self.p_value is not None else None
        return {k: v for k, v in out.items() if v is not None or k in ("p_value", "better", "significant")}


@dataclass(frozen=True)
class PowerRow:
    """What one metric's measured spreads say about a difference of `delta`: the seeds per configuration
    it needs for 80% power at these items, and the items it needs at the seeds compared."""

    metric: str
    delta: float
    seed_sd: float
    noise_sd: float
    interaction_sd: float
    items: int
    seeds: int
    power_now: float
    seeds_needed: int | None
    items_needed: int | None

    def to_json(self) -> dict[str, Any]:
        return _plain(dataclasses.asdict(self))


@dataclass(frozen=True)
class Comparison:
    """What `marin compare` shows: the evaluations and their configurations, the differing parameters,
    the metrics, configuration means, differences, notes, signal-to-noise and power."""

    evaluations: list[Evaluated]
    groups: list[Group]
    params: dict[str, list[Any]]  # only those that differ, one value per column
    metrics: list[str]
    configuration_metrics: list[ConfigurationMetric]
    differences: list[Difference]
    adjustment: Adjustment
    notes: list[str]
    signal: list[SignalNoise] = field(default_factory=list)
    power: list[PowerRow] = field(default_factory=list)

    @property
    def replicated(self) -> bool:
        """Whether some configuration has two or more seeds: the comparison is between configurations."""
        return any(len(g.members) > 1 for g in self.groups)

    @property
    def columns(self) -> list[str]:
        """The table's columns: configurations when replicated, else evaluations."""
        if self.replicated:
            return [
                f"{g.label} ({len(g.members)} seed{'s' if len(g.members) > 1 else ''})" for g in self.groups
            ]
        return [e.label for e in self.evaluations]

    def to_json(self) -> dict[str, Any]:
        return {
            "evaluations": [
                {"label": e.label, "path": e.path, "name": e.name, "seeds": e.configuration.seeds}
                for e in self.evaluations
            ],
            "configurations": [
                {"label": g.label, "evaluations": [m.label for m in g.members]} for g in self.groups
            ],
            "params": dict(zip(self.params, self.params.values(), strict=True)),
            "compute": {e.label: e.flops or None for e in self.evaluations},
            "metrics": {
                m: {e.label: e.metrics[m].to_json() if m in e.metrics else None for e in self.evaluations}
                for m in self.metrics
            },
            "configuration_metrics": [c.to_json() for c in self.configuration_metrics],
            "differences": [d.to_json() for d in self.differences],
            "adjustment": self.adjustment.value,
            "notes": self.notes,
            "signal_to_noise": [s.to_json() for s in self.signal],
            "power": [p.to_json() for p in self.power],
        }


def _plain(data: dict[str, Any]) -> dict[str, Any]:
    return orjson.loads(orjson.dumps(data, option=orjson.OPT_SERIALIZE_NUMPY))
