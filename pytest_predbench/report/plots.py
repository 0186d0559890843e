"""The leaderboard's plots, drawn by matplotlib as SVG and inlined into the page.

Inline SVG keeps the page one self-contained file that works offline: text stays text (searchable,
selectable; `svg.fonttype: none`), nothing is fetched, and the output is the same for the same
figures (fixed hash salt, no date). After matplotlib draws a plot, each marked element (an artist
given a `gid`) gets a `<title>` — the browser's tooltip — and data attributes naming what it shows,
so a reader can hover a point to read it and a test can check the rendered page. Ids are prefixed
per plot, so that several plots in one page never share an id.

Model ids are user input: matplotlib escapes them as XML text, math parsing is off (a `$` stays a
dollar sign), and the tree is re-serialised by ElementTree, which escapes every attribute.
"""

import functools
import io
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from typing import ParamSpec

SVG_NS = "http://www.w3.org/2000/svg"
XLINK_NS = "http://www.w3.org/1999/xlink"
ET.register_namespace("", SVG_NS)
ET.register_namespace("xlink", XLINK_NS)

STYLE = {
    "svg.fonttype": "none",
    "svg.hashsalt": "predbench",
    "text.parse_math": False,
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
}
_REFERENCE = re.compile(r"#([A-Za-z_][\w.:-]*)")


@dataclass
class Mark:
    """What a marked element shows: its tooltip and its data attributes."""

    title: str
    css: str
    data: dict[str, str]


@dataclass
class Plot:
    id: str
    caption: str
    explanation: str
    svg: str


class Canvas:
    """One figure being drawn, with the marks its elements will carry."""

    def __init__(self, plot_id: str, width: float, height: float):
        from matplotlib.figure import Figure

        self.plot_id = plot_id
        self.figure = Figure(figsize=(width, height), layout="constrained")
        self.marks: dict[str, Mark] = {}

    def mark(self, title: str, css: str, **data: object) -> str:
        """A gid for an artist; the element matplotlib draws for it gets this tooltip and data."""
        gid = f"mark{len(self.marks)}"
        self.marks[gid] = Mark(title, css, {k.replace("_", "-"): str(v) for k, v in data.items()})
        return gid

    def svg(self, label: str) -> str:
        buffer = io.StringIO()
        self.figure.savefig(buffer, format="svg", metadata={"Date": None})
        return _finish(buffer.getvalue(), self.plot_id, label, self.marks)


P = ParamSpec("P")


def styled(draw: Callable[P, Plot]) -> Callable[P, Plot]:
    """Draw under the page's matplotlib settings (text is read as it is created, SVG as it is saved),
    without touching the caller's global ones."""

    @functools.wraps(draw)
    def drawn(*args: P.args, **kwargs: P.kwargs) -> Plot:
        import matplotlib

        with matplotlib.rc_context(STYLE):
            return draw(*args, **kwargs)

    return drawn


def _finish(text: str, plot_id: str, label: str, marks: dict[str, Mark]) -> str:
    """Tooltips and data attributes on the marked elements, ids prefixed, no XML prolog or metadata."""
    root = ET.fromstring(text)
    for metadata in root.findall(f"{{{SVG_NS}}}metadata"):
        root.remove(metadata)
    renamed: dict[str, str] = {}
    for element in root.iter():
        old = element.get("id")
        if old is None:
            continue
        mark = marks.get(old)
        if mark is not None:
            title = ET.Element(f"{{{SVG_NS}}}title")
            title.text = mark.title
            element.insert(0, title)
            element.set("class", mark.css)
            for key, value in mark.data.items():
                element.set(f"data-{key}", value)
        renamed[old] = f"{plot_id}-{old}"
        element.set("id", renamed[old])

    def rename(match: re.Match) -> str:
        return "#" + renamed.get(match.group(1), match.group(1))

    for element in root.iter():
        for key, value in element.attrib.items():
            if key != "id" and "#" in value:
                element.set(key, _REFERENCE.sub(rename, value))
    root.set("id", plot_id)
    root.set("class", "plot")
    root.set("role", "img")
    root.set("aria-label", label)
    return ET.tostring(root, encoding="unicode")


def colours(count: int) -> list[tuple[float, float, float, float]]:
    """One colour per series, the same series the same colour in every plot of a page."""
    from matplotlib import colormaps

    palette = colormaps["tab10" if count <= 10 else "tab20"]
    return [palette(i % palette.N) for i in range(count)]


def _money(value: float) -> str:
    return f"${value:.4f}"


CHAR_IN = 0.075
"""About how wide one character of the 9 pt text is, in inches: label space is sized from the data."""


