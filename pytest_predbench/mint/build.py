"""The mutated library source, and pred and the extractor built on it: the minted build.

The build is the pristine one with one difference, the library's source. pred is the published
CLI crate at the version, with pred's own Cargo.lock; the extractor is the crate setup stages for
the version (verify/extractor_stage.py) with its derived lock. Both get a `[patch.crates-io]`
that points the library at the mutated copy, and the lock entry of the library loses its registry
source and checksum (a path package has none); every other package keeps the pinned version and
checksum, and `--locked --offline` holds cargo to them. The two builds run side by side, as setup's
do (verify/setup.py: heartbeat, logs, build-times.json).

Their target directories persist in the predbench cache per version, so only the library and what
depends on it is compiled again by a later mint; a finished build is cached by the digest of the
mutated source, so minting the same pool again builds nothing. The library's path is remapped to a
registry-like path (REMAPPED) in everything compiled, so a panic names the file as the pristine
build's panics do, never where the mint built it.
"""

import re
import shutil
import subprocess
from pathlib import Path

from filelock import FileLock

from pytest_predbench.mint.mutator import Mutant
from pytest_predbench.verify import pin
from pytest_predbench.verify.environment import PredEnvironmentError, manifest_digest, registry_crate, source_manifest
from pytest_predbench.verify.extractor_stage import stage
from pytest_predbench.verify.setup import EXTRACTOR_NICENESS, Build, run_builds, say

REMAPPED = "/cargo/registry/src/predbench-mint/problemreductions-{version}"
"""Where the mutated library's files say they are, in the minted binaries: a registry crate's path, as
in pristine pred, so the extractor knows a rule's frame (`problemreductions-V/src/rules/`) and the
gateway shows it to the agent as /src/problemreductions, exactly as it shows the pristine one's."""
ERROR_FILE = re.compile(r"src/rules/[A-Za-z0-9_]+\.rs")


class MintError(Exception):
    """Minting cannot go on (a mutant that does not apply, a build that fails for another reason)."""


class CompileFailure(MintError):
    """The mutated source does not compile, or its build breaks what every rule shares (pred's
    canonical examples); `files` are the rule files the errors point at."""

    def __init__(self, message: str, files: set[str], why: str = "does not compile"):
        super().__init__(message)
        self.files = files
        self.why = why


def mutated_source(pristine: Path, mutants: list[Mutant], dest: Path) -> str:
    """A copy of the pristine crate at `dest` with every mutant applied; its manifest digest."""
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(pristine, dest, symlinks=False)
    for mutant in mutants:
        done = subprocess.run(
            ["patch", "-p0", "--batch", "--forward", "--no-backup-if-mismatch", "--quiet", "-d", str(dest)],
            input=mutant.diff,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise MintError(f"the mutant {mutant.description!r} does not apply to {mutant.file}: {done.stdout.strip()}")
    return manifest_digest(source_manifest(dest))


def _registry_crate(name: str) -> Path:
    found = registry_crate(name)
    if found is None:
        raise PredEnvironmentError(f"{name} is not in cargo's registry; set the version up first (make setup)")
    return found


def _path_lock(lock: str) -> str:
    """A Cargo.lock whose library entry is a path package: no registry source, no checksum."""
    blocks = lock.split("\n[[package]]\n")
    for n, block in enumerate(blocks):
        if block.startswith(f'name = "{pin.LIBRARY_CRATE}"\n'):
            blocks[n] = "\n".join(line for line in block.split("\n") if not line.startswith(("source =", "checksum =")))
    return "\n[[package]]\n".join(blocks)


def _patched(crate: Path, lock: str, library: Path) -> Path:
    (crate / "Cargo.lock").write_text(_path_lock(lock))
    with open(crate / "Cargo.toml", "a") as toml:
        toml.write(f'\n[patch.crates-io.{pin.LIBRARY_CRATE}]\npath = "{library}"\n')
    return crate


def build_root(version: str, digest: str) -> Path:
    return pin.cache_root() / "mint-builds" / f"{version}-{digest[:16]}"


def minted_build(version: str, library: Path, digest: str) -> tuple[Path, Path]:
    """pred and pred-extract built on the mutated library at `library` (cached by its digest)."""
    root = build_root(version, digest)
    pred, extractor = root / "pred" / "bin" / "pred", root / "extract" / "bin" / "pred-extract"
    if pred.is_file() and extractor.is_file():
        say(f"minted build of source {digest[:12]} found in {root}")
        return pred, extractor
    work = pin.cache_root() / f"mint-{version}"
    work.mkdir(parents=True, exist_ok=True)
    with FileLock(str(work) + ".lock"):
        _build(version, library, work, root)
    return pred, extractor


def _build(version: str, library: Path, work: Path, root: Path) -> None:
    """Both builds, from one fixed place per version: the path remapped in RUSTFLAGS is part of every
    crate's fingerprint, so a fixed path keeps the persistent targets warm from one mint to the next."""
    root.mkdir(parents=True, exist_ok=True)
    built = work / "library"
    shutil.rmtree(built, ignore_errors=True)
    shutil.copytree(library, built)
    versions = pin.version_dir(version)
    env = {"RUSTFLAGS": f"--remap-path-prefix={built}={REMAPPED.format(version=version)}"}
    cli = work / "cli"
    shutil.rmtree(cli, ignore_errors=True)
    shutil.copytree(_registry_crate(f"{pin.PRED_CRATE}-{version}"), cli)
    _patched(cli, (versions / "pred.Cargo.lock").read_text(), built)
    crate = work / "extractor"
    shutil.rmtree(crate, ignore_errors=True)
    stage(version, crate)
    _patched(crate, (versions / "extractor.Cargo.lock").read_text(), built)
    argv = ["cargo", "install", "--locked", "--offline", "--path"]
    builds = [
        Build(f"minted-pred-{version}", [*argv, str(cli)], root / "pred",
              {**env, "CARGO_TARGET_DIR": str(pin.cache_root() / f"mint-target-{version}-pred")}),
        Build(f"minted-extract-{version}", [*argv, str(crate)], root / "extract",
              {**env, "CARGO_TARGET_DIR": str(pin.cache_root() / f"mint-target-{version}-extract")},
              niceness=EXTRACTOR_NICENESS),
    ]  # fmt: skip
    try:
        run_builds(builds)
    except PredEnvironmentError as exc:
        files = _error_files(builds)
        if files:
            where = ", ".join(sorted(files))
            raise CompileFailure(f"the mutated source does not compile: {where}", files) from None
        raise MintError(str(exc)) from None


def _error_files(builds: list[Build]) -> set[str]:
    """The rule files rustc's errors point at, from the builds' logs."""
    files: set[str] = set()
    for build in builds:
        text = build.log.read_text(errors="replace") if build.log.is_file() else ""
        for block in text.split("\nerror")[1:]:
            files.update(ERROR_FILE.findall(block.split("\n\n")[0]))
    return files
