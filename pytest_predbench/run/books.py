"""The two atomic steps of an item: before it, reserve (or record the budget skip); after it,
write its record and settle its spend. Each step is one step of the run's store (state/store.py:
under the run directory's file lock, or one PostgreSQL transaction), so the ledger and the item
records never disagree, whichever process (or host) dies when. The rules are written here once,
for both stores.

In a run directory the record is written before the ledger: if the process dies between the two,
the result is kept and the open reservation is later settled from the record, instead of the item
running and being paid for twice. Every record carries what the item's earlier attempts were charged,
so the ledger always equals the sum of the records.

An entrant (an agent and a model: state/entrants.py) whose sessions keep ending in infrastructure
failures is paused for the rest of the invocation: its remaining items are recorded as infra (not
terminal: a resume runs them) and skipped, instead of each burning its budget on a provider that is down.
"""

import os
import uuid
from datetime import datetime

from pytest_predbench.session.reductions import reduced_instances
from pytest_predbench.state.certificates import certificate_listing
from pytest_predbench.state.ledger import Charge, ChargeKind, LedgerError, Reservation
from pytest_predbench.state.liveness import current_owner
from pytest_predbench.state.plan import PlannedItem
from pytest_predbench.state.records import ItemRecord, ItemStatus
from pytest_predbench.state.store import Books, Store

BUDGET_REASON = "budget"
PAUSED_REASON = "paused: provider failing"
DONE_REASON = "already done"
"""A terminal record appeared after this invocation started: another host (or worker) finished it."""
ELSEWHERE_REASON = "running elsewhere"
"""Another live worker holds the item's reservation: the reservation is the claim on an item."""


RUNNING_ELSEWHERE = "running_elsewhere"
"""The status an item held by another worker is reported with (run/live.py's properties): it has no
record of its own; it is left, neither done nor skipped, until its holder settles it."""


class ItemSkipped(Exception):
    """The item does not run; its record says why (BUDGET_REASON, or PAUSED_REASON: `paused`), or,
    when another worker finished or holds it (DONE_REASON, ELSEWHERE_REASON), no record is written.
    `status`: what the item is reported as (its properties, the live table): the status of the record
    written or found, or RUNNING_ELSEWHERE."""

    def __init__(self, reason: str, paused: bool = False, status: ItemStatus | str | None = None):
        super().__init__(reason)
        self.paused = paused
        self.status = status or (ItemStatus.INFRA if paused else ItemStatus.SKIPPED_BUDGET)


