"""Property tests: group_by and deduplicate agree with plain Python for any input, shard count and
number of spilled runs (a tiny memory budget forces many sorted runs per shard)."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from collections import Counter
from datetime import UTC, date, datetime, time, timedelta, timezone
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zephyr import Dataset, ShardFailedError, UnsupportedKeyError
from zephyr.shuffle import encode_key

pairs = st.lists(st.tuples(st.integers(-5, 30) | st.text(max_size=3), st.integers(-1000, 1000)), max_size=400)
UTC, PLUS_TWO = UTC, timezone(timedelta(hours=2))
# Keys Python's == calls equal although their types differ: True/1/1.0/Decimal("1")/numpy.int64(1),
# 0.5/Decimal("0.5")/Fraction(1, 2)/numpy.float32(0.5), 12:00Z/14:00+02:00; and near misses that
# differ: Decimal("0.1")/0.1, naive/aware datetimes, a date and its midnight.
python_numbers = (
    st.integers(-2, 3)
    | st.booleans()
    | st.sampled_from([0.0, -0.0, 1.0, 2.0, -1.0, 0.5, -2.5, 1e20, 0.1, float("inf")])
)
# Decimal and numpy scalars are never drawn into one list: Python itself cannot compare them
# (Decimal("1.0") == numpy.int64(1) raises TypeError), so no plain-dict reference exists for that mix.
decimals = st.sampled_from(
    [
        Decimal("1.0"),
        Decimal("-0"),
        Decimal("0.5"),
        Decimal("0.1"),
        Decimal("2E+0"),
        Decimal("-2.50"),
        Decimal("Infinity"),
        Fraction(1, 2),
        Fraction(1, 3),
    ]
)
numpy_numbers = st.sampled_from(
    [
        np.int64(1),
        np.int32(-2),
        np.uint8(2),
        np.float64(0.5),
        np.float32(-2.5),
        np.float64(2.0),
        np.bool_(True),
        np.bool_(False),
    ]
)
temporal = st.sampled_from(
    [
        datetime(2024, 1, 1, 12),
        datetime(2024, 1, 1, 12, tzinfo=UTC),
        datetime(2024, 1, 1, 14, tzinfo=PLUS_TWO),
        datetime(2024, 1, 1),
        date(2024, 1, 1),
        date(2024, 1, 2),
        time(12),
        time(12, tzinfo=UTC),
        time(14, tzinfo=PLUS_TWO),
        timedelta(0),
        timedelta(days=1),
        timedelta(hours=24),
        timedelta(microseconds=-1),
    ]
)


def _keys(numeric):
    scalars = numeric | temporal | st.none() | st.sampled_from(["a", b"a", ""])
    return scalars | st.tuples(scalars, scalars) | st.frozensets(scalars, max_size=3)


def _pairs(numeric):
    return st.lists(st.tuples(_keys(numeric), st.integers(-1000, 1000)), max_size=200)


mixed_keys = _keys(python_numbers | decimals) | _keys(
    python_numbers | numpy_numbers
)  # a frozenset cannot mix them either
mixed_pairs = _pairs(python_numbers | decimals) | _pairs(python_numbers | numpy_numbers)
layout = {
    "num_shards": st.integers(1, 4),
    "out_shards": st.integers(1, 5),
    "budget": st.sampled_from([64 * 1024, 256 * 1024 * 1024]),
}
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def first(pair):
    return pair[0]


def values_in_order(key, pairs_of_key):
    return (key, [value for _, value in pairs_of_key])


def exactly(key):
    """`key` with the type of every part alongside its value: 1 and 1.0 differ here."""
    if isinstance(key, tuple):
        return tuple(exactly(k) for k in key)
    if isinstance(key, frozenset):
        return frozenset(exactly(k) for k in key)
    return type(key), key


@SETTINGS
@given(data=pairs | mixed_pairs, **layout)
def test_group_by_matches_a_python_dict_of_lists(data, num_shards, out_shards, budget):
    padded = [(k, v, "x" * 200) for k, v in data]  # larger records: the small budget spills several runs
    result = (
        Dataset.from_list(padded, num_shards=num_shards)
        .map(lambda r: (r[0], r[1]))
        .group_by(first, values_in_order, num_shards=out_shards)
        .collect(backend="sync", quiet=True, memory_budget_bytes=budget)
    )
    expected: dict = {}
    first_keys: dict = {}
    for key, value in data:
        expected.setdefault(key, []).append(value)  # records of a key keep their input order
        first_keys.setdefault(key, key)
    assert len(result) == len(expected)
    assert dict(result) == expected
    # The reducer got the key of its group's first record (input order), type and all.
    assert {exactly(key) for key, _ in result} == {exactly(key) for key in first_keys.values()}


@SETTINGS
@given(data=pairs | mixed_pairs, **layout)
def test_deduplicate_keeps_the_first_record_of_each_key(data, num_shards, out_shards, budget):
    result = (
        Dataset.from_list(data, num_shards=num_shards)
        .deduplicate(first, num_shards=out_shards)
        .collect(backend="sync", quiet=True, memory_budget_bytes=budget)
    )
    expected: dict = {}
    for key, value in data:
        expected.setdefault(key, (key, value))
    # Compared as multisets: a frozenset's repr follows its iteration order, which differs between
    # equal sets built in another order (and None's hash differs between processes), so sorting by
    # repr could put equal records in different places.
    assert Counter(result) == Counter(expected.values())


@SETTINGS
@given(data=st.lists(st.integers(0, 20) | st.text(max_size=2), max_size=200), num_shards=st.integers(1, 4))
def test_deduplicate_without_key_gives_the_distinct_records(data, num_shards):
    result = Dataset.from_list(data, num_shards=num_shards).deduplicate().collect(backend="sync", quiet=True)
    assert sorted(result, key=repr) == sorted(set(data), key=repr)


def plain(key):
    """`key` with numpy scalars as the Python numbers they hold: numpy's == broadcasts over tuples."""
    if isinstance(key, tuple):
        return tuple(plain(k) for k in key)
    if isinstance(key, frozenset):
        return frozenset(plain(k) for k in key)
    return key.item() if isinstance(key, np.generic) else key


