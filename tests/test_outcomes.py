"""What happens inside a started sandbox is the command's result, never an infrastructure failure.

The attack: SysV shared memory that no process holds (killing processes frees none of it) filling
the session's memory cgroup, so that the OOM killer goes through the sandbox's processes and once
reached bubblewrap itself — which the harness then took for a sandbox that failed (infra), letting
an agent erase its own session. Each test attacks one way the sandbox can die after its start and
checks that the command ends with its reason while the session goes on; the contrast is a sandbox
that truly cannot start, which stays infra.
"""

import os
import threading
import time
from pathlib import Path

import pytest

from pytest_predbench.session import outcome
from pytest_predbench.session.limits import COMMAND_BYTES, SHM_BYTES
from pytest_predbench.session.sandbox import Sandbox, SandboxError
from pytest_predbench.session.submission import SPOOL_DIR
from pytest_predbench.verify.environment import checked_record
from tests.support.sandboxes import sandboxes
from tests.support.versions import TEST_VERSION

SHM_FILL = (
    "cat > fill.py <<'EOF'\n"
    "import ctypes\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "libc.shmat.restype = ctypes.c_void_p\n"
    "size = 16 << 20\n"
    "sid = libc.shmget(0, size, 0o1600)\n"
    "if sid < 0:\n"
    "    raise SystemExit(f'shmget: errno {ctypes.get_errno()}')\n"
    "addr = libc.shmat(sid, None, 0)\n"
    "ctypes.memset(addr, 1, size)\n"
    "libc.shmdt(ctypes.c_void_p(addr))\n"
    "EOF\n"
    "for i in $(seq 24); do python3 fill.py; done; echo filled"
)
"""24 segments of 16 MiB (384 MiB), each left behind by a process that exits at once."""


@pytest.fixture(scope="module")
def record():
    return checked_record(TEST_VERSION)


@pytest.fixture
def make(record, tmp_path):
    with sandboxes(record, tmp_path) as build:
        yield build


def test_shared_memory_past_the_memory_bound_ends_the_command_not_the_session(make):
    small = make("small", memory_mib=192)  # below the IPC limit: the shared memory reaches the bound
    result = small.run(SHM_FILL, timeout=120)
    assert result.killed and "out of memory" in result.killed, result
    assert small.run("echo alive", timeout=30).output.strip() == "alive"  # its namespace went with it
    contrast = make("large", memory_mib=1024).run(SHM_FILL, timeout=120)  # the IPC limit stops it first
    assert contrast.killed is None and "shmget: errno 28" in contrast.output, contrast


def test_the_ipc_limits_hold_inside_and_cannot_be_raised(make):
    sandbox = make("ipc")
    result = sandbox.run("cat /proc/sys/kernel/shmmax; echo 1 > /proc/sys/kernel/shmmax; echo rc=$?", timeout=30)
    lines = result.output.splitlines()
    assert lines[0] == str(SHM_BYTES) and "rc=1" in result.output and "Read-only" in result.output, result
    assert Path("/proc/sys/kernel/shmmax").read_text().strip() != str(SHM_BYTES)  # contrast: the host's own


def _processes(sandbox: Sandbox) -> dict[int, tuple[str, int, int]]:
    """pid -> (name, parent pid, oom_score_adj) of every process in the session's cgroups."""
    found = {}
    for pid in {int(p) for group in sandbox.bounds.cgroups for p in (group / "cgroup.procs").read_text().split()}:
        try:
            status = dict(line.split(":\t", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
            adj = int(Path(f"/proc/{pid}/oom_score_adj").read_text())
        except (OSError, ValueError):
            continue
        found[pid] = (status["Name"].strip(), int(status["PPid"]), adj)
    return found


def test_bubblewrap_killed_under_the_command_is_the_commands_result(make):
    sandbox = make("killed")
    done: dict = {}
    runner = threading.Thread(target=lambda: done.setdefault("result", sandbox.run("exec sleep 60", timeout=90)))
    runner.start()
    outer, procs = None, {}
    for _ in range(400):  # the outer bwrap is the harness's child; the command's sleep is inside
        procs = _processes(sandbox)
        outer = next((pid for pid, (name, ppid, _) in procs.items() if name == "bwrap" and ppid == os.getpid()), None)
        if outer and any(name == "sleep" for name, _, _ in procs.values()):
            break
        time.sleep(0.05)
    (sleep_adj,) = [adj for name, _, adj in procs.values() if name == "sleep"]
    assert outer and procs[outer][2] <= 0 and sleep_adj == outcome.OOM_FIRST, procs  # the command goes first
    os.kill(outer, 9)  # as the OOM killer would, had it reached it
    runner.join(timeout=60)
    result = done["result"]
    assert result.returncode == 137 and result.killed and "SIGKILL" in result.killed, result
    assert sandbox.run("echo alive", timeout=30).output.strip() == "alive"


def test_a_sandbox_that_cannot_start_is_infra(make):
    sandbox = make("broken")
    assert sandbox.run("true", timeout=30).killed is None  # contrast: it starts
    sandbox.writable_dir(SPOOL_DIR).rmdir()  # a bind source gone: bubblewrap's setup fails
    with pytest.raises(SandboxError, match="bubblewrap failed"):
        sandbox.run("true", timeout=30)


@pytest.mark.parametrize(
    "command, why",
    [("echo a\0b", "NUL byte"), ("echo " + "x" * COMMAND_BYTES, "more than")],
)
def test_a_command_no_shell_can_hold_is_refused_as_its_result(make, command, why):
    sandbox = make("argv")
    result = sandbox.run(command, timeout=30)
    assert result.returncode == 126 and why in (result.killed or ""), result
    fits = sandbox.run("echo " + "x" * (COMMAND_BYTES - 100) + " | wc -c", timeout=30)  # contrast
    assert fits.killed is None and fits.output.strip() == str(COMMAND_BYTES - 99), fits


def test_the_reason_is_read_from_the_status_and_the_oom_counter():
    assert outcome.killed_reason(3, 3, 0, 0) == (0, None)
    assert outcome.killed_reason(3, 3, 137, 137) == (137, None)  # an exit of 137 is just an exit
    assert outcome.killed_reason(3, 3, None, -9)[1] == "killed: the sandbox ended without an exit status (SIGKILL)"
    assert "out of memory" in outcome.killed_reason(3, 4, 137, 137)[1]
    assert outcome.exit_code(b'{ "child-pid": 5 }\n{ "exit-code": 7 }\n') == 7
    assert outcome.exit_code(b'{ "child-pid": 5 }\n') is None
