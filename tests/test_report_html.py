"""leaderboard.html and comparison.html rendered by a real browser (Debian's chromium, headless): the
ranked table, the per-session table and the plots are in the page the browser built, every link the
page holds resolves to a file of a run (and one that does not is caught), and nothing in it asks the
network for anything."""

import html
import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from pytest_predbench.report.leaderboard import HTML_NAME, JSON_NAME, MARKDOWN_NAME, read_leaderboard
from pytest_predbench.report.render import render_html
from tests.support.acceptance import Workspace
from tests.support.report_runs import (
    bogus_certificate,
    fake_run,
    genuine_certificate,
    report,
    status,
    write_certificate,
)

pytestmark = pytest.mark.slow  # end to end in subprocesses: `make test`, not `make check`


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, "chromium is not installed: `make setup` installs Debian's chromium"
    return found


def render(page: Path, profile: Path, *flags: str) -> str:
    """The DOM chromium built from the page (after any script ran)."""
    done = subprocess.run(
        [
            chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--user-data-dir={profile}",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            *flags,
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


class Dom(HTMLParser):
    """Elements as (tag, attributes, enclosing svg id), and the cells of each ranking row (the first
    table of model rows: the ranking)."""

    def __init__(self, text: str):
        super().__init__()
        self.elements: list[tuple[str, dict[str, str], str | None]] = []
        self.rows: list[tuple[str, list[str]]] = []
        self._svg: str | None = None
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self._done = False
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attributes = {k: v or "" for k, v in attrs}
        if tag == "svg":
            self._svg = attributes.get("id")
        self.elements.append((tag, attributes, self._svg))
        if tag == "tr" and "model-row" in attributes.get("class", "") and not self._done:
            self._row = []
            self.rows.append((attributes["data-model"], self._row))
        if tag == "table" and self.rows:
            self._done = True
        if tag == "td" and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag):
        if tag == "svg":
            self._svg = None
        if tag == "td" and self._cell is not None and self._row is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        if tag == "tr":
            self._row = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)

    def find(self, tag: str, cls: str | None = None, svg: str | None = None) -> list[dict[str, str]]:
        return [
            attrs
            for t, attrs, inside in self.elements
            if t == tag and (cls is None or cls in attrs.get("class", "").split()) and (svg is None or inside == svg)
        ]

    def hrefs(self) -> list[tuple[str, str]]:
        """(class, href) of every link."""
        return [(attrs.get("class", ""), attrs["href"]) for tag, attrs, _ in self.elements if tag == "a"]


def dangling(page: Path, dom: Dom, runs: list[Path]) -> list[str]:
    """Every link of the page that does not resolve, relative to the page, to a file of one of `runs`."""
    bad = []
    for _, href in dom.hrefs():
        target = (page.parent / href).resolve()
        inside = any(run.resolve() in target.parents for run in runs)
        if re.match(r"^[a-z][a-z0-9+.-]*:|^/", href, re.I) or not target.is_file() or not inside:
            bad.append(href)
    return bad


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> Path:
    """A merged leaderboard: m/finder submits the genuine certificate and a bogus one, m/idle nothing."""
    root = tmp_path_factory.mktemp("html")
    genuine = write_certificate(root / "genuine.json", genuine_certificate())
    bogus = write_certificate(root / "bogus.json", bogus_certificate())
    finder = fake_run(root / "finder", genuine, bogus, models="m/finder")
    idle = fake_run(root / "idle", models="m/idle")
    done = report(str(finder), str(idle), "--out", str(root / "board"))
    assert done.returncode == 0, done.stderr
    return root / "board"


