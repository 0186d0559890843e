"""Run the pinned `pred` binary under hard limits, and keep what it said as evidence.

pred can panic, loop or allocate without bound on hostile input, so every call gets a
timeout, CPU/memory/file-size limits and its own process group, killed as a group on
timeout (by pid, never by pattern).

The limits are set by util-linux's `prlimit`, which sets them on itself and then execs pred:
a Python `preexec_fn` would do the same, but it forces subprocess to fork() the whole
interpreter instead of vfork(), which costs more per call than the small pred calls of a
certificate take. Where `prlimit` is missing, `preexec_fn` it is. Either way a limit that cannot
be set is an error of the harness (LimitError), never an exit code of pred's.
"""

import math
import os
import resource
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

from pydantic import BaseModel, PrivateAttr

MAX_EVIDENCE_CHARS = 20_000
PANIC_EXIT = 101
"""How a Rust program exits when it panics."""
PRLIMIT = shutil.which("prlimit", path="/usr/bin:/bin")
PRLIMIT_FAILED = "prlimit: failed to set"
"""How prlimit's stderr begins when it cannot set a limit (it then exits 1 without running pred)."""


class LimitError(OSError):
    """pred's resource limits could not be set, so pred did not run (the harness's fault, not pred's)."""


class PredLimits(BaseModel):
    timeout_s: float = 60.0
    """Wall-clock seconds, after which the call's process group is killed."""
    memory_bytes: int = 4 * 1024**3
    file_size_bytes: int = 64 * 1024**2
    cpu_s: float | None = None
    """CPU seconds (RLIMIT_CPU), which the machine's load does not use up; None: the wall-clock
    limit and two seconds (the verifier sets it: verify/reach.py)."""
    budget_cpu_s: float | None = None
    """CPU seconds all the calls sharing one Budget may use together (one verification's: its pred
    and extractor calls); None: no budget beyond each call's own limit."""
    budget_wall_s: float | None = None
    """Wall-clock seconds of all those calls together: the backstop for calls that wait."""

    def cpu_limit(self) -> int:
        return math.ceil(self.cpu_s) if self.cpu_s is not None else int(self.timeout_s) + 2


class Budget:
    """The CPU seconds left to the calls of one verification. Each call's CPU limit is cut to what is
    left, and charged what it used (its own rusage, so the machine's load spends none of it); once it
    is spent, a call does not run at all and says so: the verification is then undecided."""

    def __init__(self, cpu_s: float | None, wall_s: float | None = None):
        self.total = cpu_s
        self.total_wall = wall_s
        self.used = 0.0
        self.used_wall = 0.0
        self._lock = threading.Lock()

    def left(self) -> float | None:
        """CPU seconds left (None: no budget)."""
        with self._lock:
            return None if self.total is None else max(0.0, self.total - self.used)

    def wall_left(self) -> float | None:
        with self._lock:
            return None if self.total_wall is None else max(0.0, self.total_wall - self.used_wall)

    def spent(self) -> bool:
        return self.left() == 0 or self.wall_left() == 0

    def charge(self, cpu_s: float, wall_s: float = 0.0) -> None:
        with self._lock:
            self.used += cpu_s
            self.used_wall += wall_s


class _Measured(subprocess.Popen):
    """Popen that keeps the child's resource usage when it reaps it (os.wait4 instead of waitpid)."""

    rusage: resource.struct_rusage | None = None

    def _try_wait(self, wait_flags: int) -> tuple[int, int]:
        try:
            pid, status, usage = os.wait4(self.pid, wait_flags)
        except ChildProcessError:  # reaped elsewhere, as Popen's own _try_wait allows
            return self.pid, 0
        if pid == self.pid:
            self.rusage = usage
        return pid, status


class PredCall(BaseModel):
    """One pred invocation, as evidence: what ran and what came back."""

    argv: list[str]
    stdin: str | None = None
    exit_code: int | None
    stdout: str
    """Clipped to MAX_EVIDENCE_CHARS: evidence, not data (`full_stdout` is the whole of it)."""
    stderr: str
    seconds: float
    timed_out: bool = False
    over_budget: bool = False
    """Not run: the verification's CPU budget was spent (PredLimits.budget_cpu_s)."""
    cpu_seconds: float | None = None
    """CPU time the call used (user and system), where it was measured."""
    _full_stdout: str = PrivateAttr(default="")

    @property
    def full_stdout(self) -> str:
        """Everything the program printed (not kept with the evidence: it can be megabytes)."""
        return self._full_stdout or self.stdout

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def command(self) -> str:
        return " ".join(self.argv)

    def brief(self) -> str:
        """One line for reasons and logs."""
        if self.timed_out:
            return f"`{self.command()}` timed out after {self.seconds:.0f}s"
        err = self.stderr.strip().splitlines()
        tail = f": {err[-1][:300]}" if err and self.exit_code else ""
        return f"`{self.command()}` exited {self.exit_code}{tail}"


