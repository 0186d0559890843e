"""The calibration set: complete, consistent, and run both by pytest and by `predbench calibrate`."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_predbench.verify import verifier
from pytest_predbench.verify.calibration import (
    Expected,
    discover,
    expected_path,
    load_expected,
    mismatches,
    orphans,
    run_case,
)
from pytest_predbench.verify.certificate import Violation
from pytest_predbench.verify.verdict import Check, Verdict
from tests.support.versions import CALIBRATION_DIR

REPO = Path(__file__).resolve().parent.parent
CHECKS = [
    verifier.CERTIFICATE,
    verifier.INSTANCE,
    verifier.REDERIVE,
    verifier.SOLUTIONS,
    verifier.EXTRACTION,
    verifier.VIOLATION,
]


def test_every_certificate_has_its_expected_verdict_and_back():
    cases = discover(CALIBRATION_DIR)
    assert cases, "no calibration certificates"
    assert all(expected_path(case).is_file() for case in cases)
    assert orphans(CALIBRATION_DIR) == []


def test_the_set_covers_a_real_bug_of_every_violation_and_every_rejection_step():
    expected = [load_expected(case) for case in discover(CALIBRATION_DIR)]
    # no incomplete reduction of pred 0.5.0 is known (verify/known_bugs.json): that kind is shown rejected only
    known_kinds = set(Violation) - {Violation.INCOMPLETE_REDUCTION}
    assert {e.violation for e in expected if e.accepted} == known_kinds, "a real bug of each known kind, accepted"
    assert {e.failed_check for e in expected if not e.accepted} == set(CHECKS)
    assert all(e.reason_contains for e in expected if not e.accepted), "each rejection says why"


def test_expected_verdicts_name_real_checks():
    for case in discover(CALIBRATION_DIR):
        failed = load_expected(case).failed_check
        assert failed is None or failed in CHECKS, case.name


def _verdict(accepted: bool, failed: str | None = None, reason: str = "why") -> Verdict:
    checks = [Check(name=failed, passed=False, detail=reason)] if failed else []
    return Verdict(
        accepted=accepted,
        violation="suboptimal_extraction" if accepted else None,
        reason=reason,
        checks=checks,
    )


def test_mismatches_catch_each_kind_of_difference():
    rejected_at = Expected(description="d", accepted=False, failed_check="rederive", reason_contains=["budget"])
    assert mismatches(rejected_at, _verdict(False, "rederive", "target.data.budget differs")) == []
    assert "expected rejected" in mismatches(rejected_at, _verdict(True))[0]
    assert "expected rejection at rederive" in mismatches(rejected_at, _verdict(False, "solutions", "budget"))[0]
    assert "reason lacks 'budget'" in mismatches(rejected_at, _verdict(False, "rederive", "other"))[0]
    accepted = Expected(description="d", accepted=True, violation="unsound_extraction")
    assert "expected violation unsound_extraction" in mismatches(accepted, _verdict(True))[0]


@pytest.mark.parametrize(
    "fields",
    [
        {"accepted": True},
        {"accepted": False},
        {"accepted": True, "violation": "unsound_extraction", "failed_check": "x"},
    ],
)
def test_inconsistent_expectations_are_refused(fields):
    with pytest.raises(ValueError):
        Expected(description="d", **fields)


def test_run_case_matches_the_genuine_fixture(env_record):
    outcome = run_case(CALIBRATION_DIR / "genuine_mvc_to_ensemble_suboptimal.json", env_record)
    assert outcome.ok and outcome.verdict.accepted and outcome.line().startswith("ok")


def _case(tmp_path: Path, name: str, expected: dict) -> Path:
    """A copy of a calibration certificate with its own expected verdict."""
    (tmp_path / "fixtures" / "calibration" / "0.5.0" / "expected").mkdir(parents=True, exist_ok=True)
    path = tmp_path / "fixtures" / "calibration" / "0.5.0" / f"{name}.json"
    shutil.copy(CALIBRATION_DIR / "genuine_mvc_to_ensemble_suboptimal.json", path)
    expected_path(path).write_text(json.dumps({"description": "test copy", **expected}))
    return path


def _predbench(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    code = "import sys; from pytest_predbench.cli import main; sys.exit(main())"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=REPO, env=env)


def test_predbench_calibrate_passes_on_the_checked_in_set(env_record):
    result = _predbench("calibrate")
    assert result.returncode == 0, result.stdout + result.stderr
    assert (
        f"{len(discover(CALIBRATION_DIR))} of {len(discover(CALIBRATION_DIR))} calibration cases as expected"
        in result.stdout
    )


def test_predbench_calibrate_fails_when_a_verdict_differs(env_record, tmp_path):
    wrong = _case(
        tmp_path,
        "claims_rejection",
        {"accepted": False, "failed_check": "rederive", "reason_contains": ["x"]},
    )
    right = _case(tmp_path, "claims_acceptance", {"accepted": True, "violation": "suboptimal_extraction"})
    result = _predbench("calibrate", str(right), str(wrong))
    assert result.returncode == 1
    assert "ok   claims_acceptance: accepted" in result.stdout
    assert "FAIL claims_rejection: accepted (expected rejected" in result.stdout
    assert "1 of 2 calibration cases as expected" in result.stdout


def test_predbench_calibrate_fails_on_a_missing_expected_verdict(env_record, tmp_path):
    case = _case(tmp_path, "lonely", {"accepted": True, "violation": "suboptimal_extraction"})
    expected_path(case).unlink()
    result = _predbench("calibrate", str(case))
    assert result.returncode == 1 and "no expected verdict" in result.stdout


def _pytest_on(tmp_path: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    """`pytest fixtures` in a directory laid out like the checkout (the plugin collects the cases)."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(tmp_path),
            "-p",
            "no:cacheprovider",
            "-q",
            "--rootdir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
    )


def test_pytest_collects_each_certificate_as_an_item(env_record, tmp_path):
    _case(tmp_path, "claims_acceptance", {"accepted": True, "violation": "suboptimal_extraction"})
    _case(
        tmp_path,
        "claims_rejection",
        {"accepted": False, "failed_check": "rederive", "reason_contains": ["x"]},
    )
    result = _pytest_on(tmp_path)
    assert result.returncode == 1, result.stdout
    assert "1 failed, 1 passed" in result.stdout
    assert "claims_rejection.json: expected rejected" in result.stdout


def test_pytest_items_fail_not_skip_without_pred(tmp_path):
    _case(tmp_path, "needs_pred", {"accepted": True, "violation": "suboptimal_extraction"})
    env = {**os.environ, "PREDBENCH_CACHE": str(tmp_path / "empty-cache")}
    result = _pytest_on(tmp_path, env)
    assert result.returncode == 1 and "1 failed" in result.stdout
    assert "needs the real pred 0.5.0" in result.stdout and "verify.setup --pred-version 0.5.0" in result.stdout
