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

from pytest_predbench.report.minted import planned_pool
from pytest_predbench.state.audit import RunSnapshot, snapshot_faults
from pytest_predbench.state.ledger import Ledger
from pytest_predbench.state.plan import DOLLAR_EPSILON, Plan
from pytest_predbench.state.records import ItemRecord, ItemStatus


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
        elif record.status is ItemStatus.SKIPPED_BUDGET and (
            (losses := crowding_losses(snap.plan, snap.ledger, record.account)) is not None
        ):
            why = (
                f"skipped for budget after infrastructure losses of {record.account} (${losses:.4f} charged with no "
                f"result) used the room it needed: not a result of the model; raise the caps and run it: "
                f"pytest --resume-bench --run-dir={run} --budget D (more than ${snap.plan.caps.total or 0:.4f})"
            )
            found.append(Offence(run=run, item=key, why=why))
    found += [Offence(run=run, item=f.item, why=f.why) for f in snapshot_faults(snap, final=True)]
    order = {key: n for n, key in enumerate(snap.planned)}
    return sorted(dict.fromkeys(found), key=lambda o: order.get(o.item, len(order)))


def crowding_losses(plan: Plan, ledger: Ledger, model: str) -> float | None:
    """What infrastructure failures, interrupts and lost sessions cost `model`, when without them its
    cap (and the run's) would have held one more session; else None (no losses, or its budget ran
    out on results alone, as planned)."""
    caps, account, total = plan.caps, ledger.accounts.get(model), ledger.total
    if account is None or account.infra <= 0:
        return None
    for cap, spent, infra in ((caps.per_model, account.spent, account.infra), (caps.total, total.spent, total.infra)):
        if cap is not None and cap - (spent - infra) < caps.per_session - DOLLAR_EPSILON:
            return None
    return account.infra


def short_of_sessions(plan: Plan, records: dict[str, ItemRecord], ledger: Ledger, resume: str) -> list[str]:
    """One line per model that infrastructure losses left short of sessions (skipped for budget): the
    gate refuses it; the line says how to raise the caps (`resume`: the command that continues the run)."""
    lines = []
    for model in plan.accounts:
        skipped = [r.item for r in records.values() if r.account == model and r.status is ItemStatus.SKIPPED_BUDGET]
        losses = crowding_losses(plan, ledger, model) if skipped else None
        if losses is not None:
            lines.append(
                f"SHORT {model}: {len(skipped)} session(s) skipped for budget after infrastructure losses of "
                f"${losses:.4f} used its cap; not publishable until they run: {resume} --budget D "
                f"(more than ${plan.caps.total or 0:.4f})"
            )
    return lines


COMPATIBLE_FIELDS = ("fake", "pred", "prompt_hash", "limits")
"""What every merged run must share: the same pred and extractor, prompt and limits, and a FAKE run only
with FAKE runs. Their agents may differ: each (agent, model) is its own row (state/entrants.py)."""


def _comparable(plan: Plan) -> dict[str, object]:
    pred = plan.pred.model_dump(exclude={"path", "source_dir", "extractor_path"}) if plan.pred else None
    return {
        "fake": plan.fake is not None,
        "pred": pred,
        "prompt_hash": plan.prompt_hash,
        "limits": plan.limits.model_dump(mode="json"),
    }


def _footing(plan: Plan) -> str:
    """The build a run's sessions ran on, as a refusal names it."""
    if digest := planned_pool(plan):
        return f"bug pool {digest[:12]}"
    return f"no bug pool (pred {plan.pred_version}'s own build)"


def merge_offences(snaps: list[RunSnapshot]) -> list[Offence]:
    """Runs merge only on the same footing (one model id is one model everywhere); a record seen in
    two directories is a copy, not a session."""
    if len(snaps) < 2:
        return []
    found: list[Offence] = []
    first = snaps[0]
    reference = _comparable(first.plan)
    for snap in snaps[1:]:
        if snap.plan.pred_version != first.plan.pred_version:
            why = (
                f"cannot pool runs on different pred versions: {first.run.path} is on pred {first.plan.pred_version}, "
                f"this one on pred {snap.plan.pred_version}; put them side by side with --compare"
            )
            found.append(Offence(run=str(snap.run.path), item="plan", why=why))
            continue
        if planned_pool(snap.plan) != planned_pool(first.plan):
            why = (
                f"cannot pool runs on different bug pools: {first.run.path} is on {_footing(first.plan)}, "
                f"this one on {_footing(snap.plan)}; put them side by side with --compare"
            )
            found.append(Offence(run=str(snap.run.path), item="plan", why=why))
            continue
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
                dated = known.model_copy(update={"training_cutoff": identity.training_cutoff}) == identity
                otherwise = "given another training cutoff" if dated else "called or priced otherwise"
                why = f"cannot merge with {origin}: model {model} is {otherwise} there"
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
