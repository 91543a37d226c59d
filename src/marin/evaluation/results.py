"""The typed result of an evaluation: what `results.json` and `items.json` hold, for every writer and reader.

One schema, written by the evaluation step (and by each checkpoint of a curve) and read by `marin
compare`, the sweep report, the checkpoint curves, Marina and `marin status`, so that no reader walks
the JSON by hand and none can miss a kind of metric. The parts:

- `MetricResult`: one number with its uncertainty (`value`, `stderr`, `ci95`, `n`, as
  `stats.Metric` writes them) and what it means: its `direction` (which way is better) and its
  `aggregation` (how per-item scores become the number: a mean, a ratio of sums, the exp of one, a
  mean over strata). A metric knows these from its writer, so no reader guesses from its name.
- `EvaluationResults` (`results.json`): perplexity per dataset and domain with micro and macro
  averages, harness tasks with their settings, a suite's aggregate, exact match, samples, the
  checkpoint curves; `flat_metrics()` names every metric once:

  | flat name | what |
  |---|---|
  | `bpb`, `loss` | micro averages over every document |
  | `bpb/<dataset>`, `loss/<dataset>` | one dataset |
  | `<task>/<metric>` | a harness task's metric (`marin_story_endings/acc`) |
  | `<suite>/<metric>` | a suite's aggregate (`core/centred_accuracy`) |
  | `<task>/exact_match`, `<task>/<kind>/exact_match` | exact match, overall and per kind |

- `Contamination`: each dataset's and task's metrics on all, clean and contaminated items, named
  `<flat name>/clean` and `<flat name>/contaminated` (`bpb/stories/clean`);
- `EvaluationItems` (`items.json`): the per-item scores behind the pairable metrics; `scores()`
  gives them by the same flat names as `stats.ItemScores`, which paired and replicated comparisons use.

To add a kind of result: add a field (a Struct with `MetricResult`s) to `EvaluationResults`, name its
metrics in `flat_metrics()`, and, if its items can be paired, add them to `EvaluationItems.scores()`.
Unknown fields are ignored when reading, so a reader never fails on a newer writer's extra section.
"""

from __future__ import annotations

import math
from enum import StrEnum
from typing import Any

import msgspec

import storage
from marin.evaluation import stats
from marin.evaluation.direction import higher_is_better
from marin.evaluation.errors import EvalDataError

RESULTS_FILE = "results.json"
ITEMS_FILE = "items.json"


class Direction(StrEnum):
    """Which way a metric is better."""

    HIGHER = "higher"
    LOWER = "lower"


class Aggregation(StrEnum):
    """How per-item scores become a metric's value (and so how a comparison resamples them)."""

    MEAN = "mean"  # the mean of per-item scores (an accuracy when they are 0 or 1)
    RATIO = "ratio"  # sum of per-item numerators over the sum of denominators (nats per token, bits per byte)
    EXP_RATIO = "exp_ratio"  # exp of a ratio (perplexity = exp(loss))
    EXP_MEAN = "exp_mean"  # exp of a mean (the harness's per-item perplexity)
    MACRO = "macro"  # the plain mean of strata's values (datasets, domains, tasks)
    CENTRED_MACRO = "centred_macro"  # the mean over tasks of (acc - chance) / (1 - chance): DCLM's CORE


class MetricResult(msgspec.Struct, frozen=True, kw_only=True):
    """A number with its uncertainty (`stats.Metric`'s fields) and what it means: direction and aggregation."""

    value: float | None
    stderr: float | None = None
    ci95: tuple[float | None, float | None] | None = None
    n: int = 0
    direction: Direction
    aggregation: Aggregation

    @classmethod
    def of(cls, metric: stats.Metric, direction: Direction, aggregation: Aggregation) -> MetricResult:
        """The result of a `stats.Metric` (NaN written as None, as `Metric.to_json` does)."""
        data = metric.to_json()
        return cls(
            value=data["value"],
            stderr=data["stderr"],
            ci95=None if data["ci95"] is None else tuple(data["ci95"]),
            n=data["n"],
            direction=direction,
            aggregation=aggregation,
        )

    @classmethod
    def named(cls, metric: stats.Metric, name: str, aggregation: Aggregation) -> MetricResult:
        """The result of a `stats.Metric` whose direction its name says (`direction.higher_is_better`)."""
        return cls.of(metric, direction_of(name), aggregation)

    @property
    def higher_is_better(self) -> bool:
        return self.direction == Direction.HIGHER

    def stats_metric(self) -> stats.Metric:
        """The plain `stats.Metric` (None as NaN)."""
        return stats.Metric.from_json(self.to_json())

    def to_json(self) -> dict[str, Any]:
        return msgspec.to_builtins(self)


