"""The kernel's side of a session's sandbox beyond memory, processes and disk (test_bounds.py): its
CPU share (the cgroup CPU controller), its own view of /proc's host-wide counters, /proc/sys
read-only, and the seccomp deny-list. Each is read back from where the kernel holds it (the
cgroup's files, what a command inside reads, what a refused call returns), with its contrast: the
same sandbox with the bound off.

No pred is called here: the gateway's tool is /bin/false, and every command is a shell's or
Python's. The CPU figure (a hog beside a victim) is benchmarks/cpu_share.py's: no timing here.
"""

import struct
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_predbench.session import bounds, seccomp
from pytest_predbench.session.bounds import cpu_share
from pytest_predbench.session.protocol import SessionLimits
from pytest_predbench.session.sandbox import Sandbox

pytestmark = pytest.mark.skipif(bounds.cpu_missing(bounds.cgroup_hierarchies()) is not None, reason="no cpu cgroup")

MIB = 1024**2


@pytest.fixture
def make(tmp_path):
    made: list[Sandbox] = []
    source = tmp_path / "source"
    source.mkdir()
    (source / "lib.rs").write_text("// the library source, as the sandbox binds it\n")

    def build(name: str, **limits) -> Sandbox:
        sandbox = Sandbox(
            pred_path=Path("/bin/false"), source_dir=source, state_dir=tmp_path / name, limits=SessionLimits(**limits)
        )
        made.append(sandbox)
        return sandbox

    yield build
    for sandbox in made:
        sandbox.close()


def cpu_group(sandbox: Sandbox) -> Path | None:
    found = [g for g in sandbox.bounds.cgroups if (g / "cpu.cfs_quota_us").exists() or (g / "cpu.max").exists()]
    return found[0] if found else None


def quota_cores(group: Path) -> float | None:
    """The cores the group's quota allows (None: no quota), from the kernel's files, v1 or v2."""
    if (group / "cpu.max").exists():
        quota, period = (group / "cpu.max").read_text().split()
        return None if quota == "max" else int(quota) / int(period)
    quota = int((group / "cpu.cfs_quota_us").read_text())
    return None if quota < 0 else quota / int((group / "cpu.cfs_period_us").read_text())


def own_cpu_group(pid: int) -> Path:
    """The cpu cgroup directory of process `pid`, as the host sees it."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(",") or controllers == "":
            mount = "/sys/fs/cgroup/cpu" if controllers else "/sys/fs/cgroup"
            candidate = Path(mount) / path.lstrip("/")
            if (candidate / "cpu.cfs_quota_us").exists() or (candidate / "cpu.max").exists():
                return candidate
    raise AssertionError(f"no cpu cgroup for {pid}")


def running_pids(sandbox: Sandbox, command: str, at_least: int = 1) -> tuple[list[int], threading.Thread]:
    """Start `command` in the sandbox in a thread; the session's pids once `at_least` of them run."""
    thread = threading.Thread(target=sandbox.run, args=(command,), kwargs={"timeout": 30}, daemon=True)
    thread.start()
    for _ in range(500):
        pids = sorted({p for group in sandbox.bounds.cgroups for p in bounds._pids(group)})
        if len(pids) >= at_least:
            return pids, thread
        time.sleep(0.02)
    raise AssertionError("the command never started in the session's cgroups")


ESCAPES = (
    "sleep 3 & setsid sleep 3 & (sh -c 'sleep 3 &' &); nohup setsid sh -c 'sleep 3' >/dev/null 2>&1 & "
    "disown; python3 -c 'import os, time; os.fork() or os.setsid(); time.sleep(3)' & wait"
)
"""Every way out of a process group or session a command has: a background job, setsid, a double
fork (orphaned to the sandbox's init), nohup and disown, a fork that calls setsid() itself."""


def test_a_sessions_commands_run_under_its_cpu_quota_and_weight(make):
    sandbox = make("bounded", cpu_cores=0.5)
    group = cpu_group(sandbox)
    assert group is not None and quota_cores(group) == pytest.approx(0.5)
    weight = group / ("cpu.weight" if (group / "cpu.weight").exists() else "cpu.shares")
    assert int(weight.read_text()) in (50, 512)  # half the kernel's default weight, v2 or v1
    assert "0.5 cores" in sandbox.enforcement.enforced["cpu"]
    pids, thread = running_pids(sandbox, ESCAPES, at_least=8)
    assert all(own_cpu_group(pid) == group for pid in pids), pids  # however it left its session, inside
    thread.join()
    # contrast: the bound off (0), there is no cpu group and the command runs under no quota
    off = make("off", cpu_cores=0)
    assert cpu_group(off) is None and "cpu" not in off.enforcement.enforced
    pids, thread = running_pids(off, "sleep 2")
    assert quota_cores(own_cpu_group(pids[0])) is None
    thread.join()


