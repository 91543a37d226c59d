"""`isoflop_sweep()` and `scaling_fit()`: the runs a sweep declares, and the fit step over real step outputs.

The fit tests read the session's `fit_outputs` (tests/marin/scaling_laws/fit_outputs.py): the real
StepRunner over steps that write what train and evaluation steps write, with values drawn from a known
law, so the fit step's records can be checked against the fit functions.
The tutorial's own training runs are tested in test_scaling_tutorial.py.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from marin.execution.errors import StepDefinitionError, StepFailedError
from marin.execution.lazy import lower
from marin.execution.step_runner import StepRunner
from marin.execution.step_spec import StepSpec
from marin.experiment.data import tokenized
from marin.experiment.scaling import ModelFamily, TrainRecipe, isoflop_sweep, scaling_fit
from marin.scaling_laws import ScalingLawError, fit_isoflop, fit_loss_law
from marin.training.models import LlamaConfig
from marin.training.optim import AdamConfig
from tests.marin.scaling_laws.fit_outputs import evaluation_result

STORIES = tokenized(name="tokenized/sweep-stories", source="marin://tinystories-synth", tokenizer="gpt2")
RECIPE = TrainRecipe(
    datasets={STORIES: 1.0}, optimizer=AdamConfig(learning_rate=3e-3), batch_size=8, seq_len=64
)


def tiny(width: int, vocab: int | None = 512) -> LlamaConfig:
    return LlamaConfig(
        hidden_dim=width,
        intermediate_dim=4 * width,
        num_layers=2,
        num_heads=2,
        max_seq_len=64,
        vocab_size=vocab,
    )


FAMILY = ModelFamily(tiny, sizes=(8, 12, 16, 24, 32, 48, 64))


def test_every_run_spends_its_budget_in_model_flops_to_within_half_a_batch():
    sweep = isoflop_sweep("sweeps/t", budgets=[1e10, 1e11], family=FAMILY, sizes=[8, 16, 32], recipe=RECIPE)
    assert len(sweep.runs) == 6 and sweep.budgets == (1e10, 1e11)
    for run in sweep.runs:
        model = run.train.model
        batch_flops = model.flops_per_token(64) * 8 * 64
        assert abs(run.flops - run.budget) <= batch_flops / 2
        assert run.tokens == run.train.num_train_steps * 8 * 64 and run.params == model.num_parameters()
        assert run.flops == pytest.approx(model.flops_per_token(64) * run.tokens)
        assert re.fullmatch(r"sweeps/t/C1e1[01]/N\d(\.\d\d?)?e[34]", run.train.name), run.train.name


def test_without_sizes_each_budget_gets_consecutive_sizes_around_twenty_tokens_per_parameter():
    sweep = isoflop_sweep("sweeps/auto", budgets=[3e10, 1e12], family=FAMILY, recipe=RECIPE, points=3)
    for budget in sweep.budgets:
        runs = sweep.at(budget)
        assert len(runs) == 3
        ratios = [r.tokens / r.params for r in runs]
        assert ratios == sorted(ratios, reverse=True)  # smallest model first: most tokens per parameter
        assert ratios[0] > 20 > ratios[-1]  # the grid brackets the expected optimum
        widths = [r.size for r in runs]
        assert widths == [w for w in FAMILY.sizes if widths[0] <= w <= widths[-1]]  # consecutive
    assert sweep.at(1e12)[1].size > sweep.at(3e10)[1].size  # a larger budget centres on a larger model


def test_adding_a_budget_adds_only_its_runs_and_leaves_the_others_keys_alone(tmp_path):
    runner = StepRunner(prefix=str(tmp_path), progress=False)
    small = isoflop_sweep("sweeps/k", budgets=[1e10, 2e10], family=FAMILY, sizes=[8, 16, 32], recipe=RECIPE)
    large = isoflop_sweep(
        "sweeps/k", budgets=[1e10, 2e10, 4e10], family=FAMILY, sizes=[8, 16, 32], recipe=RECIPE
    )

    def keys(sweep):
        plan = runner.plan([r.train for r in sweep.runs])
        return {s.name: s.key for s in plan.steps if s.name.startswith("sweeps/k/")}

    before, after = keys(small), keys(large)
    assert {n: after[n] for n in before} == before
    assert sorted(set(after) - set(before)) == sorted(r.train.name for r in large.at(4e10))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: isoflop_sweep(
                "s", budgets=[1e10], family=lambda w: tiny(w, vocab=None), sizes=[8], recipe=RECIPE
            ),
            "s size 8: num_parameters needs a vocab_size: the config leaves it to the tokenizer; a scaling sweep "
            "counts parameters and FLOPs at declaration",
        ),
        (
            lambda: isoflop_sweep("s", budgets=[1e5], family=FAMILY, sizes=[8], recipe=RECIPE),
            "isoflop sweep 's': budget 1e+05 is less than half a step of size 8",
        ),
        (
            lambda: isoflop_sweep("s", budgets=[1e10, 1e10], family=FAMILY, sizes=[8], recipe=RECIPE),
            "isoflop sweep 's': budgets [10000000000.0, 10000000000.0] repeat a value",
        ),
        (
            lambda: isoflop_sweep("s", budgets=[1e10], family=tiny, recipe=RECIPE),
            "isoflop sweep 's': give sizes=[...] or a ModelFamily with candidate sizes",
        ),
        (
            lambda: isoflop_sweep("s", budgets=[1e10], family=FAMILY, sizes=[8], recipe=None),
            "isoflop sweep 's': recipe must be a TrainRecipe",
        ),
    ],
)
def test_a_bad_sweep_is_one_line_at_declaration(call, message):
    with pytest.raises(StepDefinitionError) as caught:
        call()
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_a_fit_that_cannot_work_is_refused_at_declaration_in_one_line():
    few = isoflop_sweep("s", budgets=[1e10, 2e10], family=FAMILY, sizes=[8, 16], recipe=RECIPE)
    with pytest.raises(ScalingLawError, match=r"^scaling fit 'f': 4 runs; Approach 3 fits 5 parameters"):
        scaling_fit("f", few)
    single = isoflop_sweep(
        "s", budgets=[1e10, 2e10, 4e10, 8e10, 1.6e11], family=FAMILY, sizes=[16], recipe=RECIPE
    )
    with pytest.raises(ScalingLawError) as caught:
        scaling_fit("f", single)
    assert str(caught.value) == (
        "scaling fit 'f': Approach 2 fits a parabola per budget and needs at least 3 model sizes at each budget, "
        "but each of the 5 budgets has a single size: train more sizes at those budgets, or fit the runs with "
        "fit_loss_law"
    )


# --- the fit step over step outputs (the session's `fit_outputs`: tests/marin/scaling_laws/fit_outputs.py) ---


def test_the_fit_step_records_both_approaches_as_the_fit_functions_compute_them(fit_outputs):
    runs, values, out = fit_outputs.runs, fit_outputs.values, fit_outputs.train_fit
    fit = json.loads((out / "fit.json").read_text())
    params = [r.params for r in runs]
    tokens = [r.tokens for r in runs]
    law = fit_loss_law(params, tokens, values, bootstrap=100)
    for name in ("E", "A", "B", "alpha", "beta"):
        assert fit["approach3"][name] == law.to_json()[name]
        assert fit["approach3"]["intervals"][name] == list(law.intervals[name])
    iso = fit_isoflop([r.budget for r in runs], params, values, tokens=tokens)
    assert fit["approach2"]["a"] == iso.a and fit["approach2"]["intervals"]["a"] == list(iso.intervals["a"])
    assert [r["eval_bpb"] for r in sorted(fit["runs"], key=lambda r: r["train_step"])] == [
        values[int(r.train.name[6:])] for r in sorted(runs, key=lambda r: r.train.name)
    ]
    target = fit["target"]
    assert target["flops"] == 10 * max(r.budget for r in runs)
    lo, hi = target["approach3"]["intervals"]["loss"]
    assert lo < target["approach3"]["loss"] < hi
    for name in ("isoflop.png", "frontier.png", "predicted.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = (out / "table.md").read_text()
    assert "## Prediction at C = 1e+22 FLOPs" in table and "`runs/r0-eval`" in table


def test_the_fit_reads_evaluation_metrics_with_their_stderr(fit_outputs):
    values, out = fit_outputs.values, fit_outputs.eval_fit
    fit = json.loads((out / "fit.json").read_text())
    assert all(r["stderr"] == 0.01 for r in fit["runs"])
    assert sorted(r["micro/bpb"] for r in fit["runs"]) == pytest.approx(sorted(values * 0.9))
    assert all(r["source"].endswith("result micro/bpb") for r in fit["runs"])
    assert not (out / "isoflop.png").exists()


def test_the_artifact_headline_is_the_prediction_with_its_interval(fit_outputs):
    out = fit_outputs.train_fit
    result = json.loads((out / ".artifact.json").read_text())["result"]
    headline = result["headline"]
    assert headline["metric"] == "predicted eval_bpb at C=1e+22" and headline["n"] == 12
    assert headline["ci95"][0] < headline["value"] < headline["ci95"][1]
    assert set(result["approach3"]["intervals"]) >= {"E", "A", "B", "alpha", "beta", "a", "b"}


def test_an_extrapolated_prediction_warns_in_the_terminal_marin_status_and_table_md(fit_outputs):
    from marin.execution.explain import list_outputs
    from marin.scaling_laws.report import summary_lines

    out = fit_outputs.train_fit
    result = json.loads((out / ".artifact.json").read_text())["result"]
    factor = f"{1e22 / result['largest_budget']:.3g}x"
    expected = f"the prediction at C = 1e+22 extrapolates {factor} beyond the largest budget trained"
    assert (
        result["warnings"][0].startswith(expected) and result["headline"]["warning"] == result["warnings"][0]
    )
    assert any("rest on 3 budgets (1 degrees of freedom" in w for w in result["warnings"])
    printed = summary_lines(result)
    assert f"at C = 1e+22 FLOPs ({factor} the largest budget):" in printed
    assert (
        f"warning: {expected}"
        in printed[printed.index(f"at C = 1e+22 FLOPs ({factor} the largest budget):") :][4]
    )
    row = next(r for r in list_outputs(str(fit_outputs.prefix)) if r.path == str(out))
    assert f"; warning: {expected}" in row.headline  # what `marin status` shows
    assert f"**Warning:** {expected}" in (out / "table.md").read_text()


def test_the_fit_key_does_not_depend_on_the_order_of_the_runs(fit_outputs):
    runner, runs = fit_outputs.runner, fit_outputs.runs
    plan = runner.plan([scaling_fit("fits/train", list(reversed(runs)), bootstrap=100)])
    assert plan.steps[-1].name == "fits/train" and plan.steps[-1].state.value == "cached"


def test_a_run_without_the_metric_fails_the_fit_naming_the_run(fit_outputs):
    runner, runs = fit_outputs.runner, fit_outputs.runs
    with pytest.raises(StepFailedError) as caught:
        runner.run([scaling_fit("fits/missing", runs, metric="eval_nope", bootstrap=0)])
    # one line, as every error marin raises on purpose (the traceback goes to the step's log only)
    message = str(caught.value)
    assert message.startswith(
        "step 'fits/missing' failed: run 'runs/r0-eval' has no metric 'eval_nope': looked in the result of "
        "'runs/r0-eval' (keys micro) and in metrics.jsonl of 'runs/r0' (it logs eval_bpb, loss, step); name a "
        "metric every run records (log: "
    )
    assert "\n" not in message


def test_a_sweep_fit_depends_on_every_run_and_its_evaluation():
    def evaluate_run(name, train):
        return StepSpec(name=name, fn=functools.partial(evaluation_result, 1.0), deps=[lower(train)])

    sweep = isoflop_sweep(
        "sweeps/e",
        budgets=[1e10, 2e10],
        family=FAMILY,
        sizes=[8, 16, 32],
        recipe=RECIPE,
        evaluate=evaluate_run,
    )
    spec = lower(scaling_fit("fits/e", sweep))
    names = sorted(d.name for d in spec.deps)
    assert names == sorted([r.train.name for r in sweep.runs] + [f"{r.train.name}-eval" for r in sweep.runs])
    assert all(math.isclose(r.flops, r.budget, rel_tol=0.5) for r in sweep.runs)
    assert np.all([r.evaluation is not None for r in sweep.runs])


SINGLE_SIZE_SWEEP = """
from marin.experiment.data import tokenized
from marin.experiment.scaling import TrainRecipe, isoflop_sweep, scaling_fit
from marin.training.models import LlamaConfig
from marin.training.optim import AdamConfig