@pytest.fixture(scope="module")
def too_small(tmp_path_factory) -> Path:
    """The demo models through the real mini-swe-agent, litellm and pred, with a session budget too
    small for them: every session stops at cost_limit. Reported in its own directory."""
    root = tmp_path_factory.mktemp("tiny")
    run = root / "run"
    args = ("--models", "demo/finder,demo/idle", "--sessions", "2", "--budget", "0.05", "--session-budget", "0.012")
    args += ("--max-output-tokens", "1000")  # the first call fits the cap: the sessions start, then stop
    bench = Workspace(root).pytest("bench_sessions", *args, f"--run-dir={run}", "-n", "2")
    assert bench.returncode == 0, bench.stdout[-3000:]
    assert [line for line in bench.stdout.splitlines() if "cost_limit 2" in line] != []  # the run's summary
    done = report(str(run))
    assert done.returncode == 0, done.stderr
    assert "stops: cost_limit 2" in done.stdout
    return run


def test_the_browser_renders_the_ranked_table_the_sessions_and_the_plots(published, tmp_path):
    page = render(published / HTML_NAME, tmp_path / "profile")
    dom = Dom(page)
    assert [model for model, _ in dom.rows] == ["m/finder", "m/idle"]
    finder, idle = (cells for _, cells in dom.rows)
    assert finder[0] == "1" and finder[1].startswith("m/finder") and finder[2] == "2 of 2"
    assert finder[3].startswith("2 of 2 (100%)") and "fake · pred 0.5.0" in finder[1]  # runner and pred by the name
    assert idle[0] == "2" and idle[1].startswith("m/idle") and idle[2] == "2 of 2" and idle[3].startswith("0 of 2 (0%)")
    assert len(finder) == 9 and finder[7] == "2 of 4 (2)"  # false alarms: 2 rejected of 4 certificates, in 2 sessions
    assert [r["data-model"] for r in dom.find("tr", "detail-row")] == ["m/finder", "m/idle"]  # the rest of the figures

    sessions = dom.find("tr", "session-row")
    assert [(s["data-model"], s["data-item"]) for s in sessions] == [
        ("m/finder", "m/finder-s01"),
        ("m/finder", "m/finder-s02"),
        ("m/idle", "m/idle-s01"),
        ("m/idle", "m/idle-s02"),
    ]
    points = dom.find("g", "point", svg="plot-dollars")
    assert sorted({p["data-model"] for p in points}) == ["m/finder", "m/idle"] and len(points) == 4
    rates = {r["data-model"]: float(r["data-rate"]) for r in dom.find("g", "rate", svg="plot-rate")}
    assert rates == {"m/finder": 1.0, "m/idle": 0.0}
    cells = dom.find("g", "cell", svg="plot-matrix")
    assert len(cells) == 2
    assert [c["data-model"] for c in cells if "found" in c["class"].split()] == ["m/finder"]
    assert len(dom.find("g", "curve-point", svg="plot-bugs-at-k")) == 4
    titles = [attrs for tag, attrs, svg in dom.elements if tag == "title" and svg]
    assert len(titles) >= 4 + 2 + 2 + 4, "every marked point and cell has its tooltip"
    assert all(th.get("title") for th in dom.find("th")), "every column header explains itself"

    board = read_leaderboard(published / JSON_NAME)
    manifest = [attrs for attrs in dom.find("tr", "manifest-row")]
    assert len(manifest) >= 10 * len(board.runs)
    for needle in (
        "prompt hash",
        board.runs[0].prompt_hash,
        board.runs[0].pred.sha256,
        "pytest-xdist",
        "FAKE runner",
        "What the columns mean",
    ):
        assert needle in page, needle


def test_every_link_resolves_to_a_file_of_the_runs(published, tmp_path):
    page = published / HTML_NAME
    dom = Dom(render(page, tmp_path / "profile"))
    runs = [published.parent / "finder", published.parent / "idle"]
    links = dom.hrefs()
    kinds = [kind for kind, _ in links]
    assert kinds.count("certificate") >= 4 and kinds.count("verdict") == 4  # 2 sessions x 2 certificates
    assert kinds.count("trajectory") == 4 and kinds.count("record") == 4 and kinds.count("run") == 2
    assert kinds.count("session") == 4 + 2  # each session's page, and the two sessions of the one finding
    assert dangling(page, dom, [*runs, published / "sessions"]) == []

    moved = tmp_path / "moved"  # the report and its runs copied elsewhere: relative links still resolve
    shutil.copytree(published.parent, moved, ignore=shutil.ignore_patterns(".*.lock", "*.json.tmp"))
    targets = [moved / "finder", moved / "idle", moved / "board" / "sessions"]
    assert dangling(moved / "board" / HTML_NAME, dom, targets) == []

    (moved / "idle" / "trajectories" / "m__idle-s02.traj.json").unlink()  # contrast: a dangling link is caught
    assert dangling(moved / "board" / HTML_NAME, dom, targets) == ["../idle/trajectories/m__idle-s02.traj.json"]


