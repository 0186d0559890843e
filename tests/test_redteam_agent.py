"""The red team's attacks on the installed-agent path, each from inside the sandbox: a bash command
of opencode's (scripted in tests/scripts/opencode_redteam_*.json) talks to the forwarder itself, as
an agent's own code can. The real opencode binary, the real sandbox and pred, the harness's metered
endpoint and the local scripted demo server; only the model's replies are scripted.

Each test is a hole the red team found, kept with its fix (docs/agents.md says what holds now).
"""

import json
import socket
import time
import uuid
from pathlib import Path

import pytest

from pytest_predbench.session.demo.server import shared_server
from pytest_predbench.session.opencode import OpenCodeRunner
from pytest_predbench.session.protocol import SessionEnv, SessionLimits, SessionResult, StopKind
from pytest_predbench.verify.environment import checked_record
from tests.support.versions import TEST_VERSION

pytestmark = pytest.mark.slow  # end to end in subprocesses: `make test`, not `make check`

SCRIPTS = Path(__file__).resolve().parent / "scripts"
PRICES = {"in": 1e-6, "out": 4e-6}  # tests/scripts/models.toml
OUTPUT_TOKENS = 1000


@pytest.fixture(scope="module")
def record():
    return checked_record(TEST_VERSION)


@pytest.fixture(scope="module")
def runner() -> OpenCodeRunner:
    return OpenCodeRunner(SCRIPTS / "models.toml")


def run(runner, record, root: Path, model: str) -> tuple[SessionEnv, SessionResult]:
    env = SessionEnv(
        pred_version=record.pred_version,
        pred_path=record.pred_path,
        source_dir=record.source_dir,
        extractor_path=record.extractor_path,
        workdir=str(root / "scratch"),
        trajectory_path=str(root / "trajectory.json"),
        session_id=f"redteam-{uuid.uuid4().hex}",
    )
    return env, runner.run(env, model, SessionLimits(max_output_tokens=OUTPUT_TOKENS))


def billed(env: SessionEnv) -> float:
    """What the scripted provider answered for the session, at its prices: what it would bill."""
    return sum(u.prompt_tokens * PRICES["in"] + u.completion_tokens * PRICES["out"] for u in served(env))


def served(env: SessionEnv) -> list:
    return shared_server().usage_for(env.session_id)


def kept(result: SessionResult) -> dict:
    """The result as the trajectory keeps it (what the run books), read back from the file."""
    return json.loads(Path(result.trajectory_path).read_text())["info"]["predbench"]


def test_a_call_in_flight_when_the_sandbox_ends_is_booked(runner, record, tmp_path):
    """The agent sends a call of its own that the provider takes 8 s to answer, then kills opencode:
    the sandbox ends with that call in flight. Before the fix the session's books were closed
    without it (the provider billed a call nobody booked: spend above the books, and so above the
    cap). Now the session's end books a call in flight at its worst case, and the answer that comes
    later changes nothing. Contrast: the calls answered before (the title and the first turn) are
    booked at the provider's usage, as every call is."""
    env, result = run(runner, record, tmp_path, "demo/opencode_redteam_inflight")
    assert result.stop.kind is StopKind.ERROR and "opencode exited" in result.stop.detail, result.stop
    turns = sorted(u.turn for u in served(env))
    assert 3 in turns, f"the agent's own call reached the provider: {turns}"
    books = kept(result)["accounting"]
    answered = [u for u in served(env) if u.turn != 3]
    assert books["model_calls"] == len(answered), "the in-flight call was not answered in the session"
    time.sleep(8)  # the provider answers the call in flight; nothing is booked twice
    assert billed(env) <= books["dollars"] + 1e-12, (billed(env), books["dollars"])
    assert result.accounting.dollars == pytest.approx(books["dollars"])
    calls = json.loads(Path(result.trajectory_path).read_text())["model_calls"]
    assert [c for c in calls if "in_flight_at_end" in c], calls


@pytest.fixture
def lookups(monkeypatch) -> list[str]:
    """Every host name the harness's process resolves while the test runs (a spy: it resolves them)."""
    seen: list[str] = []
    real = socket.getaddrinfo

    def spy(host, *args, **kwargs):
        seen.append(str(host))
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", spy)
    return seen


def test_the_agent_cannot_make_the_harness_fetch_a_url(runner, record, tmp_path, lookups):
    """A request with an image part whose URL names a host of the agent's choosing: litellm's token
    counter, run by the harness outside the sandbox, resolved that host and fetched the URL to
    measure the image (a way out of the network-less sandbox, and an image the harness counts by
    estimate). Now only text reaches the counter and the provider: the request is refused with a
    one-line reason, nothing is resolved, and the session goes on. Contrast: the same agent's
    plain-text request right after is answered and booked."""
    env, result = run(runner, record, tmp_path, "demo/opencode_redteam_fetch")
    assert not [h for h in lookups if "predbench-exfil" in h], lookups
    assert result.stop.kind is StopKind.FINISHED, result.stop
    trajectory = json.loads(Path(result.trajectory_path).read_text())
    output = "".join(str(m.get("content")) for m in trajectory["messages"] if m.get("role") == "tool")
    replies = [line for line in output.splitlines() if line.startswith("REPLY")]
    assert len(replies) == 2 and "400" in replies[0] and "text" in replies[0], replies
    assert " 200 " in replies[1] and "a plain answer" in replies[1], replies
    assert "opencode_redteam" not in replies[1], "the reply names the model the harness called"
    assert 3 in [u.turn for u in served(env)]
    assert result.accounting.dollars == pytest.approx(billed(env))
