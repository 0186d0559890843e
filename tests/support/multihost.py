"""Multi-host trials: three "hosts" share one run through a real PostgreSQL server, and get killed.

    python -m tests.support.multihost [--hosts N] [--db N] [--seed S] [--certified] [--keep DIR]

Each trial starts a throw-away server (tests/support/postgres.py), plans a run with the labelled
FAKE runner (`--plan-only`; with `--certified` every session submits the calibration set's genuine
certificate, which each host's verifier checks with the real pred), and starts three hosts at once:
each its own process group under its own hostname (`unshare -u`, so that one host's pid and boot
id say nothing about another's), each `pytest bench_sessions -n 2 --store=URL --join=ID` with
short leases. A join takes every plan option from the stored run. Then, at a moment drawn from
the trial's seeded generator:

- "host": SIGKILL one host's whole process group (controller and workers) once it has sessions in
  flight; the others go on (and take over its items once their leases expire);
- "db": SIGKILL the database server (every process of it at once) while sessions run, and start
  it again after a seeded downtime, shorter or longer than a lease (workers retry their steps
  until the lease would expire, then stop: fencing).

Then hosts join again until every planned item has a terminal record, and once more: a join of
the finished run must exit 0, `predbench status --store` must call it finished, and no host's
scratch directory may be left (a killed host's is removed by the next join on the machine). The
run is exported (`predbench export`) and must show: exactly one terminal record per planned item,
the ledger equal to the records item by item, every cap held, no reservation left open, one result
line per item, every certificate accepted (with its files); and `predbench report` must publish
it (its gate checks all of that again) — unless sessions lost with a host or the database used the
room a model needed, so that some of its sessions were skipped for budget: then the gate must refuse
exactly those sessions and nothing else (issue 19: lost money is not a model's result), and the
trial says how many. The exit status is 0 when every trial survived.
"""

import argparse
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from pytest_predbench.report.gate import run_offences
from pytest_predbench.state.audit import read_snapshot
from pytest_predbench.state.records import ItemStatus
from tests.support.acceptance import REPO, RunView, Workspace
from tests.support.postgres import PgServer
from tests.support.report_runs import predbench
from tests.support.trials import book_violations, kill_group, run_each

HOSTS = ("host-a", "host-b", "host-c")
MODELS = "fake/alpha,fake/beta"
SESSION_SECONDS = 1.0
PLAN = (
    "--runner", "fake", "--models", MODELS, "--sessions", "12", "--budget", "0.6", "--session-budget", "0.03",
    "--fake-seconds", str(SESSION_SECONDS), "--fake-cost", "0.02", "--fake-cost-jitter", "0.01",
)  # fmt: skip
"""24 items of 1 s and random cost; a model's $0.30 holds ten $0.03 sessions, so the caps bind."""
CERTIFICATE = REPO / "fixtures" / "calibration" / "0.5.0" / "genuine_mvc_to_ensemble_suboptimal.json"
"""What every session of a certified run submits: a real bug, accepted by the real pred."""
PLANNED = 24
LEASE, RENEW = 4.0, 0.5
"""Short leases, so that a dead host's sessions are taken over within the trial."""
MAX_JOINS = 6
STARVED = "skipped for budget after infrastructure losses"
"""How the report's gate names a session that lost money kept from running (report/gate.py)."""
RUN_TIMEOUT = 300.0


def host_command(
    url: str, run_id: str, host: str, *, workers: int = 2, lease: float = LEASE, renew: float = RENEW
) -> list[str]:
    """`pytest ... --join` under its own hostname, in its own UTS namespace."""
    pytest_args = [
        sys.executable, "-m", "pytest", "bench_sessions", "-n", str(workers), f"--store={url}", f"--join={run_id}",
        "--lease", str(lease), "--lease-renew", str(renew), "-p", "no:cacheprovider", "-q",
    ]  # fmt: skip
    return ["unshare", "-u", "sh", "-c", 'hostname "$0" && exec "$@"', host, *pytest_args]


