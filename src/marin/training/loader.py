"""Training batches: a deterministic, weighted mixture of fixed-length token windows, prefetched.

Each source (a token cache split) is cut into windows of `seq_len + 1` tokens that start every
`seq_len` tokens, so every token is a target exactly once per epoch. Each sample of a batch picks a
source with probability proportional to its weight, from a seeded generator; within a source the
windows come in a fresh seeded permutation every epoch. The state (generator, per-source epoch and
cursor, samples drawn) is small, checkpointed, and independent of the number of processes: every
rank draws the same global batch and reads only its own rows of it.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch

from marin.training.errors import TrainingConfigError, TrainingDataError


class TokenSource(Protocol):
    """What the loader needs from a token cache split (`marin.data.token_cache.TokenSplit` fits)."""

    @property
    def num_tokens(self) -> int: ...

    def tokens(self, start: int, stop: int) -> np.ndarray: ...


@dataclass(frozen=True)
class NamedSource:
    """A token source with a name for error messages and logs, and its mixture weight."""

    name: str
    source: TokenSource
    weight: float


class WindowMixture:
    """Draws global batches of `seq_len + 1`-token windows from weighted sources; see module doc."""

    def __init__(
        self,
        sources: Sequence[NamedSource],
        *,
        seq_len: int,
        batch_size: int,
        seed: int,
        rank: int = 0,
        world_size: int = 1,
    ):
        if not sources:
            raise TrainingConfigError("the loader needs at least one dataset")
        if batch_size % world_size:
            raise TrainingConfigError(
                f"batch_size={batch_size} does not split evenly over {world_size} processes; "
                "pick a batch size that is a multiple of the process count"
            )
        for s in sources:
            if not s.weight > 0:
                raise TrainingConfigError(f"dataset {s.name!r} has weight {s.weight!r}; weights must be > 0")
            if s.source.num_tokens < seq_len + 1:
                raise TrainingDataError(
                    f"dataset {s.name!r} has {s.source.num_tokens} training tokens, fewer than seq_len + 1 = "
                    f"{seq_len + 1}; tokenize more documents or lower seq_len"
                )
        self.sources = list(sources)
        self.seq_len, self.batch_size, self.seed = seq_len, batch_size, seed
        self.rank, self.world_size = rank, world_size
        weights = np.array([s.weight for s in sources], dtype=np.float64)
        self._probabilities = weights / weights.sum()
        self._num_windows = [(s.source.num_tokens - 1) // seq_len for s in sources]
        self._rng = np.random.Generator(np.random.PCG64(seed))
        self._epochs = [0] * len(sources)
        self._cursors = [0] * len(sources)
        self._samples = 0
        self._permutations: dict[int, tuple[int, np.ndarray]] = {}

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue the exact same sequence of batches."""
        return {
            "seed": self.seed,
            "samples": self._samples,
            "rng": self._rng.bit_generator.state,
            "epochs": list(self._epochs),
            "cursors": list(self._cursors),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from a `state_dict()` (taken with any number of processes)."""
        if state["seed"] != self.seed or len(state["epochs"]) != len(self.sources):
            raise TrainingConfigError(
                f"loader state is for seed {state['seed']} and {len(state['epochs'])} datasets, but this run "
                f"has seed {self.seed} and {len(self.sources)}; resume with the run's own configuration"
            )
        self._samples = int(state["samples"])
        self._rng.bit_generator.state = state["rng"]
        self._epochs = [int(e) for e in state["epochs"]]
        self._cursors = [int(c) for c in state["cursors"]]

    def _permutation(self, source: int) -> np.ndarray:
        epoch = self._epochs[source]
        cached = self._permutations.get(source)
        if cached is None or cached[0] != epoch:
            rng = np.random.Generator(np.random.PCG64([self.seed, source, epoch]))
            cached = (epoch, rng.permutation(self._num_windows[source]))
            self._permutations[source] = cached
        return cached[1]

    def _next_window(self, source: int) -> int:
        window = int(self._permutation(source)[self._cursors[source]])
        self._cursors[source] += 1
        if self._cursors[source] == self._num_windows[source]:
            self._epochs[source] += 1
            self._cursors[source] = 0
        return window

    def next_batch(self) -> np.ndarray:
        """This rank's rows of the next global batch: int64 array (batch_size // world_size, seq_len + 1)."""
        picks = self._rng.choice(len(self.sources), size=self.batch_size, p=self._probabilities)
        windows = [(int(src), self._next_window(int(src))) for src in picks]
        self._samples += self.batch_size
        per_rank = self.batch_size // self.world_size
        mine = windows[self.rank * per_rank : (self.rank + 1) * per_rank]
        out = np.empty((per_rank, self.seq_len + 1), dtype=np.int64)
        for row, (src, window) in enumerate(mine):
            start = window * self.seq_len
            out[row] = self.sources[src].source.tokens(start, start + self.seq_len + 1)
        return out


@dataclass
class Batch:
    """Inputs and next-token targets on the training device, and the loader state after them."""

    inputs: torch.Tensor
    targets: torch.Tensor
    loader_state: dict[str, Any]


class Prefetcher:
    """Fills a small queue of batches on a background thread so the training step never waits on I/O.

    `wait_seconds` accumulates the time `next()` spent blocked (the stall the trainer reports).
    """

    def __init__(self, loader: WindowMixture, device: torch.device, depth: int = 4):
        self._loader, self._device = loader, device
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self.wait_seconds = 0.0
        self.last_wait_seconds = 0.0
        self._thread = threading.Thread(target=self._fill, name="marin-prefetch", daemon=True)
        self._thread.start()

    def _fill(self) -> None:
        pin = self._device.type == "cuda"
        try:
            while not self._stop.is_set():
                rows = torch.from_numpy(self._loader.next_batch())
                state = self._loader.state_dict()
                if pin:
                    rows = rows.pin_memory()
                item: Any = (rows, state)
                while not self._stop.is_set():
                    try:
                        self._queue.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        continue
        except BaseException as exc:  # handed to the consumer, which re-raises it in the train loop
            self._queue.put(exc)

    def next(self) -> Batch:
        """The next batch, moved to the device."""
        started = time.perf_counter()
        item = self._queue.get()
        self.last_wait_seconds = time.perf_counter() - started
        self.wait_seconds += self.last_wait_seconds
        if isinstance(item, BaseException):
            raise item
        rows, state = item
        rows = rows.to(self._device, non_blocking=True)
        return Batch(inputs=rows[:, :-1], targets=rows[:, 1:], loader_state=state)

    def close(self) -> None:
        """Stop the background thread."""
        self._stop.set()
        self._thread.join(timeout=5)
