"""MiniSweRunner end to end: the real mini-swe-agent and litellm against the demo server,
with the real pred in the real sandbox. Only the model's replies are scripted
(pytest_predbench/session/demo/scripts and tests/scripts).
"""

import json
import re
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from pytest_predbench.session.demo.server import load_script, shared_server
from pytest_predbench.session.miniswe import MiniSweRunner
from pytest_predbench.session.model_settings import DEMO_SCRIPT_DIR, UnknownModelError, load_settings, resolve
from pytest_predbench.session.prompts import prompt_hash
from pytest_predbench.session.protocol import SessionEnv, SessionLimits, SessionResult, StopKind
from pytest_predbench.verify.environment import checked_record, sha256_file
from tests.support.versions import TEST_VERSION

pytestmark = pytest.mark.slow  # end to end in subprocesses: `make test`, not `make check`

SCRIPTS = Path(__file__).resolve().parent / "scripts"
TEST_MODELS = SCRIPTS / "models.toml"
PRICES = {"in": 1e-6, "out": 4e-6}  # what tests/scripts/models.toml and DEMO_PRICE say
CACHE_PRICES = {"read": 1e-7, "write": 1.25e-6}  # DEMO_CACHE_PRICE (the test models give none)


@pytest.fixture(scope="module")
def record():
    return checked_record(TEST_VERSION)


@pytest.fixture(scope="module")
def runner() -> MiniSweRunner:
    return MiniSweRunner(TEST_MODELS)


def make_env(record, root: Path) -> SessionEnv:
    return SessionEnv(
        pred_version=record.pred_version,
        pred_path=record.pred_path,
        source_dir=record.source_dir,
        workdir=str(root / "scratch"),
        trajectory_path=str(root / "reports" / "trajectory.json"),
        session_id=f"test-{uuid.uuid4().hex}",
    )


def run(runner, record, root: Path, model: str, **limits) -> tuple[SessionEnv, SessionResult]:
    env = make_env(record, root)
    return env, runner.run(env, model, SessionLimits(**limits))


def tool_outputs(result: SessionResult) -> list[str]:
    messages = json.loads(Path(result.trajectory_path).read_text())["messages"]
    return [m["content"] for m in messages if m["role"] == "tool"]


def pred_invocations(script: Path) -> int:
    """How many times the script's commands call pred (its plain `pred ...` uses)."""
    return sum(len(re.findall(r"(?:^|[\s;&|(])pred\s", t.bash or "")) for t in load_script(script).turns)


@pytest.fixture(scope="module")
def finder(runner, record, tmp_path_factory) -> tuple[SessionEnv, SessionResult]:
    return run(runner, record, tmp_path_factory.mktemp("finder"), "demo/finder")


def verify_certificate(certificate):
    from pytest_predbench.verify.verifier import verify

    return verify(certificate, checked_record(TEST_VERSION))


# -- (a) demo/finder ------------------------------------------------------------------------------


def test_finder_submits_one_certificate_the_verifier_accepts(finder):
    _, result = finder
    assert result.stop.kind is StopKind.FINISHED
    assert result.stop.detail == "the model finished with 1 certificate(s) submitted"
    assert result.runner == "mini-swe" and result.model == "demo/finder"
    assert len(result.certificates) == 1
    verdict = verify_certificate(result.certificates[0])
    assert verdict.accepted, verdict.reason


