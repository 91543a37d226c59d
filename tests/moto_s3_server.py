"""moto's S3 server, with its conditional creates made atomic as S3's own are.

moto answers a request carrying `If-None-Match: *` by looking the key up, then writing it: two
requests on two of its threads can both pass the look-up, and both "create" the object. S3 and GCS
decide such a precondition and the write as one step, and the engine's leases rest on that. Here
one lock is held around every request that carries `If-None-Match`, so two can never interleave.

    python tests/moto_s3_server.py HOST PORT
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import run_simple


def atomic_preconditions(app: Callable[..., Iterable[bytes]]) -> Callable[..., Iterable[bytes]]:
    """The WSGI `app`, with the requests that carry If-None-Match handled one at a time."""
    lock = threading.Lock()

    def serve(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if "HTTP_IF_NONE_MATCH" not in environ:
            return app(environ, start_response)
        with lock:  # the whole response is made inside: moto writes the object before it answers
            return list(app(environ, start_response))

    return serve


def main() -> None:
    host, port = sys.argv[1], int(sys.argv[2])
    app = DomainDispatcherApplication(create_backend_app)
    run_simple(host, port, atomic_preconditions(app), threaded=True, request_handler=MotoRequestHandler)


if __name__ == "__main__":
    main()
