"""The sweep report groups replicates into settings and names a best setting only when the sweep can tell."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np

from marin.execution.lazy import lower
from marin.execution.step_runner import StepRunner
from marin.execution.step_spec import StepSpec
from marin.experiment.evaluate import sweep_report


def _write_metrics(finals: np.ndarray, stderr: float | None, output_path: str) -> dict:
    """A stand-in train step that logged eval_loss (and its stderr) at three points, ending at `finals[0]`."""
    lines = []
    for i, tokens in enumerate((100, 200, 300)):
        value = float(finals[0]) + (2 - i) * 0.5
        record = {"step": i, "tokens": tokens, "eval_loss": value, "eval_bpb": value / 2}
        if stderr is not None:
            record["eval_loss_stderr"] = stderr
        lines.append(json.dumps(record))
    (Path(output_path) / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    return {}


def _run(prefix: Path, name: str, finals: dict[str, list[float]], stderr: float | None = None):
    """One train step per (setting, seed): keys that differ only in `seed` within a setting."""
    models = {}
    for label, values in finals.items():
        for seed, value in enumerate(values):
            models[f"{label} seed={seed}" if len(values) > 1 else label] = StepSpec(
                f"checkpoints/{label}-seed{seed}",
                functools.partial(_write_metrics, np.array([value]), stderr),  # not JSON: out of the key
                hash_attrs={"lr": label, "seed": seed},
            )
    report = sweep_report(name, models, metrics=("eval_loss",))
    result = StepRunner(prefix=str(prefix), progress=False).run([report])
    out = Path(result.output_path(lower(report)))
    return (out / "table.md").read_text(), json.loads((out / ".artifact.json").read_text())["result"]


def test_replicates_are_one_setting_and_a_best_within_seed_noise_is_not_named(tmp_path):
    table, result = _run(
        tmp_path,
        "reports/close",
        {"lr=1e-3": [3.5, 3.45, 3.55], "lr=3e-3": [2.5, 2.6, 2.45], "lr=1e-2": [2.55, 2.5, 2.62]},
    )
    assert [s["setting"] for s in result["settings"]] == ["lr=1e-3", "lr=3e-3", "lr=1e-2"]
    assert all(len(s["runs"]) == 3 for s in result["settings"])
    headline = result["headline"]
    assert headline["run"] == "lr=3e-3" and not headline["separable"]
    assert headline["indistinguishable"] == ["lr=3e-3", "lr=1e-2"]
    assert "The top 2 settings by final eval_loss are indistinguishable: lr=3e-3, lr=1e-2" in table
    row = next(line for line in table.splitlines() if line.startswith("| lr=3e-3 | 3 |"))
    assert "[" in row  # the mean over seeds with its interval, and the seeds' sd


def test_a_setting_clearly_better_over_its_seeds_is_named_best(tmp_path):
    table, result = _run(tmp_path, "reports/far", {"lr=1e-3": [3.5, 3.45, 3.55], "lr=3e-3": [2.5, 2.6, 2.45]})
    assert result["headline"]["separable"] and result["headline"]["run"] == "lr=3e-3"
    assert "Best by final eval_loss: lr=3e-3, separable from the runner-up lr=1e-3" in table
    assert "Welch t over 3 and 3 seeds" in table
    # the training loop's window loss is named as one, apart from an evaluation's document loss
    assert "| final eval_loss (windows) [95% interval] |" in table
    assert "fixed windows of the token cache" in table and "whole documents" in table
    low, high = result["headline"]["ci95"]
    assert low < result["headline"]["value"] < high and result["headline"]["n"] == 3


def test_single_runs_rank_runs_not_settings_and_use_their_logged_stderr(tmp_path):
    table, result = _run(tmp_path, "reports/single", {"lr=1e-3": [3.0], "lr=3e-3": [2.98]}, stderr=0.05)
    assert "One seed per setting: seed variance is unmeasured" in table
    assert not result["headline"]["separable"]  # 0.02 apart with a stderr of 0.05 each
    assert "evaluation noise only: one seed per setting, seed noise unmeasured" in table
    assert "2.98 [2.882, 3.078] (one seed)" in table  # the final value with its logged interval
