"""A minted bug pool: the build a run on planted bugs stands on, and the answer key kept from the agent.

Every real bug predbench counts is public (upstream's fixes, the registry, the calibration set),
so a model may recall one instead of finding it. `predbench mint` (mint/) plants fresh ones: it
mutates N rules of a pinned version's library source, builds pred and the extractor on that
source, and keeps a mutant only when a certificate exposes it on the minted build and the same
certificate is rejected on the pristine one. A pool directory holds:

    pool.json            this manifest: the bugs, their rules and difficulties, every file's sha256
    source/              the mutated library source (all the agent reads of the pool)
    bin/pred, bin/pred-extract   the minted binaries
    diffs/<id>.diff      each bug's mutation, against the pristine source
    certificates/<id>.json   each bug's validating certificate

A pool is a value, like a version (verify/pin.py): `--bug-pool` names it, the plan records it,
and the build a run stands on is the pool's (verify/environment.ground_record). The agent's
sandbox binds only source/ and reaches only the minted pred (through the gateway): no
diff, no manifest, no pristine copy.

The digest covers what a mint reproduces on any machine (version, seed, N, the mutator, every
bug and the sha256 of every file but the binaries); the binaries' sha256 are recorded and checked
but not digested, since a build embeds the toolchain that made it.
"""

import hashlib
import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pytest_predbench import files
from pytest_predbench.verify import pin
from pytest_predbench.verify.known_bugs import ProblemRef

MANIFEST = "pool.json"
FORMAT = 1
SOURCE = "source"
BINARIES = {"pred": "bin/pred", "pred-extract": "bin/pred-extract"}
DIFFICULTY_BANDS = ((0.75, "easy"), (0.25, "medium"), (0.0, "hard"))
"""A bug's band by the share of random probes that expose it: at least 0.75 easy, at least 0.25
medium, below that hard."""


class PoolError(ValueError):
    """A pool that is missing, malformed or differs from its manifest: one line saying which."""


class MintedRule(BaseModel):
    """One one-step rule a minted bug changes, as pred names its ends."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: ProblemRef
    target: ProblemRef

    def matches(self, source: str, source_variant: dict, target: str, target_variant: dict) -> bool:
        return self.source.matches(source, source_variant) and self.target.matches(target, target_variant)

    @property
    def label(self) -> str:
        return f"{self.source.name} -> {self.target.name}"


class MintedBug(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^minted-[0-9]{2,}$")
    file: str
    """The rule file mutated (src/rules/<name>.rs); a pool mutates each file at most once."""
    function: str
    mutation: str
    """What the mutator did, in its words ("replace + with - in ...")."""
    line: int
    genre: str
    rules: list[MintedRule]
    """Every witness-carrying rule the file implements (pred's own doc path names the file)."""
    diff: str
    certificate: str
    probes: int
    exposed: int
    """How many of `probes` random probes (the baseline's, seeded) produced an accepted certificate."""

    @property
    def difficulty(self) -> float:
        """The share of random probes that expose it: 1.0 is the easiest."""
        return self.exposed / self.probes if self.probes else 0.0

    @property
    def band(self) -> str:
        return next(name for least, name in DIFFICULTY_BANDS if self.difficulty >= least)


class PoolManifest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format: int = FORMAT
    pred_version: str
    seed: int
    requested: int
    """N as asked for; len(bugs) is smaller when fewer mutants could be validated (said at mint time)."""
    mutator: str
    bugs: list[MintedBug]
    files: dict[str, str]
    """Path in the pool -> sha256, for every file: the source, the binaries, the diffs, the certificates."""
    digest: str
    built_in_rounds: int = 1
    """Builds the mint needed (a round rebuilds when mutants fail and are replaced); not digested."""
    seconds: float = 0.0

    def find(self, source: str, source_variant: dict, target: str, target_variant: dict) -> list[str]:
        """The ids of the minted bugs whose rules include this one-step rule."""
        rule = (source, source_variant, target, target_variant)
        return [bug.id for bug in self.bugs if any(r.matches(*rule) for r in bug.rules)]


def compute_digest(manifest: PoolManifest) -> str:
    """sha256 of what any machine reproduces from (version, seed, N): never the binaries' bytes."""
    reproducible = manifest.model_dump(mode="json", exclude={"digest", "built_in_rounds", "seconds"})
    reproducible["files"] = {path: sha for path, sha in manifest.files.items() if path not in BINARIES.values()}
    text = json.dumps(reproducible, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def file_hashes(root: Path) -> dict[str, str]:
    """Every regular file of the pool but its manifest, by path relative to it."""
    return {path: sha for path, sha in files.file_hashes(root).items() if path != MANIFEST}


class Pool:
    """A pool directory and its manifest, checked against the files once."""

    def __init__(self, root: Path, manifest: PoolManifest):
        self.root = root
        self.manifest = manifest

    @property
    def digest(self) -> str:
        return self.manifest.digest

    @property
    def version(self) -> str:
        return self.manifest.pred_version

    @property
    def source_dir(self) -> Path:
        return self.root / SOURCE

    def binary(self, name: str) -> Path:
        return self.root / BINARIES[name]

    def certificate_path(self, bug: MintedBug) -> Path:
        return self.root / bug.certificate

    def label(self) -> str:
        bugs = len(self.manifest.bugs)
        return f"pool {self.digest[:12]} ({bugs} minted bugs on pred {self.version}, seed {self.manifest.seed})"


def load_pool(path: str | Path) -> Pool:
    """The pool at `path`, its manifest validated and every file checked against its sha256 (each
    time: a pool is a folder anyone can edit between two loads)."""
    root = Path(path).resolve()
    manifest_path = root / MANIFEST
    if not manifest_path.is_file():
        raise PoolError(f"{root} is not a bug pool: it has no {MANIFEST} (make one with `predbench mint`)")
    try:
        manifest = PoolManifest.model_validate_json(manifest_path.read_text(encoding="utf-8"))
    except (ValidationError, UnicodeDecodeError) as exc:
        first = exc.errors()[0] if isinstance(exc, ValidationError) else {"loc": (), "msg": str(exc)}
        where = ".".join(str(part) for part in first["loc"]) or "the file"
        raise PoolError(f"{manifest_path} is not a pool manifest: {where}: {first['msg']}") from None
    if manifest.format != FORMAT:
        raise PoolError(f"{manifest_path} has format {manifest.format}; this predbench reads format {FORMAT}")
    try:
        pin.check_version(manifest.pred_version)
    except pin.UnsupportedVersion as exc:
        raise PoolError(f"{manifest_path}: {exc}") from None
    if compute_digest(manifest) != manifest.digest:
        raise PoolError(f"{manifest_path} does not match its own digest: the manifest was edited")
    actual = file_hashes(root)
    changed = sorted(p for p in manifest.files.keys() | actual.keys() if manifest.files.get(p) != actual.get(p))
    if changed:
        more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
        raise PoolError(f"bug pool {root} differs from its manifest: {', '.join(changed[:3])}{more}")
    return Pool(root, manifest)


def load_for_version(path: str | Path, version: str | None) -> Pool:
    """The pool at `path` for a run or a check that asked for `version` (None: the pool's own): a
    pool stands on the version it was minted from, so another is a PoolError."""
    pool = load_pool(path)
    if version is not None and version != pool.version:
        raise PoolError(
            f"{pool.root} is a pool of pred {pool.version}, not of pred {version} (--pred-version): "
            "a pool stands on the version it was minted from"
        )
    return pool
