"""Install the pinned pred and the extractor once per machine and write the environment record.

`make setup` runs this. The build is cached outside the checkout, keyed by version, so a
second setup (or CI in a fresh clone) takes seconds. The install goes to a temporary root
that is renamed into place, so an interrupted build never leaves a half-installed pred.
"""

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from filelock import FileLock

from pytest_predbench.verify import pin
from pytest_predbench.verify.environment import (
    PredEnvironmentError,
    build_record,
    load_record,
    sha256_file,
    write_record,
)


def install_pred(version: str = pin.PRED_VERSION) -> Path:
    binary = pin.pred_binary(version)
    if binary.is_file():
        return binary
    if not shutil.which("cargo"):
        raise PredEnvironmentError("cargo is not on PATH; install the Rust toolchain (rustup) first")
    staging = pin.cache_root() / f".pred-{version}.building-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    print(f"building {pin.PRED_CRATE} {version} (15-30 minutes on 2 cores; cached afterwards)...", flush=True)
    start = time.monotonic()
    cmd = ["cargo", "install", pin.PRED_CRATE, "--version", version, "--locked", "--root", str(staging)]
    result = subprocess.run(cmd)
    if result.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        raise PredEnvironmentError(f"`{' '.join(cmd)}` failed (exit {result.returncode}); see the output above")
    os.replace(staging, pin.install_root(version))
    print(f"built pred {version} in {time.monotonic() - start:.0f}s -> {binary}", flush=True)
    return binary


def install_extractor(version: str = pin.PRED_VERSION) -> Path:
    """pred-extract from extractor/, cached by version and source digest (a cold build: ~3 min)."""
    binary = pin.extractor_binary(version)
    if binary.is_file():
        return binary
    staging = pin.cache_root() / f".pred-extract-{version}.building-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    print(
        "building pred-extract (the extractor, on the pinned library; a few minutes, cached afterwards)...", flush=True
    )
    start = time.monotonic()
    cmd = ["cargo", "install", "--locked", "--path", str(pin.EXTRACTOR_CRATE), "--root", str(staging)]
    env = {**os.environ, "CARGO_TARGET_DIR": str(pin.cache_root() / "extractor-target")}
    result = subprocess.run(cmd, env=env)
    if result.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        raise PredEnvironmentError(f"`{' '.join(cmd)}` failed (exit {result.returncode}); see the output above")
    shutil.rmtree(pin.extractor_root(version), ignore_errors=True)
    os.replace(staging, pin.extractor_root(version))
    print(f"built pred-extract in {time.monotonic() - start:.0f}s -> {binary}", flush=True)
    return binary


def ensure_environment() -> Path:
    """Install pred if needed and (re)write the record when it is missing or stale."""
    pin.cache_root().mkdir(parents=True, exist_ok=True)
    with FileLock(str(pin.cache_root() / f"setup-{pin.PRED_VERSION}.lock")):
        binary = install_pred()
        extractor = install_extractor()
        path = pin.env_record_path()
        try:
            record = load_record(path)
            fresh = record.pred_path == str(binary) and record.pred_sha256 == sha256_file(binary)
            fresh = fresh and record.extractor_path == str(extractor)
            fresh = fresh and record.extractor_sha256 == sha256_file(extractor)
            fresh = fresh and Path(record.source_dir).is_dir()
        except Exception:
            fresh = False
        if not fresh:
            record = build_record(binary, extractor=extractor)
            write_record(record, path)
        print(f"pred {record.pred_version} at {record.pred_path} (sha256 {record.pred_sha256[:12]}…)")
        print(f"pred-extract at {record.extractor_path} (sha256 {record.extractor_sha256[:12]}…)")
        print(f"library source {record.source_dir} ({len(record.source_manifest)} files)")
        print(f"environment record {path}")
        return path


def main() -> int:
    try:
        ensure_environment()
    except (PredEnvironmentError, subprocess.CalledProcessError) as exc:
        print(f"setup failed: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
