"""What both of a session's sandboxes share — the agent's (sandbox.py) and the one the pred gateway
runs each pred call in (gateway.py): the namespaces, the read-only system, the environment, and
bubblewrap's arguments passed by file descriptor.

Passed on the command line, bubblewrap's arguments would be readable inside the sandbox: its
pid 1 is a bubblewrap process, and /proc/1/cmdline would show every host path bound in. Passed
through `--args FD` (a memfd, read once), the command line is `bwrap --args 3` and nothing more.
"""

import os
import subprocess
from pathlib import Path

from pytest_predbench.session import limits, seccomp
from pytest_predbench.verify.hostpaths import SOURCE_DIR as SOURCE_DIR  # where the sandboxes bind the library

SANDBOX_UID = 1000
SCRATCH_DIR = "/scratch"
TOOLS_DIR = "/predbench/bin"
ETC_FILES = (
    "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "passwd", "group",
    "nsswitch.conf", "localtime", "bash.bashrc", "profile", "inputrc",
)  # fmt: skip
SANDBOX_ENV = {
    "PATH": f"{TOOLS_DIR}:/usr/local/bin:/usr/bin:/bin",
    "HOME": SCRATCH_DIR,
    "LANG": "C.UTF-8",
    "TERM": "dumb",
    "NO_COLOR": "1",
    "PAGER": "cat",
    "TMPDIR": "/tmp",
}
TMPFS_BYTES = 64 * 1024**2
FILE_SIZE_BYTES = 64 * 1024**2
MEMORY_BYTES = 4 * 1024**3
ULIMITS = f"ulimit -f {FILE_SIZE_BYTES // 1024} && ulimit -v {MEMORY_BYTES // 1024} && ulimit -c 0 || exit 126"
"""Per-process limits set inside the sandbox, where no capability remains to raise them again
(the session's own bounds, across its processes, are the kernel's: bounds.py)."""
UNSHARE = ("--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try")
"""Every namespace but IPC, which `start` makes (with its limits) before bubblewrap runs."""
IPC_SYSCTLS = {
    "kernel/shmmax": limits.SHM_BYTES,
    "kernel/shmall": limits.SHM_BYTES // 4096,
    "kernel/shmmni": limits.SHM_SEGMENTS,
    "kernel/msgmni": limits.MSG_QUEUES,
    "kernel/msgmnb": limits.MSG_QUEUE_BYTES,
}
"""SysV IPC outlives the processes that made it (killing them frees none of it, so the OOM killer
would reach bubblewrap itself): a new IPC namespace has the kernel's unlimited defaults, so the
sandbox's gets these, written as root before bubblewrap starts; /proc/sys is read-only inside
(the sandbox's uid is root's outside, and could otherwise raise them)."""
IPC_NAMESPACE = [
    "unshare", "--ipc", "--", "/bin/sh", "-c",
    " && ".join(f"echo {value} > /proc/sys/{key}" for key, value in IPC_SYSCTLS.items()) + ' && exec "$@"',
    "ipc",
]  # fmt: skip
"""The prefix that starts bubblewrap in a fresh IPC namespace with IPC_SYSCTLS."""
HOST_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
"""The environment bubblewrap itself starts with (never the harness's: it holds API keys)."""


def isolated(hostname: str) -> list[str]:
    """Every namespace unshared (no network; IPC by `start`), no capabilities, an unprivileged uid, the read-only
    system, /proc, /dev and a small /tmp; the sandbox's own root and /dev are made read-only by
    `sealed`, after the caller's mounts."""
    args = [
        *UNSHARE, *([] if _own_ipc() else ["--unshare-ipc"]), "--disable-userns", "--cap-drop", "ALL",
        "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--hostname", hostname,
        "--die-with-parent", "--new-session", "--clearenv",
        "--ro-bind", "/usr", "/usr",
    ]  # fmt: skip
    for name in ("bin", "sbin", "lib", "lib32", "lib64"):
        host = Path("/") / name
        if host.is_symlink():
            args += ["--symlink", os.readlink(host), f"/{name}"]
        elif host.is_dir():
            args += ["--ro-bind", str(host), f"/{name}"]
    for name in ETC_FILES:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    proc = ["--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys"]  # the IPC limits stay as set
    return [*args, *proc, "--dev", "/dev", "--size", str(TMPFS_BYTES), "--tmpfs", "/tmp"]


def _own_ipc() -> bool:
    """Whether `start` makes the IPC namespace (root only: without root, bubblewrap makes it, with
    the kernel's defaults, and the session is unbounded anyway)."""
    return os.geteuid() == 0


def sealed(chdir: str) -> list[str]:
    """The end of the options: the root and /dev read-only (unbounded tmpfs, writable they would
    let a command fill the host's memory), the clean environment, the working directory."""
    args = ["--remount-ro", "/", "--remount-ro", "/dev"]
    for key, value in SANDBOX_ENV.items():
        args += ["--setenv", key, value]
    return [*args, "--chdir", chdir]


def args_fd(args: list[str]) -> int:
    """A memfd holding `args` NUL-separated, for `bwrap --args FD` (the caller closes it)."""
    fd = os.memfd_create("bwrap-args", 0)
    os.write(fd, b"".join(arg.encode() + b"\0" for arg in args))
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def start(
    launcher: list[str], bwrap: str, options: list[str], command: list[str], *, stdout: int, keep: tuple[int, ...] = ()
) -> subprocess.Popen:
    """`command` in a sandbox built from `options` (passed by file descriptor), started through
    `launcher` (into the session's cgroups), in its own session, under the seccomp deny-list
    (seccomp.py); stderr goes with stdout, stdin is empty, `keep`: descriptors it inherits. OSError
    when bubblewrap cannot be started."""
    filter_fd = seccomp.program_fd()
    filters = () if filter_fd is None else (filter_fd,)
    fd = args_fd([*(["--seccomp", str(filter_fd)] if filters else []), *options])
    try:
        return subprocess.Popen(
            [*launcher, *(IPC_NAMESPACE if _own_ipc() else []), bwrap, "--args", str(fd), "--", *command],
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=subprocess.STDOUT,
            env=HOST_ENV,
            cwd="/",  # a shell launcher would export the harness's directory as PWD
            start_new_session=True,
            pass_fds=(fd, *filters, *keep),
        )
    finally:
        os.close(fd)
        for held in filters:
            os.close(held)
