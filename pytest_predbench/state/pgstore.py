"""A run's books in PostgreSQL, shared by every host that joins the run (psycopg 3).

Each book-keeping step (state/store.py's `Books`) is one transaction. It first locks the run's
total account row, then the row of each model it touches: one fixed order, total first, so two
hosts never deadlock, and the total's lock makes the steps of one run follow one another exactly
as the run directory's file lock does. Each step reads the run's plan under that lock: its caps in
force are the caps (the accounts keep none), and state/money.py decides what to grant, whom to
close and how a streak grows. The schema (state/pgschema.py) keeps the caps, the claim
on an item and the finality of a terminal record even against a client that skips its checks.

Leases: a reservation carries `lease_until` on the database's clock; its owner renews it
(`renew`, from a thread of its own, see run/lease.py). Every step that may reserve first reaps the
reservations whose lease expired, charged in full as lost (their owner's host is gone, or cut
off), and those of provably dead processes on this very host (pid and boot id), at once. A settle
applies only while its reservation is still open: a late settle of a reaped one is refused.

A connection that breaks is opened again and the step tried again, for up to `retry_seconds`
(the lease, by default: past it a settle would find its reservation reaped anyway); each step
finds its own committed earlier attempt (run/books.py), so trying again books nothing twice.
Only the first contact (creating, joining, reading a run) fails at once, so that a wrong URL or a
server that is down is one line, not a wait.
"""

import json
import re
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import TypeVar

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import dict_row

from pytest_predbench.files import CorruptStateError, parse_model
from pytest_predbench.session.reductions import instance_problem, stored_bytes
from pytest_predbench.state import money
from pytest_predbench.state.audit import RunSnapshot
from pytest_predbench.state.export import ExportMark, StoredRun, write_run_dir
from pytest_predbench.state.ledger import Charge, ChargeKind, InfraStreak, Ledger, LedgerError, Reservation
from pytest_predbench.state.liveness import Owner, owner_gone
from pytest_predbench.state.pgschema import CAP_SLACK, DDL, LOCK_KEY, SCHEMA_VERSION, UPGRADES
from pytest_predbench.state.plan import Plan, PlanFile, parse_plan, plan_text
from pytest_predbench.state.records import ItemRecord, ItemStatus, RecordError
from pytest_predbench.state.rundir import RunDir
from pytest_predbench.state.store import StoreError, StoreUnavailable

T = TypeVar("T")

RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
CONNECT_TIMEOUT_S = 5
RETRY_PAUSE_S = 0.5
TOTAL = ""
"""The name of the run's own account (every other account is a model's)."""
SLACK = Decimal(CAP_SLACK)
CLOSED_QUERY = "SELECT name FROM predbench.accounts WHERE run_id = %s AND name <> '' AND closed"
RESERVATION_COLUMNS = "id, item, model, dollars, host, boot_id, pid, start_ticks, at, lease_until"
CHARGE_COLUMNS = "item, model, dollars, reserved, kind, reservation, reserved_at, at"
ACCOUNT_COLUMNS = "name, spent, infra, reserved, closed, streak_invocation, streak_failures, streak_last_at"


dec = money.exact
"""A float of dollars as the exact decimal it prints as (state/money.py)."""


def _first_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:300] or type(exc).__name__


def describe(url: str) -> str:
    """The URL without its password, for messages; StoreError (one line) when it is not a
    PostgreSQL URL."""
    if not url.startswith(("postgresql://", "postgres://")):
        raise StoreError(f"--store {url!r} is not a PostgreSQL URL (postgresql://user@host:port/database)")
    try:
        params = conninfo_to_dict(url)
    except psycopg.Error as exc:
        raise StoreError(f"--store: not a valid PostgreSQL URL ({_first_line(exc)})") from None
    user = f"{params['user']}@" if params.get("user") else ""
    host = str(params.get("host", ""))
    port = f":{params['port']}" if params.get("port") else ""
    where = f"{host}{port}" if not host.startswith("/") else f"[{host}]{port}"
    return f"postgresql://{user}{where}/{params.get('dbname', '')}"


