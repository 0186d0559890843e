"""A real minted bug pool for the tests: pred 0.6.0, seed 1, two bugs, minted once per machine.

Minting builds pred and the extractor on mutated source (minutes), so the pool is kept in the
predbench cache, keyed by what makes it (version, seed, N, the mutator and the pool format), and
minted again only when it is missing or no longer loads. A lock makes concurrent test workers wait
for one mint rather than start several. Everything about it is real: `predbench mint`'s own code,
the real cargo build, the real probe and verifier.
"""

import shutil
import tempfile
from pathlib import Path

from filelock import FileLock

from pytest_predbench.mint.build import minted_build, mutated_source
from pytest_predbench.mint.candidates import eligible, seeded_order
from pytest_predbench.mint.minting import mint
from pytest_predbench.mint.mutator import MUTATOR_VERSION, list_mutants
from pytest_predbench.mint.rules import rules_by_file
from pytest_predbench.mint.validate import Prober
from pytest_predbench.verify import pin
from pytest_predbench.verify.environment import build_record
from pytest_predbench.verify.known_bugs import load_registry
from pytest_predbench.verify.pool import FORMAT, Pool, PoolError, load_pool
from pytest_predbench.verify.setup import ensured_record

POOL_VERSION = "0.6.0"
POOL_SEED = 1
POOL_BUGS = 2


def pool_dir(version: str = POOL_VERSION, seed: int = POOL_SEED, bugs: int = POOL_BUGS) -> Path:
    key = f"{version}-seed{seed}-bugs{bugs}-mutants{MUTATOR_VERSION}-format{FORMAT}"
    return pin.cache_root() / "test-pools" / key


def minted_test_pool(version: str = POOL_VERSION, seed: int = POOL_SEED, bugs: int = POOL_BUGS) -> Pool:
    """The cached test pool, minted first when missing or broken."""
    path = pool_dir(version, seed, bugs)
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock"):
        try:
            return load_pool(path)
        except PoolError:
            shutil.rmtree(path, ignore_errors=True)
        mint(version, seed, bugs, path)
        return load_pool(path)


BREAKER_FILE = "src/rules/timetabledesign_ilp.rs"
"""A rule into ILP whose seed-1 mutant makes its own canonical example's ILP infeasible: pred then
panics building the examples of every rule (`pred create --example`), a change outside its rule."""
BYSTANDER_FILE = "src/rules/maximumsetpacking_qubo.rs"
"""A rule whose seed-1 mutant is one of the test pool's validated bugs."""
SCREENED = 20
"""The first screening round of a seed-1 mint of 10 bugs (twice as many candidates)."""


def breaker_build(version: str = POOL_VERSION) -> Prober:
    """The probe on the first screening build of a seed-1 mint of 10: a real minted build of the first
    SCREENED candidates in the seeded order, the breaker and the bystander among them. Built once per
    machine (a mint of 10 finds it cached by its source's digest, and so does this)."""
    record = ensured_record(version)
    source = Path(record.source_dir)
    rules = rules_by_file(Path(record.pred_path))
    candidates = eligible(list_mutants(source), rules, load_registry(version), source)
    screened = seeded_order(candidates, version, POOL_SEED)[:SCREENED]
    assert {BREAKER_FILE, BYSTANDER_FILE} <= {m.file for m in screened}, "the seed-1 order changed"
    home = pin.cache_root() / "test-pools" / f"{version}-screened{SCREENED}-{MUTATOR_VERSION}"
    home.mkdir(parents=True, exist_ok=True)
    with FileLock(str(home) + ".lock"):
        digest = mutated_source(source, screened, home / "library")
        pred, extractor = minted_build(version, home / "library", digest)
    minted = build_record(version, pred, home / "library", extractor)
    return Prober(minted, Path(tempfile.mkdtemp(prefix="predbench-screened-probe-")), examples=record.pred_path)