def direction_of(name: str) -> Direction:
    """The direction a metric's name implies (see `marin.evaluation.direction`)."""
    return Direction.HIGHER if higher_is_better(name) else Direction.LOWER


class PerplexityScores(msgspec.Struct, frozen=True, kw_only=True):
    """Loss (nats per token), perplexity and bits per byte of a group of documents, and its sizes."""

    loss: MetricResult
    perplexity: MetricResult
    bpb: MetricResult
    documents: int | None = None
    tokens: int | None = None
    bytes: int | None = None


class PerplexityAverages(msgspec.Struct, frozen=True, kw_only=True):
    """Plain means over datasets and over domains."""

    datasets: PerplexityScores | None = None
    domains: PerplexityScores | None = None


class Perplexity(msgspec.Struct, frozen=True, kw_only=True):
    """Per dataset and domain, the micro average of every document, and the macro averages."""

    datasets: dict[str, PerplexityScores]
    domains: dict[str, PerplexityScores]
    micro: PerplexityScores
    macro: PerplexityAverages

    @classmethod
    def of(cls, summary: dict[str, Any]) -> Perplexity:
        """From `perplexity.summarize`'s metric objects: ratios, perplexity the exp of loss's, macro means."""

        def scores(group: dict[str, Any], macro: bool = False) -> PerplexityScores | None:
            if not group:
                return None
            kind = {"loss": Aggregation.RATIO, "perplexity": Aggregation.EXP_RATIO, "bpb": Aggregation.RATIO}
            metrics = {
                name: MetricResult.of(
                    stats.Metric.from_json(group[name]),
                    Direction.LOWER,
                    Aggregation.MACRO if macro else kind[name],
                )
                for name in kind
            }
            sizes = {k: group.get(k) for k in ("documents", "tokens", "bytes")}
            return PerplexityScores(**metrics, **sizes)

        macro = summary.get("macro") or {}
        return cls(
            datasets={k: scores(v) for k, v in summary["datasets"].items()},
            domains={k: scores(v) for k, v in summary["domains"].items()},
            micro=scores(summary["micro"]),
            macro=PerplexityAverages(
                datasets=scores(macro.get("datasets"), True), domains=scores(macro.get("domains"), True)
            ),
        )


class TaskSettings(msgspec.Struct, frozen=True, kw_only=True):
    """How a harness task was run: its harness task, shots, format, the metric a suite reads, chance."""

    harness_task: str
    shots: int | None = None
    format: str | None = None
    metric: str | None = None
    chance: float | None = None
    dataset: str | None = None
    n: int = 0


class SuiteResult(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A suite's one number (by its aggregate: CORE's centred accuracy, MMLU's accuracy, Paloma's bpb)."""

    name: str
    aggregate: str
    tasks: list[str]
    centred_accuracy: MetricResult | None = None
    acc: MetricResult | None = None
    bits_per_byte: MetricResult | None = None
    macro_bits_per_byte: MetricResult | None = None

    def metrics(self) -> dict[str, MetricResult]:
        """Its metrics by their field names."""
        names = ("centred_accuracy", "acc", "bits_per_byte", "macro_bits_per_byte")
        return {k: getattr(self, k) for k in names if getattr(self, k) is not None}


class ExactMatchResult(msgspec.Struct, frozen=True, kw_only=True):
    """Exact match of greedy replies: overall, per kind of question, and where each item's record is."""

    task: str
    exact_match: MetricResult
    by_kind: dict[str, MetricResult] = {}
    items_path: str | None = None


