"""The one place where the pred version is pinned, and where its builds are cached.

The build takes 15-30 minutes, so it lives outside any checkout, keyed by version: every clone
on the machine (CI included) reuses it. The extractor (extractor/, a small crate on the same
library version) is cached the same way, keyed by version and by a digest of its own source,
so that an edit to it is built again and an unchanged one never is.
"""

import hashlib
import os
from functools import cache
from pathlib import Path

PRED_CRATE = "problemreductions-cli"
PRED_VERSION = "0.5.0"
LIBRARY_CRATE = "problemreductions"


def cache_root() -> Path:
    """Where builds and environment records live; override with PREDBENCH_CACHE."""
    return Path(os.environ.get("PREDBENCH_CACHE") or Path.home() / ".cache" / "predbench")


def install_root(version: str = PRED_VERSION) -> Path:
    return cache_root() / f"pred-{version}"


def pred_binary(version: str = PRED_VERSION) -> Path:
    return install_root(version) / "bin" / "pred"


def env_record_path(version: str = PRED_VERSION) -> Path:
    return cache_root() / f"env-{version}.json"


EXTRACTOR_CRATE = Path(__file__).resolve().parent / "extractor"
"""The extractor's crate: Cargo.toml, Cargo.lock and src/ (shipped in the wheel too)."""


def extractor_sources() -> list[Path]:
    return [
        EXTRACTOR_CRATE / "Cargo.toml",
        EXTRACTOR_CRATE / "Cargo.lock",
        *sorted((EXTRACTOR_CRATE / "src").glob("*.rs")),
    ]


@cache
def extractor_source_digest() -> str:
    digest = hashlib.sha256()
    for path in extractor_sources():
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def extractor_root(version: str = PRED_VERSION) -> Path:
    return cache_root() / f"pred-extract-{version}-{extractor_source_digest()[:12]}"


def extractor_binary(version: str = PRED_VERSION) -> Path:
    return extractor_root(version) / "bin" / "pred-extract"
