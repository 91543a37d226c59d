"""`Mixture`: inputs and their weights as an immutable, hashable, ordered mapping; `PhasedMixture`:
a schedule of such weights by step.

train_lm's datasets (static or scheduled) and mix's inputs are held as these, so that their handles
stay hashable.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any


class Mixture(Mapping):
    """Inputs (a train step's datasets, a mix's sources) and their weights, in the order given."""

    def __init__(self, pairs: Mapping[Any, float]):
        self._pairs = tuple((handle, float(weight)) for handle, weight in pairs.items())
        self._weights = dict(self._pairs)

    def __getitem__(self, handle: Any) -> float:
        return self._weights[handle]

    def __iter__(self) -> Iterator[Any]:
        return (handle for handle, _ in self._pairs)

    def __len__(self) -> int:
        return len(self._pairs)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mixture) and self._pairs == other._pairs

    def __hash__(self) -> int:
        return hash(self._pairs)

    def __repr__(self) -> str:
        return f"Mixture({dict(self._pairs)!r})"


class PhasedMixture:
    """A mixture schedule over step handles: `((start_step, Mixture), ...)`, hashable and ordered.

    `handles` are the datasets it declares: every handle any phase names, in the order they first
    appear. A phase gives weights to some of them (the rest weigh 0 in it).
    """

    def __init__(self, phases: tuple[tuple[int, Mixture], ...]):
        self.phases = phases
        self.handles = tuple(dict.fromkeys(handle for _, mixture in phases for handle in mixture))

    def __iter__(self) -> Iterator[Any]:
        return iter(self.handles)

    def __len__(self) -> int:
        return len(self.handles)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PhasedMixture) and self.phases == other.phases

    def __hash__(self) -> int:
        return hash(self.phases)

    def __repr__(self) -> str:
        return f"PhasedMixture({[(step, dict(m)) for step, m in self.phases]!r})"
