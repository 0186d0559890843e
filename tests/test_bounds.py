"""A session's bounds, enforced by the kernel across all its processes: memory, processes, disk (its
CPU share, its /proc view and the seccomp filter: test_sandbox_kernel.py).

Each attack runs under small bounds (so the test holds little of the shared machine) and is
stopped; its contrast, the same command under larger bounds, succeeds — so the stop is the bound's
doing. After each attack the harness goes on: the same session runs its next command, and another
session, running at the same time, is untouched.
"""

import threading

import pytest

from pytest_predbench.session.bounds import enforceable
from pytest_predbench.session.submission import SPOOL_DIR
from pytest_predbench.verify.environment import checked_record
from tests.support.sandboxes import sandboxes
from tests.support.versions import TEST_VERSION

pytestmark = pytest.mark.slow  # sandboxes under memory pressure: `make test`, not `make check`

MIB = 1024**2


@pytest.fixture(scope="module")
def record():
    return checked_record(TEST_VERSION)


@pytest.fixture
def make(record, tmp_path):
    with sandboxes(record, tmp_path) as build:
        yield build


def test_this_machine_enforces_every_bound():
    found = enforceable()
    assert set(found.enforced) == {"memory", "processes", "disk", "cpu"}, found.unenforced


HOLD = (
    "for i in 1 2 3 4; do python3 -c \"import time; b = b'x' * ({mib} << 20); time.sleep(4); print('held')\" & done; "
    "wait; echo done"
)


def test_memory_is_bounded_across_processes(make):
    """Four processes of 160 MiB each: under a 4 GiB `ulimit -v` per process, bounded at 512 MiB together."""
    small = make("small", memory_mib=512)
    output = small.run(HOLD.format(mib=160), timeout=60).output
    assert output.splitlines().count("held") < 4 and "Killed" in output and "done" in output, output
    assert small.run("echo alive", timeout=30).output.strip() == "alive"  # the session goes on
    contrast = make("large", memory_mib=1024).run(HOLD.format(mib=160), timeout=60).output
    assert contrast.splitlines().count("held") == 4, contrast


FORK = "for i in $(seq 120); do sleep 3 & done 2>/dev/null; echo started=$(jobs -p | wc -l); wait"


def test_processes_are_bounded(make):
    small = make("small", processes=48)
    output = small.run(FORK, timeout=60).output
    started = int(output.split("started=")[1].split()[0])
    assert started < 48, output
    assert small.run("echo alive", timeout=30).output.strip() == "alive"
    contrast = make("large", processes=256).run(FORK, timeout=60).output
    assert "started=120" in contrast, contrast


WRITE = (
    "for i in 1 2 3 4; do head -c $((20 << 20)) /dev/zero > f$i; echo rc=$?; done; "
    f"head -c $((4 << 20)) /dev/zero > {SPOOL_DIR}/.x; echo spool=$?; du -sm /scratch | cut -f1"
)


def test_disk_is_bounded_across_scratch_and_spool(make):
    small = make("small", disk_mib=48)
    output = small.run(WRITE, timeout=60).output
    assert output.count("rc=0") == 2 and "spool=0" not in output, output  # the harness's files take none of it
    assert "No space left on device" in output
    harness = {".source", ".tools"}  # the harness's own files: the disk grew by them
    used = sum(p.stat().st_size for p in small.disk.rglob("*") if p.is_file() and not harness & set(p.parts))
    assert used <= 48 * MIB
    assert small.run("rm f*; echo alive > a; cat a", timeout=30).output.strip() == "alive"  # room again
    contrast = make("large", disk_mib=128).run(WRITE, timeout=60).output
    assert contrast.count("rc=0") == 4 and "spool=0" in contrast, contrast


def test_another_session_goes_on_while_one_hits_its_bounds(make):
    bomb = make("bomb", memory_mib=256, processes=64)
    other = make("other")
    attack = "(:(){ :|:& };:) 2>/dev/null; " + HOLD.format(mib=100)
    thread = threading.Thread(target=bomb.run, args=(attack,), kwargs={"timeout": 15}, daemon=True)
    thread.start()
    outputs = [other.run("pred --version && echo fine", timeout=30).output for _ in range(3)]
    thread.join(timeout=60)
    assert all(o.split() == ["pred", "0.5.0", "fine"] for o in outputs), outputs
    assert bomb.run("echo alive", timeout=30).output.strip() == "alive"


def test_the_cgroups_and_the_disk_go_with_the_session(make):
    sandbox = make("gone", memory_mib=512)
    groups = list(sandbox.bounds.cgroups)
    assert groups and all(g.is_dir() for g in groups)
    assert (groups[0] / "memory.limit_in_bytes").read_text().strip() == str(512 * MIB) or (
        groups[0] / "memory.max"
    ).read_text().strip() == str(512 * MIB)
    sandbox.run("echo x > kept", timeout=30)
    sandbox.close()
    assert not any(g.exists() for g in groups)
    assert not sandbox.disk.exists() and sandbox.disk.parent.is_dir()
