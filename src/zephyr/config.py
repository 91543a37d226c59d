"""ZephyrConfig: how a pipeline executes (backend, workers, retries, memory), never what it computes."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass

from zephyr.errors import PlanError

BACKENDS = ("sync", "processes", "ray")


@dataclass(frozen=True)
class ZephyrConfig:
    """Execution settings. Outputs never depend on them: every backend writes the same bytes.

    backend: "processes" (a local pool over all cores, the default), "sync" (in-process, for
        debugging) or "ray" (one Ray task per shard on the cluster at `ray_address` / RAY_ADDRESS).
    num_workers: processes in the local pool; None means one per CPU core.
    max_retries: how many times a failing shard task is re-run before the job fails.
    memory_budget_bytes: per worker, how many bytes of records a shuffle buffers before it spills
        a sorted run to disk.
    spill_dir: where shuffles spill (any fsspec URL; shared storage on a multi-node Ray cluster);
        None means the system temporary directory.
    quiet: no progress output on stderr.
    start_method: how the local pool starts workers ("fork", "forkserver" or "spawn"); None forks
        from a driver that runs no other Python thread and uses a forkserver otherwise.
    """

    backend: str = "processes"
    num_workers: int | None = None
    max_retries: int = 2
    memory_budget_bytes: int = 256 * 1024 * 1024
    spill_dir: str | None = None
    ray_address: str | None = None
    quiet: bool = False
    start_method: str | None = None

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise PlanError(f"unknown zephyr backend {self.backend!r}; choose one of {', '.join(BACKENDS)}")
        if self.num_workers is not None and self.num_workers < 1:
            raise PlanError(f"num_workers must be at least 1, got {self.num_workers}")
        if self.max_retries < 0:
            raise PlanError(f"max_retries must be 0 or more, got {self.max_retries}")
        if self.memory_budget_bytes < 64 * 1024:
            raise PlanError(f"memory_budget_bytes must be at least 64 KiB, got {self.memory_budget_bytes}")

    @classmethod
    def from_env(cls) -> ZephyrConfig:
        """Defaults, overridden by ZEPHYR_BACKEND, ZEPHYR_NUM_WORKERS, ZEPHYR_MAX_RETRIES,
        ZEPHYR_MEMORY_BUDGET (bytes), ZEPHYR_SPILL_DIR and ZEPHYR_QUIET when set."""
        env = os.environ
        values: dict = {}
        if "ZEPHYR_BACKEND" in env:
            values["backend"] = env["ZEPHYR_BACKEND"]
        for name, field_name in (
            ("ZEPHYR_NUM_WORKERS", "num_workers"),
            ("ZEPHYR_MAX_RETRIES", "max_retries"),
            ("ZEPHYR_MEMORY_BUDGET", "memory_budget_bytes"),
        ):
            if name in env:
                values[field_name] = int(env[name])
        if "ZEPHYR_SPILL_DIR" in env:
            values["spill_dir"] = env["ZEPHYR_SPILL_DIR"]
        if env.get("ZEPHYR_QUIET", "").lower() in ("1", "true", "yes"):
            values["quiet"] = True
        return cls(**values)

    def with_overrides(self, **overrides) -> ZephyrConfig:
        """A copy with the given fields replaced; unknown names are an error that lists the valid ones."""
        names = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(overrides) - names)
        if unknown:
            raise PlanError(f"unknown zephyr option(s) {unknown}; valid options: {sorted(names)}")
        return dataclasses.replace(self, **overrides)

    def worker_count(self) -> int:
        """The size of the local process pool."""
        return self.num_workers or os.cpu_count() or 1


def resolve_config(config: ZephyrConfig | None, overrides: dict) -> ZephyrConfig:
    """The config a run uses: the one given (or the environment's), with keyword overrides applied."""
    return (config or ZephyrConfig.from_env()).with_overrides(**overrides)
