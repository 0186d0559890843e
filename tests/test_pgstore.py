"""What only the shared store has, against a real PostgreSQL server the tests start themselves: the
database's own guarantees (a cap no client can cross, one claim per item, a final terminal record),
leases on the database's clock (another host's reservation kept while its lease runs, reaped once
it expired, and a late settle of a reaped one refused), steps tried again after a broken
connection or a server restart, the export, and bad input: each a one-line error that changes
nothing. The rules both stores share are in test_books.py.
"""

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import psycopg
import pytest

from pytest_predbench import cli
from pytest_predbench.files import CorruptStateError
from pytest_predbench.run.books import BUDGET_REASON, ItemSkipped
from pytest_predbench.run.join import create_shared, join_shared
from pytest_predbench.run.planning import build_plan
from pytest_predbench.state import pgstore
from pytest_predbench.state.audit import read_snapshot, state_faults
from pytest_predbench.state.ledger import ChargeKind, LedgerError
from pytest_predbench.state.liveness import current_owner
from pytest_predbench.state.pgstore import PgStore
from pytest_predbench.state.plan import PlanOptions
from pytest_predbench.state.records import ItemStatus
from pytest_predbench.state.scratch import make_scratch, maker_of
from pytest_predbench.state.store import StoreError, StoreUnavailable
from tests.support.acceptance import REPO
from tests.support.postgres import PgServer
from tests.test_books import _dead_owner, finish, planned, result


def new_run(url: str, tmp_path, lease: float = 300.0, **options):
    plan = build_plan(PlanOptions(runner="fake", models=["m/a", "m/b"], **options))
    return create_shared(PgStore(url, f"t-{uuid.uuid4().hex[:12]}", lease_seconds=lease, local=tmp_path), plan)


@pytest.fixture(params=[False, True], ids=["bare", "certified"])
def certified(request) -> bool:
    """Whether the sessions of a test's run submit a certificate (accepted): a record with one lists
    certificate files, which the shared store writes only when the run is exported."""
    return request.param


def sql(store: PgStore, query: str, *params) -> list:
    with psycopg.connect(store.url, autocommit=True) as conn:
        cur = conn.execute(query, params)
        return cur.fetchall() if cur.description else []


def elsewhere(reservation_owner):
    """An owner on another host: its pid means nothing here, only its lease counts."""
    return reservation_owner.model_copy(update={"host": "another-host", "pid": 1, "start_ticks": 1})


# -- what the database guarantees by itself ---------------------------------------------------------


def test_the_cap_is_a_database_constraint_that_holds_when_the_client_check_is_bypassed(
    certified, pg_server, tmp_path, monkeypatch
):
    state = new_run(pg_server.url, tmp_path, sessions=2, budget=0.2, session_budget=0.06)
    finish(state, "m/a-s01", 0.06, certified=certified)  # $0.04 of m/a's $0.10 left: no room for a $0.06 session
    owner, store = current_owner(), state.store()
    with monkeypatch.context() as patch:
        patch.setattr(pgstore, "_remaining", lambda account: None)  # a client that believes there is room
        with pytest.raises(LedgerError, match="the store refused to book: .*within_cap"):
            store.atomically(lambda step: step.reserve("m/a-s02", "m/a", owner, uuid.uuid4().hex))
    ledger = store.snapshot().ledger
    assert ledger.accounts["m/a"].reserved == 0 and ledger.reservations == []  # nothing was booked
    with pytest.raises(ItemSkipped, match=BUDGET_REASON):  # the contrast: the client's own check says so first
        state.bookkeeper("gw0").reserve(planned(state, "m/a-s02"))
    assert state_faults(store.snapshot()) == []