def test_finder_accounting_is_the_servers_usage_as_litellm_prices_it(finder):
    env, result = finder
    usage = shared_server().usage_for(env.session_id)
    acct = result.accounting
    assert len(usage) == acct.model_calls > 0
    assert acct.prompt_tokens == sum(u.prompt_tokens for u in usage)
    assert acct.completion_tokens == sum(u.completion_tokens for u in usage)
    assert acct.cached_tokens == sum(u.cached_tokens for u in usage) > acct.prompt_tokens / 2, "the prefix is cached"
    assert acct.cache_write_tokens == sum(u.cache_write_tokens for u in usage) > 0
    uncached = acct.prompt_tokens - acct.cached_tokens - acct.cache_write_tokens
    assert acct.dollars == pytest.approx(
        uncached * PRICES["in"]
        + acct.cached_tokens * CACHE_PRICES["read"]
        + acct.cache_write_tokens * CACHE_PRICES["write"]
        + acct.completion_tokens * PRICES["out"]
    )
    assert acct.dollars <= SessionLimits().dollars
    assert acct.shell_actions == acct.model_calls
    assert acct.pred_calls == pred_invocations(DEMO_SCRIPT_DIR / "finder.json")
    assert acct.wall_seconds > 0


def test_without_prompt_caching_the_same_session_costs_more(runner, record, tmp_path, finder):
    """The contrast (--prompt-cache off): no cache marks are sent, nothing is cached, every prompt
    token is paid in full, and the session is at least twice as dear."""
    _, cached = finder
    env, result = run(runner, record, tmp_path, "demo/finder", prompt_cache=False)
    acct = result.accounting
    assert result.stop.kind is StopKind.FINISHED and len(result.certificates) == 1
    assert acct.cached_tokens == acct.cache_write_tokens == 0
    assert all(u.cached_tokens == 0 for u in shared_server().usage_for(env.session_id))
    assert acct.prompt_tokens == pytest.approx(cached.accounting.prompt_tokens, rel=0.01), "the same conversation"
    assert acct.dollars == pytest.approx(acct.prompt_tokens * PRICES["in"] + acct.completion_tokens * PRICES["out"])
    assert acct.dollars > 2 * cached.accounting.dollars


def test_every_observation_ends_with_the_budget_line(finder):
    _, result = finder
    outputs = tool_outputs(result)
    budget = [o.rsplit("\n", 1)[-1] for o in outputs]
    assert all(line.startswith("[harness] used ") for line in budget), budget
    assert [int(line.split()[2].split("/")[0]) for line in budget] == list(range(1, len(outputs) + 1))
    assert all(f"/{SessionLimits().model_calls} model calls" in line for line in budget)
    assert f"/{SessionLimits().pred_calls} pred calls" in budget[-1] and " s left" in budget[-1]


def test_finder_trajectory_is_saved_in_mini_swe_agents_format(finder):
    env, result = finder
    data = json.loads(Path(env.trajectory_path).read_text())
    assert result.trajectory_path == env.trajectory_path
    assert data["trajectory_format"].startswith("mini-swe-agent")
    assert data["info"]["exit_status"] == "Submitted"
    assert data["info"]["predbench"]["accounting"] == result.accounting.model_dump()
    assert result.prompt_hash == prompt_hash(TEST_VERSION) == data["info"]["config"]["environment"]["prompt_hash"]
    assert [m["role"] for m in data["messages"][:3]] == ["system", "user", "assistant"]


def test_a_huge_pred_list_reaches_the_model_normalised_and_bounded(finder, record):
    _, result = finder
    full = subprocess.run([record.pred_path, "list", "--rules"], capture_output=True, check=True).stdout
    first = tool_outputs(result)[0]
    normalised = "\n".join(line.rstrip() for line in full.decode().splitlines())
    assert len(full) > 3 * len(normalised.encode()) > 40_000  # contrast: what pred really printed, padding included
    assert len(first) < 10_000 + 400
    assert "bytes cut from the middle" in first and f" of {len(full)} bytes" not in first
    assert all(line == line.rstrip() for line in first.splitlines())


def test_idle_submits_nothing(runner, record, tmp_path):
    _, result = run(runner, record, tmp_path, "demo/idle")
    assert result.stop.kind is StopKind.FINISHED
    assert result.certificates == [] and result.accounting.model_calls == len(
        load_script(DEMO_SCRIPT_DIR / "idle.json").turns
    )


# -- (b) a false alarm ----------------------------------------------------------------------------


