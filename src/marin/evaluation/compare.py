"""`marin compare`: evaluations side by side, and what their differences can and cannot conclude.

Like `dvc exp show`, the table shows only what differs: the parameters from each evaluation's key
record and its model step's (`.executor_info`'s `hash_attrs`, with the model's effective config
filling in the defaults a key leaves out), the model step's compute when it records one, then every
metric (`results.EvaluationResults.flat_metrics`) with its 95% interval.

Evaluations whose keys differ only in seed fields are replicates of one configuration
(`marin.evaluation.replicates`). What the comparison says depends on them:

- **configurations with replicates**: each configuration's mean over its seeds with an interval
  counting seed and item noise, the seed standard deviation, and each pair of configurations'
  difference with its interval and p-value (`marin.evaluation.configurations`); "better" only where
  the adjusted p-value is below 0.05. A configuration trained once borrows the seed spread the
  others measured, and says so.
- **single runs** (no replicates anywhere): the paired item-level difference of each two models
  (McNemar's exact test for accuracies, the paired bootstrap otherwise), a difference between these
  two *models*: seed variance is unmeasured, and the output says how to measure it.
- **replicates of one configuration** only: their differences are seed noise, reported as such.

Every table of tests adjusts its p-values for their number (Holm by default, Benjamini-Hochberg on
request). Evaluations scored on different items are refused unless `unpaired`. With `power=DELTA`,
each metric's seeds (and items) needed for 80% power against a difference of DELTA
(`marin.evaluation.power`). Which tasks can tell the models apart at all is their signal-to-noise
(`marin.evaluation.signal_noise`).

An argument is an evaluation's output folder, or a step name, which stands for its latest
successful output under the prefix.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np
import orjson

import storage
from marin.evaluation import configurations, stats
from marin.evaluation.direction import ranking_value
from marin.evaluation.errors import EvalDataError
from marin.evaluation.multiple_testing import Adjustment, adjust
from marin.evaluation.power import Spreads
from marin.evaluation.replicates import Configuration, configuration_label, configuration_of, is_seed_field
from marin.evaluation.results import RESULTS_FILE, Aggregation, MetricResult, read_items, read_results
from marin.evaluation.signal_noise import SignalNoise, signal_noise
from marin.evaluation.suites import unknown
from marin.execution.artifact import read_artifact, read_info
from marin.execution.states import OutputState

ALPHA = 0.05
_NOT_TESTED = (Aggregation.EXP_RATIO, Aggregation.EXP_MEAN)  # perplexities: tested through bpb / loss
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
        """Each member's seeds, as `field=value` text."""
        return [
            ", ".join(f"{k.split(': ')[-1]}={v}" for k, v in m.configuration.seeds.items())
            for m in self.members
        ]


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


def resolve(argument: str, prefix: str) -> str:
    """The output folder an argument names: the folder itself, or the latest SUCCESS output of that step name."""
    if storage.exists(storage.join(argument, RESULTS_FILE)):
        return argument
    from marin.execution.explain import list_outputs

    found = [
        r
        for r in list_outputs(prefix)
        if r.name == argument
        and r.state == OutputState.SUCCESS
        and storage.exists(storage.join(r.path, RESULTS_FILE))
    ]
    if not found:
        raise EvalDataError(
            f"{argument!r} is neither an evaluation's output folder (with {RESULTS_FILE}) nor the name of an "
            f"evaluation step with a finished output under {prefix}; pass the folder, or --prefix where it ran"
        )
    return min(found, key=lambda r: r.age_s if r.age_s is not None else math.inf).path


