"""The leaderboard for people: leaderboard.md, and leaderboard.html that opens anywhere, from jinja2
templates (report/templates/, shipped as package data).

The HTML page is one self-contained file: inline CSS, plots as inline SVG drawn by matplotlib
(report/plots.py), no script, no font, nothing fetched, so it reads the same offline, from an
archive, with JavaScript off. Its only links are relative ones to files of the runs (certificates,
verdicts, trajectories, item records), which resolve wherever the report and its runs are copied
together. Everything taken from a run is escaped by the templates' autoescaping: a model id is user
input. Every column has its explanation twice: as the header's tooltip and in a legend below the
table; every plot has a caption saying how to read it.
"""

from dataclasses import dataclass
from functools import cache

from pytest_predbench.report import plots
from pytest_predbench.report.columns import status_word
from pytest_predbench.report.limits import limit_note
from pytest_predbench.report.minted import BANDS, pool_name
from pytest_predbench.report.model import (
    CertificateLink,
    Comparison,
    Finding,
    FunnelCounts,
    Leaderboard,
    ModelRow,
    PoolSummary,
    Recall,
    RuleRow,
    RunManifest,
    SessionRow,
    run_labels,
)
from pytest_predbench.session import baseline
from pytest_predbench.state.records import ItemStatus
from pytest_predbench.verify.claims import UNDECIDED

FAKE_NOTE = "FAKE runner: canned sessions, no model was called; these figures measure no model"
BASELINE_NOTE = (
    "is a baseline (no model): random differential testing of every rule with pred alone, inside the same "
    "sandbox and under the same limits as the models, calling no model and spending nothing; the floor to read "
    "the models against"
)


def shown(model: str, label: str | None) -> str:
    """A model id as every table shows it: a baseline's with its label (as baseline.display)."""
    return f"{model} — {label}" if label else model


def baseline_notes(board: Leaderboard) -> list[str]:
    """One sentence per baseline on the board."""
    return [f"{row.model} {BASELINE_NOTE}." for row in board.models if row.label]


def limit_notes(board: Leaderboard) -> list[str]:
    """One sentence per model whose sessions mostly stopped at a limit (report/limits.py)."""
    notes = (limit_note(row.stop_reasons, f"{row.model}: ") for row in board.models if not row.label)
    return [note for note in notes if note]


# -- formatting ---------------------------------------------------------------------------------


def dollars(value: float | None) -> str:
    return "—" if value is None else f"${value:.4f}"


