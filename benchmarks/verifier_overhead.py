"""Verifier overhead: `predbench verify` over the calibration set, against the same pred calls run
directly. Target: at most 1.15.

    python -m benchmarks.verifier_overhead [--repeat 7]

The pred calls are captured from the verifier itself: every call it makes (argv, stdin, and the
files in its working directory at that moment) is recorded while it verifies the set once. The
baseline replays exactly those calls with subprocess, each in a directory holding the same input
files, with nothing else around them. The verifier side is one `predbench verify FILE...`
process over the whole set, so Python's start-up, the imports, the check of the pinned binary and
the reading and writing of every file all count against it.

That start-up is a fixed cost of one process (Python and its site, pydantic and the models, the
sha256 of the 18 MB binary and `pred --version`), a few tenths of a second, while the whole
calibration set needs well under a second of pred: it is most of the overhead. When a certificate
of the set needs no pred call at all, verifying it alone is timed too, and the note gives the ratio
without the start-up: what each certificate costs beyond its pred calls (files, the limits around
each call, parsing pred's output).
"""

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from unittest import mock

from pydantic import BaseModel

from benchmarks.figures import (
    Figure,
    child_environment,
    interleaved,
    median,
    paired,
    parser,
    repetitions,
    report,
    rounded,
)
from pytest_predbench.verify import pin
from pytest_predbench.verify.calibration import calibration_dir, discover
from pytest_predbench.verify.pred import Pred
from pytest_predbench.verify.verifier import checked_environment, verify_file

TARGET = 1.15
PRED_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "NO_COLOR": "1"}
"""The environment pred.Pred gives pred: the direct calls get the same."""


class CapturedCall(BaseModel):
    """One pred call as the verifier made it, with everything needed to make it again."""

    certificate: str
    argv: list[str]
    stdin: str | None
    files: dict[str, str]
    """The verifier's working directory when the call started: name -> content."""
    exit_code: int | None


def capture(certificates: list[Path]) -> tuple[list[CapturedCall], int]:
    """Verify every certificate once in this process, recording each pred call it makes.

    Returns the calls and the verdicts' own count of pred calls (they must agree)."""
    record = checked_environment(pin.default_choice())
    calls: list[CapturedCall] = []
    original = Pred.run
    current = {"certificate": ""}

    def recording(self: Pred, *args: str, stdin: str | None = None, cwd: Path | None = None):
        files = {p.name: p.read_text() for p in sorted(Path(cwd).iterdir()) if p.is_file()} if cwd else {}
        result = original(self, *args, stdin=stdin, cwd=cwd)
        calls.append(
            CapturedCall(
                certificate=current["certificate"],
                argv=[str(self.binary), *args],
                stdin=stdin,
                files=files,
                exit_code=result.exit_code,
            )
        )
        return result

    counted = 0
    with mock.patch.object(Pred, "run", recording):
        for path in certificates:
            current["certificate"] = str(path)
            counted += verify_file(path, record).pred_calls
    return calls, counted


def prepare(calls: list[CapturedCall], scratch: Path) -> list[Path]:
    """A directory per call holding the files the verifier's directory held (not timed)."""
    directories = []
    for n, call in enumerate(calls):
        directory = scratch / f"call-{n:03d}"
        directory.mkdir()
        for name, text in call.files.items():
            (directory / name).write_text(text)
        directories.append(directory)
    return directories


def run_directly(calls: list[CapturedCall], directories: list[Path]) -> list[int | None]:
    """The calls, one after another, with nothing around them but subprocess."""
    codes = []
    for call, directory in zip(calls, directories, strict=True):
        proc = subprocess.run(
            call.argv,
            input=call.stdin.encode() if call.stdin is not None else None,
            stdin=None if call.stdin is not None else subprocess.DEVNULL,
            capture_output=True,
            cwd=directory,
            env=PRED_ENV,
        )
        codes.append(proc.returncode)
    return codes