def read_evaluation(path: str) -> Evaluated:
    """An evaluation's metrics, parameters, per-item scores and configuration, from its output folder."""
    results = read_results(path)
    items = read_items(path)
    info = read_info(path)
    hash_attrs = (info.hash_attrs if info is not None else None) or {}
    params = {f"eval.{k}": v for k, v in flatten(hash_attrs).items()}
    model = hash_attrs.get("model")
    model_step = model.get("step") if isinstance(model, dict) else None
    flops: dict[str, Any] = {}
    for dep in info.deps if info is not None else ():
        if dep.name == model_step:
            flops = _flops_of(dep.path)
        dep_info = read_info(dep.path)
        if dep_info is not None and dep_info.hash_attrs:
            role = (
                "model" if dep.name == model_step else dep.name
            )  # the model's parameters line up across runs
            params.update({f"{role}.{k}": v for k, v in flatten(dep_info.hash_attrs).items()})
    effective = results.model.config if results.model is not None else None
    for k, v in flatten(_effective_params(effective)).items():
        params.setdefault(f"model.{k}", v)  # a default the key leaves out, never over a keyed value
    flat = results.flat_metrics()
    chance = {m: c for m in flat if (c := results.chance(m)) is not None}
    curves = {}
    if results.checkpoints is not None:
        curves = {m: [p.value for p in points] for m, points in results.checkpoints.curves.items()}
    return Evaluated(
        storage.basename(path.rstrip("/")),
        path,
        params,
        flat,
        items.scores(),
        flops,
        name=info.name if info is not None else storage.basename(path.rstrip("/")),
        configuration=configuration_of(info) if info is not None else Configuration(path, {}),
        chance=chance,
        curves=curves,
    )


def _effective_params(config: dict[str, Any] | None) -> dict[str, Any]:
    """A model's effective config as compare's rows name a train step's fields: `model.<field>` (the
    architecture among them) and `lora.<field>`."""
    if not config:
        return {}
    out: dict[str, Any] = {
        "model": {"architecture": config.get("architecture"), **(config.get("model") or {})}
    }
    if config.get("lora") is not None:
        out["lora"] = config["lora"]
    return out


def _flops_of(model_path: str) -> dict[str, Any]:
    """A train step's `flops` (model, hardware, ratio), from its result; empty when it records none."""
    artifact = read_artifact(model_path)
    result = artifact.result if artifact is not None else None
    flops = result.get("flops") if isinstance(result, dict) else None
    return dict(flops) if isinstance(flops, dict) else {}


def group_replicates(evaluations: Sequence[Evaluated]) -> list[Group]:
    """The evaluations grouped into configurations, in order of first appearance. Two evaluations of the
    same configuration with the same seeds (one model evaluated twice) are not replicates: each stands alone."""
    groups: dict[str, list[Evaluated]] = {}
    alone: list[list[Evaluated]] = []
    for e in evaluations:
        members = groups.setdefault(e.configuration.key, [])
        if any(m.configuration.seeds == e.configuration.seeds for m in members):
            alone.append([e])
        else:
            members.append(e)
    found = [g for g in groups.values() if g] + alone
    found.sort(key=lambda g: evaluations.index(g[0]))
    labels = [configuration_label([m.name for m in g]) for g in found]
    if len(set(labels)) != len(labels):
        labels = [f"{label}#{i}" for i, label in enumerate(labels)]
    return [Group(label, tuple(g)) for label, g in zip(labels, found, strict=True)]


