"""Training curves and hyperparameters of several runs, for the Runs page."""

from __future__ import annotations

from typing import Any

import orjson

import storage
from marin.ui.index import METRICS_FILE

METRICS_CAP = 32 << 20
# The curves the Runs page overlays: (metrics.jsonl field, chart title).
CURVES = (
    ("loss", "train loss"),
    ("eval_loss", "eval loss (validation windows, not whole documents)"),
    ("eval_bpb", "eval bits per byte (validation windows, not whole documents)"),
    ("lr", "learning rate"),
    ("lr_schedule", "learning-rate schedule (declared, whole run)"),
    ("tokens_per_s", "tokens / s"),
)


def read_metrics(output_path: str) -> tuple[list[dict[str, Any]], str | None]:
    """The records of an output's metrics (`metrics.jsonl`, or its numbered parts on an object store),
    at most METRICS_CAP bytes of them, unparsable lines skipped; and why none could be read, when a
    metrics file is not a regular file (a FIFO would hang the page, a symlink lead outside the prefix)."""
    try:
        return storage.read_records(f"{output_path}/{METRICS_FILE}", max_bytes=METRICS_CAP), None
    except storage.NotRegularFile as e:
        return [], f"{storage.basename(e.path)} is unreadable: it is a {e.kind}, not a regular file"


def series(rows: list[dict[str, Any]]) -> dict[str, list[list[float]]]:
    """For each curve, the [step, tokens, value] points the run logged."""
    out: dict[str, list[list[float]]] = {}
    for field, _ in CURVES:
        points = [
            [row.get("step"), row.get("tokens"), row[field]]
            for row in rows
            if isinstance(row.get(field), (int, float))
        ]
        if points:
            out[field] = points
    return out


def schedule_series(hash_attrs: dict[str, Any], max_points: int = 600) -> list[list[float]]:
    """The learning rate a train step's optimizer declares for every step of the run, as [step,
    tokens, lr] points (`step` counted as metrics.jsonl counts it, from 1), at most about `max_points`
    of them; [] when the step's key names no schedule this reads."""
    from marin.training.errors import TrainingConfigError
    from marin.training.optim import OptimizerConfig

    try:
        optimizer = OptimizerConfig.from_key(hash_attrs["optimizer"])
        n = int(hash_attrs["num_train_steps"])
        tokens_per_step = int(hash_attrs["batch_size"]) * int(hash_attrs["seq_len"])
        schedule = optimizer.schedule(n)
    except (KeyError, TypeError, ValueError, TrainingConfigError):
        return []
    steps = sorted(set(range(0, n, max(1, n // max_points))) | {n - 1})
    return [[s + 1, (s + 1) * tokens_per_step, schedule.lr(optimizer.learning_rate, s)] for s in steps]


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """A nested JSON value as {'a.b.c': leaf}."""
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: value}


def hyperparameter_diff(
    params: list[dict[str, Any]], only_different: bool = True
) -> list[tuple[str, list[str]]]:
    """Rows (field, [value per run]) of the runs' flattened hash_attrs; only fields that differ unless asked."""
    flat = [flatten(p) for p in params]
    fields = sorted(set().union(*flat)) if flat else []
    rows = []
    for field in fields:
        values = [orjson.dumps(f.get(field)).decode() if field in f else "-" for f in flat]
        if not only_different or len(set(values)) > 1:
            rows.append((field, values))
    return rows
