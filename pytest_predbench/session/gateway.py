"""The pred gateway: the only way a session's `pred` and `pred-extract` run, and the only writer of
its pred-call count.

The pred-call limit is the benchmark's fairness budget: every model gets the same evidence. A
count kept inside the agent's sandbox is cooperative — the agent can run the real binary directly,
or truncate, replace or re-link the log. So neither binary exists in the agent's sandbox. Its
`pred` and `pred-extract` are a tiny client (client/predbench_gateway_client.c, compiled once per
process; the .py beside it where there is no C compiler) that passes the call — its argv, its
working directory, and its stdin, stdout and stderr as file descriptors (SCM_RIGHTS) — over a Unix
socket bind-mounted in (read-only: the agent can connect, not replace it). Here, in the harness,
outside the agent's namespaces:

1. the request is checked: a known tool, a working directory under /scratch, exactly three fds;
2. the call is booked against the session's limit in this object's memory (nothing the agent can
   write); past the limit the answer is a refusal, and nothing runs;
3. the real binary runs in a sandbox of its own (bwrap.py: no network, no capabilities, the
   read-only system, the library source, and the session's scratch at /scratch, so file arguments
   and `-o` outputs work as before; nothing else of the host, so no argument can make pred read a
   path outside the scratch), inside the session's cgroups (bounds.py), with the command's
   timeout; its stdout and stderr are relayed to the client's, counted, with the host paths
   compiled into pred (a panic names its source file) rewritten (redact.py). That sandbox is started
   once per session and holds a small runner (client/predbench_pred_runner.py) that forks each
   booked call: a sandbox per call would cost more than many a pred call;
4. the exit code goes back to the client, and the call is logged: tool, argv, exit, seconds, bytes;
   for a `pred reduce`, also its instance and path, from pred's own output (session/reductions.py:
   the minted bugs' funnel reads them).

A client that goes away (killed, timed out) takes its pred run with it. Connections are served
concurrently, at most MAX_CONNECTIONS at once (a flood gets an immediate "busy" answer), each
request must arrive whole within REQUEST_SECONDS and fit in MAX_REQUEST_BYTES.
"""

import os
import select
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

from pydantic import BaseModel

from pytest_predbench.session import bwrap, reductions, scratch_paths
from pytest_predbench.session.limits import RELAY_WRITE_SECONDS, SINK_HELD_BYTES
from pytest_predbench.session.protocol import PredCall
from pytest_predbench.session.redact import Redaction
from pytest_predbench.verify import hostpaths

SOCKET_DIR = "/predbench/gateway"
SOCKET_NAME = "socket"
LIBEXEC = "/predbench/libexec"
CLIENT_SCRIPT = Path(__file__).resolve().parent / "client" / "predbench_gateway_client.py"
CLIENT_SOURCE = CLIENT_SCRIPT.with_suffix(".c")
RUNNER_SCRIPT = Path(__file__).resolve().parent / "client" / "predbench_pred_runner.py"
RUNNER = f"{LIBEXEC}/predbench-pred-runner"
MAX_CONNECTIONS = 8
MAX_REQUEST_BYTES = 64 * 1024
REQUEST_SECONDS = 5.0
REFUSED_EXIT = 125
"""What a refused call exits with (as the old counting wrapper did)."""
KILLED_EXIT = 137
"""What a call killed by the gateway exits with (as a shell reports SIGKILL)."""
MAX_LOGGED_ARG = 200
"""Each logged argument is cut to this many characters (the log goes into the item record)."""


def client_script(tool: str) -> str:
    """The Python client under the tool's name (where no C compiler is found)."""
    return CLIENT_SCRIPT.read_text(encoding="utf-8").replace('TOOL = "pred"', f"TOOL = {tool!r}", 1)


