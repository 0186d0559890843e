"""The red team's attacks on the installed-agent path, each from inside the sandbox: a bash command
of opencode's (scripted in tests/scripts/opencode_redteam_*.json) talks to the forwarder itself, as
an agent's own code can. The real opencode binary, the real sandbox and pred, the harness's metered
endpoint and the local scripted demo server; only the model's replies are scripted.

Each test is a hole the red team found, kept with its fix (docs/agents.md says what holds now).
"""

import json
import socket
import time
from pathlib import Path

import pytest

from pytest_predbench.session.demo.server import shared_server
from pytest_predbench.session.opencode import OpenCodeRunner
from pytest_predbench.session.protocol import SessionEnv, SessionResult, StopKind
from pytest_predbench.verify.environment import checked_record
from tests.support.opencode_sessions import OUTPUT_TOKENS, PRICES, TEST_MODELS, run_session
from tests.support.versions import TEST_VERSION

pytestmark = pytest.mark.slow  # end to end in subprocesses: `make test`, not `make check`


@pytest.fixture(scope="module")
def record():
    return checked_record(TEST_VERSION)


@pytest.fixture(scope="module")
def runner() -> OpenCodeRunner:
    return OpenCodeRunner(TEST_MODELS)


def run(runner, record, root: Path, model: str) -> tuple[SessionEnv, SessionResult]:
    return run_session(runner, record, root, model, prefix="redteam")


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
    text requests right after (two text parts, plain text) are answered and booked."""
    env, result = run(runner, record, tmp_path, "demo/opencode_redteam_fetch")
    assert not [h for h in lookups if "predbench-exfil" in h], lookups
    assert result.stop.kind is StopKind.FINISHED, result.stop
    trajectory = json.loads(Path(result.trajectory_path).read_text())
    output = "".join(str(m.get("content")) for m in trajectory["messages"] if m.get("role") == "tool")
    replies = [line for line in output.splitlines() if line.startswith("REPLY")]
    assert len(replies) == 3 and "400" in replies[0] and "only text" in replies[0], replies
    # content as two text parts broke the cache marks before (an assertion in the handler: no answer)
    assert all(" 200 " in r and "a plain answer" in r for r in replies[1:]), replies
    assert "opencode_redteam" not in replies[2], "the reply names the model the harness called"
    assert 3 in [u.turn for u in served(env)]
    assert result.accounting.dollars == pytest.approx(billed(env))


def test_raw_requests_are_each_answered_once_and_booked(runner, record, tmp_path):
    """What held (kept as a regression test): the agent talks HTTP to the forwarder and the socket
    itself. Pipelined and kept-alive requests get one answer per connection; a chunked body naming
    another model, provider, key and base with a huge max_tokens and n=8 is made as the harness's
    call (one choice, the harness's output limit); the socket straight is the same endpoint; a
    refused request echoes none of its headers and nothing of the harness's (the demo key, the
    provider's address); a reply the agent never reads is booked all the same. Every call the
    provider answered is booked at its usage, and nothing more."""
    from pytest_predbench.session.miniswe import DEMO_API_KEY

    env, result = run(runner, record, tmp_path, "demo/opencode_redteam_raw")
    assert result.stop.kind is StopKind.FINISHED, result.stop
    trajectory = json.loads(Path(result.trajectory_path).read_text())
    output = "".join(str(m.get("content")) for m in trajectory["messages"] if m.get("role") == "tool")
    lines = {line.split(" ", 1)[0]: line for line in output.splitlines() if line.split(" ", 1)[0].isupper()}
    assert lines["PIPELINED"] == "PIPELINED 1" and lines["KEEPALIVE"] == "KEEPALIVE 1", lines
    assert lines["CHUNKED"] == "CHUNKED HTTP/1.1 200 OK 2 0", lines  # one choice: its delta and its end
    assert lines["UNIX"] == "UNIX HTTP/1.1 200 OK" and "RAW-DONE" in lines, lines
    refused = [line for line in output.splitlines() if line.startswith("REFUSED")]
    assert len(refused) == 2 and " 404 " in refused[0] and " 400 " in refused[1], refused
    for secret in ("sk-agent", "X-Probe", DEMO_API_KEY, f":{shared_server().port}"):
        assert secret not in output, secret
    third = [u for u in served(env) if u.turn == 3]
    assert len(third) == 5, "pipelined, kept alive, chunked, the socket, the unread reply: one call each"
    assert all(u.completion_tokens <= OUTPUT_TOKENS for u in third)
    assert result.accounting.model_calls == len(served(env))
    assert result.accounting.dollars == pytest.approx(billed(env))


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


class PeakRss:
    """The harness process's resident memory, sampled every 20 ms while the block runs."""

    def __enter__(self) -> "PeakRss":
        import threading

        self.base = self.peak = rss_bytes()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()
        return self

    def _sample(self) -> None:
        while not self.done.wait(0.02):
            self.peak = max(self.peak, rss_bytes())

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join()
        self.peak = max(self.peak, rss_bytes())

    @property
    def growth(self) -> int:
        return self.peak - self.base


FLOOD_GROWTH = 100 * 1024 * 1024


def test_a_flood_of_dear_bodies_cannot_swell_the_harness(runner, record, tmp_path):
    """Eight requests, four at a time, each 8 MiB of `{},`: the endpoint decoded every body in the
    harness (outside the session's memory bound), ~210 MB each, several at once. Now a body with
    more objects and arrays than any prompt is refused (413) undecoded, and one body is decoded at a
    time. Contrast: decoding one such body here grows this process by more than the bound."""
    import json as json_module

    warm, _ = run(runner, record, tmp_path / "warm-up", "demo/opencode_redteam_idle")  # first-session allocations
    assert served(warm), "the warm-up session made its calls"
    with PeakRss() as peak:
        env, result = run(runner, record, tmp_path, "demo/opencode_redteam_flood")
    assert peak.growth < FLOOD_GROWTH, f"the harness grew by {peak.growth / 2**20:.0f} MiB"
    assert result.stop.kind is StopKind.FINISHED, result.stop
    trajectory = json.loads(Path(result.trajectory_path).read_text())
    output = "".join(str(m.get("content")) for m in trajectory["messages"] if m.get("role") == "tool")
    # counted, not split in lines: the script's eight threads may print into one another's lines
    assert output.count("FLOOD") == output.count("FLOOD HTTP/1.1 413 ") == 8, output[-2000:]
    n = (8 * 1024 * 1024 - 30) // 3
    with PeakRss() as contrast:
        decoded = json_module.loads(b'{"messages": [' + b"{}," * (n - 1) + b"{}]}")
    assert len(decoded["messages"]) == n and contrast.growth > FLOOD_GROWTH


@pytest.fixture(scope="module")
def provoked(runner, record, tmp_path_factory) -> tuple[SessionEnv, SessionResult]:
    """A session whose agent sends a request the provider fails on every time (a 500; in earnest, a
    request a provider errs on, or a generation longer than the call timeout)."""
    return run(runner, record, tmp_path_factory.mktemp("provoked"), "demo/opencode_redteam_infra")


def test_a_failed_call_tells_the_agent_nothing_of_the_provider(provoked):
    """The refusal of a failed call carried the provider's error line, and litellm's names the URL it
    called: the harness's provider address (a proxy's, a port on the host) read inside the sandbox.
    Now the agent gets the failure's class; the trajectory keeps the whole line. Contrast: the
    session's stop detail (outside the sandbox) names the URL."""
    env, result = provoked
    trajectory = json.loads(Path(result.trajectory_path).read_text())
    # the session ended at the failure, before a request carried the command's output: opencode's events hold it
    output = json.dumps(trajectory["events"])
    failed = [part for part in output.split('"output": "')[1:] if part.startswith("FAILED-CALL")]
    assert len(failed) >= 1 and " 502 " in failed[0] and "InternalServerError" in failed[0], failed
    address = f"127.0.0.1:{shared_server().port}"
    assert address in result.stop.detail, result.stop.detail
    assert address not in output and "scripted internal server error" not in output, failed


def test_a_failure_the_agent_provokes_is_its_own_result_and_an_outage_stays_infrastructure(
    provoked, runner, record, tmp_path
):
    """The agent's own code sends a request the provider fails on (`provoked`). It used to end the session
    as infra_error: re-run, leaving no result (a false certificate erased, a re-roll). Now the harness
    asks the provider its own smallest request right after (MeteredCalls._probed): answered,
    so the failure was the request's, the session's own result (error), the probe booked like any call.
    Contrast: when the provider fails every request (an outage), the probe fails too, and it stays infra."""
    env, result = provoked
    assert served(env), "the session's own calls were answered"
    assert result.stop.kind is StopKind.ERROR, result.stop
    assert "the agent's own request" in result.stop.detail
    calls = json.loads(Path(result.trajectory_path).read_text())["model_calls"]
    probes = [c for c in calls if c.get("health_probe")]
    assert len(probes) == 1 and probes[0]["cost"] > 0
    assert result.accounting.model_calls == len(served(env)), "the probe is booked like any answered call"

    outage_env, outage = run(runner, record, tmp_path, "demo/opencode_outage")
    assert outage.stop.kind is StopKind.INFRA_ERROR, outage.stop
    assert served(outage_env) == [] and outage.accounting.dollars == 0
