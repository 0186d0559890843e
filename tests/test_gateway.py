"""The pred gateway from inside the agent's sandbox: pred works as before, every call is booked
once by the harness, and nothing the agent can do inside gets a pred run the record does not book.

Each attack has its contrast: the normal call works and is booked once (or, for what the host
holds, the host has it), so a passing test means the gateway stopped the attack, not that the
command was broken.
"""

import hashlib
import json
from pathlib import Path

import pytest

from pytest_predbench.session.sandbox import SCRATCH_DIR, Sandbox
from pytest_predbench.verify.environment import checked_record
from tests.support.sandboxes import session_channel
from tests.support.versions import TEST_VERSION

VERSION = "pred 0.5.0"


@pytest.fixture(scope="module")
def record():
    return checked_record(TEST_VERSION)


@pytest.fixture
def sandbox(record, tmp_path):
    made, _ = session_channel(record, tmp_path / "state")
    yield made
    made.close()


def run(sandbox: Sandbox, command: str, quota: int | None = None, timeout: float = 60) -> str:
    sandbox.set_pred_quota(quota)
    return sandbox.run(command, timeout=timeout).output


# -- what works, and is booked once ------------------------------------------------------------------


def test_a_call_is_booked_once_and_logged(sandbox):
    output = run(sandbox, "pred --version; echo rc=$?")
    assert output.split() == [*VERSION.split(), "rc=0"]
    assert sandbox.take_pred_usage().model_dump() == {"calls": 1, "refused": 0}
    (call,) = sandbox.take_pred_log()
    assert (call.tool, call.argv, call.exit, call.stdout_bytes) == ("pred", ["--version"], 0, len(VERSION) + 1)
    assert sandbox.take_pred_usage().calls == 0 and sandbox.take_pred_log() == []  # taken once


def test_files_stdin_pipes_and_subdirectories_work_as_before(sandbox):
    output = run(
        sandbox,
        "mkdir -p sub && cd sub && pred create MIS --graph 0-1,1-2 -o p.json && "
        "pred evaluate p.json --config 1,0,1 | tr -d '\\n'; echo; "
        "cat p.json | pred evaluate - --config 0,1,0 | tr -d '\\n'; echo; pred list --rules | grep -c '/i32'",
    )
    lines = output.splitlines()
    assert '"Max(2)"' in lines[-3] and '"Max(1)"' in lines[-2], output
    assert int(lines[-1]) > 50
    assert json.loads((sandbox.scratch / "sub" / "p.json").read_text())["type"] == "MaximumIndependentSet"
    assert sandbox.take_pred_usage().calls == 4
    assert [c.exit for c in sandbox.take_pred_log()] == [0, 0, 0, 0]


def test_past_the_limit_a_call_is_refused_and_nothing_runs(sandbox):
    output = run(sandbox, "pred create MIS --graph 0-1 -o a.json; pred create MIS --graph 0-1 -o b.json; echo rc=$?", 1)
    assert "pred-call limit is used up" in output and "rc=125" in output
    assert (sandbox.scratch / "a.json").exists() and not (sandbox.scratch / "b.json").exists()
    assert sandbox.take_pred_usage().model_dump() == {"calls": 1, "refused": 1}
    run(sandbox, "pred create MIS --graph 0-1 -o b.json", 1)  # contrast: with room, the same call runs
    assert (sandbox.scratch / "b.json").exists() and sandbox.take_pred_usage().calls == 1


# -- the real binaries are not there --------------------------------------------------------------------


def test_the_real_binaries_are_nowhere_in_the_sandbox(sandbox, record):
    digests = {hashlib.sha256(Path(p).read_bytes()).hexdigest() for p in (record.pred_path, record.extractor_path)}
    listing = run(
        sandbox,
        "find / \\( -path /proc -o -path /sys \\) -prune -o -type f -size +1M -print 2>/dev/null "
        "| xargs -r sha256sum 2>/dev/null | cut -c1-64",
    )
    assert listing.count("\n") > 10 and not digests & set(listing.split()), "a real pred binary is in the sandbox"
    found = run(sandbox, "ls -d /predbench/*; command -v pred pred-extract; wc -c < /predbench/bin/pred")
    assert found.split()[:5] == [
        "/predbench/bin", "/predbench/gateway", "/predbench/spool", "/predbench/bin/pred", "/predbench/bin/pred-extract"
    ]  # fmt: skip
    assert int(found.split()[-1]) < 100_000, "the agent's pred is the gateway's small client"
    assert all(Path(p).stat().st_size > 1 << 20 for p in (record.pred_path, record.extractor_path))  # contrast