def test_the_default_share_is_the_machines_cores_divided_by_the_workers(monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "1")
    assert cpu_share(SessionLimits()) == max(1.0, bounds.machine_cores())
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", str(bounds.machine_cores() * 4))
    assert cpu_share(SessionLimits()) == 1.0  # at least one core
    assert cpu_share(SessionLimits(cpu_cores=1.5)) == 1.5 and cpu_share(SessionLimits(cpu_cores=0)) is None


def test_proc_shows_the_sessions_own_memory_and_load_and_sys_is_read_only(make):
    sandbox = make("view", memory_mib=512)
    output = sandbox.run(
        "grep -E '^(MemTotal|MemAvailable|SwapTotal):' /proc/meminfo; cat /proc/loadavg; "
        "grep -c ' /proc/sys ro,' /proc/self/mountinfo; echo 1 > /proc/sys/kernel/ns_last_pid; echo rc=$?; "
        'awk \'$5 == "/proc/meminfo" || $5 == "/proc/loadavg" { print $4 }\' /proc/self/mountinfo | sort',
        timeout=30,
    ).output.splitlines()
    fields = {line.split(":")[0]: int(line.split()[1]) for line in output[:3]}
    assert fields["MemTotal"] == 512 * 1024 and 0 < fields["MemAvailable"] <= 512 * 1024 and fields["SwapTotal"] == 0
    assert output[3].startswith("0.00 0.00 0.00 ")
    assert output[4] == "1" and output[5] != "rc=0", output
    # the view's files are named by their path on the session's own disk, never by a host path
    assert output[-2:] == ["/.proc/loadavg", "/.proc/meminfo"], output
    # contrast: the host's own files say the machine's memory and load, which the view hides
    host = Path("/proc/meminfo").read_text().split("\n")[0]
    assert int(host.split()[1]) != 512 * 1024


SYSCALLS = (
    "import ctypes, os; libc = ctypes.CDLL(None, use_errno=True)\n"
    "for nr, args in ((250, (0, -3, 0)), (323, (0,)), (425, (1, 0)), (39, ())):\n"
    "    r = libc.syscall(nr, *args); print(nr, 'EPERM' if r < 0 and ctypes.get_errno() == 1 else 'not refused')\n"
)


def syscall_results(sandbox: Sandbox) -> dict[str, str]:
    output = sandbox.run(f'python3 -c "{SYSCALLS}"', timeout=30).output
    return dict(line.split(" ", 1) for line in output.strip().splitlines())


@pytest.mark.skipif(seccomp.program() is None, reason="no seccomp table for this architecture")
def test_the_seccomp_deny_list_refuses_its_calls(make, monkeypatch):
    """keyctl, userfaultfd and io_uring_setup fail with EPERM in the sandbox; getpid runs."""
    filtered = syscall_results(make("filtered"))
    assert filtered == {"250": "EPERM", "323": "EPERM", "425": "EPERM", "39": "not refused"}, filtered
    # contrast: the same sandbox without the filter, where the layers below refuse neither keyctl
    # nor io_uring (userfaultfd they may: unprivileged_userfaultfd is off on many kernels)
    monkeypatch.setattr(seccomp, "program_fd", lambda: None)
    unfiltered = syscall_results(make("unfiltered"))
    assert unfiltered["250"] == "not refused" and unfiltered["425"] == "not refused", unfiltered


def evaluate(code: bytes, arch: int, nr: int) -> int:
    """What the classic BPF program returns for a call `nr` of `arch` (the few opcodes it uses)."""
    ops = [struct.unpack("<HBBI", code[i : i + 8]) for i in range(0, len(code), 8)]
    pc, acc = 0, 0
    while True:
        op, jt, jf, k = ops[pc]
        if op == seccomp.RET_K:
            return k
        if op == seccomp.LD_W_ABS:
            acc = {seccomp.NR: nr, seccomp.ARCH: arch}[k]
            pc += 1
        else:
            taken = acc == k if op == seccomp.JEQ_K else acc >= k
            pc += 1 + (jt if taken else jf)


@pytest.mark.skipif(seccomp.program() is None, reason="no seccomp table for this architecture")
@settings(max_examples=2000, deadline=None)
@given(
    nr=st.one_of(st.sampled_from(sorted(seccomp.DENIED_X86_64.values())), st.integers(0, 2**32 - 1)),
    arch=st.one_of(st.just(seccomp.AUDIT_ARCH_X86_64), st.integers(0, 2**32 - 1)),
)
def test_the_filter_refuses_exactly_the_listed_calls_and_every_other_abi(nr: int, arch: int):
    """Any call of any ABI: refused when it is listed, an x32 call, or not x86-64; else allowed."""
    code = seccomp.program()
    assert code is not None
    refused = arch != seccomp.AUDIT_ARCH_X86_64 or nr >= seccomp.X32_BIT or nr in seccomp.DENIED_X86_64.values()
    assert evaluate(code, arch, nr) == (seccomp.RET_ERRNO if refused else seccomp.RET_ALLOW)
