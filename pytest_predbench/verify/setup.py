"""Build a pinned version's pred and extractor once per machine and write its environment record.

`make setup` runs this for the default version; any other is built the first time it is asked
for. The builds are cached outside the checkout, keyed by version (verify/pin.py), so a second
setup (or CI in a fresh clone) takes seconds.

pred is exactly what `cargo install problemreductions-cli --version V --locked` gives. The
extractor cannot share its compilation of the library: it compiles the library with overflow
checks and line tables (extractor/README.md), which pred's release build does not have, so one
build could only share it by changing pred's bytes or by losing the extractor's overflow
detection. The two builds run side by side instead: most of a release build of the library is
single-threaded (type checking, borrow checking, the LTO link), and the other build fills the
idle core. Each writes its output to a log; setup prints a heartbeat line at least every 30 s,
and the notice before a build says how long the last one took on this machine.

An install goes to a temporary root that is renamed into place, so an interrupted build never
leaves a half-installed binary.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from filelock import FileLock, Timeout

from pytest_predbench.verify import pin
from pytest_predbench.verify.environment import (
    EnvRecord,
    PredEnvironmentError,
    build_record,
    checked_record,
    load_record,
    sha256_file,
    write_record,
)
from pytest_predbench.verify.extractor_stage import stage

HEARTBEAT_S = 30.0
EXTRACTOR_NICENESS = 10
"""pred's build is the longer one (it builds HiGHS and links with LTO): the extractor's runs at a lower
priority, on the core pred's single-threaded phases leave idle, so it delays pred's as little as it can."""


def say(line: str) -> None:
    print(f"[setup] {line}", flush=True)


def minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"


def _times_path() -> Path:
    return pin.cache_root() / "build-times.json"


def last_times() -> dict[str, float]:
    """How long each build took last time on this machine (`pred-0.6.0`: seconds)."""
    try:
        return {str(k): float(v) for k, v in json.loads(_times_path().read_text()).items()}
    except (OSError, ValueError, AttributeError):
        return {}


def _remember(name: str, seconds: float) -> None:
    times = last_times() | {name: round(seconds, 1)}
    path = _times_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp-{os.getpid()}")
    tmp.write_text(json.dumps(times, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


@dataclass
class Build:
    """One cargo install into a staging root that becomes `final` when it succeeds."""

    name: str
    """`pred-0.6.0`, `pred-extract-0.6.0`: what the notices and build-times.json call it."""
    argv: list[str]
    final: Path
    env: dict[str, str] = field(default_factory=dict)
    niceness: int = 0
    """Added to the build's nice value: the longer build keeps its priority, the other fills idle cores."""
    staging: Path = field(init=False)
    log: Path = field(init=False)
    process: subprocess.Popen | None = None
    started: float = 0.0
    seconds: float | None = None

    def __post_init__(self) -> None:
        self.staging = pin.cache_root() / f".{self.name}.building-{os.getpid()}"
        self.log = pin.cache_root() / "logs" / f"{self.name}.log"

    def start(self) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(
                [*self.argv, "--root", str(self.staging)], stdout=log, stderr=subprocess.STDOUT,
                env={**os.environ, **self.env}, preexec_fn=(lambda: os.nice(self.niceness)) if self.niceness else None,
            )  # fmt: skip
        self.started = time.monotonic()

    def poll(self) -> bool:
        """Whether it has ended (installed, or raised with the log's last lines)."""
        assert self.process is not None
        code = self.process.poll()
        if code is None:
            return False
        if self.seconds is None:
            self.seconds = time.monotonic() - self.started
            if code != 0:
                shutil.rmtree(self.staging, ignore_errors=True)
                for line in self.log.read_text(errors="replace").splitlines()[-15:]:
                    say(f"{self.name}: {line}")
                raise PredEnvironmentError(f"building {self.name} failed (exit {code}); its log: {self.log}")
            shutil.rmtree(self.final, ignore_errors=True)
            os.replace(self.staging, self.final)
            _remember(self.name, self.seconds)
            say(f"built {self.name} in {minutes(self.seconds)} -> {self.final}")
        return True

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            self.process.wait()
        shutil.rmtree(self.staging, ignore_errors=True)

    def status(self) -> str:
        if self.seconds is not None:
            return f"{self.name} done in {minutes(self.seconds)}"
        pid = self.process.pid if self.process else "-"
        return f"{self.name} building (pid {pid}, {minutes(time.monotonic() - self.started)} elapsed)"


def pred_build(version: str) -> Build:
    """Exactly the documented install, so pred is byte for byte what anyone else gets."""
    argv = ["cargo", "install", pin.PRED_CRATE, "--version", version, "--locked"]
    return Build(f"pred-{version}", argv, pin.install_root(version))


