"""Attacks on the harness from inside the agent's sandbox, as a session builds it (MiniSweRunner: the
submit-certificate tool, the spool, a private scratch): writing what decides the score (the run's
ledger, item records and reports, the calibration fixtures, pred), reading what it must not see (the
run's hidden state, another session's scratch and trajectory, the environment record, the harness's
code, virtualenv and environment: API keys and harness paths), the network, and seeing, reading or
killing the harness processes (the pytest worker that runs the session and the controller above it).

Every attack has its contrast, which shows that it would succeed without the protection: the same
write or read from the host succeeds (for the repository's own files and pred, whose damage would
hurt everyone, the host's write access is shown instead, and the sandbox's attempt writes nothing
even if it succeeded), and the process attacks run again in a sandbox without its own pid
namespace, where they see the harness and kill a stand-in victim. Only processes this test started
are ever signalled, by pid.

tests/test_sandbox.py has the sandbox's basic contract (pred, source and scratch are there, tmp is
fresh, limits, bounded output, the pred-call quota, the submission channel).
"""

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from pytest_predbench.session.gateway import SOCKET_DIR
from pytest_predbench.session.sandbox import SANDBOX_ENV, SOURCE_DIR, Sandbox
from pytest_predbench.session.submission import SPOOL_DIR, SUBMIT_SCRIPT
from pytest_predbench.state.rundir import RunDir
from pytest_predbench.verify import pin
from pytest_predbench.verify.environment import checked_record, sha256_file
from tests.support.versions import CALIBRATION_DIR, TEST_VERSION

pytestmark = pytest.mark.slow  # end to end in subprocesses: `make test`, not `make check`

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def record():
    return checked_record(TEST_VERSION)


MADE: list[Sandbox] = []


@pytest.fixture(autouse=True)
def _closed():
    """Every sandbox a test makes is closed after it (its gateway, cgroups and disk go)."""
    yield
    while MADE:
        MADE.pop().close()


def session_sandbox(record, root: Path, kind: type[Sandbox] = Sandbox) -> Sandbox:
    """A sandbox exactly as MiniSweRunner builds one for a session, with its state under `root`."""
    sandbox = kind(
        pred_path=Path(record.pred_path),
        extractor_path=Path(record.extractor_path),
        source_dir=Path(record.source_dir),
        state_dir=root / "sandbox",
        tools={"submit-certificate": SUBMIT_SCRIPT},
        writable=(SPOOL_DIR,),
    )
    MADE.append(sandbox)
    return sandbox


class SharedPidSandbox(Sandbox):
    """The contrast for the process attacks: the same sandbox, but in the host's pid namespace
    (every other namespace still unshared; the host's /proc bound, as a new one cannot be mounted
    without a pid namespace of its own)."""

    def options(self, status_fd: int | None = None) -> list[str]:
        args = super().options(status_fd)
        args.remove("--unshare-pid")  # every other namespace stays (IPC: made by bwrap.start)
        at = args.index("--proc")
        args[at : at + 2] = ["--ro-bind", "/proc", "/proc"]
        return args


def host(command: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """The contrast: the same command, unsandboxed."""
    return subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=env, timeout=60)


@pytest.fixture
def canary() -> str:
    return f"CANARY-{uuid.uuid4().hex}"


@pytest.fixture
def run_dir(tmp_path, canary) -> RunDir:
    """A run directory as the harness keeps it, every file holding the canary."""
    run = RunDir(tmp_path / "reports" / "run-1")
    run.create()
    for path in (
        run.plan,
        run.ledger,
        run.preflight,
        run.checkpoint,
        run.item_record("demo/finder-s01"),
        run.results_file("demo/finder"),
        run.trajectory("demo/idle-s01"),
        run.path / "leaderboard.md",
    ):
        path.write_text(f'{{"secret": "{canary}"}}\n')
    return run


def readable(sandbox: Sandbox, paths: list[Path]) -> dict[str, str]:
    """What `cat` prints for each path inside the sandbox (an error message when it cannot)."""
    return {str(p): sandbox.run(f"cat {p} 2>&1; echo rc=$?", timeout=30).output for p in paths}


# -- writing what decides the score ----------------------------------------------------------------


