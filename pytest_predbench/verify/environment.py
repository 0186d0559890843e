"""The environment record: which pred binary and which library source a run stands on.

Built once by setup and checked before use, so a verdict can never come from a pred
whose version or bytes differ from the ones recorded (and reported with every run).
"""

import hashlib
import os
import subprocess
import tempfile
from functools import cache
from pathlib import Path

from pydantic import BaseModel

from pytest_predbench.files import file_hashes, read_model, sha256_file, write_model
from pytest_predbench.verify import pin, pool
from pytest_predbench.verify.pred import Pred


class PredEnvironmentError(Exception):
    """The pred environment is missing or differs from its record; one line says how to fix it."""


class EnvRecord(BaseModel):
    pred_path: str
    pred_version: str
    pred_sha256: str
    source_dir: str
    """The crate source of the same version: what the agent reads (src/rules/*.rs)."""
    source_manifest: dict[str, str]
    """Relative path -> sha256 of every file in source_dir."""
    source_sha256: str
    """Digest of the manifest itself: one value to compare and to put in a plan."""
    extractor_path: str
    """pred-extract, built from extractor/ on the same library version (verify/extractor.py)."""
    extractor_sha256: str


def source_manifest(root: Path) -> dict[str, str]:
    return file_hashes(root)


def manifest_digest(manifest: dict[str, str]) -> str:
    lines = "".join(f"{sha}  {name}\n" for name, sha in sorted(manifest.items()))
    return hashlib.sha256(lines.encode()).hexdigest()


def _cargo_home() -> Path:
    return Path(os.environ.get("CARGO_HOME") or Path.home() / ".cargo")


def registry_crate(name: str, holds: str = "Cargo.toml") -> Path | None:
    """cargo's registry copy of the crate `name` (`problemreductions-cli-0.6.0`) that holds `holds`."""
    for candidate in sorted((_cargo_home() / "registry" / "src").glob(f"*/{name}")):
        if (candidate / holds).exists():
            return candidate
    return None


def locate_library_source(version: str) -> Path | None:
    """cargo's registry copy of the library crate, with src/rules/*.rs."""
    return registry_crate(f"{pin.LIBRARY_CRATE}-{version}", holds="src/rules")


def fetch_library_source(version: str) -> Path:
    """Ask cargo to download the crate when its registry copy is gone (cargo clean, new HOME)."""
    found = locate_library_source(version)
    if found:
        return found
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "src").mkdir()
        (Path(tmp) / "src" / "lib.rs").write_text("")
        (Path(tmp) / "Cargo.toml").write_text(
            f'[package]\nname = "fetch-source"\nversion = "0.0.0"\nedition = "2021"\n\n'
            f'[dependencies]\n{pin.LIBRARY_CRATE} = {{ version = "={version}", default-features = false }}\n'
        )
        subprocess.run(["cargo", "fetch", "--quiet"], cwd=tmp, check=True)
    found = locate_library_source(version)
    if not found:
        raise PredEnvironmentError(f"cargo fetched {pin.LIBRARY_CRATE} {version} but its source is not in the registry")
    return found


def build_record(
    version: str, binary: Path | None = None, source: Path | None = None, extractor: Path | None = None
) -> EnvRecord:
    binary = Path(binary or pin.pred_binary(version))
    extractor = Path(extractor or pin.extractor_binary(version))
    for name, path in (("pred", binary), ("pred-extract", extractor)):
        if not path.is_file():
            raise PredEnvironmentError(f"{name} not found at {path}; run `make setup`")
    source = Path(source or fetch_library_source(version))
    manifest = source_manifest(source)
    return EnvRecord(
        pred_path=str(binary),
        pred_version=Pred(binary).version(),
        pred_sha256=sha256_file(binary),
        source_dir=str(source),
        source_manifest=manifest,
        source_sha256=manifest_digest(manifest),
        extractor_path=str(extractor),
        extractor_sha256=sha256_file(extractor),
    )


def write_record(record: EnvRecord, path: Path | None = None) -> Path:
    path = Path(path or pin.env_record_path(record.pred_version))
    write_model(path, record)
    return path


def load_record(version: str, path: Path | None = None) -> EnvRecord:
    path = Path(path or pin.env_record_path(version))
    try:
        return read_model(path, EnvRecord)
    except FileNotFoundError:
        raise PredEnvironmentError(f"no environment record at {path}; run `{setup_command(version)}`") from None


