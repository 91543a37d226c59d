"""FLOPs accounting for scaling-law runs: what a compute budget buys a model, in the model's own terms.

A run's compute C is its *model FLOPs*: the config's `flops_per_token(seq_len)` (the training
FLOPs of one token, forward and backward, as the architecture counts them: every matmul weight,
attention's score and value products, a mixture-of-experts' active experts only) times the tokens
trained. It counts the arithmetic the model needs, not what the hardware spent (recomputation,
padding, idle time), so it is the same on every machine.

For a budget C, a model trains for round(C / (flops_per_token · batch · seq_len)) steps, so its
model FLOPs are C to within half a batch. N is the config's `num_parameters()`, every parameter
including the embeddings, as Hoffmann et al. count them; for the models of a sweep, flops_per_token
is close to, but not, 6·N (the input embedding does no matmul, attention adds a term in seq_len).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from marin.scaling_laws.errors import ScalingLawError


class CountsFlops(Protocol):
    """What a sweep needs of a model config (the model interface's two counting methods)."""

    def num_parameters(self) -> int: ...

    def flops_per_token(self, seq_len: int) -> float: ...


@dataclass(frozen=True)
class BudgetRun:
    """What a compute budget buys one model: its steps, tokens and model FLOPs."""

    budget: float
    params: int
    flops_per_token: float
    steps: int
    tokens: int
    flops: float


def run_for_budget(model: CountsFlops, budget: float, *, batch_size: int, seq_len: int) -> BudgetRun:
    """The run of `model` whose model FLOPs are `budget` to within half a batch (at least one step)."""
    params = int(model.num_parameters())
    per_token = float(model.flops_per_token(seq_len))
    batch_tokens = batch_size * seq_len
    steps = max(1, round(budget / (per_token * batch_tokens)))
    tokens = steps * batch_tokens
    return BudgetRun(
        budget=float(budget),
        params=params,
        flops_per_token=per_token,
        steps=steps,
        tokens=tokens,
        flops=per_token * tokens,
    )


@dataclass(frozen=True)
class PerTokenFlops:
    """A model family's training FLOPs per token as a power of its parameters: f(N) = k · N^p.

    Fitted through the runs of a sweep (exact for two sizes, least squares for more), it turns a
    budget into tokens for any N between and near the sizes trained: D = C / f(N).
    """

    coefficient: float
    power: float

    def __call__(self, params: float) -> float:
        return self.coefficient * params**self.power

    @classmethod
    def fit(cls, params: Sequence[float], flops_per_token: Sequence[float]) -> PerTokenFlops:
        """The power law through the (N, flops per token) of the runs; at least two distinct N."""
        x = np.log(np.asarray(params, dtype=np.float64))
        y = np.log(np.asarray(flops_per_token, dtype=np.float64))
        if np.unique(x).size < 2:
            raise ScalingLawError(
                "flops per token: the runs have one model size; a family needs at least two"
            )
        power, log_k = np.polyfit(x, y, 1)
        return cls(coefficient=math.exp(log_k), power=float(power))

    def to_json(self) -> dict:
        return {"coefficient": self.coefficient, "power": self.power}
