"""The researcher's workbench end to end, in subprocesses with the real pred: the demo run published
with a page per session (every step of the scripted session, its certificate's verdict), the data
layer on a run while its sessions are in flight and once it is over, and the live table printed on its
timer while a baseline session runs for many seconds without an item ending."""

import html
import json
import os
import re
import signal
import time

import pandas
import pytest

from pytest_predbench.analysis import certificates_df, sessions_df, steps_df
from pytest_predbench.report.leaderboard import HTML_NAME
from pytest_predbench.state.audit import read_snapshot
from tests.support.acceptance import REPO, Workspace, fake_args
from tests.support.report_runs import report

pytestmark = pytest.mark.slow  # end to end in subprocesses: `make test`, not `make check`

SCRIPTS = REPO / "pytest_predbench" / "session" / "demo" / "scripts"


def turns(name: str) -> list[dict]:
    return json.loads((SCRIPTS / f"{name}.json").read_text())["turns"]


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """`make bench`'s run and report, in a scratch directory."""
    root = tmp_path_factory.mktemp("demo")
    run = root / "run"
    bench = Workspace(root).pytest("bench_sessions", "--models", "demo/finder,demo/idle", f"--run-dir={run}", "-n", "2")
    assert bench.returncode == 0, bench.stdout[-3000:]
    published = report(str(run))
    assert published.returncode == 0, published.stderr
    return run, published.stdout


def texts(page: str, pattern: str) -> list[str]:
    return [html.unescape(found) for found in re.findall(pattern, page, re.S)]


def test_the_report_says_where_the_leaderboard_is_and_links_each_session_to_its_page(demo):
    run, printed = demo
    assert f"open {(run / HTML_NAME).as_uri()}" in printed and "next: predbench status" in printed
    board = (run / HTML_NAME).read_text()
    pages = texts(board, r'<a class="session" href="([^"]+)"')
    assert pages[:2] == ["sessions/demo__finder-s01.html", "sessions/demo__idle-s01.html"]
    assert pages[2:] == ["sessions/demo__finder-s01.html"]  # the finding links its session too
    assert all((run / page).is_file() for page in pages)


@pytest.mark.parametrize("model", ["finder", "idle"])
def test_each_session_page_shows_every_step_and_the_verdict(demo, model):
    run, _ = demo
    page = (run / "sessions" / f"demo__{model}-s01.html").read_text()
    script = turns(model)
    assert len(re.findall(r'<section class="step"', page)) == len(script)
    assert texts(page, r'<pre class="command">\$ (.*?)</pre>') == [turn["bash"] for turn in script]
    assert texts(page, r'<div class="message">(.*?)</div>') == [turn["say"] for turn in script]
    harness = texts(page, r'<p class="harness"><code>(.*?)</code>')
    assert len(harness) == len(script) - 1 or len(harness) == len(script)  # the finish command may end it
    assert all(line.startswith("[harness] used ") for line in harness)
    assert "<script" not in page and "mini-extra inspector" in page
    if model == "finder":
        assert 'class="certificate ok"' in page and "accepted" in page and "MinimumVertexCover" in page
        assert len(re.findall(r'<li class="check ok">', page)) >= 3 and '<details class="evidence">' in page
        assert '<details class="observation">' in page  # `pred list --rules` is long: collapsed
    else:
        assert "The session submitted no certificate." in page


def test_the_data_layer_and_the_parquet_files_of_the_demo_run(demo):
    run, _ = demo
    sessions = pandas.read_parquet(run / "sessions.parquet")
    assert list(sessions["item"]) == ["demo/finder-s01", "demo/idle-s01"] and set(sessions["state"]) == {"done"}
    assert list(sessions["steps"]) == [len(turns("finder")), len(turns("idle"))]
    certificates = pandas.read_parquet(run / "certificates.parquet")
    assert list(certificates["accepted"]) == [True] and list(certificates["known_bugs"].map(list)) != [[]]
    assert certificates_df(run).equals(certificates) or len(certificates_df(run)) == 1
    steps = steps_df(run)
    assert len(steps) == len(turns("finder")) + len(turns("idle")) and set(steps["trajectory"]) == {"mini-swe-agent"}


