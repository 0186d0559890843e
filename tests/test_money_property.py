"""The money rules, property-based, on both stores at once: hypothesis draws a plan (models, with or
without a baseline; sessions; caps, the total sometimes binding before the models' caps) and a
sequence of steps — reserve, settle (a result or a provider failure), crash (a session whose
process died mid-session, then seen by the controller), raise (a raise of the caps, or a lowering,
refused), resume (a new invocation that audits the books and reaps) — and drives the same sequence
through a run directory and a real PostgreSQL server (tests/support/postgres.py) by the harness's own
paths (run/books.py's Bookkeeper, run/topup.py, both stores' atomic steps).

After every step, on each store: no account's spend and reservations pass its cap in force (the
plan's, as raised), no reservation is charged twice and no item is charged two results, the audit
finds nothing (state/audit.py), and a cap never falls; at the end, once every live session settled
and the dead were reaped, every reservation ever made is settled exactly once and none is left
open. And the two stores agree step for step: the same outcome (reserved and for how much, skipped
and why, raised or refused), the same charges, accounts, closed models and streaks.

A rule changed in one store only breaks the agreement, so this suite is what keeps the money rules
written once (state/money.py) honest; see test_money_faults.py for the slipped faults one by one.
"""

import shutil
import subprocess
import tempfile
import uuid
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_predbench.run import books as books_module
from pytest_predbench.run import topup
from pytest_predbench.run.books import Bookkeeper, ItemSkipped
from pytest_predbench.run.join import create_shared
from pytest_predbench.run.planning import build_plan
from pytest_predbench.run.start import CONTROLLER, start_new
from pytest_predbench.session import baseline
from pytest_predbench.session.protocol import Accounting, SessionResult, StopKind, StopReason
from pytest_predbench.state.audit import state_faults
from pytest_predbench.state.filestore import FileStore
from pytest_predbench.state.ledger import ChargeKind, Reservation
from pytest_predbench.state.liveness import current_owner
from pytest_predbench.state.pgstore import PgStore
from pytest_predbench.state.plan import DOLLAR_EPSILON, Plan, PlanError, PlanOptions
from pytest_predbench.state.records import ItemStatus
from pytest_predbench.state.rundir import RunDir
from pytest_predbench.state.store import Store

PAUSE_AFTER = 2
"""Infrastructure failures in a row that pause a model (the streak rule is exercised too)."""


def _dead_owner():
    proc = subprocess.Popen(["true"])
    proc.wait()
    return current_owner().model_copy(update={"pid": proc.pid, "start_ticks": 1})


DEAD = _dead_owner()


@cache
def base_plan(sessions: int, budget: float, model_budget: float | None, with_baseline: bool) -> Plan:
    """A fake runner's plan; a baseline joins it by hand (building one with a baseline needs pred)."""
    plan = build_plan(
        PlanOptions(runner="fake", models=["m/a", "m/b"], sessions=sessions, budget=budget, model_budget=model_budget)
    )
    if not with_baseline:
        return plan
    options = plan.options.model_copy(update={"models": ["baseline/random", "m/a", "m/b"]})
    return plan.model_copy(update={"options": options})


# -- the steps ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reserve:
    item: int


@dataclass(frozen=True)
class Settle:
    which: int
    eighths: int
    """What the session spent, in eighths of its reservation."""
    infra: bool


@dataclass(frozen=True)
class Crash:
    item: int


@dataclass(frozen=True)
class Raise:
    budget: float | None
    model_budget: float | None


@dataclass(frozen=True)
class Resume:
    pass


reserves = st.builds(Reserve, st.integers(0, 20))
settles = st.builds(Settle, st.integers(0, 5), st.integers(0, 8), st.booleans())
steps = st.lists(
    st.one_of(
        reserves,
        settles,
        reserves,
        settles,
        st.builds(Crash, st.integers(0, 20)),
        st.builds(
            Raise,
            st.one_of(st.none(), st.sampled_from([0.05, 0.3, 0.6, 1.0, 2.0])),
            st.one_of(st.none(), st.sampled_from([0.05, 0.2, 0.5, 1.0])),
        ),
        st.just(Resume()),
    ),
    min_size=10,
    max_size=30,
)
"""Reserves and settles twice as often as the rest: most steps then find a session to settle."""


# -- one store, driven ----------------------------------------------------------------------------


