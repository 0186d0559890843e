"""Calibration: certificates whose verdict is known, run against the real pred.

Each supported version has its own set, as their rules differ: fixtures/calibration/<V>/NAME.json
is a certificate exactly as a model would submit it (some are malformed on purpose, down to not
being JSON), so `predbench verify` reads it as it is; fixtures/calibration/<V>/expected/NAME.json
says which verdict it must get on pred V and why. A verifier
that accepts a false claim, or stops confirming a real bug, fails here first. `pytest fixtures`
runs each certificate as a test item on its version (collected by the plugin); `predbench
calibrate [--pred-version V]` runs one version's set.

On a minted bug pool (`predbench calibrate --bug-pool POOL`) the verifier stands on the pool's
minted build: every minted bug's validating certificate must be accepted there, and the version's
set is judged as usual except the cases on a rule the pool mutated, whose expected verdict is a
fact of the pristine build only (they are skipped, and said so). `pytest fixtures`, CI's job,
always runs on the version's own build.
"""

from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict, Field, model_validator

from pytest_predbench.files import CorruptStateError, read_model
from pytest_predbench.verify import pin
from pytest_predbench.verify.certificate import SCHEMA_PATH, CertificateError, Violation, load_certificate
from pytest_predbench.verify.environment import EnvRecord, PredEnvironmentError, checked_record
from pytest_predbench.verify.pool import MintedBug, Pool, PoolManifest
from pytest_predbench.verify.verdict import Outcome, Verdict
from pytest_predbench.verify.verifier import verify_file

CALIBRATION_ROOT = SCHEMA_PATH.parent / "calibration"
EXPECTED_DIR_NAME = "expected"


class Expected(BaseModel):
    """The sidecar of one calibration certificate: the verdict it must get."""

    model_config = ConfigDict(extra="forbid")

    description: str = Field(min_length=1)
    """What the certificate is and why it gets this verdict (how to reproduce a real bug)."""
    accepted: bool
    violation: Violation | None = None
    """For an accepted case: the violation the verdict must confirm."""
    failed_check: str | None = None
    """For a rejected case: the check that must reject it (verifier.CERTIFICATE, REDERIVE, ...)."""
    reason_contains: list[str] = []
    """Fragments the verdict's reason must contain, so a rejection for the wrong cause fails."""
    undecided: bool = False
    """For a case not accepted: the claim cannot be decided by proof (a near-tie of inexact floats), so
    the verdict must be inconclusive at failed_check, never accepted nor rejected."""

    @model_validator(mode="after")
    def _consistent(self) -> "Expected":
        if self.accepted and (self.failed_check or self.violation is None):
            raise ValueError("an accepted case names its violation and no failed_check")
        if not self.accepted and (self.violation or not self.failed_check):
            raise ValueError("a rejected case names its failed_check and no violation")
        if self.accepted and self.undecided:
            raise ValueError("an undecided case is not accepted")
        return self


def calibration_dir(version: str) -> Path:
    """The calibration set of a version."""
    return CALIBRATION_ROOT / pin.check_version(version)


def expected_path(certificate: Path) -> Path:
    certificate = Path(certificate)
    return certificate.parent / EXPECTED_DIR_NAME / certificate.name


def load_expected(certificate: Path) -> Expected:
    path = expected_path(certificate)
    try:
        return read_model(path, Expected)
    except FileNotFoundError:
        raise CorruptStateError(f"{certificate}: no expected verdict at {path}") from None


class CaseOutcome(BaseModel):
    name: str
    path: str
    verdict: Verdict
    mismatches: list[str]

    @property
    def ok(self) -> bool:
        return not self.mismatches

    def line(self) -> str:
        got = self.verdict.outcome.value
        if not self.verdict.accepted:
            got += f" at {failing_check(self.verdict)}"
        head = f"{'ok  ' if self.ok else 'FAIL'} {self.name}: {got}"
        return head if self.ok else f"{head} ({'; '.join(self.mismatches)})"


def failing_check(verdict: Verdict) -> str | None:
    return next((c.name for c in verdict.checks if not c.passed), None)


def discover(directory: Path) -> list[Path]:
    """Sorted, so every xdist worker collects the same items in the same order."""
    return sorted(Path(directory).glob("*.json"))


