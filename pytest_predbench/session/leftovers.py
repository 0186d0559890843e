"""What a killed harness left of its sessions' bounds, found by owner and removed by the next session.

A session's disk is a tmpfs mounted on the host and its bounds are cgroups (session/bounds.py);
`SessionBounds.close` removes both, but a harness killed with SIGKILL (an OOM kill, a CI timeout,
`kill -9` of pytest) never runs it. The mounts then outlive it under pytest's or the run's
directories — ~500 MiB of host memory each at worst, and pytest's own clean-up of its old temporary
directories fails on them ("Device or resource busy") — and the cgroups stay, with whatever the
agent had running in them.

So every mount and cgroup a session makes is named by its owner, `predbench-<pid>.<start>-<id>`
(the tmpfs's source field, the cgroup's directory name): the harness process's pid and its start
time in clock ticks since boot (`/proc/<pid>/stat` field 22), which tell a live owner from a dead
one whose pid was reused. Before a session sets up its bounds, `sweep` removes every such mount and
cgroup whose owner is gone. A live owner's are never touched, so sessions of other workers and other
runs on the machine keep theirs. The agent can read its own disk's name in its mountinfo: a pid
of a pid namespace it has no way into, and no path. (Owners are told apart by pid, so harnesses in other pid namespaces
that share this mount namespace and cgroup tree would look dead: run one pid namespace per machine.)
"""

import os
import re
import signal
import subprocess
import time
import uuid
from functools import cache
from pathlib import Path

PREFIX = "predbench-"
OWNED = re.compile(rf"^{PREFIX}(\d+)\.(\d+)-[0-9a-f]+$")


def _start_time(pid: int) -> int | None:
    """The process's start time (clock ticks since boot); None when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    try:
        return int(stat.rsplit(")", 1)[1].split()[19])  # field 22; the name in () may hold spaces
    except (IndexError, ValueError):
        return None


@cache
def _owner() -> str:
    return f"{PREFIX}{os.getpid()}.{_start_time(os.getpid())}"


def owned_name() -> str:
    """A new name for a mount or cgroup of this process: its owner, then a unique part."""
    if not _owner().startswith(f"{PREFIX}{os.getpid()}."):
        _owner.cache_clear()  # a forked child is another owner
    return f"{_owner()}-{uuid.uuid4().hex[:12]}"


def owner_alive(name: str) -> bool:
    """Whether the process that made `name` still runs (a name not ours to judge counts as alive)."""
    match = OWNED.match(name)
    if match is None:
        return True
    pid, start = int(match[1]), int(match[2])
    return _start_time(pid) == start


def _unescape(field: str) -> str:
    """A mountinfo field: space, tab, newline and backslash are written as octal escapes."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), field)


def orphaned_mounts(mountinfo: str | None = None) -> list[Path]:
    """Mount points of tmpfs mounts named by an owner that is gone."""
    if mountinfo is None:
        mountinfo = Path("/proc/self/mountinfo").read_text()
    found = []
    for line in mountinfo.splitlines():
        before, sep, after = line.partition(" - ")
        fields, tail = before.split(), after.split()
        if not sep or len(fields) < 5 or len(tail) < 2:
            continue
        if tail[0] == "tmpfs" and OWNED.match(tail[1]) and not owner_alive(tail[1]):
            found.append(Path(_unescape(fields[4])))
    return found


def orphaned_cgroups(bases: list[Path]) -> list[Path]:
    """Cgroups directly under `bases` named by an owner that is gone."""
    found = []
    for base in bases:
        try:
            entries = list(os.scandir(base))
        except OSError:
            continue
        found += [Path(e.path) for e in entries if e.is_dir(follow_symlinks=False) and not owner_alive(e.name)]
    return found


def remove_cgroup(group: Path) -> None:
    """SIGKILL what is left in a cgroup (each by its pid), then remove it (a session's at its close, an
    orphan's in a sweep)."""
    for _ in range(50):
        try:
            pids = [int(p) for p in (group / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            pids = []
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            group.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.02)


def sweep(cgroup_bases: list[Path]) -> list[str]:
    """Remove the orphaned mounts and cgroups; what was removed, one line each."""
    removed = []
    for point in orphaned_mounts():
        done = subprocess.run(["umount", "-l", str(point)], capture_output=True, timeout=30)
        if done.returncode == 0:
            removed.append(f"mount {point}")
    for group in orphaned_cgroups(cgroup_bases):
        remove_cgroup(group)
        if not group.exists():
            removed.append(f"cgroup {group}")
    return removed
