"""Preflight gates: each one passes on the real setup and fails, with one line, on the fault it
guards against. The model gate runs the real litellm and mini-swe-agent code against the demo
server (only the replies are scripted); the pred gates run the real pred and bubblewrap."""

import json
import re
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from pytest_predbench.run.preflight import (
    GateStatus,
    failures,
    model_gate,
    run_gates,
    sandbox_gate,
    spent,
)
from pytest_predbench.session.demo.server import DemoServer, Script, Turn, shared_server
from pytest_predbench.session.miniswe import MiniSweRunner
from pytest_predbench.session.protocol import SessionEnv, SessionLimits
from pytest_predbench.verify.environment import checked_record, write_record
from tests.support.acceptance import REPO, Workspace
from tests.support.partial import partial_run
from tests.support.versions import TEST_VERSION

pytestmark = pytest.mark.slow  # end to end in subprocesses: `make test`, not `make check`

PRICES = (
    "input_cost_per_token = 1e-6\noutput_cost_per_token = 4e-6\n"
    "cache_read_input_token_cost = 1e-7\ncache_creation_input_token_cost = 1.25e-6\n"
)
"""The built-in demo models' prices (model_settings.DEMO_PRICE, DEMO_CACHE_PRICE)."""


def scripted_models(root: Path, scripts: dict[str, dict], extra: str = "") -> Path:
    """A model-settings file serving `scripts` as demo/<name> (what a test rewrites to change a model)."""
    root.mkdir(parents=True, exist_ok=True)
    lines = []
    for name, script in scripts.items():
        (root / f"{name}.json").write_text(json.dumps(script))
        lines.append(f'[models."demo/{name}"]\ndemo_script = "{name}.json"\n{PRICES}')
    path = root / "models.toml"
    path.write_text("\n".join(lines) + extra)
    return path


def by_gate(results) -> dict:
    return {r.gate: r for r in results}


@pytest.fixture(scope="module")
def record():
    return checked_record(TEST_VERSION)


# -- everything in order ---------------------------------------------------------------------------


def test_a_sound_setup_passes_every_gate_with_one_probe_per_model(record):
    results = run_gates(["demo/finder", "demo/idle"], "mini-swe", SessionLimits(), version=TEST_VERSION)
    assert [r.gate for r in results] == [
        "pred", "source", "sandbox", "bounds", "model demo/finder", "model demo/idle"
    ]  # fmt: skip
    assert failures(results) == [], [r.line for r in results]
    assert "pred 0.5.0" in by_gate(results)["sandbox"].detail
    assert "asked for 'demo-finder', answered as exactly that" in by_gate(results)["model demo/finder"].detail
    assert spent(results) > 0 and all(r.dollars > 0 for r in results if r.gate.startswith("model"))
    assert all("\n" not in r.line for r in results)


def test_the_probe_sends_a_sessions_real_first_prompt(record, tmp_path):
    runner = MiniSweRunner()
    probe = runner.probe("demo/idle", SessionLimits(), TEST_VERSION)
    session = f"contrast-{uuid.uuid4().hex}"
    env = SessionEnv(
        pred_version=record.pred_version,
        pred_path=record.pred_path,
        source_dir=record.source_dir,
        workdir=str(tmp_path / "scratch"),
        trajectory_path=str(tmp_path / "trajectory.json"),
        session_id=session,
    )
    runner.run(env, "demo/idle", SessionLimits())
    (probed,) = shared_server().usage_for(probe.session_id)
    first = shared_server().usage_for(session)[0]
    assert probed.prompt_tokens == first.prompt_tokens > 1000, "the same prompt arrived"
    assert probe.prompt_tokens_counted == pytest.approx(first.prompt_tokens, rel=0.01), "and was counted before"
    assert probed.completion_tokens <= 64 < SessionLimits().max_output_tokens  # only the answer is short


