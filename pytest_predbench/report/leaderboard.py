"""The leaderboard: what each model found, what it cost, computed only from runs the gate accepts.

Nothing is taken from a record on its word: every certificate recorded as accepted is verified
again with the pinned pred before it counts (identical certificates once), under the limits the
run's prompt promised (verify/reach.py). A certificate that this rejects, or verifies as another
rule, is an offence and the report refuses, naming the item: a record that does not reproduce means
the run's records cannot be trusted, and silently dropping it would hide the tampering. A
verification the verifier's limits cut short (inconclusive: a loaded machine, a long search) is no
such flip: it is tried once more with RETRY_FACTOR times the limits, and if still undecided the
certificate counts neither as a bug nor as a false alarm and is listed. Certificates the run left
inconclusive get the same longer try, and count by what it decides. A verifier error is predbench's
own fault: the report refuses until it is fixed. Rejected certificates are not re-run: a false alarm
can only lower its own model's standing. How the figures are then counted: report/scoring.py.

Several runs either merge into one leaderboard (`build`: the gate checks that their plans are
compatible, and a model's sessions pool across them) or are set side by side (`compare`: each run
gets its own leaderboard, whatever its plan; nothing is pooled).
"""

from collections.abc import Callable
from pathlib import Path

from pytest_predbench.files import CorruptStateError, read_model, write_model, write_text_atomic
from pytest_predbench.report import scoring
from pytest_predbench.report.frames import write_parquet
from pytest_predbench.report.gate import GateRefusal, Offence, check
from pytest_predbench.report.model import (
    Comparison,
    Leaderboard,
    PredManifest,
    Reverification,
    RunManifest,
    Undecided,
)
from pytest_predbench.report.pairwise import Sample, pairwise
from pytest_predbench.report.render import (
    render_comparison_html,
    render_comparison_markdown,
    render_html,
    render_markdown,
)
from pytest_predbench.report.results_csv import results_csv
from pytest_predbench.report.scoring import Accepted, Links
from pytest_predbench.report.session_pages import FOLDER, link_pages, write_session_pages
from pytest_predbench.state.audit import RunSnapshot, read_snapshot
from pytest_predbench.state.records import ItemRecord, ItemStatus
from pytest_predbench.state.rundir import RunDir
from pytest_predbench.verify import pin
from pytest_predbench.verify.certificate import Certificate
from pytest_predbench.verify.environment import EnvRecord, PredEnvironmentError, checked_record
from pytest_predbench.verify.pred import PredLimits
from pytest_predbench.verify.reach import RETRY_FACTOR, longer, verifier_limits
from pytest_predbench.verify.verdict import Verdict

JSON_NAME = "leaderboard.json"
MARKDOWN_NAME = "leaderboard.md"
HTML_NAME = "leaderboard.html"
CSV_NAME = "results.csv"
COMPARISON_NAMES = {"json": "comparison.json", "md": "comparison.md", "html": "comparison.html", "csv": CSV_NAME}

Verifier = Callable[..., Verdict]
"""`verifier(certificate, env)`, and `verifier(certificate, env, limits=...)` for the longer try."""


def _certificate_key(certificate: Certificate) -> str:
    return scoring.canonical_json(certificate.model_dump(mode="json"))


def default_verifier(certificate: Certificate, env: EnvRecord, limits: PredLimits | None = None) -> Verdict:
    from pytest_predbench.verify.verifier import verify

    return verify(certificate, record=env, limits=limits)


def _decided(verifier: Verifier, certificate: Certificate, env: EnvRecord, snap: RunSnapshot) -> tuple[Verdict, bool]:
    """The verdict under the run's own limits, or, when those cut it short, under RETRY_FACTOR times
    them; and whether the longer try was needed."""
    first = verifier(certificate, env)
    if not first.inconclusive:
        return first, False
    return verifier(certificate, env, limits=longer(verifier_limits(snap.plan.limits.command_timeout_s))), True


def _session_name(snap: RunSnapshot, record: ItemRecord, merged: bool) -> str:
    return f"{snap.run.path.name}:{record.item}" if merged else record.item


def _results(snap: RunSnapshot) -> list[ItemRecord]:
    return [r for _, r in snap.records if r.status.is_result]


def _pred_for(snaps: list[RunSnapshot], needed: bool) -> tuple[EnvRecord | None, list[Offence]]:
    """The pinned pred, checked, and the same one every run was verified with."""
    if not needed:
        return None, []
    try:
        env = checked_record(version=snaps[0].plan.pred_version)  # merged runs share it (report/gate.py)
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