def text_inches(labels: list[str], size: float = 9.0) -> float:
    """The width the longest of `labels` takes at `size` points."""
    return max((len(label) for label in labels), default=0) * CHAR_IN * size / 9.0


def outside_legend(ax, **kwargs) -> None:
    """The legend beside the axes, never over the data (constrained layout makes room for it)."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, frameon=False, **kwargs)


def counts_axis(ax, highest: float) -> None:
    """A y axis of counts: from just below 0 (points on 0 stay clear of the axis) to at least 1."""
    top = max(1.0, highest) * 1.08
    ax.set_ylim(-0.04 * top, top)


def mark_labels(canvas: "Canvas", labels, css: str) -> None:
    """Give tick labels a gid, so the page (and a test in a browser) can find and measure them."""
    for label in labels:
        label.set_gid(canvas.mark(label.get_text(), css, text=label.get_text()))


# -- the plots ------------------------------------------------------------------------------------


@dataclass
class DollarSeries:
    """One model's sessions in run order: what each cost and which bugs it found."""

    label: str
    sessions: list[tuple[str, float, set[str]]]
    """(session name, dollars, distinct bugs it found)."""


@styled
def bugs_against_dollars(plot_id: str, series: list[DollarSeries]) -> Plot:
    """Distinct bugs so far against dollars so far, per model: the bug finder's coverage curve."""
    from matplotlib.ticker import MaxNLocator

    canvas = Canvas(plot_id, 5.0 + text_inches([one.label for one in series], 8), 3.6)
    ax = canvas.figure.add_subplot()
    most = max((sum(d for _, d, _ in one.sessions) for one in series), default=0.0)
    for colour, one in zip(colours(len(series)), series, strict=True):
        xs, ys, seen, spent = [0.0], [0], set(), 0.0
        free = not any(dollars for _, dollars, _ in one.sessions)
        for name, dollars, bugs in one.sessions:
            spent += dollars
            seen |= bugs
            xs.append(spent)
            ys.append(len(seen))
            gid = canvas.mark(
                f"{one.label}, after {name}: {len(seen)} distinct bug(s) for {_money(spent)}",
                "point",
                model=one.label,
                session=name,
                dollars=f"{spent:.6f}",
                bugs=len(seen),
            )
            # a series that spends nothing (a baseline) sits on x = 0: drawn large, above the axis line
            ax.scatter(
                [spent], [len(seen)], color=colour, s=60 if free else 22, marker="D" if free else "o",
                zorder=4, clip_on=False, gid=gid,
            )  # fmt: skip
        label = f"{one.label} ($0: no model calls)" if free and one.sessions else one.label
        ax.step(xs, ys, where="post", color=colour, label=label, linewidth=1.6)
    ax.set_xlabel("cumulative dollars (sessions in run order)")
    ax.set_ylabel("distinct bugs found")
    ax.yaxis.get_major_locator().set_params(integer=True)
    counts_axis(
        ax, max((len(set().union(*(b for _, _, b in one.sessions))) for one in series if one.sessions), default=0)
    )
    span = most if most > 0 else 0.01
    ax.set_xlim(-0.04 * span, span * 1.05)  # room left of $0, so a $0 series is seen, not hidden by the axis
    ax.xaxis.set_major_locator(MaxNLocator(5))
    ax.xaxis.set_major_formatter(lambda value, _: f"${value:.3g}" if value >= 0 else "")
    if series:
        outside_legend(ax)
    return Plot(
        plot_id,
        "Distinct bugs against cumulative dollars",
        "Each line is one model; each point one of its sessions, in run order: how many distinct bugs the "
        "model had found after spending that much. Steeper and higher is better. Hover a point for its session.",
        canvas.svg("distinct bugs against cumulative dollars, per model"),
    )


@dataclass
class RateEntry:
    label: str
    sessions: int
    with_bug: int
    rate: float | None
    interval: tuple[float, float] | None


