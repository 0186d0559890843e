"""A transient provider fault is retried inside the call and the session completes; a persistent
one (an outage) ends as an infrastructure failure, and a resume after the outage gives the right
final results — through the whole plugin.

Every fault is played by the demo server into the real litellm + mini-swe-agent path, inside real
`pytest bench_sessions` runs with the real pred in the real sandbox: HTTP 429, HTTP 500, a hang past
the call timeout, malformed JSON, a dropped connection and a refused connection (the script is
served on a port of its own that stops listening, so the client meets ECONNREFUSED). The outage
lasts while $PREDBENCH_OUTAGE_DIR/provider-down exists (the scripts' `fault_while`): a test ends it
without changing the scripts or the settings, whose hashes are part of the plan a resume must match.

The fault scripts (tests/scripts/outage_*.json) answer one call, so the preflight probe passes;
the session's second call meets the fault, and its retry (--call-retries 1) meets it again; once
the outage is over, the same script reproduces the MinimumVertexCover -> EnsembleComputation bug
and submits its certificate. The transient ones (tests/scripts/blip_*.json) fail that second call
once only.
"""

import http.client
import json
import re
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import pytest

from pytest_predbench.run.items import MAX_BACKOFF_S, backoff_seconds
from pytest_predbench.session.demo.server import DemoServer, Fault, Script, Turn
from pytest_predbench.session.protocol import StopKind
from pytest_predbench.state.ledger import ChargeKind
from pytest_predbench.state.records import Checkpoint, ItemStatus
from tests.support.acceptance import REPO, RunView, Workspace, cap_violations, fake_args

pytestmark = pytest.mark.slow  # end to end in subprocesses: `make test`, not `make check`

SETTINGS = REPO / "tests" / "scripts" / "models.toml"
OUTAGE_ENV = "PREDBENCH_OUTAGE_DIR"
RULE = "MinimumVertexCover -> EnsembleComputation"
CALL_TIMEOUT = "8"
"""Seconds: what a hang must outlast (the scripted hang lasts 60); ample for an answered call."""

FAULTS = {
    # model: (the provider exception class the record must name, what its root cause must say)
    "demo/outage_http_429": ("litellm.exceptions.RateLimitError", "429 Too Many Requests"),
    "demo/outage_http_500": ("litellm.exceptions.InternalServerError", "500 Internal Server Error"),
    "demo/outage_hang": ("litellm.exceptions.Timeout", "builtins.TimeoutError"),
    "demo/outage_malformed_json": ("litellm.exceptions.InternalServerError", "json.decoder.JSONDecodeError"),
    "demo/outage_close_connection": ("litellm.exceptions.InternalServerError", "httpcore.RemoteProtocolError"),
    "demo/outage_refused": ("litellm.exceptions.InternalServerError", "builtins.ConnectionRefusedError"),
}
BAD_REQUEST = "demo/outage_http_400"
"""The contrast: an HTTP 400 is no outage; the same script, the same moment, counts as the outcome."""
DOWN = "demo/outage_http_500"


class Outage:
    """The provider-down file the fault scripts look for, in a directory of this test's own."""

    def __init__(self, root: Path):
        self.dir = root / "outage"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.file = self.dir / "provider-down"

    def begin(self) -> None:
        self.file.touch()

    def end(self) -> None:
        self.file.unlink()

    @property
    def env(self) -> dict[str, str]:
        return {OUTAGE_ENV: str(self.dir)}


def demo_args(run_dir: Path, models: list[str], *extra: str) -> list[str]:
    return [
        "bench_sessions",
        "--models",
        ",".join(models),
        f"--model-settings={SETTINGS}",
        f"--run-dir={run_dir}",
        "--call-timeout",
        CALL_TIMEOUT,
        *extra,
    ]


def last_line(proc: subprocess.CompletedProcess) -> str:
    return proc.stdout.strip().splitlines()[-1]


