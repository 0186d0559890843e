"""What a killed harness leaves of its sessions' bounds is removed by the next session (session/leftovers.py).

The attack is the harness's own death: SIGKILL while a session runs, its agent's process still in
the session's cgroups, its tmpfs mounted. Nothing of it closes, so the mount and the cgroups outlive
it (the contrast, checked before the sweep); the next session's bounds find them by their owner's
name and remove them, and never a live harness's.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from pytest_predbench.session import leftovers
from pytest_predbench.session.bounds import SessionBounds
from pytest_predbench.session.protocol import SessionLimits

LIMITS = SessionLimits(memory_mib=64, disk_mib=8, processes=16)

HARNESS = """
import subprocess, sys, time
from pathlib import Path
from pytest_predbench.session.bounds import SessionBounds
from pytest_predbench.session.protocol import SessionLimits
bounds = SessionBounds(Path(sys.argv[1]), SessionLimits(memory_mib=64, disk_mib=8, processes=16))
agent = subprocess.Popen([*bounds.launcher(), "sleep", "1000"])
time.sleep(0.3)
print(agent.pid, *bounds.cgroups, flush=True)
time.sleep(1000)
"""
"""A harness that sets up one session's bounds, starts the agent's process in them, and waits to be killed."""


def mounted(point: Path) -> bool:
    return any(line.split()[4] == str(point) for line in Path("/proc/self/mountinfo").read_text().splitlines())


def start_harness(disk: Path) -> tuple[subprocess.Popen, int, list[Path]]:
    harness = subprocess.Popen([sys.executable, "-c", HARNESS, str(disk)], stdout=subprocess.PIPE, text=True)
    agent, *groups = harness.stdout.readline().split()
    return harness, int(agent), [Path(g) for g in groups]


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def test_a_killed_harness_leaves_its_bounds_and_the_next_session_removes_them(tmp_path):
    harness, agent, groups = start_harness(tmp_path / "killed")
    survivor, survivor_agent, survivor_groups = start_harness(tmp_path / "alive")
    try:
        harness.send_signal(signal.SIGKILL)
        harness.wait()
        time.sleep(0.1)
        # the contrast: nothing closed them
        assert mounted(tmp_path / "killed") and groups and all(g.is_dir() for g in groups) and alive(agent)
        bounds = SessionBounds(tmp_path / "next", LIMITS)
        try:
            assert f"mount {tmp_path / 'killed'}" in bounds.swept, bounds.swept
            assert {f"cgroup {g}" for g in groups} <= set(bounds.swept), bounds.swept
            assert not mounted(tmp_path / "killed") and not any(g.exists() for g in groups)
            assert not alive(agent), "the agent's process went with its cgroup"
            # a live harness's session is untouched
            assert mounted(tmp_path / "alive") and all(g.is_dir() for g in survivor_groups) and alive(survivor_agent)
        finally:
            bounds.close()
    finally:
        survivor.send_signal(signal.SIGTERM)
        survivor.wait()
    SessionBounds(tmp_path / "last", LIMITS).close()  # sweeps the survivor's, now that it is gone
    assert not mounted(tmp_path / "alive") and not any(g.exists() for g in survivor_groups)


def test_an_owner_is_told_apart_from_a_reused_pid():
    name = leftovers.owned_name()
    assert leftovers.owner_alive(name)
    pid, rest = name.removeprefix(leftovers.PREFIX).split(".", 1)
    start, unique = rest.split("-", 1)
    assert not leftovers.owner_alive(f"{leftovers.PREFIX}{pid}.{int(start) + 1}-{unique}"), "same pid, other start"
    assert leftovers.owner_alive("predbench-ab12cd"), "a name of another shape is not ours to judge"


def test_mountinfo_is_read_as_the_kernel_writes_it():
    dead = f"{leftovers.PREFIX}{2**22 + 7}.1-0a1b"
    mine = leftovers.owned_name()
    info = "\n".join(
        [
            f"36 25 0:32 / /tmp/a\\040b rw,relatime shared:1 - tmpfs {dead} rw,size=8k",
            f"37 25 0:33 / /tmp/c rw,relatime shared:1 - tmpfs {mine} rw,size=8k",
            f"38 25 0:34 / /tmp/d rw,relatime shared:1 - ext4 {dead} rw",
            "39 25 0:35 / /tmp/e rw - tmpfs tmpfs rw",
            "garbage",
        ]
    )
    assert leftovers.orphaned_mounts(info) == [Path("/tmp/a b")]
    assert os.getpid() == int(mine.removeprefix(leftovers.PREFIX).split(".")[0])