@dataclass
class Driven:
    """One store's run, and what the suite knows of it: its live sessions, every reservation made."""

    store: Store
    plan: Plan
    digest: str
    invocation: str = "invocation-0"
    """The same on both stores (a streak is kept per invocation): a resume moves both to the next."""
    live: list[Reservation] = field(default_factory=list)
    made: set[str] = field(default_factory=set)
    caps_seen: list[tuple] = field(default_factory=list)

    def keeper(self, worker: str = "gw0") -> Bookkeeper:
        return Bookkeeper(self.store, self.digest, self.invocation, worker)

    def item(self, n: int):
        items = self.plan.items()
        return items[n % len(items)]

    def reserve(self, n: int, owner=None) -> tuple:
        item = self.item(n)
        if owner is not None:
            original = books_module.current_owner
            books_module.current_owner = lambda: owner
        try:
            reservation = self.keeper().reserve(item, pause_after=PAUSE_AFTER)
        except ItemSkipped as skipped:
            return ("skipped", item.key, str(skipped), str(skipped.status))
        finally:
            if owner is not None:
                books_module.current_owner = original
        self.made.add(reservation.id)
        if owner is None:
            self.live.append(reservation)
        return ("reserved", item.key, reservation.dollars)

    def settle(self, step: Settle) -> tuple:
        if not self.live:
            return ("nothing to settle",)
        reservation = self.live.pop(step.which % len(self.live))
        item = next(i for i in self.plan.items() if i.key == reservation.item)
        spent = reservation.dollars * step.eighths / 8
        runner = item.agent
        stop = StopReason(kind=StopKind.INFRA_ERROR if step.infra else StopKind.FINISHED)
        result = SessionResult(runner=runner, model=item.model, accounting=Accounting(dollars=spent), stop=stop)
        status, reason = (ItemStatus.INFRA, "provider failing") if step.infra else (ItemStatus.PASSED, "done")
        keeper = self.keeper()
        record = keeper.record(
            item, status, reason, spent=spent, reserved=reservation.dollars, reservation=reservation.id, result=result
        )
        charge = keeper.settle(reservation, record)
        return ("settled", charge.item, charge.dollars, charge.kind.value)

    def crash(self, n: int) -> tuple:
        launched = self.reserve(n, owner=DEAD)
        if launched[0] != "reserved":
            return ("not launched", launched)
        recorded = self.keeper(CONTROLLER).record_crash(self.item(n), "worker crashed")  # the controller saw it die
        return ("crashed", launched, recorded)

    def raise_caps(self, step: Raise) -> tuple:
        given = {k: v for k, v in (("budget", step.budget), ("model_budget", step.model_budget)) if v is not None}
        snap = self.store.snapshot()
        try:
            raised = topup.requested_raise(snap.plan, given, snap.ledger, self.invocation)
        except PlanError as refused:
            return ("refused", str(refused))
        if raised is None:
            return ("in force",)
        self.plan = topup.raise_caps(self.store, snap.plan, raised)
        return ("raised", raised.total, raised.per_model)

    def resume(self) -> tuple:
        """What a resume does to the books: a new invocation, the audit, the reap of the dead."""
        self.invocation = f"invocation-{int(self.invocation.rsplit('-', 1)[1]) + 1}"
        assert state_faults(self.store.snapshot()) == []
        charges = self.keeper(CONTROLLER).reap()
        return ("resumed", sorted((c.item, c.dollars, c.kind.value) for c in charges))

    def step(self, step) -> tuple:
        if isinstance(step, Reserve):
            return self.reserve(step.item)
        if isinstance(step, Settle):
            return self.settle(step)
        if isinstance(step, Crash):
            return self.crash(step.item)
        if isinstance(step, Raise):
            return self.raise_caps(step)
        return self.resume()

    def books(self) -> tuple:
        """The books as both stores must hold them, and the invariants each must keep."""
        snap = self.store.snapshot()
        ledger, caps = snap.ledger, snap.plan.caps
        for name, account in [*ledger.accounts.items(), ("total", ledger.total)]:
            if account.cap is not None:
                assert account.spent + account.reserved <= account.cap + DOLLAR_EPSILON, (name, account)
        ids = [c.reservation for c in ledger.charges]
        assert len(ids) == len(set(ids)), "a reservation charged twice"
        assert set(ids) <= self.made and {r.id for r in ledger.reservations} <= self.made
        results = [c.item for c in ledger.charges if c.kind is ChargeKind.RESULT]
        assert len(results) == len(set(results)), "an item charged two results"
        assert all(r.dollars == 0 for r in ledger.reservations if baseline.is_baseline(r.model))
        assert state_faults(snap) == []
        self.caps_seen.append((caps.total, caps.per_model))
        if len(self.caps_seen) > 1 and caps.capped:
            (total, model), (last_total, last_model) = self.caps_seen[-2], self.caps_seen[-1]
            assert last_total >= total - DOLLAR_EPSILON and last_model >= model - DOLLAR_EPSILON, "a cap fell"
        figures = {
            name: (round(a.spent, 9), round(a.infra, 9), round(a.reserved, 9), a.cap)
            for name, a in [*ledger.accounts.items(), ("total", ledger.total)]
        }
        records = {key: (r.status.value, round(r.earlier_spent, 9)) for key, r in snap.by_item().items()}
        streaks = {m: (s.invocation, s.failures) for m, s in ledger.streaks.items()}
        charges = [(c.item, round(c.dollars, 9), c.kind.value) for c in ledger.charges]
        held = sorted(r.item for r in ledger.reservations)
        return figures, sorted(ledger.closed), streaks, charges, held, records

    def wind_up(self) -> None:
        """Every live session settles, the dead are reaped: nothing may stay open."""
        while self.live:
            self.settle(Settle(0, 8, False))
        self.keeper(CONTROLLER).reap()
        ledger = self.store.snapshot().ledger
        assert ledger.reservations == [], "a reservation neither settled nor released"
        assert {c.reservation for c in ledger.charges} == self.made, "a reservation made was never settled"