def check_run_id(run_id: str) -> str:
    if not RUN_ID.match(run_id):
        raise StoreError(f"run id {run_id!r}: use letters, digits, '.', '_' and '-' (at most 100, not first)")
    return run_id


def _reservation(row: dict, where: str) -> Reservation:
    owner = {k: row[k] for k in ("host", "boot_id", "pid", "start_ticks")}
    values = {k: row[k] for k in ("id", "item", "model", "at", "lease_until")}
    return parse_model({**values, "dollars": float(row["dollars"]), "owner": owner}, Reservation, where)


def _charge(row: dict, where: str) -> Charge:
    values = {k: row[k] for k in ("item", "model", "kind", "reservation", "reserved_at", "at")}
    money = {"dollars": float(row["dollars"]), "reserved": float(row["reserved"])}
    return parse_model({**values, **money}, Charge, where)


def _record(row: dict, where: str) -> ItemRecord:
    at = f"{where}: records row {row['item']}"
    record = parse_model(row["record"], ItemRecord, at)
    if (record.item, record.status.value, record.status.terminal) != (row["item"], row["status"], row["terminal"]):
        raise CorruptStateError(f"{at}: its columns (item, status, terminal) disagree with the record it holds")
    return record


def _remaining(account: dict) -> Decimal | None:
    """What the account may still reserve, under the cap the plan gives it (`PgBooks._account`)."""
    return money.remaining(account["cap"], account["spent"], account["reserved"])