class ModelRecord(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """The model scored: its kind (step, folder, hub), location, revision and label, and, for a step
    declared by a handle, its effective config: `{"architecture", "model": {every field of its
    architecture's config, defaults included}, "lora": {...}}` (`lora` only when it trains adapters)."""

    kind: str
    location: str
    revision: str | None = None
    label: str = ""
    config: dict[str, Any] | None = None


class CurvePoint(MetricResult, frozen=True, kw_only=True):
    """A metric at one checkpoint of a training run: its step, the tokens trained on by then."""

    step: int
    tokens: int | None = None


class CheckpointPoint(msgspec.Struct, frozen=True, kw_only=True):
    """Where one checkpoint's own results are, relative to the evaluation's output."""

    step: int
    tokens: int | None = None
    results: str


class Checkpoints(msgspec.Struct, frozen=True, kw_only=True):
    """The checkpoints scored, where each one's results are, and every flat metric's curve over them."""

    steps: list[int]
    points: list[CheckpointPoint]
    curves: dict[str, list[CurvePoint]]


class SubsetMetrics(msgspec.Struct, frozen=True, kw_only=True):
    """One metric on all items, on the clean ones and on the contaminated ones, and the differences
    all - clean and contaminated - clean (paired: one bootstrap draw gives every subset's replicate)."""

    all: MetricResult
    clean: MetricResult
    contaminated: MetricResult
    all_minus_clean: MetricResult
    contaminated_minus_clean: MetricResult
    p_value: float | None = None  # contaminated - clean, two-sided


class ContaminationGroup(msgspec.Struct, frozen=True, kw_only=True):
    """A dataset's or a task's items: how many, how many the training data contains, how many are too
    short to check (fewer tokens than an n-gram), and each metric on the subsets."""

    items: int
    contaminated: int
    unchecked: int = 0
    metrics: dict[str, SubsetMetrics] = {}


class Contamination(msgspec.Struct, frozen=True, kw_only=True):
    """Which scored items the model saw in training (`marin.evaluation.contamination`), and the scores
    on all items beside those on the clean ones."""

    ngram: int
    min_overlap: float
    lineage: list[str]
    training_tokens: int = 0
    perplexity: dict[str, ContaminationGroup] = {}  # by dataset; metric "bpb"
    harness: dict[str, ContaminationGroup] = {}  # by task; its metrics

    def flat_metrics(self) -> dict[str, MetricResult]:
        """`bpb/<dataset>/clean`, `<task>/<metric>/clean` and their `/contaminated` twins."""
        out: dict[str, MetricResult] = {}
        for prefix, groups in (("bpb/", self.perplexity), ("", self.harness)):
            for name, group in groups.items():
                for metric, subsets in group.metrics.items():
                    base = f"{prefix}{name}" if prefix else f"{name}/{metric}"
                    out[f"{base}/clean"] = subsets.clean
                    out[f"{base}/contaminated"] = subsets.contaminated
        return out


class ScoreCacheCounts(msgspec.Struct, frozen=True, kw_only=True):
    """Where the scores of one run came from (`marin.evaluation.score_cache`): scored by this run, kept
    from an interrupted attempt of the step, or taken from an earlier output of the same step."""

    folder: str
    computed: int
    resumed: int
    imported: int


class Bootstrap(msgspec.Struct, frozen=True):
    """The resampling behind every interval."""

    iters: int
    seed: int


class EvaluationResults(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """`results.json`: every metric an evaluation computed, with what it was computed on.

    A checkpoint's own results (`checkpoints/step-N/results.json`) are the same record without
    `model`, `bootstrap`, `config` and `checkpoints`.
    """

    model: ModelRecord | None = None
    hf_path: str | None = None
    max_length: int | None = None
    perplexity: Perplexity | None = None
    harness: dict[str, dict[str, MetricResult]] = {}
    tasks: dict[str, TaskSettings] = {}
    harness_samples: dict[str, str] = {}
    suite: SuiteResult | None = None
    exact_match: ExactMatchResult | None = None
    samples: list[dict[str, Any]] = []
    bootstrap: Bootstrap | None = None
    config: dict[str, Any] | None = None
    checkpoints: Checkpoints | None = None
    items: str | None = None
    documents: str | None = None  # per-document scores (`document_scores`), for a perplexity evaluation
    contamination: Contamination | None = None
    score_cache: ScoreCacheCounts | None = None

    def flat_metrics(self) -> dict[str, MetricResult]:
        """Every metric by one flat name (see the module docstring), in a fixed order: the suite's, the
        perplexity averages, each dataset's, each harness task's, exact match."""
        out: dict[str, MetricResult] = {}
        if self.suite is not None:
            out.update({f"{self.suite.name}/{k}": m for k, m in self.suite.metrics().items()})
        if self.perplexity is not None:
            out["bpb"], out["loss"] = self.perplexity.micro.bpb, self.perplexity.micro.loss
            for dataset, scores in self.perplexity.datasets.items():
                out[f"bpb/{dataset}"] = scores.bpb
            for dataset, scores in self.perplexity.datasets.items():
                out[f"loss/{dataset}"] = scores.loss
        for task, metrics in self.harness.items():
            out.update({f"{task}/{name}": m for name, m in metrics.items()})
        if self.exact_match is not None:
            task = self.exact_match.task
            out[f"{task}/exact_match"] = self.exact_match.exact_match
            out.update({f"{task}/{kind}/exact_match": m for kind, m in self.exact_match.by_kind.items()})
        if self.contamination is not None:
            out.update(self.contamination.flat_metrics())
        return out

    def curve_points(self, step: int, tokens: int | None) -> dict[str, CurvePoint]:
        """This checkpoint's results as one point of each flat metric's curve."""
        return {
            name: CurvePoint(**msgspec.structs.asdict(metric), step=step, tokens=tokens)
            for name, metric in self.flat_metrics().items()
        }

    def chance(self, flat_name: str) -> float | None:
        """What a random guesser scores on a flat metric, where the task records it (its suite metric)."""
        task, _, metric = flat_name.rpartition("/")
        settings = self.tasks.get(task)
        if settings is None or settings.chance is None:
            return None
        return settings.chance if metric in ("acc", "acc_norm", settings.metric) else None

    def to_bytes(self) -> bytes:
        """The record as `results.json` holds it: JSON indented by two spaces."""
        return msgspec.json.format(_ENCODER.encode(self), indent=2)


class ItemRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One metric's per-item scores: ids (index and content digest), values, weights (a ratio's
    denominators, or None), scale, and the harness aggregation they were aggregated with."""

    ids: list[str]
    values: list[float]
    weights: list[float] | None = None
    scale: float = 1.0
    transform: str = "mean"


class DocumentItems(msgspec.Struct, frozen=True, kw_only=True):
    """Per document of one dataset: its id, nll (nats), tokens and bytes."""

    ids: list[str]
    nll: list[float]
    tokens: list[int]
    bytes: list[int]


class ContaminationItems(msgspec.Struct, frozen=True, kw_only=True):
    """Per item of a dataset or task: its id, the share of its n-grams found in training, how many
    n-grams it has, and whether it counts as contaminated."""

    ids: list[str]
    overlap: list[float]
    ngrams: list[int]
    flagged: list[bool]


_NOT_PAIRED = ("perplexity", "weighted_perplexity")  # exp of a ratio or mean: compared through bpb or loss


class EvaluationItems(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """`items.json`: the per-item scores behind the metrics that two evaluations of the same items pair."""

    perplexity: dict[str, DocumentItems] = {}
    harness: dict[str, dict[str, ItemRecord]] = {}
    exact_match: dict[str, ItemRecord] = {}
    contamination: dict[str, ContaminationItems] = {}  # "perplexity/<dataset>", "harness/<task>"

    def scores(self) -> dict[str, stats.ItemScores]:
        """The per-item scores behind each pairable metric, by the names `EvaluationResults.flat_metrics` uses."""
        out: dict[str, stats.ItemScores] = {}
        bits = 1 / math.log(2)
        for dataset, d in self.perplexity.items():
            out[f"bpb/{dataset}"] = stats.ItemScores(d.ids, d.nll, d.bytes, bits)
            out[f"loss/{dataset}"] = stats.ItemScores(d.ids, d.nll, d.tokens)
        if self.perplexity:
            docs = self.perplexity
            ids = [f"{name}/{i}" for name, d in docs.items() for i in d.ids]
            nll = [x for d in docs.values() for x in d.nll]
            out["bpb"] = stats.ItemScores(ids, nll, [x for d in docs.values() for x in d.bytes], bits)
            out["loss"] = stats.ItemScores(ids, nll, [x for d in docs.values() for x in d.tokens])
        for task, metrics in self.harness.items():
            for name, m in metrics.items():
                if m.transform in _NOT_PAIRED or name.endswith("perplexity"):
                    continue
                out[f"{task}/{name}"] = stats.ItemScores(m.ids, m.values, m.weights, m.scale)
        for task, m in self.exact_match.items():
            out[f"{task}/exact_match"] = stats.ItemScores(m.ids, m.values)
        for name, flags in self.contamination.items():
            kind, _, what = name.partition("/")
            clean = {i for i, flagged in zip(flags.ids, flags.flagged, strict=True) if not flagged}
            bases = [f"bpb/{what}"] if kind == "perplexity" else [k for k in out if k.startswith(f"{what}/")]
            for base in bases:
                if base in out and "/" in base:
                    out[f"{base}/clean"] = _subset(out[base], clean)
        return out

    def to_bytes(self) -> bytes:
        return _ENCODER.encode(self)


def _subset(scores: stats.ItemScores, ids: set[str]) -> stats.ItemScores:
    """The items of `scores` whose id is in `ids`."""
    keep = [i for i, item in enumerate(scores.ids) if item in ids]
    return stats.ItemScores(
        [scores.ids[i] for i in keep],
        scores.values[keep],
        None if scores.weights is None else scores.weights[keep],
        scores.scale,
    )


_ENCODER = msgspec.json.Encoder()
_RESULTS = msgspec.json.Decoder(EvaluationResults)
_ITEMS = msgspec.json.Decoder(EvaluationItems)


def decode_results(data: bytes | str, where: str = RESULTS_FILE) -> EvaluationResults:
    """Parse `results.json`; EvalDataError naming `where` when it is not one."""
    try:
        return _RESULTS.decode(data)
    except msgspec.DecodeError as e:  # ValidationError is a DecodeError
        raise EvalDataError(f"{where}: not an evaluation's results ({e}); rerun the evaluation") from None


def read_results(output_path: str) -> EvaluationResults:
    """The `results.json` of an evaluation's output folder (or of one of its checkpoints)."""
    where = storage.join(output_path, RESULTS_FILE)
    raw = storage.read_bytes(where)
    if raw is None:
        raise EvalDataError(f"{output_path} has no {RESULTS_FILE}: is it an evaluation's output?")
    return decode_results(raw, where)


def decode_items(data: bytes | str, where: str = ITEMS_FILE) -> EvaluationItems:
    """Parse `items.json`; EvalDataError naming `where` when it is not one."""
    try:
        return _ITEMS.decode(data)
    except msgspec.DecodeError as e:
        raise EvalDataError(
            f"{where}: not an evaluation's per-item scores ({e}); rerun the evaluation"
        ) from None


def read_items(output_path: str) -> EvaluationItems:
    """The `items.json` of an evaluation's output folder; empty when it has none."""
    where = storage.join(output_path, ITEMS_FILE)
    raw = storage.read_bytes(where)
    return EvaluationItems() if raw is None else decode_items(raw, where)
