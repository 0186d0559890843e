"""The publication gate: a leaderboard is published only from runs whose state adds up.

A number on a leaderboard is a claim that every planned session ended and was counted once. So
before anything is computed each run is read as one snapshot (state/audit.py) and must be
complete — every planned item has a terminal record, no infrastructure failure is outstanding,
no session was skipped for budget because infrastructure losses (failures, interrupts, sessions lost
with their process) used the room it needed (raise the caps on resume: run/topup.py) — and sound:
the audit's record and ledger checks find nothing, with nothing still reserved.
Several runs merge only when their plans are compatible. Whatever fails is listed, one offence
per line, naming the item; there is no force flag.

Unreadable input is not an offence but an error (CorruptStateError, one line naming the file):
a run directory whose plan, ledger or an item record is truncated, not UTF-8, not JSON or not
its model has been damaged, and nothing read from it can be checked, let alone published.
"""

from pydantic import BaseModel, ConfigDict

from pytest_predbench.state.audit import RunSnapshot, snapshot_faults
from pytest_predbench.state.plan import DOLLAR_EPSILON, Plan
from pytest_predbench.state.records import ItemStatus


class Offence(BaseModel):
    """One reason the gate refuses: which item (or 'ledger', 'plan', 'run'), in which run, and why."""

    model_config = ConfigDict(frozen=True)

    run: str
    item: str
    why: str

    def line(self) -> str:
        return f"{self.run}: {self.item}: {self.why}"


class GateRefusal(Exception):
    """The gate refused; `offences` says what, one per line."""

    def __init__(self, offences: list[Offence]):
        self.offences = offences
        super().__init__(f"refused: {len(offences)} offence(s)")

    def lines(self) -> list[str]:
        """One line per offence; the run directory is named only when several are involved."""
        if len({o.run for o in self.offences}) == 1:
            return [f"{o.item}: {o.why}" for o in self.offences]
        return [o.line() for o in self.offences]


def run_offences(snap: RunSnapshot) -> list[Offence]:
    """Everything that keeps one run from being published, in plan order."""
    run = str(snap.run.path)
    records = snap.by_item()
    found: list[Offence] = []
    for key in snap.planned:
        record = records.get(key)
        if record is None:
            where = snap.run.item_record(key).relative_to(snap.run.path)
            found.append(Offence(run=run, item=key, why=f"no item record ({where})"))
        elif record.status is ItemStatus.INFRA:
            why = f"infrastructure failure outstanding ({record.reason}); re-run it with --resume-bench"
            found.append(Offence(run=run, item=key, why=why))
        elif record.status is ItemStatus.SKIPPED_BUDGET and (losses := infra_losses(snap, record.model)):
            why = (
                f"skipped for budget after infrastructure losses of {record.model} ({losses}) used the room it "
                f"needed: not a result of the model; raise the caps and run it: pytest --resume-bench "
                f"--run-dir={run} --budget D (more than ${snap.plan.caps.total or 0:.4f})"
            )
            found.append(Offence(run=run, item=key, why=why))
    found += [Offence(run=run, item=f.item, why=f.why) for f in snapshot_faults(snap, final=True)]
    order = {key: n for n, key in enumerate(snap.planned)}
    return sorted(dict.fromkeys(found), key=lambda o: order.get(o.item, len(order)))


def infra_losses(snap: RunSnapshot, model: str) -> str | None:
    """What infrastructure failures, interrupts and lost sessions cost `model`, when without them
    its cap (and the run's) would have held one more session; else None (its budget ran out on
    results alone, as planned)."""
    caps, ledger = snap.plan.caps, snap.ledger
    account = ledger.accounts.get(model)
    if account is None or account.infra <= 0:
        return None
    total = ledger.total
    for cap, spent, infra in ((caps.per_model, account.spent, account.infra), (caps.total, total.spent, total.infra)):
        if cap is not None and cap - (spent - infra) < caps.per_session - DOLLAR_EPSILON:
            return None
    return f"${account.infra:.4f} charged with no result"


COMPATIBLE_FIELDS = ("runner", "pred", "prompt_hash", "limits")
"""What every merged run must share: the same agent program, pred and extractor, prompt and limits."""


def _comparable(plan: Plan) -> dict[str, object]:
    pred = plan.pred.model_dump(exclude={"path", "source_dir", "extractor_path"}) if plan.pred else None
    return {
        "runner": plan.options.runner,
        "pred": pred,
        "prompt_hash": plan.prompt_hash,
        "limits": plan.limits.model_dump(mode="json"),
    }


def merge_offences(snaps: list[RunSnapshot]) -> list[Offence]:
    """Runs merge only on the same footing (one model id is one model everywhere); a record seen in
    two directories is a copy, not a session."""
    if len(snaps) < 2:
        return []
    found: list[Offence] = []
    first = snaps[0]
    reference = _comparable(first.plan)
    for snap in snaps[1:]:
        mine = _comparable(snap.plan)
        for name in COMPATIBLE_FIELDS:
            if mine[name] != reference[name]:
                why = f"cannot merge with {first.run.path}: {name} differs ({mine[name]!r} vs {reference[name]!r})"
                found.append(Offence(run=str(snap.run.path), item="plan", why=why))
    identities: dict[str, tuple[str, object]] = {}
    for snap in snaps:
        for model, identity in snap.plan.model_identities.items():
            origin, known = identities.setdefault(model, (str(snap.run.path), identity))
            if known != identity:
                why = f"cannot merge with {origin}: model {model} is called or priced otherwise there"
                found.append(Offence(run=str(snap.run.path), item="plan", why=why))
    seen: dict[tuple[str, str], str] = {}
    for snap in snaps:
        for _, record in snap.records:
            origin = seen.setdefault((record.invocation, record.item), str(snap.run.path))
            if origin != str(snap.run.path):
                why = f"the same record is also in {origin} (a copied run?)"
                found.append(Offence(run=str(snap.run.path), item=record.item, why=why))
    return found


def check(snaps: list[RunSnapshot]) -> None:
    """Raise GateRefusal listing every offence across the runs, or return when all is in order."""
    offences = [offence for snap in snaps for offence in run_offences(snap)] + merge_offences(snaps)
    if offences:
        raise GateRefusal(offences)
