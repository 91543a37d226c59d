"""The lease on a step's output: which runner is executing the step.

Lease files are numbered generations,
`.executor_lease.<n>`, inside the output directory:
- acquire: with no lease file, create generation 0 exclusively; if the highest generation is
  stale (no heartbeat for `timeout` seconds), or its holder is a dead process on this machine, create
  generation n+1 exclusively and delete the older ones. Exclusive create is `O_EXCL` locally and a
  conditional create on object stores (see `storage.create_exclusive`), so exactly one contender
  wins each generation; locally the file is hard-linked into place whole. After creating, the winner
  re-lists and backs off if a higher generation appeared meanwhile. A lease file that cannot be
  parsed counts as held by an unknown process whose last heartbeat is the file's mtime.
- holder: host + machine id (`/etc/machine-id`, else the boot id) + boot id + pid + process start
  time (on Linux counted from the boot, so that no step of the wall clock changes it). A holder's pid
  is checked for liveness only when its machine id (and host) are this machine's: two machines with
  one hostname never judge each other's pids; a holder of an earlier boot of this machine is dead. A
  heartbeat more than `timeout` in the future (a skewed clock) is not trusted: the lease is judged by
  its file's mtime instead.
- hold: the holder rewrites its file with a fresh heartbeat; it still holds the lease while its own
  file carries its token and no higher generation exists. Once lost, a lease stays lost.
- release: the holder deletes its own file.
- heartbeat: a renewal that fails is retried at the next beat; once renewals have failed for so
  long that the lease would go stale before the next beat, the holder gives the lease up, which
  stops its step (see `Lease.on_lost`) and fails it with `LeaseGivenUpError`.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import msgspec
import orjson

import storage
from marin.execution.errors import LeaseGivenUpError, UnreadableRecordError
from marin.execution.records import read_record
from marin.execution.status import HOST

logger = logging.getLogger("marin.execution")

LEASE_PREFIX = ".executor_lease."
_LEASE_RE = re.compile(r"^\.executor_lease\.(\d+)$")


def is_lease_file(name: str) -> bool:
    """Whether a file name in an output directory is a lease file."""
    return name.startswith(LEASE_PREFIX)


def _machine_id() -> str:
    """This machine's id: /etc/machine-id, else the kernel's boot id, else '' (pids never trusted)."""
    for path in ("/etc/machine-id", "/var/lib/dbus/machine-id", "/proc/sys/kernel/random/boot_id"):
        try:
            with open(path) as f:
                value = f.read(256).strip()
        except OSError:
            continue
        if value:
            return value
    return ""


MACHINE_ID = _machine_id()


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read(64).strip()
    except OSError:
        return ""


BOOT_ID = _boot_id()  # which boot of this machine a holder's pid and start time belong to
DEFAULT_LEASE_TIMEOUT_S = 60.0


class LeaseInfo(msgspec.Struct, frozen=True):
    """What a lease file says about its holder."""

    generation: int
    token: str
    host: str
    pid: int
    pid_start: float | None
    step: str
    acquired: float
    heartbeat: float
    machine: str = ""
    boot: str = ""
    written: float | None = None  # the file's mtime, read only when the heartbeat lies in the future

    def is_live(self, timeout: float, now: float | None = None) -> bool:
        """Held by a process that heartbeated within `timeout` and is not known to be dead.

        A heartbeat more than `timeout` in the future is judged by the file's mtime instead; the pid
        is checked only when the holder is on this very machine (machine id and host), and a holder
        of an earlier boot is dead."""
        now = now if now is not None else time.time()
        beat = self.heartbeat
        if beat - now > timeout:
            beat = self.written if self.written is not None else now - 2 * timeout - 1
        if now - beat > timeout:
            return False
        if self.machine and self.machine == MACHINE_ID and self.host == HOST:
            if self.boot and BOOT_ID and self.boot != BOOT_ID:
                return False  # a process of an earlier boot of this machine
            return process_alive(self.pid, self.pid_start)
        return True

    def describe(self) -> str:
        """'host:pid (heartbeat 3s ago)' for messages."""
        return f"{self.host}:{self.pid} (heartbeat {time.time() - self.heartbeat:.0f}s ago)"


def _lease_path(output_path: str, generation: int) -> str:
    return f"{output_path}/{LEASE_PREFIX}{generation}"


def _generations(output_path: str) -> list[int]:
    return sorted(int(m.group(1)) for n in storage.list_names(output_path) if (m := _LEASE_RE.match(n)))


def _read_lease(output_path: str, generation: int) -> LeaseInfo | None:
    path = _lease_path(output_path, generation)
    try:
        data = read_record(path)
        if data is None:
            return None
        d = orjson.loads(data)
        heartbeat = float(d["heartbeat"])
        written = storage.modified_time(path) if heartbeat > time.time() else None
        return LeaseInfo(
            generation,
            d["token"],
            d["host"],
            d["pid"],
            d.get("pid_start"),
            d["step"],
            float(d["acquired"]),
            heartbeat,
            str(d.get("machine") or ""),
            str(d.get("boot") or ""),
            written,
        )
    except (UnreadableRecordError, orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        # Unreadable (a writer that died mid-write, on a store without atomic creates): an unknown
        # holder whose last heartbeat is the file's mtime, so it goes stale after the timeout.
        written = storage.modified_time(path)
        written = time.time() if written is None else written
        return LeaseInfo(generation, "", "?", -1, None, "?", written, written, written=written)


def current_holder(output_path: str, timeout: float) -> LeaseInfo | None:
    """The live holder of the output's lease, or None when the lease is free or stale."""
    gens = _generations(output_path)
    if not gens:
        return None
    info = _read_lease(output_path, gens[-1])
    return info if info is not None and info.is_live(timeout) else None


