"""The leaderboard as typed records: what leaderboard.json (and comparison.json) hold, and every
renderer reads. Every path in them is relative to the directory the file is written to."""

from datetime import UTC, date, datetime
from typing import Literal

from pydantic import BaseModel, Field

from pytest_predbench.session.protocol import SessionLimits
from pytest_predbench.state.plan import Budget, CapRaise, ModelIdentity

Interval = tuple[float, float]
"""[low, high] of a 95% interval."""


class PredManifest(BaseModel):
    version: str
    sha256: str
    source_sha256: str
    extractor_sha256: str


class RunManifest(BaseModel):
    """What one run stood on, so anyone can check that the comparison was fair."""

    path: str
    """The run directory, relative to where the leaderboard is written."""
    run_id: str = ""
    run_name: str | None = None
    """The name given with --run-name."""
    plan_digest: str
    runner: str
    """Its agents, comma-separated (one for a run of one agent: what `runner` always said)."""
    agent_versions: dict[str, str | None] = {}
    """Each agent's version where known (state/entrants.py)."""
    models: list[str]
    sessions: int
    budget: Budget
    """The money caps in force (after any raise)."""
    cap_raises: list[CapRaise] = []
    """Every raise of the money caps since the run was planned (`--resume-bench --budget D`)."""
    limits: SessionLimits
    pred_version: str = "0.5.0"
    """The pred version the run stands on (a leaderboard written before versions: 0.5.0)."""
    pred: PredManifest | None
    prompt_hash: str
    packages: dict[str, str | None]
    model_identities: dict[str, ModelIdentity] = {}
    model_settings_sha256: str | None = None
    pool_digest: str | None = None
    """The minted bug pool the run stood on (verify/pool.py); None: the version's own build."""
    pool: str | None = None
    """That pool as people read it (`Pool.label()`)."""


class RecallPart(BaseModel):
    """Recall on a part of the registry (verify/known_bugs.py's disclosure): found k of its N."""

    found: int
    known: int
    ids: list[str]
    """The registry ids found."""


class Recall(BaseModel):
    """Against the known-bug registry, as Magma counts its planted bugs: found k of N, named; and
    apart on the bugs public as of the registry's date and on those not (a model may recall a
    disclosed bug rather than find it)."""

    found: int
    known: int
    """Entries in the registry (the N of "k of N")."""
    rules: list[str]
    """The rules of the known bugs found."""
    ids: list[str]
    """Their registry ids."""
    disclosed: RecallPart | None = None
    """On the entries disclosed (a public report of them) as of the registry's date; None: a
    leaderboard written before disclosures."""
    undisclosed: RecallPart | None = None
    """On the entries found here and not public as of the registry's date."""
    training_cutoff: date | None = None
    """The model's, from its settings (None: not given)."""
    after_cutoff: RecallPart | None = None
    """With a training cutoff: on the entries disclosed after it (public, but not to the model)."""


class BandRecall(BaseModel):
    found: int
    known: int


class MintedRecall(BaseModel):
    """Against a run's minted bug pool: found k of its N planted bugs, named, and by difficulty band
    (the share of random probes that expose a bug: verify/pool.py's bands)."""

    found: int
    known: int
    """Minted bugs in the pool (the N of "k of N")."""
    ids: list[str]
    rules: list[str]
    """The rules of the certificates that found them."""
    bands: dict[str, BandRecall]
    """easy, medium, hard: found k of the pool's n in each band."""


class BugFunnel(BaseModel):
    """How far one session got with one minted bug (report/funnel.py): each flag implies the one before."""

    id: str
    reached: bool
    """It ran `pred reduce` along a rule the bug changes."""
    triggered: bool
    """Its own instance's round trip along that rule is wrong, proved by a certificate the verifier
    accepts on the minted build (or it certified the bug)."""
    certified: bool
    """Its accepted certificate found the bug (minted: the pristine build rejects it)."""
    tried: int = 0
    """The session's instances the verifier was run on for `triggered` (at most funnel.MAX_TRIALS)."""


