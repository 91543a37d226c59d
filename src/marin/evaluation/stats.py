"""Uncertainty of evaluation numbers: the metric object, intervals, and paired differences.

Every number an evaluation reports is a `Metric`, written to JSON as
`{"value": v, "stderr": s, "ci95": [lo, hi], "n": n}` (n: the items or documents it rests on).
How each kind of number gets its interval:

- an accuracy (items scored 0 or 1): the Wilson score interval; `stderr` is lm-eval-harness's
  `mean_stderr`, the sample standard deviation over sqrt(n), so it equals the harness's own;
- a ratio of sums over documents (loss = nll / tokens, bits-per-byte = nll / ln 2 / bytes) or a
  plain mean: a bootstrap over documents, `stderr` the standard deviation of the replicates and
  `ci95` their 2.5th and 97.5th percentiles; a quantity derived by a monotone map (perplexity =
  exp(loss)) takes the mapped replicates, so its interval is the map of its source's;
- micro and macro averages over several datasets: a stratified bootstrap, each dataset resampled
  on its own, so each keeps its size in every replicate;
- a difference between two evaluations of the same items (`paired_difference`): a paired bootstrap
  (both resampled with the same draws), and for two accuracies McNemar's exact test on the
  discordant items.

The bootstrap is seeded and vectorised. Resample `r` of chunk `c` (chunks of 1,000) draws its
indices exactly as `random.Random(seed + c).choices(range(n), k=n)` would, which is how
lm-eval-harness's `bootstrap_stderr` draws them: with `seed=0` our replicates of a harness statistic
are the harness's own, computed at numpy speed.

The parts: `Metric` (and `is_metric` for JSON); `accuracy`, `mean`, `wilson_interval`;
`Estimate` (a value with its replicates: `.metric()`, `.map(f)`) from `ratio_estimate` /
`mean_estimate`; `resample_indices` and `resampled_sums` for any statistic of column sums;
`stratified_sums`, `pooled_and_mean` (micro and macro) and `centred_accuracy_mean` (DCLM's CORE);
`ItemScores`, `paired_difference` (and `unpaired_difference`, for different items) -> `Difference`.
Differences between configurations trained with several seeds are `marin.evaluation.configurations`'.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from marin.evaluation.errors import EvalDataError

ITERS = 1000  # bootstrap resamples by default
SEED = 0
CHUNK = 1000  # resamples per seeded chunk, as lm-eval-harness's bootstrap_stderr draws them
Z95 = 1.959963984540054  # the standard normal's 97.5th percentile
STRATUM_SEED_STRIDE = 100_003  # stratum s draws from seeds seed + s * stride + chunk: never overlapping
_BLOCK_VALUES = 1 << 22  # random draws held at once while resampling
_KEPT_COUNTS = 1 << 21  # resample counts kept for the next statistic of the same items (16 MB, two kept)


@dataclass(frozen=True)
class Metric:
    """A number with its uncertainty: value, standard error, 95% interval and the count it rests on.

    `stderr` and `ci95` are None when no uncertainty can be given (fewer than two items).
    """

    value: float
    stderr: float | None
    ci95: tuple[float, float] | None
    n: int

    def to_json(self) -> dict[str, Any]:
        """`{"value", "stderr", "ci95": [lo, hi], "n"}`, floats as plain Python floats (NaN as None)."""
        return {
            "value": _plain(self.value),
            "stderr": _plain(self.stderr),
            "ci95": None if self.ci95 is None else [_plain(self.ci95[0]), _plain(self.ci95[1])],
            "n": int(self.n),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Metric:
        """The metric a `to_json` dict describes."""
        ci = data.get("ci95")
        return cls(
            _number(data.get("value")),
            None if data.get("stderr") is None else float(data["stderr"]),
            None if ci is None else (_number(ci[0]), _number(ci[1])),
            int(data.get("n") or 0),
        )


def is_metric(data: Any) -> bool:
    """Whether `data` is a metric object as written to JSON (has value, stderr, ci95 and n)."""
    return isinstance(data, Mapping) and {"value", "stderr", "ci95", "n"} <= data.keys()


def _plain(x: float | None) -> float | None:
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def _number(x: Any) -> float:
    return float("nan") if x is None else float(x)


# --- accuracies ---------------------------------------------------------------------------------


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion (statsmodels' `proportion_confint(method="wilson")`)."""
    if n <= 0:
        return (float("nan"), float("nan"))
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    lo, hi = centre - half, centre + half
    # At 0/n and n/n the interval touches the bound exactly; keep rounding from leaving [0, 1].
    return (0.0 if successes == 0 else max(0.0, lo), 1.0 if successes == n else min(1.0, hi))