@dataclass(eq=False)
class Lease:
    """A lease this process holds on one output path."""

    output_path: str
    generation: int
    token: str
    step: str
    acquired: float
    lost: bool = False
    on_lost: list[Callable[[], None]] = field(default_factory=list)
    given_up: LeaseGivenUpError | None = None  # set when the heartbeat gave the lease up
    listing: list[str] | None = None  # the folder's names, listed just after the lease was taken
    _notified: bool = field(default=False, repr=False)
    # Serialises renew and release, so a heartbeat can never re-create a just-released lease file.
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def path(self) -> str:
        """The lease file."""
        return _lease_path(self.output_path, self.generation)

    def _content(self, heartbeat: float) -> bytes:
        return orjson.dumps(
            {
                "token": self.token,
                "host": HOST,
                "machine": MACHINE_ID,
                "boot": BOOT_ID,
                "pid": os.getpid(),
                "pid_start": _own_start(),
                "step": self.step,
                "acquired": self.acquired,
                "heartbeat": heartbeat,
            }
        )

    def still_held(self, names: Iterable[str] | None = None) -> bool:
        """Whether this process still holds the lease; once False, always False.

        It holds it while its file carries its token and no higher generation exists (a takeover
        creates generation n+1 before it deletes n). `names`: the folder's file names as the caller
        listed them just before; a listing that shows no higher generation stands in for the
        `exists(n+1)` call (one round trip fewer), and one that lacks our own file means it is gone.
        """
        if self.lost:
            return False
        if names is not None:
            gens = {int(m.group(1)) for n in names if (m := _LEASE_RE.match(n))}
            if self.generation not in gens or max(gens) > self.generation:
                self._mark_lost()
                return False
        info = _read_lease(self.output_path, self.generation)
        if (
            info is None
            or info.token != self.token
            or (names is None and storage.exists(_lease_path(self.output_path, self.generation + 1)))
        ):
            self._mark_lost()
        return not self.lost

    def renew(self) -> bool:
        """Write a fresh heartbeat if still held; returns whether it is."""
        with self._lock:
            if not self.still_held():
                return False
            storage.write_atomic(self.path, self._content(time.time()))
            return True

    def release(self, just_checked: bool = False) -> None:
        """Give the lease up (delete our file if it is still ours).

        `just_checked`: `still_held()` said yes a moment ago (the step's last records were written
        under it), so the file is deleted without reading it again: one round trip instead of two.
        """
        with self._lock:
            if just_checked and not self.lost:
                storage.remove(self.path)
            else:
                info = _read_lease(self.output_path, self.generation)
                if info is not None and info.token == self.token:
                    storage.remove(self.path)
            self.lost = True

    def give_up(self, error: LeaseGivenUpError) -> None:
        """Treat the lease as lost because its heartbeat keeps failing: the step is stopped and fails
        with `error`. The lease file stays for the runner to record the failure under, then release."""
        with self._lock:
            if self.lost:
                return
            logger.warning("giving up the lease on %s: %s", self.output_path, error)
            self.given_up = error
            self.lost = True
            self._notify_lost()

    def file_is_current(self, timeout: float) -> bool:
        """Whether the lease file is still this holder's, fresh, and not taken over (even once lost)."""
        info = _read_lease(self.output_path, self.generation)
        return (
            info is not None
            and info.token == self.token
            and info.is_live(timeout)
            and not storage.exists(_lease_path(self.output_path, self.generation + 1))
        )

    def _mark_lost(self) -> None:
        if self.lost:
            return
        self.lost = True
        try:
            info = _read_lease(self.output_path, self.generation)
            if info is not None and info.token == self.token:
                storage.remove(self.path)  # our own heartbeat may have re-created it after a takeover
        finally:
            self._notify_lost()

    def _notify_lost(self) -> None:
        if self._notified:  # a give-up whose storage fails mid-way reaches here twice
            return
        self._notified = True
        for callback in list(self.on_lost):
            try:
                callback()
            except Exception:  # noqa: BLE001 - one failing callback must not keep the others from running
                logger.exception("a lease-lost callback for %s failed", self.output_path)