class FunnelCounts(BaseModel):
    """A model's funnel over a pool: of its N minted bugs, how many any of its sessions reached,
    triggered and certified (reached >= triggered >= certified)."""

    known: int
    reached: int
    triggered: int
    certified: int


class ModelRow(BaseModel):
    """One entrant's row: an (agent, model) pair (state/entrants.py)."""

    rank: int
    model: str
    """The entrant's label, which keys the row: the model id, prefixed `<agent>:` unless its agent is
    the default one (mini-swe), the fake or a baseline's own."""
    runner: str = ""
    """Its agent: what ran its sessions (the plan's agent, or a baseline's own)."""
    agent_version: str | None = None
    """That agent's version where known."""
    model_id: str = ""
    """The model id alone (empty in a leaderboard written before there were agents: then `model`)."""
    label: str | None = None
    """'baseline (no model)' for a baseline (session/baseline.py), shown beside its id everywhere."""
    sessions: int
    """Sessions that ended in a result (passed or false alarm): every per-session figure divides by it."""
    sessions_planned: int
    sessions_skipped: int
    """Planned sessions that never started: no budget left."""
    sessions_with_bug: int
    """Sessions with at least one accepted certificate of a bug (crashes are counted apart)."""
    bug_rate: float | None
    bug_rate_ci: Interval | None
    """95% Wilson interval of bug_rate."""
    bugs_per_session: float | None
    """Mean distinct bugs per session."""
    bugs_per_session_ci: Interval | None
    """95% bootstrap percentile interval of bugs_per_session (seeded)."""
    bugs_at_k: list[float]
    """Expected distinct bugs in k sessions, k = 1 .. sessions (unbiased, as pass@k)."""
    bugs_at_k_ci: list[Interval] = []
    """95% bootstrap interval of each Bugs@k (seeded; stats.bugs_at_k_band)."""
    verified_bugs: int
    """Distinct bugs over all the model's sessions, re-verified."""
    rules: list[str]
    """Their names."""
    recall: Recall
    candidates: list[str]
    """Bugs (crashes included) outside the known-bug registry: candidates to report upstream."""
    crashes: list[str]
    """Rules where pred crashed on a valid source (accepted `crash` certificates), counted apart."""
    crash_sessions: int
    violations: dict[str, int]
    """Accepted certificates per violation kind."""
    accepted_certificates: int
    certificates: int
    false_alarms: int
    """Rejected certificates (a certificate inconclusive in the run and rejected by the report's longer
    verification included; one still inconclusive is not)."""
    false_alarm_sessions: int
    """Sessions with at least one rejected certificate."""
    inconclusive: int = 0
    """Undecided certificates: the verifier could not decide them even with the report's longer limits.
    Never a bug; unconfirmed claims, counted with the false alarms in `unconfirmed`,
    `false_alarm_rate`, `precision` and the ranking (verify/claims.py); listed in
    `reverification.inconclusive`."""
    unconfirmed: int = 0
    """Rejected and undecided certificates together."""
    false_alarm_rate: float | None
    """Unconfirmed (rejected or undecided) over judged certificates (None when none was submitted)."""
    precision: float | None = None
    """Accepted over judged certificates: an undecided one lowers it as a rejected one does."""
    dollars: float
    """Spend of the sessions that ended in a result."""
    dollars_no_result: float
    """Spend that bought no result (infrastructure failures, lost sessions), from the ledger."""
    dollars_per_bug: float | None
    median_dollars: float | None
    median_model_calls: float | None
    median_pred_calls: float | None
    median_wall_seconds: float | None
    prompt_tokens: int
    completion_tokens: int
    tokens: int
    model_calls: int
    pred_calls: int
    wall_seconds: float
    stop_reasons: dict[str, int]
    """Sessions per stop reason, every reason the runner protocol knows (zero included)."""
    bugs_per_dollar: float | None
    bugs_per_million_tokens: float | None
    minted: MintedRecall | None = None
    """On a run on a minted bug pool: recall of its minted bugs (None on the version's own build)."""
    funnel: FunnelCounts | None = None
    """On a pool run: the minted bugs its sessions reached, triggered and certified (report/funnel.py)."""
    real_bugs: list[str] | None = None
    """On a pool run: the rules whose certificates the pristine build accepts too — real bugs of the
    version, crashes included, counted apart from the minted ones; `recall` and `candidates` count only
    these. None on the version's own build."""
    unattributed: list[str] = []
    """On a pool run: rules accepted on the minted build and rejected on the pristine one that no minted
    bug changes (a mutation's effect outside its rules): neither minted finds nor real bugs."""
    undecided_pristine: int = 0
    """On a pool run: accepted certificates the pristine build could not decide within its limits."""


