"""Real run directories for the report and status tests: the benchmark itself, run in a
subprocess with the labelled FakeRunner (no model is called), certificates verified by the
real pred. Shared by tests/test_leaderboard.py, test_merge_gate.py, test_report_html.py and
test_status.py."""

import json
import subprocess
import sys
from pathlib import Path

from pytest_predbench.verify.certificate import Certificate
from tests.support.acceptance import REPO, Workspace, check, fake_args


def fake_run(
    run_dir: Path,
    *certificates: Path,
    models: str = "a/x,b/y",
    sessions: int = 2,
    budget: float = 0.2,
    extra: tuple[str, ...] = (),
) -> Path:
    """A finished fake-runner run in run_dir; every session submits `certificates`."""
    args = fake_args(run_dir, "--sessions", str(sessions), "--budget", str(budget), *extra, models=models.split(","))
    for certificate in certificates:
        args += ["--fake-certificate", str(certificate)]
    check(Workspace(run_dir.parent).pytest(*args), 0, 1)
    return run_dir


def predbench(command: str, *args: str) -> subprocess.CompletedProcess:
    """`predbench report|status ...` as a user runs it (the standalone entry point)."""
    return subprocess.run(
        [sys.executable, "-m", "pytest_predbench.cli", command, *args],
        cwd=REPO,
        env=Workspace.environment(),
        capture_output=True,
        text=True,
        timeout=600,
    )


def report(*args: str) -> subprocess.CompletedProcess:
    return predbench("report", *args)


def status(*args: str) -> subprocess.CompletedProcess:
    return predbench("status", *args)


CALIBRATION = REPO / "fixtures" / "calibration" / "0.5.0"


def calibration_certificate(name: str) -> Certificate:
    """A calibration case's certificate (the file itself, or its "certificate" when it is wrapped)."""
    raw = json.loads((CALIBRATION / name).read_text())
    return Certificate.model_validate(raw.get("certificate", raw))


def genuine_certificate() -> Certificate:
    """The known real bug of pred 0.5.0: MinimumVertexCover(One) on one edge -> EnsembleComputation,
    brute force extracts the cover [1,1] while [1,0] is optimal."""
    return calibration_certificate("genuine_mvc_to_ensemble_suboptimal.json")


def bogus_certificate() -> Certificate:
    """The genuine case with a 'better' solution [0,0] that covers nothing: a false alarm."""
    return calibration_certificate("better_solution_invalid.json")


def write_certificate(path: Path, certificate: Certificate) -> Path:
    path.write_text(certificate.file_text())
    return path


def item_file(run_dir: Path, item: str) -> Path:
    return run_dir / "items" / (item.replace("/", "__") + ".json")


def edit_json(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=2))