# -- the model's identity ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("served_as", "passes"),
    [
        ("demo-wrong", False),  # a prefix of what was asked for
        ("demo-wrong_identity-2024-08-06", False),  # contains it
        ("DEMO-WRONG_IDENTITY", False),  # differs in case only
        (None, True),  # contrast: exactly the requested name
    ],
)
def test_the_model_must_answer_as_exactly_the_model_requested(tmp_path, served_as, passes):
    script = {"turns": [{"say": "hello"}], **({"served_as": served_as} if served_as else {})}
    settings = scripted_models(tmp_path, {"wrong_identity": script})
    result = model_gate(MiniSweRunner(settings), "demo/wrong_identity", SessionLimits(), version=TEST_VERSION)
    assert (result.status is GateStatus.PASSED) is passes, result.line
    if not passes:
        assert f"asked for 'demo-wrong_identity', answered by '{served_as}'" in result.detail


# -- provider faults ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fault", "exception"),
    [
        ("http_429", "RateLimitError"),
        ("http_500", "InternalServerError"),
        ("hang", "Timeout"),
        ("malformed_json", "InternalServerError"),
        ("close_connection", "InternalServerError"),
    ],
)
def test_a_provider_fault_fails_the_model_gate_as_infra(tmp_path, fault, exception):
    settings = scripted_models(tmp_path, {"faulty": {"turns": [{"fault": fault, "seconds": 10}]}})
    result = model_gate(MiniSweRunner(settings), "demo/faulty", SessionLimits(call_timeout_s=1.0), version=TEST_VERSION)
    assert result.status is GateStatus.FAILED
    assert f"no answer (infra_error: litellm.exceptions.{exception}:" in result.detail
    assert result.dollars == 0


