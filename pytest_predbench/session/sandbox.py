"""The agent's shell: every command runs in a fresh bubblewrap sandbox.

What the agent sees (and nothing else):

    /usr /bin /lib* and a few /etc files   read-only system
    /src/problemreductions                 read-only library source
    /predbench/bin/pred                    the pred-call counter, then the real pred
    /predbench/bin/pred-extract            the same counter, then the extractor (verify/extractor.py)
    /predbench/bin/submit-certificate      the one submission channel (see submission.py)
    /predbench/spool                       where that command leaves files (`writable`)
    /scratch                               its private writable directory (cwd and HOME)
    /tmp                                   a small tmpfs, fresh for every command

Everything else is read-only, the sandbox's own root and /dev included (tmpfs without a size:
writable, they would let a command fill the host's memory).

No network (all namespaces unshared), no capabilities, its own user and pid namespace, a
clean environment (no API keys, no harness paths), hard file-size and memory limits, a
timeout per command that kills the whole sandbox, and output captured bounded
(observation.py). Capabilities matter: bwrap started by root keeps them unless told
otherwise, and with CAP_SYS_ADMIN a command could remount /usr writable.

Counting pred calls is cooperative: `pred` is a wrapper that logs each call to a
directory the agent can write, and refuses calls past the session's quota. An agent can
bypass it by running /predbench/libexec/pred directly or by editing the log. That is
accepted: the pred-call limit is a fairness budget, not a security boundary (wall time,
command timeouts and model calls still bound the work), and every command is in the
trajectory, so a bypass is visible to anyone who reads it.
"""

import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

from pydantic import BaseModel

from pytest_predbench.files import read_untrusted
from pytest_predbench.session.observation import MAX_OBSERVATION_BYTES, NormalizedCapture

SOURCE_DIR = "/src/problemreductions"
SCRATCH_DIR = "/scratch"
TOOLS_DIR = "/predbench/bin"
REAL_PRED = "/predbench/libexec/pred"
PRED_LOG_DIR = "/predbench/log"
QUOTA_DIR = "/predbench/etc"
SANDBOX_UID = 1000

SANDBOX_ENV = {
    "PATH": f"{TOOLS_DIR}:/usr/local/bin:/usr/bin:/bin",
    "HOME": SCRATCH_DIR,
    "LANG": "C.UTF-8",
    "TERM": "dumb",
    "NO_COLOR": "1",
    "PAGER": "cat",
    "TMPDIR": "/tmp",
}
ETC_FILES = (
    "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "passwd", "group",
    "nsswitch.conf", "localtime", "bash.bashrc", "profile", "inputrc",
)  # fmt: skip
TMPFS_BYTES = 64 * 1024**2
FILE_SIZE_BYTES = 64 * 1024**2
MEMORY_BYTES = 4 * 1024**3
LIMITED_SHELL = (
    f'ulimit -f {FILE_SIZE_BYTES // 1024} -v {MEMORY_BYTES // 1024} -c 0 || exit 126; exec /bin/bash -c "$1"'
)
"""Hard resource limits set inside the sandbox, where no capability remains to raise them again."""

REAL_EXTRACTOR = "/predbench/libexec/pred-extract"


def counted(name: str, real: str) -> str:
    """A tool as the agent sees it: count the call against the session's pred-call limit, then run it."""
    return f"""#!/bin/sh
# {name} as the agent sees it: count the call for the session's pred-call limit, then run it.
log={PRED_LOG_DIR}/pred-calls
quota=$(cat {QUOTA_DIR}/pred-quota 2>/dev/null || echo 0)
used=$(grep -c '^call' "$log" 2>/dev/null)
if [ "${{used:-0}}" -ge "$quota" ]; then
  echo refused >> "$log"
  echo "{name}: this session's pred-call limit is used up" >&2
  exit 125
fi
echo call >> "$log"
exec {real} "$@"
"""


PRED_WRAPPER = counted("pred", REAL_PRED)
EXTRACTOR_WRAPPER = counted("pred-extract", REAL_EXTRACTOR)
"""`pred-extract BUNDLE.json --config 1,0,1`: the library's mapping of any target solution back
(verify/extractor.py), so a model can build a certificate from a target solution of its own."""


class SandboxError(RuntimeError):
    """bubblewrap cannot run here; one line says why (an infrastructure failure, not the agent's)."""


class CommandResult(BaseModel):
    output: str
    """stdout and stderr interleaved, normalised, bounded head and tail (observation.py)."""
    returncode: int | None
    timed_out: bool = False
    seconds: float


class PredUsage(BaseModel):
    calls: int = 0
    refused: int = 0


