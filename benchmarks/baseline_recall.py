"""The random baseline's recall: how many known bugs of a pred version (default 0.6.0) plain random
differential testing finds with a model's pred budget, and that it never raises a false alarm.
Target: at 2000 pred calls a session, at least 4 distinct known bugs over the sessions, and 0
false alarms throughout.

    python -m benchmarks.baseline_recall [--pred-version V] [--sessions N] [--bug-pool POOL] [--quick] [--json FILE]

Two real runs, one after the other, each `pytest bench_sessions -n N --models baseline/random
--sessions N` (N = 2 by default) and then `predbench report`, which re-verifies every certificate
with the pinned pred: at the default limits (150 pred calls a session), and with
`--max-pred-calls 2000`. The figures are the leaderboard's own (leaderboard.json): recall against
the known-bug registry (which entries), false alarms, other bugs and crashes found (candidates for
upstream), pred calls used and why the sessions stopped. At 2000 pred calls a session runs for
about half an hour. --quick gives each session 12 and 20 pred calls: it shows the script works.
With `--bug-pool POOL` (a pool from `predbench mint`) both runs stand on the pool's minted build, and
the figures add the recall of its minted bugs, found k of N and by difficulty band, beside the real
bugs of the pristine version found on the way (counted apart, as the report counts them).
"""

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from pydantic import BaseModel

from benchmarks.figures import REPO, Figure, child_environment, parser, pytest_command, report
from pytest_predbench.session.protocol import SessionLimits
from pytest_predbench.verify import pin
from pytest_predbench.verify.pool import load_pool

TARGET_KNOWN = 4
DEFAULT_CALLS = SessionLimits().pred_calls
LARGE_CALLS = 2000
QUICK_CALLS = (12, 20)
SECONDS_MARGIN = 900


class Setting(BaseModel):
    """One run's figures, from its leaderboard."""

    pred_calls_limit: int
    sessions: int
    recall: list[str]
    """Registry ids of the known bugs found."""
    known: int
    bugs: list[str]
    crashes: list[str]
    candidates: list[str]
    """Found, not in the registry: for upstream."""
    certificates: int
    accepted: int
    false_alarms: int
    pred_calls: list[int]
    """Per session."""
    wall_seconds: list[float]
    stop_reasons: dict[str, int]
    command: str
    minted: dict | None = None
    """On a pool: the leaderboard's minted recall (found, known, ids, bands)."""
    real_bugs: list[str] | None = None


class Timings(BaseModel):
    """Not timings: what each run found (the module name follows the others)."""

    settings: list[Setting]
    quick: bool = False
    version: str = "0.5.0"
    pool: str | None = None