def try_acquire(
    output_path: str, step: str, timeout: float, assume_free: bool = False
) -> Lease | LeaseInfo | None:
    """Try once to take the lease on `output_path` (a directory that exists, or a folder on an object store).

    Returns the Lease when taken, the live holder's LeaseInfo when someone else holds it, or None
    when another contender won a race just now (try again). With `assume_free` (the plan found no
    folder) generation 0 is created without listing first; the listing after creating still backs
    off from a higher generation, so this only saves a round trip.
    """
    gens = [] if assume_free else _generations(output_path)
    new_gen = 0
    if gens:
        holder = _read_lease(output_path, gens[-1])
        if holder is not None and holder.is_live(timeout):
            return holder
        new_gen = gens[-1] + 1
    now = time.time()
    lease = Lease(output_path, new_gen, os.urandom(16).hex(), step, now)  # as random as a uuid4, cheaper
    try:
        created = storage.create_exclusive(lease.path, lease._content(now))
    except FileNotFoundError:  # a store with real folders, and none yet: made only when needed
        storage.makedirs(output_path)
        created = storage.create_exclusive(lease.path, lease._content(now))
    if not created:
        return None
    names = storage.list_names(output_path)
    later = sorted(int(m.group(1)) for n in names if (m := _LEASE_RE.match(n)))
    if later and later[-1] > new_gen:
        storage.remove(lease.path)
        return None
    for g in later:
        if g < new_gen:
            storage.remove(_lease_path(output_path, g))  # the stale holders we took over from
    lease.listing = [n for n in names if not (m := _LEASE_RE.match(n)) or int(m.group(1)) >= new_gen]
    return lease


# (pid, its start), read again in a forked child: another process, with a start of its own.
_own_start_cache: tuple[int, float | None] | None = None


def _own_start() -> float | None:
    global _own_start_cache
    pid = os.getpid()
    if _own_start_cache is None or _own_start_cache[0] != pid:
        _own_start_cache = (pid, process_start(pid))
    return _own_start_cache[1]


def process_start(pid: int) -> float | None:
    """When process `pid` started, as a figure no change of the wall clock moves: on Linux the seconds
    since this boot (the start time in /proc/PID/stat); elsewhere psutil's wall-clock start time.

    A wall-clock start time is the boot time plus the seconds since boot, and the kernel's boot time
    (/proc/stat `btime`, whole seconds) moves whenever the clock is stepped (NTP, a VM resumed): a
    live holder's start read after a step differs from the one it recorded by a whole second.
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            after_name = f.read().rsplit(b")", 1)[1].split()  # the name, in parentheses, may hold spaces
        return int(after_name[19]) / os.sysconf("SC_CLK_TCK")  # field 22, `starttime`, in clock ticks
    except (OSError, IndexError, ValueError):
        pass
    try:
        import psutil  # lazy: only a runner that takes a lease needs it

        return psutil.Process(pid).create_time()
    except Exception:
        return None


def process_alive(pid: int, started: float | None) -> bool:
    """Whether process `pid` on this host is alive and is the same process (start time) as recorded."""
    if pid <= 0:
        return True  # unknown holder: only the timeout can tell
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        import psutil

        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
    except psutil.NoSuchProcess:
        return False
    except Exception:
        return True
    now = process_start(pid) if started is not None else None
    return now is None or abs(now - started) < 1.0
