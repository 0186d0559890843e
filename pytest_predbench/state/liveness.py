"""Is the process that holds a reservation still there? Yes, no, or "cannot tell".

A pid alone proves nothing: after a reboot, or after the pid wrapped around, another process
may wear it. So an owner is recorded as (host, boot id, pid, process start time), and it is
declared gone only on evidence: another boot of the same host, no such pid, a zombie, or a
pid whose start time differs. Anything else (another host, an unreadable /proc) is
undecided, and an undecided owner keeps its reservation: a false release would let two
sessions spend the same money.
"""

import os
import socket
from pathlib import Path

from pydantic import BaseModel

BOOT_ID_PATH = Path("/proc/sys/kernel/random/boot_id")


class Owner(BaseModel):
    host: str
    boot_id: str | None
    pid: int
    start_ticks: int | None
    """Field 22 of /proc/<pid>/stat: when the process started, in clock ticks since boot."""


def boot_id() -> str | None:
    try:
        return BOOT_ID_PATH.read_text().strip() or None
    except OSError:
        return None


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (which may hold spaces)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return []
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()


def _start_ticks(pid: int) -> int | None:
    fields = _stat_fields(pid)
    return int(fields[19]) if fields else None


def current_owner() -> Owner:
    pid = os.getpid()
    return Owner(host=socket.gethostname(), boot_id=boot_id(), pid=pid, start_ticks=_start_ticks(pid))


def owner_gone(owner: Owner) -> bool | None:
    """True when the owner provably no longer runs, False when it does, None when undecidable."""
    if owner.host != socket.gethostname():
        return None
    now = boot_id()
    if owner.boot_id is None or now is None:
        return None
    if owner.boot_id != now:
        return True
    fields = _stat_fields(owner.pid)
    if fields is None:
        return None
    if not fields:
        return True
    state, started = fields[0], int(fields[19])
    if owner.start_ticks is not None and started != owner.start_ticks:
        return True
    if state in ("Z", "X"):
        return True
    return False if owner.start_ticks is not None else None