def _clip(text: str) -> str:
    if len(text) <= MAX_EVIDENCE_CHARS:
        return text
    half = MAX_EVIDENCE_CHARS // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters cut ...]\n{text[-half:]}"


class Pred:
    """A handle on one pred binary (or the extractor, built on the same library: `name` is how its
    calls are shown as evidence); `run` never raises for the program's own failures."""

    def __init__(
        self, binary: Path, limits: PredLimits | None = None, name: str = "pred", budget: Budget | None = None
    ):
        self.binary = Path(binary)
        self.limits = limits or PredLimits()
        self.name = name
        self.calls = 0
        self.budget = budget

    def _cpu_limit(self) -> int:
        """The call's CPU limit: its own, cut to what the budget has left (at least one second)."""
        left = self.budget.left() if self.budget is not None else None
        if left is None:
            return self.limits.cpu_limit()
        return max(1, min(self.limits.cpu_limit(), math.ceil(left)))

    def _timeout(self) -> float:
        """The call's wall-clock limit: its own, cut to what the budget has left of its wall time."""
        left = self.budget.wall_left() if self.budget is not None else None
        return self.limits.timeout_s if left is None else min(self.limits.timeout_s, max(1.0, left))

    def _rlimits(self) -> list[tuple[str, int, int]]:
        """(prlimit option, resource, value) of each limit, set as soft and hard limit alike."""
        return [
            ("cpu", resource.RLIMIT_CPU, self._cpu_limit()),
            ("as", resource.RLIMIT_AS, self.limits.memory_bytes),
            ("fsize", resource.RLIMIT_FSIZE, self.limits.file_size_bytes),
            ("core", resource.RLIMIT_CORE, 0),
        ]

    def _preexec(self) -> None:
        for _, limit, value in self._rlimits():
            resource.setrlimit(limit, (value, value))

    def _limited(self, argv: list[str]) -> list[str]:
        if PRLIMIT is None:
            return argv
        return [PRLIMIT, *(f"--{name}={value}" for name, _, value in self._rlimits()), "--", *argv]

    def run(self, *args: str, stdin: str | None = None, cwd: Path | None = None) -> PredCall:
        argv = [str(self.binary), *args]
        # as Popen would raise without prlimit in front of it (prlimit would exit 127 or 126)
        if not self.binary.is_file():
            raise FileNotFoundError(f"{self.name} binary not found: {self.binary}")
        if not os.access(self.binary, os.X_OK):
            raise PermissionError(f"{self.name} binary not executable: {self.binary}")
        shown = [self.name, *args]
        if self.budget is not None and self.budget.spent():
            return PredCall(
                argv=shown, stdin=_clip(stdin) if stdin is not None else None, exit_code=None, stdout="",
                stderr="", seconds=0.0, over_budget=True,
            )  # fmt: skip
        self.calls += 1
        start = time.monotonic()
        try:
            proc = _Measured(
                self._limited(argv),
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=cwd,
                env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "NO_COLOR": "1"},
                start_new_session=True,
                preexec_fn=self._preexec if PRLIMIT is None else None,
            )
        except subprocess.SubprocessError as exc:  # only preexec_fn raises this
            raise LimitError(f"{self.name} not run, its limits could not be set: {exc}") from exc
        timed_out = False
        try:
            out, err = proc.communicate(stdin.encode() if stdin is not None else None, self._timeout())
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        if PRLIMIT is not None and proc.returncode == 1 and err.startswith(PRLIMIT_FAILED.encode()):
            raise LimitError(
                f"{self.name} not run, its limits could not be set: {err.decode(errors='replace').strip()}"
            )
        seconds = time.monotonic() - start
        measured = proc.rusage.ru_utime + proc.rusage.ru_stime if proc.rusage is not None else seconds
        used = math.ceil(measured * 10**4) / 10**4  # what the call records is what the budget is charged
        if self.budget is not None:
            self.budget.charge(used, seconds)
        stdout = out.decode("utf-8", "replace")
        call = PredCall(
            argv=shown,
            stdin=_clip(stdin) if stdin is not None else None,
            exit_code=None if timed_out else proc.returncode,
            stdout=_clip(stdout),
            stderr=_clip(err.decode("utf-8", "replace")),
            seconds=round(seconds, 4),
            timed_out=timed_out,
            cpu_seconds=used,
        )
        call._full_stdout = stdout
        return call

    def version(self) -> str:
        """The version pred reports, e.g. '0.5.0'."""
        call = self.run("--version")
        if not call.ok:
            raise RuntimeError(f"{self.binary} does not run: {call.brief()}")
        return call.stdout.strip().split()[-1]