@cache
def client_program(tool: str) -> bytes:
    """The client as installed in the agent's sandbox under the tool's name: compiled from its C
    source (once per process), else the Python script."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler:
        with tempfile.TemporaryDirectory(prefix="predbench-client-") as tmp:
            out = Path(tmp) / tool
            done = subprocess.run(
                [compiler, "-O2", f'-DTOOL="{tool}"', "-o", str(out), str(CLIENT_SOURCE)],
                capture_output=True,
                timeout=120,
            )
            if done.returncode == 0:
                return out.read_bytes()
    return client_script(tool).encode()


class PredUsage(BaseModel):
    calls: int = 0
    refused: int = 0


class Gateway:
    """One session's gateway: a listening socket under `socket_dir` and a thread serving it.

    `tools`: tool name -> the real binary on the host. `launcher`: the argv prefix that puts a
    process into the session's cgroups (bounds.SessionBounds.launcher)."""

    def __init__(
        self,
        *,
        tools: dict[str, Path],
        scratch: Path,
        source_dir: Path,
        socket_dir: Path | None = None,
        host_source: Path | None = None,
        launcher: Callable[[], list[str]] = list,
        bwrap_path: str = "bwrap",
        snapshots: Path | None = None,
    ):
        self.tools = {name: Path(path) for name, path in tools.items()}
        self.scratch = Path(scratch)
        self.source_dir = Path(source_dir)
        self.redact = hostpaths.rules(str(host_source or source_dir))
        """pred's output names host paths only after passing through these (redact.py, verify/hostpaths.py)."""
        self.launcher = launcher
        self.snapshots = reductions.Snapshots(snapshots)
        """Where the instances of `pred reduce` calls are stored (None: their sha256 and paths only)."""
        self.bwrap_path = bwrap_path
        self.lock = threading.Lock()
        self.allowed = 2**62
        self.usage = PredUsage()
        self.log: list[PredCall] = []
        self.call_timeout = 60.0
        self.calls: set[socket.socket] = set()
        """The gateway's ends of the calls in flight: shut down, each kills its run."""
        self.runner: subprocess.Popen | None = None
        self.control: socket.socket | None = None
        self.runner_lock = threading.Lock()
        self.keeper = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pred-runner")
        """The one thread that starts the runner, alive as long as the gateway."""
        self.handlers: set[threading.Thread] = set()
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        if socket_dir is None:
            socket_dir = Path(tempfile.mkdtemp(prefix="predbench-gw-"))
        self.socket_dir = Path(socket_dir)
        """The sandbox passes one on the session's tmpfs: bound from there, its mountinfo line
        names a neutral path (`/.gateway`), not a host directory."""
        self.socket_dir.mkdir(parents=True, exist_ok=True)
        self.socket_path = self.socket_dir / SOCKET_NAME
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        _bind(self.listener, self.socket_dir)
        os.chmod(self.socket_path, 0o777)  # the sandbox's uid connects; the directory is the harness's
        self.listener.listen(64)
        self.closed = False
        self.thread = threading.Thread(target=self._serve, name="pred-gateway", daemon=True)
        self.thread.start()

    # -- the harness's side ----------------------------------------------------------------------

    def set_quota(self, remaining: int | None) -> None:
        """How many more calls the gateway books (None: no limit)."""
        with self.lock:
            self.allowed = 2**62 if remaining is None else max(0, remaining)

    def take_usage(self) -> PredUsage:
        """The calls booked and refused since the last look."""
        with self.lock:
            usage, self.usage = self.usage, PredUsage()
        return usage

    def take_log(self) -> list[PredCall]:
        with self.lock:
            log, self.log = self.log, []
        return log

    def cancel(self) -> None:
        """Kill every pred run still going (its command has ended) and wait for their handlers."""
        with self.lock:
            calls, handlers = list(self.calls), list(self.handlers)
        for call in calls:
            try:
                call.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for handler in handlers:
            handler.join(timeout=5)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self.listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.listener.close()
        self.cancel()
        self.thread.join(timeout=5)
        with self.runner_lock:
            self._stop_runner()
        self.keeper.shutdown(wait=False)
        shutil.rmtree(self.socket_dir, ignore_errors=True)

    # -- serving -----------------------------------------------------------------------------------

    def _serve(self) -> None:
        while not self.closed:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            if not self.slots.acquire(blocking=False):
                _reply(conn, REFUSED_EXIT, "the pred gateway is busy (too many calls at once); try again")
                conn.close()
                continue
            handler = threading.Thread(target=self._handle, args=(conn,), daemon=True)
            with self.lock:
                self.handlers.add(handler)
            handler.start()

    def _handle(self, conn: socket.socket) -> None:
        fds: list[int] = []
        try:
            conn.settimeout(REQUEST_SECONDS)
            try:
                data, fds, flags, _ = socket.recv_fds(conn, MAX_REQUEST_BYTES + 1, 3)
            except (OSError, TimeoutError):
                return
            cut = flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC)
            request = (
                "the call is too large (arguments or descriptors)"
                if cut
                else _request(data, fds, self.tools, self.scratch)
            )
            if isinstance(request, str):
                _reply(conn, REFUSED_EXIT, request)
                return
            tool, argv, cwd = request
            with self.lock:
                if self.allowed <= 0:
                    self.usage.refused += 1
                    booked = False
                else:
                    self.allowed -= 1
                    self.usage.calls += 1
                    booked = True
            if not booked:
                _reply(conn, REFUSED_EXIT, "this session's pred-call limit is used up")
                return
            code, call = None, PredCall(tool=tool, argv=_logged(argv), exit=None, seconds=0.0)
            try:
                code, call = self._run(conn, tool, argv, cwd, fds)
            finally:  # a booked call is logged whatever happens to it
                with self.lock:
                    self.log.append(call)
            _reply(conn, code if code is not None else KILLED_EXIT, None)
        finally:
            for fd in fds:
                os.close(fd)
            conn.close()
            with self.lock:
                self.handlers.discard(threading.current_thread())
            self.slots.release()

    def _run(
        self, conn: socket.socket, tool: str, argv: list[bytes], cwd: str, fds: list[int]
    ) -> tuple[int | None, PredCall]:
        """Have the runner start the real tool; its exit code (None: killed) and the call's log entry."""
        start = time.monotonic()
        reducing = tool == "pred" and argv[:1] == [b"reduce"]
        code, out_bytes, err_bytes, stdout = self._execute(conn, tool, argv, cwd, fds, tap=reducing)
        seconds = round(time.monotonic() - start, 4)
        call = PredCall(
            tool=tool,
            argv=_logged(argv),
            exit=code,
            seconds=seconds,
            stdout_bytes=out_bytes,
            stderr_bytes=err_bytes,
            reduction=self._reduction(conn, cwd, argv, stdout) if reducing and code == 0 else None,
        )
        return code, call

    def _execute(
        self, conn: socket.socket, tool: str, argv: list[bytes], cwd: str, fds: list[int], tap: bool
    ) -> tuple[int | None, int, int, bytes | None]:
        """One run of the tool on the descriptors `fds` (stdin, stdout, stderr): its exit code (None:
        killed), the bytes of its stdout and stderr, and with `tap` a copy of its stdout (at most
        MAX_SNAPSHOT_BYTES + 1 bytes)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        relay = {out_read: Sink(fds[1]), err_read: Sink(fds[2])}
        counts = dict.fromkeys(relay, 0)
        taps = {out_read: bytearray()} if tap else {}
        """A capped copy of a reduce call's stdout (its bundle, unless written with -o)."""
        redactions = {read: Redaction(self.redact) for read in relay}
        request = b"\0".join([tool.encode(), cwd.encode(), *argv])
        try:
            with self.lock:
                self.calls.add(ours)
            try:
                self._send(request, [fds[0], out_write, err_write, theirs.fileno()])
            finally:  # the runner has its copies: the pipes end when the run's copies close
                for fd in (out_write, err_write):
                    os.close(fd)
                theirs.close()
            code = self._wait(conn, ours, relay, counts, redactions, taps)
        except OSError:
            code = None
        finally:
            for fd in (out_read, err_read):
                os.close(fd)
            for sink in relay.values():
                sink.close()
            with self.lock:
                self.calls.discard(ours)
            ours.close()
        tapped = taps.get(out_read)
        return code, counts[out_read], counts[err_read], None if tapped is None else bytes(tapped)

    def _reduction(
        self, conn: socket.socket, cwd: str, argv: list[bytes], stdout: bytes | None
    ) -> "reductions.Reduction | None":
        """The call's snapshot, from pred's own stdout: for a call that wrote its bundle to a file,
        the stdout of the same call run again without `-o` (reductions.shadow_argv; a file the agent
        can rewrite before the gateway looks is never read). None on anything unexpected: a bad
        bundle means no summary, never a failed call."""
        try:
            shadow = reductions.shadow_argv([arg.decode("utf-8", "surrogateescape") for arg in argv])
            if shadow is not None:
                stdout = self._shadow(conn, cwd, [arg.encode("utf-8", "surrogateescape") for arg in shadow])
            if stdout is None or len(stdout) > reductions.MAX_SNAPSHOT_BYTES:
                return None
            return reductions.snapshot(stdout, self.snapshots)
        except Exception:  # noqa: BLE001 - the agent's files must never fail the gateway
            return None

    def _shadow(self, conn: socket.socket, cwd: str, argv: list[bytes]) -> bytes | None:
        """pred's stdout of `argv` run in the call's sandbox and cwd with /dev/null for its stdin and
        its output seen by nobody (not booked: the harness's own run, one per booked call, bounded by
        the call timeout and ended with the call's client); None unless it exits 0."""
        null_in = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        null_out = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
        try:
            code, _, _, stdout = self._execute(conn, "pred", argv, cwd, [null_in, null_out, null_out], tap=True)
        finally:
            os.close(null_in)
            os.close(null_out)
        return stdout if code == 0 else None

    def _wait(
        self,
        conn: socket.socket,
        call: socket.socket,
        relay: dict[int, "Sink"],
        counts: dict[int, int],
        redactions: dict[int, Redaction],
        taps: dict[int, bytearray],
    ) -> int | None:
        """One loop per call: relay the run's output (pipe -> the client's descriptor, counted) and
        wait for its exit code from the runner. None when the run was killed: its client went away,
        its command ended (cancel), or the timeout passed — shutting the call down kills it. Never
        blocks on the client's descriptors (Sink): the loop ends by the timeout, plus at most
        RELAY_WRITE_SECONDS for output still owed to a client that reads slowly."""
        deadline = time.monotonic() + self.call_timeout
        pipes, code, answered, cancelled = set(relay), None, False, False
        while pipes or not answered or any(sink.owed() for sink in relay.values()):
            now = time.monotonic()
            owed = [sink for sink in relay.values() if sink.owed()]
            if not pipes and answered:  # only output owed: bounded by the sinks' own stall limit
                for sink in owed:
                    sink.give_up_if_stalled(now)
                if not any(sink.owed() for sink in owed):
                    break
            watch = [*pipes, *([] if answered else [call]), *([] if answered or cancelled else [conn])]
            left = deadline - now
            if left <= 0 and (pipes or not answered):
                if cancelled:
                    break  # a run that will not end even killed: give up on it
                call.shutdown(socket.SHUT_RDWR)
                cancelled, deadline = True, time.monotonic() + 5
                continue
            running = bool(pipes) or not answered
            wait = (min(left, RELAY_WRITE_SECONDS) if owed else left) if running else RELAY_WRITE_SECONDS
            readable, writable, _ = select.select(watch, [sink.fd for sink in owed], [], wait)
            for sink in owed:
                if sink.fd in writable:
                    sink.flush()
                sink.give_up_if_stalled(time.monotonic())
            for ready in readable:
                if ready is call:
                    answer = _recv(call)
                    code, answered = (int(answer) if answer.isdigit() else None), True
                elif ready is conn:  # the client sends nothing more: readable means it hung up
                    call.shutdown(socket.SHUT_RDWR)
                    cancelled = True
                elif not _pump(ready, relay, counts, redactions[ready], taps.get(ready)):
                    pipes.discard(ready)
        return None if cancelled else code

    def _send(self, request: bytes, fds: list[int]) -> None:
        """Hand a call to the runner, starting it first if it is not running (or died: the OOM
        killer may take it with the session's other processes)."""
        with self.runner_lock:
            for attempt in (1, 2):
                if self.runner is None or self.runner.poll() is not None:
                    # from the keeper thread: bwrap --die-with-parent dies with the thread that started it
                    self.keeper.submit(self._start_runner).result()
                try:
                    socket.send_fds(self.control, [request], fds)
                    return
                except OSError:
                    if attempt == 2:
                        raise
                    self._stop_runner()

    def _start_runner(self) -> None:
        self._stop_runner()
        self.control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.runner = bwrap.start(
                self.launcher(),
                self.bwrap_path,
                self._options(),
                ["/usr/bin/python3", "-IS", RUNNER, str(theirs.fileno())],
                stdout=subprocess.DEVNULL,
                keep=(theirs.fileno(),),
            )
        finally:
            theirs.close()

    def _stop_runner(self) -> None:
        if self.runner is not None:
            _kill(self.runner)
            self.runner = None
        if self.control is not None:
            self.control.close()
            self.control = None

    def _options(self) -> list[str]:
        """The runner's sandbox: the system, the source, the real tools and the scratch."""
        args = [*bwrap.isolated("pred"), "--ro-bind", str(self.source_dir), bwrap.SOURCE_DIR]
        for name, path in sorted(self.tools.items()):
            args += ["--ro-bind", str(path), f"{LIBEXEC}/{name}"]
        args += ["--ro-bind", str(RUNNER_SCRIPT), RUNNER, "--bind", str(self.scratch), bwrap.SCRATCH_DIR]
        return [*args, *bwrap.sealed(bwrap.SCRATCH_DIR)]


