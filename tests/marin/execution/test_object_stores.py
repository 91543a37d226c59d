"""The engine's contract on object stores: the same suite against local disk, moto's S3 server and
fake-gcs-server (real HTTP on 127.0.0.1, real s3fs / gcsfs clients), with runners as real processes.

Each server is started by the `store` fixture on a free port and stopped after the module.
"""

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid

import pytest
from object_stores import conditional_create_missing, environment, gcs_server, s3_server

import storage
from marin.execution.records import read_record_json

STORES = ["local", "s3", "gs"]

# Every execution of a step appends its name to COUNTER (a local file); a step named in HANG writes
# its first part, signals STARTED, then sleeps until killed. Outputs go through `storage`, so they land
# in the bucket.
DAG_SCRIPT = textwrap.dedent("""
    import os, sys, time
    import storage
    from marin.execution.step_spec import StepSpec
    from marin.execution.step_runner import StepRunner

    def work(path):
        name = storage.basename(path).rsplit("-", 1)[0]
        with open(os.environ["COUNTER"], "a") as f:
            f.write(f"{name} {os.getpid()}\\n")
        storage.write_atomic(storage.join(path, "part-0.txt"), b"first half")
        if name == os.environ.get("HANG"):
            with open(os.environ["STARTED"], "w") as f:
                f.write(str(os.getpid()))
            time.sleep(600)
        time.sleep(float(os.environ.get("STEP_S", "0")))
        storage.write_atomic(storage.join(path, "part-1.txt"), name.encode())
        return {"name": name}

    def build(layers, width):
        steps, previous = [], []
        for layer in range(layers):
            version = {"v": os.environ["VERSION"]} if "VERSION" in os.environ else {}
            current = [StepSpec(name=f"s{layer}x{i}", fn=work, hash_attrs={"l": layer, "i": i, **version},
                                deps=[previous[i], previous[(i + 1) % width]] if previous else [])
                       for i in range(width)]
            steps += current
            previous = current
        return steps

    if __name__ == "__main__":
        runner = StepRunner(prefix=sys.argv[1], max_concurrent=4, progress=False)
        steps = build(int(os.environ.get("LAYERS", "2")), int(os.environ.get("WIDTH", "2")))
        runner.run(steps)
""")


@pytest.fixture(scope="module", params=STORES)
def store(request, tmp_path_factory):
    """The root (a local folder or a bucket URL) of one store, with the env that reaches it set."""
    if request.param == "local":
        yield str(tmp_path_factory.mktemp("local-store"))
        return
    server_of = {"s3": s3_server, "gs": gcs_server}[request.param]
    with server_of() as server, environment(server.env):
        yield f"{server.scheme}://{server.bucket}"


def _needs_conditional_create(root):
    """Skip, saying why, where the server lacks the precondition that exactly-once rests on."""
    if missing := conditional_create_missing(root):
        pytest.skip(missing)


@pytest.fixture
def dag(store, tmp_path):
    """Start runner processes on a fresh prefix in `store`; read back which steps ran."""
    script = tmp_path / "dag.py"
    script.write_text(DAG_SCRIPT)
    prefix = storage.join(store, f"run-{uuid.uuid4().hex[:8]}")
    counter, started = tmp_path / "counter.txt", tmp_path / "started"

    def start(**env):
        full_env = {
            **os.environ,
            "COUNTER": str(counter),
            "STARTED": str(started),
            **{k: str(v) for k, v in env.items()},
        }
        return subprocess.Popen(
            [sys.executable, str(script), prefix],
            env=full_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )

    def executions():
        return [line.split()[0] for line in counter.read_text().splitlines()] if counter.exists() else []

    def wait_started(proc, timeout=120):
        deadline = time.monotonic() + timeout
        while not (started.exists() and started.read_text()):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the hanging step never started"
            time.sleep(0.05)

    def output(name):
        (match,) = [n for n in storage.list_names(prefix) if n.rsplit("-", 1)[0] == name]
        return storage.join(prefix, match)

    start.prefix = prefix
    return start, executions, wait_started, output


def _finish(proc, timeout=300):
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err
    return out


def _status(output):
    return read_record_json(storage.join(output, ".executor_status"))