def passed(log: str) -> int:
    """Items a host ran, from pytest's closing line ("12 passed, 24 skipped in 9.1s")."""
    found = re.findall(r"^(?:=+ )?(\d+) passed", log, flags=re.MULTILINE)
    return int(found[-1]) if found else 0


@dataclass
class Host:
    name: str
    proc: subprocess.Popen
    log: Path

    def wait(self, timeout: float = RUN_TIMEOUT) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(self.proc)
            raise RuntimeError(f"{self.name} did not finish in {timeout:.0f}s; see {self.log}") from None


def start_host(ws: Workspace, url: str, run_id: str, host: str, tag: str) -> Host:
    log = ws.root / f"{run_id}-{host}-{tag}.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            host_command(url, run_id, host),
            cwd=REPO,
            env=ws.environment(),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return Host(host, proc, log)


def plan_args(certified: bool = False) -> tuple[str, ...]:
    """The run's plan options; `certified`: every session submits CERTIFICATE."""
    return (*PLAN, "--fake-certificate", str(CERTIFICATE)) if certified else PLAN


def plan_run(ws: Workspace, url: str, run_id: str, certified: bool = False) -> None:
    proc = ws.pytest(
        "bench_sessions",
        f"--store={url}",
        f"--run-id={run_id}",
        "--plan-only",
        *plan_args(certified),
        "-p",
        "no:cacheprovider",
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"planning the run failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
        )


@dataclass
class Progress:
    launched: int = 0
    """Items that reached their budget step: reserved, charged, or recorded."""
    open_by_host: dict[str, int] = field(default_factory=dict)
    terminal: int = 0


def progress(url: str, run_id: str) -> Progress | None:
    """What the store shows now (None while it does not answer)."""
    try:
        with psycopg.connect(url, connect_timeout=2) as conn:
            rows = conn.execute("SELECT item, host FROM predbench.reservations WHERE run_id = %s", (run_id,)).fetchall()
            charged = {r[0] for r in conn.execute("SELECT item FROM predbench.charges WHERE run_id = %s", (run_id,))}
            records = conn.execute(
                "SELECT item, terminal FROM predbench.records WHERE run_id = %s", (run_id,)
            ).fetchall()
    except psycopg.Error:
        return None
    now = Progress(terminal=sum(terminal for _, terminal in records))
    now.launched = len({item for item, _ in rows} | charged | {item for item, _ in records})
    for _, host in rows:
        now.open_by_host[host] = now.open_by_host.get(host, 0) + 1
    return now


@dataclass
class Trial:
    kind: str
    seed: str
    certified: bool = False
    """Every session submits a certificate (verified by each host with the real pred)."""
    target: str = ""
    """The host killed, or 'db'."""
    after: int = 0
    """Killed once this many items were launched (and the target had sessions in flight)."""
    downtime: float = 0.0
    in_flight_at_kill: int = 0
    exits: list[int] = field(default_factory=list)
    """Exit statuses of every host invocation after the kill, in order."""
    joins: int = 0
    lost: int = 0
    starved: int = 0
    """Sessions skipped for budget because losses used their room: the report's gate refuses them."""
    violations: list[str] = field(default_factory=list)

    @property
    def survived(self) -> bool:
        return not self.violations

    def line(self) -> str:
        what = f"killed {self.target} after {self.after} launches ({self.in_flight_at_kill} session(s) in flight)"
        if self.kind == "db":
            what += f", down {self.downtime:.1f}s (lease {LEASE:g}s)"
        verdict = "survived" if self.survived else "FAILED: " + "; ".join(self.violations)
        certified = ", certified" if self.certified else ""
        return (
            f"  {self.kind} trial {self.seed}{certified}: {what}; {self.joins} join(s) after it, exits {self.exits}; "
            f"{self.lost} session(s) charged in full as lost; "
            + (f"report refused {self.starved} session(s) starved by the losses, as it must; " if self.starved else "")
            + verdict
        )


