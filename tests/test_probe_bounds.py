"""A probe run (mint/validate.py Prober, which the funnel also runs on a session's own instances) is
bounded as the verifier's pred calls are: every process it starts has the memory and file-size limits,
and what it leaves running is killed with its process group.

The pred here is the real pred behind a small shell wrapper that first writes down the limits it was
started under and leaves a process behind (what a pred that hangs on a hostile instance would be);
then it execs the real pred, so the probe's catalogue is real."""

import os
import subprocess
import time
from pathlib import Path

from pytest_predbench.mint import validate
from pytest_predbench.verify.environment import checked_record
from tests.support.versions import TEST_VERSION

LEFT_BEHIND = "987.654"  # sleep's argument: a process of ours, told apart from any other


def wrapper(tmp_path: Path, real_pred: str) -> Path:
    seen = tmp_path / "limits"
    script = tmp_path / "pred-wrapper"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$(ulimit -v) $(ulimit -f) $(ulimit -t)" >> {seen}\n'
        f"sleep {LEFT_BEHIND} </dev/null >/dev/null 2>&1 &\n"
        f'exec {real_pred} "$@"\n'
    )
    script.chmod(0o755)
    return script


def left_behind() -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[:2] == [b"sleep", LEFT_BEHIND.encode()]:
            found.append(int(pid))
    return found


def gone_soon(timeout: float = 10) -> list[int]:
    deadline = time.monotonic() + timeout
    while left_behind() and time.monotonic() < deadline:
        time.sleep(0.1)
    return left_behind()


def test_every_process_of_a_probe_run_is_bounded_and_none_outlives_it(tmp_path):
    record = checked_record(TEST_VERSION)
    pred = wrapper(tmp_path, record.pred_path)
    prober = validate.Prober(record.model_copy(update={"pred_path": str(pred)}), tmp_path / "work")
    assert prober.rules, "the catalogue came from the real pred"
    limits = validate.PROBE_LIMITS
    seen = (tmp_path / "limits").read_text().split()
    assert seen[:3] == [
        str(limits.memory_bytes // 1024),
        str(limits.file_size_bytes // 512),  # ulimit -f: 512-byte blocks
        "92",  # CPU seconds: the catalogue run's deadline (60 s, and 30 of grace), and the last second's grain
    ]
    assert gone_soon() == [], "what the run left behind went with its process group"

    # contrast: the same pred run as a plain child leaves its process running, with no such limits
    subprocess.run([str(pred), "--version"], capture_output=True, check=True)
    try:
        assert left_behind() != []
        assert (tmp_path / "limits").read_text().split()[3:6] != seen[:3]
    finally:
        for pid in left_behind():
            os.kill(pid, 9)