def extractor_build(version: str, crate: Path) -> Build:
    argv = ["cargo", "install", "--locked", "--path", str(crate)]
    target = {"CARGO_TARGET_DIR": str(pin.cache_root() / f"extractor-target-{version}")}
    return Build(f"pred-extract-{version}", argv, pin.extractor_root(version), target, niceness=EXTRACTOR_NICENESS)


def stage_extractor(version: str, dest: Path) -> Path:
    """The extractor's crate as cargo builds it for one version (verify/extractor_stage.py)."""
    stage(version, dest)
    return dest


def run_builds(builds: list[Build]) -> None:
    """Run the builds side by side with a heartbeat; stop them all if one fails or on Ctrl-C."""
    if not builds:
        return
    times = last_times()
    for build in builds:  # what is built and for how long comes first, even when cargo is missing
        last = f"last time {minutes(times[build.name])}" if build.name in times else "15-40 min on 2 cores"
        say(f"building {build.name} ({last}; log {build.log})")
    if not shutil.which("cargo"):
        raise PredEnvironmentError("cargo is not on PATH; install the Rust toolchain (rustup) first")
    try:
        for build in builds:
            build.start()
        pending = list(builds)
        beat = time.monotonic()
        while pending:
            pending = [build for build in pending if not build.poll()]
            if pending and time.monotonic() - beat >= HEARTBEAT_S:
                say("; ".join(build.status() for build in builds))
                beat = time.monotonic()
            time.sleep(0.5)
    finally:
        for build in builds:
            build.stop()


def _locked(version: str) -> FileLock:
    """The version's setup lock, waited for with a heartbeat naming who holds it."""
    lock = FileLock(str(pin.cache_root() / f"setup-{version}.lock"))
    owner = pin.cache_root() / f"setup-{version}.owner"
    start = time.monotonic()
    while True:
        try:
            lock.acquire(timeout=HEARTBEAT_S)
            break
        except Timeout:
            holder = owner.read_text().strip() if owner.is_file() else "another setup"
            say(f"waiting for {holder} to finish setting up pred {version} ({minutes(time.monotonic() - start)})")
    owner.write_text(f"pid {os.getpid()}")
    return lock


def ensure_environment(version: str) -> Path:
    """Build what is missing of a version and (re)write its record when missing or stale."""
    version = pin.check_version(version)
    pin.cache_root().mkdir(parents=True, exist_ok=True)
    lock = _locked(version)
    try:
        with tempfile.TemporaryDirectory(prefix="predbench-extractor-") as tmp:
            binary, extractor = pin.pred_binary(version), pin.extractor_binary(version)
            builds = [] if binary.is_file() else [pred_build(version)]
            if not extractor.is_file():
                builds.append(extractor_build(version, stage_extractor(version, Path(tmp) / "crate")))
            run_builds(builds)
        path = pin.env_record_path(version)
        if not _fresh(version, path, binary, extractor):
            write_record(build_record(version, binary, extractor=extractor), path)
        record = load_record(version, path)
        say(f"pred {record.pred_version} at {record.pred_path} (sha256 {record.pred_sha256[:12]}…)")
        say(f"pred-extract at {record.extractor_path} (sha256 {record.extractor_sha256[:12]}…)")
        say(f"library source {record.source_dir} ({len(record.source_manifest)} files); record {path}")
        return path
    finally:
        lock.release()


def ensured_record(version: str) -> EnvRecord:
    """The checked record of a version, set up first when this machine has never built it (a
    notice says what is built and how long it took last time; a broken record is an error)."""
    if not pin.env_record_path(version).is_file():
        say(f"pred {version} is not set up on this machine yet: setting it up now")
        try:
            ensure_environment(version)
        except PredEnvironmentError as exc:
            raise PredEnvironmentError(
                f"pred {version} is not set up on this machine, and setting it up failed: {exc}"
            ) from None
    return checked_record(version)


def _fresh(version: str, path: Path, binary: Path, extractor: Path) -> bool:
    try:
        record = load_record(version, path)
    except Exception:
        return False
    return (
        record.pred_path == str(binary)
        and record.pred_sha256 == sha256_file(binary)
        and record.extractor_path == str(extractor)
        and record.extractor_sha256 == sha256_file(extractor)
        and Path(record.source_dir).is_dir()
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_predbench.verify.setup", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--pred-version", default=pin.default_choice(), help=f"the version to set up (default {pin.DEFAULT_VERSION})"
    )
    parser.add_argument("--all", action="store_true", help="set up every supported version")
    args = parser.parse_args(argv)
    try:
        versions = pin.supported() if args.all else [pin.check_version(args.pred_version)]
        for version in versions:
            ensure_environment(version)
    except (PredEnvironmentError, pin.UnsupportedVersion, subprocess.CalledProcessError) as exc:
        print(f"setup failed: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("setup interrupted: nothing half-built was kept", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