def directory_run(plan: Plan, root: Path) -> Driven:
    state, lock = start_new(RunDir(root / "run"), plan)
    lock.release()
    return Driven(FileStore(state.run), plan, state.digest)


def shared_run(plan: Plan, url: str, root: Path) -> Driven:
    store = PgStore(url, f"p-{uuid.uuid4().hex[:12]}", local=root / "local")
    state = create_shared(store, plan)
    return Driven(store, plan, state.digest)


def drive_both(plan: Plan, url: str, sequence: list) -> None:
    root = Path(tempfile.mkdtemp(prefix="money-"))
    try:
        runs = [directory_run(plan, root / "dir"), shared_run(plan, url, root / "pg")]
        assert runs[0].books() == runs[1].books()
        for n, step in enumerate(sequence):
            outcomes = [run.step(step) for run in runs]
            assert outcomes[0] == outcomes[1], f"step {n} {step}: the stores decided differently"
            books = [run.books() for run in runs]
            assert books[0] == books[1], f"step {n} {step}: the stores' books differ"
        for run in runs:
            run.wind_up()
        assert runs[0].books() == runs[1].books()
    finally:
        for run in locals().get("runs", []):
            run.store.close()
        shutil.rmtree(root, ignore_errors=True)


plans = st.builds(
    base_plan,
    sessions=st.integers(1, 3),
    budget=st.sampled_from([0.1, 0.2, 0.35, 1.0]),
    model_budget=st.one_of(st.none(), st.sampled_from([0.1, 0.15, 0.3])),
    with_baseline=st.booleans(),
).filter(lambda plan: plan.budget.per_session <= plan.budget.per_model)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(plan=plans, sequence=steps)
def test_property_both_stores_keep_the_money_rules_and_agree_step_for_step(pg_server, plan, sequence):
    drive_both(plan, pg_server.url, sequence)


def test_a_run_out_of_money_closes_every_model_on_both_stores(pg_server):
    """The contrast the property draws at random, once by hand: the total binds first (each model's cap
    is the whole total), so m/a's refusal closes m/b too, on both stores alike."""
    plan = base_plan(2, 0.2, 0.2, False)
    drive_both(plan, pg_server.url, [Reserve(0), Reserve(1), Reserve(2)])
    root = Path(tempfile.mkdtemp(prefix="money-"))
    try:
        for run in (directory_run(plan, root / "dir"), shared_run(plan, pg_server.url, root / "pg")):
            for n in (0, 1):
                run.reserve(n)  # m/a-s01 and m/b-s01 hold the whole $0.20
            assert run.reserve(2)[0] == "skipped"
            assert run.books()[1] == ["m/a", "m/b"], "the run is out: every model closed, not only the asker"
            run.store.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("kind", ["directory", "postgres"])
def test_a_raise_reopens_the_closed_models_and_the_skipped_items(pg_server, kind):
    plan = base_plan(2, 0.2, None, False)
    root = Path(tempfile.mkdtemp(prefix="money-"))
    try:
        run = directory_run(plan, root) if kind == "directory" else shared_run(plan, pg_server.url, root)
        run.crash(0)  # m/a-s01 lost with its process: $0.05 charged in full
        run.reserve(0)
        run.settle(Settle(0, 8, False))  # its re-run spent $0.05 more: m/a's whole $0.10
        assert run.reserve(2)[0] == "skipped"
        figures, closed, _, _, _, records = run.books()
        assert closed == ["m/a"] and records["m/a-s02"][0] == ItemStatus.SKIPPED_BUDGET.value
        assert run.raise_caps(Raise(0.4, None)) == ("raised", 0.4, 0.2)
        figures, closed, _, _, _, records = run.books()
        assert closed == [] and records["m/a-s02"][0] == ItemStatus.INFRA.value
        assert figures["m/a"][3] == 0.2 and figures["total"][3] == 0.4, "the caps in force are the plan's raise"
        assert run.reserve(2)[0] == "reserved"
        run.wind_up()
        run.store.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
