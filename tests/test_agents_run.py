"""Agents x models in one run, as a user runs it: `pytest bench_sessions --agents mini-swe,opencode
--models demo/finder --sessions 1`. The real mini-swe-agent loop and the real opencode binary
(installed into the predbench cache on first use), the real pred and verifier, the demo server: each
agent finds and submits the demo bug, and the leaderboard has one row per (agent, model)."""

import pytest

from pytest_predbench.report import frames, leaderboard
from pytest_predbench.session import opencode_install
from pytest_predbench.state.records import ItemStatus
from tests.support.acceptance import RunView, Workspace, cap_violations

pytestmark = pytest.mark.slow  # end to end in subprocesses: `make test`, not `make check`

DEMO_BUG = "MinimumVertexCover -> EnsembleComputation"


def test_two_agents_each_find_the_demo_bug_and_each_pair_is_one_row(tmp_path):
    ws, run_dir = Workspace(tmp_path), tmp_path / "run"
    proc = ws.pytest(
        "bench_sessions",
        "--agents",
        "mini-swe,opencode",
        "--models",
        "demo/finder",
        "--sessions",
        "1",
        f"--run-dir={run_dir}",
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    view = RunView.load(run_dir)
    assert view.plan.agents == ["mini-swe", "opencode"]
    agents = {"demo/finder-s01": "mini-swe", "opencode:demo/finder-s01": "opencode"}
    assert set(view.records) == set(agents), "the default agent's item keeps its id; the other carries its agent"
    for key, agent in agents.items():
        record = view.records[key]
        assert record.status is ItemStatus.PASSED and record.runner == agent == record.result.runner
        assert record.model == "demo/finder" and record.verified_rules == [DEMO_BUG], key
        assert [v.accepted for v in record.verdicts] == [True], key
        assert sum(c.dollars for c in view.ledger.charges_for(key)) == pytest.approx(record.spent)
        assert record.spent > 0, key
    assert set(view.ledger.accounts) == {"demo/finder", "opencode:demo/finder"}, "one account per entrant"
    assert cap_violations(view) == []

    out = tmp_path / "report"
    board = leaderboard.build([run_dir], out=out)
    leaderboard.write_leaderboard(out, board)
    rows = {(row.runner, row.model_id): row for row in board.models}
    assert set(rows) == {("mini-swe", "demo/finder"), ("opencode", "demo/finder")}, "one row per (agent, model)"
    assert all(row.verified_bugs == 1 and row.sessions == 1 for row in rows.values())
    assert rows[("opencode", "demo/finder")].agent_version == opencode_install.VERSION
    assert rows[("mini-swe", "demo/finder")].agent_version == view.plan.packages["mini-swe-agent"]
    assert {row.model for row in board.models} == {"demo/finder", "opencode:demo/finder"}
    page = (out / "sessions" / "opencode:demo__finder-s01.html").read_text()
    assert f"runner opencode {opencode_install.VERSION}" in page, "the session page names its agent and version"
    assert "runner opencode" not in (out / "sessions" / "demo__finder-s01.html").read_text()

    sessions = frames.sessions_df(run_dir)
    assert sorted(zip(sessions["runner"], sessions["entrant"], sessions["model"], strict=True)) == [
        ("mini-swe", "demo/finder", "demo/finder"),
        ("opencode", "opencode:demo/finder", "demo/finder"),
    ]
