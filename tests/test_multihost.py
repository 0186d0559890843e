"""Hosts sharing one run through a real PostgreSQL server the tests start themselves, end to end:
`pytest bench_sessions -n 2 --store=URL --join=ID` in three process groups, each under its own
hostname (`unshare -u`), on a run planned with the labelled FAKE runner. Seeded trials SIGKILL one
host's whole group, or the database server, while sessions run; hosts join again until the run is
complete, and once more (that join exits 0, and `predbench status --store` calls the run finished);
the exported run must have exactly one terminal record per item, books that add up, every cap held,
no reservation open, every certificate accepted, and `predbench report` must publish it
(tests/support/multihost.py; `python -m tests.support.multihost` runs more). Each with sessions that
submit no certificate and sessions that submit a genuine one (verified by each host with the real
pred). Plus the joins' refusals: another plan (naming the first difference), an unknown run, a bad
URL.
"""

import os
import re
import uuid
from xml.etree import ElementTree

import pytest

from pytest_predbench.state.liveness import current_owner
from pytest_predbench.state.pgstore import PgStore
from tests.support.acceptance import Workspace
from tests.support.multihost import (
    HOSTS,
    LEASE,
    PLAN,
    export_and_check,
    finished_run_violations,
    passed,
    plan_run,
    run_trials,
    start_host,
)
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


certified = pytest.mark.parametrize("certified", [False, True], ids=["bare", "certified"])


@certified
def test_three_hosts_share_a_run_and_a_host_exits_zero_once_it_is_complete(ws, certified):
    with PgServer() as server:
        plan_run(ws, server.url, "calm", certified)
        hosts = [start_host(ws, server.url, "calm", host, "only") for host in HOSTS]
        exits = [h.wait() for h in hosts]
        assert finished_run_violations(ws, server.url, "calm", HOSTS[0]) == []
        assert export_and_check(ws, server.url, "calm", certified) == []
        ran = {h.name: passed(h.log.read_text()) for h in hosts}
    assert sum(ran.values()) == 24 and all(ran.values()), f"every host ran some of the 24 items: {ran}"
    assert set(exits) <= {0, 1} and 0 in exits, exits  # 1: items remained, running on another host


@certified
def test_host_kills_mid_run_leave_sound_books(ws, certified):
    trials = run_trials(ws, "host", COUNT or 2, SEED, certified=certified)
    print(_explain(trials))  # shown with -rP
    assert all(t.survived for t in trials), _explain(trials)
    assert all(t.in_flight_at_kill > 0 for t in trials), "every kill cut sessions off mid-way"
    assert all(t.lost >= 1 for t in trials), "the killed host's sessions are charged in full as lost"
    assert all(t.exits[-1] == 0 for t in trials), "the join that completes the run exits 0"


@certified
def test_database_kills_mid_run_leave_sound_books(ws, certified):
    trials = run_trials(ws, "db", COUNT or 1, SEED, certified=certified)
    print(_explain(trials))
    assert all(t.survived for t in trials), _explain(trials)
    assert all(t.in_flight_at_kill > 0 for t in trials)
    assert any(t.downtime > 4.0 and 2 in t.exits for t in trials), "a long outage stops the hosts (exit 2)"
    assert all(t.exits[-1] == 0 for t in trials)


@certified
def test_a_database_outage_shorter_than_a_lease_loses_nothing(ws, certified):
    [trial] = run_trials(ws, "db", 1, SHORT_OUTAGE_SEED, certified=certified)
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


def test_an_item_another_host_holds_is_left_in_the_live_table_the_junitxml_and_the_summary(ws):
    """Not skipped for budget, not done: it runs elsewhere, so the run is not complete (exit 1)."""
    xml = ws.root / "junit.xml"
    with PgServer() as server:
        plan = ("--runner", "fake", "--models", "fake/alpha", "--sessions", "2")
        common = ("bench_sessions", f"--store={server.url}", "-p", "no:cacheprovider")
        assert ws.pytest(*common, "--run-id=held", "--plan-only", *plan).returncode == 0
        store = PgStore(server.url, "held")
        owner = current_owner().model_copy(update={"host": "another-host", "pid": 1, "start_ticks": 1})
        store.atomically(lambda books: books.reserve("fake/alpha-s01", "fake/alpha", owner, uuid.uuid4().hex))
        store.close()
        proc = ws.pytest(*common, "--join=held", "--progress-every", "0", f"--junitxml={xml}")
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    properties = {
        case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
        for case in ElementTree.parse(xml).iter("testcase")
    }
    assert properties["test_session[fake/alpha-s01]"]["status"] == "running_elsewhere"
    assert properties["test_session[fake/alpha-s02]"]["status"] == "passed"
    live = proc.stdout[proc.stdout.index("predbench progress after") : proc.stdout.index("= predbench")]
    summary = proc.stdout[proc.stdout.index("= predbench") :]
    row = r"fake/alpha\s+1\s+0\s+0\s+1\s"  # done 1, running 0, skipped 0, left 1
    assert re.search(row, live) and re.search(row, summary), proc.stdout[-3000:]
    assert "done" not in re.search(row + r".*", live).group(0).split()[-1:], "the live ETA is not 'done'"
    assert "1 item(s) have no terminal record yet" in summary
    assert re.search(r"= 1 passed, .*1 running elsewhere in", proc.stdout), proc.stdout[-500:]
