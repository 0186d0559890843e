"""The extractor's per-version data: pred's own lock and the extractor's lock derived from it."""

import importlib.util
import shutil
from pathlib import Path

import pytest

TEMPLATE = Path(__file__).resolve().parent.parent / "pytest_predbench" / "verify" / "extractor"
VERSIONS = TEMPLATE.parent / "versions"
VERSION_DIRS = sorted(path for path in VERSIONS.iterdir() if (path / "pred.Cargo.lock").is_file())


def script(name: str):
    """A stdlib script of the extractor's directory, imported (its main() does not run)."""
    spec = importlib.util.spec_from_file_location(name, TEMPLATE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


derive_lock = script("derive_lock")


def test_both_library_versions_have_extractor_data():
    assert [path.name for path in VERSION_DIRS] == ["0.5.0", "0.6.0"]


@pytest.mark.parametrize("data", VERSION_DIRS, ids=lambda path: path.name)
def test_every_package_of_the_extractor_lock_is_locked_as_pred_locks_it(data):
    extractor_lock = (data / "extractor.Cargo.lock").read_text()
    pred_lock = (data / "pred.Cargo.lock").read_text()
    assert derive_lock.mismatches(extractor_lock, pred_lock) == []
    names = derive_lock.packages(extractor_lock)
    assert "pred-extract" in names and names["problemreductions"][0]["version"] == data.name


def test_a_package_locked_otherwise_than_in_preds_lock_is_named():
    """Contrast: a version or checksum of its own (or an unknown package) is reported."""
    pred_lock = (VERSIONS / "0.6.0" / "pred.Cargo.lock").read_text()
    own = (VERSIONS / "0.6.0" / "extractor.Cargo.lock").read_text()
    other_version = own.replace('name = "serde_json"\nversion = "', 'name = "serde_json"\nversion = "9', 1)
    assert any(m.startswith("serde_json 9") for m in derive_lock.mismatches(other_version, pred_lock))
    checksum = derive_lock.packages(own)["libc"][0]["checksum"]
    assert derive_lock.mismatches(own.replace(checksum, "0" * 64), pred_lock) == [
        f"libc {derive_lock.packages(own)['libc'][0]['version']} has checksum {'0' * 64}, pred's lock {checksum}"
    ]
    # 0.5.0's lock against 0.6.0's pred: the library itself and the dependencies that moved on.
    old = (VERSIONS / "0.5.0" / "extractor.Cargo.lock").read_text()
    assert "problemreductions 0.5.0 is not in pred's lock" in derive_lock.mismatches(old, pred_lock)


@pytest.mark.parametrize("data", VERSION_DIRS, ids=lambda path: path.name)
def test_the_committed_extractor_lock_is_the_one_derived_from_preds(data):
    if not shutil.which("cargo"):
        pytest.skip("cargo is not on PATH")
    assert derive_lock.derive(data.name) == (data / "extractor.Cargo.lock").read_text()