def _request(data: bytes, fds: list[int], tools: dict[str, Path], scratch: Path) -> tuple[str, list[bytes], str] | str:
    """(tool, argv, cwd) of a well-formed request (`TOOL\0CWD\0ARG\0ARG...`); else why it is refused.
    The cwd and every argument that names a path are resolved by what they point to
    (scratch_paths.py): the cwd passed on is the resolved one, and a path outside /scratch is refused."""
    if len(fds) != 3:
        return "a call must pass exactly its stdin, stdout and stderr"
    if len(data) > MAX_REQUEST_BYTES:
        return f"the call's arguments exceed {MAX_REQUEST_BYTES} bytes"
    tool, _, rest = data.partition(b"\0")
    raw_cwd, _, args = rest.partition(b"\0")
    name = tool.decode("utf-8", "replace")
    if name not in tools:
        return f"unknown tool {name[:40]!r}; the tools are {', '.join(sorted(tools))}"
    here = raw_cwd.decode("utf-8", "surrogateescape")
    try:
        cwd = scratch_paths.resolve(scratch, here) if here.startswith("/") else ""
    except (scratch_paths.Outside, OSError):
        cwd = ""
    if not cwd:
        return f"pred runs in {bwrap.SCRATCH_DIR} (and its files are there): cd there first"
    argv = args.split(b"\0") if b"\0" in rest else []
    for arg in argv:
        why = _outside(scratch, cwd, arg.decode("utf-8", "surrogateescape"))
        if why:
            return why
    return name, argv, cwd