def setup_command(version: str) -> str:
    """What builds a version: `make setup` for the default, the module with the version otherwise."""
    if version == pin.DEFAULT_VERSION:
        return "make setup"
    return f"python -m pytest_predbench.verify.setup --pred-version {version}"


def check_pred(record: EnvRecord) -> None:
    """Refuse a pred (or extractor) whose version or bytes differ from the record (and from the pin)."""
    binary = Path(record.pred_path)
    if not binary.is_file():
        raise PredEnvironmentError(f"pred recorded at {binary} is gone; run `make setup`")
    if record.pred_version not in pin.supported():
        raise PredEnvironmentError(
            f"environment record is for pred {record.pred_version}, which predbench does not support "
            f"({', '.join(pin.supported())}); run `make setup`"
        )
    actual = sha256_file(binary)
    if actual != record.pred_sha256:
        raise PredEnvironmentError(
            f"pred at {binary} has sha256 {actual[:12]}…, the record says {record.pred_sha256[:12]}…; "
            "refusing to verify with a different binary"
        )
    version = Pred(binary).version()
    if version != record.pred_version:
        raise PredEnvironmentError(f"pred at {binary} reports version {version}, the record says {record.pred_version}")
    extractor = Path(record.extractor_path)
    if not extractor.is_file():
        raise PredEnvironmentError(f"pred-extract recorded at {extractor} is gone; run `make setup`")
    actual = sha256_file(extractor)
    if actual != record.extractor_sha256:
        raise PredEnvironmentError(
            f"pred-extract at {extractor} has sha256 {actual[:12]}…, the record says {record.extractor_sha256[:12]}…; "
            "refusing to verify with a different extractor"
        )


def check_source(record: EnvRecord) -> None:
    """The library source the agent reads must still be the one recorded."""
    root = Path(record.source_dir)
    if not root.is_dir():
        raise PredEnvironmentError(f"library source {root} is gone; run `make setup`")
    actual = manifest_digest(source_manifest(root))
    if actual != record.source_sha256:
        raise PredEnvironmentError(f"library source {root} differs from its recorded manifest")


def checked_record(version: str, path: str | None = None) -> EnvRecord:
    """The record setup wrote for `version` (or the one at `path`): the version's own build, loaded
    and checked once per process. What a minted bug must fail on."""
    return _checked(path, version)


def ground_record(version: str, bug_pool: str | None) -> EnvRecord:
    """The build a run stands on: its bug pool's minted build (a pool of another version is refused),
    else the version's own. The one place a plan's version and pool become a pred to run."""
    if bug_pool is None:
        return _checked(None, version)
    try:
        record = _checked_pool(str(Path(bug_pool).resolve()))
    except pool.PoolError as exc:  # a pool damaged since it was planned: the machine's fault, not a verdict
        raise PredEnvironmentError(f"--bug-pool: {exc}") from None
    if record.pred_version != version:
        raise PredEnvironmentError(f"bug pool {bug_pool} is of pred {record.pred_version}, not {version}")
    return record


def pool_record(minted: "pool.Pool") -> EnvRecord:
    """The minted build of a pool as an environment record: its pred, its extractor, its source."""
    manifest = source_manifest(minted.source_dir)
    return EnvRecord(
        pred_path=str(minted.binary("pred")),
        pred_version=minted.version,
        pred_sha256=minted.manifest.files[pool.BINARIES["pred"]],
        source_dir=str(minted.source_dir),
        source_manifest=manifest,
        source_sha256=manifest_digest(manifest),
        extractor_path=str(minted.binary("pred-extract")),
        extractor_sha256=minted.manifest.files[pool.BINARIES["pred-extract"]],
    )


@cache
def _checked_pool(root: str) -> EnvRecord:
    record = pool_record(pool.load_pool(root))
    check_pred(record)
    return record


@cache
def _checked(path: str | None, version: str) -> EnvRecord:
    record = load_record(version, Path(path) if path else None)
    if path is None and record.pred_version != version:
        raise PredEnvironmentError(
            f"the environment record {pin.env_record_path(version)} is for pred {record.pred_version}, "
            f"not {version}; run `{setup_command(version)}`"
        )
    check_pred(record)
    return record
