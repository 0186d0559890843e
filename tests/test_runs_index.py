"""`predbench runs --html` (issue 32): the local runs as one page, as `inspect view` lists its logs. Real
fake-runner runs (no certificate, so no pred), one reported and named, one neither; then an item record
of the named run is lost, its report refused, and the page says the run is unreadable and its
leaderboard stale."""

import html
import re

from tests.support.report_runs import fake_run, item_file, predbench, report


def rows(page: str) -> dict[str, tuple[list[str], list[str]]]:
    """Each listed run: (its cells' text, the links in its row)."""
    found = {}
    for run, body in re.findall(r'<tr class="run-row" data-run="([^"]*)">(.*?)</tr>', page, re.S):
        cells = [
            html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", body, re.S)
        ]
        found[html.unescape(run)] = (cells, re.findall(r'href="([^"]+)"', body))
    return found


def test_the_index_lists_every_run_and_links_the_leaderboards_there_are(tmp_path):
    reports = tmp_path / "reports"
    named = fake_run(reports / "20261207-101500-aaaaaa", models="a/x", extra=("--run-name", "pilot <1>"))
    fake_run(reports / "plain", models="a/x,b/y", sessions=1)
    assert report(str(named)).returncode == 0
    done = predbench("runs", str(reports), "--html")
    assert done.returncode == 0, done.stderr
    page = reports / "index.html"
    assert done.stdout.splitlines()[-1] == f"open {page.as_uri()}" and "pilot <1>" in done.stdout
    listed = rows(page.read_text())
    assert list(listed) == ["plain", "20261207-101500-aaaaaa"]  # newest (by id) first, as `predbench runs`
    cells, links = listed["20261207-101500-aaaaaa"]
    named_row = ["20261207-101500-aaaaaa", "pilot <1>", "2026-12-07 10:15", "a/x", "finished (2 done, 0 skipped)"]
    assert cells[:6] == [*named_row, "2 of 2"]
    assert cells[6].endswith("/ $0.2000") and cells[7] == "leaderboard"
    assert links == ["20261207-101500-aaaaaa/leaderboard.html"] and (reports / links[0]).is_file()
    cells, links = listed["plain"]  # the contrast: a run without a name or a report
    assert cells[1] == "" and cells[3] == "a/x, b/y" and cells[5] == "2 of 2" and cells[7] == "none yet" and links == []
    assert "<script" not in page.read_text() and "&lt;1&gt;" in page.read_text()  # a name is user input: escaped

    item_file(named, "a/x-s02").unlink()
    assert report(str(named)).returncode == 1  # refused: the page it left is marked stale
    assert predbench("runs", str(reports), "--html").returncode == 0
    cells, links = rows(page.read_text())["20261207-101500-aaaaaa"]
    assert cells[4].startswith("unreadable: ") and "ledger.json" in cells[4], cells  # a record gone: it says so
    assert "stale" in cells[7] and links == ["20261207-101500-aaaaaa/leaderboard.html"]
    assert "stale" not in rows(page.read_text())["plain"][0][7]


def test_without_html_nothing_is_written_and_a_missing_directory_is_one_line(tmp_path):
    fake_run(tmp_path / "one", models="a/x", sessions=1)
    assert predbench("runs", str(tmp_path)).returncode == 0 and not (tmp_path / "index.html").exists()
    missing = predbench("runs", str(tmp_path / "nowhere"), "--html")
    assert (
        missing.returncode == 2
        and missing.stderr.strip() == f"predbench: error: no such directory: {tmp_path / 'nowhere'}"
    )