MAX_SHORT_CLUSTER = 16
"""The most letters a cluster of short options (`-qo`) may have: pred has fewer short options than
that, and each tail of a cluster is checked as a path, so the bound keeps the check linear."""


def _values(arg: str) -> list[str] | None:
    """What in `arg` pred's argument parser (clap) may take as a value: the argument itself, the part
    after `=` of a long option, and for a cluster of short options (`-qoPATH`) the tail after each of
    its letters, since any letter of it may be an option that takes the rest as its value (a value
    starts right after a letter, so no tail past the first non-letter needs a look). None: a cluster
    longer than MAX_SHORT_CLUSTER letters."""
    if arg.startswith("--"):
        return [arg.partition("=")[2]]
    if not arg.startswith("-"):
        return [arg]
    letters = len(arg) - 1 - len(arg[1:].lstrip("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"))
    if letters > MAX_SHORT_CLUSTER:
        return None
    return [arg[i:].removeprefix("=") for i in range(2, min(len(arg), letters + 2))]


def _outside(scratch: Path, cwd: str, arg: str) -> str | None:
    """Why `arg`, if it names a path (`--opt=PATH`, `-oPATH` too), is refused: it points outside /scratch."""
    values = _values(arg)
    if values is None:
        return f"{arg[:20]!r}...: more than {MAX_SHORT_CLUSTER} short options in one argument"
    for value in values:
        why = _path_outside(scratch, cwd, value)
        if why:
            return why
    return None


