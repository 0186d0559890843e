"""From re-verified certificates and item records to the leaderboard's figures: per session, per
model, per bug. How each figure is counted (the choices a reader needs to trust them):

- A **bug** is a rule (as pred derived it) with at least one accepted, re-verified certificate.
  The same rule in many sessions or merged runs is one bug. A certificate of a violation in
  COUNTED_APART (pred crashing on a valid source) shows a **crash**: counted in its own columns and
  kept out of every bug figure, because a panic is a different class of failure than a wrong answer.
- **Sessions** are the planned items that ended in a result (passed or false alarm); budget skips
  never ran and are counted apart. Every per-session figure — the rate of sessions with a bug and its
  Wilson interval, bugs per session and its bootstrap interval, Bugs@k, the medians — is over them.
- **Recall** counts the known-bug registry's entries matched by any accepted certificate (crashes
  included: the registry lists crashes too), out of all its entries; a bug or crash matching no entry
  is a **candidate** to report upstream (listed with its certificates, so the registry can grow).
  It is shown apart on the entries **disclosed** (publicly reported as of the registry's date) and
  **undisclosed** (found here): a model trained on the public reports may recall rather than find
  the first kind. When a model's settings give its training cutoff, recall on the entries disclosed
  after it is shown apart too.
- On a run on a **minted bug pool**, every accepted certificate is verified on the pristine build too
  (report/minted.py): those it accepts are the real bugs, and only they count towards the recall of
  the registry and the candidates; those it rejects on a minted rule are minted finds, counted as the
  recall of the pool (found k of N, and per difficulty band). Every other bug figure counts the bugs of
  the build the sessions ran on, both kinds together.
- **False alarms** are rejected certificates; a false-alarm session has at least one. A certificate
  the verifier could not decide within its limits (inconclusive) is verified again by the report with
  longer limits and counted by that answer (a bug, a false alarm); still undecided, it is an
  **unconfirmed claim** (verify/claims.py): shown apart as "undecided", never a bug, and counted with
  the false alarms in the false-alarm rate, the precision and the ranking, so that hiding a false
  claim in an undecidable instance gains nothing. A verifier error is predbench's fault, never the
  model's.
- **Dollars, tokens and calls** are those of the sessions with a result; money that bought no result
  (infrastructure failures re-run later, sessions of crashed workers) comes from the ledger, apart.
- **Baselines** (`baseline/...`: no model, random differential testing with pred alone) are scored
  and ranked like any model, under the same limits, and labelled "baseline (no model)" wherever a
  row shows: the floor the models are read against. They spend no dollars (so no $ per bug).
- **Ranking**: by Bugs@k at the k every model with a session reached (the fewest sessions among them),
  then by the rate of sessions with a bug, then by fewer unconfirmed claims (false alarms and
  undecided); models equal on all three share
  a rank and are listed by lower spend, then by name. Models without a session rank last.
"""

import hashlib
import json
import os
import statistics
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import NamedTuple

from pytest_predbench.report import minted, stats
from pytest_predbench.report.model import (
    CertificateLink,
    Finding,
    Method,
    ModelRow,
    Recall,
    RecallPart,
    RuleRow,
    SessionRow,
)
from pytest_predbench.report.trajectory import recorded_steps
from pytest_predbench.session import baseline
from pytest_predbench.session.protocol import StopKind
from pytest_predbench.state.audit import RunSnapshot
from pytest_predbench.state.entrants import Entrant
from pytest_predbench.state.ledger import ChargeKind
from pytest_predbench.state.records import ItemRecord, ItemStatus
from pytest_predbench.verify.certificate import Certificate, Violation
from pytest_predbench.verify.claims import Tally
from pytest_predbench.verify.known_bugs import KnownBug, Registry, load_registry
from pytest_predbench.verify.pool import Pool
from pytest_predbench.verify.verdict import Outcome, Verdict

Outcomes = dict[tuple[int, str, int], Outcome]
"""(run, item, certificate number) -> the outcome the report's own verification settled on."""

COUNTED_APART = frozenset({"crash"})
"""Violation kinds counted in their own columns, outside every bug figure."""


class Accepted(NamedTuple):
    """One certificate that survived re-verification, and where it came from."""

    run: int
    item: str
    n: int
    """Its place (from 1) among the certificates of its session."""
    model: str
    session: str
    """The item, prefixed with its run's directory name when several runs merge."""
    certificate: Certificate
    verdict: Verdict
    origin: str | None = None
    """On a pool run: what the pristine build makes of it (report/minted.py); None on the version's own."""
    minted: tuple[str, ...] = ()
    """On a pool run: the minted bugs whose rules include its rule."""