def test_a_scripted_session_gets_no_unbooked_pred_run(sandbox):
    """Run every executable whose name starts with pred, copied or not; tamper with every file it can
    write outside its own directories; then call pred more often than its quota allows. What each
    run printed goes to runs.txt in the scratch (the observation would cut it)."""
    attack = r"""
    find / \( -path /proc -o -path /sys -o -path /scratch \) -prune -o -name 'pred*' -type f -print \
      2>/dev/null > found.txt
    while read -r f; do
      c="./copy-$(basename "$f")"; cp "$f" "$c" 2>/dev/null; chmod +x "$c" 2>/dev/null
      "$f" --version < /dev/null >> runs.txt 2>/dev/null; "$c" --version < /dev/null >> runs.txt 2>/dev/null
    done < found.txt
    find / \( -path /proc -o -path /sys -o -path /scratch -o -path /predbench/spool -o -path /tmp -o -path /dev \) \
      -prune -o -writable -print 2>/dev/null > writable.txt
    while read -r f; do
      [ "$(readlink -f "$f")" = /dev/null ] && continue  # a link to /dev/null: writable, and harmless
      { : > "$f" || ln -sf /dev/null "$f"; } 2>/dev/null && echo "$f" >> tampered.txt
    done < writable.txt
    rm -f /predbench/gateway/socket; ln -sf /dev/null /predbench/gateway/socket; : > /predbench/gateway/socket
    for i in 1 2 3 4 5 6; do pred --version >> runs.txt 2>&1; done
    echo found=$(grep -c . found.txt) tampered=$(cat tampered.txt 2>/dev/null | wc -l)
    """
    output = run(sandbox, attack, quota=3, timeout=120)
    usage = sandbox.take_pred_usage()
    runs = (sandbox.scratch / "runs.txt").read_text(errors="replace")
    assert "found=" in output and "tampered=0" in output, output
    assert int(output.split("found=")[1].split()[0]) >= 2  # it found the clients, at least
    real_runs = runs.count(VERSION) + runs.count('"error":"usage"')  # pred's answer, and pred-extract's
    assert real_runs == usage.calls <= 3 and usage.refused > 0, runs
    assert len(sandbox.take_pred_log()) == usage.calls
    assert run(sandbox, "pred --version", quota=1).strip() == VERSION  # contrast: the gateway still works
    assert sandbox.take_pred_usage().calls == 1


# -- file arguments stay in the scratch -----------------------------------------------------------------


def test_pred_cannot_read_or_write_outside_the_scratch(sandbox, tmp_path):
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"type": "MaximumIndependentSet", "variant": {}, "data": {}}))
    forged = tmp_path / "forged.json"
    attack = (
        f"pred evaluate {secret} --config 1; echo rc=$?; ln -s {secret} link.json; pred evaluate link.json --config 1; "
        f"echo rc=$?; pred evaluate ../../../..{secret} --config 1; echo rc=$?; "
        f"pred create MIS --graph 0-1 -o {forged}; echo rc=$?; cd /tmp && pred --version; echo rc=$?"
    )
    output = run(sandbox, attack)
    assert output.count("rc=0") == 0, output
    assert "cd there first" in output  # a working directory outside the scratch is refused
    assert not forged.exists()
    run(sandbox, f"cp /dev/null x; pred create MIS --graph 0-1 -o {SCRATCH_DIR}/mine.json")  # contrast: in the scratch
    assert (sandbox.scratch / "mine.json").exists()


# -- the booking state ------------------------------------------------------------------------------------


def test_the_gateway_socket_cannot_be_replaced(sandbox):
    attack = (
        "rm -f /predbench/gateway/socket; echo rc=$?; mv /predbench/gateway/socket x; echo rc=$?; "
        "python3 -c \"import socket; s=socket.socket(socket.AF_UNIX); s.bind('/predbench/gateway/fake')\"; echo rc=$?; "
        "pred --version"
    )
    output = run(sandbox, attack)
    assert "rc=0" not in output and output.rstrip().endswith(VERSION), output
    assert sandbox.take_pred_usage().calls == 1


