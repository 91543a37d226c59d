"""Replicates: evaluations of models that differ only in their seeds are one configuration, several times.

Recognised from the key records (`.executor_info`), so no one has to declare them: an evaluation's
*configuration key* is its key record with the step's name left out, with the evaluated model (and
everything upstream of it) replaced by the model's configuration key, which is in turn its key record
without its name and without its seed fields. Two evaluations with the same configuration key differ
at most in the seeds of what they evaluate: they are replicates.

A seed field is one named `seed` or ending in `_seed` (`data_seed`, `init_seed`) at any depth of the
`hash_attrs` of the evaluated model or a step upstream of it: the trainer's `seed` (which sets the
initial weights and the data order), and the seed of any step the model depends on (a random cut of
its training data). The evaluation's own seeds (`bootstrap_seed`, the sampling seed) and those of its
evaluation data are part of how and on what it measures, so they stay in its configuration.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from marin.data.step_inputs import STEP_INPUT_PREFIX
from marin.execution.artifact import ExecutorInfo, read_info
from marin.execution.cache_key import canonical_json

_TRAILING_SEED = re.compile(r"[-_/. ]?(seed|s)[-_=]?\d+$")


def is_seed_field(name: str) -> bool:
    """Whether a field (a dotted path's last part) is a seed: `seed` or `*_seed`."""
    last = name.rsplit(".", 1)[-1]
    return last == "seed" or last.endswith("_seed")


def split_seeds(value: Any, path: str = "") -> tuple[Any, dict[str, Any]]:
    """`value` (a hash_attrs tree) without its seed fields, and those fields by dotted path."""
    if isinstance(value, Mapping):
        kept, seeds = {}, {}
        for k, v in value.items():
            where = f"{path}.{k}" if path else str(k)
            if is_seed_field(str(k)) and not isinstance(v, Mapping | list):
                seeds[where] = v
                continue
            kept[k], found = split_seeds(v, where)
            seeds.update(found)
        return kept, seeds
    if isinstance(value, list):
        items, seeds = [], {}
        for i, v in enumerate(value):
            item, found = split_seeds(v, f"{path}.{i}" if path else str(i))
            items.append(item)
            seeds.update(found)
        return items, seeds
    return value, {}


@dataclass(frozen=True)
class Configuration:
    """What an output is, seeds aside: `key` (a digest; equal keys are replicates) and the seed fields
    of the steps upstream of it, `{"<step>: <field path>": value}`."""

    key: str
    seeds: dict[str, Any]


def configuration_of(
    info: ExecutorInfo, read: Callable[[str], ExecutorInfo | None] = read_info, own_seeds: bool = False
) -> Configuration:
    """The configuration of the output whose `.executor_info` is `info`: its key record without its
    name, each dependency replaced by the dependency's configuration key, recursively. Seeds are taken
    out of the evaluated model and everything upstream of it (its initialisation, its data order, the
    sampling of its training data); an evaluation's own seeds and its evaluation data's stay (how and
    on what it measures). A trained model itself, `own_seeds=True`, is all model: its seeds go too."""
    seeds: dict[str, Any] = {}
    cache: dict[tuple[str, bool], str] = {}

    def upstream(name: str, path: str, strip: bool) -> str:
        if (path, strip) in cache:
            return cache[path, strip]
        dep = read(path)
        if dep is None or dep.key_record is None:
            cache[path, strip] = f"unknown:{name}:{dep.key if dep is not None else path}"
            return cache[path, strip]
        hash_attrs = dep.key_record.get("hash_attrs") or {}
        if strip:
            hash_attrs, found = split_seeds(hash_attrs)
            seeds.update({f"{name}: {k}": v for k, v in found.items()})
        cache[path, strip] = _digest(_record(dep, hash_attrs, lambda n, p: upstream(n, p, strip)))
        return cache[path, strip]

    hash_attrs = (info.key_record or {}).get("hash_attrs") or info.hash_attrs or {}
    if own_seeds:
        hash_attrs, found = split_seeds(hash_attrs)
        seeds.update({f"{info.name}: {k}": v for k, v in found.items()})
    model = _evaluated_step(info)
    own = _record(info, hash_attrs, lambda n, p: upstream(n, p, own_seeds or n == model))
    return Configuration(_digest(own), dict(sorted(seeds.items())))


def _evaluated_step(info: ExecutorInfo) -> str | None:
    """The name of the step an evaluation scores (its `model.step`), if it scores one."""
    model = (info.hash_attrs or {}).get("model")
    return model.get("step") if isinstance(model, Mapping) else None


def _record(info: ExecutorInfo, hash_attrs: Any, upstream: Callable[[str, str], str]) -> dict[str, Any]:
    """A key record without the step's name: each dependency by its configuration key, in order, and
    every mention of a dependency's name in hash_attrs (`model.step`, a dataset's step, a `step:NAME`
    input) by its place, since replicates' upstream steps have names of their own."""
    record = info.key_record or {}
    paths = {d.name: d.path for d in info.deps}
    names = [str(name) for name, _ in record.get("deps") or ()]
    deps = [upstream(name, paths[name]) if name in paths else key for name, key in record.get("deps") or ()]
    places = {name: f"<dependency {i}>" for i, name in enumerate(names)}
    places |= {
        f"{STEP_INPUT_PREFIX}{name}": f"{STEP_INPUT_PREFIX}<dependency {i}>" for i, name in enumerate(names)
    }
    return {
        "hash_attrs": _renamed(hash_attrs, places),
        "deps": deps,
        "code": record.get("code"),
        "inputs": record.get("inputs"),
    }


def _renamed(value: Any, places: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return places.get(value, value)
    if isinstance(value, Mapping):
        return {k: _renamed(v, places) for k, v in value.items()}
    if isinstance(value, list):
        return [_renamed(v, places) for v in value]
    return value


def _digest(record: Any) -> str:
    return hashlib.sha256(canonical_json(record)).hexdigest()


T = TypeVar("T")


def group(items: Sequence[T], configuration: Callable[[T], Configuration]) -> list[list[T]]:
    """`items` grouped by configuration key, in the order each configuration first appears."""
    groups: dict[str, list[T]] = {}
    for item in items:
        groups.setdefault(configuration(item).key, []).append(item)
    return list(groups.values())


def configuration_label(names: Sequence[str]) -> str:
    """A name for a group of replicates from its members' names (step names, or a sweep's labels): the
    last part of the name they share once a trailing seed marker (`-seed0`, `_s1`, ` seed=2`) is
    taken off, else their longest common prefix."""
    stripped = {_TRAILING_SEED.sub("", n).rsplit("/", 1)[-1] for n in names}
    if len(stripped) == 1 and next(iter(stripped)):
        return next(iter(stripped))
    short = [n.rsplit("/", 1)[-1] for n in names]
    prefix = short[0]
    for n in short[1:]:
        while not n.startswith(prefix):
            prefix = prefix[:-1]
    return prefix.rstrip("-_/.=") or short[0]
