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


def bench(ws: Workspace, run_dir, *agents: str) -> None:
    proc = ws.pytest(
        "bench_sessions", "--agents", ",".join(agents), "--models", "demo/finder", "--sessions", "1",
        f"--run-dir={run_dir}", timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]


@pytest.fixture(scope="module")
def two_agents(tmp_path_factory):
    root = tmp_path_factory.mktemp("agents")
    bench(Workspace(root), root / "run", "mini-swe", "opencode")
    return root


def test_two_agents_each_find_the_demo_bug_and_each_pair_is_one_row(two_agents, tmp_path):
    run_dir = two_agents / "run"
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


def test_compare_keeps_each_agent_s_row_apart(two_agents, tmp_path):
    """`predbench report A B --compare`: a run of mini-swe alone beside the run of both; the pairs are
    named by entrant, so opencode's row is never taken for the mini-swe one of the same model."""
    one = tmp_path / "one"
    bench(Workspace(tmp_path), one, "mini-swe")
    comparison = leaderboard.compare([two_agents / "run", one], tmp_path / "compare")
    rows = [[(row.runner, row.model) for row in board.models] for board in comparison.boards]
    assert sorted(rows[0]) == [("mini-swe", "demo/finder"), ("opencode", "opencode:demo/finder")]
    assert rows[1] == [("mini-swe", "demo/finder")], "contrast: the one-agent run has the one row"
    assert [board.runs[0].runner for board in comparison.boards] == ["mini-swe, opencode", "mini-swe"]
    names = {name for pair in comparison.pairwise for name in (pair.a, pair.b)}
    assert sum("opencode:demo/finder" in name for name in names) == 1 and len(names) == 3