def shown(proc: subprocess.CompletedProcess, item: str) -> str | None:
    """The word pytest -v printed for `item` (PASSED, INFRA, PAUSED, ...), with or without xdist."""
    test = re.escape(f"::test_session[{item}]")
    for line in proc.stdout.splitlines():
        found = re.search(rf"\b([A-Z]+) \S+{test}\s*$", line) or re.search(rf"{test} ([A-Z]+)\b", line)
        if found:  # xdist: "[gw0] [ 50%] INFRA path::test[..]"; without: "path::test[..] INFRA  [ 50%]"
            return found.group(1)
    return None


def assert_books_balance(view: RunView) -> None:
    """The ledger equals the sum of the records, within every cap, no reservation left open."""
    assert cap_violations(view) == []
    recorded = sum(r.spent + r.earlier_spent for r in view.records.values())
    assert view.ledger.total.spent == pytest.approx(recorded, abs=1e-9)
    assert view.ledger.reservations == [] and view.ledger.total.reserved == 0


# -- every fault, through the whole plugin, then a resume after the outage -------------------------------


@dataclass
class OutageRun:
    first: subprocess.CompletedProcess
    """pytest during the outage"""
    during: RunView
    checkpoint: Checkpoint
    """checkpoint.json after the outage run"""
    resumed: subprocess.CompletedProcess
    """pytest --resume-bench after it"""
    after: RunView


@pytest.fixture(scope="module")
def outage_run(tmp_path_factory, env_record) -> OutageRun:
    """One run of all the fault models (one session each) during the outage, one resume after it."""
    root = tmp_path_factory.mktemp("faults")
    ws, outage, run_dir = Workspace(root), Outage(root), root / "run"
    outage.begin()
    models = [*FAULTS, BAD_REQUEST]
    # What an infra failure spent stays charged to its model's cap; a session cap below the model's
    # share leaves room to run the item again at its full limit (else the retry is skipped: budget).
    room = ("--budget", "2", "--session-budget", "0.1")  # the session's calls, each with the whole prompt
    once = ("--call-retries", "1")  # a persistent fault outlasts the retry (one, to keep the hangs short)
    args = demo_args(run_dir, models, *room, *once, "--infra-backoff", "0")
    first = ws.pytest(*args, "-n", "2", "-v", env=outage.env)
    assert (run_dir / "plan.json").exists(), first.stdout[-3000:] + first.stderr[-3000:]
    during = RunView.load(run_dir)
    checkpoint = Checkpoint.model_validate_json(during.run.checkpoint.read_text())  # before the resume rewrites it
    outage.end()
    resumed = ws.pytest("--resume-bench", f"--run-dir={run_dir}", "-n", "2", "-v", env=outage.env)
    return OutageRun(first, during, checkpoint, resumed, RunView.load(run_dir))


@pytest.mark.xdist_group("outage_run")  # one worker builds the module fixture, not every worker
@pytest.mark.parametrize("model", FAULTS)
def test_a_provider_fault_ends_as_infra_with_its_exception_class(outage_run, model):
    exception, cause = FAULTS[model]
    record = outage_run.during.records[f"{model}-s01"]
    assert record.status is ItemStatus.INFRA and not record.status.terminal
    assert record.result is not None and record.result.stop.kind is StopKind.INFRA_ERROR
    assert record.result.stop.exception_class == exception
    assert f"infrastructure failure, not a result ({exception}: " in record.reason
    assert "(cause: " in record.reason and cause in record.reason, record.reason
    assert record.result.accounting.model_calls == 1, "the call before the fault answered, the faulted one did not"
    assert record.result.accounting.call_retries == 1 and "after 1 retry: " in record.reason
    assert record.verdicts == [] and record.result.certificates == []