def test_an_item_holds_one_reservation_and_a_terminal_record_is_final_in_the_database(pg_server, tmp_path):
    state = new_run(pg_server.url, tmp_path)
    store = state.store()
    reservation = state.bookkeeper("gw0").reserve(planned(state, "m/a-s01"))
    copy = (store.run_id, uuid.uuid4().hex, "m/a-s01", "m/a", 0.5, "h", 1)
    insert = "INSERT INTO predbench.reservations (run_id, id, item, model, dollars, host, pid, lease_until) "
    insert += "VALUES (%s, %s, %s, %s, %s, %s, %s, now())"
    with pytest.raises(psycopg.errors.UniqueViolation):
        sql(store, insert, *copy)
    done = state.bookkeeper("gw0").record(
        planned(state, "m/a-s01"),
        ItemStatus.PASSED,
        "ok",
        spent=0.01,
        reservation=reservation.id,
        result=result("m/a", 0.01),
    )
    state.bookkeeper("gw0").settle(reservation, done)
    with pytest.raises(psycopg.errors.IntegrityConstraintViolation, match="terminal record"):
        sql(store, "UPDATE predbench.records SET status = 'infra' WHERE run_id = %s", store.run_id)
    with pytest.raises(psycopg.errors.IntegrityConstraintViolation, match="terminal record"):
        sql(store, "DELETE FROM predbench.records WHERE run_id = %s", store.run_id)
    assert state.store().snapshot().by_item()["m/a-s01"].status is ItemStatus.PASSED


def test_money_is_numeric_and_exact(certified, pg_server, tmp_path):
    state = new_run(pg_server.url, tmp_path, sessions=3, budget=1.0)
    for key in ("m/a-s01", "m/a-s02", "m/a-s03"):
        finish(state, key, 0.1, certified=certified)
    [row] = sql(state.store(), "SELECT spent FROM predbench.accounts WHERE run_id = %s AND name = 'm/a'", state.run_id)
    assert str(row[0]) == "0.3"  # 0.1 + 0.1 + 0.1, where floats give 0.30000000000000004
    assert state_faults(state.store().snapshot()) == []


# -- leases -----------------------------------------------------------------------------------------


def _reserve_elsewhere(state, key: str):
    item = planned(state, key)
    owner = elsewhere(current_owner())
    return state.store().atomically(lambda step: step.reserve(item.key, item.model, owner, uuid.uuid4().hex))


def test_another_hosts_reservation_is_kept_while_its_lease_runs_and_reaped_as_lost_once_it_expired(pg_server, tmp_path):
    state = new_run(pg_server.url, tmp_path, lease=1.0, sessions=2, budget=0.2)
    held = _reserve_elsewhere(state, "m/a-s01")
    assert state.bookkeeper("gw0").reap() == []  # its pid 1 is no evidence: another host's
    with pytest.raises(Exception, match="running elsewhere: reserved by pid 1 on another-host"):
        state.bookkeeper("gw0").reserve(planned(state, "m/a-s01"))
    time.sleep(1.2)
    [charge] = state.bookkeeper("gw0").reap()
    assert (charge.reservation, charge.kind, charge.dollars) == (held.id, ChargeKind.LOST, 0.05)


def test_a_late_settle_of_a_reaped_reservation_is_refused_and_records_nothing(certified, pg_server, tmp_path):
    state = new_run(pg_server.url, tmp_path, lease=1.0, sessions=2, budget=0.2)
    slow = state.bookkeeper("gw0")
    item = planned(state, "m/a-s01")
    reservation = slow.reserve(item)  # ... and its host falls silent: nobody renews the lease
    time.sleep(1.2)
    finish(state, "m/b-s01", 0.01, worker="gw1", certified=certified)  # another host's reserve reaps it first
    late = slow.record(
        item, ItemStatus.PASSED, "ok", spent=0.01, reservation=reservation.id, result=result("m/a", 0.01)
    )
    with pytest.raises(LedgerError, match="late settle is refused"):
        slow.settle(reservation, late)
    snap = state.store().snapshot()
    assert "m/a-s01" not in snap.by_item()
    assert [(c.item, c.kind) for c in snap.ledger.charges] == [
        ("m/a-s01", ChargeKind.LOST),
        ("m/b-s01", ChargeKind.RESULT),
    ]
    assert state_faults(snap) == []


def test_a_renewal_extends_a_lease_and_reports_a_reaped_one_missing(pg_server, tmp_path):
    state = new_run(pg_server.url, tmp_path, lease=2.0)
    store = state.store()
    mine = state.bookkeeper("gw0").reserve(planned(state, "m/a-s01"))
    gone = _reserve_elsewhere(state, "m/b-s01")
    sql(store, "UPDATE predbench.reservations SET lease_until = now() - interval '1 second' WHERE id = %s", gone.id)
    before = store.snapshot().ledger.reservations[0].lease_until
    assert store.renew([mine.id, gone.id]) == {mine.id}  # an expired lease is lost, reaped or not
    assert [c.reservation for c in state.bookkeeper("gw0").reap()] == [gone.id]
    assert store.renew([mine.id, gone.id]) == {mine.id}
    [kept] = store.snapshot().ledger.reservations
    assert kept.id == mine.id and kept.lease_until > before


