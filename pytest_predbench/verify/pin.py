"""The one place where the pred version is pinned, and where its build is cached.

The build takes 15-30 minutes, so it lives outside any checkout, keyed by version:
every clone on the machine (CI included) reuses it.
"""

import os
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
