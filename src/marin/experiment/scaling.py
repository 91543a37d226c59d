"""Scaling laws as steps: `isoflop_sweep()` declares the runs, `scaling_fit()` the fit over them.

    sweep = isoflop_sweep("scaling/tiny", budgets=[1e12, 3e12, 1e13], family=tiny_llamas,
                          recipe=SweepRecipe(datasets={stories: 1.0}, optimizer=AdamConfig(3e-3),
                                             batch_size=16, seq_len=256))
    fit = scaling_fit("scaling/tiny-fit", sweep)
    StepRunner().run([fit])

Every run is an ordinary `train_lm()` step (and, with `evaluate=`, an `evaluate()` step), keyed by
its model and number of steps like any other: adding a budget adds only its runs, and a rerun finds
the others cached. Declaring runs nothing; the parameter counts and FLOPs of each run are computed
from the model configs at declaration (`num_parameters()`, `flops_per_token(seq_len)`), so the
family's configs must carry the vocabulary size of the tokenizer they train with.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from marin.execution.arguments import Checked
from marin.execution.errors import MarinError, StepDefinitionError
from marin.execution.keyed import hash_attrs_of
from marin.execution.lazy import LazyStep, StepOptions, lower
from marin.execution.step_spec import StepSpec
from marin.experiment.train import TrainLm, train_lm
from marin.scaling_laws.fit_step import FitOptions, ScalingFitConfig, run_scaling_fit
from marin.scaling_laws.flops import BudgetRun, CountsFlops, run_for_budget
from marin.scaling_laws.runs import ScalingRun, check_runs
from marin.training.optim import OptimizerConfig

if TYPE_CHECKING:
    from marin.experiment.data import TokenizedData

__all__ = [
    "IsoflopSweep",
    "ModelFamily",
    "ScalingFitStep",
    "SweepRun",
    "SweepRecipe",
    "isoflop_sweep",
    "scaling_fit",
]

TOKENS_PER_PARAM = 20.0
"""Where a sweep expects the optimum without other knowledge: Hoffmann et al.'s 20 tokens per parameter."""


@dataclass(frozen=True)
class ModelFamily(Checked):
    """Model configs of one design at several sizes: `build(size)` is the config of `size`.

    A size is whatever `build` takes (a width, a depth, a name). `sizes` lists the candidates a sweep
    picks from when it is given none, in any order; each config must count its parameters and FLOPs
    (`num_parameters()`, `flops_per_token(seq_len)`), so it needs its vocabulary size.
    """

    build: Callable[[Any], CountsFlops]
    sizes: tuple = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "sizes", tuple(self.sizes))


@dataclass(frozen=True)
class SweepRecipe(Checked):
    """How every run of a sweep trains, except its model and its number of steps.

    `optimizer` is an optimizer config (AdamConfig, MuonConfig), or a function of the model config
    returning one (a learning rate that depends on width). `options` are any other `train_lm` fields
    (seed, steps_per_eval, eval_max_tokens, resources, version, ...), the same for every run.
    """

    datasets: Mapping[TokenizedData, float]
    optimizer: OptimizerConfig | Callable[[Any], OptimizerConfig]
    batch_size: int
    seq_len: int
    options: Mapping[str, Any] = field(default_factory=dict)

    def optimizer_for(self, model: Any) -> OptimizerConfig:
        """The optimizer of the run training `model`."""
        return self.optimizer if isinstance(self.optimizer, OptimizerConfig) else self.optimizer(model)


@dataclass(frozen=True)
class SweepRun:
    """One run of a sweep: its budget and model size, what the budget buys it, and its steps."""

    budget: float
    size: Any
    shape: BudgetRun
    train: TrainLm | StepSpec | LazyStep
    evaluation: Any = None

    @property
    def params(self) -> int:
        return self.shape.params

    @property
    def tokens(self) -> int:
        return self.shape.tokens

    @property
    def flops(self) -> float:
        return self.shape.flops

    @classmethod
    def of(cls, train: TrainLm, evaluation: Any = None, budget: float | None = None) -> SweepRun:
        """A run made by hand from a `train_lm()` handle (its model must know its vocabulary size);
        `budget` groups runs for Approach 2 and defaults to the run's own model FLOPs."""
        if not isinstance(train, TrainLm):
            raise StepDefinitionError(
                f"SweepRun.of: give a train_lm() handle, got {type(train).__name__}; a StepSpec carries no model config"
            )
        params = _counted(train.name, train.model, lambda m: int(m.num_parameters()))
        per_token = _counted(train.name, train.model, lambda m: float(m.flops_per_token(train.seq_len)))
        tokens = train.num_train_steps * train.batch_size * train.seq_len
        flops = per_token * tokens
        shape = BudgetRun(
            budget=float(budget or flops),
            params=params,
            flops_per_token=per_token,
            steps=train.num_train_steps,
            tokens=tokens,
            flops=flops,
        )
        return cls(budget=shape.budget, size=None, shape=shape, train=train, evaluation=evaluation)


