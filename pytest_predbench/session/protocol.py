"""The swap point: one agent session behind a small protocol.

The orchestration, the verifier and the reports see only these models; which agent program
ran a session is known to exactly one class (MiniSweRunner, OpenCodeRunner, FakeRunner, or yours).
"""

from enum import StrEnum
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel

from pytest_predbench.verify.certificate import Certificate
from pytest_predbench.verify.reach import COMMAND_TIMEOUT_S, SESSION_MEMORY_MIB


class SessionLimits(BaseModel):
    """Hard limits of one session, and how its model calls are made; identical for every model in
    a run (fairness) and recorded in the plan. Every field is a command-line option.

    The defaults are sized for real models: a measured real session (a frontier model through this
    harness) used 28 model calls and 57 of its 60 pred calls in 345 s, and wanted more; two later ones
    on pred 0.6.0 used 133 and 147 of 150 pred calls, the second with 16 of its 60 model calls left
    (44 used: 3.3 pred calls a model call, since a round trip is three). At that rate 60 model calls
    want about 200 pred calls, so neither limit binds long before the other. The pred-call and time
    limits are not specific to a model, so a runner without one uses them too.
    """

    dollars: float = 2.00
    """Hard ceiling: no model call starts unless its worst case still fits. A plan with a budget
    sets it (the model's cap / --sessions, or --session-budget); this default is for a session
    run without one, and affords the default call limit of a frontier model with prompt caching."""
    model_calls: int = 60
    pred_calls: int = 200
    wall_seconds: float = 1800.0
    call_timeout_s: float = 120.0
    max_output_tokens: int = 8192
    """Per call; room for a reasoning model's hidden tokens, which count against it."""
    command_timeout_s: float = COMMAND_TIMEOUT_S
    """The prompt's promise of brute force's reach, and the verifier's limits, derive from it."""
    call_retries: int = 3
    """Retries of one model call after a transient provider error (429, 5xx, timeout, dropped
    connection), with exponential back-off and jitter, within the session's wall time."""
    prompt_cache: bool = True
    """Ask the provider to cache the prompt prefix (cache-control breakpoints where the provider
    needs them); providers that cache automatically need nothing."""
    memory_mib: int = SESSION_MEMORY_MIB
    """Memory of all the session's processes together (its commands and its pred calls), enforced
    by the kernel (session/bounds.py); the verifier's calls get at least as much (verify/reach.py)."""
    processes: int = 256
    """How many processes the session may have at once, enforced by the kernel."""
    disk_mib: int = 1024
    """What the session's scratch and submission spool may hold together, enforced by the kernel."""
    cpu_cores: float | None = None
    """CPU time the session's processes may use together, in cores, enforced by the kernel's CPU
    controller (bounds.py: a quota, and a weight in proportion, so no session takes a neighbour's
    share). None: this machine's cores divided by the sessions it runs at once (the pytest-xdist
    workers), at least 1 (`bounds.cpu_share`); 0: no CPU bound."""
    unbounded: bool = False
    """Run even where the machine cannot enforce the bounds above (the preflight refuses
    otherwise); what was enforced is in each session's trajectory."""


class StopKind(StrEnum):
    FINISHED = "finished"
    """The model ran the finish command; the detail says how many certificates it submitted."""
    COST_LIMIT = "cost_limit"
    STEP_LIMIT = "step_limit"
    PRED_LIMIT = "pred_limit"
    TIME_LIMIT = "time_limit"
    FORMAT_ERRORS = "format_errors"
    INFRA_ERROR = "infra_error"
    INTERRUPTED = "interrupted"
    """Ctrl-C or SIGTERM ended the session: not a result (re-run on resume); what it spent is known."""
    ERROR = "error"


def exception_class(exc: BaseException) -> str:
    """The exception's full class name, as a StopReason records it."""
    return f"{type(exc).__module__}.{type(exc).__qualname__}"