def reverify(
    snaps: list[RunSnapshot], verifier: Verifier = default_verifier
) -> tuple[list[Accepted], Reverification, scoring.Outcomes]:
    """Verify again every certificate recorded as accepted or inconclusive; an accepted one that is now
    rejected (or verifies as another rule) refuses the report. Returns the accepted certificates, the
    summary, and the outcome the report settled on for every certificate it verified."""
    merged = len(snaps) > 1
    claimed = [
        (run, snap, record, n, certificate, verdict)
        for run, snap in enumerate(snaps)
        for record in _results(snap)
        for n, (certificate, verdict) in enumerate(zip(record.result.certificates, record.verdicts, strict=True), 1)
        if verdict.accepted or verdict.inconclusive
    ]
    env, offences = _pred_for(snaps, needed=bool(claimed))
    if offences:
        raise GateRefusal(offences)
    cache: dict[tuple[str, float], tuple[Verdict, bool]] = {}
    accepted: list[Accepted] = []
    outcomes: scoring.Outcomes = {}
    undecided: list[Undecided] = []
    for run, snap, record, n, certificate, verdict in claimed:
        key = (_certificate_key(certificate), snap.plan.limits.command_timeout_s)
        if key not in cache:
            cache[key] = _decided(verifier, certificate, env, snap)
        again, _ = cache[key]
        where = dict(run=str(snap.run.path), item=record.item)
        outcomes[(run, record.item, n)] = again.outcome
        if again.error:
            offences.append(
                Offence(
                    **where, why=f"certificate {n}: the verifier failed on it, a fault of predbench: {again.reason}"
                )
            )
        elif again.inconclusive:
            undecided.append(
                Undecided(
                    run=run,
                    item=record.item,
                    n=n,
                    model=record.model,
                    recorded=verdict.outcome.value,
                    reason=again.reason,
                )
            )
        elif verdict.accepted and not again.accepted:
            offences.append(
                Offence(
                    **where,
                    why=(
                        f"certificate {n} was recorded as accepted ({verdict.rule}) but re-verification "
                        f"with pred {env.pred_version} rejects it: {again.reason}"
                    ),
                )
            )
        elif verdict.accepted and again.rule != verdict.rule:
            offences.append(
                Offence(
                    **where,
                    why=(
                        f"certificate {n} was recorded as rule {verdict.rule!r}, re-verification derives {again.rule!r}"
                    ),
                )
            )
        elif again.accepted:
            session = _session_name(snap, record, merged)
            accepted.append(Accepted(run, record.item, n, record.model, session, certificate, again))
        # else: inconclusive in the run, rejected by the longer try: a false alarm (scoring counts it)
    if offences:
        raise GateRefusal(offences)
    summary = Reverification(
        pred_version=env.pred_version if env else None,
        pred_sha256=env.pred_sha256 if env else None,
        certificates=len(claimed),
        distinct=len(cache),
        cpu_seconds=verifier_limits(snaps[0].plan.limits.command_timeout_s).cpu_s if snaps else None,
        retry_factor=RETRY_FACTOR,
        retried=sum(retried for _, retried in cache.values()),
        inconclusive=undecided,
    )
    return accepted, summary, outcomes


def run_manifest(snap: RunSnapshot, links: Links) -> RunManifest:
    plan = snap.plan
    pred = plan.pred
    return RunManifest(
        path=links.to(snap.run.path),
        plan_digest=snap.digest,
        runner=plan.options.runner,
        models=plan.models,
        sessions=plan.options.sessions,
        budget=plan.caps,
        cap_raises=plan.raises,
        limits=plan.limits,
        pred_version=plan.pred_version,
        pred=PredManifest(**pred.model_dump(include=set(PredManifest.model_fields))) if pred else None,
        prompt_hash=plan.prompt_hash,
        packages=plan.packages,
        model_identities=plan.model_identities,
        model_settings_sha256=plan.model_settings_sha256,
    )


def _score(
    snaps: list[RunSnapshot],
    accepted: list[Accepted],
    reverification: Reverification,
    outcomes: scoring.Outcomes,
    out: Path,
) -> Leaderboard:
    links = Links(out)
    sessions = scoring.sessions_of(snaps, accepted, outcomes)
    models = sorted({model for snap in snaps for model in snap.plan.models})
    rows, k = scoring.ranked(
        [scoring.model_row(m, snaps, [s for s in sessions if s.record.model == m]) for m in models]
    )
    samples = [
        Sample(row.model, [len(s.bugs) for s in sessions if s.record.model == row.model and s.is_result])
        for row in rows
    ]
    findings = scoring.findings(accepted, snaps, links)
    runner = snaps[0].plan.options.runner
    board = Leaderboard(
        runner=runner,
        fake=runner == "fake",
        method=scoring.method(k),
        models=rows,
        pairwise=pairwise(samples),
        sessions=[scoring.session_row(s, links) for s in sessions],
        rules=scoring.rule_rows(sessions, findings),
        findings=findings,
        reverification=reverification,
        runs=[run_manifest(snap, links) for snap in snaps],
    )
    link_pages(board)
    return board