@given(a=mixed_keys, b=mixed_keys)
def test_keys_encode_equal_exactly_when_python_calls_them_equal(a, b):
    assert (encode_key(a) == encode_key(b)) == (plain(a) == plain(b))


def test_container_keys_encode_the_same_whatever_the_order_or_hash_seed():
    program = (
        "from zephyr.shuffle import encode_key;"
        "print(encode_key(frozenset(f'k{i}' for i in range(40))).hex(),"
        " encode_key({f'k{i}': i for i in range(40)}).hex())"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", program],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2", "3")
    }
    assert len(outputs) == 1
    assert encode_key({"a": 1, "b": (2, 3)}) == encode_key({"b": (2.0, 3), "a": True})
    assert encode_key({1, 2}) == encode_key(frozenset({2.0, 1}))
    assert encode_key([1, 2]) != encode_key((1, 2))  # [1, 2] != (1, 2) in Python


def test_numpy_bools_pandas_nanoseconds_and_extreme_datetimes_encode_as_python_compares_them():
    pd = pytest.importorskip("pandas")
    assert encode_key(np.bool_(True)) == encode_key(1.0) != encode_key(np.bool_(False))
    stamp = pd.Timestamp("2024-01-01 12:00:00.000000001", tz="UTC")
    assert encode_key(stamp) != encode_key(datetime(2024, 1, 1, 12, tzinfo=UTC))  # they differ by 1 ns
    assert encode_key(stamp.floor("us")) == encode_key(datetime(2024, 1, 1, 12, tzinfo=UTC))
    assert encode_key(pd.Timedelta(1, "ns")) != encode_key(timedelta(0))
    assert encode_key(datetime.max.replace(tzinfo=PLUS_TWO)) != encode_key(datetime.max)  # no overflow
    assert encode_key(float("nan")) == encode_key(Decimal("NaN"))  # all NaNs are one key


def test_unsupported_key_error_survives_pickling():
    error = pickle.loads(pickle.dumps(UnsupportedKeyError(complex, "group_by(key=f, reducer=g)")))
    assert isinstance(error, UnsupportedKeyError)
    assert (error.key_type, error.op) == (complex, "group_by(key=f, reducer=g)")
    assert str(error).startswith("group_by(key=f, reducer=g): shuffle keys of type builtins.complex")


class Opaque:
    """A key type zephyr cannot encode canonically."""


def test_an_unsupported_key_type_fails_the_job_naming_the_operation_and_type():
    with pytest.raises(ShardFailedError) as info:
        Dataset.from_list([1, 2]).group_by(lambda r: Opaque(), lambda k, rs: k).collect(
            backend="sync", quiet=True
        )
    assert info.value.error_type == "UnsupportedKeyError"
    assert info.value.attempts == 1  # a plan error: retrying cannot fix it
    assert "group_by(key=" in str(info.value) and "Opaque" in str(info.value)
