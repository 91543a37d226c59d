"""Ray token authentication for a client of an existing cluster (`marin submit`'s Jobs API client).

The helper lives in the `rayconnect` leaf package, which fray's RayCluster and zephyr's ray backend
connect through; this public fray module names it for marin's callers (see `rayconnect` for why a
client needs it).
"""

from rayconnect import use_token_if_available

__all__ = ["use_token_if_available"]
