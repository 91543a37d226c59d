"""Ray token authentication for a client of an existing cluster.

Ray >= 2.5x starts a head with token authentication on whenever a token exists (`~/.ray/auth_token`,
created by any earlier local `ray.init()`), yet a client that connects to an explicit address, or
talks to the Jobs API, sends that token only when `RAY_AUTH_MODE=token` is set. marin's clients call
`use_token_if_available()` first, so `MARIN_CLUSTER=ray RAY_ADDRESS=...` and `marin submit` work
against such a head without the variable. A cluster without authentication ignores the token.
"""

from __future__ import annotations

import os

AUTH_MODE_ENV = "RAY_AUTH_MODE"


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