def compare(
    paths: Sequence[str],
    iters: int = stats.ITERS,
    seed: int = stats.SEED,
    *,
    adjustment: Adjustment = Adjustment.HOLM,
    unpaired: bool = False,
    metrics: Sequence[str] = (),
    power: float | None = None,
) -> Comparison:
    """Read each evaluation, group replicates, and compare configurations (or models) on every metric."""
    evaluations = [read_evaluation(p) for p in paths]
    labels = [e.label for e in evaluations]
    if len(set(labels)) != len(labels):
        evaluations = [dataclasses.replace(e, label=f"{e.label}#{i}") for i, e in enumerate(evaluations)]
    chosen = _metrics(evaluations, metrics)
    groups = group_replicates(evaluations)
    replicated = any(len(g.members) > 1 for g in groups)
    columns = groups if replicated else [Group(e.label, (e,)) for e in evaluations]
    params = _differing(columns)
    notes: list[str] = []
    configuration_metrics: list[ConfigurationMetric] = []
    differences: list[Difference] = []
    power_rows: list[PowerRow] = []
    if replicated:
        for metric in chosen:
            rows, diffs, spreads = _configuration_level(groups, metric, iters, seed, unpaired)
            configuration_metrics += rows
            differences += diffs
            if power is not None and spreads is not None and _tested(evaluations, metric):
                power_rows.append(_power_row(metric, power, spreads, groups))
        notes += _replicate_notes(groups, configuration_metrics)
    else:
        if power is not None:
            raise EvalDataError(
                "--power needs the seed spread, which one run per configuration does not measure: compare "
                "evaluations of a configuration trained with two or more seeds (marin.experiment.replicate)"
            )
        for a, b in itertools.combinations(evaluations, 2):
            for metric in chosen:
                found = _model_difference(a, b, metric, iters, seed, unpaired)
                if found is not None:
                    differences.append(found)
        if len(evaluations) > 1:
            notes.append(
                "Each column is one trained model: seed variance is unmeasured, so a difference here is "
                "between these two models, not between their configurations (a second seed of either may "
                f"differ as much). To compare configurations, {HOW_TO_ADD_SEEDS}."
            )
    differences = _adjusted(differences, adjustment)
    signal = signal_noise(columns, chosen, configuration_metrics) if len(columns) > 1 else []
    return Comparison(
        evaluations,
        groups,
        params,
        chosen,
        configuration_metrics,
        differences,
        adjustment,
        notes,
        signal,
        power_rows,
    )


def configuration_means(
    groups: Sequence[Group], metric: str, iters: int = stats.ITERS, seed: int = stats.SEED
) -> list[ConfigurationMetric]:
    """Each configuration's mean of `metric` over its seeds, with its interval (seed and item noise)."""
    return _configuration_level(groups, metric, iters, seed, unpaired=False)[0]


def _metrics(evaluations: Sequence[Evaluated], wanted: Sequence[str]) -> list[str]:
    """The metrics to show: those asked for (each checked, with a did-you-mean), else every metric of
    every evaluation, less a single dataset's rows (the same as the micro average)."""
    known = list(dict.fromkeys(m for e in evaluations for m in e.metrics))
    for name in wanted:
        if name not in known:
            raise EvalDataError("--metric: " + unknown("metric", name, known, "these evaluations"))
    if wanted:
        return list(dict.fromkeys(wanted))
    datasets = {m.split("/", 1)[1] for m in known if m.startswith("bpb/")}
    if len(datasets) == 1:
        known = [m for m in known if not (m.startswith(("bpb/", "loss/")) and m.split("/", 1)[1] in datasets)]
    return known


def _differing(columns: Sequence[Group]) -> dict[str, list[Any]]:
    """Parameters whose value differs between columns; a column of replicates shows a value its seeds
    share, and the seeds' values (`0, 1, 2`) for a seed field. The evaluated step's name is left out
    where it is one per seed."""
    keys = list(dict.fromkeys(k for g in columns for m in g.members for k in m.params))
    out = {}
    for key in keys:
        if key == "eval.model.step" and any(len(g.members) > 1 for g in columns):
            continue
        cells = []
        for g in columns:
            values = list(dict.fromkeys(_text(m.params.get(key)) for m in g.members))
            cells.append(g.members[0].params.get(key) if len(values) == 1 else ", ".join(values))
        varies_within = any(len({_text(m.params.get(key)) for m in g.members}) > 1 for g in columns)
        if len({_text(c) for c in cells}) > 1 or (is_seed_field(key) and varies_within):
            out[key] = cells
    return out


