"""What ended a command whose sandbox started: the command's result, never the harness's fault.

An agent that could make its own command look like an infrastructure failure could erase its own
session (an `infra` session is re-run, its certificates never verified). So the line is drawn at
the sandbox's start, which the agent cannot reach: before it (bubblewrap cannot be started, its
setup fails) the fault is the harness's; after it — the shell inside the sandbox has written its
start byte — everything that ends the command is the command's result, whatever the cause:
an exit, a signal, the OOM killer (even if it took bubblewrap itself), a full disk. The reason,
when the command did not simply exit, is shown to the model with the exit code.

The harness side of the sandbox (the outer bubblewrap, which reports the exit) is kept off the OOM
killer twice: it is taken out of its reach once it has started its child (`protect`, where the
harness holds CAP_SYS_RESOURCE; the child was forked before, so it keeps the default), and the
command's processes make themselves the killer's first choice (OOM_FIRST). Neither is needed for
the outcome: a bubblewrap killed all the same is the command's result.
"""

import os
import signal
from pathlib import Path

OOM_PROTECTED = -1000
"""oom_score_adj of the outer bubblewrap: never chosen by the OOM killer (where the harness may
lower it: CAP_SYS_RESOURCE; a container may withhold it)."""
OOM_FIRST = 1000
"""oom_score_adj of the command's processes, set by its first shell (raising needs no privilege):
the OOM killer's first choice, before any process of the harness's side. The agent may lower its
own back to 0, never below: that changes only which of its own processes it loses."""


def oom_kills(cgroups: list[Path]) -> int:
    """How many processes the OOM killer killed in the session's memory cgroup so far (cgroup v2
    `memory.events`, v1 `memory.oom_control`: both have an `oom_kill N` line); 0 without one."""
    for group in cgroups:
        for name in ("memory.events", "memory.oom_control"):
            try:
                lines = (group / name).read_text().splitlines()
            except OSError:
                continue
            for line in lines:
                key, _, value = line.partition(" ")
                if key == "oom_kill" and value.strip().isdigit():
                    return int(value)
    return 0


def protect(pid: int) -> None:
    """Keep the OOM killer off process `pid` (the outer bubblewrap); best effort (not root)."""
    try:
        Path(f"/proc/{pid}/oom_score_adj").write_text(f"{OOM_PROTECTED}\n")
    except OSError:
        pass


def exit_code(status: bytes) -> int | None:
    """The command's exit code from bubblewrap's --json-status-fd lines, None if it wrote none."""
    for line in status.splitlines():
        key, _, value = line.partition(b'"exit-code":')
        if value:
            digits = value.strip(b" }")
            if digits.isdigit():
                return int(digits)
    return None


def killed_reason(oom_before: int, oom_after: int, reported: int | None, returncode: int) -> tuple[int, str | None]:
    """(the exit code the model sees, why the command was killed or None if it simply exited).

    `reported`: bubblewrap's exit code (None when bubblewrap itself died); `returncode`: bubblewrap's
    own (negative: the signal that killed it)."""
    code = reported if reported is not None else (128 - returncode if returncode < 0 else returncode)
    if oom_after > oom_before:
        kills = oom_after - oom_before
        what = "killed" if reported is None or code == 128 + signal.SIGKILL else "ended"
        return code, f"{what}: out of memory (the OOM killer killed {kills} process(es) at the session's memory bound)"
    if reported is None:
        return code, f"killed: the sandbox ended without an exit status ({_signal_name(code - 128)})"
    return code, None


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"exit {number + 128}"


def started(fd: int) -> bool:
    """Whether the sandbox's shell wrote its start byte to `fd` (the read end, non-blocking)."""
    os.set_blocking(fd, False)
    try:
        return os.read(fd, 1) == b"1"
    except BlockingIOError:
        return False