class PgBooks:
    """The books inside one transaction (see PgStore.atomically)."""

    def __init__(self, store: "PgStore", conn: psycopg.Connection, plan: Plan):
        self.store = store
        self.conn = conn
        self.plan = plan
        """The run's plan as stored, read in this transaction: its caps in force are the caps."""
        self._accounts: dict[str, dict] = {}

    def _account(self, row: dict) -> dict:
        """An account row with the cap the plan gives it (the row keeps none)."""
        caps = self.plan.caps
        cap = caps.total if row["name"] == TOTAL else caps.per_model
        return {**row, "cap": None if cap is None else dec(cap)}

    def _rows(self, query: str, *params: object) -> list[dict]:
        return self.conn.execute(query, (self.store.run_id, *params)).fetchall()

    def _execute(self, query: str, *params: object) -> None:
        self.conn.execute(query, (self.store.run_id, *params))

    def _row(self, query: str, *params: object) -> dict | None:
        rows = self._rows(query, *params)
        return rows[0] if rows else None

    def lock(self, name: str) -> dict:
        """Lock an account row for the rest of the transaction: the total's always first."""
        if name not in self._accounts:
            if name != TOTAL:
                self.lock(TOTAL)
            query = f"SELECT {ACCOUNT_COLUMNS} FROM predbench.accounts WHERE run_id = %s AND name = %s FOR UPDATE"
            row = self._row(query, name)
            if row is None:
                what = "the run's total" if name == TOTAL else f"model {name!r}"
                raise StoreError(f"{self.store.where}: no account of {what} (no such run, or not in its plan)")
            self._accounts[name] = self._account(row)
        return self._accounts[name]

    def _update_accounts(self, model: str, assignments: str, *params: object) -> None:
        query = (
            f"UPDATE predbench.accounts SET {assignments} WHERE run_id = %s AND name IN ('', %s) "
            f"RETURNING {ACCOUNT_COLUMNS}"
        )
        for row in self.conn.execute(query, (*params, self.store.run_id, model)).fetchall():
            self._accounts[row["name"]] = self._account(row)

    def _reservations(self, condition: str, *params: object) -> list[Reservation]:
        query = (
            f"SELECT {RESERVATION_COLUMNS} FROM predbench.reservations WHERE run_id = %s AND {condition} ORDER BY at"
        )
        return [_reservation(row, self.store.where) for row in self._rows(query, *params)]

    def reservation(self, reservation_id: str) -> Reservation | None:
        return next(iter(self._reservations("id = %s", reservation_id)), None)

    def charge_of(self, reservation_id: str) -> Charge | None:
        query = f"SELECT {CHARGE_COLUMNS} FROM predbench.charges WHERE run_id = %s AND reservation = %s"
        row = self._row(query, reservation_id)
        return _charge(row, self.store.where) if row else None

    def held(self, item: str) -> Reservation | None:
        return next(iter(self._reservations("item = %s", item)), None)

    def abandoned(self) -> list[Reservation]:
        """Expired leases (any host), and this host's reservations whose process is provably gone."""
        expired = self._reservations("lease_until < now()")
        here = self._reservations("host = %s AND lease_until >= now()", self.store.host)
        return expired + [r for r in here if owner_gone(r.owner) is True]

    def record(self, item: str) -> ItemRecord | None:
        query = "SELECT item, status, terminal, record FROM predbench.records WHERE run_id = %s AND item = %s"
        row = self._row(query, item)
        return _record(row, self.store.where) if row else None

    def write_record(self, record: ItemRecord) -> None:
        query = (
            "INSERT INTO predbench.records AS r (run_id, item, status, terminal, record) VALUES (%s, %s, %s, %s, %s) "
            "ON CONFLICT (run_id, item) DO UPDATE SET status = EXCLUDED.status, terminal = EXCLUDED.terminal, "
            "record = EXCLUDED.record WHERE NOT r.terminal RETURNING item"
        )
        status = record.status
        if not self._rows(query, record.item, status.value, status.terminal, record.model_dump_json()):
            raise RecordError(f"{record.item} already has a terminal record; not overwriting it")

    def keep_instances(self, shas: list[str]) -> None:
        """Keep these instances of this host's run directory with the record, in the same transaction
        (an export, so every host's report, finds them). Content-addressed: one kept twice is kept once;
        one missing here, or whose content is not its address, is left out."""
        found = {sha: stored_bytes(self.store.local.instances, sha) for sha in sorted(set(shas))}
        rows = [(self.store.run_id, sha, data) for sha, data in found.items() if data is not None]
        if rows:
            with self.conn.cursor() as cursor:
                cursor.executemany(
                    "INSERT INTO predbench.instances (run_id, sha256, content) VALUES (%s, %s, %s) "
                    "ON CONFLICT DO NOTHING",
                    rows,
                )

    def keep_trajectory(self, item: str, path: Path) -> None:
        try:
            content = Path(path).read_bytes()
        except OSError:
            return  # the session wrote none (or it was removed): the record still says what happened
        query = (
            "INSERT INTO predbench.trajectories (run_id, item, content) VALUES (%s, %s, %s) "
            "ON CONFLICT (run_id, item) DO UPDATE SET content = EXCLUDED.content"
        )
        self._execute(query, item, content)

    def charged(self, item: str) -> float:
        query = "SELECT coalesce(sum(dollars), 0) AS dollars FROM predbench.charges WHERE run_id = %s AND item = %s"
        return float(self._row(query, item)["dollars"])

    def _streak(self, model: str) -> money.Streak | None:
        account = self.lock(model)
        if account["streak_invocation"] is None:
            return None
        return money.Streak(account["streak_invocation"], account["streak_failures"] or 0)

    def streak(self, model: str, invocation: str) -> int:
        return money.streak_count(self._streak(model), invocation)

    def note_outcome(self, model: str, infra: bool, invocation: str) -> None:
        """The model's streak as state/money.py's next_streak gives it."""
        streak = money.next_streak(self._streak(model), infra, invocation)
        if streak is None:
            assignments, params = "streak_invocation = NULL, streak_failures = NULL, streak_last_at = NULL", ()
        else:
            assignments = "streak_invocation = %s, streak_failures = %s, streak_last_at = now()"
            params = (streak.invocation, streak.failures)
        query = (
            f"UPDATE predbench.accounts SET {assignments} WHERE run_id = %s AND name = %s RETURNING {ACCOUNT_COLUMNS}"
        )
        row = self.conn.execute(query, (*params, self.store.run_id, model)).fetchone()
        self._accounts[model] = self._account(row)

    def reserve(self, item: str, model: str, owner: Owner, reservation_id: str) -> Reservation | None:
        """As Ledger.reserve, in numeric: state/money.py's decision on the accounts' facts and the plan's
        caps — a whole session cap (nothing for a baseline), or None (and the models it closes closed)."""
        total, mine = self.lock(TOTAL), self.lock(model)
        closed = [row["name"] for row in self._rows(CLOSED_QUERY)]
        session = dec(self.plan.caps.per_session)
        decision = money.reserve(model, self.plan.accounts, closed, session, _remaining(mine), _remaining(total), SLACK)
        if decision.close:
            query = "UPDATE predbench.accounts SET closed = true WHERE run_id = %s AND name = ANY(%s)"
            self._execute(query, list(decision.close))
        if decision.dollars is None:
            return None
        cap = decision.dollars
        query = (
            "INSERT INTO predbench.reservations (run_id, id, item, model, dollars, host, boot_id, pid, start_ticks, "
            "lease_until) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, now() + %s * interval '1 second') "
            f"RETURNING {RESERVATION_COLUMNS}"
        )
        row = self._row(
            query,
            reservation_id,
            item,
            model,
            cap,
            owner.host,
            owner.boot_id,
            owner.pid,
            owner.start_ticks,
            self.store.lease_seconds,
        )
        self._update_accounts(model, "reserved = reserved + %s", cap)
        return _reservation(row, self.store.where)

    def settle(self, reservation: Reservation, dollars: float, kind: ChargeKind) -> Charge:
        self.lock(reservation.model)
        query = f"DELETE FROM predbench.reservations WHERE run_id = %s AND id = %s RETURNING {RESERVATION_COLUMNS}"
        row = self._row(query, reservation.id)
        if row is None:
            raise LedgerError(
                f"{reservation.item}: reservation {reservation.id} is not open (settled already, or reaped as lost "
                "when its lease expired): a late settle is refused"
            )
        spent = money.charge(dec(dollars), Decimal(0))
        query = (
            "INSERT INTO predbench.charges (run_id, item, model, dollars, reserved, kind, reservation, reserved_at) "
            f"VALUES (%s, %s, %s, %s, %s, %s, %s, %s) RETURNING {CHARGE_COLUMNS}"
        )
        charge = self._row(query, row["item"], row["model"], spent, row["dollars"], kind.value, row["id"], row["at"])
        no_result = spent if kind is not ChargeKind.RESULT else Decimal(0)
        assignments = "reserved = reserved - %s, spent = spent + %s, infra = infra + %s"
        self._update_accounts(row["model"], assignments, row["dollars"], spent, no_result)
        return _charge(charge, self.store.where)


