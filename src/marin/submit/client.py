"""The connection to a cluster's Ray Jobs API, and the one-line errors talking to it gives."""

from __future__ import annotations

import os

from marin.execution.errors import MarinError

DEFAULT_ADDRESS = "http://127.0.0.1:8265"
ADDRESS_ENV = "RAY_API_SERVER_ADDRESS"


class SubmitError(MarinError):
    """An experiment could not be submitted: a file outside the working directory, a bad option."""


def _address(address: str | None) -> str:
    return address or os.environ.get(ADDRESS_ENV) or DEFAULT_ADDRESS


def _client(address: str | None):
    from ray.job_submission import JobSubmissionClient

    from rayconnect import use_token_if_available

    use_token_if_available()
    address = _address(address)
    try:
        return JobSubmissionClient(address)
    except Exception as exc:  # noqa: BLE001 - connection and authentication errors come in many types
        raise SubmitError(f"cannot use the Ray Jobs API at {address}: {_why(exc)}") from None


def _why(exc: BaseException) -> str:
    """One line saying what went wrong talking to the cluster, and what to do about it."""
    text = " ".join(str(exc).split())
    if "Authentication" in text or "Unauthorized" in text or "Forbidden" in text:
        return (
            "the cluster requires its auth token; copy the head's ~/.ray/auth_token to this machine "
            "(or set RAY_AUTH_TOKEN to its contents)"
        )
    if "Failed to connect" in text or "Connection refused" in text or "Cannot connect" in text:
        return (
            "nothing answers there; start a head with `.venv/bin/ray start --head --dashboard-host=127.0.0.1` "
            "or pass --address http://HEAD:8265"
        )
    return text[:300]