def orphans(directory: Path) -> list[Path]:
    """Expected verdicts whose certificate is gone: a calibration case silently dropped."""
    directory = Path(directory)
    return sorted(p for p in (directory / EXPECTED_DIR_NAME).glob("*.json") if not (directory / p.name).exists())


def mismatches(expect: Expected, verdict: Verdict) -> list[str]:
    """How the verdict differs from the expectation; empty when it matches."""
    found = []
    want = Outcome.ACCEPTED if expect.accepted else Outcome.INCONCLUSIVE if expect.undecided else Outcome.REJECTED
    if verdict.outcome is not want:  # an inconclusive or failed verification is no rejection
        found.append(f"expected {want.value}, got {verdict.outcome.value}: {verdict.reason}")
        return found
    if expect.violation and verdict.violation != expect.violation:
        found.append(f"expected violation {expect.violation.value}, got {verdict.violation}")
    failed = failing_check(verdict)
    if expect.failed_check and failed != expect.failed_check:
        found.append(f"expected rejection at {expect.failed_check}, got {failed}: {verdict.reason}")
    for fragment in expect.reason_contains:
        if fragment not in verdict.reason:
            found.append(f"reason lacks {fragment!r}: {verdict.reason}")
    return found


def run_case(path: Path, record: EnvRecord) -> CaseOutcome:
    """Verify one calibration certificate; raises CorruptStateError when its sidecar is missing or bad."""
    expect = load_expected(path)
    verdict = verify_file(Path(path), record)
    return CaseOutcome(name=Path(path).stem, path=str(path), verdict=verdict, mismatches=mismatches(expect, verdict))


def minted_bugs_of(path: Path, manifest: PoolManifest) -> list[str]:
    """The pool's minted bugs on the rule of this case's certificate (by its source and target):
    on a minted build its expected verdict may not hold. None ([]) for a case that is no certificate
    (a malformed one is judged as usual)."""
    try:
        cert = load_certificate(Path(path))
    except CertificateError:
        return []
    return manifest.find(cert.source.type, cert.source.variant, cert.target.type, cert.target.variant)


def run_pool_certificate(minted: Pool, bug: MintedBug, record: EnvRecord) -> CaseOutcome:
    """A minted bug's validating certificate, which must be accepted on the pool's minted build (with
    the violation it claims); raises CorruptStateError when it is no certificate."""
    path = minted.certificate_path(bug)
    try:
        claimed = load_certificate(path).violation
    except CertificateError as exc:
        raise CorruptStateError(f"{bug.id}: its validating certificate {path} is not one: {exc}") from None
    rules = ", ".join(rule.label for rule in bug.rules)
    expect = Expected(description=f"{bug.id} ({rules}): {bug.mutation}", accepted=True, violation=claimed)
    verdict = verify_file(path, record)
    found = mismatches(expect, verdict)
    return CaseOutcome(name=f"{bug.id} ({rules})", path=str(path), verdict=verdict, mismatches=found)


# -- pytest collection (the plugin's pytest_collect_file hands the files over) ----------------


class CalibrationMismatch(Exception):
    """The verdict is not the expected one, or the case cannot run; the message says which."""


class CalibrationItem(pytest.Item):
    def runtest(self) -> None:
        version = self.path.parent.name  # fixtures/calibration/<version>/NAME.json
        try:
            record = checked_record(version)  # the version's own build: calibration never stands on a pool
        except (PredEnvironmentError, CorruptStateError) as exc:
            raise CalibrationMismatch(f"calibration needs the real pred {version}: {exc}") from None
        try:
            outcome = run_case(self.path, record)
        except CorruptStateError as exc:
            raise CalibrationMismatch(str(exc)) from None
        if not outcome.ok:
            raise CalibrationMismatch("\n".join(outcome.mismatches))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style=None) -> str:
        if isinstance(excinfo.value, CalibrationMismatch):
            return f"{self.path.name}: {excinfo.value}"
        return super().repr_failure(excinfo, style)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"calibration case {self.path.parent.name}/{self.name}"


class CalibrationFile(pytest.File):
    def collect(self):
        yield CalibrationItem.from_parent(self, name=self.path.stem)
