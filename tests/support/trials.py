"""SIGKILL trials: kill a whole benchmark run at a random moment, resume it, and check the books.

    python -m tests.support.trials [--fake N] [--demo N] [--seed S] [--keep DIR]

Each trial starts `pytest bench_sessions -n 4 ...` in its own process group and SIGKILLs the
whole group (controller and workers alike) at a moment drawn from the trial's own seeded
random generator. A moment drawn from the clock alone would mostly land in pytest's start-up
and wind-down, which take far longer than the sessions themselves; so the moment is drawn
relative to what the run is doing (watched from outside, through its run directory):

- "start":  up to START_WINDOW seconds after the start (before or just after the plan exists);
- "launch": just after the run launched its k-th item (k drawn over the plan), within one
  session's length, so that sessions are in flight;
- "record": just after the k-th item was recorded, while the sessions launched with it finish,
  are verified and settle (all four demo sessions launch together, so "launch" alone would
  always cut them at the same point);
- "end":    after every item has a record, while the run winds down (or after it ended).

Then `pytest --resume-bench` runs until every planned item has a terminal record (a kill
before plan.json was written left no run: the same command starts it again), and the run
directory must hold:

- exactly one terminal record per planned item, and nothing else;
- spend within every cap (total, per model, per session reservation);
- a ledger equal to the sum of the records, item by item (what the record's attempt cost,
  plus what its earlier attempts were charged);
- no reservation left open; one result line per item, none duplicated.

`fake` trials use the labelled FAKE runner (short latency, random cost); `demo` trials the
real mini-swe-agent, litellm, sandbox and pred against the scripted demo models. The exit
status is 0 when every trial survived. The kill always happens; where it landed (phase) is
read back from the run directory after it, and reported.
"""

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from pytest_predbench.state.ledger import ChargeKind
from pytest_predbench.state.plan import DOLLAR_EPSILON
from pytest_predbench.state.rundir import RunDir, safe_name
from tests.support.acceptance import RunView, Workspace, cap_violations, fake_args

FAKE_SESSION_SECONDS = 0.3
FAKE_RUN = (
    "--sessions", "6", "--budget", "0.3", "--session-budget", "0.03",
    "--fake-seconds", str(FAKE_SESSION_SECONDS), "--fake-cost", "0.02", "--fake-cost-jitter", "0.01",
)  # fmt: skip
"""12 items of random cost; a model's $0.15 holds five $0.03 sessions, so the caps bind."""
DEMO_MODELS = ("demo/finder", "demo/idle")
DEMO_RUN = ("--sessions", "2", "--budget", "0.4", "--session-budget", "0.05")
"""4 items; a model's $0.20 holds four $0.05 sessions, so after a kill charged two of them in
full as lost, the resume still runs its sessions again (a finder session spends about $0.03)."""
DEMO_SESSION_SECONDS = 4.0
"""Roughly how long a demo session (a few scripted model calls, sandboxed commands, pred) runs."""
SESSION_SECONDS = {"fake": FAKE_SESSION_SECONDS, "demo": DEMO_SESSION_SECONDS}
PHASES = ("before the plan", "before any item", "mid-run", "after the items", "after the end")
START_WINDOW = 4.0
"""Seconds after the start within which a "start" kill lands (pytest start-up, preflight, plan)."""
END_WINDOW = 2.0
"""Seconds after the last item's record within which an "end" kill lands (views, summary, exit)."""
ANCHORS = (("start", 0.15), ("launch", 0.45), ("record", 0.25), ("end", 0.15))
MAX_RESUMES = 3
POLL_SECONDS = 0.01
RUN_TIMEOUT = 900.0
T = TypeVar("T")


def kind_args(kind: str, run_dir: Path) -> list[str]:
    if kind == "fake":
        return fake_args(run_dir, *FAKE_RUN)
    if kind == "demo":
        return ["bench_sessions", "--models", ",".join(DEMO_MODELS), f"--run-dir={run_dir}", *DEMO_RUN]
    raise ValueError(f"unknown trial kind {kind!r}")


