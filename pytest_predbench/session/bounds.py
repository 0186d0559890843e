"""A session's hard bounds, enforced by the kernel rather than per process: the memory of all its
processes together, how many processes it has, the CPU time they take, and the disk its directories
may fill.

A per-process limit is no bound on a session: four processes of 1.5 GiB each pass a 4 GiB
`ulimit -v`, two thousand small ones pass any per-process limit, and a file-size limit says
nothing of a thousand files. One session could bring the OOM killer or a full disk onto the
harness and every other session. So every process of a session — each of the agent's commands and
each pred call the gateway runs for it — starts inside the session's own control group:

    memory     cgroup v2 `memory.max` (swap off: `memory.swap.max` 0), or v1 `memory.limit_in_bytes`
               (and `memory.memsw.limit_in_bytes`); past it the kernel's OOM killer picks a process
               of this session, never one of the harness or of another session
    processes  cgroup v2 or v1 `pids.max`: a fork past it fails
    cpu        cgroup v2 `cpu.max` and `cpu.weight`, or v1 `cpu.cfs_quota_us` and `cpu.shares`: the
               session's processes together get at most their share of cores (the quota), and under
               contention at least it (the weight, in proportion to the share). Counted per cgroup,
               not per process, session or process group: a thousand processes that each call
               setsid() share one quota. The share is `cpu_share` (SessionLimits.cpu_cores).
    disk       the session's directories (its scratch and its submission spool) live on a tmpfs
               mounted with `size=`: a write past it fails with ENOSPC. tmpfs pages are charged to
               the writer's memory cgroup, so they count against the memory bound too.

The cgroups are created below the harness's own (so the harness's own limits still hold over
them) and removed, with any process left in them, when the session ends; what a killed harness
left (mounts and cgroups named by an owner that is gone) the next session removes
(session/leftovers.py). Where the machine offers
neither cgroup version with both controllers (not root, no delegation), or cannot mount a tmpfs,
`enforceable` says which bound cannot be enforced and why; the preflight refuses to start unless
the run was told to go unbounded (`--unbounded`), and a session told so runs with what there is.
"""

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from pydantic import BaseModel

from pytest_predbench.session import leftovers
from pytest_predbench.session.protocol import SessionLimits

MIB = 1024**2
BOUNDS = ("memory", "processes", "disk", "cpu")
CPU_PERIOD_US = 100_000
"""The period the CPU quota is counted over (the kernel's default): a session over its share waits
at most the rest of one period."""
ATTACH = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 126; shift; done; shift; exec "$@"'
"""A launcher that moves itself into the session's cgroups, then becomes the sandbox: every process
the sandbox starts is born inside them (no window in which a fork escapes)."""


class BoundsError(RuntimeError):
    """A bound cannot be set up; one line says which and why."""


class Enforcement(BaseModel):
    """How each bound is enforced on this machine, and why the others cannot be."""

    enforced: dict[str, str] = {}
    """bound -> how (`cgroup v1 memory.limit_in_bytes`, `tmpfs size=`...)."""
    unenforced: dict[str, str] = {}
    """bound -> why it cannot be enforced here."""

    def missing_line(self) -> str:
        return "; ".join(f"{bound}: {why}" for bound, why in self.unenforced.items())


# -- where the controllers are ---------------------------------------------------------------------


class _Hierarchy(BaseModel):
    """One cgroup directory under which the session's cgroups can be made, for some controllers."""

    version: int
    base: str
    controllers: list[str]


def _mounts() -> list[tuple[str, str, set[str]]]:
    """(fstype, mount point, super options) of every cgroup mount, from /proc/self/mountinfo."""
    found = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, rest = left.split(), right.split()
        if len(fields) >= 5 and len(rest) >= 3 and rest[0] in ("cgroup", "cgroup2"):
            found.append((rest[0], fields[4].replace("\\040", " "), set(rest[2].split(","))))
    return found


def _own_paths() -> dict[str, str]:
    """This process's cgroup path per v1 controller, and under "" its v2 path."""
    paths: dict[str, str] = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return paths
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else [""]:
            paths[name] = path
    return paths


def _base(mount: str, own: str) -> Path:
    """The harness's own cgroup directory when it is visible, else the hierarchy's root."""
    inside = Path(mount) / own.lstrip("/")
    return inside if own and inside.is_dir() else Path(mount)


