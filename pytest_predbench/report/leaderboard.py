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

A run on a minted bug pool is verified again on the pool's minted build (the one its sessions ran
on), and every certificate that build accepts once more on the pristine build, to tell the planted
bugs from the version's real ones (report/minted.py); the pool is loaded from the plan and must be
the one the run was planned on. Each of its sessions gets the minted bugs' funnel (reached /
triggered / certified, report/funnel.py), triggered judged by the same verifier on the minted build.

Several runs either merge into one leaderboard (`build`: the gate checks that their plans are
compatible, and a model's sessions pool across them) or are set side by side (`compare`: each run
gets its own leaderboard, whatever its plan; nothing is pooled).
"""

import html
import re
from collections.abc import Callable
from pathlib import Path

from pytest_predbench.files import CorruptStateError, read_model, write_model, write_text_atomic
from pytest_predbench.report import funnel, minted, scoring
from pytest_predbench.report.frames import Origins, write_funnel_parquet, write_models_parquet, write_parquet
from pytest_predbench.report.gate import GateRefusal, Offence, check
from pytest_predbench.report.model import (
    LEADERBOARD_JSON,
    Comparison,
    Leaderboard,
    PredManifest,
    Reverification,
    RunManifest,
    Undecided,
    run_labels,
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
from pytest_predbench.verify import pool as pools
from pytest_predbench.verify.certificate import Certificate
from pytest_predbench.verify.environment import EnvRecord, PredEnvironmentError, checked_record, ground_record
from pytest_predbench.verify.pred import PredLimits
from pytest_predbench.verify.reach import RETRY_FACTOR, longer, verifier_limits
from pytest_predbench.verify.verdict import Verdict

JSON_NAME = LEADERBOARD_JSON
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
    return verifier(
        certificate,
        env,
        limits=longer(
            verifier_limits(snap.plan.limits.command_timeout_s, session_memory_mib=snap.plan.limits.memory_mib)
        ),
    ), True


def _session_name(snap: RunSnapshot, record: ItemRecord, merged: bool) -> str:
    return f"{snap.run.path.name}:{record.item}" if merged else record.item


def _results(snap: RunSnapshot) -> list[ItemRecord]:
    return [r for _, r in snap.records if r.status.is_result]


def _pred_for(
    snaps: list[RunSnapshot], needed: bool, pool: pools.Pool | None
) -> tuple[EnvRecord | None, list[Offence]]:
    """The build the runs stand on (their pool's minted one, else their version's own), checked, and
    the same one every run was verified with."""
    if not needed:
        return None, []
    version = snaps[0].plan.pred_version  # merged runs share it and their pool (report/gate.py)
    try:
        env = ground_record(version, str(pool.root) if pool else None)
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


class Pristine:
    """The pristine build of a pool run's version, asked once per distinct certificate: is what the
    minted build accepts a bug there too (report/minted.py)?"""

    def __init__(self, pool: pools.Pool, verifier: Verifier):
        self.pool, self.verifier = pool, verifier
        self.env: EnvRecord | None = None
        self.cache: dict[tuple[str, float], Verdict] = {}

    def attribute(self, entry: Accepted, snap: RunSnapshot, key: tuple[str, float]) -> tuple[Accepted, Offence | None]:
        """The entry with its origin and minted ids, or the offence that keeps the report from deciding."""
        where = dict(run=str(snap.run.path), item=entry.item)
        if self.env is None:
            try:
                self.env = checked_record(self.pool.version)
            except (PredEnvironmentError, CorruptStateError, OSError) as exc:
                return entry, Offence(**where, why=f"cannot verify on the pristine pred {self.pool.version}: {exc}")
        if key not in self.cache:
            self.cache[key] = _decided(self.verifier, entry.certificate, self.env, snap)[0]
        there = self.cache[key]
        if there.error:
            why = f"certificate {entry.n}: the verifier failed on it on the pristine build, a fault of predbench: "
            return entry, Offence(**where, why=why + there.reason)
        ids = minted.minted_ids(self.pool, entry.certificate)
        return entry._replace(origin=minted.origin(there, ids), minted=tuple(ids)), None


def reverify(
    snaps: list[RunSnapshot], verifier: Verifier = default_verifier, pool: pools.Pool | None = None
) -> tuple[list[Accepted], Reverification, scoring.Outcomes]:
    """Verify again every certificate recorded as accepted or inconclusive; an accepted one that is now
    rejected (or verifies as another rule) refuses the report. Returns the accepted certificates, the
    summary, and the outcome the report settled on for every certificate it verified. On a `pool`
    run (verified on its minted build), every accepted one is verified on the pristine build too."""
    merged = len(snaps) > 1
    claimed = [
        (run, snap, record, n, certificate, verdict)
        for run, snap in enumerate(snaps)
        for record in _results(snap)
        for n, (certificate, verdict) in enumerate(zip(record.result.certificates, record.verdicts, strict=True), 1)
        if verdict.accepted or verdict.inconclusive
    ]
    env, offences = _pred_for(snaps, needed=bool(claimed), pool=pool)
    if offences:
        raise GateRefusal(offences)
    cache: dict[tuple[str, float], tuple[Verdict, bool]] = {}
    pristine = Pristine(pool, verifier) if pool is not None else None
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
                    model=record.account,
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
            entry = Accepted(run, record.item, n, record.account, session, certificate, again)
            if pristine is not None:
                entry, offence = pristine.attribute(entry, snap, key)
                offences += [offence] if offence else []
            accepted.append(entry)
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
        pool=pool.label() if pool else None,
        pristine_sha256=pristine.env.pred_sha256 if pristine and pristine.env else None,
        pristine_certificates=len(pristine.cache) if pristine else 0,
    )
    return accepted, summary, outcomes


def run_manifest(snap: RunSnapshot, links: Links, pool: pools.Pool | None = None) -> RunManifest:
    plan = snap.plan
    pred = plan.pred
    return RunManifest(
        path=links.to(snap.run.path),
        run_id=snap.run_id,
        run_name=snap.run_name,
        plan_digest=snap.digest,
        runner=", ".join(plan.agents),
        agent_versions={agent: plan.agent_version(agent) for agent in plan.agents},
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
        pool_digest=minted.planned_pool(plan),
        pool=pool.label() if pool else None,
    )


def _score(
    snaps: list[RunSnapshot],
    accepted: list[Accepted],
    reverification: Reverification,
    outcomes: scoring.Outcomes,
    out: Path,
    pool: pools.Pool | None = None,
    verifier: Verifier = default_verifier,
) -> Leaderboard:
    links = Links(out)
    sessions = scoring.sessions_of(snaps, accepted, outcomes)
    entrants = sorted({e for snap in snaps for e in snap.plan.entrants}, key=lambda e: e.label)
    session_rows = [scoring.session_row(s, links) for s in sessions]
    model_rows = [
        scoring.model_row(e, snaps, [s for s in sessions if s.record.account == e.label], pool) for e in entrants
    ]
    if pool is not None:
        _funnels(snaps, sessions, session_rows, model_rows, pool, verifier)
    rows, k = scoring.ranked(model_rows)
    samples = [
        Sample(row.model, [len(s.bugs) for s in sessions if s.record.account == row.model and s.is_result])
        for row in rows
    ]
    findings = scoring.findings(accepted, snaps, links)
    plan = snaps[0].plan
    board = Leaderboard(
        runner=", ".join(plan.agents),
        fake=plan.fake is not None,
        method=scoring.method(k, snaps[0].plan.pred_version),
        models=rows,
        pairwise=pairwise(samples),
        sessions=session_rows,
        rules=scoring.rule_rows(sessions, findings),
        findings=findings,
        reverification=reverification,
        runs=[run_manifest(snap, links, pool) for snap in snaps],
        pool=minted.summary(pool) if pool else None,
    )
    link_pages(board)
    return board


def _funnels(
    snaps: list[RunSnapshot],
    sessions: list[scoring.Session],
    session_rows: list,
    model_rows: list,
    pool: pools.Pool,
    verifier: Verifier,
) -> None:
    """Each session row's funnel of the pool's minted bugs, and each model row's counts (report/funnel.py)."""
    trigger = funnel.Trigger(lambda: ground_record(snaps[0].plan.pred_version, str(pool.root)), verifier)
    try:  # the pool's minted build, checked only once a reached bug is to be tried
        for session, row in zip(sessions, session_rows, strict=True):
            row.funnel = funnel.session_funnel(session, pool, trigger)
    except (PredEnvironmentError, CorruptStateError, OSError) as exc:
        raise GateRefusal(
            [Offence(run=str(snaps[0].run.path), item="run", why=f"cannot judge the funnel: {exc}")]
        ) from None
    finally:
        trigger.close()
    for model in model_rows:
        mine = [row.funnel for row in session_rows if row.entrant == model.model and ItemStatus(row.status).is_result]
        model.funnel = funnel.counts(pool, mine)