def _wait_for_kill(url: str, run_id: str, trial: Trial, hosts: list[Host]) -> bool:
    """Until `trial.after` items were launched and the target has sessions in flight (True), or every
    host ended first (False)."""
    deadline = time.monotonic() + RUN_TIMEOUT
    while time.monotonic() < deadline:
        if all(h.proc.poll() is not None for h in hosts):
            return False
        now = progress(url, run_id)
        if now is not None and now.launched >= trial.after:
            in_flight = (
                sum(now.open_by_host.values()) if trial.target == "db" else now.open_by_host.get(trial.target, 0)
            )
            if in_flight:
                trial.in_flight_at_kill = in_flight
                return True
        time.sleep(0.02)
    return False


def _join_until_complete(ws: Workspace, url: str, run_id: str, trial: Trial, host: str) -> None:
    for attempt in range(MAX_JOINS):
        now = progress(url, run_id)
        if now is not None and now.terminal == PLANNED and not now.open_by_host:
            return
        joined = start_host(ws, url, run_id, host, f"join{attempt}")
        trial.exits.append(joined.wait())
        trial.joins += 1


def certificate_violations(view: RunView, certified: bool) -> list[str]:
    """Every result holds what its sessions submitted: with `certified` one certificate, accepted,
    with its files; without, none."""
    problems = []
    for key, record in sorted(view.records.items()):
        if not record.status.is_result:
            continue
        accepted = [v for v in record.verdicts if v.accepted]
        expected = 1 if certified else 0
        if record.status is not ItemStatus.PASSED or len(accepted) != expected or record.false_alarms:
            problems.append(
                f"{key}: {record.status.value} with {len(accepted)} accepted and {record.false_alarms} rejected "
                f"certificate(s), {expected} accepted expected ({record.reason})"
            )
        for files in record.certificate_files:
            missing = [name for name in (files.certificate, files.verdict) if not (view.run.path / name).is_file()]
            problems += [f"{key}: {name} is missing from the export" for name in missing]
    return problems


def export_and_check(
    ws: Workspace, url: str, run_id: str, certified: bool = False, trial: Trial | None = None
) -> list[str]:
    """Export the run and report every way its books are wrong (empty: sound), the report's own
    gate included: it publishes, or refuses only the sessions that losses starved (counted in
    `trial.starved`)."""
    target = ws.root / f"{run_id}-export"
    done = predbench("export", "--store", url, run_id, str(target))
    if done.returncode != 0:
        return [f"predbench export exited {done.returncode}: {done.stderr.strip()}"]
    view = RunView.load(target)
    problems = book_violations(view) + certificate_violations(view, certified)
    published = predbench("report", str(target))
    offences = run_offences(read_snapshot(target))
    starved = [o for o in offences if o.why.startswith(STARVED)]
    if published.returncode != 0 and not (starved and starved == offences):
        problems.append(f"predbench report refused ({published.returncode}): {published.stderr.strip()[-500:]}")
    elif published.returncode == 0 and offences:
        problems.append(f"predbench report published a run its gate refuses: {offences[0].line()}")
    elif published.returncode != 0 and not all(o.item in published.stderr for o in starved):
        problems.append(f"predbench report refused without naming the starved sessions: {published.stderr[-500:]}")
    if trial is not None and published.returncode != 0:
        trial.starved = len(starved)
    return problems


