"""experiments/tutorials/scaling.py at its reduced size: the command docs/scaling.md shows runs verbatim,
trains a real sweep (3 budgets x 3 sizes) whose train steps count the model FLOPs the sweep declared,
prints the exponents and the prediction with intervals, reruns fully cached, and a fourth budget added
to the sweep plans only that budget's runs (and the fit)."""

from __future__ import annotations

import json
import re
import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.shell_env import fresh_env

REPO = Path(__file__).resolve().parents[3]
COMMAND = "MARIN_SCALING_TUTORIAL=reduced python -m experiments.tutorials.scaling"
NUMBER = r"(-?[\d.]+(?:e[+-]?\d+)?)"
WITH_INTERVAL = rf"{NUMBER} \[{NUMBER}, {NUMBER}\]"

ADD_A_BUDGET = textwrap.dedent("""
    import json
    import experiments.tutorials.scaling as tutorial
    from marin.execution.step_runner import StepRunner
    from marin.experiment.scaling import isoflop_sweep, scaling_fit

    sweep = isoflop_sweep(
        "scaling/tiny-llama", budgets=[*tutorial.BUDGETS, 1.6e10], family=tutorial.family, recipe=tutorial.recipe,
        points=3,
    )
    fit = scaling_fit("scaling/tiny-llama-fit", sweep, bootstrap=200)
    plan = StepRunner(progress=False).plan([fit])
    print(json.dumps({s.name: s.state.value for s in plan.steps}))
""")


def docs_commands() -> list[str]:
    text = (REPO / "docs" / "scaling.md").read_text()
    return [
        line for block in re.findall(r"```bash\n(.*?)```", text, re.DOTALL) for line in block.splitlines()
    ]


def _run(command: list[str], prefix: Path, **env_vars: str) -> subprocess.CompletedProcess:
    env = fresh_env(MARIN_PREFIX=str(prefix), HF_HUB_OFFLINE="1", **env_vars)
    return subprocess.run(
        command, cwd=REPO, env=env, capture_output=True, text=True, timeout=900, check=False
    )


@pytest.mark.call_limit(120)
def test_the_reduced_tutorial_fits_its_sweep_reruns_cached_and_a_new_budget_adds_only_its_runs(tmp_path):
    assert COMMAND in docs_commands()
    prefix = tmp_path / "outputs"
    first = _run(["bash", "-c", COMMAND], prefix)
    assert first.returncode == 0, first.stderr[-3000:]
    out = first.stdout
    assert "9 runs at 3 budgets; metric eval_bpb, 95% intervals" in out
    for label in ("Approach 2   N* ∝ C^a  a =", "Approach 3   N* ∝ C^a  a =", "alpha =", "beta  ="):
        assert re.search(re.escape(label) + " " + WITH_INTERVAL, out), (label, out)
    assert "at C = 8e+10 FLOPs (10x the largest budget):" in out
    extrapolates = "warning: the prediction at C = 8e+10 extrapolates 10x beyond the largest budget trained"
    assert extrapolates in out  # in the terminal, not only in table.md
    value, lo, hi = map(float, re.search(r"predicted eval_bpb = " + WITH_INTERVAL, out).groups())
    assert lo <= value <= hi and 0 < lo
    report = re.search(r"report: (\S+)/table.md", out).group(1)
    assert all(
        (Path(report) / name).is_file() for name in ("fit.json", "table.md", "isoflop.png", "frontier.png")
    )

    # every train step counted its model FLOPs as the sweep did, and its hardware FLOPs apart
    fit = json.loads((Path(report) / "fit.json").read_text())
    declared = {r["train_step"]: r["flops"] for r in fit["runs"]}
    rows = json.loads(_run(["marin", "status", "--json"], prefix).stdout)
    fit_row = next(r for r in rows if r["name"] == "scaling/tiny-llama-fit")
    assert (
        "warning: the prediction at C = 8e+10 extrapolates 10x" in fit_row["headline"]
    )  # and in `marin status`
    trains = [r for r in rows if r["name"] in declared]
    assert len(trains) == 9
    for row in trains:
        flops = json.loads((Path(row["path"]) / ".artifact.json").read_text())["result"]["flops"]
        assert flops["model"] == pytest.approx(declared[row["name"]], rel=1e-12)
        assert 0 < flops["ratio"] < 1 and flops["hardware"] > flops["model"]
        assert row["compute"] == f"{flops['model']:.3g} / {flops['hardware']:.3g} ({flops['ratio']:.1%})"

    again = _run(["bash", "-c", COMMAND], prefix)
    assert again.returncode == 0, again.stderr[-3000:]
    assert re.search(r"12 steps under \S+: 12 cached", again.stderr), again.stderr[-2000:]
    assert again.stdout == out

    added = _run(["python", "-c", ADD_A_BUDGET], prefix, MARIN_SCALING_TUTORIAL="reduced")
    assert added.returncode == 0, added.stderr[-3000:]
    states = json.loads(added.stdout.splitlines()[-1])
    to_run = sorted(name for name, state in states.items() if state != "cached")
    assert to_run == [
        "scaling/tiny-llama-fit",
        *sorted(n for n in states if n.startswith("scaling/tiny-llama/C1.6e10/")),
    ]
    assert len(to_run) == 4, states