def test_a_false_alarm_is_submitted_and_rejected_by_the_verifier(runner, record, tmp_path):
    _, result = run(runner, record, tmp_path, "demo/false_alarm")
    assert result.stop.kind is StopKind.FINISHED
    assert len(result.certificates) == 1
    verdict = verify_certificate(result.certificates[0])
    assert not verdict.accepted and verdict.reason


def test_a_session_that_fills_its_memory_is_not_infra(runner, record, tmp_path):
    """After submitting a false alarm, the session fills its memory with SysV shared memory that no
    process holds, so the OOM killer goes through its sandbox (once it reached bubblewrap, and the
    session ended infra, its certificate never verified). Now the command ends with its reason and
    the session goes on to finish; its false alarm is verified and rejected."""
    _, result = run(runner, record, tmp_path, "demo/shm_oom", memory_mib=192)
    assert result.stop.kind is StopKind.FINISHED, result.stop
    fill, alive = tool_outputs(result)[3:5]
    assert "out of memory" in fill and "alive" in alive, fill
    (certificate,) = result.certificates
    assert not verify_certificate(certificate).accepted  # counted as a false alarm
    # contrast: test_a_false_alarm_is_submitted_and_rejected_by_the_verifier, the same session without the fill


# -- (c) the dollar ceiling ------------------------------------------------------------------------


def test_half_the_dollars_stops_sooner_within_the_limit(runner, record, tmp_path, finder):
    _, full = finder
    limit = full.accounting.dollars / 2  # the full session would not fit
    _, result = run(runner, record, tmp_path, "demo/finder", dollars=limit, max_output_tokens=256)
    assert result.stop.kind is StopKind.COST_LIMIT
    assert result.accounting.dollars <= limit
    assert 0 < result.accounting.model_calls < full.accounting.model_calls
    assert result.certificates == []


# -- (d) attacks through the agent ----------------------------------------------------------------


def test_scripted_attacks_fail(runner, record, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-predbench-canary")
    reports = tmp_path / "reports" / "run"
    reports.mkdir(parents=True)
    ledger = reports / "ledger.json"
    ledger.write_text('{"spent": 1.5}')
    port = shared_server().port  # the server this very session talks to
    template = (SCRIPTS / "attacker.json").read_text()
    for token, value in {
        "@LEDGER@": ledger,
        "@REPORTS@": reports,
        "@PRED@": record.pred_path,
        "@PORT@": port,
    }.items():
        template = template.replace(token, str(value))
    (tmp_path / "attacker.json").write_text(template)
    (tmp_path / "models.toml").write_text(
        '[models."demo/attacker"]\ndemo_script = "attacker.json"\n'
        "input_cost_per_token = 1e-6\noutput_cost_per_token = 4e-6\n"
    )
    pred_before = sha256_file(Path(record.pred_path))

    _, result = run(MiniSweRunner(tmp_path / "models.toml"), record, tmp_path, "demo/attacker")

    assert result.stop.kind is StopKind.FINISHED
    outputs = tool_outputs(result)
    assert len(outputs) == 5
    write_ledger, write_report, replace_pred, find_keys, connect = outputs
    assert "rc=0" not in write_ledger and ledger.read_text() == '{"spent": 1.5}'
    assert "rc=0" not in write_report and list(reports.iterdir()) == [ledger]
    assert "rc=0" not in replace_pred and "pred 0.5.0" in replace_pred
    assert sha256_file(Path(record.pred_path)) == pred_before
    assert "sk-predbench-canary" not in find_keys and "searched" in find_keys
    assert "CONNECTED" not in connect and "rc=1" in connect
    with socket.create_connection(("127.0.0.1", port), timeout=3):  # contrast: the host can connect
        pass


# -- (e) provider faults ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "exception"),
    [
        ("demo/fault_http_429", "litellm.exceptions.RateLimitError"),
        ("demo/fault_http_500", "litellm.exceptions.InternalServerError"),
        ("demo/fault_malformed_json", "litellm.exceptions.InternalServerError"),
        ("demo/fault_close_connection", "litellm.exceptions.InternalServerError"),
        ("demo/fault_hang", "litellm.exceptions.Timeout"),
    ],
)
def test_provider_faults_end_with_infra_error(runner, record, tmp_path, model, exception):
    _, result = run(runner, record, tmp_path, model, call_timeout_s=1.0, call_retries=0)
    assert result.stop.kind is StopKind.INFRA_ERROR
    assert result.stop.is_infra
    assert result.stop.exception_class == exception
    assert result.accounting.model_calls == 1  # the good call before the fault is still billed
    assert result.accounting.dollars > 0
    assert result.accounting.call_retries == 0


