"""Pool directories with a real, digested manifest but no minted build, for the report's tests of
loading a pool and counting its bugs (tests/test_minted_report.py).

What such a directory lacks is the mint's work: no mutated source to speak of, no binaries, so
nothing can be verified on it. Every test that verifies on a minted build uses the real test pool
of tests/support/pools.py instead.
"""

import shutil
from pathlib import Path

from pytest_predbench.verify.known_bugs import ProblemRef
from pytest_predbench.verify.pool import MANIFEST, MintedBug, MintedRule, PoolManifest, compute_digest, file_hashes


def rule(source: str, source_variant: dict, target: str, target_variant: dict) -> MintedRule:
    return MintedRule(
        source=ProblemRef(name=source, variant=source_variant), target=ProblemRef(name=target, variant=target_variant)
    )


def write_pool(root: Path, bugs: list[tuple[list[MintedRule], int]], version: str, seed: int = 1) -> Path:
    """A pool at `root` with one minted bug per entry: its rules and how many of 100 probes exposed
    it (75 and more: easy, 25 and more: medium, fewer: hard). Written anew each call."""
    shutil.rmtree(root, ignore_errors=True)
    (root / "source" / "src" / "rules").mkdir(parents=True)
    (root / "source" / "src" / "rules" / "mod.rs").write_text("// stands for the mutated source\n")
    (root / "diffs").mkdir()
    (root / "certificates").mkdir()
    minted = []
    for n, (rules, exposed) in enumerate(bugs, 1):
        bug_id = f"minted-{n:02d}"
        (root / "diffs" / f"{bug_id}.diff").write_text(f"-a\n+b {n}\n")
        (root / "certificates" / f"{bug_id}.json").write_text("{}\n")
        minted.append(
            MintedBug(
                id=bug_id,
                file=f"src/rules/r{n}.rs",
                function="reduce_to",
                mutation="replace + with -",
                line=n,
                genre="operator",
                rules=rules,
                diff=f"diffs/{bug_id}.diff",
                certificate=f"certificates/{bug_id}.json",
                probes=100,
                exposed=exposed,
            )  # fmt: skip
        )
    manifest = PoolManifest(
        pred_version=version, seed=seed, requested=len(bugs), mutator="test", bugs=minted, files=file_hashes(root),
        digest="",
    )  # fmt: skip
    manifest.digest = compute_digest(manifest)
    (root / MANIFEST).write_text(manifest.model_dump_json(indent=2))
    return root
