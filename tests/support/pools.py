"""A real minted bug pool for the tests: pred 0.6.0, seed 1, two bugs, minted once per machine.

Minting builds pred and the extractor on mutated source (minutes), so the pool is kept in the
predbench cache, keyed by what makes it (version, seed, N, the mutator and the pool format), and
minted again only when it is missing or no longer loads. A lock makes concurrent test workers wait
for one mint rather than start several. Everything about it is real: `predbench mint`'s own code,
the real cargo build, the real probe and verifier.
"""

import shutil
from pathlib import Path

from filelock import FileLock

from pytest_predbench.mint.minting import mint
from pytest_predbench.mint.mutator import MUTATOR_VERSION
from pytest_predbench.verify import pin
from pytest_predbench.verify.pool import FORMAT, Pool, PoolError, load_pool

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
