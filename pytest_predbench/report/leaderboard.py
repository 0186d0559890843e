"""The leaderboard: what each model found, what it cost, computed only from runs the gate accepts.

How the figures are counted (the choices a reader needs to trust them):

- The primary metric is **verified bugs**: the number of distinct rules (as pred derived them)
  for which a model has at least one accepted certificate. The same rule found in many
  sessions, or in several merged runs, counts once per model.
- Nothing is taken from a record on its word: every certificate recorded as accepted is
  verified again with the pinned pred before it counts (identical certificates once). A
  certificate that no longer verifies, or verifies as another rule, is an offence and the
  report refuses, naming the item: a record that does not reproduce means the run's records
  cannot be trusted, and silently dropping it would hide the tampering. Rejected
  certificates are not re-run: a false alarm can only lower its own model's standing.
- **False alarms** are rejected certificates; the **false-alarm rate** is false alarms over
  all certificates the model submitted (None when it submitted none).
- **Sessions**: planned is the sum of the planned sessions over the merged runs, run is the
  sessions that ended in a result (passed or false alarm), skipped is the budget skips. After
  the gate no infrastructure failure is outstanding, so run + skipped = planned.
- **Dollars, tokens, model calls and pred calls** are those of the sessions that ended in a
  result, so every efficiency figure (bugs per dollar, per million tokens) divides over the
  same sessions. Money that bought no result (infrastructure failures re-run later, sessions
  of crashed workers) comes from the ledger and is shown apart as `dollars_no_result`.
- **Identical certificates** (same rule, same canonical source instance: its JSON with sorted
  keys, hashed) are grouped into one finding that lists the models and sessions that found it.
- **Ranking**: more verified bugs first, then fewer false alarms; models equal on both share a
  rank, and are listed by lower spend, then by name.
"""

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from pytest_predbench.files import CorruptStateError, read_model, write_model, write_text_atomic
from pytest_predbench.report.gate import GateRefusal, Offence, check
from pytest_predbench.report.model import (
    Finding,
    Leaderboard,
    ModelRow,
    PredManifest,
    Reverification,
    RuleRow,
    RunManifest,
)
from pytest_predbench.report.render import render_html, render_markdown
from pytest_predbench.state.audit import RunSnapshot, read_snapshot
from pytest_predbench.state.ledger import ChargeKind
from pytest_predbench.state.records import ItemRecord, ItemStatus
from pytest_predbench.verify.certificate import Certificate
from pytest_predbench.verify.environment import EnvRecord, PredEnvironmentError, checked_record
from pytest_predbench.verify.known_bugs import load_registry
from pytest_predbench.verify.verdict import Verdict

JSON_NAME = "leaderboard.json"
MARKDOWN_NAME = "leaderboard.md"
HTML_NAME = "leaderboard.html"

Verifier = Callable[[Certificate, EnvRecord], Verdict]


