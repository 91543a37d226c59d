"""LocalCluster's warm workers: reused across tasks without leaking cwd/env or output, replaced when
one dies, never outliving a killed runner; and the echo of a running task's output to stderr."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from fray.cluster import LocalCluster, RemoteTaskError, ResourceConfig, TaskLostError
from fray.cluster.echo import LogEcho

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def cluster():
    c = LocalCluster(cpu=2, gpus=0)
    yield c
    c.shutdown(kill_running=True)


def _pid() -> int:
    return os.getpid()


def _say(text: str) -> int:
    print(text)
    print(f"{text} (stderr)", file=sys.stderr)
    return os.getpid()


def _mess_up_process_state(where: str) -> int:
    os.chdir(where)
    os.environ["FRAY_LEAKED"] = "yes"
    del os.environ["FRAY_KEPT"]
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - the worker must put its own back
    return os.getpid()


def _process_state() -> tuple[int, str, str | None, str | None]:
    print("visible")
    return os.getpid(), os.getcwd(), os.environ.get("FRAY_LEAKED"), os.environ.get("FRAY_KEPT")


def _pid_and_env(name: str) -> tuple[int, str | None]:
    return os.getpid(), os.environ.get(name)


def _die_now(how: str) -> None:
    print("dying", flush=True)
    if how == "exit":
        os._exit(3)
    os.kill(os.getpid(), signal.SIGKILL)


def _sleep_then_return(seconds: float) -> str:
    time.sleep(seconds)
    return "slept"


def test_tasks_reuse_a_warm_worker_process(cluster):
    first = cluster.submit(_pid, name="a").result(timeout=60)
    second = cluster.submit(_pid, name="b").result(timeout=60)
    assert first == second != os.getpid()


def test_each_task_of_one_worker_logs_only_its_own_output(cluster, tmp_path):
    pids = [
        cluster.submit(
            functools.partial(_say, f"hello from {n}"), name=n, log_path=str(tmp_path / f"{n}.log")
        ).result(timeout=60)
        for n in ("one", "two")
    ]
    assert pids[0] == pids[1]
    one, two = (tmp_path / "one.log").read_text(), (tmp_path / "two.log").read_text()
    assert "=== fray: task 'one' starting on" in one and f"pid {pids[0]}" in one
    assert "hello from one\n" in one and "hello from one (stderr)" in one and "two" not in one
    assert "hello from two\n" in two and "hello from two (stderr)" in two and "one" not in two


def test_cwd_environment_and_stdout_are_restored_after_each_task(cluster, tmp_path, monkeypatch):
    monkeypatch.setenv("FRAY_KEPT", "kept")
    first = cluster.submit(functools.partial(_mess_up_process_state, str(tmp_path)), name="messy").result(
        timeout=60
    )
    log = tmp_path / "after.log"
    pid, cwd, leaked, kept = cluster.submit(_process_state, name="after", log_path=str(log)).result(
        timeout=60
    )
    assert pid == first
    assert cwd == os.getcwd() != str(tmp_path)
    assert (leaked, kept) == (None, "kept")
    assert "visible" in log.read_text()


def test_env_var_task_gets_its_own_process_and_later_tasks_do_not_see_its_env(cluster):
    warm = cluster.submit(_pid, name="warm").result(timeout=60)
    resources = ResourceConfig.with_cpu(env_vars={"FRAY_LEAKED": "set"})
    own = cluster.submit(functools.partial(_pid_and_env, "FRAY_LEAKED"), name="env", resources=resources)
    own_pid, value = own.result(timeout=60)
    assert value == "set" and own_pid != warm
    assert cluster.submit(functools.partial(_pid_and_env, "FRAY_LEAKED"), name="plain").result(
        timeout=60
    ) == (warm, None)
    assert not psutil.pid_exists(own_pid)  # ended after its task


@pytest.mark.parametrize("how", ["exit", "sigkill"])
def test_a_dying_worker_fails_only_its_task_and_is_replaced(cluster, tmp_path, how):
    """A worker killed by a signal is lost (TaskLostError: the runner retries the step); one that the
    task's own code ended with an exit code failed (RemoteTaskError)."""
    one = ResourceConfig.with_cpu(1)
    warm = cluster.submit(_pid, name="warm").result(timeout=60)
    beside = cluster.submit(functools.partial(_sleep_then_return, 1.0), name="beside", resources=one)
    doomed = cluster.submit(
        functools.partial(_die_now, how), name="doomed", log_path=str(tmp_path / "d.log"), resources=one
    )
    error, said = (
        (RemoteTaskError, "exited with code 3") if how == "exit" else (TaskLostError, "killed by SIGKILL")
    )
    with pytest.raises(error, match=rf"(?s)task 'doomed'.*{said}.*dying"):
        doomed.result(timeout=60)
    assert beside.result(timeout=60) == "slept"
    after = [cluster.submit(_pid, name=f"after{i}").result(timeout=60) for i in range(2)]
    assert after[0] == after[1] and psutil.pid_exists(after[0])
    assert warm in after or not psutil.pid_exists(warm)


