"""A throw-away PostgreSQL server for the tests, the trials and the benchmarks: Debian's own
server binaries (`make setup` installs them), started in a fresh temporary directory on a Unix
socket only (no TCP port), and removed afterwards.

    with PgServer() as server:        # initdb + postgres, as an unprivileged user
        url = server.url              # postgresql://predbench@/predbench?host=<socket dir>
        server.kill()                 # SIGKILL the whole server (postmaster and backends) at once
        server.start()                # start it again on the same data: crash recovery, as after a crash

initdb refuses to run as root, and a server must not run as root either: as root the server runs
as Debian's `postgres` system user (the package creates it), otherwise as the current user. The
server and every backend it forks share one process group of their own, so a kill reaches all of
them and nothing else (by that group's id, never by a name pattern).

A process that made a server may die without closing it (a test run SIGKILLed mid-way, a Ctrl-C
between two steps): a guard process of its own session, started with the directory, waits on a
pipe only its maker holds open. When the maker is gone, however it went, the pipe ends and the
guard stops what is left of the server (its postmaster found by its pid file, checked to be that
very server: its binary, and the leader of its own process group) and removes the directory. So
no server and no scratch directory outlive the run that made them.
"""

import glob
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

SERVER_USER = "postgres"
"""As root, the server runs as this system user (Debian's postgresql package creates it)."""
ROLE = "predbench"
DATABASE = "predbench"
START_TIMEOUT = 60.0


class PgServerError(RuntimeError):
    """The server could not be set up or started; the message says how to fix it."""


def server_binaries() -> Path:
    """The bin directory of the newest PostgreSQL server Debian installed."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"), key=lambda p: int(Path(p).parts[-3]))
    if not found:
        raise PgServerError("no PostgreSQL server under /usr/lib/postgresql/*/bin: run `make setup` (apt: postgresql)")
    return Path(found[-1]).parent


def _user() -> pwd.struct_passwd:
    if os.geteuid() != 0:
        return pwd.getpwuid(os.geteuid())
    try:
        return pwd.getpwnam(SERVER_USER)
    except KeyError:
        raise PgServerError(f"running as root, and there is no '{SERVER_USER}' user to run the server as") from None


GUARD = r"""
import os, shutil, signal, sys, time
root, binary = sys.argv[1], os.path.realpath(sys.argv[2])
sys.stdin.buffer.read()  # returns once every holder of the pipe's other end is gone
def group(pgid):
    found = []
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/stat") as handle:
                stat = handle.read()
        except (OSError, ValueError):
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            found.append(int(name))
    return found
try:
    with open(os.path.join(root, "data", "postmaster.pid")) as handle:
        pid = int(handle.readline())
    ours = os.path.realpath(f"/proc/{pid}/exe") == binary and pid in group(pid)
except (OSError, ValueError):
    ours = False
