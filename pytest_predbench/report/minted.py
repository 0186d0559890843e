"""Scoring a run on a minted bug pool: which accepted certificates found a planted bug, which a real one.

A run on a pool (`--bug-pool`, verify/pool.py) verifies every certificate on the minted build, so an
accepted certificate shows a bug of that build: planted, or one the version had anyway. The report
tells them apart by verifying every accepted certificate again on the pristine build (the version's
own, `environment.checked_record`):

- accepted there too: a **real** bug of the version, found on the way, matched against the known-bug
  registry by rule as on any run (a candidate to report upstream when the registry lacks it);
- rejected there, on a rule that a minted bug changes (`PoolManifest.find`): a **minted** find, which
  counts towards the recall of the pool, overall and by difficulty band;
- rejected there on any other rule: **unattributed**, a mutation's effect outside its rules (the mint
  drops such mutants, so this should not happen): neither a minted find nor a real bug, listed;
- undecided there even with the longer limits: **undecided**, neither either, counted.

False alarms (certificates the minted build rejects) count as on any run.
"""

from pytest_predbench.report.model import BandRecall, MintedBugRow, MintedRecall, PoolSummary
from pytest_predbench.state.audit import RunSnapshot
from pytest_predbench.state.plan import Plan
from pytest_predbench.verify.certificate import Certificate
from pytest_predbench.verify.pool import DIFFICULTY_BANDS, Pool, PoolError, load_pool
from pytest_predbench.verify.verdict import Verdict

REAL, MINTED, UNATTRIBUTED, UNDECIDED = "real", "minted", "unattributed", "undecided"
DECIDED = (REAL, MINTED, UNATTRIBUTED)
"""The origins whose pristine verdict was decided: a real bug, or not one."""
BANDS = tuple(name for _, name in DIFFICULTY_BANDS)
"""easy, medium, hard: in that order everywhere."""


def planned_pool(plan: Plan) -> str | None:
    """The digest of the pool a plan stands on (None: the version's own build): the one place the
    report reads it from a plan."""
    return plan.pool.digest if plan.pool else None


def run_pool(snap: RunSnapshot) -> Pool | None:
    """The pool a run was planned on, loaded from the path its plan names and checked, file by file,
    against the digest the plan recorded; None for a run on the version's own build. A missing,
    damaged or changed pool is a PoolError of one line."""
    path, digest = snap.plan.options.bug_pool, planned_pool(snap.plan)
    if path is None and digest is None:
        return None
    if path is None or digest is None:
        missing = "path" if path is None else "digest"
        raise PoolError(f"cannot report {snap.run.path}: its plan names a bug pool without its {missing}")
    try:
        pool = load_pool(path)
    except PoolError as exc:
        raise PoolError(f"cannot report {snap.run.path}, planned on bug pool {path}: {exc}") from None
    if pool.digest != digest:
        raise PoolError(
            f"cannot report {snap.run.path}: bug pool {path} has digest {pool.digest[:12]}, the run was planned on "
            f"{digest[:12]} (the pool was replaced or minted again)"
        )
    return pool


def pool_name(digest: str | None) -> str:
    """A pool as a column or a label shows it: 'pool <first 12 of its digest>', or 'pristine'."""
    return f"pool {digest[:12]}" if digest else "pristine"


def minted_ids(pool: Pool, certificate: Certificate) -> list[str]:
    """The minted bugs whose rules include the certificate's one-step rule."""
    source, target = certificate.source, certificate.target
    return pool.manifest.find(source.type, source.variant, target.type, target.variant)


def origin(pristine: Verdict, minted: list[str]) -> str:
    """What an accepted certificate of a pool run shows, by its verdict on the pristine build."""
    if pristine.accepted:
        return REAL
    if pristine.inconclusive:
        return UNDECIDED
    return MINTED if minted else UNATTRIBUTED


def recall(pool: Pool, found: set[str], rules: list[str]) -> MintedRecall:
    """Found k of the pool's N minted bugs, and of each band's."""
    bugs = pool.manifest.bugs
    return MintedRecall(
        found=sum(bug.id in found for bug in bugs),
        known=len(bugs),
        ids=sorted(bug.id for bug in bugs if bug.id in found),
        rules=sorted(rules),
        bands={
            band: BandRecall(
                found=sum(bug.id in found for bug in bugs if bug.band == band),
                known=sum(bug.band == band for bug in bugs),
            )
            for band in BANDS
        },
    )


def summary(pool: Pool) -> PoolSummary:
    manifest = pool.manifest
    return PoolSummary(
        digest=pool.digest,
        label=pool.label(),
        pred_version=pool.version,
        seed=manifest.seed,
        requested=manifest.requested,
        bugs=[
            MintedBugRow(id=bug.id, rules=[r.label for r in bug.rules], difficulty=bug.difficulty, band=bug.band)
            for bug in manifest.bugs
        ],
    )
