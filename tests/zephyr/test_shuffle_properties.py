"""Property tests: group_by and deduplicate agree with plain Python for any input, shard count and
number of spilled runs (a tiny memory budget forces many sorted runs per shard)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zephyr import Dataset
from zephyr.shuffle import decode_key, encode_key

pairs = st.lists(st.tuples(st.integers(-5, 30) | st.text(max_size=3), st.integers(-1000, 1000)), max_size=400)
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
@given(data=pairs, **layout)
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
@given(data=pairs, **layout)
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
    assert decode_key(encode_key(key)) == key
    assert type(decode_key(encode_key(key))) is type(key)