def test_a_too_small_budget_shows_its_cost_limit_stops_and_real_trajectories(too_small, tmp_path):
    page = too_small / HTML_NAME
    dom = Dom(render(page, tmp_path / "profile"))
    assert [s["data-stop"] for s in dom.find("tr", "session-row")] == ["cost_limit"] * 4
    assert (too_small / HTML_NAME).read_text().count('<td class="stop">cost_limit 2</td>') == 2  # the details table
    links = dom.hrefs()
    assert sum(kind == "trajectory" for kind, _ in links) == 4
    assert dangling(page, dom, [too_small]) == []
    board = read_leaderboard(too_small / JSON_NAME)
    assert [row.stop_reasons["cost_limit"] for row in board.models] == [2, 2]
    assert not board.fake and "FAKE" not in (too_small / HTML_NAME).read_text()
    assert (too_small / MARKDOWN_NAME).read_text().count("cost_limit 2") == 2
    shown = status(str(too_small))
    assert shown.returncode == 0 and sum("cost_limit 2" in line for line in shown.stdout.splitlines()) == 2


def test_the_page_is_self_contained(published, tmp_path):
    """No script, stylesheet, image, frame or font to fetch: the plots are inline SVG, drawn on the
    server side, so the page reads the same offline and with JavaScript off. Its only references are
    relative links into the runs and fragment references inside the plots."""
    source = (published / HTML_NAME).read_text()
    assert not re.search(r"<script|<link|<img|<image|<iframe|<object|<embed|@import|@font-face", source, re.I)
    assert not re.search(r"\ssrc\s*=", source, re.I)
    references = re.findall(r"url\(([^)]*)\)", source)
    assert references and all(u.startswith("#") for u in references)
    for href in re.findall(r'href\s*=\s*"([^"]*)"', source):
        assert not re.match(r"^[a-z][a-z0-9+.-]*:|^/", href, re.I), href  # no scheme, no absolute path
    ids = re.findall(r'\sid="([^"]*)"', source)
    assert len(ids) == len(set(ids)), "ids are unique across the page's plots"
    assert source.count("<svg ") == 4 and "<style>" in source
    dom = Dom(render(published / HTML_NAME, tmp_path / "profile"))  # name resolution fails for every host
    assert len(dom.rows) == 2 and len(dom.find("g", "rate")) == 2


