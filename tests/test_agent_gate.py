"""The preflight's agent gate (run/agent_gate.py) with the real opencode binary in its real session
sandbox, the real forwarder and the real metered endpoint: it passes on the real setup, and each
fault it guards against (a binary not at the pin, a key in the agent's environment or config, an
endpoint the sandbox cannot reach) fails it with one line naming the agent, never the key."""

import pytest

from pytest_predbench.run import agent_gate
from pytest_predbench.run.preflight import GateStatus, failures, run_gates
from pytest_predbench.run.preflight import agent_gate as gate
from pytest_predbench.session import opencode
from pytest_predbench.session.protocol import SessionLimits
from pytest_predbench.verify.environment import checked_record
from tests.support.versions import TEST_VERSION

pytestmark = pytest.mark.slow  # the real sandbox and binary

CANARY = "sk-predbench-canary-7f3a"


@pytest.fixture(scope="module")
def record():
    return checked_record(TEST_VERSION)


@pytest.fixture
def key(monkeypatch) -> dict[str, str]:
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    keys = agent_gate.held_keys()
    assert keys["OPENAI_API_KEY"] == CANARY
    return keys


def failed_line(result) -> str:  # noqa: ANN001
    assert result.status is GateStatus.FAILED, result.line
    assert "\n" not in result.line and CANARY not in result.line
    assert result.line.startswith("preflight agent opencode: FAILED: opencode: ")
    return result.line


def test_a_run_with_opencode_passes_the_agent_gate_and_spends_nothing(record, key):
    results = {
        r.gate: r
        for r in run_gates(
            ["demo/finder"], "mini-swe", SessionLimits(), agents=["mini-swe", "opencode"], version=TEST_VERSION
        )
    }
    assert failures(results.values()) == [], [r.line for r in results.values()]
    passed = results["agent opencode"]
    assert "opencode 1.18.33 (pinned 1.18.33)" in passed.detail and "no provider call" in passed.detail
    assert passed.dollars == 0
    # contrast: a run of mini-swe alone has no agent gate
    alone = run_gates(["demo/finder"], "mini-swe", SessionLimits(), agents=["mini-swe"], version=TEST_VERSION)
    assert "agent opencode" not in {r.gate for r in alone}


def test_a_binary_not_at_the_pinned_version_fails(record, key):
    problems, _ = agent_gate.opencode_check(record, SessionLimits(), key, version="1.18.34")
    assert problems == [
        "expected version 1.18.34, found 1.18.33 (`/predbench/opencode/bin/opencode --version` inside the sandbox)"
    ]
    assert agent_gate.opencode_check(record, SessionLimits(), key)[0] == []  # contrast: the pin


def test_a_key_in_the_agent_s_environment_fails_naming_the_variable(record, key, monkeypatch):
    real = opencode.agent_environment
    monkeypatch.setattr(opencode, "agent_environment", lambda: {**real(), "LEAKED": CANARY})
    line = failed_line(gate(record, "opencode", SessionLimits(), key))
    assert "the value of OPENAI_API_KEY is visible inside the sandbox: in its environment as LEAKED" in line


def test_a_key_in_the_agent_s_config_fails_naming_the_file(record, key, monkeypatch):
    real = opencode.opencode_config

    def leaky(limits):  # noqa: ANN001, ANN202
        config = real(limits)
        config["provider"][opencode.PROVIDER]["options"]["apiKey"] = CANARY
        return config

    monkeypatch.setattr(opencode, "opencode_config", leaky)
    line = failed_line(gate(record, "opencode", SessionLimits(), key))
    assert "the value of OPENAI_API_KEY is visible inside the sandbox: in /predbench/agent/opencode.json" in line


def test_an_endpoint_socket_removed_fails(record, key, monkeypatch):
    class Gone(opencode.Endpoint):
        def __init__(self, *args, **kwargs):  # noqa: ANN002, ANN003
            super().__init__(*args, **kwargs)
            self.path.unlink()

    monkeypatch.setattr(opencode, "Endpoint", Gone)
    line = failed_line(gate(record, "opencode", SessionLimits(), key))
    assert "the metered endpoint is not reachable from inside the sandbox" in line


def test_a_forwarder_not_started_fails(record, key, monkeypatch):
    monkeypatch.setattr(opencode, "START_FORWARDER", "true")
    line = failed_line(gate(record, "opencode", SessionLimits(), key))
    assert "the metered endpoint is not reachable from inside the sandbox" in line and "Connection refused" in line
