"""Training batches: a deterministic mixture of fixed-length token windows, read ahead in the background.

Each source (a token cache split) is cut into windows of `seq_len + 1` tokens that start every
`seq_len` tokens, so every token is a target exactly once per epoch. Each batch takes from each
source the number of rows its mixture weights fix at that step (`marin.training.mixture`: largest
remainder, static or scheduled), in an order shuffled by a seeded generator; within a source the
windows come in a fresh seeded permutation every epoch. The state (generator, per-source epoch and
cursor, samples drawn) is small, checkpointed, and independent of the number of processes: every
rank draws the same global batch and reads only its own rows of it.

Drawing a batch (`plan_batch`) and reading it (`read_rows`) are apart: the `Prefetcher` plans
batches in order on one thread and reads up to `depth` of them at once on others, and a source that
can read many ranges together (`TokenSplit.tokens_many`: grouped by shard, coalesced, concurrent on
an object store) gets all of a batch's windows in one call. What a batch holds never depends on how
it was read.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch

from marin.training.errors import TrainingConfigError, TrainingDataError
from marin.training.mixture import MixtureSchedule


class TokenSource(Protocol):
    """What the loader needs from a token cache split (`marin.data.token_cache.TokenSplit` fits).

    A source may also have `tokens_many(ranges) -> list[np.ndarray]`, to read many ranges at once.
    """

    @property
    def num_tokens(self) -> int: ...

    def tokens(self, start: int, stop: int) -> np.ndarray: ...


@dataclass(frozen=True)
class NamedSource:
    """A token source with a name for error messages and logs, and its (static) mixture weight."""

    name: str
    source: TokenSource
    weight: float = 1.0


@dataclass(frozen=True)
class BatchPlan:
    """This rank's rows of one global batch, (source index, window index) each, and what it leaves behind:
    the loader state after it and each source's windows drawn so far."""

    rows: tuple[tuple[int, int], ...]
    state: dict[str, Any] = field(compare=False)
    drawn: tuple[int, ...] = ()


class WindowMixture:
    """Draws global batches of `seq_len + 1`-token windows from a mixture of sources; see module doc.

    `schedule` gives the weights per step (over the sources' names); without it the sources' own
    weights hold for the whole run.
    """

    def __init__(
        self,
        sources: Sequence[NamedSource],
        *,
        seq_len: int,
        batch_size: int,
        seed: int,
        rank: int = 0,
        world_size: int = 1,
        schedule: MixtureSchedule | None = None,
    ):
        if not sources:
            raise TrainingConfigError("the loader needs at least one dataset")
        if batch_size % world_size:
            raise TrainingConfigError(
                f"batch_size={batch_size} does not split evenly over {world_size} processes; "
                "pick a batch size that is a multiple of the process count"
            )
        names = [s.name for s in sources]
        if schedule is None:
            schedule = MixtureSchedule.of(names, {s.name: s.weight for s in sources})
        elif list(schedule.names) != names:
            raise TrainingConfigError(
                f"the mixture schedule is over datasets {list(schedule.names)}, but the loader has {names}"
            )
        for s in sources:
            if s.source.num_tokens < seq_len + 1:
                raise TrainingDataError(
                    f"dataset {s.name!r} has {s.source.num_tokens} training tokens, fewer than seq_len + 1 = "
                    f"{seq_len + 1}; tokenize more documents or lower seq_len"
                )
        self.sources = list(sources)
        self.schedule = schedule
        self.seq_len, self.batch_size, self.seed = seq_len, batch_size, seed
        self.rank, self.world_size = rank, world_size
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

    @property
    def step(self) -> int:
        """The optimizer step the next batch is for."""
        return self._samples // self.batch_size

    def windows_drawn(self) -> tuple[int, ...]:
        """How many windows each source has given so far (over every epoch)."""
        return tuple(
            e * n + c for e, n, c in zip(self._epochs, self._num_windows, self._cursors, strict=True)
        )

    def domain_tokens(self, drawn: Sequence[int]) -> dict[str, int]:
        """Target tokens trained on per dataset, after `drawn` windows of each."""
        return {s.name: int(d) * self.seq_len for s, d in zip(self.sources, drawn, strict=True)}

    def domain_epochs(self, drawn: Sequence[int]) -> dict[str, float]:
        """Epochs of each dataset gone through, after `drawn` windows of each."""
        return {s.name: d / n for s, d, n in zip(self.sources, drawn, self._num_windows, strict=True)}

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

    def plan_batch(self) -> BatchPlan:
        """Draw the next global batch: each source's rows fixed by the schedule, their order shuffled."""
        counts = self.schedule.counts(self.step, self.batch_size)
        picks = np.repeat(np.arange(len(self.sources)), counts)[self._rng.permutation(self.batch_size)]
        windows = [(int(src), self._next_window(int(src))) for src in picks]
        self._samples += self.batch_size
        per_rank = self.batch_size // self.world_size
        mine = tuple(windows[self.rank * per_rank : (self.rank + 1) * per_rank])
        return BatchPlan(mine, self.state_dict(), self.windows_drawn())

    def read_rows(self, plan: BatchPlan) -> np.ndarray:
        """The tokens of a plan's rows: int64 array (rows, seq_len + 1), each source's windows read together."""
        out = np.empty((len(plan.rows), self.seq_len + 1), dtype=np.int64)
        by_source: dict[int, list[int]] = {}
        for row, (src, _) in enumerate(plan.rows):
            by_source.setdefault(src, []).append(row)
        for src, rows in by_source.items():
            source = self.sources[src].source
            ranges = [
                (w * self.seq_len, w * self.seq_len + self.seq_len + 1)
                for w in (plan.rows[r][1] for r in rows)
            ]
            many = getattr(source, "tokens_many", None)
            tokens = many(ranges) if many is not None else [source.tokens(a, b) for a, b in ranges]
            for row, values in zip(rows, tokens, strict=True):
                out[row] = values
        return out

    def next_batch(self) -> np.ndarray:
        """This rank's rows of the next global batch: int64 array (batch_size // world_size, seq_len + 1)."""
        return self.read_rows(self.plan_batch())