# -- broken connections, a restarted server ----------------------------------------------------------


def test_a_step_survives_a_broken_connection(certified, pg_server, tmp_path):
    state = new_run(pg_server.url, tmp_path)
    store = state.store()
    finish(state, "m/a-s01", 0.01, certified=certified)
    pid = store._connection().info.backend_pid
    sql(store, "SELECT pg_terminate_backend(%s)", pid)
    finish(state, "m/b-s01", 0.01, certified=certified)  # reconnects and books once
    assert [c.item for c in store.snapshot().ledger.charges] == ["m/a-s01", "m/b-s01"]


def test_a_step_waits_for_a_restarted_server_and_gives_up_after_its_retry_time(certified, tmp_path):
    with PgServer() as server:
        state = new_run(server.url, tmp_path, sessions=2)
        store = state.store()
        store.retry_seconds = 30
        finish(state, "m/a-s01", 0.01, certified=certified)
        server.kill()
        restart = threading.Timer(1.5, server.start)
        restart.start()
        finish(state, "m/b-s01", 0.02, certified=certified)  # retried until the server was back
        restart.join()
        assert [c.dollars for c in store.snapshot().ledger.charges] == [0.01, 0.02]
        server.kill()
        store.retry_seconds = 1
        with pytest.raises(StoreUnavailable, match="did not answer for 1s"):
            state.bookkeeper("gw0").reserve(planned(state, "m/a-s02"))


# -- the export ---------------------------------------------------------------------------------------


def test_the_export_is_a_sound_run_directory(certified, pg_server, tmp_path):
    state = new_run(pg_server.url, tmp_path / "local", sessions=2, budget=0.2)
    finish(state, "m/a-s01", 0.01, certified=certified)
    finish(state, "m/b-s01", 0.02, certified=certified)
    state.bookkeeper("gw0").reserve(planned(state, "m/a-s02"))  # one still in flight
    run = state.store().export(tmp_path / "out")
    snap = read_snapshot(run.path)
    assert state_faults(snap) == [] and snap.digest == state.digest
    assert sorted(snap.by_item()) == ["m/a-s01", "m/b-s01"] and len(snap.ledger.reservations) == 1
    assert (run.path / "checkpoint.json").is_file() and run.results_file("m/a").is_file()
    listed = [name for r in snap.by_item().values() for f in r.certificate_files for name in (f.certificate, f.verdict)]
    assert len(listed) == (4 if certified else 0) and all((run.path / name).is_file() for name in listed)
    again = state.store().export(tmp_path / "out")  # an earlier export of the same run is replaced
    assert again.path == run.path
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(CorruptStateError, match="not empty and not an export"):
        state.store().export(tmp_path / "other")
    assert (tmp_path / "other" / "notes.txt").read_text() == "mine"


def test_the_instances_the_host_stored_are_kept_and_exported_and_nothing_else_is(pg_server, tmp_path):
    """keep_instances takes this host's stored instances by their content address: one whose content
    is not its address, or a name that is no sha256, is left out; the export writes the kept ones."""
    import hashlib

    state = new_run(pg_server.url, tmp_path / "local")
    store = state.store()
    store.local.instances.mkdir(parents=True, exist_ok=True)
    good = b'{"data":{"x":1},"type":"T","variant":{}}'
    sha = hashlib.sha256(good).hexdigest()
    (store.local.instances / f"{sha}.json").write_bytes(good)
    forged = hashlib.sha256(b"other").hexdigest()
    (store.local.instances / f"{forged}.json").write_bytes(good)  # content is not its address
    store.atomically(lambda books: books.keep_instances([sha, sha, forged, "../../etc/passwd", "f" * 64]))
    store.atomically(lambda books: books.keep_instances([sha]))  # kept once
    assert sql(store, "SELECT sha256, content FROM predbench.instances WHERE run_id = %s", store.run_id) == [
        (sha, good)
    ]
    run = store.export(tmp_path / "out")
    assert sorted(p.name for p in run.instances.iterdir()) == [f"{sha}.json"]
    assert (run.instances / f"{sha}.json").read_bytes() == good
    # a row edited by hand to content that is not its address is refused, naming it; nothing is written
    sql(store, "UPDATE predbench.instances SET content = %s WHERE run_id = %s", b"{}", store.run_id)
    with pytest.raises(CorruptStateError, match=f"instances row '{sha}': its content is not its address"):
        store.export(tmp_path / "again")
    assert not (tmp_path / "again").exists()