def canonical_json(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def source_digest(certificate: Certificate) -> str:
    return hashlib.sha256(canonical_json(certificate.source.model_dump(mode="json")).encode()).hexdigest()


def rule_of(verdict: Verdict) -> str:
    return verdict.rule or " -> ".join(verdict.reduction_path) or "(rule not named)"


def is_crash(verdict: Verdict) -> bool:
    return verdict.violation is not None and verdict.violation.value in COUNTED_APART


def known_bugs(certificate: Certificate, version: str) -> list[str]:
    """The ids in `version`'s registry of the rule this certificate exercises (empty: not a known bug)."""
    source, target = certificate.source, certificate.target
    return [bug.id for bug in load_registry(version).find(source.type, source.variant, target.type, target.variant)]


def known_of(entry: Accepted, version: str) -> list[str]:
    """The registry ids an accepted certificate counts for: on a pool run only a real bug's (one the
    pristine build accepts too), since a minted find on a rule with a known bug is not that bug."""
    return known_bugs(entry.certificate, version) if entry.origin in (None, minted.REAL) else []


def minted_of(entry: Accepted) -> list[str]:
    """The minted bugs an accepted certificate found: its rule's, when the pristine build rejects it."""
    return list(entry.minted) if entry.origin == minted.MINTED else []


class Links:
    """Relative links from the directory a report is written to into the run directories."""

    def __init__(self, out: Path):
        self.out = Path(out).resolve()

    def to(self, path: Path) -> str:
        return Path(os.path.relpath(Path(path).resolve(), self.out)).as_posix()

    def into(self, snap: RunSnapshot, relative: str | None) -> str | None:
        """A link to a file the run names by a relative path, or None when the run does not have it."""
        if not relative:
            return None
        path = snap.run.inside(relative)
        return self.to(path) if path is not None and path.is_file() else None


@dataclass
class Session:
    """One item record with its re-verified certificates, as every figure reads it."""

    run: int
    snap: RunSnapshot
    record: ItemRecord
    accepted: list[Accepted] = field(default_factory=list)
    outcomes: dict[int, Outcome] = field(default_factory=dict)
    """Certificate number -> the report's own outcome, where it verified the certificate again."""

    def outcome(self, n: int, verdict: Verdict) -> Outcome:
        """The certificate's outcome as the report counts it: its own verification's, else the record's."""
        return self.outcomes.get(n, verdict.outcome)

    def counted(self, outcome: Outcome) -> int:
        return sum(self.outcome(n, v) is outcome for n, v in enumerate(self.record.verdicts, 1))

    @property
    def tally(self) -> Tally:
        """Its claims as the report settled them (verify/claims.py)."""
        return Tally.of(self.outcome(n, v) for n, v in enumerate(self.record.verdicts, 1))

    @property
    def is_result(self) -> bool:
        return self.record.status.is_result and self.record.result is not None

    @property
    def bugs(self) -> set[str]:
        return {rule_of(a.verdict) for a in self.accepted if not is_crash(a.verdict)}

    @property
    def crashes(self) -> set[str]:
        return {rule_of(a.verdict) for a in self.accepted if is_crash(a.verdict)}

    @property
    def known(self) -> set[str]:
        return {bug for a in self.accepted for bug in known_of(a, self.snap.plan.pred_version)}

    @property
    def minted(self) -> set[str]:
        return {bug for a in self.accepted for bug in minted_of(a)}


def sessions_of(snaps: list[RunSnapshot], accepted: list[Accepted], outcomes: Outcomes | None = None) -> list[Session]:
    """Every planned item's record, by run, model and session number, with its accepted certificates
    and the outcomes the report settled on."""
    settled: dict[tuple[int, str], dict[int, Outcome]] = {}
    for (run, item, n), outcome in (outcomes or {}).items():
        settled.setdefault((run, item), {})[n] = outcome
    by_item: dict[tuple[int, str], list[Accepted]] = {}
    for entry in accepted:
        by_item.setdefault((entry.run, entry.item), []).append(entry)
    found = []
    for n, snap in enumerate(snaps):
        records = snap.by_item()
        for key, _ in sorted(snap.planned.items(), key=lambda entry: (entry[1].account, entry[1].session)):
            if key in records:
                found.append(Session(n, snap, records[key], by_item.get((n, key), []), settled.get((n, key), {})))
    return found


# -- per session ------------------------------------------------------------------------------


def session_row(session: Session, links: Links) -> SessionRow:
    record, snap = session.record, session.snap
    result = record.result if session.is_result else None
    accounting = result.accounting if result else None
    accepted = {a.n: a for a in session.accepted}
    certificate_links = []
    if result is not None:
        for n, (certificate, verdict) in enumerate(zip(result.certificates, record.verdicts, strict=True), 1):
            files = record.certificate_files[n - 1] if n <= len(record.certificate_files) else None
            again = accepted.get(n)
            if again is not None:
                known = known_of(again, snap.plan.pred_version)
            else:
                known = (
                    known_bugs(certificate, snap.plan.pred_version)
                    if verdict.accepted and not minted.planned_pool(snap.plan)
                    else []
                )
            certificate_links.append(
                CertificateLink(
                    n=n,
                    accepted=verdict.accepted,
                    outcome=session.outcome(n, verdict).value,
                    violation=verdict.violation.value if verdict.violation else None,
                    rule=rule_of(again.verdict) if again else verdict.rule,
                    reason=verdict.reason,
                    certificate=links.into(snap, files.certificate) if files else None,
                    verdict=links.into(snap, files.verdict) if files else None,
                    known_bugs=known,
                    origin=again.origin if again else None,
                    minted_bugs=list(again.minted) if again else [],
                )
            )
    return SessionRow(
        run=session.run,
        model=record.model,
        runner=record.runner,
        entrant=record.account,
        agent_version=snap.plan.agent_version(record.runner),
        label=baseline.label(record.model),
        session=record.session,
        item=record.item,
        status=record.status.value,
        stop_reason=result.stop.kind.value if result else None,
        stop_detail=(result.stop.detail if result else record.reason)[:300],
        model_calls=accounting.model_calls if accounting else 0,
        pred_calls=accounting.pred_calls if accounting else 0,
        prompt_tokens=accounting.prompt_tokens if accounting else 0,
        cached_tokens=accounting.cached_tokens if accounting else 0,
        cache_write_tokens=accounting.cache_write_tokens if accounting else 0,
        completion_tokens=accounting.completion_tokens if accounting else 0,
        reasoning_tokens=accounting.reasoning_tokens if accounting else 0,
        dollars=record.spent if result else 0.0,
        earlier_dollars=record.earlier_spent,
        wall_seconds=accounting.wall_seconds if accounting else 0.0,
        steps=recorded_steps(snap.run, record),
        finished_at=record.finished_at.isoformat(),
        certificates=len(record.verdicts) if result else 0,
        accepted=session.counted(Outcome.ACCEPTED) if result else 0,
        rejected=session.counted(Outcome.REJECTED) if result else 0,
        inconclusive=session.counted(Outcome.INCONCLUSIVE) if result else 0,
        bugs=sorted(session.bugs),
        crashes=sorted(session.crashes),
        links=certificate_links,
        trajectory=links.into(snap, result.trajectory_path) if result else None,
        record=links.to(snap.run.item_record(record.item)),
    )


# -- per model ----------------------------------------------------------------------------------


def _median(values: list[float]) -> float | None:
    return float(statistics.median(values)) if values else None


def _counts(keys: list[str], every: list[str]) -> dict[str, int]:
    counted = dict.fromkeys(every, 0)
    for key in keys:
        counted[key] = counted.get(key, 0) + 1
    return counted


def training_cutoff(model: str, snaps: list[RunSnapshot]) -> date | None:
    """The model's training cutoff as its runs' plans recorded it from the model settings."""
    for snap in snaps:
        identity = snap.plan.model_identities.get(model)
        if identity is not None and identity.training_cutoff is not None:
            return identity.training_cutoff
    return None


def _part(bugs: list[KnownBug], found: set[str]) -> RecallPart:
    return RecallPart(
        found=sum(b.id in found for b in bugs), known=len(bugs), ids=sorted(b.id for b in bugs if b.id in found)
    )


def recall(registry: Registry, found: list[str], cutoff: date | None = None) -> Recall:
    """Found k of the registry's N, and apart by disclosure (and after `cutoff`, when given)."""
    rule_of_id = {bug.id: bug.rule for bug in registry.bugs}
    mine = set(found)
    return Recall(
        found=len(mine),
        known=len(registry.bugs),
        rules=sorted({rule_of_id[bug] for bug in mine}),
        ids=sorted(mine),
        disclosed=_part([b for b in registry.bugs if b.disclosure.status == "disclosed"], mine),
        undisclosed=_part([b for b in registry.bugs if b.disclosure.status == "undisclosed"], mine),
        training_cutoff=cutoff,
        after_cutoff=_part([b for b in registry.bugs if b.disclosed_after(cutoff)], mine) if cutoff else None,
    )


def model_row(entrant: Entrant, snaps: list[RunSnapshot], mine: list[Session], pool: Pool | None = None) -> ModelRow:
    """The figures of one entrant (an agent and a model) over its sessions in every run (`pool`: the
    minted bug pool they stood on, whose recall it adds)."""
    model = entrant.label
    theirs = [s for s in snaps if model in s.plan.accounts]
    results = [s for s in mine if s.is_result]
    n = len(results)
    records = [s.record for s in results]
    accounting = [r.result.accounting for r in records if r.result]
    session_bugs = [s.bugs for s in results]
    bugs = sorted(set().union(*session_bugs)) if session_bugs else []
    crashes = sorted({c for s in results for c in s.crashes})
    accepted = [a for s in results for a in s.accepted]
    with_bug = sum(bool(b) for b in session_bugs)
    version = snaps[0].plan.pred_version  # merged runs share it (report/gate.py)
    registry = load_registry(version)
    found_known = sorted({bug for s in results for bug in s.known})
    known_rules = {rule_of(a.verdict) for a in accepted if known_of(a, version)}
    found = set(bugs) | set(crashes)
    if pool is not None:
        found = {rule_of(a.verdict) for a in accepted if a.origin == minted.REAL}
    certificates = sum(len(r.verdicts) for r in records)
    claims = sum((s.tally for s in results), Tally())
    dollars = round(sum(r.spent for r in records), 12)
    prompt = sum(a.prompt_tokens for a in accounting)
    completion = sum(a.completion_tokens for a in accounting)
    no_result = sum(
        c.dollars for s in snaps for c in s.ledger.charges if c.model == model and c.kind is not ChargeKind.RESULT
    )
    per_session = [float(len(b)) for b in session_bugs]
    return ModelRow(
        rank=0,
        model=model,
        runner=entrant.agent,
        agent_version=next((v for s in theirs if (v := s.plan.agent_version(entrant.agent))), None),
        model_id=entrant.model,
        label=baseline.label(entrant.model),
        sessions=n,
        sessions_planned=sum(s.plan.options.sessions for s in theirs),
        sessions_skipped=sum(s.record.status is ItemStatus.SKIPPED_BUDGET for s in mine),
        sessions_with_bug=with_bug,
        bug_rate=with_bug / n if n else None,
        bug_rate_ci=stats.wilson(with_bug, n),
        bugs_per_session=sum(per_session) / n if n else None,
        bugs_per_session_ci=stats.bootstrap_mean_ci(per_session),
        bugs_at_k=stats.bugs_at_k_curve(session_bugs),
        bugs_at_k_ci=stats.bugs_at_k_band(session_bugs),
        verified_bugs=len(bugs),
        rules=bugs,
        recall=recall(registry, found_known, training_cutoff(entrant.model, snaps)),
        candidates=sorted(found - known_rules),
        crashes=crashes,
        crash_sessions=sum(bool(s.crashes) for s in results),
        violations=_counts(
            [a.verdict.violation.value for a in accepted if a.verdict.violation], [v.value for v in Violation]
        ),
        accepted_certificates=len(accepted),
        certificates=certificates,
        false_alarms=claims.rejected,
        false_alarm_sessions=sum(s.tally.rejected > 0 for s in results),
        inconclusive=claims.undecided,
        unconfirmed=claims.unconfirmed,
        false_alarm_rate=claims.false_alarm_rate,
        precision=claims.precision,
        dollars=dollars,
        dollars_no_result=round(no_result, 12),
        dollars_per_bug=dollars / len(bugs) if bugs else None,
        median_dollars=_median([r.spent for r in records]),
        median_model_calls=_median([a.model_calls for a in accounting]),
        median_pred_calls=_median([a.pred_calls for a in accounting]),
        median_wall_seconds=_median([a.wall_seconds for a in accounting]),
        prompt_tokens=prompt,
        completion_tokens=completion,
        tokens=prompt + completion,
        model_calls=sum(a.model_calls for a in accounting),
        pred_calls=sum(a.pred_calls for a in accounting),
        wall_seconds=sum(a.wall_seconds for a in accounting),
        stop_reasons=_counts([r.result.stop.kind.value for r in records if r.result], [k.value for k in StopKind]),
        bugs_per_dollar=len(bugs) / dollars if dollars else None,
        bugs_per_million_tokens=len(bugs) / (prompt + completion) * 1e6 if prompt + completion else None,
        **(_pool_figures(pool, results, accepted) if pool is not None else {}),
    )


def _pool_figures(pool: Pool, results: list[Session], accepted: list[Accepted]) -> dict:
    """ModelRow's pool fields: the minted recall, the real bugs apart, and what is neither."""
    found = {bug for s in results for bug in s.minted}
    return dict(
        minted=minted.recall(pool, found, list({rule_of(a.verdict) for a in accepted if minted_of(a)})),
        real_bugs=sorted({rule_of(a.verdict) for a in accepted if a.origin == minted.REAL}),
        unattributed=sorted({rule_of(a.verdict) for a in accepted if a.origin == minted.UNATTRIBUTED}),
        undecided_pristine=sum(a.origin == minted.UNDECIDED for a in accepted),
    )


def rank_k(rows: list[ModelRow]) -> int:
    """The k every model with a session reached: Bugs@k compares them on equal footing."""
    return min((row.sessions for row in rows if row.sessions), default=0)


def ranked(rows: list[ModelRow]) -> tuple[list[ModelRow], int]:
    """The rows in rank order, with the k they were ranked at."""
    k = rank_k(rows)

    def merit(row: ModelRow) -> tuple[float, float, int]:
        if not row.sessions:
            return (-1.0, -1.0, 0)
        return (round(row.bugs_at_k[k - 1], 9), round(row.bug_rate or 0.0, 9), -(row.false_alarms + row.inconclusive))

    rows = sorted(rows, key=lambda r: (tuple(-m for m in merit(r)), r.dollars, r.model))
    for row in rows:
        row.rank = 1 + sum(merit(other) > merit(row) for other in rows)
    return rows, k


def method(k: int, version: str) -> Method:
    registry = load_registry(version)
    return Method(
        rank_k=k,
        bootstrap_seed=stats.BOOTSTRAP_SEED,
        bootstrap_resamples=stats.BOOTSTRAP_RESAMPLES,
        alpha=stats.ALPHA,
        registry_pred_version=registry.pred_version,
        registry_size=len(registry.bugs),
    )


# -- per bug ------------------------------------------------------------------------------------


def rule_rows(sessions: list[Session], findings: list[Finding]) -> list[RuleRow]:
    """Every bug and crash found, with the sessions of each model that found it."""
    rows: dict[tuple[str, bool], RuleRow] = {}
    real: dict[tuple[str, bool], bool] = {}
    for session in sessions:
        for crash, names in ((False, session.bugs), (True, session.crashes)):
            for name in names:
                row = rows.setdefault(
                    (name, crash),
                    RuleRow(
                        bug=name + (" (crash)" if crash else ""),
                        rule=name,
                        crash=crash,
                        known=[],
                        sessions={},
                        findings=0,
                    ),
                )
                row.sessions[session.record.account] = row.sessions.get(session.record.account, 0) + 1
                mine = [a for a in session.accepted if rule_of(a.verdict) == name and is_crash(a.verdict) == crash]
                row.known = sorted(
                    set(row.known) | {bug for a in mine for bug in known_of(a, session.snap.plan.pred_version)}
                )
                row.minted = sorted(set(row.minted) | {bug for a in mine for bug in minted_of(a)})
                if any(a.origin is not None for a in mine):  # a pool run: real only if the pristine build agrees
                    real[(name, crash)] = real.get((name, crash), False) or any(a.origin == minted.REAL for a in mine)
    for key, row in rows.items():
        row.findings = sum(f.rule == row.rule for f in findings)
        row.real = real.get(key, True)
    return sorted(rows.values(), key=lambda r: (r.crash, r.rule))


def findings(accepted: list[Accepted], snaps: list[RunSnapshot], links: Links) -> list[Finding]:
    """Identical certificates (same rule, same canonical source instance) grouped into one finding."""
    groups: dict[tuple[str, str], list[Accepted]] = {}
    for entry in accepted:
        groups.setdefault((rule_of(entry.verdict), source_digest(entry.certificate)), []).append(entry)
    found = []
    for (rule, digest), entries in sorted(groups.items()):
        files = []
        for e in entries:
            record = snaps[e.run].by_item()[e.item]
            if e.n <= len(record.certificate_files):
                link = links.into(snaps[e.run], record.certificate_files[e.n - 1].certificate)
                if link:
                    files.append(link)
        found.append(
            Finding(
                rule=rule,
                source_type=entries[0].certificate.source.type,
                source_sha256=digest,
                violations=sorted({e.certificate.violation.value for e in entries}),
                certificates=len(entries),
                models=sorted({e.model for e in entries}),
                sessions=sorted({e.session for e in entries}),
                known_bugs=known_of(entries[0], snaps[entries[0].run].plan.pred_version),
                origin=entries[0].origin,
                minted_bugs=minted_of(entries[0]),
                links=files,
            )
        )
    return found