@pytest.mark.xdist_group("outage_run")  # one worker builds the module fixture, not every worker
@pytest.mark.parametrize("model", FAULTS)
def test_infra_is_shown_apart_and_charged_as_infra(outage_run, model):
    first, during = outage_run.first, outage_run.during
    item = f"{model}-s01"
    assert shown(first, item) == "INFRA"
    assert f"INFRA {item}: infrastructure failure, not a result ({FAULTS[model][0]}" in first.stdout
    (charge,) = during.ledger.charges_for(item)
    assert charge.kind is ChargeKind.INFRA and charge.dollars > 0, "the answered call was paid for"
    assert charge.dollars == pytest.approx(during.records[item].spent)
    assert during.ledger.accounts[model].infra == during.ledger.accounts[model].spent


@pytest.mark.xdist_group("outage_run")  # one worker builds the module fixture, not every worker
def test_the_outage_run_as_a_whole(outage_run):
    first, during = outage_run.first, outage_run.during
    assert first.returncode == 1, "infrastructure failures are not a clean run"
    assert f"{len(FAULTS)} infra" in last_line(first) and "1 passed" in last_line(first)
    assert " failed" not in last_line(first) and " skipped" not in last_line(first)
    checkpoint = outage_run.checkpoint
    assert checkpoint.done == [f"{BAD_REQUEST}-s01"]
    assert sorted(checkpoint.remaining) == sorted(checkpoint.infra) == sorted(f"{m}-s01" for m in FAULTS)
    assert [line.item for line in during.result_lines] == [f"{BAD_REQUEST}-s01"], "infra is not a result"
    assert_books_balance(during)


@pytest.mark.xdist_group("outage_run")  # one worker builds the module fixture, not every worker
def test_a_bad_request_is_the_sessions_outcome_not_infra(outage_run):
    """The contrast: HTTP 400 is no provider outage. The session ends `error`, terminal, and the
    resume does not run it again, so retrying cannot turn it into a better score."""
    item = f"{BAD_REQUEST}-s01"
    record = outage_run.during.records[item]
    assert record.status is ItemStatus.PASSED and record.status.terminal
    assert record.result.stop.kind is StopKind.ERROR
    assert record.result.stop.exception_class == "litellm.exceptions.BadRequestError"
    assert "session finished (error, litellm.exceptions.BadRequestError); 0 certificate(s)" in record.reason
    assert shown(outage_run.first, item) == "PASSED"
    assert shown(outage_run.resumed, item) is None, "not run again"
    assert outage_run.after.records[item] == record
    assert [c.kind for c in outage_run.after.ledger.charges_for(item)] == [ChargeKind.RESULT]


@pytest.mark.xdist_group("outage_run")  # one worker builds the module fixture, not every worker
def test_resume_after_the_outage_gives_the_right_final_results(outage_run, env_record):
    from pytest_predbench.verify.verifier import verify

    resumed, after = outage_run.resumed, outage_run.after
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert f" {len(FAULTS)} passed in " in last_line(resumed), "only the infra items ran (xdist deselects silently)"
    keys = [item.key for item in after.plan.items()]
    assert sorted(after.records) == sorted(keys), "exactly one record per planned item"
    assert all(r.status.terminal for r in after.records.values())
    assert sorted(line.item for line in after.result_lines) == sorted(keys) and after.duplicate_results() == 0
    for model in FAULTS:
        item = f"{model}-s01"
        record = after.records[item]
        assert shown(resumed, item) == "PASSED"
        assert record.status is ItemStatus.PASSED and record.result.stop.kind is StopKind.FINISHED
        assert record.verified_rules == [RULE] and [v.accepted for v in record.verdicts] == [True]
        (certificate,) = record.result.certificates
        assert verify(certificate, env_record).accepted, "the verifier accepts it again, from the record"
        infra, result = after.ledger.charges_for(item)
        assert (infra.kind, result.kind) == (ChargeKind.INFRA, ChargeKind.RESULT)
        assert record.earlier_spent == pytest.approx(infra.dollars) and record.spent == pytest.approx(result.dollars)
    assert f"verified bugs: {RULE}" in resumed.stdout
    assert Checkpoint.model_validate_json(after.run.checkpoint.read_text()).remaining == []
    assert_books_balance(after)


# -- a transient fault: retried inside the call, the session completes ---------------------------------------

