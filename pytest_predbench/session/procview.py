"""The session's own view of /proc's host-wide counters.

/proc/meminfo and /proc/loadavg are the kernel's, for the whole machine, whatever namespace reads
them: a command in one session could watch another session's memory and load rise and fall (a
side channel between sessions running at once), and would be told of memory it can never have.
Each command of the agent's sandbox sees, bound read-only over them, files the harness writes at
the command's start from the session's own bounds:

    /proc/meminfo   MemTotal the session's memory bound; MemFree and MemAvailable what its cgroup
                    has left of it; no swap (the bound allows none), no page cache of others
    /proc/loadavg   no load but the session's own processes (its cgroup's count)

and /proc/sys is bound read-only over itself (bubblewrap covers it only where it is writable; the
sysctls shown are still the sandbox's own namespaces', as /proc/sys shows the opener's).

The files live on the session's own disk (`.proc`), so /proc/self/mountinfo names them by their
path there, never a host path. What is left host-wide (/proc/stat, /proc/uptime, /proc/vmstat,
/proc/pressure, /proc/diskstats, /proc/interrupts, /proc/sys/fs/*-nr) is listed in docs/sandbox.md.
"""

from pathlib import Path

KIB = 1024
VIEWED = ("meminfo", "loadavg")


def meminfo(limit: int, used: int) -> str:
    """A /proc/meminfo for a machine whose memory is the session's bound, `used` bytes of it used."""
    total = limit // KIB
    free = max(0, limit - used) // KIB
    fields = {
        "MemTotal": total, "MemFree": free, "MemAvailable": free, "Buffers": 0, "Cached": 0,
        "SwapCached": 0, "Active": 0, "Inactive": 0, "SwapTotal": 0, "SwapFree": 0, "Dirty": 0,
        "Shmem": 0, "Slab": 0, "SReclaimable": 0, "SUnreclaim": 0, "CommitLimit": total,
        "Committed_AS": (limit - free * KIB) // KIB,
    }  # fmt: skip
    return "".join(f"{name + ':':<16}{value:>8} kB\n" for name, value in fields.items())


def loadavg(processes: int) -> str:
    """A /proc/loadavg of no load, with the session's own processes as the task count."""
    return f"0.00 0.00 0.00 1/{max(1, processes)} 1\n"


def write_view(directory: Path, limit: int, used: int, processes: int) -> list[str]:
    """Write the view into `directory`; bubblewrap's options that bind it (after `--proc /proc`)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "meminfo").write_text(meminfo(limit, used))
    (directory / "loadavg").write_text(loadavg(processes))
    args = ["--ro-bind", "/proc/sys", "/proc/sys"]
    for name in VIEWED:
        args += ["--ro-bind", str(directory / name), f"/proc/{name}"]
    return args