def compute(
    snaps: list[RunSnapshot],
    verifier: Verifier = default_verifier,
    out: Path | None = None,
    pred_version: str | None = None,
) -> Leaderboard:
    """Gate, re-verify (on the runs' own pred version; `pred_version`: refuse runs on another),
    count; links are relative to `out` (default: the first run's directory). Raises GateRefusal with
    every offence when the runs cannot be published."""
    check(snaps)
    elsewhere = [
        Offence(run=str(s.run.path), item="plan", why=f"the run is on pred {s.plan.pred_version}, not {pred_version}")
        for s in snaps
        if pred_version is not None and s.plan.pred_version != pred_version
    ]
    if elsewhere:
        raise GateRefusal(elsewhere)
    pin.select(snaps[0].plan.pred_version)  # its registry and its pred: the version the runs stand on
    accepted, reverification, outcomes = reverify(snaps, verifier)
    return _score(snaps, accepted, reverification, outcomes, out or snaps[0].run.path)


def build(
    paths: list[Path], verifier: Verifier = default_verifier, out: Path | None = None, pred_version: str | None = None
) -> Leaderboard:
    """The leaderboard of these run directories (CorruptStateError when one cannot be read)."""
    return compute([read_snapshot(path) for path in paths], verifier, out, pred_version)


def compare(
    paths: list[Path], out: Path, verifier: Verifier = default_verifier, pred_version: str | None = None
) -> Comparison:
    """Each run's own leaderboard, side by side, whatever their plans: gated one by one (every
    offence of every run is listed), never pooled. Pairs are (run, model) against (run, model)."""
    snaps = [read_snapshot(path) for path in paths]
    offences: list[Offence] = []
    boards = []
    for n, snap in enumerate(snaps, 1):
        try:
            boards.append(compute([snap], verifier, out, pred_version))
            link_pages(boards[-1], prefix=f"run{n}-")
        except GateRefusal as refusal:
            offences += refusal.offences
    if offences:
        raise GateRefusal(offences)
    samples = [
        Sample(
            f"run {n} (pred {board.runs[0].pred_version}): {row.model}",
            [len(s.bugs) for s in board.sessions if s.model == row.model and ItemStatus(s.status).is_result],
        )
        for n, board in enumerate(boards, 1)
        for row in board.models
    ]
    return Comparison(boards=boards, pairwise=pairwise(samples))


def write_leaderboard(out: Path, board: Leaderboard) -> dict[str, Path]:
    """leaderboard.json, .md, .html, results.csv, sessions.parquet and certificates.parquet in `out`, each
    written atomically, and a page per session in out/sessions/."""
    paths = {"json": out / JSON_NAME, "md": out / MARKDOWN_NAME, "html": out / HTML_NAME, "csv": out / CSV_NAME}
    write_model(paths["json"], board)
    write_text_atomic(paths["md"], render_markdown(board))
    write_text_atomic(paths["html"], render_html(board))
    write_text_atomic(paths["csv"], results_csv([board]))
    write_session_pages(out, board, HTML_NAME)
    paths |= _parquet(out, [run.path for run in board.runs])
    paths["pages"] = out / FOLDER
    return paths


def write_comparison(out: Path, comparison: Comparison) -> dict[str, Path]:
    """comparison.json, .md, .html and results.csv (every run's sessions) in `out`."""
    paths = {kind: out / name for kind, name in COMPARISON_NAMES.items()}
    write_model(paths["json"], comparison)
    write_text_atomic(paths["md"], render_comparison_markdown(comparison))
    write_text_atomic(paths["html"], render_comparison_html(comparison))
    write_text_atomic(paths["csv"], results_csv(comparison.boards))
    for board in comparison.boards:
        write_session_pages(out, board, COMPARISON_NAMES["html"])
    paths |= _parquet(out, [board.runs[0].path for board in comparison.boards])
    paths["pages"] = out / FOLDER
    return paths


def _parquet(out: Path, links: list[str]) -> dict[str, Path]:
    """The data layer's tables of the runs the board links to (none when its links were made for
    another directory than `out`: then there is nothing here to read them from)."""
    runs = [out / link for link in links]
    return write_parquet(out, runs) if all(RunDir(run).plan.is_file() for run in runs) else {}


def read_leaderboard(path: Path) -> Leaderboard:
    """leaderboard.json, validated against the model (CorruptStateError naming the file if not)."""
    return read_model(path, Leaderboard)


def read_comparison(path: Path) -> Comparison:
    return read_model(path, Comparison)