def first_line(exc: BaseException) -> str:
    """The first line of the exception's message ("" when it has none): reasons stay one line."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else ""


class StopReason(BaseModel):
    kind: StopKind
    exception_class: str | None = None
    """For infra_error and error: the class of the exception that ended the session."""
    detail: str = ""

    @property
    def is_infra(self) -> bool:
        """Infrastructure failures are not results: recorded, never scored, re-run on resume."""
        return self.kind is StopKind.INFRA_ERROR


class Accounting(BaseModel):
    dollars: float = 0.0
    """As litellm prices the provider's reported usage (cache reads and writes, tiers, reasoning)."""
    prompt_tokens: int = 0
    """All prompt tokens, the cached and cache-written ones included."""
    cached_tokens: int = 0
    """Prompt tokens read from the provider's prompt cache (billed at its cache-read price)."""
    cache_write_tokens: int = 0
    """Prompt tokens written to the provider's prompt cache (billed at its cache-write price)."""
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    """The part of the completion tokens the model spent reasoning, when the provider says."""
    model_calls: int = 0
    """Answered calls (a retried call counts once)."""
    call_retries: int = 0
    """Attempts repeated after a transient provider error."""
    call_retry_seconds: float = 0.0
    """Time spent waiting before those attempts (back-off, or the provider's Retry-After)."""
    shell_actions: int = 0
    pred_calls: int = 0
    wall_seconds: float = 0.0


class PathStep(BaseModel):
    """One problem of a reduction path, as pred's bundle names it."""

    name: str
    variant: dict[str, str] = {}


class Reduction(BaseModel):
    """What a `pred reduce` call reduced, as the gateway snapshot it (session/reductions.py)."""

    instance_sha256: str
    """The input instance (canonical JSON); stored as <sha256>.json in the run's instances/ folder
    while the session's share of it lasts (absent past that: the path still counts as reached)."""
    path: list[PathStep]
    """Every problem of the bundle's path, casts included, source first."""


class PredCall(BaseModel):
    """One pred or pred-extract call as the gateway ran it (session/gateway.py)."""

    tool: str
    argv: list[str]
    """The arguments (the first 50, each cut to 200 characters)."""
    exit: int | None
    """None: killed (its command ended, its client went away, or it timed out)."""
    seconds: float
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    reduction: Reduction | None = None
    """For a `pred reduce` call that produced a bundle the gateway could read safely: its instance
    and path (session/reductions.py); None otherwise."""


class SessionEnv(BaseModel):
    """What a session may use: the pinned pred, the library source, and where to leave files."""

    pred_version: str
    """The version the session stands on (the plan's): its prompt names it and states its facts."""
    pred_path: str
    source_dir: str
    extractor_path: str = ""
    """pred-extract, for mapping target solutions back (empty: the session has none)."""
    workdir: str
    """A private scratch directory for this session (the harness creates it)."""
    trajectory_path: str
    """Where the runner saves the session's trajectory."""
    session_id: str = ""
    seed: int = 0
    progress_path: str = ""
    """Where the runner writes its figures so far after each step (session/progress.py; '': nowhere)."""
    instances_dir: str = ""
    """Where the gateway stores the instances of the session's `pred reduce` calls, content-addressed
    (session/reductions.py; '': nowhere, only their sha256 and paths are logged)."""


class SessionResult(BaseModel):
    runner: str
    """Which runner produced this ('mini-swe', 'fake', ...): fake results are labelled as such."""
    model: str
    certificates: list[Certificate] = []
    rejected_submissions: int = 0
    """Submissions refused at the shape check (answered to the model, never counted)."""
    accounting: Accounting = Accounting()
    stop: StopReason
    trajectory_path: str | None = None
    prompt_hash: str = ""
    pred_log: list[PredCall] = []
    """Every pred call the gateway booked for the session, in order (`accounting.pred_calls` is
    their number, the gateway's count)."""


class SessionInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM during a session. It carries the session's result (stop `interrupted`,
    with what was spent until then), so the harness settles the measured spend rather than the
    whole reservation, and goes on propagating, so the run stops."""

    def __init__(self, result: SessionResult):
        super().__init__()
        self.result = result


class AgentRunner(Protocol):
    """Run one session of `model` under `limits`; never raise for the model's or provider's faults
    (on Ctrl-C or SIGTERM, raise SessionInterrupted with what the session spent)."""

    name: str

    def run(self, env: SessionEnv, model: str, limits: SessionLimits) -> SessionResult: ...


def trajectory_file(env: SessionEnv) -> Path:
    path = Path(env.trajectory_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path
