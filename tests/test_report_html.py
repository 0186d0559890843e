"""leaderboard.html rendered by a real browser (Debian's chromium, headless): the ranked table and
the three plots are in the page the browser built, with scripts on or off, and nothing in it
asks the network for anything."""

import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from pytest_predbench.report.leaderboard import HTML_NAME, JSON_NAME, read_leaderboard
from pytest_predbench.report.render import render_html
from tests.support.report_runs import fake_run, genuine_certificate, report, write_certificate

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
    """Elements as (tag, attributes, enclosing svg id), and the cells of each ranking row."""

    def __init__(self, text: str):
        super().__init__()
        self.elements: list[tuple[str, dict[str, str], str | None]] = []
        self.rows: list[tuple[str, list[str]]] = []
        self._svg: str | None = None
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attributes = {k: v or "" for k, v in attrs}
        if tag == "svg":
            self._svg = attributes.get("id")
        self.elements.append((tag, attributes, self._svg))
        if tag == "tr" and "model-row" in attributes.get("class", ""):
            self._row = []
            self.rows.append((attributes["data-model"], self._row))
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


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> Path:
    """A merged leaderboard: m/finder submits the genuine certificate, m/idle submits nothing."""
    root = tmp_path_factory.mktemp("html")
    certificate = write_certificate(root / "genuine.json", genuine_certificate())
    finder = fake_run(root / "finder", certificate, models="m/finder")
    idle = fake_run(root / "idle", models="m/idle")
    done = report(str(finder), str(idle), "--out", str(root / "board"))
    assert done.returncode == 0, done.stderr
    return root / "board"


def test_the_browser_renders_the_ranked_table_and_the_plots(published, tmp_path):
    page = render(published / HTML_NAME, tmp_path / "profile")
    dom = Dom(page)
    assert [model for model, _ in dom.rows] == ["m/finder", "m/idle"]
    finder, idle = (cells for _, cells in dom.rows)
    assert finder[:3] == ["1", "m/finder", "1"] and "MinimumVertexCover" in finder[3]
    assert idle[:3] == ["2", "m/idle", "0"]

    bars = {bar["data-model"]: bar for bar in dom.find("rect", "bar", svg="plot-bugs")}
    assert sorted(bars) == ["m/finder", "m/idle"]
    assert float(bars["m/finder"]["width"]) > 0 and float(bars["m/idle"]["width"]) == 0
    points = dom.find("circle", "point", svg="plot-spend")
    assert sorted(p["data-model"] for p in points) == ["m/finder", "m/idle"]
    cells = dom.find("rect", "cell", svg="plot-matrix")
    assert len(cells) == 2
    assert [c["data-model"] for c in cells if "found" in c["class"].split()] == ["m/finder"]

    board = read_leaderboard(published / JSON_NAME)
    manifest = [attrs for attrs in dom.find("tr", "manifest-row")]
    assert len(manifest) >= 10 * len(board.runs)
    for needle in (
        "prompt hash",
        board.runs[0].prompt_hash,
        board.runs[0].pred.sha256,
        "pytest-xdist",
        "FAKE runner",
    ):
        assert needle in page, needle


def test_the_page_is_self_contained(published, tmp_path):
    """No script, stylesheet, image, frame or font to fetch: the plots are inline SVG, drawn on the
    server side, so the page reads the same offline and with JavaScript off."""
    source = (published / HTML_NAME).read_text()
    assert not re.search(r"<script|<link|<img|<iframe|<object|<embed|@import|@font-face|url\(", source, re.I)
    assert not re.search(r"""(src|href)\s*=""", source, re.I)
    assert source.count("<svg ") == 3 and "<style>" in source
    dom = Dom(render(published / HTML_NAME, tmp_path / "profile"))  # name resolution fails for every host
    assert len(dom.rows) == 2 and len(dom.find("rect", "bar")) == 2


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
    hostile = "x/<img src=nowhere onerror=alert(1)>"
    board.models[0].model = hostile
    page = tmp_path / "hostile.html"
    page.write_text(render_html(board))
    dom = Dom(render(page, tmp_path / "profile"))
    assert dom.find("img") == []
    assert dom.rows[0][0] == hostile and dom.rows[0][1][1] == hostile
    assert [bar["data-model"] for bar in dom.find("rect", "bar")][0] == hostile
