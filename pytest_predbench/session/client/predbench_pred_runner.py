"""The pred gateway's runner: one long-lived process inside the gateway's own sandbox, where the real
pred and pred-extract are, that starts each call the gateway booked. A sandbox per call would cost
more than many a pred call; this costs a fork.

It reads calls on the socket whose descriptor is its argument: `TOOL\\0CWD\\0ARG\\0...` with four
descriptors — the call's stdin, stdout and stderr, and the call's own socket. It starts the tool
(its own process group, per-process limits, the call's cwd) and, in one loop over every call in
flight, sends the exit code back on the call's socket when the tool ends, or kills the tool's
group when the gateway closes that socket first (the call was cancelled: its command ended, its
client went away, or it timed out). Standard library only; it runs on the sandbox's python3."""

import os
import resource
import select
import signal
import socket
import sys

LIBEXEC = "/predbench/libexec"
TOOLS = ("pred", "pred-extract")
LIMITS = (
    (resource.RLIMIT_FSIZE, 64 * 1024**2),
    (resource.RLIMIT_AS, 4 * 1024**3),
    (resource.RLIMIT_CORE, 0),
)
"""The per-process limits the agent's own commands get (the session's bounds are its cgroups')."""


def chdir_beneath(cwd: bytes) -> None:
    """chdir to `cwd` (resolved by the gateway, no symlink in it) without following any symlink:
    one swapped in since the gateway's check makes the call fail, never leave /scratch."""
    fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in [p for p in cwd.split(b"/") if p]:
            nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = nxt
        os.fchdir(fd)
    finally:
        os.close(fd)


def start(data: bytes, fds: list[int]) -> int:
    """Fork and exec the call's tool on its descriptors; its pid (-1: it could not be forked)."""
    tool, _, rest = data.partition(b"\0")
    cwd, _, args = rest.partition(b"\0")
    try:
        pid = os.fork()
    except OSError:  # out of processes (the session's bound): the call fails, the runner stays
        return -1
    if pid:
        return pid
    try:
        os.setsid()
        for n, fd in enumerate(fds[:3]):
            os.dup2(fd, n)
        os.closerange(3, max(fds) + 16)
        name = tool.decode()
        if name not in TOOLS:
            raise OSError(0, f"unknown tool {name!r}")
        chdir_beneath(cwd)
        for limit, value in LIMITS:
            resource.setrlimit(limit, (value, value))
        os.execv(f"{LIBEXEC}/{name}", [tool, *(args.split(b"\0") if b"\0" in rest else [])])
    except (OSError, ValueError) as exc:
        os.write(2, f"{tool.decode(errors='replace')}: cannot start: {exc.strerror or exc}\n".encode())
    os._exit(127)


def main() -> int:
    control = socket.socket(fileno=int(sys.argv[1]))
    running: dict[int, tuple[int, socket.socket]] = {}
    """pidfd -> (pid, the call's socket)."""
    calls: dict[socket.socket, int] = {}
    """the call's socket -> pidfd."""
    while True:
        ready, _, _ = select.select([control, *running, *calls], [], [])
        for item in ready:
            if item is control:
                data, fds, _, _ = socket.recv_fds(control, 1 << 17, 4)
                if not data:
                    return 0  # the gateway is gone
                if len(fds) == 4:
                    pid = start(data, fds)
                    call = socket.socket(fileno=fds[3])
                    if pid > 0:
                        pidfd = os.pidfd_open(pid)
                        running[pidfd] = (pid, call)
                        calls[call] = pidfd
                    else:
                        call.close()
                    fds = fds[:3]
                for fd in fds:
                    os.close(fd)
            elif isinstance(item, int) and item in running:  # a run ended: its exit code
                pid, call = running.pop(item)
                del calls[call]
                os.close(item)
                code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
                try:
                    call.send(str(code if code >= 0 else 128 - code).encode())
                except OSError:
                    pass
                call.close()
            elif item in calls:  # the gateway closed the call first: kill the run
                pidfd = calls.pop(item)
                pid, _ = running.pop(pidfd)
                for kill in (os.killpg, os.kill):  # its group; itself, should it not lead one yet
                    try:
                        kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                os.waitpid(pid, 0)
                os.close(pidfd)
                item.close()


if __name__ == "__main__":
    sys.exit(main())