if ours:
    os.killpg(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while group(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
shutil.rmtree(root, ignore_errors=True)
"""
"""The guard's program (run by this Python, with the server's directory and postgres binary)."""


def _start_guard(root: Path, binary: Path) -> int:
    """Start the guard of `root` (see the module's docstring); the pipe end that keeps it waiting."""
    read, write = os.pipe()  # neither end is inherited by any other child (close_fds, non-inheritable)
    try:
        subprocess.Popen(
            [sys.executable, "-c", GUARD, str(root), str(binary)],
            stdin=read,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a kill of its maker's process group leaves it to do its job
        )
    finally:
        os.close(read)
    return write


class PgServer:
    """One server in its own temporary directory (data/, sock/, server.log), removed with the
    server when the process that made it is gone (its guard: see the module's docstring)."""

    def __init__(self, durable: bool = False):
        """`durable`: fsync on, as a real deployment runs; off (the default) for tests, which only
        kill processes, never the machine, so the operating system keeps every write anyway."""
        self.bin = server_binaries()
        self.user = _user()
        self.durable = durable
        self.root = Path(tempfile.mkdtemp(prefix="predbench-pg-"))
        self._guard = _start_guard(self.root, self.bin / "postgres")
        self.data = self.root / "data"
        self.sock = self.root / "sock"
        self.log = self.root / "server.log"
        self.proc: subprocess.Popen | None = None
        os.chown(self.root, self.user.pw_uid, self.user.pw_gid)
        self.sock.mkdir()
        os.chown(self.sock, self.user.pw_uid, self.user.pw_gid)
        self._initdb()

    @property
    def url(self) -> str:
        return f"postgresql://{ROLE}@/{DATABASE}?host={self.sock}"

    def _as_server_user(self) -> dict:
        if os.geteuid() != 0:
            return {}
        return {"user": self.user.pw_uid, "group": self.user.pw_gid, "extra_groups": []}

    def _initdb(self) -> None:
        proc = subprocess.run(
            [str(self.bin / "initdb"), "-D", str(self.data), "-U", ROLE, "-A", "trust", "--no-sync", "-E", "UTF8"],
            capture_output=True,
            text=True,
            cwd=self.root,
            env={**os.environ, "LC_ALL": "C"},
            **self._as_server_user(),
        )
        if proc.returncode != 0:
            raise PgServerError(f"initdb failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")

    def start(self) -> "PgServer":
        """Start the server (again) and wait until it accepts connections; the first start also
        creates the database."""
        settings = {
            "listen_addresses": "",
            "unix_socket_directories": str(self.sock),
            "fsync": "on" if self.durable else "off",
            "max_connections": "100",
            "shared_buffers": "32MB",
        }
        args = [str(self.bin / "postgres"), "-D", str(self.data)]
        for name, value in settings.items():
            args += ["-c", f"{name}={value}"]
        with open(self.log, "a") as log:
            self.proc = subprocess.Popen(
                args,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.root,
                start_new_session=True,
                **self._as_server_user(),
            )
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        admin = f"postgresql://{ROLE}@/postgres?host={self.sock}"
        while True:
            if self.proc is not None and self.proc.poll() is not None:
                raise PgServerError(f"postgres exited {self.proc.returncode}: {self.log.read_text()[-1000:]}")
            try:
                with psycopg.connect(admin, connect_timeout=2, autocommit=True) as conn:
                    exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)).fetchone()
                    if not exists:
                        conn.execute(f"CREATE DATABASE {DATABASE}")
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise PgServerError(f"postgres did not accept connections in {START_TIMEOUT:.0f}s") from None
                time.sleep(0.1)

    def members(self) -> list[int]:
        """The live processes of the server's process group (postmaster and every backend)."""
        if self.proc is None:
            return []
        members = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2 :].split()
            if int(fields[2]) == self.proc.pid and fields[0] not in ("Z", "X"):
                members.append(int(entry.name))
        return members

    def kill(self) -> None:
        """SIGKILL every process of the server at once (a crash, not a shutdown) and wait until all
        are gone."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        deadline = time.monotonic() + 30
        while self.members() and time.monotonic() < deadline:
            time.sleep(0.02)
        self.proc = None

    def stop(self) -> None:
        """A fast shutdown (SIGINT to the postmaster); SIGKILL if it does not end in time."""
        if self.proc is None:
            return
        try:
            self.proc.send_signal(signal.SIGINT)
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        self.kill()

    def close(self) -> None:
        """Stop the server and remove its directory (and let its guard go)."""
        try:
            self.stop()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
            if self._guard is not None:
                os.close(self._guard)
                self._guard = None

    def __enter__(self) -> "PgServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """One throw-away server per test process (each xdist worker starts its own), stopped and
    removed at the end. Tests give each run its own id, so they share it without meeting."""
    try:
        server = PgServer().start()
    except PgServerError as exc:
        pytest.fail(f"these tests need a PostgreSQL server: {exc}", pytrace=False)
    yield server
    server.close()


def main() -> int:
    """`python -m tests.support.postgres`: a throw-away server for trying a shared run by hand (three
    shells on one machine); prints its URL and runs until Ctrl-C, then removes everything."""
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even when started in the background of a script
    with PgServer(durable=True) as server:
        print(f"export STORE='{server.url}'", flush=True)
        print("PostgreSQL is running (Ctrl-C stops it and removes its data)", file=sys.stderr, flush=True)
        try:
            while True:
                signal.pause()
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
