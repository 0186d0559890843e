"""Run the pinned `pred` binary under hard limits, and keep what it said as evidence.

pred can panic, loop or allocate without bound on hostile input, so every call gets a
timeout, CPU/memory/file-size limits and its own process group, killed as a group on
timeout (by pid, never by pattern).
"""

import os
import resource
import signal
import subprocess
import time
from pathlib import Path

from pydantic import BaseModel

MAX_EVIDENCE_CHARS = 20_000


class PredLimits(BaseModel):
    timeout_s: float = 60.0
    memory_bytes: int = 4 * 1024**3
    file_size_bytes: int = 64 * 1024**2


class PredCall(BaseModel):
    """One pred invocation, as evidence: what ran and what came back."""

    argv: list[str]
    stdin: str | None = None
    exit_code: int | None
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool = False

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
    """A handle on one pred binary; `run` never raises for pred's own failures."""

    def __init__(self, binary: Path, limits: PredLimits | None = None):
        self.binary = Path(binary)
        self.limits = limits or PredLimits()
        self.calls = 0

    def _preexec(self) -> None:
        cpu = int(self.limits.timeout_s) + 2
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
        resource.setrlimit(resource.RLIMIT_AS, (self.limits.memory_bytes, self.limits.memory_bytes))
        resource.setrlimit(resource.RLIMIT_FSIZE, (self.limits.file_size_bytes, self.limits.file_size_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    def run(self, *args: str, stdin: str | None = None, cwd: Path | None = None) -> PredCall:
        argv = [str(self.binary), *args]
        self.calls += 1
        start = time.monotonic()
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "NO_COLOR": "1"},
            start_new_session=True,
            preexec_fn=self._preexec,
        )
        timed_out = False
        try:
            out, err = proc.communicate(stdin.encode() if stdin is not None else None, self.limits.timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        shown = ["pred", *args]
        return PredCall(
            argv=shown,
            stdin=_clip(stdin) if stdin is not None else None,
            exit_code=None if timed_out else proc.returncode,
            stdout=_clip(out.decode("utf-8", "replace")),
            stderr=_clip(err.decode("utf-8", "replace")),
            seconds=round(time.monotonic() - start, 4),
            timed_out=timed_out,
        )

    def version(self) -> str:
        """The version pred reports, e.g. '0.5.0'."""
        call = self.run("--version")
        if not call.ok:
            raise RuntimeError(f"{self.binary} does not run: {call.brief()}")
        return call.stdout.strip().split()[-1]