def canonical_json(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def source_digest(certificate: Certificate) -> str:
    return hashlib.sha256(canonical_json(certificate.source.model_dump(mode="json")).encode()).hexdigest()


def _certificate_key(certificate: Certificate) -> str:
    return canonical_json(certificate.model_dump(mode="json"))


def default_verifier(certificate: Certificate, env: EnvRecord) -> Verdict:
    from pytest_predbench.verify.verifier import verify

    return verify(certificate, record=env)


class _Accepted(NamedTuple):
    """One certificate that survived re-verification, and where it came from."""

    model: str
    session: str
    certificate: Certificate
    verdict: Verdict


def _session_name(snap: RunSnapshot, record: ItemRecord, merged: bool) -> str:
    return f"{snap.run.path.name}:{record.item}" if merged else record.item


def _results(snap: RunSnapshot) -> list[ItemRecord]:
    return [r for _, r in snap.records if r.status in (ItemStatus.PASSED, ItemStatus.FALSE_ALARM)]


def _pred_for(snaps: list[RunSnapshot], needed: bool) -> tuple[EnvRecord | None, list[Offence]]:
    """The pinned pred, checked, and the same one every run was verified with."""
    if not needed:
        return None, []
    try:
        env = checked_record()
    except (PredEnvironmentError, CorruptStateError, OSError) as exc:
        return None, [Offence(run=str(s.run.path), item="run", why=f"cannot re-verify: {exc}") for s in snaps[:1]]
    offences = []
    for snap in snaps:
        pred = snap.plan.pred
        if pred is None or (pred.version, pred.sha256) != (env.pred_version, env.pred_sha256):
            recorded = f"pred {pred.version} {pred.sha256[:12]}" if pred else "no pred"
            offences.append(
                Offence(
                    run=str(snap.run.path),
                    item="run",
                    why=f"planned with {recorded}, this machine has pred {env.pred_version} "
                    f"{env.pred_sha256[:12]}: cannot re-verify with the pinned pred",
                )
            )
    return env, offences


def reverify(snaps: list[RunSnapshot], verifier: Verifier = default_verifier) -> tuple[list[_Accepted], Reverification]:
    """Verify again every certificate recorded as accepted; any disagreement refuses the report."""
    merged = len(snaps) > 1
    claimed = [
        (snap, record, n, certificate, verdict)
        for snap in snaps
        for record in _results(snap)
        for n, (certificate, verdict) in enumerate(zip(record.result.certificates, record.verdicts, strict=True), 1)
        if verdict.accepted
    ]
    env, offences = _pred_for(snaps, needed=bool(claimed))
    if offences:
        raise GateRefusal(offences)
    cache: dict[str, Verdict] = {}
    accepted: list[_Accepted] = []
    for snap, record, n, certificate, verdict in claimed:
        key = _certificate_key(certificate)
        if key not in cache:
            cache[key] = verifier(certificate, env)
        again = cache[key]
        where = dict(run=str(snap.run.path), item=record.item)
        if not again.accepted:
            offences.append(
                Offence(
                    **where,
                    why=(
                        f"certificate {n} was recorded as accepted ({verdict.rule}) but re-verification "
                        f"with pred {env.pred_version} rejects it: {again.reason}"
                    ),
                )
            )
        elif again.rule != verdict.rule:
            offences.append(
                Offence(
                    **where,
                    why=(
                        f"certificate {n} was recorded as rule {verdict.rule!r}, re-verification derives {again.rule!r}"
                    ),
                )
            )
        else:
            session = _session_name(snap, record, merged)
            accepted.append(_Accepted(model=record.model, session=session, certificate=certificate, verdict=again))
    if offences:
        raise GateRefusal(offences)
    summary = Reverification(
        pred_version=env.pred_version if env else None,
        pred_sha256=env.pred_sha256 if env else None,
        certificates=len(claimed),
        distinct=len(cache),
    )
    return accepted, summary


def _rule_of(verdict: Verdict) -> str:
    return verdict.rule or " -> ".join(verdict.reduction_path) or "(rule not named)"


def _per_million(count: int, tokens: int) -> float | None:
    return count / tokens * 1e6 if tokens else None


def _model_rows(snaps: list[RunSnapshot], accepted: list[_Accepted]) -> list[ModelRow]:
    models = sorted({model for snap in snaps for model in snap.plan.models})
    rows = []
    for model in models:
        mine = [r for s in snaps for _, r in s.records if r.model == model]
        results = [r for r in mine if r.status in (ItemStatus.PASSED, ItemStatus.FALSE_ALARM)]
        rules = sorted({_rule_of(a.verdict) for a in accepted if a.model == model})
        certificates = sum(len(r.verdicts) for r in results)
        false_alarms = sum(r.false_alarms for r in results)
        dollars = round(sum(r.spent for r in results), 12)
        accounting = [r.result.accounting for r in results if r.result]
        prompt = sum(a.prompt_tokens for a in accounting)
        completion = sum(a.completion_tokens for a in accounting)
        no_result = sum(
            c.dollars for s in snaps for c in s.ledger.charges if c.model == model and c.kind is not ChargeKind.RESULT
        )
        rows.append(
            ModelRow(
                rank=0,
                model=model,
                verified_bugs=len(rules),
                rules=rules,
                accepted_certificates=sum(a.model == model for a in accepted),
                false_alarms=false_alarms,
                certificates=certificates,
                false_alarm_rate=false_alarms / certificates if certificates else None,
                sessions_planned=sum(s.plan.options.sessions for s in snaps if model in s.plan.models),
                sessions_run=len(results),
                sessions_skipped=sum(r.status is ItemStatus.SKIPPED_BUDGET for r in mine),
                dollars=dollars,
                dollars_no_result=round(no_result, 12),
                prompt_tokens=prompt,
                completion_tokens=completion,
                tokens=prompt + completion,
                model_calls=sum(a.model_calls for a in accounting),
                pred_calls=sum(a.pred_calls for a in accounting),
                bugs_per_dollar=len(rules) / dollars if dollars else None,
                bugs_per_million_tokens=_per_million(len(rules), prompt + completion),
            )
        )
    return _ranked(rows)


def _ranked(rows: list[ModelRow]) -> list[ModelRow]:
    rows = sorted(rows, key=lambda r: (-r.verified_bugs, r.false_alarms, r.dollars, r.model))
    for row in rows:
        row.rank = 1 + sum((o.verified_bugs, -o.false_alarms) > (row.verified_bugs, -row.false_alarms) for o in rows)
    return rows


def _known_bugs(certificate: Certificate) -> list[str]:
    source, target = certificate.source, certificate.target
    return [bug.id for bug in load_registry().find(source.type, source.variant, target.type, target.variant)]


def _findings(accepted: list[_Accepted]) -> list[Finding]:
    groups: dict[tuple[str, str], list[_Accepted]] = {}
    for entry in accepted:
        groups.setdefault((_rule_of(entry.verdict), source_digest(entry.certificate)), []).append(entry)
    return [
        Finding(
            rule=rule,
            source_type=entries[0].certificate.source.type,
            source_sha256=digest,
            violations=sorted({e.certificate.violation.value for e in entries}),
            certificates=len(entries),
            models=sorted({e.model for e in entries}),
            sessions=sorted({e.session for e in entries}),
            known_bugs=_known_bugs(entries[0].certificate),
        )
        for (rule, digest), entries in sorted(groups.items())
    ]


def _rule_rows(findings: list[Finding]) -> list[RuleRow]:
    rules = sorted({f.rule for f in findings})
    return [
        RuleRow(
            rule=rule,
            models=sorted({m for f in findings if f.rule == rule for m in f.models}),
            findings=sum(f.rule == rule for f in findings),
        )
        for rule in rules
    ]


def run_manifest(snap: RunSnapshot) -> RunManifest:
    plan = snap.plan
    pred = plan.pred
    return RunManifest(
        path=str(snap.run.path),
        plan_digest=snap.digest,
        runner=plan.options.runner,
        models=plan.models,
        sessions=plan.options.sessions,
        budget=plan.budget,
        limits=plan.limits,
        pred=PredManifest(**pred.model_dump(include=set(PredManifest.model_fields))) if pred else None,
        prompt_hash=plan.prompt_hash,
        packages=plan.packages,
        model_identities=plan.model_identities,
        model_settings_sha256=plan.model_settings_sha256,
    )


def compute(snaps: list[RunSnapshot], verifier: Verifier = default_verifier) -> Leaderboard:
    """Gate, re-verify, count. Raises GateRefusal with every offence when the runs cannot be published."""
    check(snaps)
    accepted, reverification = reverify(snaps, verifier)
    findings = _findings(accepted)
    runner = snaps[0].plan.options.runner
    return Leaderboard(
        runner=runner,
        fake=runner == "fake",
        models=_model_rows(snaps, accepted),
        rules=_rule_rows(findings),
        findings=findings,
        reverification=reverification,
        runs=[run_manifest(snap) for snap in snaps],
    )


def build(paths: list[Path], verifier: Verifier = default_verifier) -> Leaderboard:
    """The leaderboard of these run directories (CorruptStateError when one cannot be read)."""
    return compute([read_snapshot(path) for path in paths], verifier)


def write_leaderboard(out: Path, board: Leaderboard) -> dict[str, Path]:
    """leaderboard.json, .md and .html in `out`, each written atomically."""
    paths = {"json": out / JSON_NAME, "md": out / MARKDOWN_NAME, "html": out / HTML_NAME}
    write_model(paths["json"], board)
    write_text_atomic(paths["md"], render_markdown(board))
    write_text_atomic(paths["html"], render_html(board))
    return paths


def read_leaderboard(path: Path) -> Leaderboard:
    """leaderboard.json, validated against the model (CorruptStateError naming the file if not)."""
    return read_model(path, Leaderboard)
