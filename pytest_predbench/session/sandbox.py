"""The agent's shell: every command runs in a fresh bubblewrap sandbox.

What the agent sees (and nothing else):

    /usr /bin /lib* and a few /etc files   read-only system
    /src/problemreductions                 read-only library source
    /predbench/bin/pred                    a client of the pred gateway (gateway.py); no real pred
    /predbench/bin/pred-extract            the same, for the extractor (verify/extractor.py)
    /predbench/bin/submit-certificate      the one submission channel (see submission.py)
    /predbench/gateway/socket              the gateway's socket (read-only mount: connect, not replace)
    /predbench/spool                       where that command leaves files (`writable`)
    /scratch                               its private writable directory (cwd and HOME)
    /tmp                                   a small tmpfs, fresh for every command

Everything else is read-only, the sandbox's own root and /dev included (tmpfs without a size:
writable, they would let a command fill the host's memory).

No network (all namespaces unshared), no capabilities, its own user and pid namespace, a
clean environment (no API keys, no harness paths), bubblewrap's own arguments passed by file
descriptor (so /proc/1/cmdline shows no host path), per-process file-size and memory limits, a
timeout per command that kills the whole sandbox, and output captured bounded (observation.py).
Capabilities matter: bwrap started by root keeps them unless told otherwise, and with
CAP_SYS_ADMIN a command could remount /usr writable.

The session as a whole is bounded by the kernel (bounds.py): every process of it, commands and
pred calls alike, starts in its cgroups (memory, processes), and its scratch and spool live on a
size-limited filesystem. pred calls are booked by the gateway, outside the sandbox: the count is
not in anything the agent can write, and past the limit nothing runs.
"""

import os
import select
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

from pydantic import BaseModel

from pytest_predbench.session import bwrap, outcome, procview
from pytest_predbench.session.bounds import BoundsError, Enforcement, SessionBounds
from pytest_predbench.session.bwrap import SANDBOX_ENV, SANDBOX_UID, SCRATCH_DIR, SOURCE_DIR, TOOLS_DIR
from pytest_predbench.session.gateway import SOCKET_DIR, Gateway, PredUsage, client_program
from pytest_predbench.session.limits import COMMAND_BYTES
from pytest_predbench.session.observation import OUTPUT_BYTES, NormalizedCapture
from pytest_predbench.session.protocol import PredCall, SessionLimits

__all__ = ["SANDBOX_ENV", "SANDBOX_UID", "SCRATCH_DIR", "SOURCE_DIR", "TOOLS_DIR", "PredUsage"]

PAGE = 4096


def first_shell(ulimits: str = bwrap.ULIMITS) -> str:
    """The sandbox's first shell: writes the start byte ($2, outcome.started), closes it and
    bubblewrap's status descriptor ($3) so the command can write neither, makes itself (and so every
    process of the command) the OOM killer's first choice, sets `ulimits`, hard per-process limits
    (where no capability remains to raise them again), then runs the command ($1). An agent whose
    runtime needs other per-process limits (opencode) passes its own `ulimits`, never its own protocol."""
    return (
        f'printf 1 >&"$2" && eval "exec $2>&- $3>&-"; '
        f"{{ echo {outcome.OOM_FIRST} > /proc/self/oom_score_adj; }} 2>/dev/null; "
        f'{ulimits}; exec /bin/bash -c "$1"'
    )


LIMITED_SHELL = first_shell()
"""The first shell of every mini-swe and baseline command."""


class SandboxError(RuntimeError):
    """bubblewrap cannot run here; one line says why (an infrastructure failure, not the agent's)."""


class CommandResult(BaseModel):
    output: str
    """stdout and stderr interleaved, normalised, bounded head and tail (observation.py)."""
    returncode: int | None
    timed_out: bool = False
    seconds: float
    killed: str | None = None
    """Why the command did not simply exit ("killed: out of memory ..."), shown to the model."""