def number(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def percent(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def interval(value: tuple[float, float] | None, as_percent: bool = False) -> str:
    if value is None:
        return ""
    low, high = value
    return f"[{low:.0%}, {high:.0%}]" if as_percent else f"[{low:.2f}, {high:.2f}]"


def seconds(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.1f} s" if value < 120 else f"{value / 60:.1f} min"


outcome = status_word
"""'ok', 'false alarm', 'skipped (budget)', 'infra', ...: a status as a researcher reads it (report/columns.py)."""


def stop_reasons(counts: dict[str, int]) -> str:
    """The reasons that occurred, most frequent first: 'cost_limit 3, submitted 1'."""
    shown = sorted(((n, reason) for reason, n in counts.items() if n), key=lambda x: (-x[0], x[1]))
    return ", ".join(f"{reason} {n}" for n, reason in shown) or "—"


# -- the columns, each with what it means -------------------------------------------------------


@dataclass(frozen=True)
class Column:
    name: str
    explanation: str


POOL_COLUMNS = [
    Column(
        "minted recall",
        "On a minted bug pool: its planted bugs found, k of N, named — certificates the minted build accepts and the "
        "pristine build rejects, on a rule a minted bug changes.",
    ),
    Column(
        "minted by difficulty",
        "Minted bugs found per difficulty band, k of n each: easy (at least 75% of random probes expose it), medium "
        "(at least 25%), hard (fewer).",
    ),
    Column(
        "real bugs",
        "On a minted bug pool: distinct rules whose certificates the pristine build accepts too — real bugs of the "
        "version found on the way, counted apart from the minted ones; recall and candidates count only these.",
    ),
    Column(
        "minted funnel",
        "On a minted bug pool: of its N minted bugs, how many the sessions reached (ran pred reduce along the bug's "
        "rule), triggered (a round trip of their own instance there that the verifier proves wrong) and certified "
        "(an accepted certificate found it): reached >= triggered >= certified (report/funnel.py).",
    ),
]
"""The columns a board on a minted bug pool adds after 'distinct bugs' (report/minted.py)."""


def model_columns(rank_k: int, pool: bool = False) -> list[Column]:
    """Every column of a model's figures; `pool`: with the minted bug pool's (POOL_COLUMNS)."""
    columns = _model_columns(rank_k)
    at = next(n for n, c in enumerate(columns) if c.name == "distinct bugs") + 1
    return columns[:at] + POOL_COLUMNS + columns[at:] if pool else columns


def _model_columns(rank_k: int) -> list[Column]:
    return [
        Column(
            "rank",
            f"Ranked by Bugs@{rank_k} (k = the fewest sessions any model ran), then by the share of sessions with "
            "a bug, then by fewer unconfirmed certificates (false alarms and undecided); models equal on all three "
            "share a rank.",
        ),
        Column("model", "The model id as given to --models; a baseline (no model) is labelled so."),
        Column(
            "sessions",
            "Sessions that ended in a result, of those planned; 'skipped': never started, no budget left. Every "
            "per-session figure is over the sessions that ran.",
        ),
        Column(
            "sessions with a bug",
            "Sessions with at least one accepted (re-verified) bug certificate: count, share and its 95% Wilson "
            "interval.",
        ),
        Column(
            "bugs / session",
            "Mean distinct bugs per session, with a 95% bootstrap interval (seeded, so the report is reproducible).",
        ),
        Column(
            f"Bugs@{rank_k}",
            f"Expected distinct bugs in {rank_k} session(s), estimated without bias from all of the model's sessions "
            "(as pass@k): the fair comparison when models ran different numbers of sessions.",
        ),
        Column(
            "distinct bugs",
            "Rules with an accepted certificate of a wrong answer, over all sessions (one rule found many times "
            "counts once; named under 'Bugs found, by model'). Grows with the number of sessions: compare Bugs@k "
            "instead.",
        ),
        Column(
            "recall",
            "Entries of the known-bug registry found (k of N), crashes included, then apart on the disclosed ones "
            "(publicly reported as of the registry's date: a model may recall them) and the undisclosed ones, and on "
            "those disclosed after the model's training cutoff when its settings give one; bugs outside it are "
            "candidates to report upstream.",
        ),
        Column("candidates", "Bugs and crashes found that the known-bug registry does not list."),
        Column(
            "crashes",
            "Rules where pred panicked on a valid source (accepted `crash` certificates), counted apart from bugs; "
            "in brackets, the sessions that showed one.",
        ),
        Column(
            "false alarms",
            "Certificates the verifier rejected, of those submitted; in brackets, the sessions with at least one; "
            "then the undecided ones (the verifier could not decide them even with the report's longer limits): "
            "unconfirmed claims, never bugs, counted with the false alarms in the precision and the ranking.",
        ),
        Column(
            "precision",
            "Accepted certificates of those judged: a rejected and an undecided certificate lower it alike, so "
            "hiding a false claim in an instance the verifier cannot decide gains nothing.",
        ),
        Column("$ / bug", "Dollars of the sessions with a result, per distinct bug."),
        Column("median $", "Median dollars per session."),
        Column("median model calls", "Median model calls per session."),
        Column("median pred calls", "Median pred calls per session."),
        Column("median wall time", "Median wall-clock time per session."),
        Column(
            "stop reasons",
            "Why the sessions stopped, with counts (the runner's stop reasons: submitted, cost_limit, step_limit, "
            "...). A run whose sessions all stop at a limit measured the limit, not the model.",
        ),
        Column(
            "spent",
            "Dollars of the sessions with a result; in brackets, money that bought no result (infrastructure "
            "failures re-run later, lost sessions), from the ledger.",
        ),
    ]


def pool_cells(row: ModelRow) -> list[str]:
    """The cells of POOL_COLUMNS ('—' for a run on the version's own build, beside a pool run)."""
    found = row.minted
    if found is None:
        return ["—"] * len(POOL_COLUMNS)
    bands = ", ".join(f"{band} {found.bands[band].found} of {found.bands[band].known}" for band in BANDS)
    real = row.real_bugs or []
    return [
        f"{found.found} of {found.known}" + (f" ({', '.join(found.ids)})" if found.ids else ""),
        bands,
        str(len(real)) + (f" ({', '.join(real)})" if real else ""),
        funnel_text(row.funnel),
    ]


def funnel_text(counts: FunnelCounts | None) -> str:
    """A model's funnel in one cell: 'reached r, triggered t, certified c of N'."""
    if counts is None:
        return "—"
    return f"reached {counts.reached}, triggered {counts.triggered}, certified {counts.certified} of {counts.known}"


def model_cells(row: ModelRow, rank_k: int, pool: bool = False) -> list[str]:
    """The cells of model_columns(rank_k, pool), in their order."""
    cells = _model_cells(row, rank_k)
    return cells[:7] + pool_cells(row) + cells[7:] if pool else cells


def _model_cells(row: ModelRow, rank_k: int) -> list[str]:
    bugs_at_k = row.bugs_at_k[rank_k - 1] if 0 < rank_k <= len(row.bugs_at_k) else None
    skipped = f", {row.sessions_skipped} skipped" if row.sessions_skipped else ""
    rate = (
        f"{row.sessions_with_bug} of {row.sessions} ({percent(row.bug_rate)}) {interval(row.bug_rate_ci, True)}"
        if row.sessions
        else "—"
    )
    recall = f"{row.recall.found} of {row.recall.known}" + (f" ({', '.join(row.recall.ids)})" if row.recall.ids else "")
    recall += f"; {recall_apart(row.recall)}" if recall_apart(row.recall) else ""
    no_result = f" (+{dollars(row.dollars_no_result)} no result)" if row.dollars_no_result else ""
    return [
        str(row.rank),
        shown(row.model, row.label),
        f"{row.sessions} of {row.sessions_planned}{skipped}",
        rate,
        f"{number(row.bugs_per_session)} {interval(row.bugs_per_session_ci)}".strip(),
        number(bugs_at_k),
        str(row.verified_bugs),
        recall,
        str(len(row.candidates)),
        f"{len(row.crashes)} ({row.crash_sessions})",
        f"{row.false_alarms} of {row.certificates} ({row.false_alarm_sessions})"
        + (f", {row.inconclusive} {UNDECIDED}" if row.inconclusive else ""),
        percent(row.precision),
        dollars(row.dollars_per_bug),
        dollars(row.median_dollars),
        number(row.median_model_calls, 1),
        number(row.median_pred_calls, 1),
        seconds(row.median_wall_seconds),
        stop_reasons(row.stop_reasons),
        dollars(row.dollars) + no_result,
    ]


RANKING = (
    "rank",
    "model",
    "sessions",
    "sessions with a bug",
    "distinct bugs",
    "minted recall",
    "crashes",
    "false alarms",
    "$ / bug",
)
"""The ranking table's columns (it fits a 1400 px window); the rest go to the details table below it."""


def _in_ranking(column: Column) -> bool:
    return column.name in RANKING or column.name.startswith("Bugs@")


def ranking_split(board: Leaderboard) -> tuple[list[Column], list[list[str]], list[Column], list[list[str]]]:
    """(ranking columns, their cells per model, details columns, theirs): one figure, one table."""
    pool = board.pool is not None
    columns = model_columns(board.method.rank_k, pool)
    main = [n for n, c in enumerate(columns) if _in_ranking(c)]
    details = [0, 1] + [n for n, c in enumerate(columns) if not _in_ranking(c)]
    cells = [model_cells(row, board.method.rank_k, pool) for row in board.models]
    return (
        [columns[n] for n in main],
        [[one[n] for n in main] for one in cells],
        [columns[n] for n in details],
        [[one[n] for n in details] for one in cells],
    )


def runner_line(board: Leaderboard, row: ModelRow) -> str:
    """What the entrant ran on, under its name in the ranking: its agent (and version) and the pinned pred."""
    model = row.model_id or row.model
    preds = sorted({run.pred.version for run in board.runs if run.pred and model in run.models})
    pred = f"pred {', '.join(preds)}" if preds else "no pred"
    version = f" {row.agent_version}" if row.agent_version else ""
    return f"{row.runner or board.runner}{version} · {pred}"


SESSION_COLUMNS = [
    Column("model", "The model id."),
    Column("session", "The planned item (model and session number); links to its item record."),
    Column(
        "status",
        "ok (the session ran and no certificate it submitted was rejected, none included; an undecided one "
        "is no bug and counts as unconfirmed), false alarm (at least one rejected), or skipped (budget).",
    ),
    Column("stop reason", "Why the session stopped, as its runner recorded it (hover for the detail)."),
    Column("model calls", "Calls to the model in this session."),
    Column("pred calls", "Calls to pred the model made in this session."),
    Column("dollars", "What this session cost."),
    Column("wall time", "Wall-clock time of the session."),
    Column(
        "certificates",
        "Accepted / rejected (/ undecided) certificates; each links to the certificate file and its verdict.",
    ),
    Column("bugs", "Distinct bugs this session's accepted certificates show (crashes marked)."),
    Column("trajectory", "The session's trajectory: every model call and command, as the agent recorded it."),
]


def session_cells(row: SessionRow) -> list[str]:
    return [
        shown(row.entrant or row.model, row.label),  # its entrant: the model, with its agent unless mini-swe
        row.item,
        outcome(row.status),
        row.stop_reason or "—",
        str(row.model_calls),
        str(row.pred_calls),
        dollars(row.dollars),
        seconds(row.wall_seconds) if row.status != ItemStatus.SKIPPED_BUDGET else "—",
        f"{row.accepted} / {row.rejected}" + (f" / {row.inconclusive} {UNDECIDED}" if row.inconclusive else ""),
        ", ".join(row.bugs + [f"{c} (crash)" for c in row.crashes]) or "—",
        "",
    ]


PAIRWISE_COLUMNS = [
    Column("models", "The two models compared (rank order)."),
    Column("sessions with a bug", "Sessions with at least one bug, of the sessions run, for each."),
    Column(
        "Fisher's exact p",
        "Two-sided Fisher's exact test on sessions with and without a bug; in brackets, Holm-corrected over all pairs.",
    ),
    Column(
        "Mann-Whitney p",
        "Two-sided Mann-Whitney U test (exact by permutation) on distinct bugs per session; in brackets, "
        "Holm-corrected.",
    ),
    Column("verdict", "What the data can say about the pair, in a sentence."),
]


def p_value(value: float | None, adjusted: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.3g} ({adjusted:.3g})" if adjusted is not None else f"{value:.3g}"


def manifest_pairs(run: RunManifest) -> list[tuple[str, str]]:
    pred = f"{run.pred.version} (sha256 {run.pred.sha256}, source {run.pred.source_sha256})" if run.pred else "none"
    budget = run.budget
    caps = (
        f"total {dollars(budget.total)}, per model {dollars(budget.per_model)}, "
        f"per session {dollars(budget.per_session)}"
        if budget.capped
        else f"uncapped, per session {dollars(budget.per_session)}"
    )
    for raised in run.cap_raises:
        caps += (
            f"; raised {raised.at:%Y-%m-%d %H:%M} UTC by {raised.given} from total {dollars(raised.total_before)}, "
            f"per model {dollars(raised.per_model_before)}"
        )
    limits = ", ".join(f"{name}={value}" for name, value in run.limits.model_dump().items())
    packages = ", ".join(f"{name} {version or 'absent'}" for name, version in sorted(run.packages.items()))
    pairs = [
        ("run", run.path),
        ("plan digest", run.plan_digest),
        ("runner", run.runner + (" (FAKE: measures no model)" if run.runner == "fake" else "")),
        ("agent versions", ", ".join(f"{a} {v or 'unknown'}" for a, v in run.agent_versions.items())),
        ("models", ", ".join(run.models)),
        ("sessions per model", str(run.sessions)),
        ("budget", caps),
        ("session limits", limits),
        ("pred version", run.pred_version),
        *(
            [("bug pool", f"{run.pool or pool_name(run.pool_digest)}, digest {run.pool_digest}")]
            if run.pool_digest
            else []
        ),
        ("pred", pred),
        ("prompt hash", run.prompt_hash),
        ("packages", packages),
    ]
    for model, identity in sorted(run.model_identities.items()):
        if baseline.is_baseline(model):
            probe = f"sha256 {identity.demo_script_sha256}" if identity.demo_script_sha256 else "unrecorded"
            pairs.append((f"model {model}", f"{baseline.LABEL}: runs {identity.call_name} ({probe}); no price"))
            continue
        pairs.append(
            (
                f"model {model}",
                f"calls {identity.call_name}, ${identity.input_cost_per_token:g}/in token, "
                f"${identity.output_cost_per_token:g}/out token ({identity.price_source})",
            )
        )
    if run.model_settings_sha256:
        pairs.append(("model settings sha256", run.model_settings_sha256))
    return pairs


def headline(board: Leaderboard) -> str:
    check = board.reverification
    verified = (
        f"{check.certificates} accepted or inconclusive certificate(s) ({check.distinct} distinct) verified again "
        f"with pred {check.pred_version} (sha256 {check.pred_sha256})"
        if check.pred_version
        else "no accepted certificate to re-verify"
    )
    if check.pool:
        verified += (
            f" — the minted build of {check.pool} — and {check.pristine_certificates} accepted one(s) again on the "
            f"pristine pred {check.pred_version}"
            + (f" (sha256 {check.pristine_sha256})" if check.pristine_sha256 else "")
        )
    if check.retried:
        verified += f"; {check.retried} tried again with {check.retry_factor:g}x the limits"
    undecided = "".join(
        f" Still {UNDECIDED} (an unconfirmed claim: never a bug, counted with the false alarms): {u.item} "
        f"certificate {u.n} ({u.model}, "
        f"{u.recorded} in the run): {u.reason}."
        for u in check.inconclusive
    )
    return f"Generated {board.generated_at:%Y-%m-%d %H:%M UTC} from {len(board.runs)} run(s); {verified}.{undecided}"


# -- markdown rows (the HTML templates lay the same figures out themselves) ----------------------


def _md_link(text: str, target: str | None) -> str:
    return f"[{text}](<{target}>)" if target else text


def origin_text(link: CertificateLink) -> str:
    """What an accepted certificate of a pool run is, by the pristine build's verdict (report/minted.py)."""
    if link.origin == "minted":
        return f"a minted bug ({', '.join(link.minted_bugs)}): the pristine build rejects it"
    return {
        "real": "a real bug of the version: the pristine build accepts it too",
        "unattributed": "the pristine build rejects it, and no minted bug changes its rule",
        "undecided": "the pristine build could not decide it",
    }.get(link.origin or "", "")


def pool_sentence(pool: PoolSummary) -> str:
    """What a board's minted recall is measured against, in one sentence."""
    counts = ", ".join(f"{sum(bug.band == band for bug in pool.bugs)} {band}" for band in BANDS)
    return (
        f"The runs stood on {pool.label}: {len(pool.bugs)} minted bug(s) ({counts}, by the share of random probes "
        f"that expose each). A minted bug is found by a certificate that its minted build accepts and the pristine "
        f"pred {pool.pred_version} rejects, on a rule the bug changes; one the pristine build accepts too is a real "
        "bug of the version, counted apart."
    )


def md_model_rows(board: Leaderboard) -> list[list[str]]:
    return [model_cells(row, board.method.rank_k, board.pool is not None) for row in board.models]


def rule_known(rule: RuleRow) -> str:
    """A bug's registry ids and minted ids, or what it is without any: a candidate to report upstream
    (a real bug), or a bug of the minted build alone that no minted bug accounts for."""
    return ", ".join(rule.known + rule.minted) or ("candidate" if rule.real else "minted build only")


def finding_known(finding: Finding) -> str:
    """As rule_known, for one finding (its origin on a pool run)."""
    named = finding.known_bugs + finding.minted_bugs
    return ", ".join(named) or ("candidate" if finding.origin in (None, "real") else f"{finding.origin} (pool)")


def candidate_findings(board: Leaderboard) -> list[Finding]:
    """The findings no registry entry names that are real bugs of the version (on a pool run, those
    the pristine build accepts too): what the registry could grow by, each with its certificates."""
    return [f for f in board.findings if finding_known(f) == "candidate"]


def recall_apart(recall: Recall) -> str:
    """Recall on the disclosed and the undisclosed known bugs, and after the training cutoff, in one
    clause ('' for a leaderboard written before disclosures)."""
    if recall.disclosed is None or recall.undisclosed is None:
        return ""
    parts = [
        f"disclosed {recall.disclosed.found} of {recall.disclosed.known}",
        f"undisclosed {recall.undisclosed.found} of {recall.undisclosed.known}",
    ]
    if recall.training_cutoff is not None and recall.after_cutoff is not None:
        parts.append(
            f"disclosed after its training cutoff ({recall.training_cutoff.isoformat()}) "
            f"{recall.after_cutoff.found} of {recall.after_cutoff.known}"
        )
    return "; ".join(parts)


def md_candidate_rows(board: Leaderboard) -> list[list[str]]:
    return [
        [
            f.rule,
            ", ".join(f.violations),
            ", ".join(f.models),
            " ".join(_md_link(f"#{n}", link) for n, link in enumerate(f.links, 1)) or "(no file kept)",
        ]
        for f in candidate_findings(board)
    ]


def md_pairwise_rows(pairs: list) -> list[list[str]]:
    return [
        [
            f"{p.a} vs {p.b}",
            f"{p.with_bug_a}/{p.sessions_a} vs {p.with_bug_b}/{p.sessions_b}",
            p_value(p.fisher_p, p.fisher_p_holm),
            p_value(p.mannwhitney_p, p.mannwhitney_p_holm),
            p.sentence,
        ]
        for p in pairs
    ]


def md_rule_rows(board: Leaderboard) -> list[list[str]]:
    return [
        [rule.bug, rule_known(rule)]
        + [f"{rule.sessions[r.model]} of {r.sessions}" if rule.sessions.get(r.model) else "" for r in board.models]
        for rule in board.rules
    ]


def md_session_header(board: Leaderboard) -> list[str]:
    return (["run"] if len(board.runs) > 1 else []) + [column.name for column in SESSION_COLUMNS]


def md_session_rows(board: Leaderboard) -> list[list[str]]:
    rows = []
    for row in board.sessions:
        cells = session_cells(row)
        cells[1] = _md_link(row.item, row.record)
        certificates = [cells[8]] + [
            " ".join(
                [f"#{link.n} {link.outcome or ('accepted' if link.accepted else 'rejected')}"]
                + ([_md_link("certificate", link.certificate)] if link.certificate else [])
                + ([_md_link("verdict", link.verdict)] if link.verdict else [])
            )
            for link in row.links
        ]
        cells[8] = "; ".join(certificates)
        cells[10] = _md_link("trajectory", row.trajectory) if row.trajectory else "—"
        rows.append(([str(row.run + 1)] if len(board.runs) > 1 else []) + cells)
    return rows


def md_finding_rows(board: Leaderboard) -> list[list[str]]:
    return [
        [
            f.rule,
            f"{f.source_type} {f.source_sha256[:12]}",
            ", ".join(f.violations),
            " ".join([str(f.certificates)] + [_md_link(f"#{n}", link) for n, link in enumerate(f.links[:3], 1)]),
            ", ".join(f.models),
            ", ".join(f.sessions),
            finding_known(f),
        ]
        for f in board.findings
    ]


def any_pool(comparison: Comparison) -> bool:
    """Some compared run stood on a minted bug pool: the side-by-side table gets its columns."""
    return any(board.pool is not None for board in comparison.boards)


def side_by_side_footing(comparison: Comparison) -> list[Column]:
    """The columns before a compared run's figures: the run, its pred, its bug pool (when any has one)."""
    columns = [
        Column("run", "The run: the name given with --run-name, else its run id (its manifest is below)."),
        Column("pred", "The pred version the run stands on."),
    ]
    if any_pool(comparison):
        columns.append(Column("bug pool", "The minted bug pool the run stands on (its digest's start), or pristine."))
    return columns


def side_by_side_columns(comparison: Comparison) -> list[Column]:
    return [
        Column("Bugs@k (own k)", c.explanation) if c.name.startswith("Bugs@") else c
        for c in model_columns(0, any_pool(comparison))[1:]
    ]


def footing_cells(comparison: Comparison, n: int, board: Leaderboard) -> list[str]:
    pool = [pool_name(board.pool.digest if board.pool else None)] if any_pool(comparison) else []
    return [run_labels(comparison.boards)[n - 1], board.runs[0].pred_version] + pool


def side_by_side_split(comparison: Comparison) -> tuple[list[Column], list[list[str]], list[Column], list[list[str]]]:
    """The side-by-side table as the page shows it: (its columns, their cells per (run, model) row, the
    details' columns, theirs). The table holds the ranking's columns, so it fits a 1400 px window as the
    ranking does; the rest go to a details table below it, each of its rows naming its run and model."""
    footing = side_by_side_footing(comparison)
    columns = footing + side_by_side_columns(comparison)
    main = [n for n, c in enumerate(columns) if c in footing or _in_ranking(c)]
    model = next(n for n, c in enumerate(columns) if c.name == "model")
    details = [0, model] + [n for n in range(len(columns)) if n not in main]  # each row names its run and model
    rows = md_side_by_side_rows(comparison)
    return (
        [columns[n] for n in main],
        [[row[n] for n in main] for row in rows],
        [columns[n] for n in details],
        [[row[n] for n in details] for row in rows],
    )


def md_side_by_side_header(comparison: Comparison) -> list[str]:
    return [c.name for c in side_by_side_footing(comparison) + side_by_side_columns(comparison)]


def md_side_by_side_rows(comparison: Comparison) -> list[list[str]]:
    pool = any_pool(comparison)
    return [
        footing_cells(comparison, n, board) + model_cells(row, board.method.rank_k, pool)[1:]
        for n, board in enumerate(comparison.boards, 1)
        for row in board.models
    ]


# -- plots --------------------------------------------------------------------------------------


def _is_result(row: SessionRow) -> bool:
    return ItemStatus(row.status).is_result


def board_plots(board: Leaderboard, prefix: str = "plot") -> list[plots.Plot]:
    """The four plots of one leaderboard, their ids prefixed (several boards share a comparison's page)."""
    models = [row.model for row in board.models]
    per_model = {m: [s for s in board.sessions if (s.entrant or s.model) == m and _is_result(s)] for m in models}
    multi = len(board.runs) > 1
    series = [
        plots.DollarSeries(
            m,
            [(f"run {s.run + 1}: {s.item}" if multi else s.item, s.dollars, set(s.bugs)) for s in per_model[m]],
        )
        for m in models
    ]
    entries = [
        plots.RateEntry(r.model, r.sessions, r.sessions_with_bug, r.bug_rate, r.bug_rate_ci) for r in board.models
    ]
    curves = [plots.CurveSeries(r.model, r.bugs_at_k, r.bugs_at_k_ci) for r in board.models]
    matrix_rows = [plots.MatrixRow(rule.bug, bool(rule.known), dict(rule.sessions)) for rule in board.rules]
    columns = [(r.model, r.sessions) for r in board.models]
    return [
        plots.bugs_against_dollars(f"{prefix}-dollars", series),
        plots.bug_rate(f"{prefix}-rate", entries),
        plots.bugs_at_k(f"{prefix}-bugs-at-k", curves),
        plots.rule_matrix(f"{prefix}-matrix", matrix_rows, columns),
    ]


# -- templates ----------------------------------------------------------------------------------


@cache
def environment(markdown: bool):
    """The jinja2 environment of the templates: HTML autoescaped, markdown cells escaped by a filter."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("pytest_predbench.report", "templates"),
        autoescape=not markdown,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(
        dollars=dollars,
        number=number,
        percent=percent,
        seconds=seconds,
        mdcell=lambda text: str(text).replace("|", "\\|").replace("\n", " "),
        row_name=lambda row: shown(row.model, row.label),
    )
    env.globals.update(
        model_columns=model_columns,
        model_cells=model_cells,
        session_columns=SESSION_COLUMNS,
        session_cells=session_cells,
        pairwise_columns=PAIRWISE_COLUMNS,
        p_value=p_value,
        manifest_pairs=manifest_pairs,
        headline=headline,
        stop_reasons=stop_reasons,
        outcome=outcome,
        ranking_split=ranking_split,
        runner_line=runner_line,
        fake_note=FAKE_NOTE,
        shown=shown,
        baseline_notes=baseline_notes,
        limit_notes=limit_notes,
        md_model_rows=md_model_rows,
        md_pairwise_rows=md_pairwise_rows,
        md_rule_rows=md_rule_rows,
        md_session_header=md_session_header,
        md_session_rows=md_session_rows,
        md_finding_rows=md_finding_rows,
        md_side_by_side_header=md_side_by_side_header,
        md_side_by_side_rows=md_side_by_side_rows,
        any_pool=any_pool,
        side_by_side_footing=side_by_side_footing,
        side_by_side_columns=side_by_side_columns,
        footing_cells=footing_cells,
        side_by_side_split=side_by_side_split,
        run_labels=run_labels,
        rule_known=rule_known,
        finding_known=finding_known,
        candidate_findings=candidate_findings,
        recall_apart=recall_apart,
        md_candidate_rows=md_candidate_rows,
        bands=BANDS,
        pool_sentence=pool_sentence,
        origin_text=origin_text,
    )
    return env


def _svg(plot: plots.Plot):
    from markupsafe import Markup

    return Markup(plot.svg)  # drawn by matplotlib and re-serialised by ElementTree: escaped already


def render_markdown(board: Leaderboard) -> str:
    return environment(True).get_template("leaderboard.md.j2").render(board=board)


def render_html(board: Leaderboard) -> str:
    figures = [(plot, _svg(plot)) for plot in board_plots(board)]
    return environment(False).get_template("leaderboard.html.j2").render(board=board, plots=figures)


def render_comparison_markdown(comparison: Comparison) -> str:
    return environment(True).get_template("comparison.md.j2").render(comparison=comparison)


def render_comparison_html(comparison: Comparison) -> str:
    figures = [
        (n, [(plot, _svg(plot)) for plot in board_plots(board, prefix=f"run{n}")])
        for n, board in enumerate(comparison.boards, 1)
    ]
    labelled = list(zip(run_labels(comparison.boards), comparison.boards, strict=True))
    entries = [
        plots.RateEntry(f"{label}: {r.model}", r.sessions, r.sessions_with_bug, r.bug_rate, r.bug_rate_ci)
        for label, board in labelled
        for r in board.models
    ]
    rate = plots.bug_rate("compare-rate", entries)
    curves = plots.bugs_at_k(
        "compare-bugs-at-k",
        [
            plots.CurveSeries(f"{label}: {r.model}", r.bugs_at_k, r.bugs_at_k_ci)
            for label, board in labelled
            for r in board.models
        ],
    )
    return (
        environment(False)
        .get_template("comparison.html.j2")
        .render(comparison=comparison, figures=figures, across=[(p, _svg(p)) for p in (rate, curves)])
    )
