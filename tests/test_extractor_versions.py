"""The extractor's per-version data: one crate template, staged per library version.

Each versions/V/ holds pred's own lock and the extractor's lock derived from it, the constructor
table generated from that version's source, and the compat module; `extractor_stage` writes the
buildable crate for V and keys its build by a digest of exactly what it staged.
"""

import importlib.util
import shutil
from pathlib import Path

import pytest

from pytest_predbench.verify import extractor_stage
from pytest_predbench.verify.extractor_stage import PLACEHOLDER, StageError, source_digest, stage, staged_files

VERSIONS = extractor_stage.VERSIONS
TEMPLATE = extractor_stage.EXTRACTOR_TEMPLATE
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


@pytest.mark.parametrize("data", VERSION_DIRS, ids=lambda path: path.name)
def test_the_committed_constructor_table_is_generated_from_that_versions_source(data):
    gen_checks = script("gen_checks")
    if not list(Path.home().glob(f".cargo/registry/src/*/problemreductions-{data.name}/src/models")):
        pytest.skip(f"no problemreductions-{data.name} source in cargo's registry")
    text, _, _ = gen_checks.table(data.name)
    assert text == (data / "checks_table.rs").read_text()


def test_the_0_6_0_table_has_its_new_variants_and_0_5_0_does_not():
    new = ["MaximumCoKPlex<SimpleGraph, i32, KN>", "ClosestString", "    OptimalLinearArrangement<SimpleGraph>;"]
    for text in new:
        assert text in (VERSIONS / "0.6.0" / "checks_table.rs").read_text()
        assert text not in (VERSIONS / "0.5.0" / "checks_table.rs").read_text()


def test_the_template_names_no_version_and_keeps_the_profile():
    toml = (TEMPLATE / "Cargo.toml").read_text()
    assert f'version = "={PLACEHOLDER}"' in toml
    for setting in ('panic = "unwind"', "overflow-checks = true", 'debug = "line-tables-only"'):
        assert setting in toml, setting  # issue 20: overflow and panic attribution need them


@pytest.mark.parametrize("data", VERSION_DIRS, ids=lambda path: path.name)
def test_stage_writes_the_crate_of_that_version(data, tmp_path):
    stage(data.name, tmp_path)
    toml = (tmp_path / "Cargo.toml").read_text()
    assert f'problemreductions = {{ version = "={data.name}"' in toml and PLACEHOLDER not in toml
    assert (tmp_path / "Cargo.lock").read_bytes() == (data / "extractor.Cargo.lock").read_bytes()
    assert (tmp_path / "src" / "checks_table.rs").read_bytes() == (data / "checks_table.rs").read_bytes()
    assert (tmp_path / "src" / "compat.rs").read_bytes() == (data / "compat.rs").read_bytes()
    assert (tmp_path / "src" / "main.rs").read_bytes() == (TEMPLATE / "src" / "main.rs").read_bytes()
    written = sorted(str(path.relative_to(tmp_path)) for path in tmp_path.rglob("*") if path.is_file())
    assert written == list(staged_files(data.name))


@pytest.fixture
def copy(tmp_path, monkeypatch) -> Path:
    """A copy of the template and the versions, which the stager reads instead of the package's."""
    shutil.copytree(TEMPLATE, tmp_path / "extractor")
    shutil.copytree(VERSIONS, tmp_path / "versions")
    monkeypatch.setattr(extractor_stage, "EXTRACTOR_TEMPLATE", tmp_path / "extractor")
    monkeypatch.setattr(extractor_stage, "VERSIONS", tmp_path / "versions")
    return tmp_path


def test_the_digest_is_per_version_and_follows_every_staged_file(copy):
    digests = {version: source_digest(version) for version in ("0.5.0", "0.6.0")}
    assert digests["0.5.0"] != digests["0.6.0"]
    (copy / "versions" / "0.6.0" / "compat.rs").write_text("// changed\n")
    assert source_digest("0.6.0") != digests["0.6.0"] and source_digest("0.5.0") == digests["0.5.0"]
    (copy / "extractor" / "src" / "main.rs").write_text("fn main() {}\n")
    assert source_digest("0.5.0") != digests["0.5.0"]
    (copy / "versions" / "0.6.0" / "README").write_text("not staged\n")
    assert "README" not in " ".join(staged_files("0.6.0"))


def test_a_version_without_extractor_data_is_refused_in_one_line(copy, tmp_path):
    with pytest.raises(StageError, match=r"^no extractor data for library version '0\.4\.0': .* lacks "):
        stage("0.4.0", tmp_path / "out")
    (copy / "versions" / "0.6.0" / "checks_table.rs").unlink()
    with pytest.raises(StageError, match=r"0\.6\.0 lacks checks_table\.rs$"):
        source_digest("0.6.0")
    assert not (tmp_path / "out").exists()


def test_the_command_stages_and_prints_the_digest_or_one_line(tmp_path, capsys):
    assert extractor_stage.main(["0.6.0", str(tmp_path / "crate")]) == 0
    assert capsys.readouterr().out.strip() == source_digest("0.6.0")
    assert (tmp_path / "crate" / "src" / "compat.rs").is_file()
    assert extractor_stage.main(["0.4.0", str(tmp_path / "other")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("extractor_stage: no extractor data for library version '0.4.0'") and err.count("\n") == 1
