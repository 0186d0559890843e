"""OpenCodeRunner end to end: the real opencode binary (installed into the predbench cache on first
use) inside the real sandbox with the real pred, reaching the demo server only through the
harness's metered endpoint. Only the model's replies are scripted (tests/scripts/opencode_*.json).
"""

import json
import math
import uuid
from pathlib import Path

import pytest

from pytest_predbench.session.demo.server import shared_server
from pytest_predbench.session.opencode import OpenCodeRunner
from pytest_predbench.session.protocol import SessionEnv, SessionLimits, SessionResult, StopKind
from pytest_predbench.verify.environment import checked_record
from tests.support.opencode_sessions import OUTPUT_TOKENS, PRICES, SCRIPTS, TEST_MODELS, run_session
from tests.support.versions import TEST_VERSION

pytestmark = pytest.mark.slow  # end to end in subprocesses: `make test`, not `make check`

MODEL = "demo/opencode_finder"


@pytest.fixture(scope="module")
def record():
    return checked_record(TEST_VERSION)


@pytest.fixture(scope="module")
def runner() -> OpenCodeRunner:
    return OpenCodeRunner(TEST_MODELS)


def run(runner, record, root: Path, **limits) -> tuple[SessionEnv, SessionResult]:
    return run_session(runner, record, root, MODEL, **limits)


def served_calls(env: SessionEnv) -> list:
    """What the scripted provider answered for this session (its own usage log)."""
    return shared_server().usage_for(env.session_id)


@pytest.fixture(scope="module")
def finder(runner, record, tmp_path_factory):
    return run(runner, record, tmp_path_factory.mktemp("opencode-finder"))


def test_opencode_runs_pred_and_submits_a_certificate_the_verifier_accepts(finder):
    from pytest_predbench.verify.verifier import verify

    env, result = finder
    assert result.runner == "opencode"
    assert result.stop.kind is StopKind.FINISHED, result.stop
    assert len(result.certificates) == 1
    verdict = verify(result.certificates[0], checked_record(TEST_VERSION))
    assert verdict.accepted, verdict.reason
    # its pred calls went through the gateway and were booked (evaluate, reduce, solve)
    assert result.accounting.pred_calls == len(result.pred_log) >= 3
    assert result.accounting.shell_actions == 1


def test_every_model_call_the_agent_made_is_booked(finder):
    """opencode's title request and its agent turns: each one the provider answered is booked, at
    the provider's usage (the harness's count equals the scripted server's)."""
    env, result = finder
    served = served_calls(env)
    assert len(served) >= 3  # the title request and two agent turns
    assert result.accounting.model_calls == len(served)
    assert result.accounting.prompt_tokens == sum(u.prompt_tokens for u in served)
    expected = sum(u.prompt_tokens * PRICES["in"] + u.completion_tokens * PRICES["out"] for u in served)
    assert math.isclose(result.accounting.dollars, expected, rel_tol=1e-9)
    trajectory = json.loads(Path(result.trajectory_path).read_text())
    assert len([c for c in trajectory["model_calls"] if "reply" in c]) == len(served)
    assert trajectory["info"]["agent"] == {"name": "opencode", "version": "1.18.33"}


CANARY = "sk-predbench-canary-7f3a"  # what tests/scripts/opencode_snoop.json looks for (base64 there)


def snoop_probe() -> str:
    """The script's probe (its one bash command), to run on the host as the contrast."""
    return json.loads((SCRIPTS / "opencode_snoop.json").read_text())["turns"][0]["bash"]


def test_no_key_is_visible_inside_the_sandbox(runner, record, tmp_path, monkeypatch):
    """The harness holds the provider's key; the agent, looking everywhere it can read (its
    environment, every file under its directories, every process's environment), finds none.
    Contrast: the same probe run on the host finds the key in its environment."""
    import subprocess

    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", CANARY)
    host = subprocess.run(["bash", "-c", snoop_probe()], capture_output=True, text=True, timeout=120, check=True)
    assert "OPENAI_API_KEY" in host.stdout, host.stdout[-500:]
    env = SessionEnv(
        pred_version=record.pred_version,
        pred_path=record.pred_path,
        source_dir=record.source_dir,
        workdir=str(tmp_path / "scratch"),
        trajectory_path=str(tmp_path / "trajectory.json"),
        session_id=f"test-{uuid.uuid4().hex}",
    )
    result = runner.run(env, "demo/opencode_snoop", SessionLimits(max_output_tokens=OUTPUT_TOKENS))
    assert result.stop.kind is StopKind.FINISHED, result.stop
    messages = json.loads(Path(result.trajectory_path).read_text())["messages"]
    outputs = [str(m.get("content")) for m in messages if m.get("role") == "tool"]
    assert len(outputs) == 1 and "SNOOP-FOUND []" in outputs[0], outputs
    assert CANARY not in Path(result.trajectory_path).read_text()


def test_the_cap_refuses_the_second_call(runner, record, finder, tmp_path):
    """A session whose ceiling fits one call's worst case but not two: the endpoint refuses the
    second before the provider sees it, and the books hold what was answered."""
    _, uncapped = finder
    answered = [c for c in json.loads(Path(uncapped.trajectory_path).read_text())["model_calls"] if "reply" in c]
    # every call of the uncapped session: its worst case, at the prompt as reserved and the full output
    worst = [c["prompt_tokens_counted"] * PRICES["in"] + OUTPUT_TOKENS * PRICES["out"] for c in answered]
    cap = max(worst[:2]) + 1e-9  # the bigger of the first two fits alone; after either, the other cannot
    assert cap < uncapped.accounting.dollars
    env, result = run(runner, record, tmp_path, dollars=cap)
    assert result.stop.kind is StopKind.COST_LIMIT, result.stop
    assert result.accounting.model_calls == len(served_calls(env)) == 1
    assert result.accounting.dollars <= cap
    assert result.certificates == []


def test_a_run_with_runner_opencode_books_each_session_s_calls_in_the_ledger(tmp_path, record):
    """`pytest bench_sessions --runner opencode`: the item passes with its certificate verified, and
    the ledger's charge for it is what the session's metered calls cost, call by call."""
    from pytest_predbench.state.records import ItemStatus
    from tests.support.acceptance import RunView, Workspace

    ws, run_dir = Workspace(tmp_path), tmp_path / "run"
    proc = ws.pytest(
        "bench_sessions",
        "--runner",
        "opencode",
        "--models",
        MODEL,
        f"--model-settings={TEST_MODELS}",
        "--sessions",
        "1",
        "--max-output-tokens",
        str(OUTPUT_TOKENS),
        f"--run-dir={run_dir}",
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    view = RunView.load(run_dir)
    key = f"opencode:{MODEL}-s01"  # an entrant of another agent than the default carries its agent
    item = view.records[key]
    assert item.status is ItemStatus.PASSED and item.runner == "opencode"
    assert item.result.stop.kind is StopKind.FINISHED and len(item.result.certificates) == 1
    trajectory = json.loads((run_dir / item.result.trajectory_path).read_text())  # recorded relative to the run
    answered = [c for c in trajectory["model_calls"] if "reply" in c]
    assert len(answered) == item.result.accounting.model_calls >= 3
    charged = sum(c.dollars for c in view.ledger.charges_for(key))
    assert charged == pytest.approx(sum(c["cost"] for c in answered)) == pytest.approx(item.result.accounting.dollars)
