"""hash_attrs_of: a config's key is its fields less the execution-only ones and those left at their default."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import StrEnum
from typing import ClassVar

import pytest

from marin.execution.errors import StepDefinitionError
from marin.execution.keyed import NOT_KEY, hash_attrs_of, key_as


class Mode(StrEnum):
    FAST = "fast"
    SLOW = "slow"


@dataclass(frozen=True)
class Source:
    path: str
    hub_only: str | None = None

    def describe(self) -> dict:
        return {"path": self.path} if self.hub_only is None else {"path": self.path, "rev": self.hub_only}


@dataclass(frozen=True)
class Inner:
    size: int
    scale: float = 1.0
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


def test_set_fields_are_keyed_in_json_and_defaults_and_marked_ones_never():
    config = Config(
        Inner(3, scale=2), Source("/data"), names=("c",), mode=Mode.SLOW, weights={"y": 2}, ref="other"
    )
    assert hash_attrs_of(config) == {
        "inner": {"size": 3, "scale": 2},
        "source": {"path": "/data"},
        "names": ["c"],
        "mode": "slow",
        "weights": {"y": 2},
        "ref": {"spec": "other"},
    }
    assert hash_attrs_of(
        dataclasses.replace(config, workers=64, inner=Inner(3, 2, threads=1))
    ) == hash_attrs_of(config)
    assert hash_attrs_of(dataclasses.replace(config, inner=Inner(4, 2))) != hash_attrs_of(config)
    # every default (a plain value, a factory's, a key_as form, nested) stays out
    assert hash_attrs_of(Config(Inner(3), Source("/data"))) == {
        "inner": {"size": 3},
        "source": {"path": "/data"},
    }
    # a value equal to the default as JSON is the default: 1 and 1.0 are one value
    assert hash_attrs_of(Inner(3, scale=1)) == {"size": 3}


@dataclass(frozen=True)
class Published:
    size: int
    lr: float = 0.1


@dataclass(frozen=True)
class PublishedThenAnOption:
    """`Published` after an upgrade added an option whose default keeps the old behaviour."""

    size: int
    lr: float = 0.1
    dropout: float = 0.0


def test_adding_an_option_keeps_every_key_of_the_configs_that_leave_it_at_its_default():
    for lr in (0.1, 0.3):
        assert hash_attrs_of(PublishedThenAnOption(5, lr)) == hash_attrs_of(Published(5, lr))
    assert hash_attrs_of(PublishedThenAnOption(5, dropout=0.1)) == {"size": 5, "dropout": 0.1}


@dataclass(frozen=True)
class Legacy:
    KEYED_AT_DEFAULT: ClassVar[tuple[str, ...]] = ("lr", "flag")

    size: int
    lr: float = 0.1
    flag: bool = False
    added_later: int = 0
    format: int = field(default=2, init=False)


def test_keyed_at_default_fields_and_constants_enter_at_any_value_new_options_only_when_set():
    assert hash_attrs_of(Legacy(5)) == {"size": 5, "lr": 0.1, "flag": False, "format": 2}
    assert hash_attrs_of(Legacy(5, added_later=3))["added_later"] == 3


def test_keyed_at_default_naming_no_field_is_an_error():
    @dataclass(frozen=True)
    class Typo:
        KEYED_AT_DEFAULT: ClassVar[tuple[str, ...]] = ("lrr",)
        lr: float = 0.1

    with pytest.raises(StepDefinitionError, match=r"Typo.KEYED_AT_DEFAULT names \['lrr'\]"):
        hash_attrs_of(Typo())


def test_a_value_with_no_key_form_is_an_error_naming_the_field():
    @dataclass(frozen=True)
    class Bad:
        handle: object

    with pytest.raises(StepDefinitionError, match=r"Bad\.handle is a object.*NOT_KEY"):
        hash_attrs_of(Bad(object()))