class Bookkeeper:
    def __init__(self, store: Store, plan_digest: str, invocation: str, worker: str):
        self.store = store
        self.plan_digest = plan_digest
        self.invocation = invocation
        self.worker = worker

    def record(
        self, item: PlannedItem, status: ItemStatus, reason: str, runner: str | None = None, **fields
    ) -> ItemRecord:
        return ItemRecord(
            item=item.key,
            model=item.model,
            session=item.session,
            plan_digest=self.plan_digest,
            runner=runner or item.agent,
            status=status,
            reason=reason,
            invocation=self.invocation,
            worker=self.worker,
            pid=os.getpid(),
            **fields,
        )

    def _reap(self, books: Books) -> list[Charge]:
        """Settle the reservations of provably gone owners: from their record when they wrote one
        (they died just after), else in full as LOST."""
        charges = []
        for reservation in books.abandoned():
            record = books.record(reservation.item)
            if record is not None and record.reservation == reservation.id:
                kind = ChargeKind.RESULT if record.status.terminal else ChargeKind.INFRA
                charges.append(books.settle(reservation, record.spent, kind))
            else:
                charges.append(books.settle(reservation, reservation.dollars, ChargeKind.LOST))
        return charges

    def reap(self) -> list[Charge]:
        return self.store.atomically(self._reap)

    def reserve(self, item: PlannedItem, pause_after: int = 0) -> Reservation:
        """The session's hard dollar limit; or ItemSkipped, after recording the item as skipped for
        budget (terminal), or as paused after `pause_after` infrastructure failures in a row (not);
        or, without a record, when another worker finished the item or holds it."""
        reservation_id, owner = uuid.uuid4().hex, current_owner()

        def step(books: Books) -> Reservation | ItemSkipped:
            mine = books.reservation(reservation_id)
            if mine is not None:
                return mine  # this step's earlier try was committed (a shared store's connection broke)
            self._reap(books)
            existing = books.record(item.key)
            if existing is not None and existing.status.terminal:
                ours = (existing.invocation, existing.worker) == (self.invocation, self.worker)
                if ours and existing.status is ItemStatus.SKIPPED_BUDGET:
                    return ItemSkipped(existing.reason)  # this step's earlier try wrote it
                done = f"{DONE_REASON} ({existing.status.value}): another worker finished it"
                return ItemSkipped(done, status=existing.status)
            held = books.held(item.key)
            if held is not None:
                where = f"{ELSEWHERE_REASON}: reserved by pid {held.owner.pid} on {held.owner.host}"
                return ItemSkipped(where, status=RUNNING_ELSEWHERE)
            earlier = books.charged(item.key)
            failures = books.streak(item.account, self.invocation)
            if pause_after and failures >= pause_after:
                reason = f"{PAUSED_REASON}: {failures} infrastructure failures in a row (re-run on resume)"
                books.write_record(self.record(item, ItemStatus.INFRA, reason, earlier_spent=earlier))
                return ItemSkipped(reason, paused=True)
            reservation = books.reserve(item.key, item.account, owner, reservation_id)
            if reservation is None:
                skipped = ItemStatus.SKIPPED_BUDGET
                books.write_record(self.record(item, skipped, BUDGET_REASON, earlier_spent=earlier))
                return ItemSkipped(BUDGET_REASON)
            return reservation

        outcome = self.store.atomically(step)
        if isinstance(outcome, ItemSkipped):
            raise outcome
        return outcome

    def _paths(self, record: ItemRecord) -> ItemRecord:
        """The record as it is kept: its certificate files named (the store writes them with it:
        state/certificates.py) and every path it holds relative to the run directory, so a copied,
        zipped or exported run still links up."""
        result, run = record.result, self.store.local
        if result is not None and result.trajectory_path:
            relative = run.relative(result.trajectory_path)
            result = result.model_copy(update={"trajectory_path": relative or result.trajectory_path})
        count = len(result.certificates) if record.status.is_result and result is not None else 0
        return record.model_copy(
            update={"certificate_files": certificate_listing(record.item, count), "result": result}
        )

    def settle(self, reservation: Reservation, record: ItemRecord) -> Charge:
        """Write the item's record (and its certificate files) and charge its real spend, releasing the
        rest. LedgerError when the reservation is no longer open (reaped as lost after its owner's lease
        expired): then nothing is written."""
        trajectory = self.store.local.trajectory(record.item)

        def step(books: Books) -> Charge:
            if books.reservation(reservation.id) is None:
                settled = books.charge_of(reservation.id)
                if settled is not None and settled.kind is not ChargeKind.LOST:
                    return settled  # this step's earlier try was committed
                raise LedgerError(
                    f"{record.item}: reservation {reservation.id} is not open: it was reaped as lost (its lease "
                    "expired); a late settle is refused"
                )
            final = self._paths(record.model_copy(update={"earlier_spent": books.charged(record.item)}))
            books.write_record(final)
            books.keep_trajectory(record.item, trajectory)
            books.keep_instances(reduced_instances(record.result.pred_log) if record.result else [])
            kind = ChargeKind.RESULT if final.status.terminal else ChargeKind.INFRA
            provider_failed = final.result is not None and final.result.stop.is_infra
            if final.status.terminal or provider_failed:
                books.note_outcome(final.account, provider_failed, self.invocation)
            return books.settle(reservation, final.spent, kind)

        return self.store.atomically(step)

    def infra_streak(self, account: str) -> tuple[int, datetime | None]:
        """The entrant's infrastructure failures in a row in this invocation (by its account), and when
        the last one was settled."""
        return self.store.infra_streak(account, self.invocation)

    def record_crash(self, item: PlannedItem, reason: str) -> bool:
        """A worker died mid-item (seen by the controller): record it as infra unless it left a
        record in this run; its reservation is settled once its owner is provably gone."""

        def step(books: Books) -> bool:
            self._reap(books)
            existing = books.record(item.key)
            if existing is not None and (existing.status.terminal or existing.invocation == self.invocation):
                return False
            earlier = books.charged(item.key)
            books.write_record(self.record(item, ItemStatus.INFRA, reason, earlier_spent=earlier))
            return True

        return self.store.atomically(step)
