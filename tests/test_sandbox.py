"""The agent's sandbox, command by command: what it can use, and every escape it must not make.

Each attack has a contrast: the same command on the host, where it is safe to run, succeeds —
so a passing test means the sandbox stopped it, not that the command was broken.
"""

import json
import os
import subprocess
from pathlib import Path

import pytest

from pytest_predbench.session.demo.server import DemoServer
from pytest_predbench.session.observation import BoundedCapture
from pytest_predbench.session.sandbox import SOURCE_DIR, Sandbox
from pytest_predbench.session.submission import MAX_SUBMISSIONS, SPOOL_DIR, Spool
from pytest_predbench.verify.environment import checked_record, sha256_file
from tests.support.sandboxes import SHAPE_ONLY_CERT, session_channel
from tests.support.versions import TEST_VERSION


@pytest.fixture(scope="module")
def record():
    return checked_record(TEST_VERSION)


@pytest.fixture
def session(record, tmp_path):
    """A sandbox and its spool exactly as a session gets them (channel_sandbox), closed afterwards."""
    sandbox, spool = session_channel(record, tmp_path / "state")
    yield sandbox, spool
    sandbox.close()


@pytest.fixture
def sandbox(session) -> Sandbox:
    return session[0]


@pytest.fixture
def spool(session) -> Spool:
    return session[1]


def host(command: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """The contrast: the same command, unsandboxed."""
    return subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=env, timeout=30)


# -- what the agent is given -------------------------------------------------------------------


def test_pred_source_and_scratch_are_there(sandbox):
    result = sandbox.run(
        f"pred --version && ls {SOURCE_DIR}/src/rules | grep -c '\\.rs$' && pwd && echo made > f.txt && echo $HOME",
        timeout=30,
    )
    lines = result.output.split()
    assert result.returncode == 0, result.output
    assert lines[:2] == ["pred", "0.5.0"]
    assert int(lines[2]) > 100
    assert lines[3:] == ["/scratch", "/scratch"]
    assert (sandbox.scratch / "f.txt").read_text() == "made\n"


def test_scratch_files_persist_between_commands_but_tmp_does_not(sandbox):
    sandbox.run("echo kept > kept.txt; echo gone > /tmp/gone.txt", timeout=30)
    result = sandbox.run("cat kept.txt; cat /tmp/gone.txt", timeout=30)
    assert "kept" in result.output and "No such file" in result.output


# -- attacks -------------------------------------------------------------------------------------


def test_cannot_write_the_ledger_or_reports(sandbox, tmp_path):
    reports = tmp_path / "reports" / "run-1"
    reports.mkdir(parents=True)
    ledger = reports / "ledger.json"
    ledger.write_text('{"spent": 1.5}')
    attack = f"echo '{{\"spent\": 0}}' > {ledger}; echo forged > {reports}/leaderboard.md; ls {reports}"
    result = sandbox.run(attack, timeout=30)
    assert result.returncode != 0
    assert ledger.read_text() == '{"spent": 1.5}'
    assert not (reports / "leaderboard.md").exists()
    assert host(attack).returncode == 0  # contrast: on the host the same command writes both
    assert ledger.read_text() == '{"spent": 0}\n' and (reports / "leaderboard.md").exists()


def test_cannot_see_the_checkout_the_cache_or_home(sandbox, record):
    repo = Path(__file__).resolve().parent.parent
    for path in (repo, Path(record.pred_path).parent, Path.home(), Path(record.source_dir)):
        result = sandbox.run(f"ls {path}", timeout=30)
        assert result.returncode != 0, f"{path} is visible in the sandbox"
        assert host(f"ls {path}").returncode == 0


def test_cannot_replace_pred(sandbox, record):
    before = sha256_file(Path(record.pred_path))
    attack = (
        "cp /bin/true /predbench/libexec/pred; echo rc=$?; "
        "echo 'echo fake' > /predbench/bin/pred; echo rc=$?; "
        f"echo x >> {record.pred_path}; echo rc=$?; rm -f /predbench/bin/pred; echo rc=$?; "
        "mount -o remount,bind,rw /usr; echo rc=$?; grep CapEff /proc/self/status; pred --version"
    )
    result = sandbox.run(attack, timeout=30)
    assert result.output.count("rc=0") == 0, result.output
    assert "CapEff:\t0000000000000000" in result.output
    assert result.output.rstrip().endswith("pred 0.5.0")
    assert sha256_file(Path(record.pred_path)) == before
    # contrast: the scratch directory is writable, so the failures above are the sandbox's doing
    assert sandbox.run("cp /bin/true ./mine && echo rc=$?", timeout=30).output.strip() == "rc=0"


def test_no_api_keys_in_the_environment(sandbox, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-predbench-canary")
    probe = "env | grep -i -E 'key|token|secret'; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -i key; env"
    result = sandbox.run(probe, timeout=30)
    assert "sk-predbench-canary" not in result.output
    assert "OPENAI_API_KEY" not in result.output
    assert "predbench" not in result.output.lower().replace("/predbench/bin", "")  # no harness paths either
    assert "sk-predbench-canary" in host(probe, env=dict(os.environ)).stdout  # contrast


def test_no_network_even_to_loopback(sandbox):
    with DemoServer() as server:
        port = server.port
        connect = f"import socket; socket.create_connection(('127.0.0.1', {port}), 3); print('CONNECTED')"
        probe = f'python3 -c "{connect}"'
        result = sandbox.run(probe, timeout=30)
        assert "CONNECTED" not in result.output and result.returncode != 0
        assert "CONNECTED" in host(probe).stdout  # contrast: the server is listening


def test_timeout_kills_the_whole_sandbox(sandbox):
    marker = "sleep 987"
    result = sandbox.run(f"({marker}; echo never) & {marker}", timeout=1)
    assert result.timed_out and result.returncode is None
    left = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _cmdline(p) == marker.split()]
    assert left == []


