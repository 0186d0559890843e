"""The plan of a run as plan.json records it, and its digest: what was asked for, and
everything a result depends on.

The digest covers the models, the sessions, the limits and caps, the agents (and the version of
each that is no package of `packages`), the pinned pred
(version and binary hash), the minted bug pool if any (by its digest), the prompt hash and the
installed package versions. A run
directory keeps its plan; `--resume-bench` rebuilds the plan from the current code and
environment (run/planning.py) and refuses to continue unless the digests agree, so one run
never mixes results of two different setups. The money caps may be raised later (run/topup.py):
each raise is kept in the plan's history (`raises`), outside the digest, and the caps in force are
`Plan.caps`; the planned budget in the digest never changes.
"""

import hashlib
import json
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Annotated, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, model_validator

from pytest_predbench.files import CorruptStateError, parse_model, read_model, write_text_atomic
from pytest_predbench.session import baseline
from pytest_predbench.session.fake import FakeSettings
from pytest_predbench.session.protocol import SessionLimits, StopKind
from pytest_predbench.state import money
from pytest_predbench.state.entrants import DEFAULT_AGENT, Entrant, entrants, package_version
from pytest_predbench.state.flags import Flag, flag_of
from pytest_predbench.verify import pin
from pytest_predbench.verify.environment import EnvRecord

DOLLAR_EPSILON = 1e-9
"""Float sums of dollars are compared with this slack; it is far below any real price."""
LEGACY_PRED_VERSION = "0.5.0"
"""What a plan recorded before there were versions ran on."""

Dollars = Annotated[float, Field(ge=0, allow_inf_nan=False)]
"""A sum of money as a plan or a ledger keeps it: finite and never below nothing. JSON has no inf or
NaN (pydantic writes them as null, which cannot be read back), and a NaN cap compares as room for
anything: so a value that is no amount of money is refused where it is read, one line naming it."""


class PlanError(Exception):
    """The requested plan is invalid or differs from the one recorded; the message is one line."""


