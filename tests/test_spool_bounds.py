"""The harness's read of the submission spool is bounded, whatever the agent left in it.

The spool is written by the agent and read by the harness after every command, outside every
timeout and cgroup. Attacks: one file hard-linked many times (each link once cost a read and a
parse: 150 links to a 256 KiB file cost minutes), a directory 1,500 deep (its removal recursed
until RecursionError), thousands of entries, and many files at the size limit. The bounds
(session/limits.py): SPOOL_ENTRIES entries and SPOOL_BYTES bytes per collect, each inode read once
in the session, no walk into any directory. The property test draws spools of every kind at random.
"""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_predbench.session import submission
from pytest_predbench.session.limits import SPOOL_BYTES, SPOOL_ENTRIES
from pytest_predbench.session.submission import MAX_SUBMISSIONS, Spool
from pytest_predbench.verify.certificate import MAX_CERTIFICATE_BYTES
from tests.support.sandboxes import SHAPE_ONLY_CERT


class Reads:
    """Every read the spool makes of a submitted file: (device, inode), bytes."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        self.done: list[tuple[tuple[int, int], int]] = []
        real = submission.read_untrusted

        def counted(path: Path, limit: int) -> bytes:
            info = os.lstat(path)
            data = real(path, limit)
            self.done.append(((info.st_dev, info.st_ino), len(data)))
            return data

        monkeypatch.setattr(submission, "read_untrusted", counted)


def drain(spool: Spool) -> list:
    """Collect until the spool shows nothing more (each collect bounded; the rest wait)."""
    receipts = []
    for _ in range(1000):
        got = spool.collect()
        if not got:
            return receipts
        assert len(got) <= SPOOL_ENTRIES + 1
        receipts += got
    raise AssertionError("the spool never emptied")


def visible(spool: Spool) -> list[str]:
    return [p.name for p in spool.dir.iterdir() if not p.name.startswith(".")]


def test_a_file_linked_150_times_is_read_once(tmp_path, monkeypatch):
    reads = Reads(monkeypatch)
    spool = Spool(tmp_path / "spool")
    first = spool.dir / "000.json"
    first.write_text(json.dumps(SHAPE_ONLY_CERT))
    for i in range(1, 150):
        os.link(first, spool.dir / f"{i:03}.json")
    receipts = drain(spool)
    assert len(reads.done) == 1 and len(spool.accepted) == 1, reads.done
    assert sum("hard link" in (r.error or "") for r in receipts) == 149 and not visible(spool)
    contrast = Spool(tmp_path / "copies")  # three copies are three files, each read
    for i in range(3):
        (contrast.dir / f"{i}.json").write_text(json.dumps(SHAPE_ONLY_CERT))
    drain(contrast)
    assert len(contrast.accepted) == 3 and len(reads.done) == 4


def test_a_new_file_on_a_taken_files_inode_is_a_new_submission(tmp_path):
    """Once a taken file's last link is gone the filesystem gives its inode number to the next file
    (ext4 at once): that file is a new submission, not "the same file as an earlier submission"."""
    spool = Spool(tmp_path / "spool")
    inodes = []
    for i in range(20):
        path = spool.dir / f"{i}.json"
        path.write_text(json.dumps(SHAPE_ONLY_CERT))
        inodes.append(path.stat().st_ino)
        (receipt,) = spool.collect()
        assert receipt.certificate is not None, (i, receipt.error)
    assert len(set(inodes)) < len(inodes), "the filesystem gave no inode number twice: nothing was tried"
    linked = Spool(tmp_path / "linked")  # contrast: while a link is left, the inode is the same file
    (linked.dir / "a.json").write_text(json.dumps(SHAPE_ONLY_CERT))
    os.link(linked.dir / "a.json", tmp_path / "kept-link")
    assert linked.collect()[0].certificate is not None
    os.link(tmp_path / "kept-link", linked.dir / "b.json")
    assert "hard link" in (linked.collect()[0].error or "")


def test_a_directory_1500_deep_is_set_aside_without_a_walk(tmp_path):
    spool = Spool(tmp_path / "spool")
    deep = "/".join(["d"] * 1500)
    subprocess.run(["mkdir", "-p", deep], cwd=spool.dir / "..", check=True)
    (spool.dir / ".." / "d").rename(spool.dir / "tree.json")
    (shallow := spool.dir / "flat.json").mkdir()  # contrast: a plain directory, the same answer
    receipts = spool.collect()
    assert len(receipts) == 2 and all("cannot read" in r.error for r in receipts), receipts
    assert not visible(spool) and not shallow.exists()
    (aside,) = [p for p in spool.dir.iterdir() if (p / "d").exists()]
    with pytest.raises(RecursionError):  # contrast: what walking it did
        shutil.rmtree(aside)
    subprocess.run(["rm", "-rf", str(spool.dir)], check=True)


def test_many_full_size_files_cost_at_most_the_byte_bound(tmp_path, monkeypatch):
    reads = Reads(monkeypatch)
    spool = Spool(tmp_path / "spool")
    for i in range(12):
        (spool.dir / f"{i:02}.json").write_bytes(b" " * MAX_CERTIFICATE_BYTES)
    receipts = spool.collect()
    assert sum(size for _, size in reads.done) <= SPOOL_BYTES < 12 * MAX_CERTIFICATE_BYTES
    assert any("not read" in (r.error or "") for r in receipts) and not visible(spool)
    small = Spool(tmp_path / "small")  # contrast: twelve small files are all read
    for i in range(12):
        (small.dir / f"{i:02}.json").write_text(json.dumps(SHAPE_ONLY_CERT))
    small.collect()
    assert len(small.accepted) == 12


KINDS = st.lists(st.sampled_from(["cert", "junk", "big", "link", "dir", "fifo", "symlink"]), max_size=160)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kinds=KINDS)
def test_any_spool_is_read_within_the_bounds(tmp_path_factory, monkeypatch, kinds):
    reads = Reads(monkeypatch)
    spool = Spool(tmp_path_factory.mktemp("spool") / "spool")
    files: list[Path] = []
    for n, kind in enumerate(kinds):
        path = spool.dir / f"{n:03}.json"
        if kind == "cert":
            path.write_text(json.dumps({**SHAPE_ONLY_CERT, "target_solution": [n]}))
        elif kind == "junk":
            path.write_bytes(b"\xff" * 64)
        elif kind == "big":
            path.write_bytes(b" " * (MAX_CERTIFICATE_BYTES + 10))
        elif kind == "link" and files:
            os.link(files[-1], path)
        elif kind == "dir":
            (path / "inner").mkdir(parents=True)
        elif kind == "fifo":
            os.mkfifo(path)
        else:
            path.symlink_to("/etc/passwd")
        if path.is_file() and not path.is_symlink():
            files.append(path)
    before = 0
    for _ in range(len(kinds) // SPOOL_ENTRIES + 2):
        got = spool.collect()
        assert len(got) <= SPOOL_ENTRIES + 1
        assert len(reads.done) - before <= SPOOL_ENTRIES
        assert sum(size for _, size in reads.done[before:]) <= SPOOL_BYTES
        before = len(reads.done)
    inodes = [inode for inode, _ in reads.done]
    assert len(inodes) == len(set(inodes))  # each inode read once
    assert not visible(spool) and len(spool.accepted) <= MAX_SUBMISSIONS