def test_a_refused_connection_fails_the_model_gate(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings = tmp_path / "models.toml"
    settings.write_text(
        f'[models."nobody-home"]\nlitellm_model = "openai/nobody-home"\n'
        f'api_base = "http://127.0.0.1:{port}/v1"\n{PRICES}extra_kwargs = {{ api_key = "none" }}\n'
    )
    result = model_gate(MiniSweRunner(settings), "nobody-home", SessionLimits(call_timeout_s=5.0), version=TEST_VERSION)
    assert result.status is GateStatus.FAILED and "infra_error: litellm.exceptions." in result.detail


# -- price, usage and size --------------------------------------------------------------------------


def test_an_unpriced_or_zero_priced_model_fails_before_any_call(tmp_path):
    settings = tmp_path / "models.toml"
    settings.write_text(
        '[models."free"]\nlitellm_model = "openai/free"\napi_base = "http://127.0.0.1:9/v1"\n'
        "input_cost_per_token = 0\noutput_cost_per_token = 0\n"
    )
    results = by_gate(
        run_gates(
            ["free", "openai/no-such-model-xyz", "demo/idle"],
            "mini-swe",
            SessionLimits(),
            model_settings=settings,
            version=TEST_VERSION,
        )
    )
    assert "zero price" in results["model free"].detail
    assert "not in litellm's model map" in results["model openai/no-such-model-xyz"].detail
    assert results["model demo/idle"].status is GateStatus.PASSED  # contrast: a priced model
    assert [r.gate for r in failures(results.values())] == ["model free", "model openai/no-such-model-xyz"]


def test_a_session_limit_too_small_for_one_first_call_fails(tmp_path):
    small = model_gate(
        MiniSweRunner(), "demo/idle", SessionLimits(dollars=0.001), sessions=3, models=2, version=TEST_VERSION
    )
    assert small.status is GateStatus.FAILED and "cost_limit" in small.detail and small.dollars == 0
    named = re.search(
        r"--session-budget ([\d.]+) would pass \(--budget ([\d.]+) for 3 session\(s\) of 2 model", small.detail
    )
    assert named, small.detail  # the refusal names the budget that would pass ...
    enough, total = float(named[1]), float(named[2])
    assert total == pytest.approx(6 * enough)
    passing = model_gate(MiniSweRunner(), "demo/idle", SessionLimits(dollars=enough), version=TEST_VERSION)
    assert passing.status is not GateStatus.FAILED, passing.line  # ... and it does
    assert (
        model_gate(MiniSweRunner(), "demo/idle", SessionLimits(dollars=5), version=TEST_VERSION).status
        is GateStatus.PASSED
    )


def test_a_session_cap_too_small_for_the_call_limit_warns_with_the_cap_that_would_do(tmp_path):
    limits = SessionLimits(dollars=0.05)
    warned = model_gate(MiniSweRunner(), "demo/idle", limits, sessions=6, version=TEST_VERSION)
    assert warned.status is GateStatus.WARNING and not failures([warned]) and warned.dollars > 0
    found = re.search(
        r"the \$0\.05 session cap affords about (\d+) of the 60 model calls at this model's price \(estimated\); "
        r"--session-budget ([\d.]+) would afford them all \(--budget ([\d.]+) for 6 session\(s\)\)",
        warned.detail,
    )
    assert found, warned.line
    affords, enough, total = int(found[1]), float(found[2]), float(found[3])
    assert 0 < affords < 60 and total == pytest.approx(6 * enough)
    assert warned.line.startswith("preflight model demo/idle: WARNING: ") and "\n" not in warned.line
    enough_cap = model_gate(MiniSweRunner(), "demo/idle", SessionLimits(dollars=enough), version=TEST_VERSION)
    assert enough_cap.status is GateStatus.PASSED, "the cap it names is enough"
    fewer_calls = model_gate(
        MiniSweRunner(), "demo/idle", limits.model_copy(update={"model_calls": affords}), version=TEST_VERSION
    )
    assert fewer_calls.status is GateStatus.PASSED, "the cap affords the calls it says it does"


def test_a_missing_api_key_is_found_without_a_call(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    runner = MiniSweRunner()
    probe = runner.probe("anthropic/claude-sonnet-4-5", SessionLimits(), TEST_VERSION)
    assert probe.missing_keys == ["ANTHROPIC_API_KEY"]
    assert probe.requested == "" and probe.prompt_tokens_counted == 0 and probe.dollars == 0, "no call was made"
    result = model_gate(runner, "anthropic/claude-sonnet-4-5", SessionLimits(), version=TEST_VERSION)
    assert result.status is GateStatus.FAILED and "\n" not in result.line
    assert result.detail == (
        "litellm finds no ANTHROPIC_API_KEY in the environment for this model: set it (no call was made)"
    )
    assert runner.probe("demo/idle", SessionLimits(), TEST_VERSION).missing_keys == [], (
        "the contrast: a model that needs no key"
    )


def _own_server_model(tmp_path: Path, server: DemoServer) -> Path:
    server.add_script("demo-own", Script(turns=[Turn(say="hello")]))
    settings = tmp_path / "models.toml"
    settings.write_text(
        f'[models."own"]\nlitellm_model = "openai/demo-own"\napi_base = "{server.url}"\n{PRICES}'
        'extra_kwargs = { api_key = "none" }\n'
    )
    return settings


def test_a_prompt_that_does_not_arrive_whole_fails(tmp_path):
    import litellm

    def honest(model, messages, tools):
        return litellm.token_counter(model=model, messages=messages, tools=tools)

    with DemoServer(lambda model, messages, tools: 100) as truncating:
        result = model_gate(
            MiniSweRunner(_own_server_model(tmp_path, truncating)), "own", SessionLimits(), version=TEST_VERSION
        )
    assert result.status is GateStatus.FAILED and "counted 100 prompt tokens of the" in result.detail
    with DemoServer(honest) as server:  # contrast: the same model, its whole prompt counted
        assert model_gate(
            MiniSweRunner(_own_server_model(tmp_path, server)), "own", SessionLimits(), version=TEST_VERSION
        ).status is (GateStatus.PASSED)


# -- pred, source and sandbox -----------------------------------------------------------------------


def test_a_replaced_pred_or_edited_source_fails_and_a_missing_record_skips_the_rest(record, tmp_path):
    fake_pred = record.model_copy(update={"pred_sha256": "0" * 64})
    write_record(fake_pred, tmp_path / "pred.json")
    results = by_gate(
        run_gates([], "mini-swe", SessionLimits(), record_path=tmp_path / "pred.json", version=TEST_VERSION)
    )
    assert results["pred"].status is GateStatus.FAILED and "refusing to verify" in results["pred"].detail
    assert {results["source"].status, results["sandbox"].status} == {GateStatus.SKIPPED}

    edited = record.model_copy(update={"source_sha256": "0" * 64})
    write_record(edited, tmp_path / "source.json")
    results = by_gate(
        run_gates([], "mini-swe", SessionLimits(), record_path=tmp_path / "source.json", version=TEST_VERSION)
    )
    assert results["pred"].status is GateStatus.PASSED
    assert results["source"].status is GateStatus.FAILED and "differs from its recorded manifest" in (
        results["source"].detail
    )

    results = by_gate(
        run_gates([], "mini-swe", SessionLimits(), record_path=tmp_path / "none.json", version=TEST_VERSION)
    )
    assert results["pred"].detail.startswith("no environment record at") and len(failures(results.values())) == 1

    results = run_gates([], "mini-swe", SessionLimits(), version=TEST_VERSION)  # contrast: the real record
    assert [r.status for r in results] == [GateStatus.PASSED] * 4


def test_bounds_the_machine_cannot_enforce_stop_the_run_unless_told_unbounded(record, monkeypatch):
    """The machine's facts are simulated (no cgroup controllers, no tmpfs mount): the decision is the gate's."""
    from pytest_predbench.session import bounds

    real = by_gate(run_gates([], "mini-swe", SessionLimits(), version=TEST_VERSION))["bounds"]
    assert real.status is GateStatus.PASSED and "memory 4096 MiB, 256 processes, disk 1024 MiB" in real.detail
    assert "cpu by cgroup" in real.detail and "cpu: the machine's cores / the workers" in real.detail
    off = by_gate(run_gates([], "mini-swe", SessionLimits(cpu_cores=0), version=TEST_VERSION))[
        "bounds"
    ]  # contrast: the CPU bound off
    assert off.status is GateStatus.PASSED and "cpu" not in off.detail
    monkeypatch.setattr(bounds, "cgroup_hierarchies", lambda: "no cgroup v2 mount; no cgroup v1 memory hierarchy")
    monkeypatch.setattr(bounds, "can_mount_tmpfs", lambda: "mounting a size-limited tmpfs needs root")
    results = by_gate(run_gates([], "mini-swe", SessionLimits(), version=TEST_VERSION))
    refused = results["bounds"]
    assert refused.status is GateStatus.FAILED and "\n" not in refused.line
    assert "cannot enforce memory, processes, disk, cpu" in refused.detail and "--unbounded" in refused.detail
    assert results["sandbox"].status is GateStatus.SKIPPED
    told = by_gate(run_gates([], "mini-swe", SessionLimits(unbounded=True), version=TEST_VERSION))
    assert told["bounds"].status is GateStatus.WARNING and told["sandbox"].status is GateStatus.PASSED
    assert failures(told.values()) == []


def test_a_sandbox_that_cannot_start_fails(record, tmp_path):
    broken = sandbox_gate(record, bwrap=str(tmp_path / "no-bwrap"))
    assert broken.status is GateStatus.FAILED and "sandbox does not start" in broken.detail
    assert sandbox_gate(record).status is GateStatus.PASSED


# -- the fake runner --------------------------------------------------------------------------------


def test_the_fake_runner_gets_only_the_pred_gates_and_only_when_it_verifies():
    assert run_gates(["fake/a"], "fake", SessionLimits(), needs_pred=False, version=TEST_VERSION) == []
    gates = run_gates(["fake/a"], "fake", SessionLimits(), needs_pred=True, version=TEST_VERSION)
    assert [(r.gate, r.status) for r in gates] == [("pred", GateStatus.PASSED), ("source", GateStatus.PASSED)]


def test_preflight_imports_no_agent_stack_unless_a_model_is_probed():
    code = (
        "import sys\n"
        "from pytest_predbench.run.preflight import run_gates\n"
        "from pytest_predbench.session.protocol import SessionLimits\n"
        "run_gates(['fake/a'], 'fake', SessionLimits(), version='0.5.0')\n"
        "print(sorted(k for k in ('litellm', 'minisweagent') if k in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# -- through the plugin: a failed gate stops the run before any session spends ---------------------

IDLE = json.loads((REPO / "pytest_predbench" / "session" / "demo" / "scripts" / "idle.json").read_text())
OUTAGE_VAR = "PREDBENCH_TEST_OUTAGE"
FLAKY = {
    "description": "submits nothing and stops; answers HTTP 500 while the file $PREDBENCH_TEST_OUTAGE exists",
    "turns": [
        {
            "say": "Nothing to report; stopping.",
            "bash": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT",
            "fault": "http_500",
            "fault_while": f"${OUTAGE_VAR}",
        }
    ],
}


def bench(tmp_path: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """`pytest bench_sessions ...` as a user runs it, pytest's cache kept out of the checkout."""
    return Workspace(tmp_path).pytest("bench_sessions", *args, "-p", "no:xdist", env=env)


def error_lines(proc: subprocess.CompletedProcess) -> list[str]:
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr[-3000:]
    return [line for line in proc.stderr.splitlines() if line.strip()]


def tree(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def test_a_failed_gate_stops_a_new_run_before_anything_is_written_or_spent(tmp_path):
    impostor = {**IDLE, "served_as": "demo-someone-else"}
    settings = scripted_models(tmp_path / "models", {"impostor": impostor, "flaky": FLAKY, "honest": IDLE})
    outage = tmp_path / "outage"
    outage.touch()  # demo/flaky's provider is down
    env = {OUTAGE_VAR: str(outage)}
    run = tmp_path / "run"
    models = "demo/impostor,demo/honest,demo/flaky"
    refused = bench(tmp_path, "--models", models, f"--model-settings={settings}", f"--run-dir={run}", env=env)
    assert refused.returncode == pytest.ExitCode.USAGE_ERROR, refused.stdout[-3000:]
    lines = error_lines(refused)
    assert len(lines) == 2, lines  # one line per failed gate, and nothing else
    flaky, impostor = sorted(lines)  # in the plan's (sorted) order of models
    assert flaky.startswith("ERROR: preflight model demo/flaky: FAILED: the probe call got no answer")
    assert impostor.startswith("ERROR: preflight model demo/impostor: FAILED: asked for 'demo-impostor', answered by")
    assert not run.exists(), "a refused run leaves no plan, no ledger, no record: no session was paid for"

    honest = bench(tmp_path, "--models", "demo/honest", f"--model-settings={settings}", f"--run-dir={run}", env=env)
    assert honest.returncode == 0, honest.stdout[-3000:]  # contrast: with the gates passed, the run runs
    ledger = json.loads((run / "ledger.json").read_text())
    assert [c["item"] for c in ledger["charges"]] == ["demo/honest-s01"] and ledger["charges"][0]["dollars"] > 0
    assert "preflight model demo/honest: PASSED" in honest.stdout


def test_a_zero_priced_model_is_refused_before_any_call(tmp_path):
    """Caught even before the gates: the plan itself cannot be priced (model_settings)."""
    (tmp_path / "free.json").write_text(json.dumps(IDLE))
    settings = tmp_path / "models.toml"
    settings.write_text('[models."demo/free"]\ndemo_script = "free.json"\ninput_cost_per_token = 0\n')
    run = tmp_path / "run"
    refused = bench(tmp_path, "--models", "demo/free", f"--model-settings={settings}", f"--run-dir={run}")
    assert refused.returncode == pytest.ExitCode.USAGE_ERROR
    [line] = error_lines(refused)
    assert "demo/free" in line and "price" in line and not run.exists()


def test_a_failed_gate_stops_a_resume_and_leaves_the_run_as_it_was(tmp_path):
    settings = scripted_models(tmp_path / "models", {"flaky": FLAKY})
    outage = tmp_path / "outage"
    env = {OUTAGE_VAR: str(outage)}
    run = partial_run(  # demo/flaky-s01 done, s02 left
        tmp_path / "run",
        ("demo/flaky",),
        2,
        lambda item: item.session == 1,
        runner="mini-swe",
        model_settings=str(settings),
    )

    outage.touch()  # the provider is down now
    before = tree(run)
    refused = bench(tmp_path, "--resume-bench", f"--run-dir={run}", env=env)
    assert refused.returncode == pytest.ExitCode.USAGE_ERROR, refused.stdout[-3000:]
    [line] = error_lines(refused)
    assert line.startswith("ERROR: preflight model demo/flaky: FAILED: the probe call got no answer (infra_error:")
    assert "InternalServerError" in line
    assert tree(run) == before, "a refused resume writes nothing: no ledger change, no preflight entry"

    checked = bench(tmp_path, "--resume-bench", f"--run-dir={run}", "--preflight-only", env=env)
    assert checked.returncode == 1 and "preflight model demo/flaky: FAILED" in checked.stdout
    assert tree(run) == before

    outage.unlink()  # contrast: the provider is back, the same resume passes the gates and runs the rest
    resumed = bench(tmp_path, "--resume-bench", f"--run-dir={run}", env=env)
    assert resumed.returncode == 0, resumed.stdout[-3000:]
    ledger = json.loads((run / "ledger.json").read_text())
    assert [c["item"] for c in ledger["charges"]] == ["demo/flaky-s01", "demo/flaky-s02"]
    assert len(json.loads((run / "preflight.json").read_text())["entries"]) == 1


def test_preflight_only_runs_the_gates_and_nothing_else(tmp_path):
    settings = scripted_models(tmp_path / "models", {"impostor": {**IDLE, "served_as": "demo-someone-else"}})
    run = tmp_path / "run"
    passed = bench(tmp_path, "--models", "demo/idle", "--preflight-only", f"--run-dir={run}")
    assert passed.returncode == 0, passed.stdout[-3000:] + passed.stderr[-3000:]
    gates = [line for line in passed.stdout.splitlines() if line.startswith("preflight ")]
    assert [line.split(":")[0] for line in gates] == [
        "preflight pred",
        "preflight source",
        "preflight sandbox",
        "preflight bounds",
        "preflight model demo/idle",
    ]
    assert all(": PASSED: " in line for line in gates)

    failed = bench(
        tmp_path,
        "--models",
        "demo/idle,demo/impostor",
        f"--model-settings={settings}",
        "--preflight-only",
        f"--run-dir={run}",
    )
    assert failed.returncode == 1, failed.stdout[-3000:]
    failing = [line for line in failed.stdout.splitlines() if ": FAILED: " in line]
    assert len(failing) == 1 and failing[0].startswith("preflight model demo/impostor: FAILED: asked for")

    unusable = bench(tmp_path, "--models", "demo/idle", "--runner", "nonsense", "--preflight-only")
    assert unusable.returncode == pytest.ExitCode.USAGE_ERROR and len(error_lines(unusable)) == 1

    fake = bench(tmp_path, "--models", "fake/a", "--runner", "fake", "--preflight-only", f"--run-dir={run}")
    fake_gates = [line.split(":")[0] for line in fake.stdout.splitlines() if line.startswith("preflight ")]
    assert fake.returncode == 0 and fake_gates in (["preflight pred", "preflight source"], []), fake.stdout
    assert not run.exists(), "--preflight-only writes no run directory"


def test_a_typo_in_a_model_id_gets_close_matches_in_one_line(tmp_path):
    run = tmp_path / "run"
    refused = bench(tmp_path, "--models", "anthropic/claude-sonet-4-5", "--preflight-only", f"--run-dir={run}")
    assert refused.returncode == pytest.ExitCode.USAGE_ERROR
    [line] = error_lines(refused)
    assert "'anthropic/claude-sonet-4-5' is not in litellm's model map" in line
    assert "close matches: " in line and "anthropic/claude-sonnet-4-5" in line


def flaky(variable: str) -> dict:
    return {**FLAKY, "turns": [{**FLAKY["turns"][0], "fault_while": f"${variable}"}]}


def preflight_models(run: Path) -> list[list[str]]:
    """The models each invocation's preflight probed, from preflight.json."""
    entries = json.loads((run / "preflight.json").read_text())["entries"]
    return [[g["gate"].removeprefix("model ") for g in e["gates"] if g["gate"].startswith("model ")] for e in entries]


def test_a_resume_probes_only_the_models_left_to_run_and_none_when_nothing_is(tmp_path):
    settings = scripted_models(tmp_path / "models", {"flaky_a": flaky("OUTAGE_A"), "flaky_b": flaky("OUTAGE_B")})
    down_a, down_b = tmp_path / "down-a", tmp_path / "down-b"
    env = {"OUTAGE_A": str(down_a), "OUTAGE_B": str(down_b)}
    run = partial_run(  # demo/flaky_a's one item done, demo/flaky_b's left
        tmp_path / "run",
        ("demo/flaky_a", "demo/flaky_b"),
        1,
        lambda item: item.model == "demo/flaky_a",
        runner="mini-swe",
        model_settings=str(settings),
    )

    down_a.touch()  # demo/flaky_a's provider is down, but it has nothing left to run: not probed
    resumed = bench(tmp_path, "--resume-bench", f"--run-dir={run}", env=env)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert preflight_models(run) == [["demo/flaky_b"]]

    down_b.touch()  # both down: nothing is left to run, so nothing is probed, and the resume passes
    done = bench(tmp_path, "--resume-bench", f"--run-dir={run}", env=env)
    assert done.returncode == 0 and "nothing left to run" in done.stdout, done.stdout[-3000:]
    assert preflight_models(run)[-1] == []
    checked = bench(tmp_path, "--resume-bench", f"--run-dir={run}", "--preflight-only", env=env)
    assert checked.returncode == 0 and "preflight model" not in checked.stdout, checked.stdout[-2000:]


# -- the README's local model, offline ---------------------------------------------------------------

README_LOCAL_MODEL = """[models."my-llama"]
litellm_model = "openai/llama-3.1-8b"
api_base = "{api_base}"
input_cost_per_token = 1e-7
output_cost_per_token = 2e-7
"""
"""The README's example, with the api_base of a local server (no api_key, as a local server needs none)."""

OFFLINE_PROBE = """
import sys, tempfile
from pathlib import Path
from pytest_predbench.run.preflight import model_gate
from pytest_predbench.session.demo.server import DemoServer, Script, Turn
from pytest_predbench.session.miniswe import MiniSweRunner
from pytest_predbench.session.protocol import SessionLimits
from pytest_predbench.verify import pin
settings = Path(tempfile.mkdtemp()) / "models.toml"
with DemoServer() as server:
    server.add_script("llama-3.1-8b", Script(turns=[Turn(say="hello")]))
    settings.write_text(sys.argv[1].format(api_base=server.url))
    gate = model_gate(MiniSweRunner(settings), "my-llama", SessionLimits(call_retries=0), version=pin.default_choice())
    print(gate.line)
"""


def offline(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    """The probe of the README's local model in a network namespace of its own: only loopback."""
    if subprocess.run(["unshare", "-rn", "true"], capture_output=True).returncode != 0:
        pytest.skip("unshare -rn (a network namespace) is not available here")
    environment = {k: v for k, v in Workspace.environment().items() if not k.endswith("API_KEY")}
    environment.pop("LITELLM_OFFLINE_MODE", None)
    script = tmp_path / "probe.py"
    script.write_text(OFFLINE_PROBE)
    command = f'ip link set lo up && exec "$0" {script} "$1"'
    return subprocess.run(
        ["unshare", "-rn", "sh", "-c", command, sys.executable, README_LOCAL_MODEL],
        cwd=REPO,
        env={**environment, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_readmes_local_model_example_works_offline_without_a_key(tmp_path):
    proc = offline(tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().startswith("preflight model my-llama: PASSED: asked for 'llama-3.1-8b'"), proc.stdout
    assert "huggingface" not in proc.stderr.lower(), "no tokenizer download was tried"
    assert README_LOCAL_MODEL.split("{")[0] in (REPO / "README.md").read_text(), "the README shows this example"


def test_without_offline_mode_litellm_retries_a_tokenizer_download(tmp_path):
    """The contrast: what the harness's LITELLM_OFFLINE_MODE default prevents (litellm retries the
    llama tokenizer's download, then falls back to tiktoken)."""
    proc = offline(tmp_path, LITELLM_OFFLINE_MODE="false")
    assert "huggingface.co" in proc.stderr and "Retry" in proc.stderr, proc.stderr[-2000:]