def test_the_runs_ledger_records_and_reports_cannot_be_written(record, tmp_path, run_dir):
    sandbox = session_sandbox(record, tmp_path / "session")
    targets = [p for p in run_dir.path.rglob("*") if p.is_file()]
    before = {p: p.read_bytes() for p in targets}
    forged = run_dir.path / "leaderboard.html"
    attack = "; ".join(
        [f"echo forged > {p}; echo rc=$?" for p in targets]
        + [f"echo forged > {forged}; echo rc=$?", f"rm -r {run_dir.items}; echo rc=$?"]
    )
    result = sandbox.run(attack, timeout=60)
    assert "rc=0" not in result.output, result.output
    assert {p: p.read_bytes() for p in targets} == before and not forged.exists()
    done = host(attack)  # contrast: from the host the same command overwrites every one of them
    assert done.stdout.count("rc=0") == len(targets) + 2
    assert all(p.read_bytes() == b"forged\n" for p in targets if p.exists()) and forged.exists()


def test_the_fixtures_pred_the_source_and_the_env_record_cannot_be_written(record, tmp_path):
    """Opened for appending and closed without a byte: a harmless probe even if it succeeded."""
    sandbox = session_sandbox(record, tmp_path / "session")
    fixtures = sorted(CALIBRATION_DIR.glob("*.json"))
    source = sorted(Path(record.source_dir).joinpath("src", "rules").glob("*.rs"))[:3]
    hosts = [*fixtures, Path(record.pred_path), pin.env_record_path(TEST_VERSION), *source]
    inside = [
        "/predbench/bin/pred",
        "/predbench/bin/submit-certificate",
        "/predbench/gateway/socket",
        *(f"{SOURCE_DIR}/src/rules/{p.name}" for p in source),
    ]
    digests = {p: sha256_file(p) for p in hosts}
    probes = [*map(str, hosts), *inside]
    result = sandbox.run("; ".join(f": >> {p}; echo rc=$?" for p in probes), timeout=60)
    assert result.output.count("rc=") == len(probes) and "rc=0" not in result.output, result.output
    assert {p: sha256_file(p) for p in hosts} == digests
    sandbox.run(f"mkdir -p {CALIBRATION_DIR}; touch {CALIBRATION_DIR}/forged.json", timeout=30)
    assert not (CALIBRATION_DIR / "forged.json").exists()
    assert all(os.access(p, os.W_OK) for p in hosts)  # contrast: the harness could write every one
    assert sandbox.run(": >> mine.txt; echo rc=$?", timeout=30).output.strip() == "rc=0"  # scratch is writable


# -- reading what it must not see --------------------------------------------------------------------


def test_the_runs_state_is_invisible(record, tmp_path, run_dir, canary):
    sandbox = session_sandbox(record, tmp_path / "session")
    hidden = [path for path in run_dir.path.rglob("*") if path.is_file()]
    assert len(hidden) == 8
    seen = readable(sandbox, [*hidden, run_dir.path / ".state.lock"])
    for path, output in seen.items():
        assert canary not in output and "rc=0" not in output, f"{path} is readable: {output}"
    names = "ledger.json plan.json checkpoint.json preflight.json *.traj.json finder-s01.json leaderboard.md"
    search = "find / \\( " + " -o ".join(f"-name '{n}'" for n in names.split()) + " \\) 2>/dev/null; echo done"
    found = sandbox.run(search, timeout=120).output
    assert found.strip() == "done", f"run state found in the sandbox: {found}"
    pattern = f"{canary[:-1]}[{canary[-1]}]"  # matches the canary, not the command line that holds it
    roots = "$(find / -mindepth 1 -maxdepth 1 -not -type l -not -name usr -not -name proc)"  # /usr: the host's own
    grep = sandbox.run(f"grep -r -l '{pattern}' {roots} 2>/dev/null; echo done", timeout=120).output
    assert grep.strip() == "done", f"the canary is readable in the sandbox: {grep}"
    for path in hidden:  # contrast: the harness reads every one of them
        assert canary in path.read_text()
    assert canary in host(f"cat {' '.join(map(str, hidden))}").stdout


def test_another_sessions_scratch_and_trajectory_are_invisible(record, tmp_path, run_dir, canary):
    first = session_sandbox(record, tmp_path / "first")
    second = session_sandbox(record, tmp_path / "second")
    first.run(f"echo {canary} > notes.txt; echo {canary} > {SPOOL_DIR}/c.json", timeout=30)
    assert canary in first.run("cat notes.txt", timeout=30).output  # contrast: its own session reads it
    paths = [first.scratch / "notes.txt", first.writable_dir(SPOOL_DIR) / "c.json", run_dir.trajectory("demo/idle-s01")]
    for path, output in readable(second, paths).items():
        assert canary not in output, f"{path} leaked into another session"
    assert "No such file" in second.run(f"cat notes.txt {SPOOL_DIR}/c.json", timeout=30).output  # each its own
    assert all(canary in host(f"cat {path}").stdout for path in paths)  # contrast: on the host


