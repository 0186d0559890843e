"""An installed predbench works outside a checkout: a wheel built from this checkout, installed into
a fresh virtualenv, calibrates and verifies from an unrelated directory with the same verdicts.

The fresh virtualenv gets the wheel alone (--no-deps); its dependencies come from the project's
.venv through a plain path line in a .pth file, which adds that directory to sys.path without
running the .pth files inside it — so the editable install of the checkout never loads, and the
test checks that the package really comes from the wheel.
"""

import json
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from pytest_predbench.verify import extractor_stage
from pytest_predbench.verify.calibration import discover
from tests.support.report_runs import fake_run
from tests.support.versions import CALIBRATION_DIR

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow  # builds a wheel and a virtualenv


def run(*args: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=600)
    if check and proc.returncode not in (0, 1):
        raise AssertionError(f"{' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture(scope="module")
def installed(tmp_path_factory, env_record) -> Path:
    """The bin/ of a fresh virtualenv holding the wheel built from this checkout."""
    root = tmp_path_factory.mktemp("wheel")
    source = root / "source"  # what the wheel is built from, copied: a build leaves build/ behind
    for name in ("pytest_predbench", "fixtures"):
        shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    build = run(
        sys.executable, "-m", "pip", "wheel", "--no-deps", "-v", "-w", str(root / "dist"), str(source), cwd=root
    )
    assert "Warning" not in build.stdout + build.stderr, "setuptools builds the wheel without a warning"
    [wheel] = (root / "dist").glob("predbench-*.whl")
    names = subprocess.run([sys.executable, "-m", "zipfile", "-l", str(wheel)], capture_output=True, text=True)
    for version in ("0.5.0", "0.6.0"):
        assert f"pytest_predbench/fixtures/calibration/{version}/expected/" in names.stdout, "each calibration set"
        assert f"pytest_predbench/verify/versions/{version}/known_bugs.json" in names.stdout, "each registry"
    assert "pytest_predbench/verify/extractor/src/main.rs" in names.stdout, "so is the extractor's source"
    assert "pytest_predbench/report/templates/leaderboard.html.j2" in names.stdout, "so are the report's templates"
    assert "pytest_predbench/session/probe/predbench_probe.py" in names.stdout, "and the baseline's probe"
    assert "pytest_predbench/session/client/predbench_gateway_client.c" in names.stdout, "and the gateway's client"
    assert "pytest_predbench/session/client/predbench_pred_runner.py" in names.stdout, "and its pred runner"
    assert "tests/" not in names.stdout, "the test harness is not"
    venv = root / "venv"
    run(sys.executable, "-m", "venv", str(venv), cwd=root)
    run(str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", str(wheel), cwd=root)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "project-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv / "bin"


def test_the_package_comes_from_the_wheel(installed, tmp_path):
    code = (
        "import pytest_predbench.verify.certificate as c, pytest_predbench.session.baseline as b; "
        "print(c.__file__); print(c.SCHEMA_PATH); print(b.PROBE_SCRIPT)"
    )
    out = run(str(installed / "python"), "-c", code, cwd=tmp_path).stdout.split()
    assert all(Path(line).is_relative_to(installed.parent) for line in out), out
    assert Path(out[1]).is_file() and Path(out[2]).is_file()


def test_the_wheel_stages_each_extractor_crate_as_the_checkout_does(installed, tmp_path):
    """Every per-version file of the extractor (lock, constructor table, compat) is in the wheel."""
    versions = [path.name for path in sorted(extractor_stage.VERSIONS.iterdir()) if path.is_dir()]
    code = "import sys; from pytest_predbench.verify.extractor_stage import source_digest as d; "
    code += "print(*map(d, sys.argv[1:]))"
    out = run(str(installed / "python"), "-c", code, *versions, cwd=tmp_path).stdout.split()
    assert out == [extractor_stage.source_digest(version) for version in versions]


def test_calibrate_outside_the_checkout(installed, tmp_path):
    proc = run(str(installed / "predbench"), "calibrate", cwd=tmp_path)
    cases = len(discover(CALIBRATION_DIR))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{cases} of {cases} calibration cases as expected" in proc.stdout


def test_verify_json_outside_the_checkout_gives_the_checkouts_verdicts(installed, tmp_path):
    cases = [
        REPO / "fixtures" / "calibration" / "0.5.0" / name
        for name in ("genuine_mvc_to_ensemble_suboptimal.json", "altered_target.json")
    ]
    copies = []
    for case in cases:
        copies.append(tmp_path / case.name)
        copies[-1].write_bytes(case.read_bytes())
    names = [c.name for c in copies]
    outside = run(str(installed / "predbench"), "verify", "--json", *names, cwd=tmp_path)
    inside = run(sys.executable, "-m", "pytest_predbench.cli", "verify", "--json", *map(str, copies), cwd=REPO)
    assert outside.returncode == inside.returncode == 1  # one accepted, one rejected

    def verdicts(proc: subprocess.CompletedProcess) -> list[tuple]:
        return [(v["accepted"], v["violation"], v["reason"], v["rule"]) for v in json.loads(proc.stdout)]

    assert verdicts(outside) == verdicts(inside)
    assert [v[0] for v in verdicts(outside)] == [True, False]


def test_report_outside_the_checkout_renders_from_the_wheels_templates(installed, tmp_path):
    run_dir = fake_run(tmp_path / "run", models="a/x", sessions=2)
    proc = run(str(installed / "predbench"), "report", str(run_dir), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    page = (run_dir / "leaderboard.html").read_text()
    assert "<svg " in page and 'data-model="a/x"' in page and "FAKE runner" in page
    assert (run_dir / "results.csv").read_text().count("\n") == 3  # a header and two sessions
