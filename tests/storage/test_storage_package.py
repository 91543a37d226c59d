"""The storage package: a leaf (imports no marin, zephyr or fray), globs, streams, copies, overlap."""

import gzip
import subprocess
import sys
import threading
import uuid

import pytest

import storage


def test_importing_storage_loads_neither_marin_zephyr_fray_nor_fsspec():
    probe = (
        "import sys, storage; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'marin', 'zephyr', 'fray', 'fsspec'}))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.fixture(params=["local", "memory"])
def root(request, tmp_path):
    return str(tmp_path) if request.param == "local" else f"memory://storage-{uuid.uuid4().hex[:8]}"


def test_list_files_matches_globs_and_names_what_matched_nothing(root):
    storage.makedirs(storage.join(root, "in"))
    for name in ("a.jsonl", "b.jsonl.gz", "c.txt"):
        storage.write_bytes(storage.join(root, "in", name), b"x")
    assert [storage.basename(p) for p in storage.list_files(storage.join(root, "in", "*.jsonl*"))] == [
        "a.jsonl",
        "b.jsonl.gz",
    ]
    assert storage.glob(storage.join(root, "in", "*.parquet")) == []
    with pytest.raises(storage.NoFilesMatch, match=r"no input files match .*\*\.parquet"):
        storage.list_files([storage.join(root, "in", "*.parquet")])


@pytest.mark.parametrize("name", ["part.jsonl", "part.jsonl.gz", "part.jsonl.zst"])
def test_atomic_write_compresses_by_extension_and_open_read_decompresses(root, name):
    path = storage.join(root, "out", name)
    with storage.open_write(path) as f:
        f.write(b"hello\n" * 1000)
    with storage.open_read(path) as f:
        assert f.read() == b"hello\n" * 1000
    assert storage.list_names(storage.join(root, "out")) == [name]  # no temporary file left
    if name.endswith(".gz"):
        assert gzip.decompress(storage.read_bytes(path)) == b"hello\n" * 1000


def test_an_atomic_write_that_fails_leaves_no_file(root):
    path = storage.join(root, "out", "part.jsonl")
    with pytest.raises(RuntimeError), storage.open_write(path) as f:
        f.write(b"half")
        raise RuntimeError("writer died")
    assert storage.list_names(storage.join(root, "out")) == []


def test_upload_download_read_tail_and_size(root, tmp_path):
    local = tmp_path / "log.txt"
    local.write_bytes(b"0123456789")
    remote = storage.join(root, "logs", "task.log")
    storage.makedirs(storage.join(root, "logs"))
    assert not storage.download(remote, str(tmp_path / "nothing.txt"))
    storage.upload(str(local), remote)
    assert storage.read_tail(remote, 4) == b"6789" and storage.size(remote) == 10
    assert storage.download(remote, str(tmp_path / "back.txt"))
    assert (tmp_path / "back.txt").read_bytes() == b"0123456789"
    with pytest.raises(FileNotFoundError):
        storage.read_tail(storage.join(root, "logs", "missing.log"), 4)


def test_open_file_writes_and_reads_bytes(root):
    path = storage.join(root, "frames.bin")
    storage.makedirs(root)
    with storage.open_file(path, "wb") as f:
        f.write(b"abc")
    with storage.open_file(path, "rb") as f:
        assert f.read() == b"abc"
    with pytest.raises(ValueError, match="mode 'rb' or 'wb'"):
        storage.open_file(path, "ab")


def test_overlapped_keeps_order_runs_at_once_off_local_disk_and_serially_on_it():
    seen: set[str] = set()

    def fn(x: int) -> int:
        seen.add(threading.current_thread().name)
        return x * x

    assert storage.overlapped(fn, range(50), where="/some/local/dir") == [x * x for x in range(50)]
    assert seen == {threading.current_thread().name}
    assert storage.overlapped(fn, range(50), where="s3://bucket/prefix") == [x * x for x in range(50)]
    assert any(name != threading.current_thread().name for name in seen)


def test_read_range_reads_a_slice_and_stops_at_the_end(root):
    path = storage.join(root, "tokens.bin")
    storage.makedirs(root)
    storage.write_bytes(path, bytes(range(10)))
    assert storage.read_range(path, 2, 5) == bytes([2, 3, 4])
    assert storage.read_range(path, 8, 20) == bytes([8, 9])
    with pytest.raises(FileNotFoundError):
        storage.read_range(storage.join(root, "missing.bin"), 0, 4)


def test_open_regular_reads_a_regular_file_and_refuses_links_fifos_and_folders(tmp_path):
    import os

    (tmp_path / "file.txt").write_bytes(b"regular")
    (tmp_path / "link.txt").symlink_to(tmp_path / "file.txt")
    os.mkfifo(tmp_path / "fifo")  # no writer: a plain open would block forever
    (tmp_path / "folder").mkdir()
    with storage.open_regular(str(tmp_path / "file.txt")) as f:
        assert f.read() == b"regular"
    for name, kind in (("link.txt", "symlink"), ("fifo", "FIFO"), ("folder", "directory")):
        with pytest.raises(storage.NotRegularFile) as refused:
            storage.open_regular(str(tmp_path / name))
        assert refused.value.kind == kind and refused.value.filename == str(tmp_path / name)
        assert refused.value.strerror == f"it is a {kind}, not a regular file"
    with pytest.raises(FileNotFoundError):
        storage.open_regular(str(tmp_path / "missing"))
    storage.write_bytes("memory://open-regular/x", b"store")
    with storage.open_regular("memory://open-regular/x") as f:  # an object store has only objects
        assert f.read() == b"store"


def test_a_walk_leaves_out_a_file_renamed_away_while_it_lists(tmp_path):
    """A lease renewal writes a temporary file beside the lease and renames it over: a walk of the
    folder that lists the temporary and stats it after the rename must not fail (this failed one
    cold run of the 10,000-step DAG: the step's manifest walk met its own heartbeat's temporary)."""
    import threading

    folder = tmp_path / "out"
    folder.mkdir()
    stop = threading.Event()

    def renew():
        while not stop.is_set():
            storage.write_atomic(str(folder / ".executor_lease.0"), b"heartbeat")

    thread = threading.Thread(target=renew)
    thread.start()
    try:
        for _ in range(3000):
            listed = dict(storage.walk_files(str(folder)))  # raised FileNotFoundError before
            assert set(listed) <= {".executor_lease.0"} | {n for n in listed if ".tmp-" in n}
    finally:
        stop.set()
        thread.join()
