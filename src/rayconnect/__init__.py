"""One way to connect a process to Ray, shared by fray's RayCluster, zephyr's ray backend and `marin submit`.

Whichever of them connects a process first, the others find a connection that serves them:
- **Token authentication.** Ray >= 2.5x starts a head with token authentication on whenever a
  token exists (`~/.ray/auth_token`, created by any earlier local `ray.init()`), yet a client that
  connects to an explicit address, or talks to the Jobs API, sends that token only when
  `RAY_AUTH_MODE=token` is set. `use_token_if_available()` sets it when a token exists, so
  `RAY_ADDRESS=...` works against such a head without the variable. A cluster without
  authentication ignores the token.
- **The driver's own code on the workers' import path.** Pickles name functions by module, so
  workers must import what the driver imports from outside the Python installation (an
  experiment's directory, a test module): `connect()` passes `user_code_paths()` to Ray.

This package imports nothing of marin, fray or zephyr, and imports ray only when called.
"""

from __future__ import annotations

import os
import sys

AUTH_MODE_ENV = "RAY_AUTH_MODE"
ADDRESS_ENV = "RAY_ADDRESS"

__all__ = ["ADDRESS_ENV", "AUTH_MODE_ENV", "connect", "use_token_if_available", "user_code_paths"]


def connect(address: str | None = None, *, namespace: str | None = None, log_to_driver: bool = False) -> bool:
    """Connect this process to Ray unless it already is: `address`, else RAY_ADDRESS, else a new local
    Ray. `log_to_driver` forwards the workers' output to this process's stderr. Returns whether it
    connected now (False: an earlier connection, whoever made it, is kept as it is)."""
    import ray

    if ray.is_initialized():
        return False
    use_token_if_available()
    ray.init(
        address=address or os.environ.get(ADDRESS_ENV) or None,
        namespace=namespace,
        log_to_driver=log_to_driver,
        configure_logging=False,
        job_config=ray.job_config.JobConfig(code_search_path=user_code_paths()),
    )
    return True


def use_token_if_available() -> bool:
    """Turn Ray's token mode on for this process (and its children) when a token is available and
    `RAY_AUTH_MODE` is unset; an explicit `RAY_AUTH_MODE` is respected. Returns whether token mode is on."""
    mode = os.environ.get(AUTH_MODE_ENV)
    if mode is not None:
        return mode.lower() == "token"
    from ray._raylet import AuthenticationTokenLoader, Config

    if not AuthenticationTokenLoader.instance().has_token(ignore_auth_mode=True):
        return False
    os.environ[AUTH_MODE_ENV] = "token"
    Config.initialize("")  # ray read the mode when it was imported: make this process see it now
    return True


def user_code_paths() -> list[str]:
    """The driver's import path entries (real paths, in order, once each) that are existing folders
    outside the Python installation itself (sys.prefix, sys.base_prefix, sys.exec_prefix)."""
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    paths = []
    for entry in sys.path:
        real = os.path.realpath(entry or os.getcwd())
        if os.path.isdir(real) and not any(real == p or real.startswith(p + os.sep) for p in prefixes):
            paths.append(real)
    return list(dict.fromkeys(paths))