class PlanOptions(BaseModel):
    """What was asked for on the command line; kept so that a resume rebuilds the same plan."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    """No option is inf or NaN (`--budget inf` would be written to plan.json as null)."""

    models: Annotated[list[str], Flag(("--models",), "comma list of litellm model ids, or demo/...", "A,B")] = []
    agents: Annotated[
        list[str],
        Flag(
            ("--agents", "--runner"),
            "comma list of the agents every model runs under: mini-swe (default), opencode (the installed agent, "
            "docs/agents.md), or fake alone (no model); --runner NAME is its one-agent spelling",
            "A,B",
        ),
    ] = [DEFAULT_AGENT]
    """`--agents` (`--runner`: one of them): every model runs under each (state/entrants.py). A plan
    recorded before there were agents says `runner`, read as its one agent."""
    sessions: Annotated[int, Flag(("--sessions",), "sessions per (agent, model) (default {default})", "N")] = 1
    budget: Annotated[float, Flag(("--budget",), "total budget (default {default:.2f})", "DOLLARS")] = 1.00
    model_budget: Annotated[
        float | None,
        Flag(
            ("--model-budget",),
            "per-entrant cap, an entrant being one (agent, model) pair (default: an equal share of --budget)",
            "DOLLARS",
        ),
    ] = None
    """Default: an equal share of `budget`."""
    session_budget: Annotated[
        float | None,
        Flag(("--session-budget",), "per-session cap (default: the per-entrant cap / --sessions)", "DOLLARS"),
    ] = None
    """Default: the model budget divided by the sessions (capped), SessionLimits' default (uncapped)."""
    budget_cap: Annotated[
        bool,
        Flag(
            ("--no-budget-cap",),
            "enforce no total or per-entrant cap (the contrast case); spend is still recorded",
            const=False,
        ),
    ] = True
    model_settings: Annotated[str | None, Flag(("--model-settings",), "model settings TOML (mini-swe)", "FILE")] = None
    call_timeout: Annotated[
        float | None,
        Flag(
            ("--call-timeout",),
            "timeout of every model call, in seconds (default {default:g}); a call that takes longer is infra",
            "S",
            limit="call_timeout_s",
        ),
    ] = None
    """Default: SessionLimits' call timeout; so for every limit below: SessionLimits' default."""
    max_model_calls: Annotated[
        int | None,
        Flag(("--max-model-calls",), "model calls per session (default {default})", "N", limit="model_calls", least=1),
    ] = None
    max_pred_calls: Annotated[
        int | None,
        Flag(
            ("--max-pred-calls",),
            "pred invocations per session, scripts' included (default {default})",
            "N",
            limit="pred_calls",
            least=0,
        ),
    ] = None
    session_seconds: Annotated[
        float | None,
        Flag(
            ("--session-seconds",),
            "wall time of a session, in seconds (default {default:g})",
            "S",
            limit="wall_seconds",
        ),
    ] = None
    command_timeout: Annotated[
        float | None,
        Flag(
            ("--command-timeout",),
            "timeout of each of the agent's shell commands, in seconds (default {default:g})",
            "S",
            limit="command_timeout_s",
        ),
    ] = None
    max_output_tokens: Annotated[
        int | None,
        Flag(
            ("--max-output-tokens",),
            "output tokens per model call, reasoning included (default {default})",
            "N",
            limit="max_output_tokens",
            least=1,
        ),
    ] = None
    call_retries: Annotated[
        int | None,
        Flag(
            ("--call-retries",),
            "retries of a model call after a rate limit, 5xx, timeout or dropped connection, with back-off, "
            "within the session's time (default {default}); a call still failing then is infra",
            "N",
            limit="call_retries",
            least=0,
        ),
    ] = None
    prompt_cache: Annotated[
        bool | None,
        Flag(
            ("--prompt-cache",),
            "ask providers to cache the prompt prefix (cache-control marks where needed; default {default})",
            on_off=True,
            limit="prompt_cache",
        ),
    ] = None
    session_memory: Annotated[
        int | None,
        Flag(
            ("--session-memory",),
            "memory of all a session's processes together, enforced by the kernel (default {default})",
            "MIB",
            limit="memory_mib",
            least=64,
        ),
    ] = None
    session_processes: Annotated[
        int | None,
        Flag(
            ("--session-processes",),
            "processes a session may have at once, enforced by the kernel (default {default})",
            "N",
            limit="processes",
            least=16,
        ),
    ] = None
    session_disk: Annotated[
        int | None,
        Flag(
            ("--session-disk",),
            "what a session's scratch and submission spool may hold together, enforced by the kernel "
            "(default {default})",
            "MIB",
            limit="disk_mib",
            least=1,
        ),
    ] = None
    session_cpu: Annotated[
        float | None,
        Flag(
            ("--session-cpu",),
            "CPU time a session's processes may use together, in cores, enforced by the kernel "
            "(default: this machine's cores / the -n workers, at least 1; 0: no CPU bound)",
            "CORES",
            limit="cpu_cores",
            least=0.1,
        ),
    ] = None
    unbounded: Annotated[
        bool | None,
        Flag(
            ("--unbounded",),
            "run even where this machine cannot enforce the session bounds above (the preflight refuses otherwise)",
            const=True,
            limit="unbounded",
        ),
    ] = None
    pred_version: Annotated[
        str | None,
        Flag(
            ("--pred-version",),
            f"the pred version the run stands on, one of verify/versions/ (default {pin.DEFAULT_VERSION}, the "
            "reference pin); "
            "built the first time it is asked for",
            "V",
        ),
    ] = None
    """The pred version (verify/pin.py); set in every plan made since there were versions. None only
    in a plan recorded before: those ran 0.5.0, and their digest stands without the field."""
    bug_pool: Annotated[
        str | None,
        Flag(
            ("--bug-pool",),
            "run on a minted bug pool (`predbench mint`): sessions read its mutated source and call its minted pred, "
            "and the verifier judges on its minted build; its pred version is the run's. Write --bug-pool=POOL",
            "POOL",
            digest=False,
        ),
    ] = None
    """The minted bug pool the run stands on (`--bug-pool`, verify/pool.py), as an absolute path: where
    this machine keeps it, so not in the digest; the pool itself is, by its digest (`Plan.pool`)."""
    run_name: Annotated[
        str | None,
        Flag(
            ("--run-name",),
            "a name for people, shown beside the run id in runs, status, compare and the data tables "
            "(not in the plan's digest)",
            "NAME",
            digest=False,
        ),
    ] = None
    """A name for people, shown beside the run id everywhere; not in the digest (it changes nothing
    the run measures)."""
    fake_cost: Annotated[
        float, Flag(("--fake-cost",), "fake runner: cost per session (default {default})", "DOLLARS")
    ] = FakeSettings().cost
    fake_cost_jitter: Annotated[
        float,
        Flag(
            ("--fake-cost-jitter",), "fake runner: cost drawn from cost +- jitter, seeded by the session id", "DOLLARS"
        ),
    ] = 0.0
    fake_seconds: Annotated[float, Flag(("--fake-seconds",), "fake runner: latency", "S")] = 0.0
    fake_certificates: Annotated[
        list[str],
        Flag(
            ("--fake-certificate",),
            "fake runner: a canned certificate every session submits (repeatable)",
            "FILE",
            repeat=True,
        ),
    ] = []
    fake_stop: Annotated[
        StopKind,
        Flag(
            ("--fake-stop",),
            "fake runner: how every session stops (default {default.value}; infra_error for an infrastructure failure)",
            "KIND",
        ),
    ] = StopKind.FINISHED

    @model_validator(mode="before")
    @classmethod
    def _one_runner(cls, values: object) -> object:
        """A plan recorded before there were agents names its one agent `runner`."""
        if isinstance(values, dict) and "runner" in values and "agents" not in values:
            values = {k: v for k, v in values.items() if k != "runner"} | {"agents": [values["runner"]]}
        return values