def _path_outside(scratch: Path, cwd: str, value: str) -> str | None:
    if not value or value == "-":
        return None
    looks = value.startswith(("/", ".")) or "/" in value or os.path.lexists(scratch_paths.host(scratch, cwd, value))
    if not looks:
        return None
    try:
        scratch_paths.resolve(scratch, value, cwd)
    except (scratch_paths.Outside, OSError) as exc:
        shown = value if len(value) <= 80 else value[:77] + "..."
        return f"pred's files must be in {bwrap.SCRATCH_DIR}: {shown!r} is not ({exc})"
    return None


def _bind(listener: socket.socket, directory: Path) -> None:
    """Bind to `directory`/socket through a descriptor of the directory (/proc/self/fd/N/socket),
    so the path fits in a sockaddr_un however deep the session's state lives."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        listener.bind(f"/proc/self/fd/{fd}/{SOCKET_NAME}")
    finally:
        os.close(fd)


def _reply(conn: socket.socket, code: int, message: str | None) -> None:
    try:
        conn.sendall(f"{code}\n{message or ''}".encode())
    except OSError:
        pass


def _pump(
    read: int, relay: dict[int, "Sink"], counts: dict[int, int], redaction: Redaction, tap: bytearray | None = None
) -> bool:
    """Move what the run wrote to the pipe `read` on to the client's descriptor, counted (before
    `redaction` rewrites host paths); False at its end. The pipe is always read, so the run is
    never blocked by a client that stopped reading: that client loses the rest. `tap` keeps a copy
    of the first MAX_SNAPSHOT_BYTES + 1 bytes (one more tells a longer output from one that fits)."""
    chunk = os.read(read, 65536)
    counts[read] += len(chunk)
    if tap is not None and len(tap) <= reductions.MAX_SNAPSHOT_BYTES:
        tap += chunk[: reductions.MAX_SNAPSHOT_BYTES + 1 - len(tap)]
    relay[read].send(redaction.feed(chunk))
    return bool(chunk)


def _logged(argv: list[bytes]) -> list[str]:
    return [arg[:MAX_LOGGED_ARG].decode("utf-8", "replace") for arg in argv[:50]]


class Sink:
    """One of the client's output descriptors, written without ever blocking the gateway.

    The descriptor is the agent's: a FIFO with a one-page buffer nobody reads, a pty, a socket with
    a full buffer — a blocking write to it would never return. So the gateway writes through its
    own non-blocking view (a FIFO, pipe or tty is reopened through /proc with O_NONBLOCK, which
    leaves the agent's own descriptor as it was; a socket is sent to with MSG_DONTWAIT; a regular
    file or a device like /dev/null never blocks). Output it cannot take is held (at most
    SINK_HELD_BYTES); a sink that takes nothing for RELAY_WRITE_SECONDS is given up."""

    def __init__(self, fd: int):
        self.fd, self.socket, self.dead = -1, None, False
        self.held = bytearray()
        self.progress = time.monotonic()
        try:
            mode = os.fstat(fd).st_mode
            if stat.S_ISSOCK(mode):
                self.socket = socket.socket(fileno=os.dup(fd))
                self.fd = self.socket.fileno()
            elif stat.S_ISREG(mode) or stat.S_ISBLK(mode) or (stat.S_ISCHR(mode) and not os.isatty(fd)):
                self.fd = os.dup(fd)
            else:
                self.fd = os.open(f"/proc/self/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
        except OSError:
            self.dead = True

    def send(self, data: bytes) -> None:
        if self.dead or not data:
            return
        self.held += data[: max(0, SINK_HELD_BYTES - len(self.held))]
        self.flush()

    def owed(self) -> bool:
        return bool(self.held) and not self.dead

    def flush(self) -> None:
        while self.held and not self.dead:
            try:
                if self.socket is not None:
                    done = self.socket.send(self.held[:65536], socket.MSG_DONTWAIT | socket.MSG_NOSIGNAL)
                else:
                    done = os.write(self.fd, self.held[:65536])
            except BlockingIOError:
                return
            except OSError:
                self.dead = True
                return
            del self.held[:done]
            self.progress = time.monotonic()

    def give_up_if_stalled(self, now: float) -> None:
        if self.owed() and now - self.progress > RELAY_WRITE_SECONDS:
            self.dead = True

    def close(self) -> None:
        if self.socket is not None:
            self.socket.close()
        elif self.fd >= 0:
            os.close(self.fd)
        self.fd = -1


def _recv(call: socket.socket) -> bytes:
    try:
        return call.recv(64)
    except OSError:
        return b""


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
