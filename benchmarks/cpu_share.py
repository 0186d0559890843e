"""CPU share: a session running a CPU hog beside a victim session, each with its share of the
machine's cores (bounds.cpu_share: the cores divided by the two sessions). Target: the victim keeps
at least 0.40 of a core while the hog runs.

    python -m benchmarks.cpu_share [--repeat 3] [--seconds 5] [--hogs 32] [--quick] [--json FILE]

The hog is the attack of issue 30: `--hogs` busy processes, each in its own session (setsid(), so
no per-process-group or per-session accounting holds them), in one sandbox command. The victim is
one busy Python process in the other session's sandbox, timing the CPU it got against the wall
clock. Both sandboxes are built as a session builds them (bounds included); the contrast runs the
same pair with the CPU bound off (`cpu_cores` 0), alternating with the bounded pair. The figure is
the median of the bounded repetitions; the note gives the contrast's.
"""

import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from pydantic import BaseModel

from benchmarks.figures import Figure, cores, parser, repetitions, report, rounded
from pytest_predbench.session.protocol import SessionLimits
from pytest_predbench.session.sandbox import Sandbox

TARGET = 0.40
VICTIM = (
    'python3 -c "import time; w = time.monotonic(); c = time.process_time()\n'
    "while time.monotonic() - w < {seconds}: pass\n"
    'print(round((time.process_time() - c) / (time.monotonic() - w), 4))"'
)
HOG = "for i in $(seq {hogs}); do setsid sh -c 'while :; do :; done' & done; sleep {seconds}"


class Timings(BaseModel):
    hogs: int
    seconds: float
    share: float
    """Cores each session may use when bounded."""
    bounded: list[float]
    """The victim's cores (CPU seconds per wall second) while the hog ran, the CPU bound on."""
    unbounded: list[float]
    """The same with the CPU bound off."""
    quick: bool = False


def sandbox(root: Path, name: str, cpu_cores: float) -> Sandbox:
    source = root / "source"
    source.mkdir(exist_ok=True)
    (source / "lib.rs").write_text("//\n")
    limits = SessionLimits(cpu_cores=cpu_cores)
    # no pred is called: the gateway's tool is /bin/false
    return Sandbox(pred_path=Path("/bin/false"), source_dir=source, state_dir=root / name, limits=limits)


def victim_cores(root: Path, cpu_cores: float, hogs: int, seconds: float) -> float:
    """The victim's CPU per wall second while the hog runs in the other session."""
    hog, victim = sandbox(root, "hog", cpu_cores), sandbox(root, "victim", cpu_cores)
    try:
        attack = threading.Thread(
            target=hog.run, args=(HOG.format(hogs=hogs, seconds=seconds + 3),), kwargs={"timeout": seconds + 2}
        )
        attack.start()
        time.sleep(1.0)  # the hog at full strength before the victim starts
        result = victim.run(VICTIM.format(seconds=seconds), timeout=seconds + 60)
        attack.join()
        if result.returncode != 0:
            raise RuntimeError(f"the victim failed: {result.output.strip()[-300:]}")
        return float(result.output.strip().splitlines()[-1])
    finally:
        hog.close()
        victim.close()


def measure(repeat: int, hogs: int, seconds: float, quick: bool) -> Timings:
    share = max(1.0, cores() / 2)
    bounded, unbounded = [], []
    with tempfile.TemporaryDirectory(prefix="predbench-perf-cpu-") as tmp:
        for n in range(repeat):
            sides = [(bounded, share), (unbounded, 0.0)]
            for into, cpu_cores in sides if n % 2 == 0 else sides[::-1]:
                root = Path(tmp) / f"{n}-{cpu_cores:g}"
                root.mkdir()
                into.append(victim_cores(root, cpu_cores, hogs, seconds))
    return Timings(
        hogs=hogs, seconds=seconds, share=share, bounded=rounded(bounded), unbounded=rounded(unbounded), quick=quick
    )


def judge(t: Timings) -> Figure:
    bounded, unbounded = statistics.median(t.bounded), statistics.median(t.unbounded)
    return Figure(
        key="cpu_share",
        title="cpu share",
        value=bounded,
        target=TARGET,
        higher_is_better=True,
        unit=" cores",
        note=(
            f"a victim session's cores while a neighbour runs {t.hogs} setsid() busy loops, each session bounded "
            f"to {t.share:g} cores; with the CPU bound off the victim gets {unbounded:.2f} cores; median of "
            f"{len(t.bounded)} repetitions of {t.seconds:g} s"
        ),
        raw=t.model_dump(),
        quick=t.quick,
    )


def main(argv: list[str] | None = None) -> int:
    parse = parser(__doc__.splitlines()[0], repeat=3)
    parse.add_argument("--seconds", type=float, default=5.0, help="how long the victim runs (default 5)")
    parse.add_argument("--hogs", type=int, default=32, help="busy processes in the hog session (default 32)")
    args = parse.parse_args(argv)
    seconds, hogs = (2.0, 8) if args.quick else (max(1.0, args.seconds), max(1, args.hogs))
    return report("cpu share", lambda: judge(measure(repetitions(args), hogs, seconds, args.quick)), args.json)


if __name__ == "__main__":
    sys.exit(main())