class Sandbox:
    """One session's sandbox; host-side state lives in `state_dir`, outside the agent's view."""

    def __init__(
        self,
        *,
        pred_path: Path,
        source_dir: Path,
        scratch: Path,
        state_dir: Path,
        extractor_path: Path | None = None,
        tools: dict[str, str] | None = None,
        writable: dict[str, Path] | None = None,
        output_limit: int = MAX_OBSERVATION_BYTES,
        bwrap: str = "bwrap",
    ):
        self.pred_path = Path(pred_path).resolve()
        self.extractor_path = Path(extractor_path).resolve() if extractor_path else None
        self.source_dir = Path(source_dir).resolve()
        self.scratch = Path(scratch).resolve()
        self.state_dir = Path(state_dir).resolve()
        self.writable = dict(writable or {})
        self.output_limit = output_limit
        self.bwrap = shutil.which(bwrap) or bwrap
        self.scratch.mkdir(parents=True, exist_ok=True)
        self.tools_dir = self.state_dir / "bin"
        self.log_dir = self.state_dir / "log"
        self.quota_dir = self.state_dir / "etc"
        for d in (self.tools_dir, self.log_dir, self.quota_dir):
            d.mkdir(parents=True, exist_ok=True)
        counted_tools = {"pred": PRED_WRAPPER, **({"pred-extract": EXTRACTOR_WRAPPER} if extractor_path else {})}
        for name, text in {**counted_tools, **(tools or {})}.items():
            path = self.tools_dir / name
            path.write_text(text)
            path.chmod(0o755)
        self.set_pred_quota(None)

    def set_pred_quota(self, remaining: int | None) -> None:
        """How many more pred calls the wrapper allows (None: no limit)."""
        value = 2**62 if remaining is None else max(0, remaining)
        (self.quota_dir / "pred-quota").write_text(f"{value}\n")

    def argv(self, command: str, status_fd: int | None = None) -> list[str]:
        args = [self.bwrap]
        if status_fd is not None:
            args += ["--json-status-fd", str(status_fd)]
        args += [
            "--unshare-all", "--unshare-user", "--disable-userns", "--cap-drop", "ALL",
            "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--hostname", "sandbox",
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
        args += [
            "--proc", "/proc", "--dev", "/dev",
            "--size", str(TMPFS_BYTES), "--tmpfs", "/tmp",
            "--ro-bind", str(self.source_dir), SOURCE_DIR,
            "--ro-bind", str(self.pred_path), REAL_PRED,
            *(["--ro-bind", str(self.extractor_path), REAL_EXTRACTOR] if self.extractor_path else []),
            "--ro-bind", str(self.tools_dir), TOOLS_DIR,
            "--ro-bind", str(self.quota_dir), QUOTA_DIR,
            "--bind", str(self.log_dir), PRED_LOG_DIR,
            "--bind", str(self.scratch), SCRATCH_DIR,
        ]  # fmt: skip
        for inside, host in sorted(self.writable.items()):
            args += ["--bind", str(Path(host).resolve()), inside]
        # the sandbox's own root and /dev are unbounded tmpfs: read-only, they cannot fill the host's memory
        args += ["--remount-ro", "/", "--remount-ro", "/dev"]
        for key, value in SANDBOX_ENV.items():
            args += ["--setenv", key, value]
        args += ["--chdir", SCRATCH_DIR, "--", "/bin/bash", "-c", LIMITED_SHELL, "limits", command]
        return args

    def run(self, command: str, timeout: float) -> CommandResult:
        """Run one command; on timeout kill bwrap's process group, which takes the sandbox with it."""
        start = time.monotonic()
        status_read, status_write = os.pipe()
        try:
            proc = subprocess.Popen(
                self.argv(command, status_write),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
                start_new_session=True,
                pass_fds=(status_write,),
            )
        except OSError as exc:
            os.close(status_read)
            raise SandboxError(f"cannot start bubblewrap ({self.bwrap}): {exc.strerror}") from exc
        finally:
            os.close(status_write)
        capture = NormalizedCapture(self.output_limit)
        assert proc.stdout is not None
        reader = threading.Thread(target=_drain, args=(proc.stdout, capture), daemon=True)
        reader.start()
        timed_out = False
        try:
            proc.wait(timeout=max(0.1, timeout))
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        except BaseException:  # Ctrl-C or SIGTERM: the sandbox is in its own session and would run on
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            os.close(status_read)
            raise
        reader.join(timeout=5)
        with os.fdopen(status_read, "rb") as status:
            ran = b'"exit-code"' in status.read()
        output = capture.text()
        if not ran and not timed_out:
            # bwrap reports the command's exit on the status pipe; without it, the sandbox never started
            raise SandboxError(f"bubblewrap failed: {output.strip()[:300]}")
        return CommandResult(
            output=output,
            returncode=None if timed_out else proc.returncode,
            timed_out=timed_out,
            seconds=round(time.monotonic() - start, 4),
        )

    def take_pred_usage(self) -> PredUsage:
        """The pred calls logged since the last look; the log starts afresh."""
        path = self.log_dir / "pred-calls"
        try:
            data = read_untrusted(path, 1 << 20)
        except OSError:
            data = b""
        _remove(path)
        lines = data.decode("utf-8", "replace").splitlines()
        return PredUsage(calls=sum(line == "call" for line in lines), refused=sum(line == "refused" for line in lines))


def _remove(path: Path) -> None:
    """Remove whatever the agent left at `path` (file, link or directory)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    elif path.is_symlink() or path.exists():
        path.unlink()


def _drain(stream, capture: NormalizedCapture) -> None:  # noqa: ANN001 - a binary pipe
    for chunk in iter(lambda: stream.read1(65536), b""):
        capture.feed(chunk)
    stream.close()