@styled
def bug_rate(plot_id: str, entries: list[RateEntry]) -> Plot:
    """Sessions with a bug, as a rate with its 95% Wilson interval, per model."""
    labels_in = text_inches([e.label + " (no sessions)" for e in entries])
    canvas = Canvas(plot_id, 4.6 + labels_in, max(1.6, 0.42 * len(entries) + 0.9))
    ax = canvas.figure.add_subplot()
    labels = []
    for position, (colour, entry) in enumerate(zip(colours(len(entries)), entries, strict=True)):
        y = len(entries) - 1 - position
        labels.append((y, entry.label if entry.sessions else f"{entry.label} (no sessions)"))
        if entry.rate is None or entry.interval is None:
            continue
        low, high = entry.interval
        gid = canvas.mark(
            f"{entry.label}: a bug in {entry.with_bug} of {entry.sessions} sessions "
            f"({entry.rate:.0%}; 95% interval {low:.0%}–{high:.0%})",
            "rate",
            model=entry.label,
            rate=f"{entry.rate:.6f}",
            low=f"{low:.6f}",
            high=f"{high:.6f}",
        )
        point, _, _ = ax.errorbar(
            [entry.rate], [y], xerr=[[entry.rate - low], [high - entry.rate]], fmt="o", color=colour, capsize=4
        )
        point.set_gid(gid)  # the point only: a gid on the whole container lands on its bars and caps too
    ax.set_yticks([y for y, _ in labels], [label for _, label in labels])
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.7, max(len(entries), 1) - 0.3)
    ax.set_xlabel("share of sessions that found at least one bug (95% Wilson interval)")
    ax.xaxis.set_major_formatter(lambda value, _: f"{value:.0%}")
    ax.grid(axis="x", alpha=0.3)
    return Plot(
        plot_id,
        "Sessions that found a bug",
        "The point is the share of a model's sessions with at least one accepted bug; the bar its 95% Wilson "
        "interval, which is wide when there are few sessions. Models whose bars overlap widely have not been "
        "told apart (see the comparisons). Hover a point for the counts.",
        canvas.svg("share of sessions with a bug, with 95% intervals"),
    )


@dataclass
class CurveSeries:
    label: str
    curve: list[float]
    band: list[tuple[float, float]] | None = None
    """95% interval of each point (drawn as a shaded band)."""


MARKERS = ("o", "s", "^", "D", "v", "P", "X", "h")
"""One marker shape per series (cycled), so that curves on the same points stay told apart in grey too."""


def ties(curves: list[list[float]]) -> list[tuple[int, int, int]]:
    """For each curve: (the first curve equal to it, its place among the curves equal to it, how many
    they are). Equal within 1e-9, as the figures are printed to two places."""
    keys = [tuple(round(v, 9) for v in curve) for curve in curves]
    found = []
    for n, key in enumerate(keys):
        same = [m for m, other in enumerate(keys) if other == key]
        found.append((same[0], same.index(n), len(same)))
    return found


