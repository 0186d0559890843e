"""A command checks its own input before it sets anything up (issue 32): pred is "missing" here
(PREDBENCH_CACHE names an empty directory, cargo is off PATH), so any setup would show as a
`[setup]` line and files in the cache; bad input must come back in one line with neither."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import GENUINE

REPO = Path(__file__).resolve().parent.parent


def predbench(cache: Path, *args: str) -> subprocess.CompletedProcess:
    env = {"PREDBENCH_CACHE": str(cache), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-m", "pytest_predbench.cli", *args], capture_output=True, text=True, cwd=REPO, env=env
    )


@pytest.fixture
def cache(tmp_path) -> Path:
    root = tmp_path / "empty-cache"
    root.mkdir()
    return root


def bad_types(tmp_path: Path) -> Path:
    data = json.loads(GENUINE.read_text())
    data["source_solution"] = "not a list"
    path = tmp_path / "bad-types.json"
    path.write_text(json.dumps(data))
    return path


def not_json(tmp_path: Path) -> Path:
    path = tmp_path / "not-json"
    path.write_text("this is not JSON {")
    return path


@pytest.mark.parametrize(("make", "named"), [(not_json, "not JSON"), (bad_types, "source_solution")])
def test_a_malformed_certificate_is_rejected_before_any_setup(cache, tmp_path, make, named):
    path = make(tmp_path)
    result = predbench(cache, "verify", str(path))
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"REJECTED {path}: malformed certificate") and named in lines[0], lines
    assert "[setup]" not in result.stdout + result.stderr and result.stderr == ""
    assert list(cache.iterdir()) == []  # no lock, no log, no build began


def test_a_missing_file_is_one_line_before_any_setup(cache, tmp_path):
    result = predbench(cache, "verify", str(tmp_path / "nowhere.json"))
    assert (
        result.returncode == 2
        and result.stderr.strip() == f"predbench: error: no such file: {tmp_path / 'nowhere.json'}"
    )
    assert "[setup]" not in result.stdout and list(cache.iterdir()) == []


def test_a_readable_certificate_sets_up_first_saying_what_and_how_long_it_took_last_time(cache, tmp_path):
    """The contrast: a certificate pred must run on starts the setup, whose notices say what is built
    and its time on record (here cargo is missing, so nothing is built)."""
    (cache / "build-times.json").write_text(json.dumps({"pred-0.6.0": 725.0}))
    result = predbench(cache, "verify", str(not_json(tmp_path)), str(GENUINE))
    assert "pred 0.6.0 is not set up on this machine yet: setting it up now" in result.stdout
    assert "[setup] building pred-0.6.0 (last time 12.1 min; log " in result.stdout
    assert "[setup] building pred-extract-0.6.0 (15-40 min on 2 cores; log " in result.stdout  # none on record
    # the malformed one was told before the setup began, in one line
    assert result.stderr.splitlines()[0].startswith("1 of 2 malformed, rejected without pred (first: ")
    assert result.returncode == 2 and result.stderr.strip().endswith(
        "cargo is not on PATH; install the Rust toolchain (rustup) first"
    )