@pytest.mark.parametrize("model", ["demo/blip_http_429", "demo/blip_http_500"])
def test_a_transient_fault_is_retried_and_the_session_completes(runner, record, tmp_path, model):
    env, result = run(runner, record, tmp_path, model)
    assert result.stop.kind is StopKind.FINISHED, result.stop
    assert result.accounting.call_retries == 1
    assert len(result.certificates) == 1 and verify_certificate(result.certificates[0]).accepted
    assert result.accounting.model_calls == len(shared_server().usage_for(env.session_id)), "the failed try is free"
    if model.endswith("429"):  # the server asked for Retry-After: 1, and the harness waited at least that
        assert result.accounting.call_retry_seconds >= 1.0
    _, contrast = run(runner, record, tmp_path / "no-retries", model, call_retries=0)
    assert contrast.stop.kind is StopKind.INFRA_ERROR and contrast.certificates == []


def test_a_persistent_fault_exhausts_the_retries_and_is_infra(runner, record, tmp_path):
    _, result = run(runner, record, tmp_path, "demo/fault_http_500", call_retries=2)
    assert result.stop.kind is StopKind.INFRA_ERROR
    assert result.stop.exception_class == "litellm.exceptions.InternalServerError"
    assert result.stop.detail.startswith("after 2 retries: ")
    assert result.accounting.call_retries == 2 and result.accounting.model_calls == 1


def test_retries_stop_at_the_sessions_wall_time(runner, record, tmp_path):
    """A back-off that would end past the session's wall time is not waited out: the call fails now."""
    _, result = run(runner, record, tmp_path, "demo/fault_http_500", call_retries=50, wall_seconds=6.0)
    assert result.stop.kind is StopKind.INFRA_ERROR
    assert 0 < result.accounting.call_retries < 50
    assert result.accounting.call_retry_seconds < 6.0, "no back-off was started that would end past the limit"


