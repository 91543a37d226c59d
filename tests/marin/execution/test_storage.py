"""Local exclusive creates and atomic writes: which link() errors fall back, NFS replays, no temp files left."""

import errno
import os

import pytest

import storage


def _linking(monkeypatch, error, link_first=False):
    """Fault injection: link() raises `error` (after really linking, with `link_first`: an NFS replay)."""
    real_link = os.link

    def link(src, dst):
        if link_first:
            real_link(src, dst)
        raise error

    monkeypatch.setattr(os, "link", link)


def test_a_replayed_nfs_link_counts_as_created(tmp_path, monkeypatch):
    _linking(monkeypatch, FileExistsError(errno.EEXIST, "File exists"), link_first=True)
    target = tmp_path / "lease"
    assert storage.create_exclusive(str(target), b"ours")
    assert target.read_bytes() == b"ours"
    assert os.listdir(tmp_path) == ["lease"]


def test_a_name_that_exists_is_not_created(tmp_path):
    target = tmp_path / "lease"
    target.write_bytes(b"theirs")
    assert not storage.create_exclusive(str(target), b"ours")
    assert target.read_bytes() == b"theirs" and os.listdir(tmp_path) == ["lease"]


def test_a_filesystem_without_hard_links_falls_back_to_an_exclusive_create(tmp_path, monkeypatch):
    _linking(monkeypatch, PermissionError(errno.EPERM, "Operation not permitted"))
    target = tmp_path / "lease"
    assert storage.create_exclusive(str(target), b"first")
    assert not storage.create_exclusive(str(target), b"second")
    assert target.read_bytes() == b"first" and os.listdir(tmp_path) == ["lease"]


def test_other_link_errors_are_raised_not_papered_over_with_a_non_atomic_create(tmp_path, monkeypatch):
    _linking(monkeypatch, OSError(errno.EIO, "Input/output error"))
    with pytest.raises(OSError) as raised:
        storage.create_exclusive(str(tmp_path / "lease"), b"ours")
    assert raised.value.errno == errno.EIO
    assert os.listdir(tmp_path) == []  # neither the name nor the temporary file


def test_an_atomic_write_that_fails_leaves_no_temporary_file(tmp_path):
    (tmp_path / "taken").mkdir()  # a directory where the file should go: the rename fails
    with pytest.raises(OSError):
        storage.write_atomic(str(tmp_path / "taken"), b"data")
    assert os.listdir(tmp_path) == ["taken"]