def harness_mean_stderr(values: np.ndarray) -> float | None:
    """lm-eval-harness's `mean_stderr`: the sample standard deviation (n - 1) over sqrt(n)."""
    n = len(values)
    if n < 2:
        return None
    return float(np.std(values, ddof=1) / math.sqrt(n))


def accuracy(correct: Sequence[float] | np.ndarray) -> Metric:
    """The mean of per-item scores in {0, 1}: Wilson interval, the harness's stderr."""
    values = np.asarray(correct, dtype=np.float64)
    n = len(values)
    if n == 0:
        return Metric(float("nan"), None, None, 0)
    if not np.all((values == 0) | (values == 1)):
        raise EvalDataError("accuracy() takes per-item scores of 0 or 1; use mean() for partial credit")
    successes = int(values.sum())
    return Metric(successes / n, harness_mean_stderr(values), wilson_interval(successes, n), n)


# --- the bootstrap ------------------------------------------------------------------------------


def _seed_words(seed: int) -> list[int]:
    """`seed` as the 32-bit words CPython's `random.seed(int)` feeds MT19937's init_by_array."""
    seed = abs(int(seed))
    words = []
    while True:
        words.append(seed & 0xFFFFFFFF)
        seed >>= 32
        if not seed:
            return words


def resample_indices(n: int, iters: int = ITERS, seed: int = SEED):
    """Blocks of bootstrap index rows, `(rows, n)` int arrays, `iters` rows in all, in order.

    Row r of chunk c holds `random.Random(seed + c).choices(range(n), k=n)` for its place r in the
    chunk (chunks of `CHUNK` rows): numpy's legacy MT19937 seeded with the same words, and its
    53-bit doubles, are CPython's.
    """
    for chunk_start in range(0, iters, CHUNK):
        rows_in_chunk = min(CHUNK, iters - chunk_start)
        state = np.random.RandomState(_seed_words(seed + chunk_start // CHUNK))
        block = max(1, min(rows_in_chunk, _BLOCK_VALUES // max(n, 1)))
        for start in range(0, rows_in_chunk, block):
            rows = min(block, rows_in_chunk - start)
            yield np.floor(state.random_sample((rows, n)) * n).astype(np.intp)


def resampled_sums(columns: np.ndarray, iters: int = ITERS, seed: int = SEED) -> np.ndarray:
    """Column sums of each bootstrap resample of the rows of `columns` (n, k): an (iters, k) array.

    Any statistic that is a function of column sums (a mean, a ratio of sums, a difference of
    either) is then a vectorised function of these replicates.
    """
    columns = np.asarray(columns, dtype=np.float64)
    if columns.ndim == 1:
        columns = columns[:, None]
    n = columns.shape[0]
    out = np.empty((iters, columns.shape[1]))
    row = 0
    for counts in _resample_counts(n, iters, seed):
        rows = counts.shape[0]
        out[row : row + rows] = counts @ columns
        row += rows
    return out


def _resample_counts(n: int, iters: int, seed: int) -> Iterator[np.ndarray]:
    """Blocks of `(rows, n)` counts: how often each resample draws each row. Every metric of one set of
    items (a task's accuracies, the documents' loss and bits per byte, each metric `marin compare`
    resamples) draws the same resamples, so small ones are drawn once and kept."""
    if n * iters <= _KEPT_COUNTS:
        return iter(_kept_counts(n, iters, seed))
    return (_counts(idx) for idx in resample_indices(n, iters, seed))


@functools.lru_cache(maxsize=2)
def _kept_counts(n: int, iters: int, seed: int) -> tuple[np.ndarray, ...]:
    blocks = tuple(_counts(idx) for idx in resample_indices(n, iters, seed))
    for block in blocks:
        block.flags.writeable = False  # shared by every later caller
    return blocks


def _counts(idx: np.ndarray) -> np.ndarray:
    rows, n = idx.shape
    flat = (idx + (np.arange(rows) * n)[:, None]).ravel()
    return np.bincount(flat, minlength=rows * n).reshape(rows, n).astype(np.float64)


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its bootstrap replicates; `.metric()` summarises, `.map(f)` derives."""

    value: float
    replicates: np.ndarray
    n: int

    def metric(self) -> Metric:
        """Standard deviation of the replicates (as the harness's bootstrap_stderr) and their 95% percentiles."""
        finite = self.replicates[np.isfinite(self.replicates)]
        if self.n < 2 or len(finite) < 2:
            return Metric(self.value, None, None, self.n)
        # Order statistics, not interpolations between them: a monotone map of the replicates then
        # maps the interval's ends exactly (perplexity's interval is exp of loss's).
        lo, hi = np.percentile(finite, [2.5, 97.5], method="inverted_cdf")
        return Metric(self.value, float(np.std(finite, ddof=1)), (float(lo), float(hi)), self.n)

    def map(self, f: Callable[[Any], Any]) -> Estimate:
        """The estimate of f(quantity), for a monotone `f` applied to the value and every replicate."""
        with np.errstate(over="ignore", invalid="ignore"):
            return Estimate(float(f(self.value)), f(self.replicates), self.n)


def _ratio(num: float, den: float) -> float:
    return num / den if den else float("nan")


def ratio_estimate(
    numerators: Sequence[float] | np.ndarray,
    denominators: Sequence[float] | np.ndarray,
    scale: float = 1.0,
    iters: int = ITERS,
    seed: int = SEED,
) -> Estimate:
    """scale * sum(numerators) / sum(denominators), resampling the (numerator, denominator) pairs."""
    num = np.asarray(numerators, dtype=np.float64)
    den = np.asarray(denominators, dtype=np.float64)
    value = float(scale * _ratio(float(num.sum()), float(den.sum())))
    if len(num) == 0:
        return Estimate(value, np.empty(0), 0)
    sums = resampled_sums(np.stack([num, den], axis=1), iters, seed)
    with np.errstate(divide="ignore", invalid="ignore"):
        return Estimate(value, scale * sums[:, 0] / sums[:, 1], len(num))


def mean_estimate(values: Sequence[float] | np.ndarray, iters: int = ITERS, seed: int = SEED) -> Estimate:
    """The mean of per-item values, bootstrapped over items."""
    values = np.asarray(values, dtype=np.float64)
    return ratio_estimate(values, np.ones_like(values), 1.0, iters, seed)


def mean(values: Sequence[float] | np.ndarray, iters: int = ITERS, seed: int = SEED) -> Metric:
    """The mean of per-item values with a bootstrap interval; the stderr is the harness's `mean_stderr`."""
    values = np.asarray(values, dtype=np.float64)
    estimate = mean_estimate(values, iters, seed).metric()
    return Metric(estimate.value, harness_mean_stderr(values), estimate.ci95, estimate.n)


@dataclass(frozen=True)
class Stratum:
    """One stratum of a stratified bootstrap: per-document numerators and denominators of a ratio."""

    numerators: np.ndarray
    denominators: np.ndarray


def stratified_sums(strata: Sequence[np.ndarray], iters: int = ITERS, seed: int = SEED) -> list[np.ndarray]:
    """Per stratum (an (n_s, k) array of per-item columns), the column sums of each of its resamples.

    Each stratum is resampled on its own, from seeds `seed + s * STRATUM_SEED_STRIDE` onwards, so
    stratum 0 draws what an unstratified bootstrap of it alone would.
    """
    return [
        resampled_sums(columns, iters, seed + i * STRATUM_SEED_STRIDE) for i, columns in enumerate(strata)
    ]


def pooled_and_mean(
    strata: Sequence[Stratum], scale: float = 1.0, iters: int = ITERS, seed: int = SEED
) -> tuple[list[Estimate], Estimate, Estimate]:
    """Each stratum's ratio, the micro (pooled) ratio over all, and the macro (plain mean of strata's).

    One stratified resampling serves all three, so their intervals come from the same draws.
    """
    sums = stratified_sums([np.stack([s.numerators, s.denominators], axis=1) for s in strata], iters, seed)
    each = []
    with np.errstate(divide="ignore", invalid="ignore"):
        for s, resampled in zip(strata, sums, strict=True):
            value = float(scale * _ratio(float(s.numerators.sum()), float(s.denominators.sum())))
            each.append(Estimate(value, scale * resampled[:, 0] / resampled[:, 1], len(s.numerators)))
        total = sum(sums)
        n = sum(len(s.numerators) for s in strata)
        num = sum(float(s.numerators.sum()) for s in strata)
        den = sum(float(s.denominators.sum()) for s in strata)
        micro = Estimate(float(scale * _ratio(num, den)), scale * total[:, 0] / total[:, 1], n)
        macro = Estimate(
            float(np.mean([e.value for e in each])), np.mean([e.replicates for e in each], axis=0), n
        )
    return each, micro, macro


def centred_accuracy_mean(
    tasks: Sequence[tuple[np.ndarray, float]], iters: int = ITERS, seed: int = SEED
) -> Metric:
    """Mean over tasks of (acc - chance) / (1 - chance), as DCLM's CORE reports it; stratified by task.

    `tasks` holds each task's per-item 0/1 scores and its random-chance accuracy.
    """
    if not tasks:
        return Metric(float("nan"), None, None, 0)
    sums = stratified_sums([np.asarray(c, dtype=np.float64)[:, None] for c, _ in tasks], iters, seed)
    values, replicates = [], []
    for (correct, chance), resampled in zip(tasks, sums, strict=True):
        values.append((float(np.mean(correct)) - chance) / (1 - chance))
        replicates.append((resampled[:, 0] / len(correct) - chance) / (1 - chance))
    return Estimate(
        float(np.mean(values)), np.mean(replicates, axis=0), sum(len(c) for c, _ in tasks)
    ).metric()


# --- paired differences -------------------------------------------------------------------------


@dataclass(frozen=True)
class ItemScores:
    """Per-item scores of one evaluation: item ids, numerators and (for ratios) denominators.

    An accuracy has 0/1 `values` and no `weights`; a ratio metric such as bits-per-byte has each
    document's nll in `values` and its bytes in `weights` (and `scale` 1 / ln 2).
    """

    ids: tuple[Any, ...]
    values: np.ndarray
    weights: np.ndarray | None = None
    scale: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "ids", tuple(self.ids))
        object.__setattr__(self, "values", np.asarray(self.values, dtype=np.float64))
        if self.weights is not None:
            object.__setattr__(self, "weights", np.asarray(self.weights, dtype=np.float64))
        if len(self.ids) != len(self.values) or (
            self.weights is not None and len(self.weights) != len(self.ids)
        ):
            raise EvalDataError("ItemScores: ids, values and weights must have one entry per item")
        if len(set(self.ids)) != len(self.ids):
            raise EvalDataError("ItemScores: item ids must be unique")

    @property
    def binary(self) -> bool:
        return self.weights is None and bool(np.all((self.values == 0) | (self.values == 1)))

    def aligned(self, ids: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
        """(numerators, denominators) in the order of `ids`."""
        where = {item: i for i, item in enumerate(self.ids)}
        order = np.array([where[item] for item in ids], dtype=np.intp)
        weights = self.weights if self.weights is not None else np.ones(len(self.ids))
        return self.values[order], weights[order]


@dataclass(frozen=True)
class Difference:
    """a - b on the same items: the difference, its paired interval, a two-sided p-value and the test."""

    difference: Metric
    p_value: float
    test: str  # "mcnemar" (exact, on discordant items) or "paired bootstrap"
    a_only: int | None = None  # items only a got right (accuracy)
    b_only: int | None = None

    @property
    def significant(self) -> bool:
        """Whether the 95% interval of the difference excludes 0."""
        ci = self.difference.ci95
        return ci is not None and (ci[0] > 0 or ci[1] < 0)

    def to_json(self) -> dict[str, Any]:
        out = {**self.difference.to_json(), "p_value": self.p_value, "test": self.test}
        out["significant"] = self.significant
        if self.a_only is not None:
            out.update(a_only=self.a_only, b_only=self.b_only)
        return out


def mcnemar_exact_p(a_only: int, b_only: int) -> float:
    """Two-sided exact McNemar p-value: discordant items split as Binomial(a_only + b_only, 1/2). The
    binomial at 1/2 is symmetric, so this is twice the smaller tail (`scipy.stats.binomtest`'s p)."""
    from scipy.special import bdtr  # scipy.stats takes seconds to import

    total = a_only + b_only
    return 1.0 if total == 0 else float(min(1.0, 2 * bdtr(min(a_only, b_only), total, 0.5)))


def paired_difference(a: ItemScores, b: ItemScores, iters: int = ITERS, seed: int = SEED) -> Difference:
    """The difference a - b of two evaluations of the same items, resampling the items in pairs.

    Accuracies (0/1 scores on both sides) are tested with McNemar's exact test and given the paired
    bootstrap interval; any other metric (a mean, or a ratio of sums such as bits-per-byte) gets the
    paired bootstrap's interval and p-value (twice the smaller share of replicates on either side of
    0, counting the estimate itself, so it is never 0).
    """
    if set(a.ids) != set(b.ids):
        only_a, only_b = len(set(a.ids) - set(b.ids)), len(set(b.ids) - set(a.ids))
        raise EvalDataError(
            f"paired_difference needs the same items on both sides: {only_a} item(s) only in a, "
            f"{only_b} only in b; compare evaluations of the same task and data"
        )
    if a.scale != b.scale:
        raise EvalDataError("paired_difference: the two sides measure different quantities (scales differ)")
    ids = a.ids
    a_num, a_den = a.aligned(ids)
    b_num, b_den = b.aligned(ids)
    value = a.scale * (_ratio(a_num.sum(), a_den.sum()) - _ratio(b_num.sum(), b_den.sum()))
    sums = resampled_sums(np.stack([a_num, a_den, b_num, b_den], axis=1), iters, seed)
    with np.errstate(divide="ignore", invalid="ignore"):
        replicates = a.scale * (sums[:, 0] / sums[:, 1] - sums[:, 2] / sums[:, 3])
    estimate = Estimate(float(value), replicates, len(ids)).metric()
    if a.binary and b.binary:
        a_only = int(np.sum((a_num == 1) & (b_num == 0)))
        b_only = int(np.sum((a_num == 0) & (b_num == 1)))
        return Difference(estimate, mcnemar_exact_p(a_only, b_only), "mcnemar", a_only, b_only)
    return Difference(estimate, _bootstrap_p(replicates), "paired bootstrap")


def unpaired_difference(a: ItemScores, b: ItemScores, iters: int = ITERS, seed: int = SEED) -> Difference:
    """The difference a - b of two evaluations of different items (independent samples): each side is
    resampled on its own draws; the interval and two-sided p-value are the bootstrap's."""
    if a.scale != b.scale:
        raise EvalDataError("unpaired_difference: the two sides measure different quantities (scales differ)")
    sides = []
    for i, scores in enumerate((a, b)):
        num, den = scores.aligned(scores.ids)
        sums = resampled_sums(np.stack([num, den], axis=1), iters, seed + i * STRATUM_SEED_STRIDE)
        with np.errstate(divide="ignore", invalid="ignore"):
            sides.append((_ratio(num.sum(), den.sum()), sums[:, 0] / sums[:, 1]))
    value = a.scale * (sides[0][0] - sides[1][0])
    replicates = a.scale * (sides[0][1] - sides[1][1])
    estimate = Estimate(float(value), replicates, len(a.ids) + len(b.ids)).metric()
    return Difference(estimate, _bootstrap_p(replicates), "unpaired bootstrap")


def _bootstrap_p(replicates: np.ndarray) -> float:
    """Twice the smaller share of replicates on either side of 0, counting the estimate itself (never 0)."""
    below = (np.sum(replicates <= 0) + 1) / (len(replicates) + 1)
    above = (np.sum(replicates >= 0) + 1) / (len(replicates) + 1)
    return float(min(1.0, 2 * min(below, above)))
