"""The names and numbers of the training-time evaluation: `eval_<score>`, its stderr and its n.

Every name a train step's evaluation writes is made here (`eval_name`), so renaming them is one
edit. An objective scores units (a validation window, a preference pair): for each score, each
unit gives a value v_i and a weight w_i (the nats of a window's targets and their count; a pair's
loss and 1). The score is the weighted mean R = Σv / Σw (nats per target token, bits per byte,
...), and its standard error treats the units as the sample, the ratio estimator's (delta-method)
error with the units as clusters:

    stderr² = n / (n − 1) · Σ (v_i − R w_i)² / (Σ w)²

which for equal weights is the sample standard deviation of the units' means over √n. The tokens of
one window are not independent, so the window, not the token, is the unit. Every sum is additive,
so each process sums its own units and one all-reduce gives the run's.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch
    from torch import nn

    from marin.training.objective import EvalBatch, Objective

EVAL_PREFIX = "eval_"
EVAL_LOSS = f"{EVAL_PREFIX}loss"  # what a run's summary reports as final_eval_loss
EVAL_BPB = f"{EVAL_PREFIX}bpb"  # and final_eval_bpb


def eval_name(score: str) -> str:
    """The record field of score `score` (`loss` -> `eval_loss`)."""
    return f"{EVAL_PREFIX}{score}"


@dataclass
class RatioSums:
    """The additive sums behind one score's weighted mean and its standard error."""

    n: float = 0.0
    v: float = 0.0
    w: float = 0.0
    vv: float = 0.0
    ww: float = 0.0
    vw: float = 0.0

    def add(self, values: torch.Tensor, weights: torch.Tensor) -> None:
        """Add units: `values` and `weights` of equal shape, one entry per unit."""
        v, w = values.detach().double().flatten(), weights.detach().double().flatten()
        self.n += v.numel()
        self.v += float(v.sum())
        self.w += float(w.sum())
        self.vv += float((v * v).sum())
        self.ww += float((w * w).sum())
        self.vw += float((v * w).sum())

    def as_list(self) -> list[float]:
        return [self.n, self.v, self.w, self.vv, self.ww, self.vw]

    @classmethod
    def of(cls, values: list[float]) -> RatioSums:
        return cls(*values)

    def mean(self) -> float:
        return self.v / self.w if self.w else float("nan")

    def stderr(self) -> float:
        """The ratio estimator's standard error (see the module docstring); nan below two units."""
        if self.n < 2 or not self.w:
            return float("nan")
        r = self.mean()
        spread = max(0.0, self.vv - 2 * r * self.vw + r * r * self.ww)
        return math.sqrt(self.n / (self.n - 1) * spread) / abs(self.w)


def score_sums(
    objective: Objective, model: nn.Module, batches: Iterable[EvalBatch], options: dict[str, Any]
) -> dict[str, RatioSums]:
    """Each score's sums over `batches` (fillers run but not counted), scored by `objective.scores`."""
    sums = {name: RatioSums() for name in objective.score_names}
    for batch in batches:
        scores = objective.scores(model, batch, options)
        if batch.scored:
            for name, (values, weights) in scores.items():
                sums[name].add(values, weights)
    return sums


def eval_metrics(sums: dict[str, RatioSums]) -> dict[str, Any]:
    """`eval_<score>`, `eval_<score>_stderr` and `eval_<score>_n` (units scored) of each score; empty
    when nothing was scored."""
    out: dict[str, Any] = {}
    for name, s in sums.items():
        if not s.n or not s.w:
            continue
        out[eval_name(name)] = s.mean()
        out[f"{eval_name(name)}_stderr"] = s.stderr()
        out[f"{eval_name(name)}_n"] = int(s.n)
    return out
