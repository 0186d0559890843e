"""Hosts sharing one run through a real PostgreSQL server the tests start themselves, end to end:
`pytest bench_sessions -n 2 --store=URL --join=ID` in three process groups, each under its own
hostname (`unshare -u`), on a run planned with the labelled FAKE runner. Seeded trials SIGKILL one
host's whole group, or the database server, while sessions run; hosts join again until the run is
complete; the exported run must have exactly one terminal record per item, books that add up,
every cap held, no reservation open, and `predbench report` must publish it
(tests/support/multihost.py; `python -m tests.support.multihost` runs more). Plus the joins'
refusals: another plan (naming the first difference), an unknown run, a bad URL.
"""

import os
import re

import pytest

from tests.support.acceptance import Workspace
from tests.support.multihost import HOSTS, LEASE, PLAN, export_and_check, passed, plan_run, run_trials, start_host
from tests.support.postgres import PgServer

pytestmark = pytest.mark.slow  # end to end in subprocesses: `make test`, not `make check`

SEED = 3
"""Its first host trial kills host-b with sessions in flight; its first db trial keeps the server
down longer than a lease, so that workers stop (fence) and later joins reap what they held."""
SHORT_OUTAGE_SEED = 28
"""Its first db trial keeps the server down 0.6 s, well within a lease (4 s)."""
COUNT = int(os.environ.get("PREDBENCH_MULTIHOST_TRIALS", "0"))


def _explain(trials) -> str:
    return "\n".join(t.line() for t in trials)


@pytest.fixture
def ws(tmp_path) -> Workspace:
    return Workspace(tmp_path)


def test_three_hosts_share_a_run_and_a_host_exits_zero_once_it_is_complete(ws):
    with PgServer() as server:
        plan_run(ws, server.url, "calm")
        hosts = [start_host(ws, server.url, "calm", host, "only") for host in HOSTS]
        exits = [h.wait() for h in hosts]
        assert export_and_check(ws, server.url, "calm") == []
        ran = {h.name: passed(h.log.read_text()) for h in hosts}
    assert sum(ran.values()) == 24 and all(ran.values()), f"every host ran some of the 24 items: {ran}"
    assert set(exits) <= {0, 1} and 0 in exits, exits  # 1: items remained, running on another host


def test_host_kills_mid_run_leave_sound_books(ws):
    trials = run_trials(ws, "host", COUNT or 2, SEED)
    print(_explain(trials))  # shown with -rP
    assert all(t.survived for t in trials), _explain(trials)
    assert all(t.in_flight_at_kill > 0 for t in trials), "every kill cut sessions off mid-way"
    assert all(t.lost >= 1 for t in trials), "the killed host's sessions are charged in full as lost"
    assert all(t.exits[-1] == 0 for t in trials), "the join that completes the run exits 0"


def test_database_kills_mid_run_leave_sound_books(ws):
    trials = run_trials(ws, "db", COUNT or 1, SEED)
    print(_explain(trials))
    assert all(t.survived for t in trials), _explain(trials)
    assert all(t.in_flight_at_kill > 0 for t in trials)
    assert any(t.downtime > 4.0 and 2 in t.exits for t in trials), "a long outage stops the hosts (exit 2)"
    assert all(t.exits[-1] == 0 for t in trials)


def test_a_database_outage_shorter_than_a_lease_loses_nothing(ws):
    [trial] = run_trials(ws, "db", 1, SHORT_OUTAGE_SEED)
    print(trial.line())
    assert trial.survived and trial.in_flight_at_kill > 0 and trial.downtime < LEASE, trial.line()
    assert trial.lost == 0 and trial.joins == 0, f"steps waited for the server, nothing was lost: {trial.line()}"


def test_a_join_refuses_another_plan_an_unknown_run_and_a_bad_url(ws):
    with PgServer() as server:
        plan_run(ws, server.url, "r1")
        common = ("bench_sessions", f"--store={server.url}", "-p", "no:cacheprovider")
        other = ws.pytest(*common, "--join=r1", "--sessions", "5")
        unknown = ws.pytest(*common, "--join=nosuch")
        taken = ws.pytest(*common, "--run-id=r1", "--plan-only", *PLAN)
    bad = ws.pytest("bench_sessions", "--store=mysql://x/y", "--join=r1", "-p", "no:cacheprovider")
    for proc, message in [
        (
            other,
            r"--join refused: run r1 in postgresql://\S+ was planned differently: options.sessions \(run: 12, now: 5\)",
        ),
        (unknown, r"no run nosuch in postgresql://"),
        (taken, r"run r1 already exists in postgresql://\S+: join it with --join"),
        (bad, r"--store 'mysql://x/y' is not a PostgreSQL URL"),
    ]:
        assert proc.returncode == 4, (proc.returncode, proc.stdout[-1000:], proc.stderr[-1000:])
        [line] = [x for x in proc.stderr.splitlines() if x.strip()]
        assert re.search(message, line), line
