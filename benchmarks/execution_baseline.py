"""The same-run baseline of the execution benchmarks: calling step functions in a plain loop."""

from __future__ import annotations

import os
import time
from collections.abc import Callable


def plain_loop_seconds(fn: Callable[[str], object], root: str, count: int) -> float:
    """Seconds to call `fn(path)` for `count` fresh directories under `root` (made before timing)."""
    paths = [f"{root}/{i}" for i in range(count)]
    for p in paths:
        os.makedirs(p)
    t = time.perf_counter()
    for p in paths:
        fn(p)
    return time.perf_counter() - t
