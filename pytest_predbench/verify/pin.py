"""The supported pred versions, which one a process uses, and where their builds are cached.

Versions are data: each supported version has a folder versions/<V>/ with its facts
(version.json), pred's own Cargo.lock, the extractor's lock derived from it, the generated
constructor-checks table, the known-bug registry, and the prompt facts; its calibration set is
fixtures/calibration/<V>/. Adding a version is adding a folder.

A version is a value: each command reads `--pred-version` once (its default: `default_choice()`)
and passes what it chose to the code that uses it, as a run passes its plan's `pred_version`; no
function below falls back on an ambient choice.

Builds take 15-40 minutes, so they live outside any checkout, keyed by version: every clone on
the machine (CI included) reuses them. The extractor is keyed by version and by a digest of what
is staged to build it, so an edit to it is built again and an unchanged one never is.
"""

import os
from functools import cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict

PRED_CRATE = "problemreductions-cli"
LIBRARY_CRATE = "problemreductions"
DEFAULT_VERSION = "0.6.0"
"""The reference pin: upstream tag v0.6.0 (commit aa2d1a1), what the reference documents use."""
VERSION_ENV = "PREDBENCH_PRED_VERSION"
VERSIONS_DIR = Path(__file__).resolve().parent / "versions"


class UnsupportedVersion(ValueError):
    """A version with no folder under versions/: one line naming the supported ones."""


class VersionFacts(BaseModel):
    """versions/<V>/version.json: what is known about one pinned version."""

    model_config = ConfigDict(extra="forbid")

    version: str
    """pred's version, which is also the library's (the CLI crate pins the library exactly)."""
    upstream_commit: str
    """The library crate's .cargo_vcs_info.json sha1: the upstream commit it was published from."""
    rules: int
    """The version's one count of rules: the `Source -> Target` edges `pred list --rules --json` lists
    (verify/graph.py; tests/test_rule_names.py checks it against the binary). Every surface that
    counts rules states this number."""
    prompt_facts: list[str] = []
    """Version-specific lines the session prompt adds to its list of what the agent has."""


def supported() -> list[str]:
    """Every version with a folder, the default first."""
    found = sorted(p.parent.name for p in VERSIONS_DIR.glob("*/version.json"))
    return sorted(found, key=lambda v: (v != DEFAULT_VERSION, [-int(part) for part in v.split(".")]))


def check_version(version: str) -> str:
    if version not in supported():
        choices = ", ".join(f"{v} (default)" if v == DEFAULT_VERSION else v for v in supported())
        raise UnsupportedVersion(f"pred version {version!r} is not supported; supported: {choices}")
    return version


def default_choice() -> str:
    """The default of every `--pred-version` option: PREDBENCH_PRED_VERSION when set, else the
    reference pin. Read only where a command parses its options (a test suite on another version
    sets it once for every command it starts); the chosen version is then passed as a value."""
    return os.environ.get(VERSION_ENV) or DEFAULT_VERSION


def version_dir(version: str) -> Path:
    return VERSIONS_DIR / check_version(version)


@cache
def facts(version: str) -> VersionFacts:
    return VersionFacts.model_validate_json((version_dir(version) / "version.json").read_text(encoding="utf-8"))


def cache_root() -> Path:
    """Where builds and environment records live; override with PREDBENCH_CACHE."""
    return Path(os.environ.get("PREDBENCH_CACHE") or Path.home() / ".cache" / "predbench")


def install_root(version: str) -> Path:
    return cache_root() / f"pred-{version}"


def pred_binary(version: str) -> Path:
    return install_root(version) / "bin" / "pred"


def env_record_path(version: str) -> Path:
    return cache_root() / f"env-{version}.json"


def extractor_root(version: str) -> Path:
    """Keyed by version and by a digest of the crate staged for it (verify/extractor_stage.py)."""
    from pytest_predbench.verify.extractor_stage import source_digest

    return cache_root() / f"pred-extract-{version}-{source_digest(version)[:12]}"


def extractor_binary(version: str) -> Path:
    return extractor_root(version) / "bin" / "pred-extract"