def _marin(*args):
    done = subprocess.run(
        [sys.executable, "-m", "marin.cli", *args], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_run_then_rerun_is_fully_cached(dag):
    start, executions, _, output = dag
    _finish(start())
    assert sorted(executions()) == ["s0x0", "s0x1", "s1x0", "s1x1"]
    assert storage.read_bytes(storage.join(output("s1x0"), "part-1.txt")) == b"s1x0"
    assert _status(output("s1x1"))["state"] == "SUCCESS"
    _finish(start())
    assert len(executions()) == 4  # the rerun ran nothing


def test_two_runner_processes_race_and_run_each_step_exactly_once(dag, store):
    _needs_conditional_create(store)
    start, executions, _, output = dag
    env = {"LAYERS": 3, "WIDTH": 4, "STEP_S": 0.05}
    first, second = start(**env), start(**env)
    _finish(first)
    _finish(second)
    expected = sorted(f"s{layer}x{i}" for layer in range(3) for i in range(4))
    assert sorted(executions()) == expected  # 12 steps, each executed once across both runners
    assert all(_status(output(name))["state"] == "SUCCESS" for name in expected)


def test_kill_9_of_a_runner_then_a_new_runner_takes_the_step_over(dag):
    start, executions, wait_started, output = dag
    runner = start(HANG="s0x0", LAYERS=1, WIDTH=1)
    wait_started(runner)
    os.killpg(runner.pid, signal.SIGKILL)  # the runner and its workers, as a machine loss would
    runner.wait()
    hung = output("s0x0")
    assert _status(hung)["state"] == "RUNNING"
    assert [n for n in storage.list_names(hung) if n.startswith(".executor_lease")]  # the dead holder's lease
    _finish(start(LAYERS=1, WIDTH=1))  # a dead process on this machine: its lease is taken over at once
    status = _status(hung)
    assert [e["state"] for e in status["events"]] == ["RUNNING", "RUNNING", "SUCCESS"]
    assert storage.read_bytes(storage.join(hung, "part-1.txt")) == b"s0x0"
    assert not [n for n in storage.list_names(hung) if n.startswith(".executor_lease")]
    assert executions() == ["s0x0", "s0x0"]


def test_exclusive_create_under_a_race_has_one_winner_and_whole_bytes(store):
    _needs_conditional_create(store)
    path = storage.join(store, f"race-{uuid.uuid4().hex[:8]}", "lease")
    storage.makedirs(storage.parent(path))
    wins, barrier = [], threading.Barrier(8)

    def contend(i):
        barrier.wait()
        if storage.create_exclusive(path, f"contender {i} ".encode() * 100):
            wins.append(i)

    threads = [threading.Thread(target=contend, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1
    assert storage.read_bytes(path) == f"contender {wins[0]} ".encode() * 100
    assert not storage.create_exclusive(path, b"late")  # an existing object is never overwritten
    assert storage.read_bytes(path) == f"contender {wins[0]} ".encode() * 100


def test_atomic_writes_are_never_seen_half_done(store):
    path = storage.join(store, f"atomic-{uuid.uuid4().hex[:8]}", ".executor_status")
    storage.makedirs(storage.parent(path))
    versions = [json.dumps({"n": n, "pad": "x" * 50_000}).encode() for n in range(10)]
    storage.write_atomic(path, versions[0])
    seen, done = [], threading.Event()

    def read():
        while not done.is_set():
            seen.append(storage.read_bytes(path))

    reader = threading.Thread(target=read)
    reader.start()
    for data in versions[1:]:
        storage.write_atomic(path, data)
    done.set()
    reader.join()
    assert seen and all(data in versions for data in seen)
    assert storage.read_bytes(path) == versions[-1]


@pytest.mark.call_limit(120)
def test_marin_status_info_and_gc_on_the_store(dag):
    start, _, _, output = dag
    _finish(start(LAYERS=1, WIDTH=2, VERSION=1))
    old = {n for n in storage.list_names(start.prefix) if n.startswith("s0x")}
    _finish(start(LAYERS=1, WIDTH=2, VERSION=2))  # a second version of each name: the first is garbage
    latest = {n for n in storage.list_names(start.prefix) if n.startswith("s0x")} - old
    assert len(old) == len(latest) == 2
    table = _marin("status", start.prefix)
    assert "s0x0" in table and "s0x1" in table and "SUCCESS" in table
    info = _marin("info", storage.join(start.prefix, sorted(latest)[0]))
    assert "s0x0" in info
    listed = _marin("gc", start.prefix)  # a dry run by default: lists, deletes nothing
    assert all(name in listed for name in old) and not any(name in listed for name in latest), listed
    assert old <= set(storage.list_names(start.prefix))
    deleted = _marin("gc", start.prefix, "--yes")
    assert "reclaimed" in deleted, deleted
    remaining = set(storage.list_names(start.prefix))
    assert not old & remaining, deleted  # the older versions are gone from the bucket
    for name in latest:  # the latest outputs are never collected
        assert _status(storage.join(start.prefix, name))["state"] == "SUCCESS", deleted


def test_exclusive_create_is_the_stores_precondition_not_a_check_then_write(store, monkeypatch):
    if storage.is_local(store):
        pytest.skip("local disk uses a hard link, covered in test_leases.py")
    _needs_conditional_create(store)
    path = storage.join(store, f"precondition-{uuid.uuid4().hex[:8]}", "lease")
    fs, _ = storage.fs_and_path(path)

    def no_checks(*args, **kwargs):
        raise AssertionError("create_exclusive looked before writing")

    for method in ("exists", "_exists", "isfile", "_isfile"):
        monkeypatch.setattr(fs, method, no_checks)
    assert storage.create_exclusive(path, b"first")
    assert not storage.create_exclusive(path, b"second")  # refused by the server (HTTP 412)
    monkeypatch.undo()
    assert storage.read_bytes(path) == b"first"
    assert storage.CONDITIONAL_CREATE[store.split("://")[0]] in ("ifGenerationMatch=0", "If-None-Match: *")