@dataclass(frozen=True)
class IsoflopSweep:
    """The runs of an isoflop sweep, by budget then model size. Pass it to `scaling_fit`."""

    name: str
    runs: tuple[SweepRun, ...]

    @property
    def budgets(self) -> tuple[float, ...]:
        return tuple(sorted({r.budget for r in self.runs}))

    def at(self, budget: float) -> tuple[SweepRun, ...]:
        """The runs of one budget, smallest model first."""
        return tuple(r for r in self.runs if r.budget == budget)

    def steps(self) -> list[Any]:
        """Every train and evaluation handle of the sweep (what to run to train it without a fit)."""
        return [h for r in self.runs for h in (r.train, r.evaluation) if h is not None]


def isoflop_sweep(
    name: str,
    budgets: Sequence[float],
    family: ModelFamily | Callable[[Any], CountsFlops],
    sizes: Sequence[Any] | None = None,
    recipe: SweepRecipe | None = None,
    evaluate: Callable[[str, TrainLm], Any] | None = None,
    *,
    points: int = 4,
    tokens_per_param: float = TOKENS_PER_PARAM,
) -> IsoflopSweep:
    """Declare an isoflop sweep: at each compute budget C, train models of several sizes on D tokens
    such that their model FLOPs (`flops_per_token(seq_len)` · D) are C to within half a batch.

    `sizes` lists the model sizes trained at every budget (what `family` takes). Without it, the
    sweep picks, for each budget, `points` consecutive sizes of `family.sizes` (ordered by parameter
    count) centred on the one whose tokens per parameter at that budget is closest to
    `tokens_per_param`, Hoffmann et al.'s compute-optimal ratio: a log grid around the expected
    optimum. `evaluate(name, train)` returns an evaluation of a run (e.g. `lambda name, model:
    evaluate(name, model=model, datasets=[...])`); its result is where `scaling_fit` looks for
    an evaluation metric. Run `r` at budget C is the train step `{name}/C{C}/N{params}` and its
    evaluation `{name}/C{C}/N{params}-eval`.
    """
    where = f"isoflop sweep {name!r}"
    if not isinstance(name, str) or not name:
        raise StepDefinitionError(f"isoflop sweep name must be a non-empty string, got {name!r}")
    if not isinstance(recipe, SweepRecipe):
        raise StepDefinitionError(
            f"{where}: recipe must be a SweepRecipe(datasets=..., optimizer=..., batch_size=..., seq_len=...), "
            f"got {type(recipe).__name__}"
        )
    checked = _budgets(where, budgets)
    build = family.build if isinstance(family, ModelFamily) else family
    if not callable(build):
        raise StepDefinitionError(
            f"{where}: family must be a ModelFamily or a function of a size, got {family!r}"
        )
    if sizes is None:
        candidates = family.sizes if isinstance(family, ModelFamily) else ()
        if not candidates:
            raise StepDefinitionError(
                f"{where}: give sizes=[...] or a ModelFamily with candidate sizes to pick from around each optimum"
            )
        if isinstance(points, bool) or not isinstance(points, int) or points < 3:
            raise StepDefinitionError(
                f"{where}: points must be an int >= 3 (Approach 2 needs 3 sizes), got {points!r}"
            )
    else:
        candidates = tuple(sizes)
        if not candidates:
            raise StepDefinitionError(
                f"{where}: sizes is empty; give the model sizes to train at every budget"
            )
    models = {size: _model(where, build, size) for size in dict.fromkeys(candidates)}
    counted = {
        size: _counted(f"{name} size {size!r}", m, lambda c: int(c.num_parameters()))
        for size, m in models.items()
    }
    by_params = sorted(models, key=lambda s: counted[s])
    _distinct_counts(where, counted)

    runs = []
    for budget in checked:
        chosen = (
            by_params
            if sizes is not None
            else _around_optimum(models, by_params, budget, recipe, points, tokens_per_param)
        )
        for size in chosen:
            runs.append(_run(name, where, budget, size, models[size], recipe, evaluate))
    return IsoflopSweep(name, tuple(runs))