def _v2() -> _Hierarchy | str:
    mounts = [m for m in _mounts() if m[0] == "cgroup2"]
    if not mounts:
        return "no cgroup v2 mount"
    _, mount, _ = mounts[0]
    try:
        available = Path(mount, "cgroup.controllers").read_text().split()
    except OSError as exc:
        return f"cannot read {mount}/cgroup.controllers: {exc.strerror}"
    lacking = [c for c in ("memory", "pids") if c not in available]
    if lacking:
        return f"cgroup v2 at {mount} has no {' or '.join(lacking)} controller enabled"
    if not os.access(mount, os.W_OK):
        return f"cgroup v2 at {mount} is not writable (not root, no delegation)"
    return _Hierarchy(version=2, base=mount, controllers=["memory", "pids", *(["cpu"] if "cpu" in available else [])])


def _v1_hierarchy(controller: str) -> _Hierarchy | str:
    mount = next((m for t, m, opts in _mounts() if t == "cgroup" and controller in opts), None)
    if mount is None:
        return f"no cgroup v1 {controller} hierarchy"
    base = _base(mount, _own_paths().get(controller, ""))
    if not os.access(base, os.W_OK):
        return f"cgroup v1 {controller} at {base} is not writable (not root)"
    return _Hierarchy(version=1, base=str(base), controllers=[controller])


def _v1() -> list[_Hierarchy] | str:
    found = []
    for controller in ("memory", "pids"):
        hierarchy = _v1_hierarchy(controller)
        if isinstance(hierarchy, str):
            return hierarchy
        found.append(hierarchy)
    return found


def cgroup_hierarchies() -> list[_Hierarchy] | str:
    """Where the session's cgroups go: cgroup v2 if it has the memory and pids controllers, else
    v1's hierarchies; else why neither can be used. The cpu controller goes with them where there
    is one (v2's, else v1's cpu hierarchy): `cpu_missing` says why not."""
    v2 = _v2()
    if isinstance(v2, _Hierarchy):
        where = [v2]
    else:
        v1 = _v1()
        if isinstance(v1, str):
            return f"{v2}; {v1}"
        where = v1
    if not any("cpu" in h.controllers for h in where):
        cpu = _v1_hierarchy("cpu")  # v1's, also beside a v2 without its cpu controller (hybrid)
        if isinstance(cpu, _Hierarchy):
            where.append(cpu)
    return where


def cpu_missing(where: list[_Hierarchy] | str) -> str | None:
    """Why the session's CPU cannot be bounded here; None when it can."""
    if isinstance(where, str):
        return where
    if any("cpu" in h.controllers for h in where):
        return None
    cpu = _v1_hierarchy("cpu")
    return cpu if isinstance(cpu, str) else "no cpu controller beside the memory and pids ones"


def workers() -> int:
    """How many sessions this machine runs at once: the pytest-xdist workers (1 without xdist)."""
    try:
        return max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1))
    except ValueError:
        return 1


