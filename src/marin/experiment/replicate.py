"""`replicate()`: one configuration trained with several seeds, declared in one line.

    models = replicate(train_lm("checkpoints/nano-lr6e-3", ...), seeds=(0, 1, 2))
    evals = evaluate("evaluations/nano-lr6e-3", model=models, datasets=[stories])
    StepRunner().run([*evals])

`replicate(handle, seeds)` returns `Replicates`: a tuple of handles, one per seed, each the handle with
its `seed` field set and `-seed<N>` added to its name (`checkpoints/nano-lr6e-3-seed1`). A train
step's `seed` sets both the initial weights and the order in which the data is read, the two sources
of training noise a replicate measures. Being a tuple, it goes wherever a list of steps does
(`StepRunner().run`, `marin run` finds it bound to a module-level name); `evaluate(name,
model=replicates, ...)` evaluates each (`name-seed<N>`), and `sweep_report(name, {"label": replicates})`
reports them as one configuration. Nothing else marks them: `marin compare` and the sweep report
recognise replicates from the key records, as runs whose keys differ only in seed fields
(`marin.evaluation.replicates`), so replicates declared by hand are found the same way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any

from marin.execution.errors import StepDefinitionError


class Replicates(tuple):
    """Handles of one configuration, one per seed (a tuple of them), with `seeds` and the base `name`."""

    seeds: tuple[int, ...]
    name: str

    def __new__(cls, name: str, handles: Iterable[Any], seeds: Iterable[int]) -> Replicates:
        made = super().__new__(cls, tuple(handles))
        made.seeds = tuple(seeds)
        made.name = name
        if len(made.seeds) != len(made):
            raise StepDefinitionError(f"replicates of {name!r}: one seed per handle")
        return made

    def __getnewargs__(self) -> tuple[Any, ...]:
        return (self.name, tuple(self), self.seeds)

    def map(self, make: Callable[[Any, int], Any], name: str | None = None) -> Replicates:
        """`make(handle, seed)` for each replicate: the steps that follow each seed's run (its evaluation)."""
        return Replicates(
            name or self.name, (make(h, s) for h, s in zip(self, self.seeds, strict=True)), self.seeds
        )


def seeded_name(name: str, seed: int) -> str:
    """The name of a replicate: `name-seed<N>`."""
    return f"{name}-seed{seed}"


def replicate(handle: Any, seeds: Iterable[int] = (0, 1, 2), field: str = "seed") -> Replicates:
    """The handle trained with each of `seeds`: the same configuration, with `field` (default `seed`)
    set and `-seed<N>` added to its name. At least two seeds: one measures no seed noise."""
    seeds = tuple(seeds)
    where = f"replicate({getattr(handle, 'name', handle)!r})"
    if not dataclasses.is_dataclass(handle) or not hasattr(handle, "name"):
        raise StepDefinitionError(
            f"{where}: give a step handle such as train_lm(...), got {type(handle).__name__}"
        )
    if field not in {f.name for f in dataclasses.fields(handle)}:
        raise StepDefinitionError(
            f"{where}: {type(handle).__name__} has no field {field!r} to set the seed with"
        )
    if (
        len(seeds) < 2
        or len(set(seeds)) != len(seeds)
        or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds)
    ):
        raise StepDefinitionError(
            f"{where}: seeds={seeds!r}; give two or more distinct ints (one seed measures no seed noise), "
            "e.g. seeds=(0, 1, 2)"
        )
    return Replicates(
        handle.name,
        (dataclasses.replace(handle, name=seeded_name(handle.name, s), **{field: s}) for s in seeds),
        seeds,
    )
