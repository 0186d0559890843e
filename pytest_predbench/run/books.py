"""The two locked steps of an item: before it, reserve (or record the budget skip); after it,
write its record and settle its spend. Each step holds the run's state lock throughout, so
the ledger and the item records never disagree, whichever process dies when.

The record is written before the ledger: if the process dies between the two, the result is
kept and the open reservation is later settled from the record, instead of the item running
and being paid for twice. Every record carries what the item's earlier attempts were charged,
so the ledger always equals the sum of the records.

A model whose sessions keep ending in infrastructure failures is paused for the rest of the
invocation: its remaining items are recorded as infra (not terminal: a resume runs them) and
skipped, instead of each burning its budget on a provider that is down.
"""

import os
from datetime import datetime

from pytest_predbench.state.certificates import clear_certificate_files, write_certificate_files
from pytest_predbench.state.ledger import Charge, ChargeKind, Ledger, Reservation, ledger_transaction, peek_ledger
from pytest_predbench.state.liveness import current_owner, owner_gone
from pytest_predbench.state.plan import PlannedItem
from pytest_predbench.state.records import ItemRecord, ItemStatus, RecordError, read_record, write_record
from pytest_predbench.state.rundir import RunDir

BUDGET_REASON = "budget"
PAUSED_REASON = "paused: provider failing"


class ItemSkipped(Exception):
    """The item does not run; its record says why (BUDGET_REASON, or PAUSED_REASON: `paused`)."""

    def __init__(self, reason: str, paused: bool = False):
        super().__init__(reason)
        self.paused = paused


class Bookkeeper:
    def __init__(self, run: RunDir, plan_digest: str, runner: str, invocation: str, worker: str):
        self.run = run
        self.plan_digest = plan_digest
        self.runner = runner
        self.invocation = invocation
        self.worker = worker

    def _transaction(self):
        return ledger_transaction(self.run.ledger, self.run.state_lock())

    def record(
        self, item: PlannedItem, status: ItemStatus, reason: str, runner: str | None = None, **fields
    ) -> ItemRecord:
        return ItemRecord(
            item=item.key,
            model=item.model,
            session=item.session,
            plan_digest=self.plan_digest,
            runner=runner or self.runner,
            status=status,
            reason=reason,
            invocation=self.invocation,
            worker=self.worker,
            pid=os.getpid(),
            **fields,
        )

    def _reap(self, ledger: Ledger) -> list[Charge]:
        """Settle the reservations of provably dead owners: from their record when they wrote one
        (they died just after), else in full as LOST."""
        charges = []
        for reservation in ledger.abandoned(owner_gone):
            record = read_record(self.run, reservation.item)
            if record is not None and record.reservation == reservation.id:
                kind = ChargeKind.RESULT if record.status.terminal else ChargeKind.INFRA
                charges.append(ledger.settle(reservation, record.spent, kind))
            else:
                charges.append(ledger.settle(reservation, reservation.dollars, ChargeKind.LOST))
        return charges

    def reap(self) -> list[Charge]:
        with self._transaction() as ledger:
            return self._reap(ledger)

    def reserve(self, item: PlannedItem, pause_after: int = 0) -> Reservation:
        """The session's hard dollar limit; or ItemSkipped, after recording the item as skipped for
        budget (terminal), or as paused after `pause_after` infrastructure failures in a row (not)."""
        with self._transaction() as ledger:
            self._reap(ledger)
            existing = read_record(self.run, item.key)
            if existing is not None and existing.status.terminal:
                raise RecordError(f"{item.key} is already done ({existing.status}); it is not run twice")
            earlier = ledger.charged(item.key)
            failures = ledger.streak(item.model, self.invocation)
            reservation, skip = None, ItemSkipped(BUDGET_REASON)
            if pause_after and failures >= pause_after:
                reason = f"{PAUSED_REASON}: {failures} infrastructure failures in a row (re-run on resume)"
                skip = ItemSkipped(reason, paused=True)
                write_record(self.run, self.record(item, ItemStatus.INFRA, reason, earlier_spent=earlier))
            else:
                reservation = ledger.reserve(item.key, item.model, current_owner())
                if reservation is None:
                    skipped = ItemStatus.SKIPPED_BUDGET
                    write_record(self.run, self.record(item, skipped, BUDGET_REASON, earlier_spent=earlier))
        if reservation is None:
            raise skip
        return reservation

    def _files(self, record: ItemRecord) -> ItemRecord:
        """A result's certificates and verdicts as files of their own, and every path the record
        holds relative to the run directory (call under the state lock, before the record is written).
        A terminal record is final: its files are never touched again."""
        existing = read_record(self.run, record.item)
        if existing is not None and existing.status.terminal:
            raise RecordError(f"{record.item} already has a terminal record ({existing.status}); not overwriting it")
        result, files = record.result, []
        if record.status.is_result and result is not None:
            files = write_certificate_files(self.run, record.item, result.certificates, record.verdicts)
        else:
            clear_certificate_files(self.run, record.item)
        if result is not None and result.trajectory_path:
            relative = self.run.relative(result.trajectory_path)
            result = result.model_copy(update={"trajectory_path": relative or result.trajectory_path})
        return record.model_copy(update={"certificate_files": files, "result": result})

    def settle(self, reservation: Reservation, record: ItemRecord) -> Charge:
        """Write the item's certificate files and record, and charge its real spend, releasing the rest."""
        with self._transaction() as ledger:
            record = self._files(record.model_copy(update={"earlier_spent": ledger.charged(record.item)}))
            write_record(self.run, record)
            kind = ChargeKind.RESULT if record.status.terminal else ChargeKind.INFRA
            provider_failed = record.result is not None and record.result.stop.is_infra
            if record.status.terminal or provider_failed:
                ledger.note_outcome(record.model, provider_failed, self.invocation)
            return ledger.settle(reservation, record.spent, kind)

    def infra_streak(self, model: str) -> tuple[int, datetime | None]:
        """The model's infrastructure failures in a row in this invocation, and when the last one was
        settled (read without the lock: the ledger is replaced atomically)."""
        ledger = peek_ledger(self.run.ledger)  # once per item: no parse when this process wrote it last
        streak = ledger.streaks.get(model)
        failures = ledger.streak(model, self.invocation)
        return failures, streak.last_at if failures and streak is not None else None

    def record_crash(self, item: PlannedItem, reason: str) -> bool:
        """A worker died mid-item (seen by the controller): record it as infra unless it left a
        record in this run; its reservation is settled once its owner is provably gone."""
        with self._transaction() as ledger:
            self._reap(ledger)
            existing = read_record(self.run, item.key)
            if existing is not None and (existing.status.terminal or existing.invocation == self.invocation):
                return False
            earlier = ledger.charged(item.key)
            write_record(self.run, self.record(item, ItemStatus.INFRA, reason, earlier_spent=earlier))
            return True