UNDIGESTED_OPTIONS = frozenset(
    name for name, field in PlanOptions.model_fields.items() if (flag := flag_of(field)) and not flag.digest
)
"""The options a plan records outside its digest (Flag.digest)."""


class Budget(BaseModel):
    capped: bool
    total: Dollars | None
    """None: no cap (--no-budget-cap); spend is still recorded."""
    per_model: Dollars | None
    per_session: Dollars
    """Every session starts only with exactly this much reserved, and runs under it as its hard limit."""


class CapRaise(BaseModel):
    """One raise of a run's money caps (`--resume-bench --budget D`), as the plan's history keeps it.

    The money caps bound what the run may spend; they are not what makes sessions comparable, so a
    raise leaves the plan's digest as it was. What is compared — every limit of a session, its own
    dollar cap included — never changes."""

    at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    invocation: str
    given: str
    """The options that raised it, as given (`--budget 2.0`)."""
    total_before: Dollars
    total: Dollars
    per_model_before: Dollars
    per_model: Dollars
    losses: dict[str, Dollars] = {}
    """What infrastructure failures, interrupts and lost sessions had cost each model by then."""


class PredInfo(BaseModel):
    version: str
    sha256: str
    source_sha256: str
    extractor_sha256: str
    """The extractor the verifier maps solutions back with (built on the same library version)."""
    path: str
    """Where this machine keeps it (not part of the digest: the bytes are)."""
    extractor_path: str = ""
    source_dir: str

    @classmethod
    def from_record(cls, record: EnvRecord) -> "PredInfo":
        return cls(
            version=record.pred_version,
            sha256=record.pred_sha256,
            source_sha256=record.source_sha256,
            extractor_sha256=record.extractor_sha256,
            path=record.pred_path,
            extractor_path=record.extractor_path,
            source_dir=record.source_dir,
        )


class PoolInfo(BaseModel):
    """The minted bug pool a run stands on, by what identifies it on any machine: its digest (which
    covers its version, seed, bugs, mutated source, diffs and certificates). Its minted build is the
    plan's `pred` (the minted pred's and extractor's sha256, the mutated source's digest)."""

    digest: str
    seed: int
    bugs: list[str]
    """The minted bugs' ids (minted-01, ...): what the run's recall is counted against."""


class ModelIdentity(BaseModel):
    """Exactly what a real runner calls and at what price (never the extra keyword arguments:
    they may hold credentials)."""

    call_name: str
    api_base: str | None
    input_cost_per_token: float
    output_cost_per_token: float
    cache_read_input_token_cost: float | None = None
    cache_creation_input_token_cost: float | None = None
    price_source: str
    demo_script_sha256: str | None = None
    """For a scripted model: the script it replays (a demo model), or runs (a baseline's probe)."""
    training_cutoff: date | None = None
    """From the model settings, when given: the report shows recall on the known bugs disclosed
    after it apart (none given: left out of the plan's digest, which a plan before it keeps)."""


class PlannedItem(NamedTuple):
    key: str
    """`<entrant label>-s<NN>`: the test id and, with '/' made safe, the record's file name."""
    model: str
    session: int
    agent: str = DEFAULT_AGENT
    """The runner of its session (a baseline's own for a baseline)."""

    @property
    def entrant(self) -> Entrant:
        return Entrant(self.agent, self.model)

    @property
    def account(self) -> str:
        """The ledger account it is booked to, and its row: its entrant's label."""
        return self.entrant.label


