"""A bug pool made by hand from a version's own build, for the tests of how a run, `verify` and
`calibrate` stand on a pool (the option, the plan's digest, the refusals, the skips) without a
mint's 5-10 minute build.

It has the real layout and manifest (verify/pool.py) but pred is not rebuilt: its source is the
pristine crate's with one comment of its one rule file changed (a real diff); its pred and
extractor are the pristine binaries with a few bytes appended (an ELF ignores trailing bytes, so
they run the same, while their sha256 differ from the pristine ones: a test can tell which build a
plan or a verdict stood on); its one "minted" bug claims a rule on which the version has a real
bug, with that bug's calibration certificate as its validating one.
What only a minted pool can show (a certificate accepted on the minted build and rejected on the
pristine one) is tested on the lead's minted pool, tests/support/pools.py.
"""

import difflib
import os
import shutil
from pathlib import Path
from typing import NamedTuple

from pytest_predbench.verify import pool
from pytest_predbench.verify.calibration import calibration_dir
from pytest_predbench.verify.environment import checked_record
from pytest_predbench.verify.known_bugs import ProblemRef

VERSION = "0.6.0"


class HandBug(NamedTuple):
    """What the hand-made bug claims: the rule file it "mutates", its rule, and the calibration case
    (a real bug of 0.6.0 on that rule) that is its validating certificate."""

    file: str
    rule: pool.MintedRule
    case: str


KCOLORING = HandBug(
    "src/rules/kcoloring_partitionintocliques.rs",
    pool.MintedRule(source=ProblemRef(name="KColoring"), target=ProblemRef(name="PartitionIntoCliques")),
    "genuine_kcoloring_to_cliques_crash",
)
MVC = HandBug(
    "src/rules/minimumvertexcover_ensemblecomputation.rs",  # the file demo/finder reads
    pool.MintedRule(source=ProblemRef(name="MinimumVertexCover"), target=ProblemRef(name="EnsembleComputation")),
    "genuine_mvc_to_ensemble_suboptimal",
)
CASE = KCOLORING.case
MUTATION = ("//!", "//! (hand-made test pool)")
MARK = b"\0predbench-test-pool\0"


def mutate(source: Path, file: str) -> str:
    """Change the first line of `file` under `source` (a doc comment: pred, not rebuilt, behaves the
    same) and return the unified diff against the pristine text, as a mint writes it."""
    path = source / file
    before = path.read_text()
    after = before.replace(MUTATION[0], MUTATION[1], 1)
    assert after != before, f"{file} has no {MUTATION[0]!r} to mutate"
    path.write_text(after)
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), f"a/{file}", f"b/{file}"
    )
    return "".join(lines)


def copied_pool(
    root: Path,
    version: str = VERSION,
    seed: int = 1,
    case: str | None = None,
    logged: Path | None = None,
    hand: HandBug = KCOLORING,
) -> Path:
    """A hand-made pool of `version` at `root` (created), with one bug, `hand`, whose "validating"
    certificate is its calibration case (or `case`: one its minted build rejects, for a contrast).
    With `logged`, its pred and extractor are scripts that append each call's argv to that file and
    run the pristine binaries: a test sees which build the verifier ran (on the host only: a
    session's sandbox has no path to the pristine binaries)."""
    record = checked_record(version)
    shutil.copytree(record.source_dir, root / pool.SOURCE, symlinks=True)
    diff = mutate(root / pool.SOURCE, hand.file)
    for name, path in (("pred", record.pred_path), ("pred-extract", record.extractor_path)):
        target = root / pool.BINARIES[name]
        target.parent.mkdir(parents=True, exist_ok=True)
        if logged:
            target.write_text(f'#!/bin/sh\necho "{name} $*" >> {logged}\nexec {path} "$@"\n')
        else:
            target.write_bytes(Path(path).read_bytes() + MARK)
        target.chmod(0o755)
    certificate = calibration_dir(version) / f"{case or hand.case}.json"
    (root / "certificates").mkdir()
    shutil.copyfile(certificate, root / "certificates" / "minted-01.json")
    (root / "diffs").mkdir()
    (root / "diffs" / "minted-01.diff").write_text(diff)
    bug = pool.MintedBug(
        id="minted-01",
        file=hand.file,
        function="reduce_to",
        mutation=f"{MUTATION[0]!r} -> {MUTATION[1]!r} in a comment (a hand-made test pool: pred is not rebuilt)",
        line=1,
        genre="comment",
        rules=[hand.rule],
        diff="diffs/minted-01.diff",
        certificate="certificates/minted-01.json",
        probes=4,
        exposed=1,
    )
    return write_manifest(root, version, seed, [bug])


def write_manifest(root: Path, version: str, seed: int, bugs: list[pool.MintedBug]) -> Path:
    """pool.json for the files now under `root`, with its digest."""
    manifest = pool.PoolManifest(
        pred_version=version,
        seed=seed,
        requested=len(bugs),
        mutator="hand-made (tests/support/pool_copies.py)",
        bugs=bugs,
        files=pool.file_hashes(root),
        digest="",
    )
    manifest.digest = pool.compute_digest(manifest)
    (root / pool.MANIFEST).write_text(manifest.model_dump_json(indent=2) + "\n")
    return root


def linked_copy(pool_dir: Path, root: Path, seed: int | None = None) -> Path:
    """A copy of a pool at `root` whose files are hard links (instant, and the same bytes); with
    `seed`, its manifest is written again for that seed: another pool, by its digest. Replace a
    file (unlink first) rather than write into it: the original shares it."""
    shutil.copytree(pool_dir, root, copy_function=os.link)
    if seed is not None:
        manifest = pool.PoolManifest.model_validate_json((root / pool.MANIFEST).read_text())
        (root / pool.MANIFEST).unlink()
        write_manifest(root, manifest.pred_version, seed, manifest.bugs)
    return root
