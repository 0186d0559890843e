"""Batch verification: `predbench verify -j <cores>` over 200+ certificates (real bugs and false
alarms, with duplicates), against the same verifications one at a time (`-j 1`). Target: at most 0.6.

    python -m benchmarks.batch_verification [--repeat 3]

The set is the calibration set, each certificate again under five different notes (distinct
certificates, the same verification work), and copies of the real bugs (identical: verified once
either way, as a run's many sessions finding one bug submit it). Both sides run the same
`predbench verify` process over the same files — the only difference is how many certificates are
verified at once — so the ratio is what running over the cores buys: 0.5 is ideal on 2 cores.
"""

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from pydantic import BaseModel

from benchmarks.figures import (
    REPO,
    Figure,
    child_environment,
    cores,
    interleaved,
    median,
    paired,
    parser,
    repetitions,
    report,
    rounded,
)
from pytest_predbench.verify import pin
from pytest_predbench.verify.calibration import calibration_dir, discover, load_expected

TARGET = 0.6
NOTES = 5
COPIES = 8


class Timings(BaseModel):
    certificates: int
    distinct: int
    jobs: int
    same_verdicts: bool
    seconds: dict[str, list[float]]
    quick: bool = False


def build_set(directory: Path, cases: list[Path]) -> int:
    """Write the set into `directory`; returns how many distinct certificates it holds."""
    distinct = 0
    for case in cases:
        text = case.read_text()
        shutil.copy(case, directory / case.name)
        distinct += 1
        try:
            certificate = json.loads(text)
        except ValueError:
            continue  # a malformed case is a certificate of its own, once
        if not isinstance(certificate, dict):
            continue
        for n in range(NOTES):
            variant = {**certificate, "note": f"variant {n} of {case.stem}"}
            (directory / f"{case.stem}-note{n}.json").write_text(json.dumps(variant))
            distinct += 1
        if load_expected(case).accepted:
            for n in range(COPIES):
                shutil.copy(case, directory / f"{case.stem}-copy{n}.json")
    return distinct


def verify(directory: Path, jobs: int) -> list[bool]:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_predbench.cli", "verify", "--json", "-j", str(jobs), str(directory)],
        cwd=REPO,
        env=child_environment(),
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"predbench verify exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
    return [verdict["accepted"] for verdict in json.loads(proc.stdout)]


def measure(cases: list[Path], repeat: int, quick: bool) -> Timings:
    scratch = Path(tempfile.mkdtemp(prefix="predbench-perf-batch-"))
    try:
        distinct = build_set(scratch, cases)
        jobs = cores()
        parallel, serial = verify(scratch, jobs), verify(scratch, 1)
        times = interleaved({"parallel": lambda: verify(scratch, jobs), "serial": lambda: verify(scratch, 1)}, repeat)
        count = len(list(scratch.glob("*.json")))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return Timings(
        certificates=count,
        distinct=distinct,
        jobs=jobs,
        same_verdicts=parallel == serial,
        seconds={name: rounded(values, 3) for name, values in times.items()},
        quick=quick,
    )


def judge(t: Timings) -> Figure:
    ratios = paired(t.seconds, "parallel", "serial", lambda p, s: p / s)
    parallel, serial = median(t.seconds["parallel"]), median(t.seconds["serial"])
    return Figure(
        key="batch_verification",
        title="batch verification",
        value=median(ratios),
        target=TARGET,
        conditions={"at least 200 certificates": t.certificates >= 200 or t.quick, "same verdicts": t.same_verdicts},
        note=(
            f"{t.certificates} certificates ({t.distinct} distinct) verified {t.jobs} at a time in {parallel:.1f}s, "
            f"one at a time in {serial:.1f}s (median of {len(ratios)})"
        ),
        raw={"ratios": rounded(ratios), **t.model_dump()},
        quick=t.quick,
    )


QUICK_CASES = 2


def main(argv: list[str] | None = None) -> int:
    args = parser(__doc__.splitlines()[0], repeat=3).parse_args(argv)
    cases = (
        discover(calibration_dir(pin.default_choice()))[:QUICK_CASES]
        if args.quick
        else discover(calibration_dir(pin.default_choice()))
    )
    return report("batch verification", lambda: judge(measure(cases, repetitions(args), args.quick)), args.json)


if __name__ == "__main__":
    sys.exit(main())