def test_a_database_of_the_layout_before_gains_the_instances_table_when_a_run_is_next_created(tmp_path):
    with PgServer() as server:
        old = new_run(server.url, tmp_path / "a").store()
        sql(old, "DROP TABLE predbench.instances")
        sql(old, "UPDATE predbench.schema_version SET version = 2")  # as a predbench of layout 2 left it
        with pytest.raises(StoreError, match=r"holds predbench tables of layout 2; this predbench uses layout 3$"):
            PgStore(server.url, old.run_id).read()  # contrast: a read changes nothing
        new_run(server.url, tmp_path / "b")  # creating a run upgrades the database
        assert sql(old, "SELECT max(version) FROM predbench.schema_version") == [(3,)]
        assert PgStore(server.url, old.run_id).read().instances == {}, "the old run reads again"


# -- bad input: one line, nothing changed -------------------------------------------------------------


@pytest.mark.parametrize(
    "url, message",
    [
        ("mysql://db/x", "not a PostgreSQL URL"),
        ("postgresql://u@h/db?sslmode=nonsense&x", "not a valid PostgreSQL URL"),
    ],
)
def test_a_bad_url_is_one_line(url, message):
    with pytest.raises(StoreError, match=message) as caught:
        PgStore(url, "r1")
    assert "\n" not in str(caught.value)


def test_an_unreachable_server_and_an_unknown_run_are_one_line(pg_server, tmp_path):
    nowhere = PgStore(f"postgresql://predbench@/predbench?host={tmp_path}", "r1")
    with pytest.raises(StoreUnavailable, match="cannot read the run's plan: the store did not answer"):
        nowhere.plan_file()
    with pytest.raises(StoreError, match="no run nosuch in postgresql://"):
        join_shared(PgStore(pg_server.url, "nosuch"), {})
    with pytest.raises(StoreError, match="run id 'bad id'"):
        PgStore(pg_server.url, "bad id")


MAKER = """
import time
from tests.support.acceptance import REPO
from tests.support.postgres import PgServer
server = PgServer().start()
print(server.root, server.proc.pid, flush=True)
time.sleep(600)
"""


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"