def test_the_env_record_the_harness_code_and_its_packages_are_invisible(record, tmp_path):
    sandbox = session_sandbox(record, tmp_path / "session")
    import pydantic

    secrets = [
        pin.env_record_path(TEST_VERSION),  # where pred lives and its hash
        REPO / "pytest_predbench" / "verify" / "verifier.py",  # how certificates are judged
        REPO / "pytest_predbench" / "session" / "demo" / "scripts" / "finder.json",  # the scripted answers
        CALIBRATION_DIR / "genuine_mvc_to_ensemble_suboptimal.json",  # a known bug, with its certificate
        Path(pydantic.__file__),  # the harness's virtualenv
        Path(sys.executable),
    ]
    for path in secrets:
        assert path.is_file() and path.read_bytes()  # contrast: the harness has them
    for path, output in readable(sandbox, secrets).items():
        assert "rc=0" not in output, f"{path} is readable in the sandbox"


def test_no_api_key_and_no_harness_path_in_the_environment(record, tmp_path, monkeypatch, canary):
    secrets = {
        "OPENAI_API_KEY": f"sk-{canary}",
        "ANTHROPIC_API_KEY": f"sk-ant-{canary}",
        "AWS_SECRET_ACCESS_KEY": canary,
        "HF_TOKEN": f"hf_{canary}",
        "PREDBENCH_RUN_DIR": str(tmp_path / "reports" / canary),
    }
    for key, value in secrets.items():
        monkeypatch.setenv(key, value)
    sandbox = session_sandbox(record, tmp_path / "session")
    probe = "env; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'"
    result = sandbox.run(probe, timeout=30).output
    assert canary not in result and not any(key in result for key in secrets)
    for harness_path in (str(REPO), sys.prefix, str(tmp_path), str(Path.home() / ".cache")):
        assert harness_path not in result, f"{harness_path} leaks into the sandbox's environment"
    names = {line.split("=", 1)[0] for line in sandbox.run("env", timeout=30).output.splitlines() if "=" in line}
    assert names <= {*SANDBOX_ENV, "PWD", "OLDPWD", "SHLVL", "_"}, names - set(SANDBOX_ENV)
    seen = host(probe, env=dict(os.environ)).stdout  # contrast: a command of the harness gets them all
    assert all(value in seen for value in secrets.values())


# -- the network ---------------------------------------------------------------------------------------


def test_no_network_not_even_loopback_to_the_host(record, tmp_path):
    sandbox = session_sandbox(record, tmp_path / "session")
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        connect = f"import socket; socket.create_connection(('127.0.0.1', {port}), 3); print('CONNECTED')"
        probe = f'python3 -c "{connect}" 2>&1; cat /proc/net/dev'
        inside = sandbox.run(probe, timeout=30).output
        outside = host(probe).stdout  # contrast: the host connects, and has interfaces besides lo
    assert "CONNECTED" not in inside and "CONNECTED" in outside
    interfaces = lambda text: {line.split(":")[0].strip() for line in text.splitlines() if ":" in line[:20]}  # noqa: E731
    assert interfaces(inside) == {"lo"}, inside
    assert interfaces(outside) - {"lo"}


# -- the harness's processes -------------------------------------------------------------------------


@pytest.fixture
def victim():
    """A process outside the sandbox that stands for the harness where the attack really lands."""
    proc = subprocess.Popen(["sleep", "600"], start_new_session=True)
    deadline = time.monotonic() + 30  # until it has exec'd: before that its cmdline is the forked parent's or empty
    while cmdline_text(proc.pid) != "sleep 600" and time.monotonic() < deadline:
        time.sleep(0.01)
    yield proc
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


def harness_pids() -> list[int]:
    """This pytest process (an xdist worker, or the only one) and its parent (the controller)."""
    return [os.getpid(), os.getppid()]