def compute(
    snaps: list[RunSnapshot],
    verifier: Verifier = default_verifier,
    out: Path | None = None,
    pred_version: str | None = None,
) -> Leaderboard:
    """Gate, re-verify (on the runs' own pred version; `pred_version`: refuse runs on another),
    count; links are relative to `out` (default: the first run's directory). Raises GateRefusal with
    every offence when the runs cannot be published, PoolError when a run's bug pool is missing or
    changed."""
    check(snaps)
    elsewhere = [
        Offence(run=str(s.run.path), item="plan", why=f"the run is on pred {s.plan.pred_version}, not {pred_version}")
        for s in snaps
        if pred_version is not None and s.plan.pred_version != pred_version
    ]
    if elsewhere:
        raise GateRefusal(elsewhere)
    pool = minted.run_pool(snaps[0])  # merged runs share it and their version (report/gate.py)
    accepted, reverification, outcomes = reverify(snaps, verifier, pool)
    return _score(snaps, accepted, reverification, outcomes, out or snaps[0].run.path, pool, verifier)


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
            f"{label} ({_footing(board)}): {row.model}",
            [len(s.bugs) for s in board.sessions if s.entrant == row.model and ItemStatus(s.status).is_result],
        )
        for label, board in zip(run_labels(boards), boards, strict=True)
        for row in board.models
    ]
    return Comparison(boards=boards, pairwise=pairwise(samples))