@dataclass(frozen=True)
class ScalingFitStep(FitOptions, StepOptions):
    """Lazy handle of a scaling-fit step over runs (made by `scaling_fit`); its options are `FitOptions`'."""

    helper: ClassVar[str] = "scaling_fit"
    _: KW_ONLY
    runs: tuple[SweepRun, ...]

    def to_step_spec(self) -> StepSpec:
        """The StepSpec: deps are every run's train (and evaluation) step; hash_attrs the fit's config."""
        deps: list[StepSpec] = []
        records = []
        for run in self.runs:
            train = lower(run.train)
            evaluation = lower(run.evaluation) if run.evaluation is not None else None
            deps.extend(s for s in (train, evaluation) if s is not None and s not in deps)
            records.append(
                ScalingRun(
                    train_step=train.name,
                    budget=float(run.budget),
                    params=int(run.params),
                    tokens=int(run.tokens),
                    flops=float(run.flops),
                    evaluation_step=evaluation.name if evaluation is not None else None,
                )
            )
        # the fit does not depend on the order of the runs, so neither does its key
        records.sort(key=lambda r: (r.budget, r.params, r.tokens, r.train_step, r.evaluation_step or ""))
        deps.sort(key=lambda spec: spec.name)
        options = {f.name: getattr(self, f.name) for f in dataclasses.fields(FitOptions)}
        config = ScalingFitConfig(runs=tuple(records), **options)
        return StepSpec(
            fn=functools.partial(run_scaling_fit, config),
            deps=deps,
            hash_attrs=hash_attrs_of(config),
            **self.spec_options(),
        )


def scaling_fit(
    name: str,
    runs: IsoflopSweep | Iterable[SweepRun | TrainLm],
    metric: str = "eval_bpb",
    *,
    target_flops: float | None = None,
    bootstrap: int = 1000,
    seed: int = 0,
    huber_delta: float = 1e-3,
    plots: bool = True,
    **options: Any,
) -> ScalingFitStep:
    """Declare a step that fits `metric` of `runs` both ways and predicts a larger budget.

    `runs` is an `isoflop_sweep()`, or runs made by hand (`SweepRun`s, or `train_lm()` handles,
    each its own budget). `metric` is a key of the train steps' metrics (`eval_bpb`, `eval_loss`:
    the validation figures at the end of training) or a path in the runs' evaluation results
    (`micro/bpb`, `harness/<task>/<metric>`), lower being better. The step writes `fit.json`,
    `table.md` and three plots: Approach 2 (a parabola in log N per budget; N* ∝ C^a, D* ∝ C^b
    with t intervals), Approach 3 (L = E + A/N^alpha + B/D^beta, Huber on log L with
    `huber_delta`, `bootstrap` resamples from `seed`), and the loss-optimal split of
    `target_flops` (default: 10x the largest budget) with the predicted metric and its interval.
    `options` are the `StepOptions` (version, adopt, resources).
    """
    where = f"scaling fit {name!r}"
    if not isinstance(name, str) or not name:
        raise StepDefinitionError(f"scaling fit name must be a non-empty string, got {name!r}")
    if not isinstance(metric, str) or not metric:
        raise StepDefinitionError(
            f"{where}: metric must be a non-empty string such as 'eval_bpb', got {metric!r}"
        )
    listed = runs.runs if isinstance(runs, IsoflopSweep) else tuple(runs)
    made = tuple(r if isinstance(r, SweepRun) else SweepRun.of(r) for r in listed)
    if target_flops is not None and not (isinstance(target_flops, int | float) and target_flops > 0):
        raise StepDefinitionError(f"{where}: target_flops must be a positive number, got {target_flops!r}")
    if isinstance(bootstrap, bool) or not isinstance(bootstrap, int) or bootstrap < 0:
        raise StepDefinitionError(f"{where}: bootstrap must be an int >= 0, got {bootstrap!r}")
    check_runs(
        [
            ScalingRun(
                train_step=_label(r.train), budget=r.budget, params=r.params, tokens=r.tokens, flops=r.flops
            )
            for r in made
        ],
        where,
    )
    return ScalingFitStep(
        name,
        runs=made,
        metric=metric,
        target_flops=target_flops,
        bootstrap=bootstrap,
        seed=seed,
        huber_delta=huber_delta,
        plots=plots,
        **options,
    )