BLIPS = ("demo/blip_http_429", "demo/blip_http_500")


@pytest.mark.parametrize("retries", [None, "0"], ids=["default retries", "--call-retries 0 (contrast)"])
def test_one_429_or_500_is_retried_and_the_session_completes(tmp_path, env_record, retries):
    ws, run_dir = Workspace(tmp_path), tmp_path / "run"
    extra = ["--call-retries", retries] if retries else []
    proc = ws.pytest(*demo_args(run_dir, list(BLIPS), "--infra-backoff", "0", *extra), "-n", "2", "-v")
    view = RunView.load(run_dir)
    for model in BLIPS:
        record = view.records[f"{model}-s01"]
        if retries == "0":  # one attempt: the same single fault ends the session as infra
            assert record.status is ItemStatus.INFRA and record.result.stop.kind is StopKind.INFRA_ERROR
            assert record.result.accounting.call_retries == 0
            continue
        assert shown(proc, record.item) == "PASSED"
        assert record.status is ItemStatus.PASSED and record.result.stop.kind is StopKind.FINISHED
        assert record.result.accounting.call_retries == 1 and record.verified_rules == [RULE]
        assert [c.kind for c in view.ledger.charges_for(record.item)] == [ChargeKind.RESULT]
    assert view.plan.limits.call_retries == (0 if retries else 3), "the retries are part of the plan"
    assert proc.returncode == (1 if retries else 0), proc.stdout[-2000:]
    assert_books_balance(view)


# -- pausing a model whose provider keeps failing, and backing off -----------------------------------------


def test_a_failing_provider_is_paused_while_a_healthy_model_finishes(tmp_path, env_record):
    ws, outage = Workspace(tmp_path), Outage(tmp_path)
    outage.begin()
    run_dir = tmp_path / "run"
    retry = ("--call-retries", "0")
    args = demo_args(
        run_dir, ["demo/idle", DOWN], "--sessions", "3", "--pause-after", "2", "--infra-backoff", "0", *retry
    )
    proc = ws.pytest(*args, "-v", env=outage.env)  # no xdist: the items run in plan order
    assert proc.returncode == 1
    view = RunView.load(run_dir)
    for n in (1, 2):
        failed = view.records[f"{DOWN}-s0{n}"]
        assert failed.status is ItemStatus.INFRA and "litellm.exceptions.InternalServerError" in failed.reason
        assert [c.kind for c in view.ledger.charges_for(failed.item)] == [ChargeKind.INFRA]
    paused = view.records[f"{DOWN}-s03"]
    assert paused.status is ItemStatus.INFRA and not paused.status.terminal
    assert paused.reason == "paused: provider failing: 2 infrastructure failures in a row (re-run on resume)"
    assert paused.result is None and paused.spent == 0 and view.ledger.charges_for(paused.item) == []
    assert not view.run.trajectory(paused.item).exists(), "the paused item did not run"
    assert shown(proc, paused.item) == "PAUSED" and shown(proc, f"{DOWN}-s02") == "INFRA"
    assert "2 infra" in last_line(proc) and "1 paused" in last_line(proc) and "3 passed" in last_line(proc)
    assert all(view.records[f"demo/idle-s0{n}"].status is ItemStatus.PASSED for n in (1, 2, 3))
    checkpoint = Checkpoint.model_validate_json(view.run.checkpoint.read_text())
    assert checkpoint.remaining == [f"{DOWN}-s0{n}" for n in (1, 2, 3)]
    assert_books_balance(view)

    outage.end()  # the provider is back: a resume (a new invocation, a new streak) runs all three
    resumed = ws.pytest("--resume-bench", f"--run-dir={run_dir}", "-v", env=outage.env)
    assert resumed.returncode == 0 and "3 passed, 3 deselected" in last_line(resumed), resumed.stdout[-2000:]
    after = RunView.load(run_dir)
    assert all(after.records[f"{DOWN}-s0{n}"].verified_rules == [RULE] for n in (1, 2, 3))
    assert [c.kind for c in after.ledger.charges_for(paused.item)] == [ChargeKind.RESULT]
    assert_books_balance(after)


