"""The environment record: verdicts only ever come from the pred (and source) it records."""

import shutil
from pathlib import Path

import pytest

from pytest_predbench.files import CorruptStateError
from pytest_predbench.verify import extractor_stage, pin
from pytest_predbench.verify.environment import (
    EnvRecord,
    PredEnvironmentError,
    check_pred,
    check_source,
    checked_record,
    load_record,
    locate_library_source,
    manifest_digest,
    sha256_file,
    source_manifest,
    write_record,
)
from pytest_predbench.verify.pred import Pred
from tests.support.versions import TEST_VERSION


def test_record_describes_the_pinned_pred(env_record, pred):
    assert env_record.pred_version == TEST_VERSION == pred.version()
    assert env_record.pred_sha256 == sha256_file(Path(env_record.pred_path))
    assert (Path(env_record.source_dir) / "src" / "rules").is_dir()
    assert env_record.source_sha256 == manifest_digest(env_record.source_manifest)


def test_the_extractor_is_built_from_this_checkouts_crate_and_cached_by_its_source(env_record):
    assert Path(env_record.extractor_path) == pin.extractor_binary(TEST_VERSION)
    assert env_record.extractor_sha256 == sha256_file(pin.extractor_binary(TEST_VERSION))
    assert extractor_stage.source_digest(env_record.pred_version)[:12] in str(pin.extractor_root(TEST_VERSION))
    names = list(extractor_stage.staged_files(env_record.pred_version))
    assert {"Cargo.toml", "Cargo.lock", "src/main.rs", "src/checks_table.rs", "src/compat.rs"} <= set(names)
    other = "0.6.0" if env_record.pred_version == "0.5.0" else "0.5.0"
    assert pin.extractor_root(other) != pin.extractor_root(TEST_VERSION)  # one build per version


def test_recorded_source_is_cargos_copy_of_the_same_version(env_record):
    assert locate_library_source(TEST_VERSION) == Path(env_record.source_dir)
    check_source(env_record)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"pred_sha256": "0" * 64}, "refusing to verify with a different binary"),
        ({"pred_version": "0.4.9"}, "for pred 0.4.9, which predbench does not support"),
        ({"pred_path": "/nonexistent/pred"}, "is gone; run `make setup`"),
        ({"extractor_sha256": "0" * 64}, "refusing to verify with a different extractor"),
        ({"extractor_path": "/nonexistent/pred-extract"}, "pred-extract recorded at /nonexistent/pred-extract is gone"),
    ],
    ids=["hash", "version", "missing", "extractor-hash", "extractor-missing"],
)
def test_check_pred_refuses_a_record_that_does_not_match(env_record, change, message):
    check_pred(env_record)  # contrast: the real record passes
    with pytest.raises(PredEnvironmentError, match=message):
        check_pred(env_record.model_copy(update=change))


def test_check_pred_refuses_a_changed_binary(env_record, tmp_path):
    changed = tmp_path / "pred"
    shutil.copy(env_record.pred_path, changed)
    record = env_record.model_copy(update={"pred_path": str(changed)})
    check_pred(record)
    with open(changed, "ab") as handle:
        handle.write(b"\0")
    with pytest.raises(PredEnvironmentError, match="has sha256"):
        check_pred(record)


def test_missing_record_says_how_to_set_its_version_up(tmp_path):
    with pytest.raises(PredEnvironmentError, match="run `make setup`"):
        load_record("0.6.0", tmp_path / "env.json")  # the default version
    with pytest.raises(
        PredEnvironmentError, match=r"run `python -m pytest_predbench.verify.setup --pred-version 0.5.0`"
    ):
        load_record("0.5.0", tmp_path / "env.json")


def test_corrupt_record_is_an_error_naming_the_file(tmp_path):
    path = tmp_path / "env.json"
    path.write_text('{"pred_path": 1}')
    with pytest.raises(CorruptStateError, match="env.json: not a valid EnvRecord"):
        load_record(TEST_VERSION, path)


def test_record_round_trips_and_checked_record_caches(env_record, tmp_path):
    path = write_record(env_record, tmp_path / "env.json")
    assert load_record(TEST_VERSION, path) == env_record
    assert checked_record(TEST_VERSION, str(path)) is checked_record(TEST_VERSION, str(path))


def _record_for(source: Path, env_record: EnvRecord) -> EnvRecord:
    manifest = source_manifest(source)
    return env_record.model_copy(
        update={
            "source_dir": str(source),
            "source_manifest": manifest,
            "source_sha256": manifest_digest(manifest),
        }
    )


def test_check_source_detects_an_edited_rule(env_record, tmp_path):
    rules = tmp_path / "src" / "rules"
    rules.mkdir(parents=True)
    (rules / "a.rs").write_text("fn reduce() {}\n")
    record = _record_for(tmp_path, env_record)
    check_source(record)
    (rules / "a.rs").write_text("fn reduce() { todo!() }\n")
    with pytest.raises(PredEnvironmentError, match="differs from its recorded manifest"):
        check_source(record)
    shutil.rmtree(tmp_path / "src")
    with pytest.raises(PredEnvironmentError, match="is gone"):
        check_source(_record_for(tmp_path, env_record).model_copy(update={"source_dir": str(tmp_path / "src")}))


def test_manifest_lists_files_not_symlinks_and_its_digest_ignores_order(tmp_path):
    (tmp_path / "b.rs").write_text("b")
    (tmp_path / "a.rs").write_text("a")
    (tmp_path / "link.rs").symlink_to(tmp_path / "a.rs")
    manifest = source_manifest(tmp_path)
    assert sorted(manifest) == ["a.rs", "b.rs"]
    assert manifest_digest(dict(reversed(manifest.items()))) == manifest_digest(manifest)
    assert manifest_digest({**manifest, "a.rs": "0" * 64}) != manifest_digest(manifest)


def test_pred_version_comes_from_the_binary(env_record):
    assert Pred(Path(env_record.pred_path)).version() == env_record.pred_version