class PgStore:
    """One run in a PostgreSQL database (see the module's docstring)."""

    shared = True

    def __init__(
        self,
        url: str,
        run_id: str,
        *,
        lease_seconds: float = 300.0,
        retry_seconds: float | None = None,
        local: Path | None = None,
    ):
        self.url = url
        self.display = describe(url)
        self.run_id = check_run_id(run_id)
        self.name = f"{run_id} in {self.display}"
        """How a person names the run (`predbench status` shows it)."""
        self.where = f"run {self.name}"
        self.lease_seconds = lease_seconds
        self.retry_seconds = lease_seconds if retry_seconds is None else retry_seconds
        self.local = RunDir(local or Path(tempfile.gettempdir()) / f"predbench-{run_id}")
        self.local_chosen = local is not None
        """The caller chose the directory for this host's working files (and removes it); otherwise a
        working invocation makes a scratch directory of its own (state/scratch.py)."""
        self.host = socket.gethostname()
        self._connections: dict[int, psycopg.Connection] = {}
        self._guard = threading.Lock()
        self._plan: Plan | None = None
        self._plan_read: tuple[str, Plan] | None = None

    # -- connections -------------------------------------------------------------------------

    def _connection(self) -> psycopg.Connection:
        """This thread's connection (the lease's renewals run on a thread of their own)."""
        key = threading.get_ident()
        with self._guard:
            conn = self._connections.get(key)
        if conn is not None and not conn.closed and not conn.broken:
            return conn
        conn = psycopg.connect(
            self.url,
            connect_timeout=CONNECT_TIMEOUT_S,
            autocommit=True,
            row_factory=dict_row,
            application_name=f"predbench {self.run_id}",
        )
        conn.execute("SET TIME ZONE 'UTC'")
        conn.execute("SET idle_in_transaction_session_timeout = '60s'")
        with self._guard:
            self._connections[key] = conn
        return conn

    def _drop(self) -> None:
        with self._guard:
            conn = self._connections.pop(threading.get_ident(), None)
        if conn is not None:
            conn.close()

    def close(self) -> None:
        with self._guard:
            connections, self._connections = list(self._connections.values()), {}
        for conn in connections:
            conn.close()

    def _attempt(self, what: str, action: Callable[[psycopg.Connection], T], retry: bool = True) -> T:
        """`action` on this thread's connection; a broken connection is opened again and the action
        tried again until retry_seconds pass (not at all unless `retry`). Errors become one line."""
        deadline = time.monotonic() + (self.retry_seconds if retry else 0)
        while True:
            try:
                return action(self._connection())
            except (psycopg.errors.UndefinedTable, psycopg.errors.InvalidSchemaName):
                raise StoreError(f"no run {self.run_id} in {self.display}: it holds no predbench tables") from None
            except psycopg.IntegrityError as exc:
                message = exc.diag.message_primary or _first_line(exc)
                raise LedgerError(f"{self.where}: the store refused to {what}: {message}") from None
            except psycopg.OperationalError as exc:
                self._drop()
                if time.monotonic() >= deadline:
                    waited = f" for {self.retry_seconds:g}s" if retry else ""
                    raise StoreUnavailable(
                        f"{self.where}: cannot {what}: the store did not answer{waited} ({_first_line(exc)})"
                    ) from None
                time.sleep(RETRY_PAUSE_S)
            except psycopg.Error as exc:
                raise StoreError(f"{self.where}: cannot {what}: {_first_line(exc)}") from None

    # -- the run -----------------------------------------------------------------------------

    def _ensure_schema(self, conn: psycopg.Connection) -> None:
        with conn.transaction():
            # each statement sees what the creator before it committed, whatever the role's default
            conn.execute("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
            if conn.execute("SELECT to_regclass('predbench.schema_version') AS t").fetchone()["t"] is None:
                conn.execute(DDL)
            version = conn.execute("SELECT max(version) AS version FROM predbench.schema_version").fetchone()["version"]
            while version in UPGRADES:  # an older predbench's tables: only ever added to
                conn.execute(UPGRADES[version])
                version += 1

    def _check_schema(self, conn: psycopg.Connection) -> None:
        row = conn.execute("SELECT max(version) AS version FROM predbench.schema_version").fetchone()
        if row["version"] != SCHEMA_VERSION:
            raise StoreError(
                f"{self.display} holds predbench tables of layout {row['version']}; "
                f"this predbench uses layout {SCHEMA_VERSION}"
            )

    def create(self, plan: Plan) -> None:
        """A new run of `plan` (StoreError if the id is taken): its plan and its accounts."""

        def create(conn: psycopg.Connection) -> None:
            self._ensure_schema(conn)
            self._check_schema(conn)
            with conn.transaction():
                query = "INSERT INTO predbench.runs (id, digest, plan) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING"
                if conn.execute(query, (self.run_id, plan.digest(), plan_text(plan))).rowcount != 1:
                    raise StoreError(f"run {self.run_id} already exists in {self.display}: join it with --join")
                with conn.cursor() as cur:
                    cur.executemany(
                        "INSERT INTO predbench.accounts (run_id, name) VALUES (%s, %s)",
                        [(self.run_id, name) for name in (TOTAL, *plan.accounts)],
                    )

        self._attempt("create the run", create, retry=False)
        self._plan = plan

    def _plan_row(self, conn: psycopg.Connection) -> tuple[str, PlanFile]:
        row = conn.execute("SELECT digest, plan FROM predbench.runs WHERE id = %s", (self.run_id,)).fetchone()
        if row is None:
            raise StoreError(f"no run {self.run_id} in {self.display}")
        where = f"{self.where}: runs row"
        stored = parse_plan(row["plan"], where)
        if stored.digest != row["digest"]:
            raise CorruptStateError(f"{where}: its digest column differs from its plan's digest (edited by hand?)")
        return row["plan"], stored

    def plan_file(self) -> PlanFile:
        """The run's recorded plan (first contact: a wrong URL or a server down fails at once)."""

        def read(conn: psycopg.Connection) -> PlanFile:
            self._check_schema(conn)
            return self._plan_row(conn)[1]

        stored = self._attempt("read the run's plan", read, retry=False)
        self._plan = stored.plan
        return stored

    @property
    def plan(self) -> Plan:
        if self._plan is None:
            self._plan = self._attempt("read the run's plan", lambda conn: self._plan_row(conn)[1]).plan
        return self._plan

    # -- the books ---------------------------------------------------------------------------

    def atomically(self, step: Callable[[PgBooks], T]) -> T:
        def transaction(conn: psycopg.Connection) -> T:
            with conn.transaction():
                books = PgBooks(self, conn, self._locked_plan(conn))
                books.lock(TOTAL)
                return step(books)

        return self._attempt("book", transaction)

    def _locked_plan(self, conn: psycopg.Connection) -> Plan:
        """The run's plan as stored, its caps in force with it, under the run's total account lock (which
        a raise takes too); parsed again only when its text changed."""
        query = "SELECT 1 FROM predbench.accounts WHERE run_id = %s AND name = '' FOR UPDATE"
        conn.execute(query, (self.run_id,))
        row = conn.execute("SELECT plan FROM predbench.runs WHERE id = %s", (self.run_id,)).fetchone()
        if row is None:
            raise StoreError(f"no run {self.run_id} in {self.display}")
        if self._plan_read is None or self._plan_read[0] != row["plan"]:
            self._plan_read = (row["plan"], parse_plan(row["plan"], f"{self.where}: runs row").plan)
        self._plan = self._plan_read[1]
        return self._plan

    def raise_caps(self, plan: Plan, reason: str) -> None:
        """One transaction: every model launching again, every item skipped for budget reopened
        (infra, with `reason`), and the plan recorded with its raise (outside its digest)."""

        def transaction(conn: psycopg.Connection) -> None:
            with conn.transaction():
                PgBooks(self, conn, self._locked_plan(conn)).lock(TOTAL)
                conn.execute("UPDATE predbench.accounts SET closed = false WHERE run_id = %s", (self.run_id,))
                query = "SELECT item, status, terminal, record FROM predbench.records WHERE run_id = %s AND status = %s"
                for row in conn.execute(query, (self.run_id, ItemStatus.SKIPPED_BUDGET.value)).fetchall():
                    record = _record(row, self.where).model_copy(update={"status": ItemStatus.INFRA, "reason": reason})
                    conn.execute(
                        "UPDATE predbench.records SET status = %s, terminal = false, record = %s "
                        "WHERE run_id = %s AND item = %s",
                        (record.status.value, record.model_dump_json(), self.run_id, record.item),
                    )
                conn.execute("UPDATE predbench.runs SET plan = %s WHERE id = %s", (plan_text(plan), self.run_id))

        self._attempt("raise the caps", transaction)
        self._plan = plan

    def infra_streak(self, model: str, invocation: str) -> tuple[int, datetime | None]:
        query = "SELECT streak_invocation, streak_failures, streak_last_at FROM predbench.accounts "
        query += "WHERE run_id = %s AND name = %s"
        row = self._attempt("read a streak", lambda conn: conn.execute(query, (self.run_id, model)).fetchone())
        if row is None or row["streak_invocation"] != invocation or not row["streak_failures"]:
            return 0, None
        return row["streak_failures"], row["streak_last_at"]

    def renew(self, reservation_ids: list[str]) -> set[str]:
        """Extend the leases that have not expired; the ids renewed. A lease that expired is lost,
        reaped or not: its owner learns it here. One try (the lease keeper decides what a failure
        means): StoreUnavailable if it fails."""
        if not reservation_ids:
            return set()
        query = (
            "UPDATE predbench.reservations SET lease_until = now() + %s * interval '1 second' "
            "WHERE run_id = %s AND id = ANY(%s) AND lease_until >= now() RETURNING id"
        )
        params = (self.lease_seconds, self.run_id, list(reservation_ids))
        rows = self._attempt("renew leases", lambda conn: conn.execute(query, params).fetchall(), retry=False)
        return {row["id"] for row in rows}

    def log_preflight(self, entry: dict) -> None:
        query = "INSERT INTO predbench.preflight (run_id, entry) VALUES (%s, %s)"
        self._attempt("keep the preflight", lambda conn: conn.execute(query, (self.run_id, json.dumps(entry))))

    def rebuild_views(self, plan: Plan, records: dict[str, ItemRecord]) -> None:
        """None kept here: `predbench export` writes them with the run directory."""

    # -- reading it all ----------------------------------------------------------------------

    def read(self, everything: bool = False, retry: bool = True) -> StoredRun:
        """The whole run in one read-only, repeatable-read transaction; `everything` adds the
        preflight log and the trajectories (for an export). CorruptStateError (one line naming
        the row) when any of it cannot be validated, or the accounts disagree with the charges."""

        def read(conn: psycopg.Connection) -> StoredRun:
            with conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                self._check_schema(conn)
                now = conn.execute("SELECT now() AS now").fetchone()["now"]
                text, stored = self._plan_row(conn)
                rows = {
                    name: conn.execute(query, (self.run_id,)).fetchall()
                    for name, query in self._read_queries(everything).items()
                }
            return self._stored(text, stored, rows, now)

        return self._attempt("read the run", read, retry=retry)

    @staticmethod
    def _read_queries(everything: bool) -> dict[str, str]:
        queries = {
            "accounts": f"SELECT {ACCOUNT_COLUMNS} FROM predbench.accounts WHERE run_id = %s ORDER BY name",
            "reservations": f"SELECT {RESERVATION_COLUMNS} FROM predbench.reservations WHERE run_id = %s ORDER BY at",
            "charges": f"SELECT {CHARGE_COLUMNS} FROM predbench.charges WHERE run_id = %s ORDER BY seq",
            "records": "SELECT item, status, terminal, record FROM predbench.records WHERE run_id = %s ORDER BY item",
        }
        if everything:
            queries["preflight"] = "SELECT entry FROM predbench.preflight WHERE run_id = %s ORDER BY seq"
            queries["trajectories"] = "SELECT item, content FROM predbench.trajectories WHERE run_id = %s ORDER BY item"
            queries["instances"] = "SELECT sha256, content FROM predbench.instances WHERE run_id = %s ORDER BY sha256"
        return queries

    def _stored(self, text: str, stored: PlanFile, rows: dict[str, list[dict]], now: datetime) -> StoredRun:
        where = self.where
        reservations = [_reservation(row, f"{where}: reservations row {row['id']}") for row in rows["reservations"]]
        charges = [_charge(row, f"{where}: charges row of {row['reservation']}") for row in rows["charges"]]
        accounts = {row["name"]: row for row in rows["accounts"]}
        self._check_accounts(stored.plan, accounts, rows)
        streaks = {
            name: {
                "invocation": row["streak_invocation"],
                "failures": row["streak_failures"],
                "last_at": row["streak_last_at"],
            }
            for name, row in accounts.items()
            if name and row["streak_invocation"] is not None
        }
        ledger = parse_model(
            {
                "models": stored.plan.accounts,
                "reservations": reservations,
                "charges": charges,
                "closed": [name for name, row in accounts.items() if name and row["closed"]],
                "streaks": {name: InfraStreak.model_validate(s) for name, s in streaks.items()},
            },
            Ledger,
            f"{where}: accounts",
        ).bound(stored.plan.caps)
        try:
            preflight = [json.loads(row["entry"]) for row in rows.get("preflight", [])]
        except ValueError as exc:
            raise CorruptStateError(f"{where}: preflight row: not valid JSON ({exc})") from None
        return StoredRun(
            plan_text=text,
            plan_file=stored,
            ledger=ledger,
            records=[_record(row, where) for row in rows["records"]],
            preflight=preflight,
            trajectories={row["item"]: bytes(row["content"]) for row in rows.get("trajectories", [])},
            instances={row["sha256"]: _instance(row, where) for row in rows.get("instances", [])},
            now=now,
        )

    def _check_accounts(self, plan: Plan, accounts: dict[str, dict], rows: dict[str, list[dict]]) -> None:
        """Each account's running sums must equal what its charges and reservations add up to."""
        where = f"{self.where}: accounts row"
        names = {TOTAL, *plan.accounts}
        if set(accounts) != names:
            raise CorruptStateError(f"{where}s are {sorted(accounts)}, the plan's accounts are {plan.accounts}")
        for name, account in accounts.items():
            charges = [c for c in rows["charges"] if not name or c["model"] == name]
            held = [r for r in rows["reservations"] if not name or r["model"] == name]
            sums = {
                "spent": sum((c["dollars"] for c in charges), Decimal(0)),
                "infra": sum((c["dollars"] for c in charges if c["kind"] != ChargeKind.RESULT.value), Decimal(0)),
                "reserved": sum((r["dollars"] for r in held), Decimal(0)),
            }
            for column, expected in sums.items():
                if account[column] != expected:
                    label = "the run's total" if not name else name
                    raise CorruptStateError(
                        f"{where} {label}: {column} {account[column]}, but its rows add up to {expected} "
                        "(edited by hand?)"
                    )

    def snapshot(self, retry: bool = True) -> RunSnapshot:
        stored = self.read(retry=retry)
        run = RunDir.named(self.run_id)
        records = [(run.item_record(record.item), record) for record in stored.records]
        return RunSnapshot(run, stored.plan_file, stored.ledger, records, where=self.name, now=stored.now, files=False)

    def export(self, directory: Path) -> RunDir:
        """The run written out as a run directory (state/export.py), from one consistent read."""
        stored = self.read(everything=True, retry=False)
        mark = ExportMark(run_id=self.run_id, store=self.display, digest=stored.plan_file.digest)
        return write_run_dir(directory, mark, stored)


def _instance(row: dict, where: str) -> bytes:
    """An instance row's content, checked as a file of a run's instances/ is (a hand-edited row with
    another name, or content that is not its address, is refused: its name becomes a file's)."""
    content = bytes(row["content"])
    problem = instance_problem(row["sha256"], content)
    if problem:
        raise CorruptStateError(f"{where}: instances row {str(row['sha256'])[:80]!r}: {problem}")
    return content