@dataclass
class Batch:
    """Inputs and next-token targets on the training device, the loader state after them, and the
    target tokens and epochs of each dataset trained on once this batch is."""

    inputs: torch.Tensor
    targets: torch.Tensor
    loader_state: dict[str, Any]
    domain_tokens: dict[str, int] = field(default_factory=dict)
    domain_epochs: dict[str, float] = field(default_factory=dict)


class Prefetcher:
    """Keeps the next `depth` batches coming so the training step never waits on storage.

    One thread plans batches in order (`plan_batch`: cheap, and the only part that touches the
    loader's state); each plan's rows are read on a pool of `depth` reader threads, so the reads of
    up to `depth` batches are in flight together, and each batch's own reads are concurrent inside
    `read_rows`. At most `depth` + 1 batches are planned ahead of the consumer, which bounds memory
    at that many batches of tokens. Batches come out in plan order whatever order their reads end in.
    `wait_seconds` accumulates the time `next()` spent blocked (the stall the trainer reports).
    """

    def __init__(self, loader: WindowMixture, device: torch.device, depth: int = 4):
        self._loader, self._device = loader, device
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._readers = ThreadPoolExecutor(max_workers=depth, thread_name_prefix="marin-read")
        self.wait_seconds = 0.0
        self.last_wait_seconds = 0.0
        self._thread = threading.Thread(target=self._plan, name="marin-prefetch", daemon=True)
        self._thread.start()

    def _read(self, plan: BatchPlan) -> torch.Tensor:
        rows = torch.from_numpy(self._loader.read_rows(plan))
        return rows.pin_memory() if self._device.type == "cuda" else rows

    def _plan(self) -> None:
        try:
            while not self._stop.is_set():
                plan = self._loader.plan_batch()
                item: Any = (self._readers.submit(self._read, plan), plan)
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
        if isinstance(item, BaseException):
            raise item
        future, plan = item
        rows = future.result()
        self.last_wait_seconds = time.perf_counter() - started
        self.wait_seconds += self.last_wait_seconds
        rows = rows.to(self._device, non_blocking=True)
        return Batch(
            inputs=rows[:, :-1],
            targets=rows[:, 1:],
            loader_state=plan.state,
            domain_tokens=self._loader.domain_tokens(plan.drawn),
            domain_epochs=self._loader.domain_epochs(plan.drawn),
        )

    def close(self) -> None:
        """Stop planning, drop what was read ahead, and let the reader threads end."""
        self._stop.set()
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if not isinstance(item, BaseException):
                item[0].cancel()
        self._thread.join(timeout=5)
        self._readers.shutdown(wait=False, cancel_futures=True)