def machine_cores() -> int:
    """The CPUs this process may run on (what `nproc` says)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def cpu_share(limits: SessionLimits) -> float | None:
    """The cores one session may use: `limits.cpu_cores`, by default this machine's cores divided
    by the sessions it runs at once, at least 1; None for no CPU bound (`cpu_cores` 0)."""
    if limits.cpu_cores is None:
        return max(1.0, machine_cores() / workers())
    return limits.cpu_cores or None


def can_mount_tmpfs() -> str | None:
    """None when a size-limited tmpfs can be mounted here; else why not."""
    if os.geteuid() != 0:
        return "mounting a size-limited tmpfs needs root"
    with tempfile.TemporaryDirectory(prefix="predbench-disk-check-") as tmp:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", tmp], capture_output=True, text=True, timeout=30
        )
        if done.returncode != 0:
            return f"cannot mount a tmpfs: {done.stderr.strip()[:120]}"
        subprocess.run(["umount", tmp], capture_output=True, timeout=30)
    return None


def enforceable() -> Enforcement:
    """Which bounds this machine can enforce (for the preflight), and why not the others."""
    result = Enforcement()
    where = cgroup_hierarchies()
    if isinstance(where, str):
        result.unenforced |= {"memory": where, "processes": where}
    else:
        how = f"cgroup v{where[0].version}"
        result.enforced |= {"memory": f"{how} memory limit", "processes": f"{how} pids.max"}
    why = can_mount_tmpfs()
    if why:
        result.unenforced["disk"] = why
    else:
        result.enforced["disk"] = "a tmpfs mounted with size="
    cpu = cpu_missing(where)
    if cpu:
        result.unenforced["cpu"] = cpu
    else:
        version = next(h.version for h in where if "cpu" in h.controllers)  # type: ignore[union-attr]
        result.enforced["cpu"] = f"cgroup v{version} cpu quota and weight"
    return result


# -- one session's bounds ----------------------------------------------------------------------------


class SessionBounds:
    """The bounds of one session: its cgroups, and its disk at `disk` (a size-limited tmpfs).

    `unbounded`: go on where a bound cannot be enforced (else BoundsError names it). `reserved`:
    bytes the harness itself puts on the disk (the library source's copy), added to its size so
    the session keeps all of `limits.disk_mib`."""

    def __init__(self, disk: Path, limits: SessionLimits, unbounded: bool = False, reserved: int = 0):
        self.disk = Path(disk)
        self.limits = limits
        self.reserved = reserved
        self.cgroups: list[Path] = []
        self.mounted = False
        self.swept: list[str] = []
        """What a killed harness had left, removed before this session's bounds were set up."""
        self.enforcement = Enforcement()
        self.disk.mkdir(parents=True, exist_ok=True)
        try:
            self._cgroups(unbounded)
            self._mount(unbounded)
        except BaseException:
            self.close()
            raise

    def _cgroups(self, unbounded: bool) -> None:
        where = cgroup_hierarchies()
        share = cpu_share(self.limits)
        cpu = cpu_missing(where) if share else None
        if isinstance(where, str) and not unbounded:
            raise BoundsError(f"session memory and processes cannot be bounded here: {where}")
        if cpu and not unbounded:
            raise BoundsError(f"the session's CPU cannot be bounded here: {cpu}")
        if cpu:
            self.enforcement.unenforced["cpu"] = cpu
        if isinstance(where, str):
            self.enforcement.unenforced |= {"memory": where, "processes": where}
            self.swept = leftovers.sweep([])
            return
        parents = [
            (h, _v2_parent(Path(h.base), h.controllers) if h.version == 2 else Path(h.base))
            for h in where
            if share or h.controllers != ["cpu"]  # no CPU bound asked for: no cgroup for it
        ]
        self.swept = leftovers.sweep([base for _, base in parents])
        name = leftovers.owned_name()
        memory = self.limits.memory_mib * MIB
        cpu_how = ""
        for hierarchy, base in parents:
            group = base / name
            group.mkdir()
            self.cgroups.append(group)
            if "memory" in hierarchy.controllers:
                if hierarchy.version == 2:
                    _write(group / "memory.max", memory)
                    _write(group / "memory.swap.max", 0, optional=True)
                else:
                    _write(group / "memory.limit_in_bytes", memory)
                    _write(group / "memory.memsw.limit_in_bytes", memory, optional=True)
            if "pids" in hierarchy.controllers:
                _write(group / "pids.max", self.limits.processes)
            if "cpu" in hierarchy.controllers and share:
                cpu_how = _bound_cpu(group, hierarchy.version, share)
        how = f"cgroup v{where[0].version}"
        self.enforcement.enforced |= {
            "memory": f"{how}: {self.limits.memory_mib} MiB across the session's processes",
            "processes": f"{how}: pids.max {self.limits.processes}",
            **({"cpu": cpu_how} if cpu_how else {}),
        }

    def _mount(self, unbounded: bool) -> None:
        why = "mounting a size-limited tmpfs needs root" if os.geteuid() != 0 else None
        if why is None:
            size = self.limits.disk_mib * MIB + self.reserved
            options = f"size={size},mode=0755,nosuid,nodev"
            owned = leftovers.owned_name()  # the source field names the owner, for a sweep after a kill
            done = subprocess.run(
                ["mount", "-t", "tmpfs", "-o", options, owned, str(self.disk)],
                capture_output=True,
                text=True,
                timeout=30,
            )
            why = f"cannot mount a tmpfs: {done.stderr.strip()[:120]}" if done.returncode else None
        if why is None:
            self.mounted = True
            self.enforcement.enforced["disk"] = f"tmpfs size={self.limits.disk_mib} MiB for scratch and spool"
        elif unbounded:
            self.enforcement.unenforced["disk"] = why
        else:
            raise BoundsError(f"the session's disk cannot be bounded here: {why}")

    def reserve(self) -> None:
        """Resize the disk to the session's `disk_mib` on top of what is on it now (what the
        harness put there: `reserved` was an upper bound, for the mount)."""
        if not self.mounted:
            return
        stat = os.statvfs(self.disk)
        used = (stat.f_blocks - stat.f_bfree) * stat.f_frsize
        size = self.limits.disk_mib * MIB + used
        done = subprocess.run(
            ["mount", "-o", f"remount,size={size}", str(self.disk)], capture_output=True, text=True, timeout=30
        )
        if done.returncode:
            raise BoundsError(f"cannot resize the session's disk: {done.stderr.strip()[:120]}")

    def memory_used(self) -> int:
        """Bytes the session's memory cgroup holds now (0 where it has none)."""
        for group in self.cgroups:
            for name in ("memory.current", "memory.usage_in_bytes"):
                try:
                    return int((group / name).read_text())
                except (OSError, ValueError):
                    continue
        return 0

    def process_count(self) -> int:
        """How many processes the session has now (its cgroups hold them all)."""
        return max((len(_pids(group)) for group in self.cgroups), default=0)

    def launcher(self) -> list[str]:
        """The argv prefix that starts a process inside the session's cgroups."""
        if not self.cgroups:
            return []
        procs = [str(group / "cgroup.procs") for group in self.cgroups]
        return ["/bin/sh", "-c", ATTACH, "attach", *procs, "--"]

    def kill_all(self) -> None:
        """SIGKILL every process left in the session's cgroups (each by its pid)."""
        for _ in range(50):
            pids = {pid for group in self.cgroups for pid in _pids(group)}
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.02)

    def close(self) -> None:
        """Remove the session's cgroups (killing what is left in them) and unmount its disk."""
        self.kill_all()
        for group in self.cgroups:
            leftovers.remove_cgroup(group)
        self.cgroups = []
        if self.mounted:
            done = subprocess.run(["umount", str(self.disk)], capture_output=True, timeout=30)
            if done.returncode != 0:
                subprocess.run(["umount", "-l", str(self.disk)], capture_output=True, timeout=30)
            self.mounted = False