def finished_run_violations(ws: Workspace, url: str, run_id: str, host: str) -> list[str]:
    """A finished run, seen by a further join (which must exit 0, running nothing) and by
    `predbench status --store` (which must call it finished)."""
    problems = []
    joined = start_host(ws, url, run_id, host, "after")
    code = joined.wait()
    if code != 0:
        problems.append(f"a join of the finished run exited {code}: {joined.log.read_text()[-800:]}")
    shown = predbench("status", "--store", url, run_id)
    if shown.returncode != 0 or "finished: every planned item has a terminal record" not in shown.stdout:
        problems.append(f"predbench status --store exited {shown.returncode}: {(shown.stderr or shown.stdout)[-500:]}")
    # a killed host's, once joined again; this run's own (another run's id can extend this one's)
    mine = re.compile(rf"^predbench-{re.escape(run_id)}-\d+\.\d+-[a-z0-9_]{{8}}$")
    left = sorted(p for p in Path(tempfile.gettempdir()).glob(f"predbench-{run_id}-*") if mine.match(p.name))
    problems += [f"{path}: a host's scratch directory outlived it" for path in left]
    return problems


def draw(rng: random.Random, kind: str) -> tuple[str, int, float]:
    """(target, launches before the kill, downtime) of a trial."""
    target = rng.choice(HOSTS) if kind == "host" else "db"
    return target, rng.randint(2, PLANNED - 6), round(rng.uniform(0.5, 2.5 * LEASE), 2) if kind == "db" else 0.0


def run_trial(ws: Workspace, kind: str, index: int, seed: int, certified: bool = False) -> Trial:
    trial = Trial(kind=kind, seed=f"{seed}:{kind}:{index}", certified=certified)
    trial.target, trial.after, trial.downtime = draw(random.Random(trial.seed), kind)
    run_id = f"{kind}-{index:02d}-{seed}" + ("-certified" if certified else "")
    with PgServer() as server:
        try:
            plan_run(ws, server.url, run_id, certified)
            hosts = [start_host(ws, server.url, run_id, host, "first") for host in HOSTS]
            try:
                if _wait_for_kill(server.url, run_id, trial, hosts):
                    if kind == "host":
                        kill_group(next(h for h in hosts if h.name == trial.target).proc)
                    else:
                        server.kill()
                        time.sleep(trial.downtime)
                        server.start()
                else:
                    trial.violations.append("every host ended before the kill's moment")
                trial.exits += [h.wait() for h in hosts]
            finally:
                for h in hosts:
                    if h.proc.poll() is None:
                        kill_group(h.proc)
            host = trial.target if kind == "host" else HOSTS[0]
            _join_until_complete(ws, server.url, run_id, trial, host)
            trial.violations += finished_run_violations(ws, server.url, run_id, host)
            trial.violations += export_and_check(ws, server.url, run_id, certified, trial)
            with psycopg.connect(server.url) as conn:
                query = "SELECT count(*) FROM predbench.charges WHERE run_id = %s AND kind = 'lost'"
                trial.lost = conn.execute(query, (run_id,)).fetchone()[0]
        except Exception as exc:  # a trial that cannot finish did not survive; say why
            text = str(exc).strip()
            trial.violations.append(f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}")
    return trial


def run_trials(
    ws: Workspace, kind: str, count: int, seed: int = 0, echo: bool = False, certified: bool = False
) -> list[Trial]:
    return run_each(lambda index: run_trial(ws, kind, index, seed, certified), count, echo)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.multihost", description=__doc__.split("\n")[0])
    parser.add_argument("--hosts", type=int, default=5, metavar="N", help="trials that kill one host (5)")
    parser.add_argument("--db", type=int, default=5, metavar="N", help="trials that kill the database server (5)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--certified", action="store_true", help="every session submits a genuine certificate")
    parser.add_argument("--keep", metavar="DIR", help="leave the logs and exports in DIR (default: a temp dir)")
    args = parser.parse_args(argv)
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="predbench-multihost-"))
    root.mkdir(parents=True, exist_ok=True)
    print(f"predbench multi-host trials, seed {args.seed}; logs and exports in {root}", flush=True)
    ok = True
    for kind, count in (("host", args.hosts), ("db", args.db)):
        trials = run_trials(Workspace(root), kind, count, args.seed, echo=True, certified=args.certified)
        survived = sum(t.survived for t in trials)
        print(f"{kind}: {len(trials)} trials, {survived} survived", flush=True)
        ok &= survived == len(trials)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.exit(main())
