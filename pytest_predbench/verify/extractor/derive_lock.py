#!/usr/bin/env python3
"""Derive the extractor's Cargo.lock for one library version from pred's own lock.

The extractor must run the library exactly as pred does, dependencies included, so its lock is not
resolved afresh: it starts as `versions/V/pred.Cargo.lock` (problemreductions-cli V's shipped
lock) and cargo only syncs the workspace (`cargo update --workspace --offline`: the pred-extract
entry is added, entries nothing here uses are dropped, nothing else changes). The result is checked
(every other package has pred's version and checksum) and written to
`versions/V/extractor.Cargo.lock`.

stdlib only. Usage: python3 derive_lock.py --version 0.6.0 [--check]
(--check: exit 1 when the committed lock differs from the derived one, writing nothing).
"""

import argparse
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
VERSIONS = HERE.parent / "versions"
PLACEHOLDER = "@LIBRARY_VERSION@"
CRATE = "pred-extract"


def packages(lock_text: str) -> dict[str, list[dict]]:
    """A lock's packages by name (a name can be locked at several versions)."""
    out: dict[str, list[dict]] = {}
    for package in tomllib.loads(lock_text).get("package", []):
        out.setdefault(package["name"], []).append(package)
    return out


def mismatches(extractor_lock: str, pred_lock: str) -> list[str]:
    """Every package of the extractor's lock (but pred-extract) not locked identically by pred."""
    pred = {(p["name"], p["version"]): p.get("checksum") for ps in packages(pred_lock).values() for p in ps}
    problems = []
    for name, locked in sorted(packages(extractor_lock).items()):
        for p in locked:
            if name == CRATE:
                continue
            key = (name, p["version"])
            if key not in pred:
                problems.append(f"{name} {p['version']} is not in pred's lock")
            elif pred[key] != p.get("checksum"):
                problems.append(f"{name} {p['version']} has checksum {p.get('checksum')}, pred's lock {pred[key]}")
    if CRATE not in packages(extractor_lock):
        problems.append(f"{CRATE} itself is not in the lock")
    return problems


def derive(version: str) -> str:
    """The extractor's lock for `version`, synced by cargo from pred's lock (offline)."""
    pred_lock = VERSIONS / version / "pred.Cargo.lock"
    if not pred_lock.is_file():
        raise SystemExit(f"derive_lock: {pred_lock} is missing (copy problemreductions-cli {version}'s Cargo.lock)")
    with tempfile.TemporaryDirectory() as tmp:
        crate = Path(tmp)
        (crate / "Cargo.toml").write_text((HERE / "Cargo.toml").read_text().replace(PLACEHOLDER, version))
        (crate / "src").mkdir()
        (crate / "src" / "main.rs").write_text("fn main() {}\n")  # the lock does not depend on the code
        shutil.copyfile(pred_lock, crate / "Cargo.lock")
        cmd = ["cargo", "update", "--workspace", "--offline", "--quiet"]
        result = subprocess.run(cmd, cwd=crate, capture_output=True, text=True)
        if result.returncode != 0:
            raise SystemExit(f"derive_lock: `{' '.join(cmd)}` failed: {result.stderr.strip()}")
        derived = (crate / "Cargo.lock").read_text()
    problems = mismatches(derived, pred_lock.read_text())
    if problems:
        raise SystemExit("derive_lock: cargo changed pred's lock: " + "; ".join(problems))
    return derived


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", required=True, help="library version, a directory under versions/")
    parser.add_argument("--check", action="store_true", help="compare with the committed lock, write nothing")
    args = parser.parse_args()
    derived = derive(args.version)
    out = VERSIONS / args.version / "extractor.Cargo.lock"
    if args.check:
        same = out.is_file() and out.read_text() == derived
        print(f"{out}: {'up to date' if same else 'differs from the derived lock'}")
        return 0 if same else 1
    out.write_text(derived)
    print(f"wrote {out} ({len(packages(derived))} packages, all as in pred's lock)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