class CertificateLink(BaseModel):
    n: int
    accepted: bool
    outcome: str = ""
    """accepted, rejected or inconclusive, after the report's own verification."""
    violation: str | None
    rule: str | None
    reason: str
    certificate: str | None
    """The certificate file (relative link; None when the run kept none)."""
    verdict: str | None
    known_bugs: list[str] = []
    origin: str | None = None
    """On a pool run, for an accepted certificate: real (the pristine build accepts it too), minted
    (rejected there, on a minted rule), unattributed or undecided (report/minted.py)."""
    minted_bugs: list[str] = []
    """On a pool run: the minted bugs whose rules include this certificate's rule."""


class SessionRow(BaseModel):
    """One planned item as it ended: a session's figures, or why it never ran."""

    run: int
    """Which run (index into `runs`)."""
    model: str
    runner: str = ""
    """Its agent."""
    entrant: str = ""
    """Its entrant's label, the `model` of its leaderboard row (state/entrants.py)."""
    agent_version: str | None = None
    label: str | None = None
    """'baseline (no model)' for a baseline's session."""
    session: int
    item: str
    status: str
    stop_reason: str | None
    stop_detail: str = ""
    model_calls: int = 0
    pred_calls: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    dollars: float = 0.0
    earlier_dollars: float = 0.0
    """What the item's earlier attempts cost (infrastructure failures, lost sessions)."""
    wall_seconds: float = 0.0
    steps: int | None = None
    """Steps of its trajectory, when the run has it."""
    finished_at: str | None = None
    """When its record was written (ISO 8601, UTC)."""
    certificates: int = 0
    accepted: int = 0
    rejected: int = 0
    inconclusive: int = 0
    bugs: list[str] = []
    """Distinct bugs this session's accepted certificates show (crashes apart)."""
    crashes: list[str] = []
    links: list[CertificateLink] = []
    trajectory: str | None = None
    """The trajectory file (relative link), when the run has it."""
    record: str
    """The item record (relative link)."""
    page: str | None = None
    """The session's own page (report/session_pages.py), relative to the report."""
    funnel: list[BugFunnel] = []
    """On a pool run: reached / triggered / certified for each minted bug (report/funnel.py)."""


class Pairwise(BaseModel):
    """Two models compared on their sessions: can the data tell them apart?"""

    a: str
    b: str
    sessions_a: int
    sessions_b: int
    with_bug_a: int
    with_bug_b: int
    separable: bool
    """False when even the most lopsided outcome would not be significant with these session counts."""
    min_p: float
    fisher_p: float | None
    fisher_p_holm: float | None
    mannwhitney_p: float | None
    mannwhitney_p_holm: float | None
    sentence: str


class Finding(BaseModel):
    """Identical certificates: one rule, one canonical source instance."""

    rule: str
    source_type: str
    source_sha256: str
    violations: list[str]
    certificates: int
    models: list[str]
    sessions: list[str]
    known_bugs: list[str] = []
    """The ids of the known-bug registry's entries for this rule (empty: not a known bug)."""
    origin: str | None = None
    """On a pool run: real, minted, unattributed or undecided (as CertificateLink.origin)."""
    minted_bugs: list[str] = []
    """On a pool run, when its origin is minted: the minted bugs it found."""
    links: list[str] = []
    """Relative links to the certificate files that show it."""
    pages: list[str] = []
    """The pages of its sessions, in the order of `sessions` (report/session_pages.py)."""