def test_sessions_df_on_a_run_while_its_sessions_are_in_flight(tmp_path):
    run = tmp_path / "run"
    args = fake_args(run, "--sessions", "2", "--budget", "0.2", "--fake-seconds", "6", "-n", "2", models=("a/x", "b/y"))
    proc = Workspace(tmp_path).start(*args, log=tmp_path / "log")
    try:
        live = None
        for _ in range(600):
            if (run / "ledger.json").is_file() and read_snapshot(run).ledger.reservations:
                live = sessions_df(run)
                break
            time.sleep(0.1)
        assert proc.wait(timeout=300) == 0, (tmp_path / "log").read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert live is not None and len(live) == 4
    assert "running" in set(live["state"]) and not live["complete"].all()
    assert set(live["state"]) <= {"running", "waiting", "done"}
    done = sessions_df(run)
    assert list(done["item"]) == list(live["item"]) and set(done["state"]) == {"done"} and done["complete"].all()


def test_the_live_table_appears_on_its_timer_during_a_baseline_run(tmp_path):
    run = tmp_path / "run"
    every = 3
    args = ("bench_sessions", "--models", "baseline/random", "--max-pred-calls", "60", f"--run-dir={run}")
    bench = Workspace(tmp_path).pytest(*args, "-n", "2", "--progress-every", str(every))
    assert bench.returncode == 0, bench.stdout[-3000:]
    moments = [int(s) for s in re.findall(r"predbench progress after (\d+)s", bench.stdout)]
    wall = read_snapshot(run).by_item()["baseline/random-s01"].result.accounting.wall_seconds
    assert wall > 3 * every, f"the session ran {wall:.0f} s: too short to show the timer"
    assert len(moments) >= int(wall // every) - 1, (moments, wall)
    gaps = [b - a for a, b in zip([0, *moments], moments, strict=False)]
    assert max(gaps) <= every + 2, gaps  # a table at least every --progress-every seconds (+ the tick)
    running = re.findall(
        r"running baseline/random-s01: (\d+) step\(s\), 0 model call\(s\), (\d+) pred call", bench.stdout
    )
    assert running and int(running[-1][0]) >= 1 and int(running[-1][1]) >= 1  # its figures so far


def test_steps_df_on_a_running_session_holds_its_steps_so_far(tmp_path):
    """Issue 32: steps_df was empty for a running session. tests/scripts/held.json answers one call
    (`pred --version`), then its second hangs while the hold file exists: the session is running with
    exactly one step saved (mini-swe-agent saves its trajectory after every step, where steps_df reads)."""
    hold = tmp_path / "hold-dir"
    hold.mkdir()
    (hold / "hold").touch()
    run = tmp_path / "run"
    settings = REPO / "tests" / "scripts" / "models.toml"
    args = ("bench_sessions", "--models", "demo/held", f"--model-settings={settings}", f"--run-dir={run}")
    proc = Workspace(tmp_path).start(*args, log=tmp_path / "log", env={"PREDBENCH_HOLD_DIR": str(hold)})
    try:
        live = None
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and live is None:
            assert proc.poll() is None, (tmp_path / "log").read_text()[-3000:]
            if (run / "ledger.json").is_file() and read_snapshot(run).ledger.reservations:
                steps = steps_df(run)
                live = None if steps.empty else steps  # empty: the session started, no step saved yet
            time.sleep(0.2)
        assert live is not None, "no step of the running session within 300 s"
        time.sleep(1.0)  # into the hanging second call: still one step
        again = steps_df(run)
        running = sessions_df(run)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the run's own process group, started above
        proc.wait(timeout=60)
    assert list(live["item"]) == ["demo/held-s01"] and list(live["command"]) == ["pred --version"]
    assert live["trajectory"].tolist() == ["mini-swe-agent"] and "pred" in live["observation"].iloc[0]
    assert again.equals(live), "the call in flight adds no step"
    assert list(running["state"]) == ["running"] and not running["complete"].any()
    held = json.loads((REPO / "tests" / "scripts" / "held.json").read_text())["turns"]
    assert len(held) > len(live), "the contrast: a finished session has every step (see the demo run above)"
