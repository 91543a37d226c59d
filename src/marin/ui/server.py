"""Starting the UI server: `marin ui` calls `serve`."""

from __future__ import annotations

import secrets

from marin.ui.app import UiConfig, create_app

TOKEN_ENV = "MARIN_UI_TOKEN"
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


class UiStartError(ValueError):
    """The server cannot start as asked (a public address without a token)."""


def check_binding(host: str, token: str | None) -> None:
    """Refuse to listen beyond this machine without a token: anyone who can reach it could read the prefix."""
    if host not in LOOPBACK and not token:
        raise UiStartError(
            f"--host {host} lets other machines reach the UI; give it a secret with --token T (or ${TOKEN_ENV}), "
            f"for example --token {secrets.token_urlsafe(16)}"
        )


def url_of(host: str, port: int, token: str | None) -> str:
    """The URL to open (with the token, which sets the cookie on first visit)."""
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/" + (f"?token={token}" if token else "")


def serve(config: UiConfig, host: str = "127.0.0.1", port: int = 8642, on_ready=print) -> None:
    """Serve `config` on host:port until interrupted; `on_ready(url)` is called once it listens."""
    import uvicorn

    check_binding(host, config.token)
    app = create_app(config)
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False))
    original_startup = server.startup

    async def startup(sockets=None):
        await original_startup(sockets)
        if server.started:
            on_ready(url_of(host, port, config.token))

    server.startup = startup
    server.run()
