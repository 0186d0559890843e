"""Where a run stands, per model: what is done, running, skipped, failed on infrastructure and still
to run, what it found, why its sessions stopped, what it cost, and when it should end. Built from
the item records and the ledger (never from pytest's outcomes), so it reads the same live, after a
crash, a resume, or on a controller that saw none of the items run; the run's summary and
`predbench status` show it alike (report/tables.py). The live table a running benchmark prints
(run/live.py) fills the same figures from the reports it receives.
"""

from collections.abc import Iterable
from datetime import datetime

from pydantic import BaseModel, computed_field

from pytest_predbench.session import baseline
from pytest_predbench.state.ledger import Ledger
from pytest_predbench.state.plan import Plan
from pytest_predbench.state.records import ItemRecord, ItemStatus
from pytest_predbench.verify.claims import Tally


class ModelFigures(BaseModel):
    model: str
    planned: int
    done: int
    """Sessions with a result (passed or false alarm)."""
    skipped: int
    """Skipped: budget (terminal)."""
    infra: int
    """Not done: the last attempt ended in an infrastructure failure."""
    remaining: int
    verified_bugs: list[str]
    """Distinct rules with an accepted certificate of a wrong answer (bugs; crashes are apart)."""
    crashes: list[str] = []
    """Distinct rules with an accepted certificate of pred panicking on a valid source."""
    false_alarms: int
    inconclusive: int = 0
    """Undecided certificates: the verifier could not decide them within its limits. Unconfirmed claims,
    counted with the false alarms in `false_alarm_rate` and `precision`, unless the report's longer
    try decides them (verify/claims.py)."""
    confirmed: int = 0
    """Accepted certificates (bugs and crashes)."""
    spent: float
    cap: float | None
    reserved: float
    running: int = 0
    """Sessions in flight (open reservations whose owner runs)."""
    stop_reasons: dict[str, int] = {}
    """Sessions with a result per stop reason (only the reasons that occurred)."""
    eta_seconds: float | None = None
    """Seconds until the model's last remaining item should end, at the run's pace (None: unknown)."""

    @property
    def claims(self) -> Tally:
        """Its certificates as the run's verifier settled them: rates and precision come from here."""
        return Tally(confirmed=self.confirmed, rejected=self.false_alarms, undecided=self.inconclusive)

    @computed_field
    @property
    def false_alarm_rate(self) -> float | None:
        """Unconfirmed (rejected or undecided) over judged certificates (verify/claims.py)."""
        return self.claims.false_alarm_rate

    @computed_field
    @property
    def precision(self) -> float | None:
        """Accepted over judged certificates: an undecided one lowers it as a rejected one does."""
        return self.claims.precision


def runners_text(agents: list[str], models: list[str]) -> str:
    """The runners of a run's models, as a header says it: 'mini-swe', 'mini-swe, opencode, baseline
    (no model) for baseline/random', or only the baseline's when no model uses the plan's agents."""
    baselines = [model for model in models if baseline.is_baseline(model)]
    parts = list(agents) if len(baselines) < len(models) or not models else []
    parts += [f"{baseline.LABEL} for {model}" for model in baselines]
    return ", ".join(parts)


def stop_counts(records: Iterable[ItemRecord]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for record in records:
        if record.status.is_result and record.result is not None:
            kind = record.result.stop.kind.value
            counts[kind] = counts.get(kind, 0) + 1
    return dict(sorted(counts.items()))


def model_figures(plan: Plan, records: dict[str, ItemRecord], ledger: Ledger) -> list[ModelFigures]:
    rows = []
    for model in plan.accounts:  # one row per entrant, by its label
        mine = [r for r in records.values() if r.account == model]
        results = [r for r in mine if r.status.is_result]
        account = ledger.accounts[model]
        claims = sum((r.tally for r in results), Tally())
        rows.append(
            ModelFigures(
                model=model,
                planned=plan.options.sessions,
                done=len(results),
                skipped=sum(r.status is ItemStatus.SKIPPED_BUDGET for r in mine),
                infra=sum(r.status is ItemStatus.INFRA for r in mine),
                remaining=plan.options.sessions - sum(r.status.terminal for r in mine),
                verified_bugs=sorted({rule for r in results for rule in r.verified_rules}),
                crashes=sorted({rule for r in results for rule in r.crash_rules}),
                confirmed=claims.confirmed,
                false_alarms=claims.rejected,
                inconclusive=claims.undecided,
                spent=account.spent,
                cap=None if baseline.is_baseline(model) else account.cap,  # it spends nothing
                reserved=account.reserved,
                stop_reasons=stop_counts(results),
            )
        )
    return rows


def eta(plan: Plan, terminal: set[str], seconds_per_item: float | None) -> dict[str, float | None]:
    """Per model, the seconds until its last remaining item should end: the items still to run, in
    plan order, up to and including that one, at the run's pace (items finished per second of wall
    time, so it already counts the parallel workers). 0 when the model has none left."""
    remaining = [item.account for item in plan.items() if item.key not in terminal]
    found: dict[str, float | None] = {}
    for model in plan.accounts:
        if model not in remaining:
            found[model] = 0.0
        elif seconds_per_item is None:
            found[model] = None
        else:
            last = len(remaining) - remaining[::-1].index(model)
            found[model] = last * seconds_per_item
    return found


def pace_of(finished: list[datetime]) -> float | None:
    """Seconds per item from the moments items finished (None with fewer than two)."""
    if len(finished) < 2:
        return None
    ordered = sorted(finished)
    span = (ordered[-1] - ordered[0]).total_seconds()
    return span / (len(ordered) - 1) if span > 0 else None


def dollars(value: float | None) -> str:
    return "no cap" if value is None else f"${value:.4f}"


def duration(value: float | None) -> str:
    """12s, 4m05s, 1h02m; '—' when unknown, 'done' at zero."""
    if value is None:
        return "—"
    if value <= 0:
        return "done"
    seconds = round(value)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