def test_a_forged_request_is_refused_and_not_booked(sandbox):
    forge = r"""python3 - <<'EOF'
import socket
def call(data, fds):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET); s.connect("/predbench/gateway/socket")
    socket.send_fds(s, [data], fds); print(repr(s.recv(4096)))
call(b"pred\0/scratch\0--version", [1])
call(b"pred\0/scratch\0--version", [0, 1, 2, 2])
call(b"sh\0/scratch\0-c\0id", [0, 1, 2])
call(b"/predbench/libexec/pred\0/scratch\0--version", [0, 1, 2])
call(b"pred\0/etc\0--version", [0, 1, 2])
call(b"pred\0relative\0--version", [0, 1, 2])
call(b"pred\0/scratch/../etc\0--version", [0, 1, 2])
call(b"pred\0/scratch\0" + b"x" * 70000, [0, 1, 2])
EOF"""
    output = run(sandbox, forge)
    assert output.count("125\\n") == 8 and VERSION not in output, output
    assert sandbox.take_pred_usage().model_dump() == {"calls": 0, "refused": 0}
    assert run(sandbox, "pred --version").strip() == VERSION  # contrast: a well-formed call runs
    assert sandbox.take_pred_usage().calls == 1


def test_a_flood_is_booked_within_the_limit_and_the_gateway_survives(sandbox):
    flood = r"""
    python3 - <<'EOF' &
import socket, time
held = []
for _ in range(40):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET); s.connect("/predbench/gateway/socket"); held.append(s)
time.sleep(3)
EOF
    for i in $(seq 60); do pred --version 2>/dev/null & done; wait; echo flooded
    """
    output = run(sandbox, flood, quota=5, timeout=120)
    usage = sandbox.take_pred_usage()
    assert "flooded" in output and output.count(VERSION) == usage.calls <= 5, output
    assert run(sandbox, "pred --version", quota=1).strip() == VERSION  # contrast: afterwards a call still runs
    assert sandbox.take_pred_usage().calls == 1


def test_a_killed_client_takes_its_run_with_it(sandbox):
    """`timeout` around a pred call must bound the call itself, not only the client."""
    output = run(
        sandbox,
        "pred create MIS --random --num-vertices 32 --edge-prob 0.05 -o big.json && "
        "timeout 2 pred solve big.json --solver brute-force; echo rc=$?",
        timeout=60,
    )
    assert "rc=124" in output, output
    calls = sandbox.take_pred_log()
    assert calls[-1].exit is None and calls[-1].seconds < 10, calls  # killed, not run to its end


# -- the relays cannot block -----------------------------------------------------------------------------

FIFO_CALL = r"""python3 - <<'EOF'
import fcntl, os, socket
os.mkfifo("f")
fd = os.open("f", os.O_RDWR)  # its own reader: a write to it never fails, it blocks
fcntl.fcntl(fd, 1031, 4096)  # F_SETPIPE_SZ: one page
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET); s.connect("/predbench/gateway/socket")
socket.send_fds(s, [b"pred\0/scratch\0list"], [0, fd, fd] if "{mode}" == "fifo" else [0, 1, 2])
print("answer", repr(s.recv(64)))
EOF"""


@pytest.mark.parametrize("mode", ["fifo", "stdout"])
def test_a_descriptor_that_never_drains_cannot_hold_the_gateway(sandbox, mode):
    """A FIFO with a one-page buffer that nobody reads, as the call's stdout and stderr: the relay's
    write once blocked forever (the session's tmpfs left behind, the call missing from the log)."""
    result = sandbox.run(FIFO_CALL.replace("{mode}", mode), timeout=60)
    assert not result.timed_out and "answer b'0\\n'" in result.output, result
    assert sandbox.take_pred_usage().calls == 1
    (call,) = sandbox.take_pred_log()  # booked and logged
    assert call.exit == 0 and call.stdout_bytes > 4096, call
    if mode == "stdout":  # contrast: a descriptor that drains gets all of it
        assert result.output.count("\n") > 20
    assert sandbox.run("pred --version", timeout=30).output.strip() == VERSION  # the gateway goes on