class Sandbox:
    """One session's sandbox, its pred gateway and its bounds; host-side state lives in `state_dir`,
    outside the agent's view: the tools, the gateway's socket, and `disk` (the bounded filesystem
    holding the scratch and every `writable` directory). Close it when the session ends."""

    def __init__(
        self,
        *,
        pred_path: Path,
        source_dir: Path,
        state_dir: Path,
        extractor_path: Path | None = None,
        tools: dict[str, str] | None = None,
        writable: tuple[str, ...] = (),
        limits: SessionLimits | None = None,
        output_limit: int = OUTPUT_BYTES,
        bwrap: str = "bwrap",
        snapshots: Path | None = None,
    ):
        self.source_dir = Path(source_dir).resolve()
        self.state_dir = Path(state_dir).resolve()
        self.output_limit = output_limit
        self.bwrap = shutil.which(bwrap) or bwrap
        self.limits = limits or SessionLimits()
        self.disk = self.state_dir / "disk"
        try:
            reserved = _footprint(self.source_dir)
            self.bounds = SessionBounds(self.disk, self.limits, unbounded=self.limits.unbounded, reserved=reserved)
        except (BoundsError, OSError) as exc:
            raise SandboxError(str(exc)) from exc
        self.scratch = self.disk / "scratch"
        self.tools_dir = self.disk / ".tools"
        """On the session's own filesystem too: /proc/self/mountinfo names a bind mount's source by
        its path within its filesystem, which for a directory of the harness's is a host path."""
        self.tools_dir.mkdir(parents=True, exist_ok=True)
        self.writable = {inside: self.disk / Path(inside).name for inside in writable}
        self.read_only: dict[str, Path] = {}
        """More read-only binds, inside path -> host path (an installed agent, its model socket)."""
        for d in (self.scratch, *self.writable.values()):
            d.mkdir(parents=True, exist_ok=True)
        real = {"pred": Path(pred_path).resolve()}
        if extractor_path:
            real["pred-extract"] = Path(extractor_path).resolve()
        programs = {name: client_program(name) for name in real}
        for name, text in {**programs, **{name: text.encode() for name, text in (tools or {}).items()}}.items():
            path = self.tools_dir / name
            path.write_bytes(text)
            path.chmod(0o755)
        self.copying: threading.Thread | None = None
        self.copy_error: str | None = None
        self.source_bound = self._neutral_source()  # after the tools: the disk grows by both
        try:
            self.gateway = Gateway(
                tools=real,
                scratch=self.scratch,
                source_dir=self.source_bound,
                socket_dir=self.disk / ".gateway",
                host_source=self.source_dir,
                launcher=self.bounds.launcher,
                bwrap_path=self.bwrap,
                snapshots=snapshots,
            )
        except OSError as exc:
            self._settle_copy()
            self.bounds.close()
            raise SandboxError(f"cannot start the pred gateway: {exc.strerror or exc}") from exc

    def _neutral_source(self) -> Path:
        """The library source as the sandboxes bind it: a copy on the session's own tmpfs, whose
        mountinfo root is `/.source` (bound from the host, it would be the host's path, e.g. under
        cargo's registry). The copy is made in the background (~0.1 s: it overlaps the model's
        first reply) and waited for by the first command (`_source_ready`). Where the disk is no
        tmpfs (unbounded, not root) the scratch names the host's path anyway, and the source is
        bound as it is."""
        if not self.bounds.mounted:
            return self.source_dir
        copy = self.disk / ".source"
        self.copying = threading.Thread(target=self._copy_source, args=(copy,), name="source-copy", daemon=True)
        self.copying.start()
        return copy

    def _copy_source(self, copy: Path) -> None:
        try:
            shutil.copytree(self.source_dir, copy, symlinks=True)
            self.bounds.reserve()
        except (OSError, shutil.Error, BoundsError) as exc:
            self.copy_error = f"cannot copy the library source onto the session's disk: {exc}"[:300]

    def _settle_copy(self) -> None:
        """Let a copy still going finish before its disk is unmounted."""
        if self.copying is not None:
            self.copying.join()

    def _source_ready(self) -> None:
        """Wait for the source's copy; SandboxError if it failed."""
        self._settle_copy()
        if self.copy_error:
            raise SandboxError(self.copy_error)

    @property
    def enforcement(self) -> Enforcement:
        """Which of the session's bounds the kernel enforces, and why not the others."""
        return self.bounds.enforcement

    def writable_dir(self, inside: str) -> Path:
        """The host directory behind the writable directory `inside` (on the bounded disk)."""
        return self.writable[inside]

    def set_pred_quota(self, remaining: int | None) -> None:
        """How many more pred calls the gateway books (None: no limit)."""
        self.gateway.set_quota(remaining)

    def take_pred_usage(self) -> PredUsage:
        """The pred calls the gateway booked and refused since the last look."""
        return self.gateway.take_usage()

    def take_pred_log(self) -> list[PredCall]:
        """The calls the gateway ran since the last look: tool, argv, exit, seconds, bytes."""
        return self.gateway.take_log()

    def options(self, status_fd: int | None = None) -> list[str]:
        """bubblewrap's options (passed by file descriptor, never on its command line), with the
        session's own /proc counters as of now (procview.py)."""
        args = ["--json-status-fd", str(status_fd)] if status_fd is not None else []
        limit = self.limits.memory_mib * 1024**2
        args += [
            *bwrap.isolated("sandbox"),
            *procview.write_view(
                self.disk / ".proc", limit, self.bounds.memory_used(), self.bounds.process_count()
            ),
            "--ro-bind", str(self.source_bound), SOURCE_DIR,
            "--ro-bind", str(self.tools_dir), TOOLS_DIR,
            "--ro-bind", str(self.gateway.socket_dir), SOCKET_DIR,
            "--bind", str(self.scratch), SCRATCH_DIR,
        ]  # fmt: skip
        for inside, host in sorted(self.read_only.items()):
            args += ["--ro-bind", str(host), inside]
        for inside, host in sorted(self.writable.items()):
            args += ["--bind", str(host), inside]
        return [*args, *bwrap.sealed(SCRATCH_DIR)]

    def run(self, command: str, timeout: float, *, shell: str = LIMITED_SHELL) -> CommandResult:
        """Run one command; on timeout kill bwrap's process group, which takes the sandbox with it.
        pred calls still running when it ends are killed with it. Once the sandbox has started,
        whatever ends the command is its result (outcome.py); SandboxError only before that. `shell`: the
        first shell (first_shell), LIMITED_SHELL unless an agent needs other per-process limits."""
        start = time.monotonic()
        self._source_ready()
        refused = _refusal(command)
        if refused:
            return CommandResult(output="", returncode=126, seconds=0.0, killed=refused)
        self.gateway.call_timeout = max(0.1, timeout)
        status_read, status_write = os.pipe()
        started_read, started_write = os.pipe()
        oom_before = outcome.oom_kills(self.bounds.cgroups)
        try:
            proc = bwrap.start(
                self.bounds.launcher(),
                self.bwrap,
                self.options(status_write),
                ["/bin/bash", "-c", shell, "limits", command, str(started_write), str(status_write)],
                stdout=subprocess.PIPE,
                keep=(status_write, started_write),
            )
        except OSError as exc:
            os.close(status_read)
            os.close(started_read)
            raise SandboxError(f"cannot start bubblewrap ({self.bwrap}): {exc.strerror}") from exc
        finally:
            os.close(status_write)
            os.close(started_write)
        capture = NormalizedCapture(self.output_limit)
        assert proc.stdout is not None
        reader = threading.Thread(target=_drain, args=(proc.stdout, capture), daemon=True)
        reader.start()
        status = bytearray()
        timed_out = False
        try:
            _watch(proc, status_read, status, time.monotonic() + max(0.1, timeout))
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        except BaseException:  # Ctrl-C or SIGTERM: the sandbox is in its own session and would run on
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            os.close(status_read)
            os.close(started_read)
            self.gateway.cancel()
            raise
        finally:
            self.gateway.cancel()
        reader.join(timeout=5)
        with os.fdopen(status_read, "rb") as rest:
            status += rest.read()
        ran = outcome.started(started_read)
        os.close(started_read)
        output = capture.text()
        if not ran and not timed_out:
            # the shell inside writes its start byte first: without it, the sandbox never started
            raise SandboxError(f"bubblewrap failed: {output.strip()[:300]}")
        returncode, killed = outcome.killed_reason(
            oom_before, outcome.oom_kills(self.bounds.cgroups), outcome.exit_code(bytes(status)), proc.returncode
        )
        return CommandResult(
            output=output,
            returncode=None if timed_out else returncode,
            timed_out=timed_out,
            seconds=round(time.monotonic() - start, 4),
            killed=None if timed_out else killed,
        )

    def close(self) -> None:
        """Stop the gateway, remove the cgroups, unmount and remove the disk."""
        self.gateway.close()
        self._settle_copy()
        self.bounds.close()
        shutil.rmtree(self.disk, ignore_errors=True)

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _footprint(tree: Path) -> int:
    """What a copy of `tree` takes on a tmpfs: every file and directory in whole pages."""
    total = 0
    for where, dirs, files in os.walk(tree):
        sizes = (os.lstat(os.path.join(where, name)).st_size for name in files)
        total += PAGE * (1 + len(dirs)) + sum(PAGE * -(-size // PAGE) for size in sizes)
    return total


def _refusal(command: str) -> str | None:
    """Why `command` cannot be handed to a shell (the model's doing: a command result, not infra)."""
    if "\0" in command:
        return "refused: the command contains a NUL byte, which no shell argument can hold"
    size = len(command.encode("utf-8", "surrogateescape"))
    if size > COMMAND_BYTES:
        return f"refused: the command is {size} bytes, more than the {COMMAND_BYTES} a shell argument can hold"
    return None


def _watch(proc: subprocess.Popen, status_fd: int, status: bytearray, deadline: float) -> None:
    """Wait for `proc` until `deadline` (TimeoutExpired past it), reading bubblewrap's status lines
    as they come: once it names its child, bubblewrap is kept off the OOM killer (outcome.protect)."""
    protected = False
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise subprocess.TimeoutExpired(proc.args, 0)
        if protected:
            proc.wait(timeout=left)
            return
        ready, _, _ = select.select([status_fd], [], [], min(left, 0.5))
        if ready:
            chunk = os.read(status_fd, 4096)
            status += chunk
            if b"child-pid" in status or not chunk:
                outcome.protect(proc.pid)
                protected = True
        elif proc.poll() is not None:
            return


def _drain(stream, capture: NormalizedCapture) -> None:  # noqa: ANN001 - a binary pipe
    for chunk in iter(lambda: stream.read1(65536), b""):
        capture.feed(chunk)
    stream.close()
