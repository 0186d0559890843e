"""`make bench` as a user runs it (`pytest bench_sessions -n 2 --models demo/finder,demo/idle`):
what the item records and the plan say about money, caching and limits, and the options in --help."""

import json
import subprocess
import sys

import pytest

from pytest_predbench.session.model_settings import DEMO_CACHE_PRICE, DEMO_PRICE
from pytest_predbench.session.protocol import SessionLimits, StopKind
from pytest_predbench.state.records import ItemStatus
from pytest_predbench.verify import pin
from pytest_predbench.verify.known_bugs import load_registry
from tests.support.acceptance import RunView, Workspace, cap_violations

pytestmark = pytest.mark.slow  # end to end in subprocesses: `make test`, not `make check`

NEW_OPTIONS = (
    "--max-model-calls",
    "--max-pred-calls",
    "--session-seconds",
    "--command-timeout",
    "--max-output-tokens",
    "--call-retries",
    "--prompt-cache",
)


def test_a_demo_runs_records_show_cached_tokens_and_litellm_priced_dollars(tmp_path, env_record):
    ws, run_dir = Workspace(tmp_path), tmp_path / "run"
    proc = ws.pytest("bench_sessions", "-n", "2", "--models", "demo/finder,demo/idle", f"--run-dir={run_dir}")
    assert proc.returncode == 0, proc.stdout[-3000:]
    view = RunView.load(run_dir)
    finder = view.records["demo/finder-s01"]
    assert finder.status is ItemStatus.PASSED and finder.result.stop.kind is StopKind.FINISHED
    assert finder.result.stop.detail == "the model finished with 1 certificate(s) submitted"
    acct = finder.result.accounting
    assert acct.cached_tokens > acct.prompt_tokens / 2 and acct.cache_write_tokens > 0
    fresh = acct.prompt_tokens - acct.cached_tokens - acct.cache_write_tokens
    litellm_priced = (
        fresh * DEMO_PRICE[0]
        + acct.cached_tokens * DEMO_CACHE_PRICE[0]
        + acct.cache_write_tokens * DEMO_CACHE_PRICE[1]
        + acct.completion_tokens * DEMO_PRICE[1]
    )
    assert finder.spent == acct.dollars == pytest.approx(litellm_priced)
    assert acct.dollars < acct.prompt_tokens * DEMO_PRICE[0], "cheaper than the prompt alone at full price"
    limits = view.plan.limits
    assert limits.model_dump(exclude={"dollars"}) == SessionLimits().model_dump(exclude={"dollars"})
    assert view.plan.model_identities["demo/finder"].cache_read_input_token_cost == DEMO_CACHE_PRICE[0]
    assert "preflight model demo/finder: PASSED" in proc.stdout, "the default budget affords the default limits"
    assert cap_violations(view) == []


def test_the_new_options_are_in_help(tmp_path):
    proc = Workspace(tmp_path).pytest("--help")
    assert proc.returncode == 0
    for option in NEW_OPTIONS:
        assert option in proc.stdout, option


def test_make_bench_on_a_fresh_clone_runs_on_the_default_version_and_says_so(tmp_path):
    """Nothing chose a version (the suite's own choice removed): the run stands on 0.6.0, the preflight
    and the summary say so, the demo's bug is verified on 0.6.0 and the report counts it against
    0.6.0's registry."""
    ws, run_dir = Workspace(tmp_path), tmp_path / "run"
    env = {pin.VERSION_ENV: ""}  # empty: nothing chose a version (pin.default_choice() gives the default)
    proc = ws.pytest("bench_sessions", "-n", "2", "--models", "demo/finder,demo/idle", f"--run-dir={run_dir}", env=env)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "preflight pred: PASSED: pred 0.6.0 at " in proc.stdout, proc.stdout[:3000]
    assert "  pred 0.6.0  runner " in proc.stdout, proc.stdout[-3000:]
    view = RunView.load(run_dir)
    assert view.plan.pred_version == "0.6.0" and view.plan.pred.version == "0.6.0"
    [verdict] = view.records["demo/finder-s01"].verdicts
    assert verdict.accepted and verdict.rule == "MinimumVertexCover -> EnsembleComputation"
    report = subprocess.run(
        [sys.executable, "-m", "pytest_predbench.cli", "report", str(run_dir)], env=env, capture_output=True, text=True
    )
    assert report.returncode == 0, report.stderr
    board = json.loads((run_dir / "leaderboard.json").read_text())
    assert board["runs"][0]["pred_version"] == "0.6.0" and board["reverification"]["pred_version"] == "0.6.0"
    [finder] = [row for row in board["models"] if row["model"] == "demo/finder"]
    assert finder["recall"]["known"] == len(load_registry("0.6.0").bugs)
    assert finder["recall"]["ids"] == ["minimumvertexcover-to-ensemblecomputation"]
    registry = load_registry("0.6.0")
    disclosed = sum(bug.disclosure.status == "disclosed" for bug in registry.bugs)
    assert finder["recall"]["disclosed"] == {"found": 1, "known": disclosed, "ids": finder["recall"]["ids"]}
    assert finder["recall"]["undisclosed"]["found"] == 0, "the demo's bug was public (#1052)"
    apart = f"disclosed 1 of {disclosed}; undisclosed 0 of {len(registry.bugs) - disclosed}"
    assert apart in (run_dir / "leaderboard.md").read_text() and apart in (run_dir / "leaderboard.html").read_text()
