"""Many calls at once: on an object store each call is a round trip, and waiting for them one after
another adds their latencies; a bounded thread pool keeps up to `MAX_IN_FLIGHT` of them in flight."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, TypeVar

from storage.files import read_bytes, write_bytes
from storage.paths import is_local

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

T = TypeVar("T")
R = TypeVar("R")

MAX_IN_FLIGHT = 64
_THREAD_PREFIX = "storage-overlap"
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _shared_pool() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                from concurrent.futures import ThreadPoolExecutor  # lazy: a local run never needs it

                _pool = ThreadPoolExecutor(max_workers=MAX_IN_FLIGHT, thread_name_prefix=_THREAD_PREFIX)
    return _pool


def overlapped(fn: Callable[[T], R], items: Iterable[T], *, where: str | None = None) -> list[R]:
    """`[fn(x) for x in items]`, in order, the calls made at once (up to MAX_IN_FLIGHT in flight).

    For calls that go to an object store. With `where` (the path the calls read under), they run one
    after another when it is local disk, where threads would only add overhead. A call made from
    inside one of the pool's own calls runs inline, so nesting cannot deadlock the pool.
    """
    items = list(items)
    if (
        len(items) < 2
        or (where is not None and is_local(where))
        or threading.current_thread().name.startswith(_THREAD_PREFIX)
    ):
        return [fn(x) for x in items]
    return list(_shared_pool().map(fn, items))


def read_many(paths: Iterable[str]) -> list[bytes | None]:
    """`read_bytes` of each path, in order: one after another locally, at once on other stores."""
    paths = list(paths)
    if all(is_local(p) for p in paths):
        return [read_bytes(p) for p in paths]
    return overlapped(read_bytes, paths)


def write_many(items: list[tuple[str, bytes]]) -> None:
    """`write_bytes` of each (path, data): one after another locally, at once on other stores."""
    if all(is_local(path) for path, _ in items):
        for path, data in items:
            write_bytes(path, data)
        return
    overlapped(lambda item: write_bytes(*item), items)
