"""Parallel efficiency: 64 FAKE sessions that each wait 1 s (a model's latency) at -n 8, against
the ideal 64 s / 8 = 8 s. Target: at least 85%.

    python -m benchmarks.parallel_efficiency [--repeat 3]

The figure with the target is the sessions phase: from the first reservation to the last
settlement, read from the ledger. It holds everything the harness does per item (reserve,
session, record, settle) while 8 sessions are in flight. Starting pytest and 8 xdist workers is
not in it: that is a fixed cost of a run, the same for 64 sessions or 6,400, and on a 2-core
machine 8 Python processes starting at once take seconds. It is measured and shown beside it:
the end-to-end figure is 8 s over the whole command's wall time, start-up included.

Where the sessions phase loses time is read from the run as well (the `lanes`): how many items
each worker ran (with 1 s items, one worker given 9 instead of 8 costs a whole second), how late
the last worker started its first item, and the harness time per item inside it (reservation to
settlement, minus the session) and between two items of one worker.
"""

import shutil
import sys
import tempfile
from pathlib import Path

from pydantic import BaseModel

from benchmarks.figures import Figure, median, parser, repetitions, report, run_pytest, timed
from pytest_predbench.state.records import ItemStatus
from tests.support.acceptance import RunView, fake_args

TARGET = 85.0
MODELS = ("m/a", "m/b")


def sessions_phase(view: RunView) -> float:
    """Seconds from the first session's reservation to the last one's settlement."""
    charges = view.ledger.charges
    return (max(c.at for c in charges) - min(c.reserved_at for c in charges)).total_seconds()


class Lanes(BaseModel):
    """How the workers spent the sessions phase (see the module's docstring)."""

    items_per_worker: list[int]
    start_skew: float
    """Seconds from the first item's reservation to the last worker's first."""
    inside_ms: float
    """Median harness milliseconds inside an item: reservation to settlement, minus the session."""
    between_ms: float
    """Median milliseconds from one item's settlement to the same worker's next reservation."""


def lanes(view: RunView, seconds: float) -> Lanes:
    worker_of = {r.item: r.worker for r in view.records.values()}
    by_worker: dict[str, list] = {}
    for charge in sorted(view.ledger.charges, key=lambda c: c.reserved_at):
        by_worker.setdefault(worker_of.get(charge.item, "?"), []).append(charge)
    first = min(c.reserved_at for c in view.ledger.charges)
    inside = [(c.at - c.reserved_at).total_seconds() - seconds for c in view.ledger.charges]
    between = [
        (later.reserved_at - earlier.at).total_seconds()
        for charges in by_worker.values()
        for earlier, later in zip(charges, charges[1:], strict=False)
    ]
    return Lanes(
        items_per_worker=sorted((len(charges) for charges in by_worker.values()), reverse=True),
        start_skew=round(max((charges[0].reserved_at - first).total_seconds() for charges in by_worker.values()), 4),
        inside_ms=round(1000 * median(inside), 2),
        between_ms=round(1000 * median(between), 2) if between else 0.0,
    )


class Run(BaseModel):
    wall: float
    """Seconds of the whole command, pytest and its workers starting included."""
    phase: float
    """Seconds of the sessions phase (see sessions_phase)."""
    all_ran: bool
    lanes: Lanes


class Timings(BaseModel):
    """What `measure` found; `judge` turns it into the figure."""

    sessions: int
    workers: int
    seconds: float
    """Each session's simulated model latency."""
    runs: list[Run]
    quick: bool = False


def one_run(run_dir: Path, sessions: int, workers: int, seconds: float) -> Run:
    args = fake_args(
        run_dir,
        "--sessions",
        str(sessions // len(MODELS)),
        "--fake-seconds",
        str(seconds),
        "--fake-cost",
        "0.001",
        "-n",
        str(workers),
        "-q",
        models=MODELS,
    )
    wall = timed(lambda: run_pytest(*args))
    view = RunView.load(run_dir)
    all_ran = len(view.with_status(ItemStatus.PASSED)) == sessions
    return Run(wall=round(wall, 4), phase=round(sessions_phase(view), 4), all_ran=all_ran, lanes=lanes(view, seconds))


def measure(
    sessions: int = 64, workers: int = 8, seconds: float = 1.0, repeat: int = 3, quick: bool = False
) -> Timings:
    scratch = Path(tempfile.mkdtemp(prefix="predbench-perf-parallel-"))
    try:
        runs = [one_run(scratch / f"run-{n}", sessions, workers, seconds) for n in range(repeat)]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return Timings(sessions=sessions, workers=workers, seconds=seconds, runs=runs, quick=quick)


def judge(t: Timings) -> Figure:
    """The figure: ideal / the median sessions phase."""
    ideal = t.sessions * t.seconds / t.workers
    wall, phase = median([r.wall for r in t.runs]), median([r.phase for r in t.runs])
    typical = sorted(t.runs, key=lambda r: r.phase)[len(t.runs) // 2].lanes  # the median run's
    return Figure(
        key="parallel_efficiency",
        title="parallel efficiency",
        value=100 * ideal / phase,
        target=TARGET,
        higher_is_better=True,
        unit="%",
        digits=1,
        conditions={f"all {t.sessions} sessions ran": all(r.all_ran for r in t.runs)},
        note=(
            f"{t.sessions} x {t.seconds:g}s sessions at -n {t.workers}: sessions phase {phase:.2f}s vs ideal "
            f"{ideal:g}s; end to end (pytest and {t.workers} workers starting included) {wall:.2f}s = "
            f"{100 * ideal / wall:.0f}%, start-up and teardown {wall - phase:.2f}s; median of {len(t.runs)}; "
            f"in the median run: items per worker {'/'.join(map(str, typical.items_per_worker))}, last worker "
            f"started {typical.start_skew:.2f}s after the first, harness per item {typical.inside_ms:.0f} ms inside "
            f"+ {typical.between_ms:.0f} ms between items"
        ),
        raw={"ideal_seconds": ideal, "end_to_end_efficiency_percent": 100 * ideal / wall, **t.model_dump()},
        quick=t.quick,
    )


def main(argv: list[str] | None = None) -> int:
    args = parser(__doc__.splitlines()[0], repeat=3).parse_args(argv)
    shape = dict(sessions=4, workers=2, seconds=0.2) if args.quick else {}
    return report(
        "parallel efficiency", lambda: judge(measure(**shape, repeat=repetitions(args), quick=args.quick)), args.json
    )


if __name__ == "__main__":
    sys.exit(main())
