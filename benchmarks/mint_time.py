"""Mint time: `predbench mint --seed 1 --bugs 10` on this machine, into a fresh folder. Target: one
build (round) plus validation, every bug validated.

    python -m benchmarks.mint_time [--pred-version 0.6.0] [--seed 1] [--bugs 10] [--keep POOL] [--quick]

A mint builds pred and the extractor on the mutated source once per round (a round replaces the
mutants validation dropped); its cargo targets persist in the predbench cache, so the first mint of
a version on a machine compiles every dependency and a later one mostly the library. The figure says
which it was (the build log's length is no guide, so the cache's state before the run is recorded).
A build of exactly the same mutated source is reused (the figure's note says how many of its rounds
were built, from the mint's own output).
`--quick` mints the tests' pool again (seed 1, 2 bugs: its builds are cached, only validation runs):
it checks the script, not a figure to quote.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from pydantic import BaseModel

from benchmarks.figures import REPO, Figure, parser, report, timed
from pytest_predbench.verify import pin
from pytest_predbench.verify.pool import load_pool

TARGET_ROUNDS = 1


class MintTiming(BaseModel):
    version: str
    seed: int
    requested: int
    minted: int
    rounds: int
    seconds: float
    warm_targets: bool
    """Whether the version's mint targets were already in the cache (a later mint on this machine)."""
    bands: dict[str, int]
    dropped: list[str]
    reused_builds: int = 0
    """Rounds whose build was found cached (the same mutated source minted before on this machine)."""
    load_average: list[float]
    quick: bool = False


def measure(version: str, seed: int, bugs: int, quick: bool, keep: Path | None = None) -> MintTiming:
    warm = (pin.cache_root() / f"mint-target-{version}-pred").is_dir()
    scratch = Path(tempfile.mkdtemp(prefix="predbench-perf-mint-"))
    out = keep.resolve() if keep else scratch / "pool"
    log = scratch / "mint.log"
    argv = [sys.executable, "-m", "pytest_predbench.cli", "mint", "--pred-version", version]
    argv += ["--seed", str(seed), "--bugs", str(bugs), "--out", str(out)]
    try:

        def run() -> None:
            with open(log, "w") as handle:
                subprocess.run(argv, stdout=handle, stderr=subprocess.STDOUT, cwd=REPO, check=False)

        seconds = timed(run)
        text = log.read_text(errors="replace")
        if not (out / "pool.json").is_file():
            raise RuntimeError("the mint wrote no pool:\n" + "\n".join(text.splitlines()[-10:]))
        manifest = load_pool(out).manifest
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    bands: dict[str, int] = {}
    for bug in manifest.bugs:
        bands[bug.band] = bands.get(bug.band, 0) + 1
    return MintTiming(
        version=version,
        seed=seed,
        requested=bugs,
        minted=len(manifest.bugs),
        rounds=manifest.built_in_rounds,
        seconds=round(seconds, 1),
        warm_targets=warm,
        bands=bands,
        dropped=re.findall(r"\[mint\] dropped (.*)", text),
        reused_builds=len(re.findall(r"minted build of source \w+ found in", text)),
        load_average=[round(x, 2) for x in os.getloadavg()],
        quick=quick,
    )


def judge(t: MintTiming) -> Figure:
    targets = "warm cargo targets (a later mint on this machine)" if t.warm_targets else "cold cargo targets"
    return Figure(
        key="mint_time",
        title="mint rounds",
        value=t.rounds,
        target=TARGET_ROUNDS,
        digits=0,
        conditions={"every bug validated": t.minted == t.requested},
        note=(
            f"`predbench mint --seed {t.seed} --bugs {t.requested}` on pred {t.version} minted {t.minted} bugs "
            f"({', '.join(f'{n} {band}' for band, n in sorted(t.bands.items()))}) in {t.seconds / 60:.1f} min, "
            f"{t.rounds} build(s) ({t.reused_builds} found cached), {targets}; {len(t.dropped)} mutant(s) dropped; "
            f"load average {t.load_average}"
        ),
        raw=t.model_dump(),
        quick=t.quick,
    )


def main(argv: list[str] | None = None) -> int:
    parse = parser(__doc__.splitlines()[0], repeat=1)
    parse.add_argument("--pred-version", default=pin.DEFAULT_VERSION, help="the version to mint on (default 0.6.0)")
    parse.add_argument("--seed", type=int, default=1)
    parse.add_argument("--bugs", type=int, default=10)
    parse.add_argument("--keep", type=Path, metavar="POOL", help="mint into this new folder and keep the pool")
    args = parse.parse_args(argv)
    bugs = 2 if args.quick else args.bugs
    version = pin.check_version(args.pred_version)
    return report("mint time", lambda: judge(measure(version, args.seed, bugs, args.quick, args.keep)), args.json)


if __name__ == "__main__":
    sys.exit(main())
