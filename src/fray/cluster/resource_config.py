"""ResourceConfig: what a step needs to run (minimal; the fray issue completes it)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ResourceConfig:
    """The resources a step asks for."""

    cpu: float = 1.0

    @classmethod
    def with_cpu(cls, cpu: float = 1.0) -> ResourceConfig:
        """A CPU-only request."""
        return cls(cpu=cpu)

    def to_json(self) -> dict:
        """A JSON form for provenance records."""
        return {"cpu": self.cpu}