def test_a_refused_connection_is_infra_error(record, tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    (tmp_path / "models.toml").write_text(
        f'[models."nobody-home"]\nlitellm_model = "openai/nobody-home"\n'
        f'api_base = "http://127.0.0.1:{port}/v1"\ninput_cost_per_token = 1e-6\n'
        'output_cost_per_token = 4e-6\nextra_kwargs = { api_key = "sk-canary-42" }\n'
    )
    _, result = run(MiniSweRunner(tmp_path / "models.toml"), record, tmp_path, "nobody-home", call_timeout_s=5.0)
    assert result.stop.kind is StopKind.INFRA_ERROR
    assert result.stop.exception_class.startswith("litellm.exceptions.")
    assert result.accounting.model_calls == 0 and result.accounting.dollars == 0
    trajectory = Path(result.trajectory_path).read_text()
    assert "sk-canary-42" not in trajectory and "<redacted>" in trajectory  # keys never reach the reports
    assert f'"max_tokens": {SessionLimits().max_output_tokens}' in trajectory  # what is not a secret stays


def test_a_bad_request_is_an_error_not_infra(runner, record, tmp_path):
    _, result = run(runner, record, tmp_path, "demo/fault_http_400")
    assert result.stop.kind is StopKind.ERROR
    assert result.stop.exception_class == "litellm.exceptions.BadRequestError"


# -- the other limits and stop reasons ----------------------------------------------------------------


def test_model_call_limit(runner, record, tmp_path):
    _, result = run(runner, record, tmp_path, "demo/finder", model_calls=3)
    assert result.stop.kind is StopKind.STEP_LIMIT
    assert result.accounting.model_calls == 3


def test_pred_call_limit(runner, record, tmp_path):
    _, result = run(runner, record, tmp_path, "demo/finder", pred_calls=3)
    assert result.stop.kind is StopKind.PRED_LIMIT
    assert result.accounting.pred_calls == 3 == len(result.pred_log)
    assert result.certificates == []


def test_every_pred_call_is_in_the_record_as_the_gateway_ran_it(finder):
    env, result = finder
    assert len(result.pred_log) == result.accounting.pred_calls > 0
    assert all(call.tool == "pred" and call.seconds > 0 for call in result.pred_log)
    first = result.pred_log[0]
    assert first.argv == ["list", "--rules"] and first.exit == 0 and first.stdout_bytes > 40_000
    data = json.loads(Path(env.trajectory_path).read_text())
    assert data["info"]["predbench"]["pred_log"][0]["argv"] == ["list", "--rules"]
    bounds = data["info"]["config"]["environment"]["bounds"]
    assert set(bounds["enforced"]) == {"memory", "processes", "disk", "cpu"}, bounds


def test_wall_time_limit_cuts_a_long_command(runner, record, tmp_path):
    _, result = run(runner, record, tmp_path, "demo/slow", wall_seconds=2.0)
    assert result.stop.kind is StopKind.TIME_LIMIT
    assert result.accounting.model_calls == 1
    assert "timed out after" in tool_outputs(result)[0]  # the 30 s sleep was cut, not waited out


def test_replies_without_tool_calls_end_with_format_errors(runner, record, tmp_path):
    _, result = run(runner, record, tmp_path, "demo/chatter")
    assert result.stop.kind is StopKind.FORMAT_ERRORS
    assert result.accounting.model_calls == 3 and result.accounting.shell_actions == 0


# -- the submission channel ---------------------------------------------------------------------------


def test_only_the_channel_counts_and_shape_errors_are_answered(runner, record, tmp_path, finder):
    env, result = run(runner, record, tmp_path, "demo/shape_errors")
    assert result.stop.kind is StopKind.FINISHED
    assert result.certificates == []  # the certificate was written and shown, never submitted
    assert result.rejected_submissions == 4  # bad shape, not an object, a planted link, a planted FIFO
    text = "\n".join(tool_outputs(result))
    assert text.count("[harness] submission refused") == 4
    assert "violation" in text  # the shape error names the field
    shown = [o for o in tool_outputs(result) if '"violation": "suboptimal_extraction"' in o][-1]  # `cat cert.json`
    written = json.loads(shown.split("<output>\n", 1)[1].split("</output>", 1)[0])
    _, submitted = finder  # contrast: the same certificate through submit-certificate counts
    assert written["target"] == submitted.certificates[0].target.model_dump(mode="json")


# -- refusals and laziness ---------------------------------------------------------------------------------


def test_a_model_without_a_price_is_refused_before_any_call(runner, record, tmp_path):
    env = make_env(record, tmp_path)
    with pytest.raises(UnknownModelError) as info:
        runner.run(env, "openai/no-such-model-xyz", SessionLimits())
    assert "\n" not in str(info.value) and "no-such-model-xyz" in str(info.value)
    assert not Path(env.trajectory_path).exists()
    assert resolve("demo/finder", load_settings(None)).priced  # contrast: a priced model resolves


def test_importing_the_runner_and_resolving_a_demo_model_import_no_agent_stack():
    code = (
        "import sys\n"
        "import pytest_predbench.session.miniswe as m\n"
        "m.MiniSweRunner()\n"
        "m.resolve('demo/finder', m.load_settings(None))\n"
        "print(sorted(k for k in ('litellm', 'minisweagent') if k in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