def test_without_pausing_every_failing_item_runs_and_is_charged_each_launch_backing_off(tmp_path, env_record):
    """The contrast (--pause-after 0): all three sessions of the failing model run and are paid for;
    each launch after a failure waited at least the back-off (1 s, then 2 s), read from the ledger's
    own timestamps (a lower bound the harness guarantees, not a timing measurement)."""
    ws, outage = Workspace(tmp_path), Outage(tmp_path)
    outage.begin()
    run_dir = tmp_path / "run"
    args = demo_args(
        run_dir, [DOWN], "--sessions", "3", "--pause-after", "0", "--infra-backoff", "1", "--call-retries", "0"
    )
    proc = ws.pytest(*args, "-v", env=outage.env)
    assert proc.returncode == 1 and "3 infra" in last_line(proc) and "paused" not in last_line(proc)
    view = RunView.load(run_dir)
    assert all("paused" not in r.reason and r.result is not None for r in view.records.values())
    charges = sorted(view.ledger.charges, key=lambda c: c.reserved_at)
    assert [c.kind for c in charges] == [ChargeKind.INFRA] * 3 and all(c.dollars > 0 for c in charges)
    for failures, (before, launch) in enumerate(zip(charges, charges[1:], strict=False), start=1):
        waited = (launch.reserved_at - before.at).total_seconds()
        assert waited >= backoff_seconds(failures, 1.0) - 0.05, (failures, waited)
    assert_books_balance(view)


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--pause-after", "-1"], "--pause-after must be 0 (never pause) or more; got -1"),
        (["--infra-backoff", "nan"], "--infra-backoff must be a number of seconds, 0 or more; got nan"),
        (["--call-retries", "-1"], "--call-retries must be a whole number, 0 or more; got -1"),
        (["--max-model-calls", "0"], "--max-model-calls must be a whole number, 1 or more; got 0"),
        (["--session-seconds", "0"], "--session-seconds must be a positive number of seconds, got 0.0"),
        (["--command-timeout", "inf"], "--command-timeout: Input should be a finite number"),
    ],
)
def test_bad_retry_options_are_refused_before_anything_runs(tmp_path, option, message):
    proc = Workspace(tmp_path).pytest(*fake_args(tmp_path / "run", *option))
    assert proc.returncode == 4 and f"ERROR: {message}" in proc.stderr
    assert not (tmp_path / "run").exists()


def test_backoff_doubles_and_is_capped():
    assert [backoff_seconds(n, 2.0) for n in range(5)] == [0.0, 2.0, 4.0, 8.0, 16.0]
    assert backoff_seconds(30, 2.0) == MAX_BACKOFF_S
    assert backoff_seconds(3, 0.0) == 0.0


# -- only classified failures are infra (the fake runner: no model, no pred) ------------------------------

RAISING_RUNNER = """
from pytest_predbench.session.fake import FakeRunner

def _broken(self, env, model, limits):
    raise RuntimeError("the runner broke in a way nobody classified")

FakeRunner.run = _broken
"""


