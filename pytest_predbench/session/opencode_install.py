"""opencode, pinned exactly and installed once into the predbench cache, keyed by its version.

Like pred, it is installed on the first run that names it (with a notice), never by `make setup`.
The npm package `opencode-ai` is only a launcher; its Linux binary is the package's optional
dependency `opencode-linux-x64`. That package is fetched with `npm pack` (a tarball, no install
scripts run), its sha512 checked against the integrity pinned here (the registry's
`dist.integrity` for this version, copied once: a registry that later served other bytes is
refused), and its one binary extracted. Nothing else of npm is used.
"""

import base64
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from filelock import FileLock

from pytest_predbench.verify import pin

VERSION = "1.18.33"
PACKAGE = "opencode-linux-x64"
INTEGRITY = "sha512-q/t/3p2CTxOT9y2kvjesb/LZab2+1eqlhhWA02Be6mjTtmYtNBcBsrI5yDo4Fw7ZSPBW2oyMIGMNRqiKQjiAWw=="
"""`npm view opencode-linux-x64@1.18.33 dist.integrity`."""
MEMBER = "package/bin/opencode"
NPM_SECONDS = 600.0


class OpenCodeInstallError(RuntimeError):
    """opencode cannot be installed here; one line says why."""


def install_root(version: str = VERSION) -> Path:
    return pin.cache_root() / f"opencode-{version}"


def binary(version: str = VERSION) -> Path:
    return install_root(version) / "bin" / "opencode"


def integrity_of(path: Path) -> str:
    """The file's integrity in npm's notation (sha512, base64)."""
    digest = hashlib.sha512()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return "sha512-" + base64.b64encode(digest.digest()).decode()


def extract(tarball: Path, into: Path, *, expected: str = INTEGRITY) -> Path:
    """The binary of a checked tarball, written to `into`/bin/opencode (atomically: a half-written
    install is never found). OpenCodeInstallError when the tarball is not the pinned one."""
    found = integrity_of(tarball)
    if found != expected:
        raise OpenCodeInstallError(f"{tarball.name} has integrity {found[:24]}…, not the pinned {expected[:24]}…")
    target = into / "bin" / "opencode"
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".part")
    with tarfile.open(tarball, "r:gz") as tar:
        member = tar.getmember(MEMBER)
        if not member.isfile():
            raise OpenCodeInstallError(f"{MEMBER} in {tarball.name} is not a regular file")
        source = tar.extractfile(member)
        assert source is not None
        with source, partial.open("wb") as out:
            shutil.copyfileobj(source, out)
    partial.chmod(0o755)
    os.replace(partial, target)
    return target


def ensure(version: str = VERSION, *, say=lambda line: print(line, file=sys.stderr)) -> Path:  # noqa: ANN001
    """The installed binary of `version`, installed first (with a notice) when this machine has none."""
    if version != VERSION:
        raise OpenCodeInstallError(f"opencode {version} is not pinned (predbench pins {VERSION})")
    path = binary(version)
    if path.is_file():
        return path
    root = install_root(version)
    root.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(root) + ".lock"):
        if path.is_file():
            return path
        npm = shutil.which("npm")
        if npm is None:
            raise OpenCodeInstallError("opencode is not installed and npm is not on PATH to fetch it")
        say(f"[predbench] opencode {version} is not installed on this machine yet: fetching {PACKAGE}@{version}")
        with tempfile.TemporaryDirectory(prefix="predbench-opencode-") as tmp:
            try:
                done = subprocess.run(
                    [npm, "pack", f"{PACKAGE}@{version}", "--pack-destination", tmp, "--silent"],
                    capture_output=True,
                    text=True,
                    timeout=NPM_SECONDS,
                    check=False,
                )
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise OpenCodeInstallError(f"npm pack {PACKAGE}@{version} failed: {exc}") from None
            tarballs = sorted(Path(tmp).glob("*.tgz"))
            if done.returncode != 0 or len(tarballs) != 1:
                detail = (done.stderr.strip().splitlines() or ["no tarball"])[-1][:200]
                raise OpenCodeInstallError(f"npm pack {PACKAGE}@{version} failed: {detail}")
            extract(tarballs[0], root)
        say(f"[predbench] opencode {version} installed at {path}")
    return path