class RuleRow(BaseModel):
    """One bug (or crash): which models found it, in how many of their sessions."""

    bug: str
    rule: str
    crash: bool
    known: list[str]
    """Registry ids (empty: a candidate to report upstream)."""
    minted: list[str] = []
    """On a pool run: the minted bugs its certificates found."""
    real: bool = True
    """Some certificate of it is a bug of the pristine version (always, on the version's own build)."""
    sessions: dict[str, int]
    """Per model: sessions that found it (models that did not are absent)."""
    findings: int
    """Distinct source instances that show it."""

    @property
    def models(self) -> list[str]:
        return sorted(self.sessions)


class Undecided(BaseModel):
    """A certificate the verifier could not decide, even with the report's longer limits."""

    run: int
    item: str
    n: int
    model: str
    recorded: str
    """Its outcome in the run's record (accepted or inconclusive)."""
    reason: str


class Reverification(BaseModel):
    pred_version: str | None
    pred_sha256: str | None
    certificates: int
    """Accepted and inconclusive certificates in the records, all verified again."""
    distinct: int
    """Distinct certificates among them (each verified once)."""
    cpu_seconds: float | None = None
    """The CPU time each call of this verification may use (verify/reach.py: derived from the
    prompt's promise); an inconclusive answer is tried once more with `retry_factor` times it."""
    retry_factor: float | None = None
    retried: int = 0
    """Distinct certificates the first try left inconclusive, tried again with the longer limits."""
    inconclusive: list[Undecided] = []
    """Still undecided after the longer try: neither bugs nor false alarms."""
    pool: str | None = None
    """On a pool run: the pool (`Pool.label()`); `pred_sha256` is then its minted pred's."""
    pristine_sha256: str | None = None
    """On a pool run: the pristine pred every accepted certificate was verified on too."""
    pristine_certificates: int = 0
    """Distinct accepted certificates verified on the pristine build."""


class Method(BaseModel):
    """How the figures were computed, so that a reader can reproduce them."""

    rank_k: int
    """Models are ranked by Bugs@k at this k: the fewest sessions any ranked model ran."""
    interval: str = "Wilson score, 95%"
    bootstrap_seed: int
    bootstrap_resamples: int
    alpha: float
    registry_pred_version: str
    registry_size: int


class MintedBugRow(BaseModel):
    id: str
    rules: list[str]
    difficulty: float
    band: str


class PoolSummary(BaseModel):
    """The minted bug pool a board's runs stood on: the answer key's ids, rules and difficulties
    (never its diffs)."""

    digest: str
    label: str
    pred_version: str
    seed: int
    requested: int
    bugs: list[MintedBugRow]


LEADERBOARD_JSON = "leaderboard.json"
"""The file a Leaderboard is written to (report/leaderboard.py) and read from (report/frames.py models_df)."""


class Leaderboard(BaseModel):
    schema_version: Literal[2] = 2
    generated_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    runner: str
    fake: bool
    """A fake-runner run measures no model; every output says so."""
    method: Method
    models: list[ModelRow]
    pairwise: list[Pairwise]
    sessions: list[SessionRow]
    rules: list[RuleRow]
    findings: list[Finding]
    reverification: Reverification
    runs: list[RunManifest]
    pool: PoolSummary | None = None
    """The minted bug pool the runs stood on (merged runs share one); None: the version's own build."""


def run_labels(boards: list["Leaderboard"]) -> list[str]:
    """How a comparison names its runs, in order: each by the name given with --run-name, else its run id
    (`run n` for a leaderboard written before run ids), never by position alone. Two runs of one name
    are told apart by their ids, so no label stands for two runs."""
    labels = [board.runs[0].run_name or board.runs[0].run_id or f"run {n}" for n, board in enumerate(boards, 1)]
    for n, board in enumerate(boards):
        if labels.count(labels[n]) > 1:
            labels[n] = f"{labels[n]} ({board.runs[0].run_id or f'run {n + 1}'})"
    return labels


class Comparison(BaseModel):
    """`predbench report A B --compare`: each run's own leaderboard, side by side, never pooled."""

    schema_version: Literal[1] = 1
    generated_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    boards: list[Leaderboard]
    pairwise: list[Pairwise]
    """Every (run, model) against every other, named 'RUN (pred V): model' (RUN as run_labels says it)."""
