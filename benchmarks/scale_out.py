"""Scale-out efficiency: 3 hosts x -n 2 against 1 host x -n 2, on FAKE sessions of 1 s, all against
one PostgreSQL server. Target: at least 90% of the ideal 3x.

    python -m benchmarks.scale_out [--repeat 3]

One throw-away server (tests/support/postgres.py) with fsync on, as a real deployment runs it.
Each repetition plans two runs of the same 36 sessions (--plan-only) and works one with a single
host and the other with three hosts started at once, each `pytest bench_sessions -n 2
--store=URL --join=ID` under its own hostname (`unshare -u`); the two sides alternate which runs
first. The figure is the sessions phase, as in parallel_efficiency: from the first reservation to
the last settlement, on the database's clock (so the hosts' clocks do not matter), one host's
divided by three hosts' and by 3. It holds everything the harness does per item — the claim (a
reserve that may skip an item another host holds), the session, the record and the settle, every
step a transaction on the shared rows — while six sessions are in flight. Starting pytest and its
workers on each host is a fixed cost of a host's run, whatever its length; it is measured and
shown beside it (the end-to-end figure, over the commands' wall time).

The "hosts" here share one machine of 2 cores: nine Python processes (three controllers, six
workers) and the server. FAKE sessions only sleep, so the cores are not what one session needs;
what they cost is the harness's own work per item and the start-up of the three hosts at once.
"""

import subprocess
import sys
import time

import psycopg
from pydantic import BaseModel

from benchmarks.figures import Figure, child_environment, median, parser, repetitions, report
from tests.support.acceptance import REPO
from tests.support.multihost import HOSTS, host_command, passed
from tests.support.postgres import PgServer

TARGET = 90.0
MODELS = "m/a,m/b"


class Side(BaseModel):
    hosts: int
    wall: float
    """Seconds from starting the hosts to the last one's exit, their start-up included."""
    phase: float
    """Seconds of the sessions phase (see the module's docstring)."""
    items_per_host: list[int]
    start_skew: float
    """Seconds from the first host's first reservation to the last host's first (0 for one host)."""
    all_ran: bool


class Timings(BaseModel):
    sessions: int
    seconds: float
    workers: int
    one: list[Side]
    three: list[Side]
    quick: bool = False


def _plan(url: str, run_id: str, sessions: int, seconds: float) -> None:
    args = [
        sys.executable, "-m", "pytest", "bench_sessions", f"--store={url}", f"--run-id={run_id}", "--plan-only",
        "--runner", "fake", "--models", MODELS, "--sessions", str(sessions // 2), "--budget", "100",
        "--fake-seconds", str(seconds), "--fake-cost", "0.001", "-p", "no:cacheprovider",
    ]  # fmt: skip
    proc = subprocess.run(args, cwd=REPO, env=child_environment(), capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"planning {run_id} failed ({proc.returncode}): {proc.stdout[-1500:]} {proc.stderr[-500:]}")


def _phase(url: str, run_id: str) -> tuple[float, float, int]:
    """The sessions phase (seconds), the hosts' start skew (seconds) and how many sessions settled
    with a result. A host is told by its invocation, which its item records name."""
    results_only = "WHERE run_id = %s AND kind = 'result'"
    with psycopg.connect(url) as conn:
        query = f"SELECT min(reserved_at), max(at), count(*) FROM predbench.charges {results_only}"
        first, last, results = conn.execute(query, (run_id,)).fetchone()
        query = (
            "SELECT min(c.reserved_at) FROM predbench.charges c JOIN predbench.records r USING (run_id, item) "
            "WHERE run_id = %s GROUP BY r.record::json->>'invocation'"
        )
        starts = [row[0] for row in conn.execute(query, (run_id,))]
    return (last - first).total_seconds(), (max(starts) - min(starts)).total_seconds(), results


def one_side(url: str, run_id: str, hosts: int, sessions: int, seconds: float, workers: int) -> Side:
    _plan(url, run_id, sessions, seconds)
    names = HOSTS[:hosts]
    start = time.perf_counter()
    procs = [
        subprocess.Popen(
            host_command(url, run_id, name, workers=workers, lease=300.0, renew=30.0),
            cwd=REPO,
            env=child_environment(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for name in names
    ]
    outputs = [proc.communicate(timeout=900)[0] for proc in procs]
    wall = time.perf_counter() - start
    phase, skew, results = _phase(url, run_id)
    exits = [proc.returncode for proc in procs]
    if not set(exits) <= {0, 1}:
        raise RuntimeError(f"a host of {run_id} failed: exits {exits}: {outputs[exits.index(max(exits))][-1500:]}")
    return Side(
        hosts=hosts,
        wall=round(wall, 3),
        phase=round(phase, 3),
        items_per_host=[passed(out) for out in outputs],
        start_skew=round(skew, 3),
        all_ran=results == sessions,
    )


def measure(
    sessions: int = 36, seconds: float = 1.0, workers: int = 2, repeat: int = 3, quick: bool = False
) -> Timings:
    one, three = [], []
    with PgServer(durable=True) as server:
        for n in range(repeat):
            order = [(1, one), (3, three)] if n % 2 == 0 else [(3, three), (1, one)]
            for hosts, sides in order:
                sides.append(one_side(server.url, f"scale-{hosts}-{n}", hosts, sessions, seconds, workers))
    return Timings(sessions=sessions, seconds=seconds, workers=workers, one=one, three=three, quick=quick)


def judge(t: Timings) -> Figure:
    """The figure: (one host's sessions phase / three hosts') / 3, medians of the repetitions."""
    one, three = median([s.phase for s in t.one]), median([s.phase for s in t.three])
    wall_one, wall_three = median([s.wall for s in t.one]), median([s.wall for s in t.three])
    typical = sorted(t.three, key=lambda s: s.phase)[len(t.three) // 2]
    return Figure(
        key="scale_out",
        title="scale-out efficiency",
        value=100 * one / three / 3,
        target=TARGET,
        higher_is_better=True,
        unit="%",
        digits=1,
        conditions={f"all {t.sessions} sessions ran on both sides": all(s.all_ran for s in t.one + t.three)},
        note=(
            f"{t.sessions} x {t.seconds:g}s FAKE sessions against one PostgreSQL: sessions phase 1 host x -n "
            f"{t.workers} {one:.2f}s (ideal {t.sessions * t.seconds / t.workers:g}s), 3 hosts x -n {t.workers} "
            f"{three:.2f}s (ideal {t.sessions * t.seconds / t.workers / 3:g}s), speed-up {one / three:.2f}x of 3; "
            f"end to end (each host's pytest and workers starting) {wall_one:.1f}s vs {wall_three:.1f}s = "
            f"{100 * wall_one / wall_three / 3:.0f}%; items per host in the median run "
            f"{'/'.join(map(str, typical.items_per_host))}, the last host's first session {typical.start_skew:.2f}s "
            f"after the first host's; median of {len(t.one)}; all on one 2-core machine"
        ),
        raw=t.model_dump(),
        quick=t.quick,
    )


def main(argv: list[str] | None = None) -> int:
    args = parser(__doc__.splitlines()[0], repeat=3).parse_args(argv)
    shape = dict(sessions=12, seconds=0.3) if args.quick else {}
    return report(
        "scale-out efficiency", lambda: judge(measure(**shape, repeat=repetitions(args), quick=args.quick)), args.json
    )


if __name__ == "__main__":
    sys.exit(main())
