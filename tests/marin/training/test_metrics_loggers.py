"""Metrics go to metrics.jsonl and, when asked for and installed, to TensorBoard event files."""

import json

import pytest

from marin.training.metrics import MetricsLog


def test_tensorboard_logger_mirrors_every_numeric_metric(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    log = MetricsLog(str(tmp_path / "metrics.jsonl"), loggers=("tensorboard",), run_name="tb")
    for step in (1, 2, 3):
        log.write({"step": step, "loss": 4.0 - step, "lr": 1e-3, "note": "text is not a scalar"})
    log.close()

    assert [json.loads(line)["loss"] for line in (tmp_path / "metrics.jsonl").read_text().splitlines()] == [
        3,
        2,
        1,
    ]
    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    assert sorted(events.Tags()["scalars"]) == ["loss", "lr"]
    assert [(e.step, e.value) for e in events.Scalars("loss")] == [(1, 3.0), (2, 2.0), (3, 1.0)]


def test_unknown_logger_is_refused_naming_the_ones_we_have(tmp_path):
    with pytest.raises(ValueError, match="'tensorboard' or 'wandb'"):
        MetricsLog(str(tmp_path / "metrics.jsonl"), loggers=("mlflow",))