def _footing(board: Leaderboard) -> str:
    """What a compared run stood on, in its pairs' labels: its pred version, and its pool if any."""
    pool = f", {minted.pool_name(board.pool.digest)}" if board.pool else ""
    return f"pred {board.runs[0].pred_version}{pool}"


def write_leaderboard(out: Path, board: Leaderboard) -> dict[str, Path]:
    """leaderboard.json, .md, .html, results.csv, sessions.parquet, certificates.parquet, models.parquet
    (and on a pool run funnel.parquet) in `out`, each written atomically, and a page per session in
    out/sessions/."""
    paths = {"json": out / JSON_NAME, "md": out / MARKDOWN_NAME, "html": out / HTML_NAME, "csv": out / CSV_NAME}
    write_model(paths["json"], board)
    write_text_atomic(paths["md"], render_markdown(board))
    write_text_atomic(paths["html"], render_html(board))
    write_text_atomic(paths["csv"], results_csv([board]))
    write_session_pages(out, board, HTML_NAME)
    paths |= _parquet(out, [run.path for run in board.runs], _origins([board]))
    paths["models.parquet"] = write_models_parquet(out, board)
    if board.pool is not None:
        paths["funnel.parquet"] = write_funnel_parquet(out, board)
    paths["pages"] = out / FOLDER
    return paths


STALE_MARK = "predbench-stale"
"""The id of the banner a refused report puts on the pages an earlier report left (found again, not doubled)."""


def mark_stale(out: Path, why: str) -> list[Path]:
    """Mark the leaderboard and comparison pages an earlier report left in `out` as stale: a refused
    report publishes nothing, and a page left as it was would read as the answer to this one. The
    pages stay (they are the last published result), each with a banner saying why it is not current.
    Returns the pages marked."""
    banner_text = f"STALE: a later report of this run was refused ({why}); this page is not its result."
    marked = []
    for name in (HTML_NAME, MARKDOWN_NAME, COMPARISON_NAMES["html"], COMPARISON_NAMES["md"]):
        page = out / name
        if not page.is_file():
            continue
        text = page.read_text(encoding="utf-8", errors="replace")
        if page.suffix == ".html":
            banner = f'<p id="{STALE_MARK}" style="background:#fdd;padding:.5em"><b>{html.escape(banner_text)}</b></p>'
            text = re.sub(rf'<p id="{STALE_MARK}".*?</p>\n?', "", text, flags=re.S)
            text = text.replace("<body>", f"<body>\n{banner}", 1)
        else:
            text = "\n".join(line for line in text.splitlines() if not line.startswith(f"> {STALE_MARK}:")) + "\n"
            text = f"> {STALE_MARK}: {banner_text}\n\n" + text.lstrip("\n")
        write_text_atomic(page, text)
        marked.append(page)
    return marked


def is_stale(page: Path) -> bool:
    """Whether mark_stale marked this page (its banner comes right after <body>, so the head suffices)."""
    with page.open(encoding="utf-8", errors="replace") as text:
        return f'<p id="{STALE_MARK}"' in text.read(1 << 16)


def _origins(boards: list[Leaderboard]) -> Origins:
    """Every pool-run certificate's origin, keyed as frames number the runs: a board's runs in order,
    one board after another."""
    found: Origins = {}
    offset = 0
    for board in boards:
        for row in board.sessions:
            found |= {(offset + row.run + 1, row.item, link.n): link.origin for link in row.links if link.origin}
        offset += len(board.runs)
    return found


def write_comparison(out: Path, comparison: Comparison) -> dict[str, Path]:
    """comparison.json, .md, .html and results.csv (every run's sessions) in `out`."""
    paths = {kind: out / name for kind, name in COMPARISON_NAMES.items()}
    write_model(paths["json"], comparison)
    write_text_atomic(paths["md"], render_comparison_markdown(comparison))
    write_text_atomic(paths["html"], render_comparison_html(comparison))
    write_text_atomic(paths["csv"], results_csv(comparison.boards))
    for board in comparison.boards:
        write_session_pages(out, board, COMPARISON_NAMES["html"])
    paths |= _parquet(out, [board.runs[0].path for board in comparison.boards], _origins(comparison.boards))
    paths["pages"] = out / FOLDER
    return paths


def _parquet(out: Path, links: list[str], origins: Origins) -> dict[str, Path]:
    """The data layer's tables of the runs the board links to (none when its links were made for
    another directory than `out`: then there is nothing here to read them from)."""
    runs = [out / link for link in links]
    return write_parquet(out, runs, origins) if all(RunDir(run).plan.is_file() for run in runs) else {}


def read_leaderboard(path: Path) -> Leaderboard:
    """leaderboard.json, validated against the model (CorruptStateError naming the file if not)."""
    return read_model(path, Leaderboard)


def read_comparison(path: Path) -> Comparison:
    return read_model(path, Comparison)
