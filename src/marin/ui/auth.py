"""The token every request to a `marin ui --token` server must carry."""

from __future__ import annotations

import hmac
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

TOKEN_COOKIE = "marin_ui_token"


class TokenGate:
    """ASGI middleware: every request must carry the token (a `?token=` query sets a cookie)."""

    def __init__(self, app: ASGIApp, token: str):
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        offered = request.query_params.get("token")
        if offered is not None and hmac.compare_digest(offered.encode(), self.token.encode()):
            params = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
            target = request.url.path + ("?" + urlencode(params) if params else "")
            response: Response = RedirectResponse(target, status_code=303)
            response.set_cookie(TOKEN_COOKIE, self.token, httponly=True, samesite="strict")
            await response(scope, receive, send)
            return
        cookie = request.cookies.get(TOKEN_COOKIE, "")
        if hmac.compare_digest(cookie.encode(), self.token.encode()):
            await self.app(scope, receive, send)
            return
        await PlainTextResponse(
            "this marin ui needs its token: open the URL `marin ui` printed (?token=...)", status_code=401
        )(scope, receive, send)
