"""The leaderboard for people: leaderboard.md, and leaderboard.html that opens anywhere.

The HTML page is self-contained: inline CSS and plots drawn here as inline SVG, no script, no
font, no request of any kind, so it reads the same offline, from an archive, with JavaScript
off. Everything taken from a run (model ids, rules) is escaped: a model id is user input.
Elements carry stable ids and classes (ranking rows, bars, points, matrix cells) so a test can
check the rendered page, not just the text we wrote.
"""

from html import escape

from pytest_predbench.report.model import Finding, Leaderboard, ModelRow, RunManifest

FAKE_NOTE = "FAKE runner: canned sessions, no model was called; these figures measure no model"

RANKING_COLUMNS = (
    "rank",
    "model",
    "verified bugs",
    "rules found",
    "false alarms",
    "false-alarm rate",
    "sessions run",
    "skipped",
    "dollars",
    "dollars, no result",
    "tokens",
    "model calls",
    "pred calls",
    "bugs / $",
    "bugs / M tokens",
)


def _dollars(value: float | None) -> str:
    return "—" if value is None else f"${value:.4f}"


def _ratio(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def ranking_cells(row: ModelRow) -> list[str]:
    return [
        str(row.rank),
        row.model,
        str(row.verified_bugs),
        ", ".join(row.rules) or "—",
        f"{row.false_alarms} of {row.certificates}",
        _percent(row.false_alarm_rate),
        f"{row.sessions_run} of {row.sessions_planned}",
        str(row.sessions_skipped),
        _dollars(row.dollars),
        _dollars(row.dollars_no_result),
        f"{row.tokens:,}",
        str(row.model_calls),
        str(row.pred_calls),
        _ratio(row.bugs_per_dollar),
        _ratio(row.bugs_per_million_tokens),
    ]


FINDING_COLUMNS = ("rule", "source instance", "violation", "certificates", "models", "sessions")


def finding_cells(finding: Finding) -> list[str]:
    return [
        finding.rule,
        f"{finding.source_type} {finding.source_sha256[:12]}",
        ", ".join(finding.violations),
        str(finding.certificates),
        ", ".join(finding.models),
        ", ".join(finding.sessions),
    ]


def _manifest_pairs(run: RunManifest) -> list[tuple[str, str]]:
    pred = f"{run.pred.version} (sha256 {run.pred.sha256}, source {run.pred.source_sha256})" if run.pred else "none"
    budget = run.budget
    caps = (
        f"total {_dollars(budget.total)}, per model {_dollars(budget.per_model)}, "
        f"per session {_dollars(budget.per_session)}"
        if budget.capped
        else f"uncapped, per session {_dollars(budget.per_session)}"
    )
    limits = ", ".join(f"{name}={value}" for name, value in run.limits.model_dump().items())
    packages = ", ".join(f"{name} {version or 'absent'}" for name, version in sorted(run.packages.items()))
    pairs = [
        ("run", run.path),
        ("plan digest", run.plan_digest),
        ("runner", run.runner + (" (FAKE: measures no model)" if run.runner == "fake" else "")),
        ("models", ", ".join(run.models)),
        ("sessions per model", str(run.sessions)),
        ("budget", caps),
        ("session limits", limits),
        ("pred", pred),
        ("prompt hash", run.prompt_hash),
        ("packages", packages),
    ]
    for model, identity in sorted(run.model_identities.items()):
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


def _headline(board: Leaderboard) -> str:
    check = board.reverification
    verified = (
        f"{check.certificates} accepted certificate(s) ({check.distinct} distinct) re-verified with pred "
        f"{check.pred_version} (sha256 {check.pred_sha256})"
        if check.pred_version
        else "no accepted certificate to re-verify"
    )
    return f"Generated {board.generated_at:%Y-%m-%d %H:%M UTC} from {len(board.runs)} run(s); {verified}."


# -- markdown -----------------------------------------------------------------------------------


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _md_table(header: list[str] | tuple[str, ...], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
    return lines


def render_markdown(board: Leaderboard) -> str:
    lines = ["# predbench leaderboard", ""]
    if board.fake:
        lines += [f"> **{FAKE_NOTE}**", ""]
    lines += [_headline(board), "", "## Ranking", ""]
    lines += _md_table(RANKING_COLUMNS, [ranking_cells(row) for row in board.models])
    lines += ["", "## Rules found, by model", ""]
    if board.rules:
        lines += _md_table(
            ["rule", *[row.model for row in board.models]],
            [
                [rule.rule, *["found" if row.model in rule.models else "" for row in board.models]]
                for rule in board.rules
            ],
        )
    else:
        lines.append("No verified bugs.")
    lines += ["", "## Findings (identical certificates grouped)", ""]
    if board.findings:
        lines += _md_table(FINDING_COLUMNS, [finding_cells(f) for f in board.findings])
    else:
        lines.append("None.")
    lines += ["", "## Run manifest", ""]
    for n, run in enumerate(board.runs, 1):
        lines += [f"### Run {n} of {len(board.runs)}", ""] if len(board.runs) > 1 else []
        lines += _md_table(["field", "value"], [[name, value] for name, value in _manifest_pairs(run)]) + [""]
    return "\n".join(lines).rstrip() + "\n"


# -- html -----------------------------------------------------------------------------------------

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:#1d2430;margin:2rem auto;
max-width:1200px;padding:0 1rem}
h1{font-size:1.6rem;margin:0 0 .3rem}h3{font-size:1rem;margin:1rem 0 .4rem}
h2{font-size:1.15rem;margin:2rem 0 .6rem;border-bottom:1px solid #d8dde6}
.fake{background:#fff3cd;border:1px solid #e0b84c;padding:.6rem .9rem;font-weight:600}
.meta{color:#566173}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{border:1px solid #d8dde6;padding:.3rem .5rem;text-align:left;vertical-align:top}
th{background:#f1f4f8}td.num{text-align:right;font-variant-numeric:tabular-nums}
.plots{display:flex;flex-wrap:wrap;gap:1.5rem;align-items:flex-start}
figure{margin:0;border:1px solid #d8dde6;padding:.5rem}figcaption{font-weight:600;margin-bottom:.3rem}
svg text{font:12px system-ui,sans-serif;fill:#1d2430}
.bar{fill:#3a6fd8}.point{fill:#d8573a}.cell.found{fill:#2e9d5b}.cell.none{fill:#eef1f5}
.axis{stroke:#8a94a6;stroke-width:1}
code{font-size:12px;word-break:break-all}
"""


def _svg(plot_id: str, width: int, height: int, body: list[str], title: str) -> str:
    return (
        f'<svg id="{plot_id}" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">' + "".join(body) + "</svg>"
    )


def _label(x: float, y: float, text: str, anchor: str = "start", extra: str = "") -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{extra}>{escape(text)}</text>'


def bugs_plot(board: Leaderboard) -> str:
    """Horizontal bars: verified bugs per model, in rank order."""
    rows = board.models
    label_w, bar_w, row_h, top = 220, 300, 26, 10
    most = max([r.verified_bugs for r in rows] + [1])
    body = []
    for n, row in enumerate(rows):
        y = top + n * row_h
        width = bar_w * row.verified_bugs / most
        body.append(_label(label_w - 8, y + 16, row.model, "end"))
        body.append(
            f'<rect class="bar" data-model="{escape(row.model)}" data-value="{row.verified_bugs}" '
            f'x="{label_w}" y="{y + 4}" width="{width:.1f}" height="{row_h - 8}"><title>'
            f"{escape(row.model)}: {row.verified_bugs} verified bug(s)</title></rect>"
        )
        body.append(_label(label_w + width + 6, y + 16, str(row.verified_bugs)))
    height = top * 2 + row_h * max(len(rows), 1)
    body.append(f'<line class="axis" x1="{label_w}" y1="{top}" x2="{label_w}" y2="{height - top}"/>')
    return _svg("plot-bugs", label_w + bar_w + 40, height, body, "verified bugs per model")


def spend_plot(board: Leaderboard) -> str:
    """Scatter: dollars spent (x) against verified bugs (y), one point per model."""
    width, height, left, bottom, pad = 520, 300, 56, 40, 20
    rows = board.models
    max_x = max([r.dollars for r in rows] + [1e-9])
    max_y = max([r.verified_bugs for r in rows] + [1])
    plot_w, plot_h = width - left - pad * 2, height - bottom - pad

    def at(row: ModelRow) -> tuple[float, float]:
        return left + plot_w * row.dollars / max_x, pad + plot_h * (1 - row.verified_bugs / max_y)

    body = [
        f'<line class="axis" x1="{left}" y1="{pad + plot_h}" x2="{left + plot_w}" y2="{pad + plot_h}"/>',
        f'<line class="axis" x1="{left}" y1="{pad}" x2="{left}" y2="{pad + plot_h}"/>',
        _label(left + plot_w / 2, height - 6, "dollars spent (sessions with a result)", "middle"),
        _label(
            14,
            pad + plot_h / 2,
            "verified bugs",
            "middle",
            f' transform="rotate(-90 14 {pad + plot_h / 2:.1f})"',
        ),
        _label(left, pad + plot_h + 16, "$0", "middle"),
        _label(left + plot_w, pad + plot_h + 16, _dollars(max_x), "middle"),
        _label(left - 6, pad + plot_h + 4, "0", "end"),
        _label(left - 6, pad + 4, str(max_y), "end"),
    ]
    together: dict[tuple[float, float], list[str]] = {}
    for row in rows:
        x, y = at(row)
        together.setdefault((round(x, 1), round(y, 1)), []).append(row.model)
        body.append(
            f'<circle class="point" data-model="{escape(row.model)}" data-bugs="{row.verified_bugs}" '
            f'data-dollars="{row.dollars}" cx="{x:.1f}" cy="{y:.1f}" r="6"><title>{escape(row.model)}: '
            f"{row.verified_bugs} bug(s) for {_dollars(row.dollars)}</title></circle>"
        )
    for (x, y), names in together.items():
        anchor = "end" if x > left + plot_w * 0.6 else "start"
        body.append(_label(x - 9 if anchor == "end" else x + 9, y - 8, ", ".join(names), anchor))
    return _svg("plot-spend", width, height, body, "spend against verified bugs")


def matrix_plot(board: Leaderboard) -> str:
    """Rules (rows) by models (columns): a filled cell where the model found the rule."""
    models = [row.model for row in board.models]
    rules = [rule.rule for rule in board.rules]
    label_w, cell = 300, 28
    head = 30 + int(5.5 * max([len(m) for m in models] + [4]))
    width = label_w + cell * max(len(models), 1) + head - 10  # room for the slanted names
    height = head + cell * max(len(rules), 1) + 10
    body = []
    for c, model in enumerate(models):
        x = label_w + c * cell + cell / 2
        body.append(_label(x, head - 6, model, "start", f' transform="rotate(-45 {x:.1f} {head - 6})"'))
    for r, rule in enumerate(board.rules):
        y = head + r * cell
        body.append(_label(label_w - 8, y + cell / 2 + 4, rule.rule, "end"))
        for c, model in enumerate(models):
            state = "found" if model in rule.models else "none"
            body.append(
                f'<rect class="cell {state}" data-rule="{escape(rule.rule)}" data-model="{escape(model)}" '
                f'x="{label_w + c * cell + 1}" y="{y + 1}" width="{cell - 2}" height="{cell - 2}">'
                f"<title>{escape(model)} {'found' if state == 'found' else 'did not find'} "
                f"{escape(rule.rule)}</title></rect>"
            )
    if not rules:
        body.append(_label(label_w - 8, head + cell / 2 + 4, "no verified bugs", "end"))
    return _svg("plot-matrix", width, height, body, "rule by model matrix")


def _html_table(
    table_id: str,
    header: list[str] | tuple[str, ...],
    rows: list[tuple[str, list[str]]],
    numbers: bool = False,
) -> str:
    """rows: (attributes of the <tr>, cells); cells are escaped here. `numbers`: right-align figures."""
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = []
    for attributes, cells in rows:
        tds = "".join(
            f'<td class="num">{escape(c)}</td>' if numbers and _numeric(c) else f"<td>{escape(c)}</td>" for c in cells
        )
        body.append(f"<tr {attributes}>{tds}</tr>")
    return f'<table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def _numeric(text: str) -> bool:
    return bool(text) and text.lstrip("$").replace(",", "").replace(".", "").replace("%", "").isdigit()


def render_html(board: Leaderboard) -> str:
    ranking = _html_table(
        "ranking",
        RANKING_COLUMNS,
        [(f'class="model-row" data-model="{escape(row.model)}"', ranking_cells(row)) for row in board.models],
        numbers=True,
    )
    findings = (
        _html_table("findings", FINDING_COLUMNS, [('class="finding-row"', finding_cells(f)) for f in board.findings])
        if board.findings
        else "<p>None.</p>"
    )
    manifests = "".join(
        f"<h3>Run {n} of {len(board.runs)}</h3>"
        + _html_table(
            f"manifest-{n}",
            ["field", "value"],
            [('class="manifest-row"', [k, v]) for k, v in _manifest_pairs(run)],
        )
        for n, run in enumerate(board.runs, 1)
    )
    fake = f'<p class="fake" id="fake-note">{escape(FAKE_NOTE)}</p>' if board.fake else ""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>predbench leaderboard</title>
<style>{CSS}</style></head>
<body>
<h1>predbench leaderboard</h1>
{fake}
<p class="meta">{escape(_headline(board))}</p>
<h2>Ranking</h2>
{ranking}
<h2>Plots</h2>
<div class="plots">
<figure><figcaption>Verified bugs per model</figcaption>{bugs_plot(board)}</figure>
<figure><figcaption>Spend against verified bugs</figcaption>{spend_plot(board)}</figure>
<figure><figcaption>Rules found, by model</figcaption>{matrix_plot(board)}</figure>
</div>
<h2>Findings (identical certificates grouped)</h2>
{findings}
<h2>Run manifest</h2>
{manifests}
</body></html>
"""
