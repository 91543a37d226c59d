"""hash_attrs_of: a config's key is every field not marked NOT_KEY, nested configs under the same rule."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import StrEnum

import pytest

from marin.execution.errors import StepDefinitionError
from marin.execution.keyed import NOT_KEY, hash_attrs_of, key_as


class Mode(StrEnum):
    FAST = "fast"


@dataclass(frozen=True)
class Source:
    path: str
    hub_only: str | None = None

    def describe(self) -> dict:
        return {"path": self.path} if self.hub_only is None else {"path": self.path, "rev": self.hub_only}


@dataclass(frozen=True)
class Inner:
    size: int
    threads: int = field(default=4, metadata=NOT_KEY)


@dataclass(frozen=True)
class Config:
    inner: Inner
    source: Source
    names: tuple[str, ...] = ("a", "b")
    mode: Mode = Mode.FAST
    weights: dict = field(default_factory=lambda: {"x": 1.0})
    ref: str = field(default="tok", metadata=key_as(lambda v: {"spec": v}))
    workers: int = field(default=2, metadata=NOT_KEY)
    backend: object = field(default=None, metadata=NOT_KEY)  # execution only: need not be JSON


def test_every_unmarked_field_is_keyed_in_json_and_marked_ones_never():
    config = Config(Inner(3), Source("/data"), backend=object())
    assert hash_attrs_of(config) == {
        "inner": {"size": 3},
        "source": {"path": "/data"},
        "names": ["a", "b"],
        "mode": "fast",
        "weights": {"x": 1.0},
        "ref": {"spec": "tok"},
    }
    assert hash_attrs_of(dataclasses.replace(config, workers=64, inner=Inner(3, threads=1))) == hash_attrs_of(
        config
    )
    assert hash_attrs_of(dataclasses.replace(config, inner=Inner(4))) != hash_attrs_of(config)


def test_a_value_with_no_key_form_is_an_error_naming_the_field():
    @dataclass(frozen=True)
    class Bad:
        handle: object

    with pytest.raises(StepDefinitionError, match=r"Bad\.handle is a object.*NOT_KEY"):
        hash_attrs_of(Bad(object()))