def verify_command(certificates: list[Path]) -> list[str]:
    script = Path(sys.executable).parent / "predbench"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "pytest_predbench.cli"]
    return [*command, "verify", "-j", "1", *map(str, certificates)]  # one at a time, as the calls are replayed


def run_verifier(certificates: list[Path]) -> int:
    proc = subprocess.run(verify_command(certificates), capture_output=True, text=True, env=child_environment())
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"predbench verify exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
    return proc.returncode


class Timings(BaseModel):
    """What `measure` found; `judge` turns it into the figure."""

    certificates: int
    pred_calls: int
    counted_calls: int
    """The pred calls the verdicts themselves count: must equal pred_calls (all captured)."""
    same_exits: bool
    """Every direct call exited as it did in the verifier (the baseline did the same work)."""
    seconds: dict[str, list[float]]
    """verifier, direct and (when a certificate needs no pred call) start_up; in rotating order."""
    start_up_certificate: str | None = None
    quick: bool = False


def measure(certificates: list[Path] | None = None, repeat: int = 7, quick: bool = False) -> Timings:
    certificates = certificates if certificates is not None else discover(calibration_dir(pin.default_choice()))
    calls, counted = capture(certificates)
    needs_no_pred = [path for path in certificates if str(path) not in {c.certificate for c in calls}]
    scratch = Path(tempfile.mkdtemp(prefix="predbench-perf-verify-"))
    try:
        directories = prepare(calls, scratch)
        same_exits = run_directly(calls, directories) == [c.exit_code for c in calls]
        actions = {
            "verifier": lambda: run_verifier(certificates),
            "direct": lambda: run_directly(calls, directories),
        }
        if needs_no_pred:
            # the CLI's fixed cost: Python, the imports, the check of the pinned binary
            actions["start_up"] = lambda: run_verifier(needs_no_pred[:1])
        times = interleaved(actions, repeat)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return Timings(
        certificates=len(certificates),
        pred_calls=len(calls),
        counted_calls=counted,
        same_exits=same_exits,
        seconds={name: rounded(values, 5) for name, values in times.items()},
        start_up_certificate=str(needs_no_pred[0]) if needs_no_pred else None,
        quick=quick,
    )


def judge(t: Timings) -> Figure:
    """The figure: the median over repetitions of verifier / direct, each pair measured back to back."""
    ratios = paired(t.seconds, "verifier", "direct", lambda v, d: v / d)
    verifier, direct = median(t.seconds["verifier"]), median(t.seconds["direct"])
    repeat = len(ratios)
    note = (
        f"`predbench verify` {verifier:.3f}s vs the same {t.pred_calls} pred calls direct {direct:.3f}s "
        f"({t.certificates} certificates, median of {repeat})"
    )
    raw: dict = {"ratios": rounded(ratios), **t.model_dump()}
    if "start_up" in t.seconds:
        start_up = median(t.seconds["start_up"])
        rest = median(paired(t.seconds, "verifier", "start_up", lambda v, s: v - s))
        raw["ratio_without_start_up"] = rest / direct
        note += (
            f"; of which start-up {start_up:.3f}s (one process: Python, imports, hashing and asking the "
            f"pinned binary, one certificate read), the rest {rest / direct:.2f}x the direct calls"
        )
    return Figure(
        key="verifier_overhead",
        title="verifier overhead",
        value=median(ratios),
        target=TARGET,
        conditions={
            "every pred call captured": t.counted_calls == t.pred_calls and t.pred_calls > 0,
            "direct calls exit as in the verifier": t.same_exits,
        },
        note=note,
        raw=raw,
        quick=t.quick,
    )


QUICK_CERTIFICATES = 3


def main(argv: list[str] | None = None) -> int:
    args = parser(__doc__.splitlines()[0], repeat=7).parse_args(argv)
    certificates = discover(calibration_dir(pin.default_choice()))[:QUICK_CERTIFICATES] if args.quick else None
    return report("verifier overhead", lambda: judge(measure(certificates, repetitions(args), args.quick)), args.json)


if __name__ == "__main__":
    sys.exit(main())
