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
from typing import Any

import orjson

import storage
from marin.evaluation import differences, stats
from marin.evaluation.comparison import (
    HOW_TO_ADD_SEEDS,
    Comparison,
    ConfigurationMetric,
    Difference,
    Evaluated,
    Group,
    PowerRow,
)
from marin.evaluation.direction import ranking_value
from marin.evaluation.errors import EvalDataError
from marin.evaluation.multiple_testing import Adjustment
from marin.evaluation.replicates import Configuration, configuration_label, configuration_of, is_seed_field
from marin.evaluation.results import RESULTS_FILE, read_items, read_results
from marin.evaluation.signal_noise import signal_noise
from marin.evaluation.suites import unknown
from marin.execution.artifact import read_artifact, read_info
from marin.execution.canonical import NOT_JSON, plain_json_or_none
from marin.execution.states import OutputState


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
    effective_params = plain_json_or_none(_effective_params(effective))  # spelled as keys spell values
    for k, v in flatten(effective_params if effective_params is not NOT_JSON else {}).items():
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
    tested: list[Difference] = []
    power_rows: list[PowerRow] = []
    if replicated:
        for metric in chosen:
            rows, found, spreads = differences.configuration_level(groups, metric, iters, seed, unpaired)
            configuration_metrics += rows
            tested += found
            if power is not None and spreads is not None and differences.tested(evaluations, metric):
                power_rows.append(differences.power_row(metric, power, spreads, groups))
        notes += _replicate_notes(groups, configuration_metrics)
    else:
        if power is not None:
            raise EvalDataError(
                "--power needs the seed spread, which one run per configuration does not measure: compare "
                "evaluations of a configuration trained with two or more seeds (marin.experiment.replicate)"
            )
        for a, b in itertools.combinations(evaluations, 2):
            for metric in chosen:
                one = differences.model_difference(a, b, metric, iters, seed, unpaired)
                if one is not None:
                    tested.append(one)
        if len(evaluations) > 1:
            notes.append(
                "Each column is one trained model: seed variance is unmeasured, so a difference here is "
                "between these two models, not between their configurations (a second seed of either may "
                f"differ as much). To compare configurations, {HOW_TO_ADD_SEEDS}."
            )
    tested = differences.adjusted(tested, adjustment)
    signal = signal_noise(columns, chosen, configuration_metrics) if len(columns) > 1 else []
    return Comparison(
        evaluations,
        groups,
        params,
        chosen,
        configuration_metrics,
        tested,
        adjustment,
        notes,
        signal,
        power_rows,
    )


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
    share, and the seeds' values (`0, 1, 2`) for a seed field. Anything else that varies within a column
    of replicates is a name of its own per seed (the evaluated step, its data's step), and is left out."""
    keys = list(dict.fromkeys(k for g in columns for m in g.members for k in m.params))
    out = {}
    for key in keys:
        varies_within = any(len({_text(m.params.get(key)) for m in g.members}) > 1 for g in columns)
        if varies_within and not is_seed_field(key):
            continue
        cells = []
        for g in columns:
            values = list(dict.fromkeys(_text(m.params.get(key)) for m in g.members))
            cells.append(g.members[0].params.get(key) if len(values) == 1 else ", ".join(values))
        if len({_text(c) for c in cells}) > 1 or varies_within:
            out[key] = cells
    return out


def _text(value: Any) -> str:
    """One spelling per value (`1.0` and `1` alike, as keys spell them), to tell what differs."""
    if isinstance(value, str):
        return value
    canonical = plain_json_or_none(value)
    return orjson.dumps(value if canonical is NOT_JSON else canonical, option=orjson.OPT_SORT_KEYS).decode()


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


def ranked(evaluations: Sequence[Evaluated], metric: str) -> list[Evaluated]:
    """The evaluations that have `metric`, best first by the worse end of its interval (the lower bound
    when higher is better, the upper bound when lower is: `direction.ranking_value`), so a model
    ranks high only when it is good with confidence."""
    have = [e for e in evaluations if metric in e.metrics]
    return sorted(have, key=lambda e: ranking_value(e.metrics[metric], metric), reverse=True)