def run_setting(root: Path, calls: int, sessions: int, version: str, pool: Path | None = None) -> Setting:
    run_dir = root / f"calls-{calls}"
    args = ["bench_sessions", "-n", str(sessions), "--models", "baseline/random", "--sessions", str(sessions)]
    args += ["--pred-version", version] + ([f"--bug-pool={pool.resolve()}"] if pool else [])
    args += [] if calls == DEFAULT_CALLS else ["--max-pred-calls", str(calls)]
    timeout = SessionLimits().wall_seconds + SECONDS_MARGIN  # the sessions run side by side (-n sessions)
    proc = subprocess.run(
        [*pytest_command(*args, f"--run-dir={run_dir}")],
        cwd=REPO,
        env=child_environment(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"`pytest {' '.join(args)}` exited {proc.returncode}:\n{proc.stdout[-2000:]}")
    done = subprocess.run(
        [sys.executable, "-m", "pytest_predbench.cli", "report", str(run_dir)], capture_output=True, text=True
    )
    if done.returncode != 0:
        raise RuntimeError(f"predbench report exited {done.returncode}: {done.stdout[-1000:]}{done.stderr[-1000:]}")
    board = json.loads((run_dir / "leaderboard.json").read_text())
    [row] = board["models"]
    sessions_rows = [s for s in board["sessions"] if s["stop_reason"]]
    return Setting(
        pred_calls_limit=calls,
        sessions=row["sessions"],
        recall=row["recall"]["ids"],
        known=row["recall"]["known"],
        bugs=row["rules"],
        crashes=row["crashes"],
        candidates=row["candidates"],
        certificates=row["certificates"],
        accepted=row["accepted_certificates"],
        false_alarms=row["false_alarms"],
        pred_calls=[s["pred_calls"] for s in sessions_rows],
        wall_seconds=[round(s["wall_seconds"], 1) for s in sessions_rows],
        stop_reasons={k: v for k, v in row["stop_reasons"].items() if v},
        command="pytest " + " ".join(args),
        minted=row.get("minted"),
        real_bugs=row.get("real_bugs"),
    )


def measure(
    sessions: int, quick: bool, version: str, pool: Path | None = None, only: tuple[int, ...] | None = None
) -> Timings:
    calls = QUICK_CALLS if quick else only or (DEFAULT_CALLS, LARGE_CALLS)
    with tempfile.TemporaryDirectory(prefix="predbench-perf-baseline-") as tmp:
        settings = [run_setting(Path(tmp), n, 1 if quick else sessions, version, pool) for n in calls]
        return Timings(settings=settings, quick=quick, version=version, pool=str(pool) if pool else None)


def describe_minted(s: Setting) -> str:
    """Found k of N minted bugs, by band; and the real bugs found on the way (a pool run only)."""
    if s.minted is None:
        return ""
    bands = ", ".join(f"{name} {b['found']} of {b['known']}" for name, b in s.minted["bands"].items())
    real = ", ".join(s.real_bugs or []) or "none"
    return f"minted bugs {s.minted['found']} of {s.minted['known']} ({bands}); real bugs found on the way: {real}; "


def describe(s: Setting) -> str:
    return describe_minted(s) + (
        f"`{s.command}`: {len(s.recall)} of {s.known} known bugs ({', '.join(s.recall) or 'none'}); "
        f"{len(s.candidates)} outside the registry ({', '.join(s.candidates) or 'none'}); "
        f"{s.accepted} of {s.certificates} certificates accepted, {s.false_alarms} false alarms; "
        f"pred calls per session {s.pred_calls}, wall seconds {s.wall_seconds}, stops {s.stop_reasons}"
    )


def judge(t: Timings) -> Figure:
    low, high = t.settings[0], t.settings[-1]
    return Figure(
        key="baseline_recall",
        title="baseline recall",
        value=len(high.recall),
        target=TARGET_KNOWN,
        higher_is_better=True,
        digits=0,
        unit=f" of {high.known} known bugs",
        conditions={
            "zero false alarms": all(s.false_alarms == 0 for s in t.settings),
            "every session used its pred calls or stopped at a limit": all(
                set(s.stop_reasons) <= {"pred_limit", "time_limit", "finished"} for s in t.settings
            ),
        },
        note=f"on pred {t.version}, at {high.pred_calls_limit} pred calls a session: {describe(high)}; "
        f"at {low.pred_calls_limit}{' (the default)' if low.pred_calls_limit == DEFAULT_CALLS else ''}: "
        f"{describe(low)}",
        raw=t.model_dump(mode="json"),
        quick=t.quick,
    )


def main(argv: list[str] | None = None) -> int:
    parse = parser(__doc__.splitlines()[0], repeat=1)
    parse.add_argument("--sessions", type=int, default=2, help="sessions per setting, run side by side (default 2)")
    parse.add_argument("--pred-version", default=pin.default_choice(), help="the pred version (default 0.6.0)")
    parse.add_argument("--bug-pool", type=Path, metavar="POOL", help="run on a minted bug pool (predbench mint)")
    parse.add_argument("--calls", type=int, metavar="N", help="one setting only: N pred calls a session")
    args = parse.parse_args(argv)
    version = pin.check_version(args.pred_version)
    if args.bug_pool:
        version = load_pool(args.bug_pool).version
    calls = (args.calls,) if args.calls else None

    def figure() -> Figure:
        return judge(measure(max(1, args.sessions), args.quick, version, args.bug_pool, calls))

    return report("baseline recall", figure, args.json)


if __name__ == "__main__":
    sys.exit(main())
