"""The extractor crate for one library version, staged from the version-neutral template.

extractor/ holds one crate for every version: its Cargo.toml names the library as
`=@LIBRARY_VERSION@`, and what differs per version lives in versions/V/ (the lock derived from
pred's, the generated constructor table, the compat module for the few API differences). `stage` writes the
crate `cargo install --locked --path` builds for V; `source_digest` is a digest of exactly those
bytes, so a build is cached per version and rebuilt whenever anything it is made of changes.
"""

import hashlib
from pathlib import Path

EXTRACTOR_TEMPLATE = Path(__file__).resolve().parent / "extractor"
"""The version-neutral crate: Cargo.toml (template) and src/*.rs."""

VERSIONS = Path(__file__).resolve().parent / "versions"
"""Per-version data: versions/V/extractor.Cargo.lock, checks_table.rs, compat.rs."""

PLACEHOLDER = "@LIBRARY_VERSION@"

PER_VERSION = {
    "Cargo.lock": "extractor.Cargo.lock",
    "src/checks_table.rs": "checks_table.rs",
    "src/compat.rs": "compat.rs",
}
"""Staged path -> file of versions/V/ (all required)."""


class StageError(ValueError):
    """The version has no (complete) extractor data under versions/."""


def staged_files(version: str) -> dict[str, bytes]:
    """Every file of the staged crate for `version`, by path relative to the crate, sorted."""
    data = VERSIONS / version
    missing = [name for name in PER_VERSION.values() if not (data / name).is_file()]
    if missing:
        raise StageError(f"no extractor data for library version {version!r}: {data} lacks {', '.join(missing)}")
    template = (EXTRACTOR_TEMPLATE / "Cargo.toml").read_text()
    if PLACEHOLDER not in template:
        raise StageError(f"{EXTRACTOR_TEMPLATE / 'Cargo.toml'} has no {PLACEHOLDER} to substitute")
    files = {"Cargo.toml": template.replace(PLACEHOLDER, version).encode()}
    for source in sorted((EXTRACTOR_TEMPLATE / "src").glob("*.rs")):
        files[f"src/{source.name}"] = source.read_bytes()
    for staged, name in PER_VERSION.items():
        files[staged] = (data / name).read_bytes()
    return dict(sorted(files.items()))


def stage(version: str, dest: Path) -> None:
    """Write the buildable crate for `version` into `dest` (created; files there are overwritten)."""
    for relative, content in staged_files(version).items():
        path = Path(dest) / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)


def source_digest(version: str) -> str:
    """sha256 over the staged crate (each path and its bytes): the key of the extractor's build."""
    digest = hashlib.sha256()
    for relative, content in staged_files(version).items():
        digest.update(relative.encode() + b"\0" + content + b"\0")
    return digest.hexdigest()


def main(argv: list[str] | None = None) -> int:
    """`python -m pytest_predbench.verify.extractor_stage VERSION DEST`: stage, print the digest."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m pytest_predbench.verify.extractor_stage", description=main.__doc__)
    parser.add_argument("version", help="library version, a directory under versions/")
    parser.add_argument("dest", type=Path, help="directory to write the crate into")
    args = parser.parse_args(argv)
    try:
        stage(args.version, args.dest)
    except StageError as exc:
        print(f"extractor_stage: {exc}", file=sys.stderr)
        return 1
    print(source_digest(args.version))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