stories = tokenized(name="tokenized/s", source="marin://tinystories-synth", tokenizer="gpt2")
recipe = TrainRecipe(datasets={stories: 1.0}, optimizer=AdamConfig(), batch_size=8, seq_len=64)
model = lambda width: LlamaConfig(
    hidden_dim=width, intermediate_dim=4 * width, num_layers=2, num_heads=2, max_seq_len=64, vocab_size=512
)
sweep = isoflop_sweep("s", budgets=[1e10, 2e10, 4e10, 8e10, 1.6e11], family=model, sizes=[16], recipe=recipe)
fit = scaling_fit("f", sweep)
"""


def test_marin_plan_refuses_a_fit_approach_2_cannot_make_in_one_error_line(tmp_path):
    (tmp_path / "exp.py").write_text(SINGLE_SIZE_SWEEP)
    done = subprocess.run(
        [sys.executable, "-m", "marin.cli", "plan", "exp.py", "--prefix", "out"],
        cwd=tmp_path,
        env={**os.environ, "MARIN_PREFIX": ""},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        "error: exp.py:13: scaling fit 'f': Approach 2 fits a parabola per budget and needs at least 3 model "
        "sizes at each budget, but each of the 5 budgets has a single size: train more sizes at those budgets, or "
        "fit the runs with fit_loss_law"
    ]