@styled
def bugs_at_k(plot_id: str, series: list[CurveSeries]) -> Plot:
    """Bugs@k per model for k = 1 .. its sessions. Curves that coincide (two runs of one model, two
    models finding nothing) would hide all but the last drawn: they are drawn one over another, each
    narrower than the one beneath and with its own marker, so every colour shows as a stripe, and the
    legend names the curve each repeats."""
    labels = [one.label + (f" (same curve as {series[t[0]].label})" if t[1] else "") for one, t in
              zip(series, ties([one.curve for one in series]), strict=True)]  # fmt: skip
    canvas = Canvas(plot_id, 5.0 + text_inches(labels, 8), 3.2)
    ax = canvas.figure.add_subplot()
    for n, (colour, one, (_, place, tied)) in enumerate(
        zip(colours(len(series)), series, ties([one.curve for one in series]), strict=True)
    ):
        ks = list(range(1, len(one.curve) + 1))
        under = tied - 1 - place  # how many of its equals are drawn over it
        width = 1.4 + 1.8 * under
        line = canvas.mark(f"{labels[n]}: Bugs@k", "curve", model=one.label, width=f"{width:.1f}")
        marker, size = MARKERS[n % len(MARKERS)], 4 + 2.5 * under
        ax.plot(ks, one.curve, color=colour, label=labels[n], linewidth=width, gid=line, zorder=2 + 2 * place,
                marker=marker, markersize=size)  # fmt: skip
        if one.band and len(one.band) == len(one.curve):
            band = canvas.mark(f"{one.label}: 95% interval of Bugs@k", "band", model=one.label)
            ax.fill_between(
                ks, [low for low, _ in one.band], [high for _, high in one.band], color=colour, alpha=0.18,
                linewidth=0, gid=band,
            )  # fmt: skip
        for k, value in zip(ks, one.curve, strict=True):
            interval = one.band[k - 1] if one.band and k <= len(one.band) else None
            shown = f" (95% interval {interval[0]:.2f}–{interval[1]:.2f})" if interval else ""
            gid = canvas.mark(
                f"{one.label}: Bugs@{k} = {value:.2f}{shown}",
                "curve-point",
                model=one.label,
                k=k,
                value=f"{value:.6f}",
            )
            ax.scatter(
                [k], [value], color=colour, marker=marker, s=size**2, zorder=3 + 2 * place, gid=gid, clip_on=False
            )
    ax.set_xlabel("k (sessions)")
    ax.set_ylabel("expected distinct bugs")
    longest = max((len(one.curve) for one in series), default=1)
    ax.set_xlim(0.7, max(longest, 1) + 0.3)  # whole sessions only, however few
    ax.set_xticks(range(1, longest + 1, -(-longest // 10)))  # at most about ten whole k
    highest = [high for one in series for _, high in (one.band or [])] + [v for one in series for v in one.curve]
    counts_axis(ax, max(highest, default=0.0))
    if series:
        outside_legend(ax)
    return Plot(
        plot_id,
        "Bugs@k",
        "The expected number of distinct bugs a model finds in k sessions, estimated without bias from all its "
        "sessions (like pass@k); the shaded band is its 95% bootstrap interval (sessions resampled, seeded). Unlike "
        "the total it does not grow just because more sessions ran, so models compare at the same k. Curves that "
        "coincide are drawn one over another, each narrower than the one beneath; the legend names the curve each "
        "repeats.",
        canvas.svg("Bugs@k per model"),
    )


@dataclass
class MatrixRow:
    label: str
    known: bool
    found: dict[str, int]
    """Column label -> sessions that found it."""


MATRIX_CELL_IN = 0.6
"""Width of a model's column in the bug x model matrix: room for '12/15' at 7 pt, and never a sliver."""
MATRIX_ROW_IN = 0.28
MATRIX_LEGEND_IN = 1.7


@styled
def rule_matrix(plot_id: str, rows: list[MatrixRow], columns: list[tuple[str, int]]) -> Plot:
    """Bugs (rows) by models (columns, with their session counts): how often each found each."""
    from matplotlib import colormaps
    from matplotlib.colors import Normalize
    from matplotlib.patches import Patch, Rectangle

    row_labels = [row.label + ("  ✱" if row.known else "") for row in rows]
    column_labels = [column for column, _ in columns]
    cell = MATRIX_CELL_IN
    flat = text_inches(column_labels, 8) <= cell * 0.95  # short model names stand upright
    below = 0.3 if flat else text_inches(column_labels, 8) + 0.2  # upright, or turned on end
    width = text_inches(row_labels, 8) + 0.3 + cell * max(len(columns), 1) + MATRIX_LEGEND_IN
    height = 0.5 + below + MATRIX_ROW_IN * max(len(rows), 1)
    canvas = Canvas(plot_id, width, height)
    ax = canvas.figure.add_subplot()
    cmap, norm = colormaps["Greens"], Normalize(0, 1)
    for r, row in enumerate(rows):
        for c, (column, sessions) in enumerate(columns):
            found = row.found.get(column, 0)
            share = found / sessions if sessions else 0.0
            gid = canvas.mark(
                f"{column} found {row.label} in {found} of {sessions} session(s)",
                "cell found" if found else "cell none",
                rule=row.label,
                model=column,
                sessions=found,
            )
            ax.add_patch(
                Rectangle((c, r), 1, 1, facecolor=cmap(norm(share)) if found else "#f1f3f6", edgecolor="white", gid=gid)
            )
            if found:
                ax.text(
                    c + 0.5,
                    r + 0.5,
                    f"{found}/{sessions}",
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="white" if share > 0.6 else "black",
                )
    ax.set_xlim(0, max(len(columns), 1))
    ax.set_ylim(max(len(rows), 1), 0)
    ax.set_xticks(
        [c + 0.5 for c in range(len(columns))],
        column_labels,
        rotation=0 if flat else 90,  # on end, one label per column: no two can overlap
        ha="center" if flat else "right",
        va="top" if flat else "center",
        rotation_mode="anchor",
        fontsize=8,
    )
    ax.set_yticks([r + 0.5 for r in range(len(rows))], row_labels, fontsize=8)
    mark_labels(canvas, ax.get_xticklabels(), "column-label")
    mark_labels(canvas, ax.get_yticklabels(), "row-label")
    ax.tick_params(length=0)
    for side in ("left", "bottom"):
        ax.spines[side].set_visible(False)
    if not rows:
        ax.text(0.5, 0.5, "no verified bugs", ha="center", va="center", transform=ax.transAxes)
    shades = [(f"in {share:.0%} of its sessions", cmap(norm(share))) for share in (1.0, 0.5, 0.2)]
    ax.legend(
        handles=[Patch(facecolor=colour, label=label) for label, colour in shades]
        + [Patch(facecolor="#f1f3f6", label="never")],
        loc="upper left",
        bbox_to_anchor=(1.01, 1),
        fontsize=7,
        frameon=False,
        title="found",
        title_fontsize=7,
    )
    return Plot(
        plot_id,
        "Bugs found, by model",
        "One row per bug (crashes marked as such), one column per model. A cell shows in how many of the "
        "model's sessions it was found (darker: more often); grey: never. ✱ marks a bug in the known-bug "
        "registry; the others are candidates to report upstream. Hover a cell for the counts.",
        canvas.svg("bugs by model matrix"),
    )