def test_a_process_killed_with_its_server_running_leaves_no_server_and_no_directory_behind():
    """A test run SIGKILLed mid-way runs no exit path: the server's guard stops the server and removes
    its directory once the process that made it is gone; while that process lives, both are kept."""
    maker = subprocess.Popen(
        [sys.executable, "-c", MAKER], cwd=REPO, stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        root, pid = maker.stdout.readline().split()
        time.sleep(1.0)
        assert Path(root, "data").is_dir() and _running(int(pid)), "kept while its maker lives"
    finally:
        os.killpg(maker.pid, signal.SIGKILL)
        maker.wait()
    deadline = time.monotonic() + 30
    while (_running(int(pid)) or Path(root).exists()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _running(int(pid)), "the server was stopped"
    assert not Path(root).exists(), "its directory was removed"


def test_a_working_host_removes_the_scratch_directories_killed_invocations_left_and_only_those(
    pg_server, tmp_path, monkeypatch
):
    """A host's scratch directory is removed when its invocation ends; a SIGKILL runs no exit path, so
    the next invocation that works removes those whose maker is provably gone."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the system's temporary directory, here
    gone = _dead_owner()
    left = tmp_path / f"predbench-r1-{gone.pid}.{gone.start_ticks}-abcd1234"  # its maker was killed
    mine = make_scratch("r1")  # this process's own: it runs
    unjudged = tmp_path / f"predbench-r1-{gone.pid}-abcd1234"  # its maker's start time is unknown
    other = tmp_path / "predbench-notes-1.2-x"  # not a scratch directory's name
    for path in (left, unjudged, other):
        path.mkdir()
    plan = build_plan(PlanOptions(runner="fake", models=["m/a"]))
    state = create_shared(PgStore(pg_server.url, f"t-{uuid.uuid4().hex[:12]}"), plan)
    made = Path(state.run_dir)
    assert made.parent == tmp_path and maker_of(made) == current_owner(), "named after the process that made it"
    assert not left.exists(), "a killed invocation's scratch is removed"
    assert mine.exists() and unjudged.exists() and other.exists(), "a live, an undecided, a foreign one stay"


def test_a_database_without_predbench_tables_is_one_line(tmp_path):
    with PgServer() as server:
        with pytest.raises(StoreError, match="holds no predbench tables"):
            PgStore(server.url, "r1").plan_file()


@pytest.mark.parametrize(
    "damage, message",
    [
        ("UPDATE predbench.records SET record = '{\"item\": 3' WHERE run_id = %s", "records row m/a-s01: not a valid"),
        ("UPDATE predbench.runs SET digest = 'abc' WHERE id = %s", "digest column differs"),
        ("UPDATE predbench.charges SET dollars = 0.5 WHERE run_id = %s", "accounts row .*: spent 0.01, but"),
        ("UPDATE predbench.runs SET plan = replace(plan, '\"sessions\": 1', '\"sessions\": 9') WHERE id = %s",
         "does not match its digest"),
    ],
)  # fmt: skip
def test_corrupt_rows_are_one_line_naming_the_row_and_nothing_changes(certified, pg_server, tmp_path, damage, message):
    state = new_run(pg_server.url, tmp_path)
    finish(state, "m/a-s01", 0.01, certified=certified)
    store = state.store()
    sql(store, "ALTER TABLE predbench.records DISABLE TRIGGER terminal_is_final")
    try:
        sql(store, damage, store.run_id)
    finally:
        sql(store, "ALTER TABLE predbench.records ENABLE TRIGGER terminal_is_final")
    dump = "SELECT (SELECT count(*) FROM predbench.charges WHERE run_id = %s), "
    dump += "(SELECT count(*) FROM predbench.records WHERE run_id = %s)"
    before = sql(store, dump, store.run_id, store.run_id)
    for read in (store.snapshot, lambda: join_shared(PgStore(store.url, store.run_id), {})):
        with pytest.raises(CorruptStateError, match=message) as caught:
            read()
        assert "\n" not in str(caught.value)
    assert sql(store, dump, store.run_id, store.run_id) == before


def test_the_cli_reads_a_shared_run_and_says_what_is_wrong_in_one_line(certified, pg_server, tmp_path, capsys):
    state = new_run(pg_server.url, tmp_path, lease=1.0, sessions=2, budget=0.2)
    finish(state, "m/a-s01", 0.01, certified=certified)
    _reserve_elsewhere(state, "m/b-s01")
    assert cli.main(["status", "--store", pg_server.url, state.run_id]) == 0
    shown = capsys.readouterr().out
    assert f"run {state.run_id} in postgresql://" in shown and "in progress: 1 session(s) running" in shown
    assert "open m/b-s01: $0.0500 reserved by pid 1 on another-host (running)" in shown
    time.sleep(1.2)
    assert cli.main(["status", "--store", pg_server.url, state.run_id]) == 0
    assert "on another-host (abandoned)" in capsys.readouterr().out
    assert cli.main(["export", "--store", pg_server.url, state.run_id, str(tmp_path / "out")]) == 0
    assert "1 of 4 planned items have a terminal record, 1 reservation(s) open" in capsys.readouterr().out
    nowhere = f"postgresql://predbench@/predbench?host={tmp_path}"
    for argv, message in [
        (["status", "--store", "mysql://x", "r1"], "is not a PostgreSQL URL"),
        (["status", "--store", nowhere, "r1"], "the store did not answer"),
        (["status", "--store", pg_server.url, "nosuch"], "no run nosuch in postgresql://"),
        (["export", "--store", pg_server.url, "nosuch", str(tmp_path / "x")], "no run nosuch in postgresql://"),
        (["export", "--store", pg_server.url, state.run_id, str(tmp_path)], "not empty and not an export"),
    ]:
        assert cli.main(argv) == 2, argv
        [line] = capsys.readouterr().err.strip().splitlines()
        assert message in line and line.startswith("predbench: error: "), line