def _v2_parent(root: Path, controllers: list[str]) -> Path:
    """A `predbench` cgroup under the v2 root with the controllers handed down to its children."""
    parent = root / "predbench"
    enable = " ".join(f"+{c}" for c in controllers)
    _write(root / "cgroup.subtree_control", enable, optional=True)
    parent.mkdir(exist_ok=True)
    _write(parent / "cgroup.subtree_control", enable)
    return parent


def _bound_cpu(group: Path, version: int, share: float) -> str:
    """Give `group` `share` cores: at most that (the quota) and, under contention, that much in
    proportion to the others (the weight: 1 core = the kernel's default weight). How, in one line."""
    quota = max(1000, round(share * CPU_PERIOD_US))
    if version == 2:
        weight = min(10_000, max(1, round(share * 100)))
        _write(group / "cpu.max", f"{quota} {CPU_PERIOD_US}")
        _write(group / "cpu.weight", weight)
        return f"cgroup v2: {share:g} cores (cpu.max {quota} {CPU_PERIOD_US}, cpu.weight {weight})"
    shares = max(2, round(share * 1024))
    try:  # v1 refuses a quota above the harness's own cgroup's: the session gets at most that
        above = int((group.parent / "cpu.cfs_quota_us").read_text()) * CPU_PERIOD_US
        above //= int((group.parent / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        above = -1
    if above > 0:
        quota = min(quota, above)
    _write(group / "cpu.cfs_period_us", CPU_PERIOD_US)
    _write(group / "cpu.cfs_quota_us", quota)
    _write(group / "cpu.shares", shares)
    cores = quota / CPU_PERIOD_US
    return f"cgroup v1: {cores:g} cores (cpu.cfs_quota_us {quota} per {CPU_PERIOD_US}, cpu.shares {shares})"


def _write(path: Path, value: object, optional: bool = False) -> None:
    try:
        path.write_text(f"{value}\n")
    except OSError as exc:
        if not optional:
            raise BoundsError(f"cannot write {path}: {exc.strerror}") from exc


def _pids(group: Path) -> list[int]:
    try:
        return [int(line) for line in (group / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def remove_disk(disk: Path) -> None:
    """The disk directory's contents, after it was unmounted (or if it never was)."""
    shutil.rmtree(disk, ignore_errors=True)
