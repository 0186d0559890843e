"""Batch verification: `predbench verify` over files, directories, item records and run directories,
identical certificates verified once, the rest in parallel, one line each and a summary."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_predbench.report.certificates import find_certificates
from pytest_predbench.verify.batch import Found, verify_found
from pytest_predbench.verify.certificate import parse_certificate
from tests.support.report_runs import CALIBRATION, fake_run

REPO = Path(__file__).resolve().parent.parent
GENUINE = CALIBRATION / "genuine_mvc_to_ensemble_suboptimal.json"
BOGUS = CALIBRATION / "better_solution_invalid.json"


def predbench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest_predbench.cli", *args], capture_output=True, text=True, cwd=REPO, timeout=600
    )


def test_identical_certificates_are_verified_once_and_each_gets_its_verdict(env_record):
    genuine = parse_certificate(GENUINE.read_bytes())
    found = [
        Found("a.json", genuine),
        Found("b.json", parse_certificate(BOGUS.read_bytes())),
        Found("c.json", genuine.model_copy(deep=True)),
        Found("d.json", None, "not JSON"),
    ]
    verdicts = verify_found(found, env_record, jobs=2)
    assert [v.accepted for v in verdicts] == [True, False, True, False]
    assert [v.certificate for v in verdicts] == ["a.json", "b.json", "c.json", "d.json"]
    assert verdicts[2].same_as == "a.json" and verdicts[0].same_as is None
    # verified once: the copy carries the original's measurements, not a second run's
    assert (verdicts[2].seconds, verdicts[2].pred_calls) == (verdicts[0].seconds, verdicts[0].pred_calls)
    assert verdicts[3].reason == "malformed certificate: not JSON" and verdicts[3].pred_calls == 0


def test_one_or_two_at_a_time_gives_the_same_verdicts(env_record):
    found = find_certificates([CALIBRATION])
    one = verify_found(found, env_record, jobs=1)
    two = verify_found(found, env_record, jobs=2)
    assert [(v.accepted, v.reason) for v in one] == [(v.accepted, v.reason) for v in two]


def test_a_directory_of_certificates(env_record, tmp_path):
    shutil.copy(GENUINE, tmp_path / "1.json")
    shutil.copy(GENUINE, tmp_path / "2.json")
    shutil.copy(BOGUS, tmp_path / "3.json")
    (tmp_path / "notes.txt").write_text("not a certificate, and not a .json file")
    result = predbench("verify", str(tmp_path))
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    assert [line.split()[0] for line in lines[:3]] == ["ACCEPTED", "ACCEPTED", "REJECTED"]
    assert f"(the same certificate as {tmp_path / '1.json'})" in lines[1]
    summary = "3 certificate(s) (0 malformed, 2 distinct verified): 2 accepted, 1 rejected, 0 inconclusive, 0 error"
    assert lines[3] == summary


def test_nothing_to_verify_is_a_usage_error(tmp_path):
    result = predbench("verify", str(tmp_path))
    assert result.returncode == 2 and "no certificate in" in result.stderr and not result.stdout


@pytest.mark.slow
def test_a_whole_run_and_one_of_its_item_records(env_record, tmp_path):
    genuine = tmp_path / "genuine.json"
    shutil.copy(GENUINE, genuine)
    run = fake_run(tmp_path / "run", genuine, models="a/x", sessions=2, budget=0.1)
    result = predbench("verify", "--json", str(run))
    assert result.returncode == 0, result.stderr
    verdicts = json.loads(result.stdout)
    assert [Path(v["certificate"]).name for v in verdicts] == ["a__x-s01.json#1", "a__x-s02.json#1"]
    assert verdicts[1]["same_as"] == verdicts[0]["certificate"] and all(v["accepted"] for v in verdicts)
    one = predbench("verify", str(run / "items" / "a__x-s02.json"))
    assert one.returncode == 0 and one.stdout.startswith(f"ACCEPTED {run / 'items' / 'a__x-s02.json'}#1: ")