def test_the_browser_takes_a_screenshot_of_the_page(published, tmp_path):
    shot = tmp_path / "board.png"
    done = subprocess.run(
        [
            chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--window-size=1280,1600",
            f"--screenshot={shot}",
            (published / HTML_NAME).as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000


def test_model_ids_are_escaped_not_executed(published, tmp_path):
    board = read_leaderboard(published / JSON_NAME)
    hostile = "x/<img src=nowhere onerror=alert(1)>$a$"
    for row in board.sessions:
        if row.model == board.models[0].model:
            row.model = hostile
    board.models[0].model = hostile
    page = tmp_path / "hostile.html"
    page.write_text(render_html(board))
    dom = Dom(render(page, tmp_path / "profile"))
    assert dom.find("img") == []
    assert dom.rows[0][0] == hostile and dom.rows[0][1][1].startswith(hostile)
    assert [r["data-model"] for r in dom.find("g", "rate")][0] == hostile


def test_the_comparison_page_renders_with_its_links(published, too_small, tmp_path):
    """Two runs with different plans (fake and demo models, other budgets) side by side."""
    out = tmp_path / "compare"
    done = report(str(published.parent / "finder"), str(too_small), "--compare", "--out", str(out))
    assert done.returncode == 0, done.stderr
    page = out / "comparison.html"
    dom = Dom(render(page, tmp_path / "profile"))
    side = dom.find("tr", "model-row")
    assert sorted((r["data-run"], r["data-model"]) for r in side if "data-run" in r) == [
        ("1", "m/finder"),
        ("2", "demo/finder"),
        ("2", "demo/idle"),
    ]
    assert len(dom.find("table")) > 6 and "FAKE" in page.read_text()
    across = dom.find("g", "curve-point", svg="compare-bugs-at-k")  # one plot across the runs
    assert sorted({p["data-model"] for p in across}) == [
        "finder: m/finder",
        "run: demo/finder",
        "run: demo/idle",
    ]  # by run id
    assert dangling(page, dom, [published.parent / "finder", too_small, out / "sessions"]) == []
    assert len(list((out / "sessions").glob("run*-*.html"))) == 2 + 4  # every session of both runs has its page


MEASURE = """<script>
(() => {
  const box = (e) => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  const wrap = document.getElementById("ranking").parentElement;
  const labels = [...document.querySelectorAll("#plot-matrix g.column-label, #plot-matrix g.row-label")];
  const out = {
    ranking: [wrap.scrollWidth, wrap.clientWidth],
    cells: [...document.querySelectorAll("#plot-matrix g.cell")].map((g) => box(g)[2] - box(g)[0]),
    labels: labels.map((g) => [g.getAttribute("data-text"), ...box(g)]),
    plot: box(document.getElementById("plot-matrix")),
  };
  const pre = document.createElement("pre");
  pre.id = "measured";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>"""


def crowded(board):
    """The board with 3 models (long ids) and 15 bugs (long rule names): what made the old plots unreadable."""
    names = ["openrouter/anthropic/claude-sonnet-4-5-20250929", "openai/gpt-4o-2024-08-06", "m/finder"]
    template = board.models[0]
    board.models = [template.model_copy(update={"model": name, "rank": n}) for n, name in enumerate(names, 1)]
    rule = board.rules[0]
    board.rules = [
        rule.model_copy(
            update={
                "bug": f"MinimumWeightedVertexCoverVariant{i} -> EnsembleComputationOfSets{i}",
                "sessions": {name: 1 + (i + n) % 2 for n, name in enumerate(names) if (i + n) % 3},
            }
        )
        for i in range(15)
    ]
    return board


def measured(page: Path, profile: Path) -> dict:
    measuring = page.with_name("measured.html")
    measuring.write_text(page.read_text().replace("</body>", MEASURE + "</body>"))
    dom = render(measuring, profile, "--window-size=1400,2000", "--force-device-scale-factor=1")
    return json.loads(html.unescape(re.search(r'<pre id="measured">(.*?)</pre>', dom, re.S).group(1)))


def overlaps(labels: list) -> list[tuple[str, str]]:
    found = []
    for n, (a, *ra) in enumerate(labels):
        for b, *rb in labels[n + 1 :]:
            width = min(ra[2], rb[2]) - max(ra[0], rb[0])
            height = min(ra[3], rb[3]) - max(ra[1], rb[1])
            if width > 0.5 and height > 0.5:
                found.append((a, b))
    return found


def test_at_1400_px_the_ranking_fits_and_the_matrix_is_readable_for_3_models_and_15_bugs(published, tmp_path):
    board = crowded(read_leaderboard(published / JSON_NAME))
    page = tmp_path / "crowded.html"
    page.write_text(render_html(board))
    found = measured(page, tmp_path / "profile")
    scroll, client = found["ranking"]
    assert scroll <= client, f"the ranking table scrolls: {scroll} px of content in {client} px"
    assert len(found["cells"]) == 3 * 15 and min(found["cells"]) >= 12, min(found["cells"])
    assert len(found["labels"]) == 3 + 15 and all(right > left for _, left, _, right, _ in found["labels"])
    assert overlaps(found["labels"]) == []
    left, top, right, bottom = found["plot"]
    outside = [name for name, *r in found["labels"] if r[0] < left or r[1] < top or r[2] > right or r[3] > bottom]
    assert outside == [], "every label is inside the plot, none cut off"
    text = page.read_text()
    assert all(name in text for name in (m.model for m in board.models))
    assert "EnsembleComputationOfSets14" in text


COMPARE_MEASURE = """<script>
(() => {
  const wrap = document.getElementById("side-by-side").parentElement;
  const out = {
    table: [wrap.scrollWidth, wrap.clientWidth],
    page: [document.documentElement.scrollWidth, document.documentElement.clientWidth],
    figures: [...document.querySelectorAll("figure")].map((f) => f.getBoundingClientRect().right),
  };
  const pre = document.createElement("pre");
  pre.id = "measured";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>"""


def test_the_comparison_fits_1400_px_and_names_each_run_by_its_name_or_id(tmp_path):
    """Issue 32: --compare fitted no 1400 px window, called its runs "run 1"/"run 2", and equal Bugs@k
    curves hid one another. Two runs of two models that find nothing: four equal curves."""
    named = fake_run(tmp_path / "20261207-120000-abcdef", models="openai/gpt-4o-2024-08-06,m/idle",
                     extra=("--run-name", "pilot-with-a-long-name"))  # fmt: skip
    plain = fake_run(tmp_path / "20261207-130000-123456", models="openai/gpt-4o-2024-08-06,m/idle")
    out = tmp_path / "compare"
    done = report(str(named), str(plain), "--compare", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "run 2 (20261207-130000-123456): " in done.stdout
    page = out / "comparison.html"
    dom = Dom(render(page, tmp_path / "profile"))
    runs = [r["data-run"] for r in dom.find("tr", "model-row") if "data-run" in r]
    assert runs == ["1", "1", "2", "2"]
    text = page.read_text()
    assert (
        '<td class="run">pilot-with-a-long-name</td>' in text and '<td class="run">20261207-130000-123456</td>' in text
    )
    assert "run 2:" not in text and "run 1:" not in text  # no run is named by its place alone
    curves = dom.find("g", "curve", svg="compare-bugs-at-k")
    assert len(curves) == 4 and len({c["data-width"] for c in curves}) == 4, curves  # one over another, each seen
    assert text.count("(same curve as pilot-with-a-long-name: ") >= 3, "the legend names the curve each repeats"

    measuring = page.with_name("measured.html")
    measuring.write_text(text.replace("</body>", COMPARE_MEASURE + "</body>"))
    for width, fits in ((1400, True), (700, False)):  # the contrast: a narrow window, the table scrolls
        shown = render(measuring, tmp_path / f"profile-{width}", f"--window-size={width},2000",
                       "--force-device-scale-factor=1")  # fmt: skip
        found = json.loads(html.unescape(re.search(r'<pre id="measured">(.*?)</pre>', shown, re.S).group(1)))
        scroll, client = found["table"]
        assert (scroll <= client) is fits, (width, found)
        if fits:
            assert found["page"][0] <= found["page"][1] and max(found["figures"]) <= width, found


def test_equal_bugs_at_k_curves_are_layered_and_a_different_one_is_drawn_plainly():
    from pytest_predbench.report import plots

    drawn = plots.bugs_at_k(
        "t",
        [plots.CurveSeries("a", [1.0, 1.5]), plots.CurveSeries("b", [0.5, 0.5]), plots.CurveSeries("c", [1.0, 1.5])],
    )
    widths = {g["data-model"]: float(g["data-width"]) for g in Dom(drawn.svg).find("g", "curve")}
    assert widths["a"] > widths["c"], "the first of two equal curves lies beneath, wider"
    assert widths["b"] == widths["c"], "the contrast: a curve equal to no other is drawn at the plain width"
    assert "c (same curve as a)" in drawn.svg and "b (same curve" not in drawn.svg