class Plan(BaseModel):
    options: PlanOptions
    budget: Budget
    limits: SessionLimits
    fake: FakeSettings | None
    """The fake runner's canned behaviour (certificates by content), None for a real runner."""
    model_settings_sha256: str | None
    model_identities: dict[str, ModelIdentity] = {}
    """For a real runner: every model resolved to a priced identity before anything runs."""
    pred: PredInfo | None
    """Required when certificates can be verified; recorded whenever an environment record exists.
    On a bug pool: its minted build."""
    pool: PoolInfo | None = None
    """The minted bug pool the run stands on (`--bug-pool`), None for the version's own build."""
    prompt_hash: str
    packages: dict[str, str | None]
    agent_versions: dict[str, str] = {}
    """The version of each agent of the plan that is no package of `packages` (opencode's pin)."""
    raises: list[CapRaise] = []
    """The history of the money caps: every raise since the run was planned (not in the digest)."""

    @model_validator(mode="after")
    def _caps_only_rise(self) -> "Plan":
        """The history of the caps is outside the digest, so it is checked here: each raise starts
        from the caps in force before it and lowers neither (state/money.py's rule); a history
        edited by hand to lower a cap, or to raise an uncapped run, is refused when it is read."""
        total, per_model = self.budget.total, self.budget.per_model
        for n, raised in enumerate(self.raises):
            if total is None or per_model is None:
                raise ValueError(f"raises[{n}]: a run planned without money caps has none to raise")
            started = (raised.total_before, raised.per_model_before)
            if any(abs(a - b) > DOLLAR_EPSILON for a, b in zip(started, (total, per_model), strict=True)):
                raise ValueError(f"raises[{n}]: starts from caps {started}, the caps then were {(total, per_model)}")
            try:
                money.raised_caps(total, per_model, raised.total, raised.per_model, DOLLAR_EPSILON)
            except money.CapError as exc:
                raise ValueError(f"raises[{n}]: {exc}") from None
            total, per_model = raised.total, raised.per_model
        return self

    @property
    def caps(self) -> Budget:
        """The money caps in force: the planned budget, or its last raise (the session cap never changes)."""
        if not self.raises:
            return self.budget
        last = self.raises[-1]
        return self.budget.model_copy(update={"total": last.total, "per_model": last.per_model})

    @property
    def models(self) -> list[str]:
        return self.options.models

    @property
    def agents(self) -> list[str]:
        return self.options.agents

    @property
    def entrants(self) -> list[Entrant]:
        return entrants(self.agents, self.models)

    @property
    def accounts(self) -> list[str]:
        """The ledger's accounts: one per entrant, by its label."""
        return [entrant.label for entrant in self.entrants]

    def entrant_of(self, account: str) -> Entrant | None:
        return next((e for e in self.entrants if e.label == account), None)

    def agent_version(self, agent: str) -> str | None:
        """The version of `agent` the plan ran: its package's, or the one recorded (None: unknown, or no
        agent program: the fake, a baseline)."""
        return package_version(agent, self.packages) or self.agent_versions.get(agent)

    @property
    def baselines(self) -> list[str]:
        return [model for model in self.models if baseline.is_baseline(model)]

    def content(self) -> dict:
        """What the digest covers: everything but where this machine keeps pred, and the raises of
        the money caps (the planned budget stays in it)."""
        exclude: dict = {"pred": {"path", "source_dir", "extractor_path"}, "raises": True}
        exclude["options"] = set(
            UNDIGESTED_OPTIONS
        )  # a name, where this machine keeps the pool (its digest is in `pool`)
        if self.options.pred_version is None:
            exclude["options"].add("pred_version")
        if self.pool is None:
            exclude["pool"] = True  # a plan recorded before there were pools keeps its digest
        if self.options.session_cpu is None:  # nor one recorded before there was a CPU bound
            exclude["options"].add("session_cpu")
        if self.limits.cpu_cores is None:  # each by its own value: a limit set by hand is in the digest
            exclude["limits"] = {"cpu_cores"}
        if not self.agent_versions:
            exclude["agent_versions"] = True  # nor one recorded before there were agents
        content = self.model_dump(mode="json", exclude=exclude)
        if len(self.agents) == 1:  # a plan of one agent keeps the digest it had when that was `runner`
            content["options"]["runner"] = content["options"].pop("agents")[0]
        for identity in content["model_identities"].values():
            if identity["training_cutoff"] is None:
                del identity["training_cutoff"]  # a plan recorded before cutoffs keeps its digest
        return content

    @property
    def pred_version(self) -> str:
        return self.options.pred_version or LEGACY_PRED_VERSION

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.content(), sort_keys=True).encode()).hexdigest()

    def items(self) -> list[PlannedItem]:
        """Sessions interleave entrants, so a budget running out hits every entrant at the same point."""
        width = max(2, len(str(self.options.sessions)))
        return [
            PlannedItem(f"{entrant.label}-s{n:0{width}d}", entrant.model, n, entrant.agent)
            for n in range(1, self.options.sessions + 1)
            for entrant in self.entrants
        ]


