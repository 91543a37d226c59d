"""Property tests: group_by and deduplicate agree with plain Python for any input, shard count and
number of spilled runs (a tiny memory budget forces many sorted runs per shard)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zephyr import Dataset, ShardFailedError
from zephyr.shuffle import decode_key, encode_key

pairs = st.lists(st.tuples(st.integers(-5, 30) | st.text(max_size=3), st.integers(-1000, 1000)), max_size=400)
# Keys Python's dict merges although their types differ: True/1/1.0, False/0/0.0/-0.0, (1, 2.0)/(True, 2).
numeric = st.integers(-2, 3) | st.booleans() | st.sampled_from([0.0, -0.0, 1.0, 2.0, -1.0, 0.5, -2.5, 1e20])
mixed_keys = numeric | st.tuples(numeric, numeric) | st.frozensets(numeric, max_size=3)
mixed_pairs = st.lists(st.tuples(mixed_keys, st.integers(-1000, 1000)), max_size=200)
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
    for key, value in data:
        expected.setdefault(key, []).append(value)  # records of a key keep their input order
    assert len(result) == len(expected)
    assert dict(result) == expected


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
    assert sorted(result, key=repr) == sorted(expected.values(), key=repr)


@SETTINGS
@given(data=st.lists(st.integers(0, 20) | st.text(max_size=2), max_size=200), num_shards=st.integers(1, 4))
def test_deduplicate_without_key_gives_the_distinct_records(data, num_shards):
    result = Dataset.from_list(data, num_shards=num_shards).deduplicate().collect(backend="sync", quiet=True)
    assert sorted(result, key=repr) == sorted(set(data), key=repr)


@given(st.recursive(st.integers() | st.text() | st.none() | st.booleans() | st.binary() | st.floats(allow_nan=False),
                    lambda inner: st.lists(inner, max_size=3).map(tuple), max_leaves=8))
def test_keys_survive_their_canonical_encoding(key):
    decoded = decode_key(encode_key(key))
    assert decoded == key
    assert encode_key(decoded) == encode_key(key)


@given(a=mixed_keys, b=mixed_keys)
def test_keys_encode_equal_exactly_when_python_calls_them_equal(a, b):
    assert (encode_key(a) == encode_key(b)) == (a == b)


def test_container_keys_encode_the_same_whatever_the_order_or_hash_seed():
    program = (
        "from zephyr.shuffle import encode_key;"
        "print(encode_key(frozenset(f'k{i}' for i in range(40))).hex(),"
        " encode_key({f'k{i}': i for i in range(40)}).hex())"
    )
    outputs = {
        subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True,
                       env={**os.environ, "PYTHONHASHSEED": seed}).stdout
        for seed in ("1", "2", "3")
    }
    assert len(outputs) == 1
    assert encode_key({"a": 1, "b": (2, 3)}) == encode_key({"b": (2.0, 3), "a": True})
    assert encode_key({1, 2}) == encode_key(frozenset({2.0, 1}))
    assert encode_key([1, 2]) != encode_key((1, 2))  # [1, 2] != (1, 2) in Python


class Opaque:
    """A key type zephyr cannot encode canonically."""


def test_an_unsupported_key_type_fails_the_job_naming_the_operation_and_type():
    with pytest.raises(ShardFailedError) as info:
        Dataset.from_list([1, 2]).group_by(lambda r: Opaque(), lambda k, rs: k).collect(backend="sync", quiet=True)
    assert info.value.error_type == "UnsupportedKeyError"
    assert info.value.attempts == 1  # a plan error: retrying cannot fix it
    assert "group_by(key=" in str(info.value) and "Opaque" in str(info.value)