def book_violations(view: RunView) -> list[str]:
    """Everything the books of a finished run may not show, as readable lines (empty: sound)."""
    problems = []
    planned = {item.key for item in view.plan.items()}
    for key in sorted(planned - set(view.records)):
        problems.append(f"{key}: no record")
    for key in sorted(set(view.records) - planned):
        problems.append(f"{key}: a record of an item the plan does not hold")
    for key, record in sorted(view.records.items()):
        if not record.status.terminal:
            problems.append(f"{key}: its record is not terminal ({record.status.value}: {record.reason})")
        charged = sum(c.dollars for c in view.ledger.charges_for(key))
        if abs(charged - (record.spent + record.earlier_spent)) > DOLLAR_EPSILON:
            problems.append(
                f"{key}: the ledger charged ${charged:.9f}, its record says "
                f"${record.spent:.9f} + ${record.earlier_spent:.9f} earlier"
            )
    for charge in view.ledger.charges:
        if charge.item not in view.records:
            problems.append(f"{charge.item}: a ledger charge of ${charge.dollars} without a record")
    problems += [f"reservation of {r.item} left open" for r in view.ledger.reservations]
    if view.duplicate_results():
        problems.append(f"{view.duplicate_results()} duplicate line(s) in results/")
    if len(view.result_lines) != len(planned):
        problems.append(f"{len(view.result_lines)} result lines for {len(planned)} planned items")
    return problems + cap_violations(view)


# -- when to kill -------------------------------------------------------------------------------


@dataclass(frozen=True)
class KillMoment:
    """When a trial kills its run: `delay` seconds after `anchor` (after the `count`-th item was
    launched or recorded, for the anchors "launch" and "record")."""

    anchor: str
    delay: float
    count: int = 0

    def __str__(self) -> str:
        where = f"{self.anchor} {self.count}" if self.anchor in ("launch", "record") else self.anchor
        return f"{where} +{self.delay:.2f}s"


def draw_kill(rng: random.Random, planned: int, session_seconds: float) -> KillMoment:
    anchor = rng.choices([a for a, _ in ANCHORS], weights=[w for _, w in ANCHORS])[0]
    if anchor == "start":
        return KillMoment("start", round(rng.uniform(0, START_WINDOW), 3))
    if anchor == "end":
        return KillMoment("end", round(rng.uniform(0, END_WINDOW), 3))
    count = rng.randint(1, planned) if anchor == "launch" else rng.randint(1, planned - 1)
    return KillMoment(anchor, round(rng.uniform(0, session_seconds), 3), count=count)


@dataclass
class Progress:
    """What the run directory shows right now (read without the lock: every file is replaced
    atomically, and a file caught between runs is simply read again on the next poll)."""

    launched: int = 0
    """Items that have reached their budget step: reserved, charged or recorded."""
    recorded: int = 0
    open_reservations: int = 0


def progress(run: RunDir) -> Progress:
    now = Progress()
    if not run.plan.exists():
        return now
    try:
        ledger = json.loads(run.ledger.read_text())
    except (OSError, ValueError):
        ledger = {}
    records = {p.stem for p in run.items.glob("*.json")} if run.items.is_dir() else set()
    reserved = {r["item"] for r in ledger.get("reservations", [])}
    charged = {c["item"] for c in ledger.get("charges", [])}
    now.recorded = len(records)
    now.open_reservations = len(reserved)
    now.launched = len({safe_name(k) for k in reserved | charged} | records)
    return now


def _anchor_reached(kill: KillMoment, run: RunDir, planned: int) -> bool:
    if kill.anchor == "start":
        return True
    now = progress(run)
    if kill.anchor == "launch":
        return now.launched >= kill.count
    if kill.anchor == "record":
        return now.recorded >= kill.count
    return now.recorded >= planned and now.open_reservations == 0


def _wait_and_kill(proc: subprocess.Popen, kill: KillMoment, run: RunDir, planned: int) -> tuple[bool, float]:
    """Wait for the kill's moment, then SIGKILL the whole group; (the run ended first?, seconds
    from the start to the kill)."""
    started = time.monotonic()
    try:
        while not _anchor_reached(kill, run, planned):
            if proc.poll() is not None or time.monotonic() - started > RUN_TIMEOUT:
                break
            time.sleep(POLL_SECONDS)
        deadline = time.monotonic() + kill.delay
        while time.monotonic() < deadline and proc.poll() is None:
            time.sleep(POLL_SECONDS)
        finished = proc.poll() is not None
    finally:
        kill_group(proc)
    return finished, round(time.monotonic() - started, 3)


