"""The ownership check before SUCCESS reads the runner's own lease file and takes the rest from the
folder's listing (the one the manifest needs): a takeover's higher generation, or a missing file of
its own, means the lease is lost."""

import os

from marin.execution.lease import Lease, try_acquire


def _names(path) -> list[str]:
    return os.listdir(path)


def test_a_listing_with_our_file_and_no_higher_generation_means_still_held(tmp_path):
    lease = try_acquire(str(tmp_path), "s", timeout=60)
    assert isinstance(lease, Lease)
    (tmp_path / "out.txt").write_text("x")
    assert lease.still_held(names=_names(tmp_path)) and not lease.lost


def test_a_listing_that_shows_a_takeovers_generation_means_lost(tmp_path):
    lease = try_acquire(str(tmp_path), "s", timeout=60)
    (tmp_path / ".executor_lease.1").write_text("{}")  # another runner took the step over
    assert not lease.still_held(names=_names(tmp_path))
    assert lease.lost and not lease.still_held()


def test_a_listing_without_our_lease_file_means_lost(tmp_path):
    lease = try_acquire(str(tmp_path), "s", timeout=60)
    names = [n for n in _names(tmp_path) if not n.startswith(".executor_lease.")]
    assert not lease.still_held(names=names)


def test_a_lease_file_rewritten_by_another_runner_means_lost_even_when_the_listing_looks_held(tmp_path):
    lease = try_acquire(str(tmp_path), "s", timeout=60)
    other = Lease(str(tmp_path), 0, "another-token", "s", lease.acquired)
    (tmp_path / ".executor_lease.0").write_bytes(other._content(lease.acquired))
    assert not lease.still_held(names=_names(tmp_path))