def _command(call: PredCall, most: int = 48) -> str:
    """The command for a one-line reason: a long argument (a 4096-value --config) is cut; the
    evidence keeps it whole."""
    return " ".join(arg if len(arg) <= most else f"{arg[: most - 8]}...({len(arg)} chars)" for arg in call.argv)


def _out_of_cpu(call: PredCall) -> bool:
    """RLIMIT_CPU: SIGXCPU at the soft limit, SIGKILL at the hard one (both are set alike)."""
    return not call.timed_out and call.exit_code in (-signal.SIGXCPU, -signal.SIGKILL)


def _out_of_memory(call: PredCall) -> bool:
    return "memory allocation" in call.stderr


def _out_of_file_size(call: PredCall) -> bool:
    return not call.timed_out and call.exit_code == -signal.SIGXFSZ


def stopped_by_limit(call: PredCall) -> bool:
    """Whether the caller's own limits stopped the call (wall time, CPU time, memory, file size)
    before it answered: a larger limit might let it answer."""
    return call.over_budget or call.timed_out or _out_of_cpu(call) or _out_of_memory(call) or _out_of_file_size(call)


def limit_hit(call: PredCall, limits: PredLimits) -> str | None:
    """Which of the caller's own limits stopped the call, in one line (None: it ended by itself)."""
    if call.over_budget:
        return (
            f"`{_command(call)}` was not run: the certificate's budget ({limits.budget_cpu_s or 0:g} s of CPU, "
            f"{limits.budget_wall_s or 0:g} s of wall time, across all its calls) is spent"
        )
    if call.timed_out:
        return f"`{_command(call)}` exceeded the {limits.timeout_s:g}s time limit and was killed"
    if _out_of_cpu(call):
        used = f"{call.cpu_seconds:.0f}" if call.cpu_seconds is not None else str(limits.cpu_limit())
        return f"`{_command(call)}` used up its {used} s of CPU time and was stopped"
    if _out_of_memory(call):
        return f"`{_command(call)}` ran out of memory (limit {limits.memory_bytes // 2**20} MiB)"
    if _out_of_file_size(call):
        return f"`{_command(call)}` wrote past its file-size limit ({limits.file_size_bytes // 2**20} MiB)"
    return None


def pred_failure(call: PredCall, limits: PredLimits) -> str:
    """One line saying why a call failed, in the program's own words where it has any."""
    lines = [line.strip() for line in call.stderr.splitlines() if line.strip()]
    limited = limit_hit(call, limits)
    if limited:
        return limited
    if call.exit_code is not None and call.exit_code < 0:
        return f"`{_command(call)}` was killed by signal {-call.exit_code} (CPU or file-size limit?)"
    errors = [line.removeprefix("Error:").strip() for line in lines if line.startswith("Error:")]
    if errors:
        return f"`{_command(call)}` failed: {errors[0][:300]}"
    panic = panic_message(call)
    if panic:
        return f"`{_command(call)}` panicked: {panic}"
    return f"`{_command(call)}` exited {call.exit_code}" + (f": {lines[-1][:300]}" if lines else "")


def panic_message(call: PredCall) -> str | None:
    """What a Rust panic of pred said (where, then the message), or None when it did not panic."""
    if call.exit_code != PANIC_EXIT:
        return None
    lines = [line.strip() for line in call.stderr.splitlines() if line.strip()]
    at = next((i for i, line in enumerate(lines) if "panicked at" in line), None)
    if at is None:
        return "exit 101"
    where = lines[at].split("problemreductions-", 1)[-1].rstrip(":")
    message = lines[at + 1] if at + 1 < len(lines) else ""
    return f"{message[:240]} (at problemreductions-{where})"