def kill_group(proc: subprocess.Popen, timeout: float = 60) -> None:
    """SIGKILL the process group `proc` leads (started in its own session) and wait until every
    member is gone, so that the resume finds their reservations provably abandoned."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    deadline = time.monotonic() + timeout
    while _group_members(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.02)


def _group_members(pgid: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2 :].split()
            if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
                members.append(int(entry.name))
    return members


# -- one trial ----------------------------------------------------------------------------------


@dataclass
class Trial:
    kind: str
    index: int
    seed: str
    kill: KillMoment
    killed_at: float = 0.0
    """Seconds after the start at which the process group was killed."""
    phase: str = ""
    """Where the kill landed: one of PHASES."""
    done_at_kill: int = 0
    """Items with a terminal record when the group was killed."""
    in_flight_at_kill: int = 0
    """Reservations open when the group was killed: sessions cut off mid-way."""
    violations_at_kill: list[str] = field(default_factory=list)
    """What the books showed right after the kill, before any resume (the check's contrast)."""
    ran_on_resume: int = 0
    """Sessions the resume(s) ran (not budget skips): items the kill left without a terminal record."""
    lost: int = 0
    """Killed sessions whose reservation the resume charged in full (their spend is unknown)."""
    resumes: int = 0
    violations: list[str] = field(default_factory=list)

    @property
    def survived(self) -> bool:
        return not self.violations

    def line(self) -> str:
        where = self.phase
        if self.phase == "mid-run":
            where += f" ({self.done_at_kill} done, {self.in_flight_at_kill} in flight)"
        verdict = "survived" if self.survived else "FAILED: " + "; ".join(self.violations)
        return (
            f"  {self.kind} trial {self.seed}: kill at {self.kill} ({self.killed_at}s) landed {where}; "
            f"{self.resumes} resume(s) ran {self.ran_on_resume} session(s); {self.lost} charged in full as lost; "
            f"{verdict}"
        )


def _phase(run: RunDir, finished: bool) -> tuple[str, int, int]:
    if finished:
        return "after the end", 0, 0
    if not run.plan.exists():
        return "before the plan", 0, 0
    view = RunView.load(run.path)
    done = sum(r.status.terminal for r in view.records.values())
    in_flight = len(view.ledger.reservations)
    if done == len(view.plan.items()):
        return "after the items", done, in_flight
    if not view.records and not view.ledger.charges and not in_flight:
        return "before any item", 0, 0
    return "mid-run", done, in_flight


def _run_to_completion(ws: Workspace, kind: str, run_dir: Path) -> int:
    """Resume until no planned item lacks a terminal record; how many invocations it took."""
    for attempt in range(1, MAX_RESUMES + 1):
        if RunDir(run_dir).plan.exists():
            proc = ws.pytest("--resume-bench", f"--run-dir={run_dir}", "-n", "2")
        else:  # killed before the run existed: it starts again, as a user would start it
            proc = ws.pytest(*kind_args(kind, run_dir), "-n", "2")
        if proc.returncode not in (0, 1):
            raise RuntimeError(f"pytest exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        view = RunView.load(run_dir)
        if len(view.records) == len(view.plan.items()) and all(r.status.terminal for r in view.records.values()):
            return attempt
    return MAX_RESUMES


def planned_items(kind: str) -> int:
    return {"fake": 12, "demo": 2 * len(DEMO_MODELS)}[kind]


def trial_seed(seed: int, kind: str, index: int) -> str:
    return f"{seed}:{kind}:{index}"


def draw_trial_kill(seed: int, kind: str, index: int) -> KillMoment:
    return draw_kill(random.Random(trial_seed(seed, kind, index)), planned_items(kind), SESSION_SECONDS[kind])


def run_trial(ws: Workspace, kind: str, index: int, seed: int) -> Trial:
    trial = Trial(kind=kind, index=index, seed=trial_seed(seed, kind, index), kill=draw_trial_kill(seed, kind, index))
    run_dir = ws.run_dir(f"{kind}-{index:02d}")
    proc = ws.start(*kind_args(kind, run_dir), "-n", "4", log=ws.root / f"{kind}-{index:02d}.log")
    run = RunDir(run_dir)
    finished, trial.killed_at = _wait_and_kill(proc, trial.kill, run, planned_items(kind))
    try:
        trial.phase, trial.done_at_kill, trial.in_flight_at_kill = _phase(run, finished)
        first: set[str] = set()
        if run.plan.exists():
            at_kill = RunView.load(run_dir)
            trial.violations_at_kill = book_violations(at_kill)
            first = {r.invocation for r in at_kill.records.values()}
        trial.resumes = _run_to_completion(ws, kind, run_dir)
        view = RunView.load(run_dir)
        trial.ran_on_resume = sum(r.invocation not in first and r.result is not None for r in view.records.values())
        trial.lost = sum(c.kind is ChargeKind.LOST for c in view.ledger.charges)
        trial.violations = book_violations(view)
    except Exception as exc:  # a trial that cannot be resumed did not survive; say why
        text = str(exc).strip()
        trial.violations = [f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"]
    return trial


def reference_run(ws: Workspace, kind: str) -> float:
    """An unkilled run, whose books must be sound too; how long it took (for the report)."""
    run_dir = ws.run_dir(f"{kind}-reference")
    start = time.monotonic()
    proc = ws.pytest(*kind_args(kind, run_dir), "-n", "4")
    seconds = time.monotonic() - start
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"the reference run failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    problems = book_violations(RunView.load(run_dir))
    if problems:
        raise RuntimeError(f"the unkilled reference run's books are wrong: {problems}")
    return seconds


def run_each(run_one: Callable[[int], T], count: int, echo: bool = False) -> list[T]:
    """`run_one(index)` for each of `count` trials, printing each one's line as it ends when `echo`."""
    trials = []
    for index in range(count):
        trials.append(run_one(index))
        if echo:
            print(trials[-1].line(), flush=True)
    return trials


def run_trials(ws: Workspace, kind: str, count: int, seed: int = 0, echo: bool = False) -> list[Trial]:
    return run_each(lambda index: run_trial(ws, kind, index, seed), count, echo)


def describe(kind: str, trials: list[Trial]) -> list[str]:
    """The summary line of a kind's trials, and a line for each one that failed."""
    phases = {phase: sum(t.phase == phase for t in trials) for phase in PHASES}
    survived = sum(t.survived for t in trials)
    lines = [
        f"{kind}: {len(trials)} trials, {survived} survived; kills landed "
        + ", ".join(f"{n} {phase}" for phase, n in phases.items())
        + f"; {sum(t.in_flight_at_kill for t in trials)} sessions in flight at the kills, "
        f"{sum(t.lost for t in trials)} charged in full as lost"
    ]
    lines += [t.line() for t in trials if not t.survived]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.trials", description=__doc__.split("\n")[0])
    parser.add_argument("--fake", type=int, default=20, metavar="N", help="trials with the FAKE runner (20)")
    parser.add_argument("--demo", type=int, default=20, metavar="N", help="trials with the demo models (20)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", metavar="DIR", help="leave the run directories in DIR (default: a temp dir)")
    args = parser.parse_args(argv)
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="predbench-trials-"))
    root.mkdir(parents=True, exist_ok=True)
    print(f"predbench SIGKILL trials, seed {args.seed}; run directories in {root}", flush=True)
    ws, ok = Workspace(root), True
    for kind, count in (("fake", args.fake), ("demo", args.demo)):
        if count:
            start = time.monotonic()
            print(f"{kind}: an unkilled reference run took {reference_run(ws, kind):.0f}s", flush=True)
            trials = run_trials(ws, kind, count, args.seed, echo=True)
            for line in describe(kind, trials):
                print(line)
            print(f"  ({time.monotonic() - start:.0f}s)", flush=True)
            ok &= all(t.survived for t in trials)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