def _budgets(where: str, budgets: Sequence[float]) -> tuple[float, ...]:
    if isinstance(budgets, str) or not isinstance(budgets, Sequence) or not budgets:
        raise StepDefinitionError(
            f"{where}: budgets must be a non-empty list of FLOP counts, got {budgets!r}"
        )
    for budget in budgets:
        if (
            isinstance(budget, bool)
            or not isinstance(budget, int | float)
            or not (budget > 0 and math.isfinite(budget))
        ):
            raise StepDefinitionError(f"{where}: budget {budget!r} is not a positive number of FLOPs")
    if len(set(budgets)) != len(budgets):
        raise StepDefinitionError(f"{where}: budgets {list(budgets)} repeat a value; list each budget once")
    return tuple(sorted(float(b) for b in budgets))


def _model(where: str, build: Callable[[Any], Any], size: Any) -> Any:
    try:
        return build(size)
    except MarinError as e:
        raise StepDefinitionError(f"{where}: the family's config of size {size!r}: {e}") from None


def _counted(where: str, model: Any, count: Callable[[Any], Any]) -> Any:
    """A count of `model` (its parameters or FLOPs per token), or one line saying why it has none."""
    try:
        return count(model)
    except MarinError as e:
        raise StepDefinitionError(
            f"{where}: {e}; a scaling sweep counts parameters and FLOPs at declaration, so give the config "
            "the vocab_size of the tokenizer it trains with"
        ) from None


def _distinct_counts(where: str, counted: Mapping[Any, int]) -> None:
    seen: dict[int, Any] = {}
    for size, params in counted.items():
        if params in seen:
            raise StepDefinitionError(
                f"{where}: sizes {seen[params]!r} and {size!r} give models of the same parameter count ({params:,}); "
                "an isoflop sweep needs sizes that differ in N"
            )
        seen[params] = size


def _around_optimum(
    models: Mapping[Any, Any],
    by_params: list[Any],
    budget: float,
    recipe: SweepRecipe,
    points: int,
    tokens_per_param: float,
) -> list[Any]:
    """`points` consecutive sizes (by N) centred on the one nearest `tokens_per_param` at `budget`."""
    if points > len(by_params):
        return by_params

    def distance(size: Any) -> float:
        shape = run_for_budget(models[size], budget, batch_size=recipe.batch_size, seq_len=recipe.seq_len)
        return abs(math.log(shape.tokens / shape.params / tokens_per_param))

    centre = min(range(len(by_params)), key=lambda i: (distance(by_params[i]), i))
    start = min(max(0, centre - (points - 1) // 2), len(by_params) - points)
    return by_params[start : start + points]


def _run(
    name: str,
    where: str,
    budget: float,
    size: Any,
    model: Any,
    recipe: SweepRecipe,
    evaluate: Callable[[str, TrainLm], Any] | None,
) -> SweepRun:
    shape = _counted(
        f"{where}: size {size!r}",
        model,
        lambda m: run_for_budget(m, budget, batch_size=recipe.batch_size, seq_len=recipe.seq_len),
    )
    batch_flops = shape.flops_per_token * recipe.batch_size * recipe.seq_len
    if budget < 0.5 * batch_flops:
        raise StepDefinitionError(
            f"{where}: budget {budget:.3g} is less than half a step of size {size!r} ({batch_flops:.3g} FLOPs per "
            "batch); raise the budget, or lower batch_size or seq_len"
        )
    run_name = f"{name}/C{_label_number(budget)}/N{_label_number(shape.params)}"
    try:
        train = train_lm(
            name=run_name,
            model=model,
            optimizer=recipe.optimizer_for(model),
            datasets=recipe.datasets,
            batch_size=recipe.batch_size,
            seq_len=recipe.seq_len,
            num_train_steps=shape.steps,
            **dict(recipe.options),
        )
    except TypeError as e:
        raise StepDefinitionError(f"{where}: recipe options: {e}") from None
    evaluation = evaluate(f"{run_name}-eval", train) if evaluate is not None else None
    return SweepRun(budget=budget, size=size, shape=shape, train=train, evaluation=evaluation)


def _label_number(value: float) -> str:
    """A number as a short step-name segment, 3 significant digits: 3e+12 -> 3e12, 295040 -> 2.95e5."""
    mantissa, exponent = f"{value:.2e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


def _label(handle: Any) -> str:
    return getattr(handle, "name", repr(handle))