def cmdline_text(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()


def test_the_harness_processes_cannot_be_seen_or_killed(record, tmp_path, victim):
    targets = [*harness_pids(), victim.pid]
    commands = [cmdline_text(pid) for pid in targets]  # what the host sees of them
    assert commands[-1] == "sleep 600"
    look = "; ".join(f"tr '\\0' ' ' < /proc/{pid}/cmdline; echo" for pid in targets)
    listing = "for p in /proc/[0-9]*; do echo $(basename $p); done"

    sandbox = session_sandbox(record, tmp_path / "session")
    seen = sandbox.run(f"{look}; {listing}", timeout=30).output
    assert not any(command in seen for command in commands), seen
    pids = [int(line) for line in seen.split() if line.isdigit()]
    assert pids and max(pids) < 20 and not set(pids) & set(targets), f"processes beyond the sandbox's own: {pids}"
    killed = sandbox.run(f"kill -9 {' '.join(map(str, targets))}; echo rc=$?", timeout=30).output
    assert "rc=0" not in killed and killed.count("No such process") == len(targets), killed
    assert victim.poll() is None, "a process outside the sandbox was killed from inside it"
    os.kill(os.getppid(), 0)  # the controller lives (this worker too, or the test would not go on)
    own = sandbox.run("sleep 100 & kill -9 $!; wait $!; echo status=$?", timeout=30)
    assert "status=137" in own.output  # inside, killing works on its own processes

    # contrast: the same commands in the host's pid namespace see the harness and kill the victim
    shared = session_sandbox(record, tmp_path / "shared", SharedPidSandbox)
    exposed = shared.run(look, timeout=30).output
    assert all(command in exposed for command in commands), (commands, exposed)
    shared.run(f"kill -9 {victim.pid}", timeout=30)  # the victim only, never the harness
    assert victim.wait(timeout=30) == -signal.SIGKILL


def test_a_background_process_does_not_outlive_its_command(record, tmp_path):
    """A daemon left behind could act after the command returned (or kill the harness later)."""
    marker = f"sleep {900 + os.getpid() % 97}"
    daemonize = f"({marker} > /dev/null 2>&1 &); setsid {marker} > /dev/null 2>&1 & echo started"
    result = session_sandbox(record, tmp_path / "session").run(daemonize, timeout=30)
    assert "started" in result.output and not result.timed_out
    deadline = time.monotonic() + 10  # the pid namespace is torn down just after bwrap reports the exit
    while _running(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _running(marker) == []
    subprocess.run(["bash", "-c", daemonize], check=True, capture_output=True, timeout=30)
    deadline = time.monotonic() + 10  # contrast: on the host both daemons outlive the shell
    while len(_running(marker)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    left = _running(marker)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert len(left) == 2


def _running(command: str) -> list[int]:
    procs = (p for p in Path("/proc").iterdir() if p.name.isdigit())
    return [int(p.name) for p in procs if _cmdline(p) == command.split()]


def _cmdline(proc: Path) -> list[str]:
    try:
        return (proc / "cmdline").read_bytes().decode().split("\0")[:-1]
    except OSError:
        return []


class WritableRootSandbox(Sandbox):
    """The contrast: the same sandbox with its own root and /dev left writable (bubblewrap's default)."""

    def options(self, status_fd: int | None = None) -> list[str]:
        args = super().options(status_fd)
        for mount in ("/", "/dev"):
            at = next(i for i in range(len(args) - 1) if args[i : i + 2] == ["--remount-ro", mount])
            del args[at : at + 2]
        return args


def test_the_sandboxs_own_root_and_dev_cannot_be_filled(record, tmp_path):
    """Both are tmpfs without a size limit: writable, a command could fill the host's memory."""
    probe = "echo x > /forged; echo root=$?; echo x > /dev/forged; echo dev=$?; echo x > /tmp/mine; echo tmp=$?"
    inside = session_sandbox(record, tmp_path / "session").run(probe, timeout=30).output
    assert ("root=1", "dev=1", "tmp=0") == tuple(line for line in inside.splitlines() if "=" in line), inside
    contrast = session_sandbox(record, tmp_path / "writable", WritableRootSandbox).run(probe, timeout=30).output
    assert "root=0" in contrast and "dev=0" in contrast, contrast


def test_no_host_path_in_any_processs_command_line(record, tmp_path):
    """bubblewrap is the sandbox's pid 1: its arguments name every host path bound in, so they are
    passed by file descriptor, and its command line is `bwrap --args N -- ...` (the agent's command)."""
    sandbox = session_sandbox(record, tmp_path / "session")
    host_paths = [str(tmp_path), record.source_dir, str(Path(record.pred_path).parent), str(sandbox.gateway.socket_dir)]
    seen = sandbox.run("for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done", timeout=30).output
    assert "bwrap --args" in seen, seen  # pid 1 is bubblewrap, as expected
    assert not [path for path in host_paths if path in seen], seen
    options = " ".join(sandbox.options())  # contrast: what its command line would have shown
    assert str(tmp_path) in options


PANICS = (
    '{"data":{"graph":{"edges":[[0,7]],"num_vertices":2},"weights":[1,1]},'
    '"type":"MaximumIndependentSet","variant":{"graph":"SimpleGraph","weight":"One"}}'
)
"""An instance whose edge names a vertex that is not there: pred panics, naming its source file."""
HOST_VIEW = [
    "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; tr '\\0' '\\n' < $p/environ; done",
    "cat /proc/self/mountinfo /proc/self/mounts /proc/mounts /proc/self/cgroup /proc/self/cpuset",
    "cat /proc/self/maps /proc/self/status /proc/self/attr/current 2>&1",
    "for p in /proc/[0-9]*; do readlink $p/exe $p/cwd $p/root $p/fd/*; done",
    "cat /etc/* /predbench/bin/submit-certificate 2>&1; strings -n 4 /predbench/bin/* 2>&1 || cat /predbench/bin/*",
    "ls -la / /src /predbench /predbench/* /scratch 2>&1; df -a 2>&1",
    "cd /; pred --version 2>&1; cd /scratch; pred nosuch 2>&1; pred-extract nosuch 2>&1; pred --version",
    f"cd /scratch; echo '{PANICS}' > bad.json; pred solve bad.json 2>&1; pred-extract bad.json --config 1 2>&1",
]
"""Every place a command can look for the host's layout: the processes' command lines,
environments, mounts, cgroups, memory maps, links, the files the harness installs (/etc, the tools),
the listings, and the messages of pred (a panic names the source file pred was built from) and
of the gateway's client."""


def harness_paths(record, sandbox: Sandbox, run_root: Path) -> dict[str, str]:
    """Every host path the harness uses for a session, by what it is."""
    return {
        "source": record.source_dir,
        "cargo home": str(Path(record.source_dir).parents[3]),  # <CARGO_HOME>/registry/src/<index>/<crate>
        "pred cache": str(Path(record.pred_path).parents[2]),  # <cache>/pred-<version>/bin/pred
        "pred cache, resolved": str(Path(record.pred_path).resolve().parents[2]),
        "extractor": str(Path(record.extractor_path).resolve().parents[1]),
        "run directory": str(run_root),
        "session state": str(sandbox.state_dir),
        "socket directory": str(sandbox.gateway.socket_dir),
        "checkout": str(REPO),
        "virtualenv": sys.prefix,
    }


class HostBoundSandbox(Sandbox):
    """The contrast: the library source and a socket directory bound straight from the host (the
    host's /tmp, where the gateway's socket used to be), as a session did before."""

    def options(self, status_fd: int | None = None) -> list[str]:
        args = super().options(status_fd)
        for inside, host_dir in ((SOURCE_DIR, str(self.source_dir)), (SOCKET_DIR, "/tmp")):
            at = next(i for i in range(len(args) - 2) if args[i] == "--ro-bind" and args[i + 2] == inside)
            args[at + 1] = host_dir
        return args


def test_no_host_path_anywhere_the_agent_can_look(record, tmp_path):
    """mountinfo names each bind mount's source by its path within its filesystem, so the source,
    the gateway's socket and the tools are bound from the session's own tmpfs, where those paths
    are neutral ones; nothing else the agent can read names a host path either."""
    sandbox = session_sandbox(record, tmp_path / "session")
    paths = harness_paths(record, sandbox, tmp_path)
    seen = "\n".join(sandbox.run(probe, timeout=60).output for probe in HOST_VIEW)
    assert " /src/problemreductions " in seen and " /predbench/gateway " in seen, seen  # the probes ran
    assert "unrecognized subcommand 'nosuch'" in seen, seen  # and pred answered through the gateway
    assert f"panicked at {SOURCE_DIR}/src/topology/graph.rs:" in seen, seen  # the file, as the agent sees it
    assert {what: path for what, path in paths.items() if path in seen} == {}, seen
    contrast = session_sandbox(record, tmp_path / "contrast", HostBoundSandbox).run(HOST_VIEW[1], timeout=60).output
    assert record.source_dir in contrast and " /tmp /predbench/gateway " in contrast, contrast
    panic = host(f"cd {tmp_path}; echo '{PANICS}' > bad.json; {record.pred_path} solve bad.json").stderr
    assert f"panicked at {record.source_dir}/src/topology/graph.rs:" in panic, panic  # pred, unrelayed