def _text(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode() if not isinstance(value, str) else value


def _tested(evaluations: Sequence[Evaluated], metric: str) -> bool:
    first = next((e.metrics[metric] for e in evaluations if metric in e.metrics), None)
    return first is not None and first.aggregation not in _NOT_TESTED


def _aligned(
    group: Group, metric: str, ids: tuple | None
) -> tuple[tuple, np.ndarray, np.ndarray, float] | None:
    """The group's per-item (numerator, denominator) columns of `metric`, (n, S) each, in the order of
    `ids` (the first member's when None); None when a member has no per-item scores of it."""
    scores = [m.items.get(metric) for m in group.members]
    if any(s is None for s in scores):
        return None
    order = ids if ids is not None else scores[0].ids
    for m, s in zip(group.members, scores, strict=True):
        if set(s.ids) != set(order):
            raise EvalDataError(
                f"{m.label} scored other items on {metric!r} than {group.members[0].label}: "
                f"{_unshared(s.ids, order)}; compare evaluations of the same task and data, or pass "
                "--unpaired to compare them as independent samples"
            )
    columns = [s.aligned(order) for s in scores]
    return order, np.stack([c[0] for c in columns], 1), np.stack([c[1] for c in columns], 1), scores[0].scale


def _unshared(a: Sequence, b: Sequence) -> str:
    only_a, only_b = len(set(a) - set(b)), len(set(b) - set(a))
    return f"{only_a} item(s) only in the first, {only_b} only in the second"


def _configuration_level(
    groups: Sequence[Group], metric: str, iters: int, seed: int, unpaired: bool
) -> tuple[list[ConfigurationMetric], list[Difference], list[configurations.Spread] | None]:
    """Each configuration's mean of `metric` and every pair's difference (see `configurations`)."""
    present = [g for g in groups if all(metric in m.metrics for m in g.members)]
    if not present:
        return [], [], None
    tested = present[0].members[0].metrics[metric].aggregation not in _NOT_TESTED
    spreads, items = _spreads(present, metric, iters, seed, unpaired)
    pool = configurations.pooled(spreads)
    rows, used = [], []
    for g, s in zip(present, spreads, strict=True):
        source = "measured" if s.seeds > 1 else ("borrowed" if pool is not None else "unmeasured")
        used_spread = s.borrowing(pool) if s.seeds == 1 and pool is not None else s
        used.append(used_spread)
        estimate = configurations.mean_estimate(used_spread, items)
        values = [_value(m.metrics[metric]) for m in g.members]
        rows.append(
            ConfigurationMetric(
                g.label,
                metric,
                float(estimate.value),
                _finite(estimate.stderr),
                _interval(estimate.ci95),
                _finite(estimate.df),
                len(g.members),
                _finite(np.std(values, ddof=1)) if len(values) > 1 else None,
                items,
                source,
            )
        )
    diffs = []
    if tested:
        paired = not unpaired and used[0].mean_replicates is not None
        test = "two-level t (seeds, items)" if used[0].mean_replicates is not None else "Welch t (seeds)"
        higher = present[0].members[0].metrics[metric].higher_is_better
        for (ga, a), (gb, b) in itertools.combinations(zip(present, used, strict=True), 2):
            estimate = configurations.difference_estimate(a, b, items, paired=paired)
            value = float(estimate.value)
            diffs.append(
                Difference(
                    Kind.CONFIGURATION,
                    metric,
                    ga.label,
                    gb.label,
                    value,
                    _finite(estimate.stderr),
                    _interval(estimate.ci95),
                    items,
                    test,
                    p_value=_finite(estimate.p_value),
                    df=_finite(estimate.df),
                    better=(ga.label if (value > 0) == higher else gb.label),  # kept only where significant
                )
            )
    if len(present) == 1 and len(present[0].members) > 1:
        diffs += _seed_noise(present[0], metric, iters, seed, unpaired)
    return rows, diffs, used


def _spreads(
    groups: Sequence[Group], metric: str, iters: int, seed: int, unpaired: bool
) -> tuple[list[configurations.Spread], int]:
    """Each group's spread of `metric` over its seeds, with item resamples when every member has per-item
    scores: the same draws for every seed and, unless `unpaired`, for every configuration."""
    points = [np.array([_value(m.metrics[metric]) for m in g.members], dtype=np.float64) for g in groups]
    aligned = []
    ids = None
    for g in groups:
        found = _aligned(g, metric, None if unpaired else ids)
        if found is None:
            return [configurations.spread(p) for p in points], _items(groups, metric)
        ids = ids or found[0]
        aligned.append(found)
    if unpaired:
        replicates = [
            _ratio_replicates(a[1], a[2], a[3], iters, seed + i * stats.STRATUM_SEED_STRIDE)
            for i, a in enumerate(aligned)
        ]
    else:
        num = np.concatenate([a[1] for a in aligned], axis=1)
        den = np.concatenate([a[2] for a in aligned], axis=1)
        everything = _ratio_replicates(num, den, aligned[0][3], iters, seed)
        bounds = np.cumsum([0] + [a[1].shape[1] for a in aligned])
        replicates = [everything[:, lo:hi] for lo, hi in itertools.pairwise(bounds)]
    spreads = [configurations.spread(p, r) for p, r in zip(points, replicates, strict=True)]
    return spreads, len(ids)


def _ratio_replicates(num: np.ndarray, den: np.ndarray, scale: float, iters: int, seed: int) -> np.ndarray:
    """(iters, S): each seed's metric under each resample of the items, the same draws for every column."""
    seeds = num.shape[1]
    sums = stats.resampled_sums(np.concatenate([num, den], axis=1), iters, seed)
    with np.errstate(divide="ignore", invalid="ignore"):
        return scale * sums[:, :seeds] / sums[:, seeds:]


def _items(groups: Sequence[Group], metric: str) -> int:
    return min(m.metrics[metric].n for g in groups for m in g.members)


def _seed_noise(group: Group, metric: str, iters: int, seed: int, unpaired: bool) -> list[Difference]:
    """The differences between replicates of one configuration: seed noise, with no test and no better."""
    out = []
    for a, b in itertools.combinations(group.members, 2):
        found = _model_difference(a, b, metric, iters, seed, unpaired)
        if found is not None:
            out.append(
                dataclasses.replace(found, kind=Kind.SEED_NOISE, test="seed noise", p_value=None, better=None)
            )
    return out


def _model_difference(
    a: Evaluated, b: Evaluated, metric: str, iters: int, seed: int, unpaired: bool
) -> Difference | None:
    """a - b of two models on the items they share (paired), or on their own items (`unpaired`)."""
    x, y = a.items.get(metric), b.items.get(metric)
    if x is None or y is None or a.metrics[metric].aggregation in _NOT_TESTED:
        return None
    if unpaired:
        diff = stats.unpaired_difference(x, y, iters, seed)
    elif set(x.ids) != set(y.ids):
        raise EvalDataError(
            f"{a.label} and {b.label} scored different items on {metric!r} ({_unshared(x.ids, y.ids)}): a paired "
            "difference needs the same items; compare evaluations of the same task and data, or pass "
            "--unpaired to compare them as independent samples"
        )
    else:
        diff = stats.paired_difference(x, y, iters, seed)
    value = diff.difference.value
    higher = a.metrics[metric].higher_is_better
    return Difference(
        Kind.MODEL,
        metric,
        a.label,
        b.label,
        float(value),
        diff.difference.stderr,
        diff.difference.ci95,
        diff.difference.n,
        diff.test,
        p_value=diff.p_value,
        better=(a.label if (value > 0) == higher else b.label),
        a_only=diff.a_only,
        b_only=diff.b_only,
    )


def _adjusted(differences: list[Difference], how: Adjustment) -> list[Difference]:
    """Every tested difference's p-value adjusted over the table's tests; `better` kept only where significant."""
    adjusted = adjust([d.p_value if d.p_value is not None else math.nan for d in differences], how)
    out = []
    for d, p in zip(differences, adjusted, strict=True):
        p_adjusted = None if math.isnan(p) else float(p)
        better = d.better if p_adjusted is not None and p_adjusted < ALPHA else None
        out.append(dataclasses.replace(d, p_adjusted=p_adjusted, better=better))
    return out


def _power_row(
    metric: str, delta: float, used: list[configurations.Spread], groups: Sequence[Group]
) -> PowerRow:
    """The seeds and items a difference of `delta` needs, from the spreads the configurations measured."""
    pool = configurations.pooled(used)
    items = _items(groups, metric)
    noise = float(np.nan_to_num(pool.item_noise)) if pool is not None else 0.0
    seed_variance = max(float(pool.seed_variance) - noise, 0.0) if pool is not None else 0.0
    interactions = []
    for a, b in itertools.combinations(used, 2):
        if a.mean_replicates is not None and b.mean_replicates is not None:
            interactions.append(
                float(configurations.item_term(a.mean_replicates, b.mean_replicates, [a, b], True))
            )
    spreads = Spreads(
        math.sqrt(seed_variance),
        math.sqrt(noise * items),
        math.sqrt(np.mean(interactions or [0.0]) * items),
        items,
    )
    seeds = max(2, min(len(g.members) for g in groups))
    return PowerRow(
        metric,
        delta,
        spreads.seed,
        spreads.noise,
        spreads.interaction,
        items,
        seeds,
        spreads.power(delta, seeds),
        spreads.seeds_needed(delta),
        spreads.items_needed(delta, seeds),
    )


def _replicate_notes(groups: Sequence[Group], rows: Sequence[ConfigurationMetric]) -> list[str]:
    notes = []
    for g in groups:
        if len(g.members) > 1:
            notes.append(
                f"{g.label}: {len(g.members)} replicates ({'; '.join(g.seeds)}), recognised from their keys"
            )
    single = [g.label for g in groups if len(g.members) == 1]
    if single and any(r.seed_noise == "borrowed" for r in rows):
        notes.append(
            f"{', '.join(single)} trained once: its seed spread is borrowed from the configurations with "
            "replicates (pooled), assuming it varies as much between seeds as they do"
        )
    if len(groups) == 1:
        notes.append(
            f"These evaluations are replicates of one configuration ({groups[0].label}): their differences are "
            "seed noise, not effects; the interval of the configuration's mean counts it."
        )
    return notes


def flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    """A nested JSON value as `{"a.b.c": leaf}`; an empty object stays a leaf (`lora: {}`: LoRA at its
    defaults is a setting, not nothing)."""
    if isinstance(data, dict) and data:
        out: dict[str, Any] = {}
        for k, v in data.items():
            out.update(flatten(v, f"{prefix}{k}."))
        return out
    if isinstance(data, list) and any(isinstance(v, (dict, list)) for v in data):
        out = {}
        for i, v in enumerate(data):
            out.update(flatten(v, f"{prefix}{i}."))
        return out
    return {prefix.rstrip("."): data}


def _value(metric: MetricResult) -> float:
    return math.nan if metric.value is None else metric.value


def _finite(x: Any) -> float | None:
    value = float(x)
    return value if math.isfinite(value) else None


def _interval(ci: tuple[Any, Any]) -> tuple[float, float] | None:
    lo, hi = _finite(ci[0]), _finite(ci[1])
    return None if lo is None or hi is None else (lo, hi)


def _plain(data: dict[str, Any]) -> dict[str, Any]:
    return orjson.loads(orjson.dumps(data, option=orjson.OPT_SERIALIZE_NUMPY))


def ranked(evaluations: Sequence[Evaluated], metric: str) -> list[Evaluated]:
    """The evaluations that have `metric`, best first by the worse end of its interval (the lower bound
    when higher is better, the upper bound when lower is: `direction.ranking_value`), so a model
    ranks high only when it is good with confidence."""
    have = [e for e in evaluations if metric in e.metrics]
    return sorted(have, key=lambda e: ranking_value(e.metrics[metric], metric), reverse=True)