def test_shutdown_kill_running_fails_the_running_task(tmp_path):
    cluster = LocalCluster(cpu=1)
    running = cluster.submit(functools.partial(_sleep_then_return, 60), name="long")
    queued = cluster.submit(_pid, name="queued")
    time.sleep(0.5)
    cluster.shutdown(kill_running=True)
    with pytest.raises(TaskLostError, match="task 'long'"):
        running.result(timeout=10)
    assert queued.cancelled()


RUNNER = textwrap.dedent("""
    import functools, os, sys, time
    from pathlib import Path
    from fray.cluster import LocalCluster, ResourceConfig

    def pid():
        return os.getpid()

    def hang(path):
        Path(path).write_text(str(os.getpid()))
        time.sleep(300)

    control = Path(sys.argv[1])
    cluster = LocalCluster(cpu=2)
    (control / "idle.pid").write_text(str(cluster.submit(pid, name="quick").result()))
    cluster.submit(functools.partial(hang, str(control / "busy.pid")), name="hang",
                   resources=ResourceConfig.with_cpu(1))
    cluster.submit(functools.partial(hang, str(control / "own.pid")), name="own",
                   resources=ResourceConfig.with_cpu(env_vars={"X": "1"}))
    time.sleep(300)
""")


def test_a_sigkilled_runner_leaves_no_worker_behind(tmp_path):
    script = tmp_path / "runner.py"
    script.write_text(RUNNER)
    runner = subprocess.Popen([sys.executable, str(script), str(tmp_path)], stdout=subprocess.DEVNULL)
    try:
        files = [tmp_path / name for name in ("idle.pid", "busy.pid", "own.pid")]
        deadline = time.monotonic() + 60
        while not all(f.exists() and f.read_text() for f in files) and time.monotonic() < deadline:
            time.sleep(0.05)
        workers = [psutil.Process(int(f.read_text())) for f in files]
        assert all(w.ppid() == runner.pid for w in workers)
    finally:
        runner.kill()
        runner.wait()
    gone, alive = psutil.wait_procs(workers, timeout=10)
    assert not alive


def test_echo_shows_each_line_of_a_running_task_prefixed_with_its_name(tmp_path, capfd):
    cluster = LocalCluster(cpu=2, echo=True)

    def chatty():
        print("step 1/2 loss 3.21", flush=True)
        time.sleep(0.4)
        print("step 2/2 loss 2.90", flush=True)
        sys.stdout.write("no newline at the end")

    try:
        futures = [
            cluster.submit(chatty, name=f"train/{i}", log_path=str(tmp_path / f"{i}.log")) for i in range(2)
        ]
        for f in futures:
            f.result(timeout=60)
    finally:
        cluster.shutdown()
    err = capfd.readouterr().err.splitlines()
    for i in range(2):
        assert [line for line in err if line.startswith(f"[train/{i}]")] == [
            f"[train/{i}] step 1/2 loss 3.21",
            f"[train/{i}] step 2/2 loss 2.90",
            f"[train/{i}] no newline at the end",
        ]


def test_echo_writes_whole_lines_and_collapses_progress_bar_redraws(tmp_path, capsys):
    log = tmp_path / "task.log"
    log.write_bytes(b"=== header written before the task starts ===\n")
    echo = LogEcho(str(log), "tok", update_interval_s=3600)
    with open(log, "ab", buffering=0) as out:
        out.write(b"first line\nsecond ha")
        echo.pump()
        assert capsys.readouterr().err == "[tok] first line\n"
        out.write(b"lf\n\r 10%|#\r 20%|##\r 30%|###")
        echo.pump()
        assert capsys.readouterr().err == "[tok] second half\n[tok]  20%|##\n"
        out.write(b"\r 40%|####\r 50%|#####")
        echo.pump()  # within the update interval: no redraw shown
        assert capsys.readouterr().err == ""
        out.write(b"\r100%|##########\ndone\nlast words")
        echo.close()
    assert capsys.readouterr().err == "[tok] 100%|##########\n[tok] done\n[tok] last words\n"


def test_a_change_to_the_runners_environment_reaches_the_next_task(cluster, monkeypatch):
    assert (
        cluster.submit(functools.partial(_pid_and_env, "FRAY_LATER"), name="a").result(timeout=60)[1] is None
    )
    monkeypatch.setenv("FRAY_LATER", "one")
    assert (
        cluster.submit(functools.partial(_pid_and_env, "FRAY_LATER"), name="b").result(timeout=60)[1] == "one"
    )
    monkeypatch.setenv("FRAY_LATER", "two")
    assert (
        cluster.submit(functools.partial(_pid_and_env, "FRAY_LATER"), name="c").result(timeout=60)[1] == "two"
    )
    monkeypatch.delenv("FRAY_LATER")
    assert (
        cluster.submit(functools.partial(_pid_and_env, "FRAY_LATER"), name="d").result(timeout=60)[1] is None
    )