@pytest.mark.parametrize("how", ["runner raises", "stop error", "stop infra_error (contrast)"])
def test_an_unclassified_error_is_the_sessions_outcome(tmp_path, how):
    """A runner raising anything, or a session stopping with `error`, is a genuine outcome: terminal,
    charged, never run again; only a classified infra_error is re-run on resume."""
    ws, run_dir = Workspace(tmp_path), tmp_path / "run"
    plugin: list[str] = []  # given to the resume too: the runner stays broken
    env = {}
    if how == "runner raises":
        (tmp_path / "raising_runner.py").write_text(RAISING_RUNNER)
        plugin, env = ["-p", "raising_runner"], {"PYTHONPATH": str(tmp_path)}
    stop = {"stop error": ["--fake-stop", "error"], "stop infra_error (contrast)": ["--fake-stop", "infra_error"]}
    extra = ["--sessions", "2", "--session-budget", "0.1", *stop.get(how, []), *plugin]
    proc = ws.pytest(*fake_args(run_dir, *extra, models=("fake/alpha",)), env=env)
    view = RunView.load(run_dir)
    resumed = ws.pytest("--resume-bench", f"--run-dir={run_dir}", *plugin, env=env)
    after = RunView.load(run_dir)
    if how == "stop infra_error (contrast)":
        assert proc.returncode == 1 and "2 infra" in last_line(proc)
        assert {r.status for r in view.records.values()} == {ItemStatus.INFRA}
        assert "2 infra" in last_line(resumed), "run again on resume"
        assert all(len(after.ledger.charges_for(k)) == 2 for k in after.records)
        return
    assert proc.returncode == 0 and "2 passed" in last_line(proc), proc.stdout[-2000:]
    for record in view.records.values():
        assert record.status is ItemStatus.PASSED and record.status.terminal
        assert record.result.stop.kind is StopKind.ERROR
        if how == "runner raises":
            assert record.result.stop.exception_class == "builtins.RuntimeError"
            assert "session finished (error, builtins.RuntimeError)" in record.reason
            assert record.spent == record.reserved == 0.1, "its spend is unknown: all of the reservation"
    assert {c.kind for c in view.ledger.charges} == {ChargeKind.RESULT}
    assert resumed.returncode == 0 and "nothing left to run" in resumed.stdout
    assert after.records == view.records and after.ledger.charges == view.ledger.charges
    assert_books_balance(after)


# -- the refused connection, on the wire -------------------------------------------------------------------


def _conversation(answers: int) -> list[dict]:
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}]
    for i in range(answers):
        call = {"id": f"call_{i}", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"call_{i}", "content": "out"},
        ]
    return messages


def _post(api_base: str, model: str, answers: int) -> http.client.HTTPResponse:
    url = urlparse(api_base)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    body = json.dumps({"model": model, "messages": _conversation(answers)})
    conn.request("POST", f"{url.path}/chat/completions", body=body, headers={"Content-Type": "application/json"})
    return conn.getresponse()


def test_a_refused_turn_closes_the_scripts_own_port_before_the_call_meets_it(tmp_path):
    down = tmp_path / "down"
    down.touch()
    script = Script(turns=[Turn(bash="echo one"), Turn(fault=Fault.REFUSED, fault_while=str(down), bash="echo two")])
    with DemoServer() as server:
        server.add_script("refuser", script)
        server.add_script("plain", Script(turns=[Turn(bash="echo one")]))
        assert server.api_base("plain") == server.url, "only a script that may refuse gets a port of its own"
        base = server.api_base("refuser")
        assert base != server.url
        port = urlparse(base).port
        first = _post(base, "refuser", 0)
        assert first.status == 200 and first.getheader("Connection") == "close"
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5)
        assert server.refusals("refuser") == 1
        with socket.socket() as other, pytest.raises(OSError):
            other.bind(("127.0.0.1", port))  # the port stays the gate's while it refuses
        assert _post(server.url, "plain", 0).status == 200, "the shared port serves on"

        assert server.api_base("refuser") == base, "a new conversation opens the gate again"
        down.unlink()  # the outage is over: the turn plays its reply
        reply = json.loads(_post(base, "refuser", 1).read())
        assert "echo two" in reply["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]
        assert server.refusals("refuser") == 1


def test_fault_while_expands_the_environment(tmp_path, monkeypatch):
    turn = Turn(fault=Fault.HTTP_500, fault_while=f"${OUTAGE_ENV}/provider-down", bash="echo up")
    monkeypatch.delenv(OUTAGE_ENV, raising=False)
    assert turn.now().fault is None, "no variable: no outage"
    monkeypatch.setenv(OUTAGE_ENV, str(tmp_path))
    assert turn.now().fault is None
    (tmp_path / "provider-down").touch()
    assert turn.now().fault is Fault.HTTP_500