class PlanFile(BaseModel):
    """plan.json: the plan with its digest, re-checked on every read."""

    digest: str
    plan: Plan


def write_plan(path: Path, plan: Plan) -> None:
    write_text_atomic(path, plan_text(plan))


def plan_text(plan: Plan) -> str:
    """plan.json's content: the plan with its digest."""
    return PlanFile(digest=plan.digest(), plan=plan).model_dump_json(indent=2) + "\n"


def _checked(stored: PlanFile, where: object) -> PlanFile:
    if stored.plan.digest() != stored.digest:
        raise CorruptStateError(f"{where}: the plan does not match its digest (edited by hand?)")
    return stored


def parse_plan(text: str, where: object) -> PlanFile:
    """A recorded plan, validated and checked against its digest (CorruptStateError naming `where`)."""
    return _checked(parse_model(text, PlanFile, where), where)


def read_plan(path: Path) -> PlanFile:
    return _checked(read_model(path, PlanFile), path)


_caps_read: dict[Path, tuple[bytes, Budget]] = {}
"""Per plan file: the bytes last parsed, and the caps in force they hold."""


def read_caps(path: Path) -> Budget:
    """The caps in force of the plan recorded at `path` (the one place they are kept), parsed again
    only when the file's bytes changed since this process last read them."""
    path = Path(path)
    content = path.read_bytes()
    known = _caps_read.get(path)
    if known is not None and known[0] == content:
        return known[1]
    caps = _checked(parse_model(content, PlanFile, path), path).plan.caps
    _caps_read[path] = (content, caps)
    return caps


def _flatten(value: object, prefix: str = "") -> dict[str, object]:
    if isinstance(value, dict):
        flat: dict[str, object] = {}
        for key, inner in value.items():
            flat.update(_flatten(inner, f"{prefix}.{key}" if prefix else str(key)))
        return flat
    return {prefix: value}


def _spelled(plan: Plan) -> dict:
    """The digest's content with the agents as a list, however many (a refusal names them alike)."""
    content = plan.content()
    content["options"].pop("runner", None)
    content["options"]["agents"] = plan.agents
    return content


def dropped_option(recorded: Plan, current: Plan, given: dict, host_paths: bool = False) -> str | None:
    """The first option given that the digest does not cover (UNDIGESTED_OPTIONS) and that differs from
    what the run recorded, as '--flag (run: x, now: y)'; None when there is none. A resume works on the
    recorded plan, so such an option (`--run-name`) would otherwise be dropped without a word.
    `host_paths`: where this machine keeps a file (`--bug-pool`) may differ (another host joins)."""
    for name in sorted(UNDIGESTED_OPTIONS & set(given)):
        if host_paths and name == "bug_pool":
            continue
        old, new = getattr(recorded.options, name), getattr(current.options, name)
        if old != new:
            return f"{flag_of(PlanOptions.model_fields[name]).name} (run: {old!r}, now: {new!r}) is kept by the run"
    return None


def first_difference(recorded: Plan, current: Plan) -> str:
    """The first field that differs, as 'field (run: x, now: y)', for a one-line refusal; what was
    asked for comes before what follows from it."""
    old = _flatten(_spelled(recorded))
    new = _flatten(_spelled(current))
    keys = sorted(old.keys() | new.keys(), key=lambda k: (not k.startswith("options."), k))
    for key in keys:
        if old.get(key) != new.get(key):
            return f"{key} (run: {old.get(key)!r}, now: {new.get(key)!r})"
    return "nothing"