def _cmdline(proc: Path) -> list[str]:
    try:
        return (proc / "cmdline").read_bytes().decode().split("\0")[:-1]
    except OSError:
        return []


def test_resource_limits_hold_and_cannot_be_raised(sandbox):
    result = sandbox.run(
        "ulimit -H -f; ulimit -f unlimited; echo raise=$?; head -c 70000000 /dev/zero > big; echo write=$?",
        timeout=30,
    )
    lines = result.output.splitlines()
    assert lines[0] == "65536"  # 64 MiB in 1 KiB blocks
    assert "raise=1" in result.output and "write=0" not in result.output
    assert (sandbox.scratch / "big").stat().st_size <= 64 * 1024**2


# -- bounded output ----------------------------------------------------------------------------


def test_huge_output_is_cut_head_and_tail(sandbox):
    result = sandbox.run("echo HEAD; yes middle | head -c 5000000; echo; echo TAIL", timeout=30)
    assert result.output.startswith("HEAD\n") and result.output.rstrip().endswith("TAIL")
    assert "bytes cut from the middle of this output" in result.output
    assert len(result.output) < 10_000 + 200
    assert "5000011 bytes" in result.output  # the marker says how much there was


def test_bounded_capture_keeps_small_output_whole():
    capture = BoundedCapture(limit=10)
    for chunk in (b"abc", b"de", b"fg"):
        capture.feed(chunk)
    assert capture.text() == "abcdefg"
    capture.feed(b"hijklmnop")
    assert capture.text().startswith("abcde\n[... 6 of 16 bytes cut") and capture.text().endswith("lmnop")


# -- pred calls are counted and limited -----------------------------------------------------------


def test_pred_calls_are_counted(sandbox):
    sandbox.run("pred --version; pred list --json > /dev/null; echo done", timeout=30)
    assert sandbox.take_pred_usage().calls == 2
    assert sandbox.take_pred_usage().calls == 0  # taken once


def test_pred_quota_refuses_extra_calls(sandbox):
    sandbox.set_pred_quota(1)
    result = sandbox.run("pred --version; pred --version; echo rc=$?", timeout=30)
    usage = sandbox.take_pred_usage()
    assert (usage.calls, usage.refused) == (1, 1)
    assert "pred-call limit is used up" in result.output and "rc=125" in result.output
    sandbox.set_pred_quota(None)  # contrast: without a quota both run
    sandbox.run("pred --version; pred --version", timeout=30)
    assert sandbox.take_pred_usage().model_dump() == {"calls": 2, "refused": 0}


# -- the submission channel ---------------------------------------------------------------------


def test_submit_certificate_spools_and_the_host_checks_the_shape(sandbox, spool):
    good = json.dumps(SHAPE_ONLY_CERT)
    result = sandbox.run(f"echo '{good}' > c.json && submit-certificate c.json", timeout=30)
    assert "handed to the harness" in result.output
    receipts = spool.collect()
    assert [r.certificate is not None for r in receipts] == [True]
    assert "verified after the session" in receipts[0].message()
    assert spool.collect() == []  # taken once
    assert spool.accepted[0].model_dump(mode="json", exclude_none=True) == {**SHAPE_ONLY_CERT, "solver": "brute-force"}


def test_shape_errors_are_answered_and_never_counted(sandbox, spool):
    bad = json.dumps({**SHAPE_ONLY_CERT, "better_source_solution": None})
    sandbox.run(f"echo '{bad}' > bad.json && submit-certificate bad.json", timeout=30)
    (receipt,) = spool.collect()
    assert receipt.certificate is None and "better_source_solution" in receipt.message()
    assert "accepted" not in receipt.message() and "rejected" not in receipt.message()  # no verdict words
    result = sandbox.run("submit-certificate missing.json; echo rc=$?", timeout=30)
    assert "rc=2" in result.output and spool.collect() == []
    assert (len(spool.accepted), spool.refused) == (0, 1)


def test_planted_links_and_fifos_in_the_spool_are_refused(sandbox, spool):
    sandbox.run(
        f"ln -s /etc/passwd {SPOOL_DIR}/a.json; mkfifo {SPOOL_DIR}/b.json; mkdir {SPOOL_DIR}/c.json",
        timeout=30,
    )
    receipts = spool.collect()
    assert len(receipts) == 3 and all(r.certificate is None for r in receipts)
    assert not [p for p in spool.dir.iterdir() if not p.name.startswith(".")]  # the directory set aside


def test_submissions_are_capped(tmp_path):
    spool = Spool(tmp_path / "spool")
    for i in range(MAX_SUBMISSIONS + 1):
        (spool.dir / f"{i:03}.json").write_text(json.dumps(SHAPE_ONLY_CERT))
    receipts = spool.collect()
    assert len(spool.accepted) == MAX_SUBMISSIONS
    assert "already has" in receipts[-1].message()
