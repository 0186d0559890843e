"""The benchmark's command-line options.

Every option defaults to None, so "given" can be told from "defaulted": a resume takes the
recorded plan and refuses any given option that would change it. The defaults live in
PlanOptions. Importing this module stays cheap (it runs in every pytest of the repo).
"""

import pytest

FIXTURE = "bench_session"
"""The fixture bench_sessions/ asks for: its parameter is the item's key."""
WORKERINPUT_KEY = "predbench"
"""Where the controller puts the frozen run state for the workers."""

PLAN_OPTIONS = {
    # dest -> PlanOptions field
    "predbench_models": "models",
    "predbench_sessions": "sessions",
    "predbench_budget": "budget",
    "predbench_model_budget": "model_budget",
    "predbench_session_budget": "session_budget",
    "predbench_no_budget_cap": "budget_cap",
    "predbench_agents": "agents",
    "predbench_model_settings": "model_settings",
    "predbench_fake_cost": "fake_cost",
    "predbench_fake_cost_jitter": "fake_cost_jitter",
    "predbench_fake_seconds": "fake_seconds",
    "predbench_fake_certificates": "fake_certificates",
    "predbench_fake_stop": "fake_stop",
    "predbench_call_timeout": "call_timeout",
    "predbench_max_model_calls": "max_model_calls",
    "predbench_max_pred_calls": "max_pred_calls",
    "predbench_session_seconds": "session_seconds",
    "predbench_command_timeout": "command_timeout",
    "predbench_max_output_tokens": "max_output_tokens",
    "predbench_call_retries": "call_retries",
    "predbench_prompt_cache": "prompt_cache",
    "predbench_session_memory": "session_memory",
    "predbench_session_processes": "session_processes",
    "predbench_session_disk": "session_disk",
    "predbench_session_cpu": "session_cpu",
    "predbench_unbounded": "unbounded",
    "predbench_pred_version": "pred_version",
    "predbench_bug_pool": "bug_pool",
    "predbench_run_name": "run_name",
}


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("predbench", "predbench benchmark (pytest bench_sessions --models a,b)")
    add = group.addoption
    add(
        "--models",
        dest="predbench_models",
        metavar="A,B",
        help="comma list of litellm model ids, or demo/...",
    )
    add(
        "--agents",
        "--runner",
        dest="predbench_agents",
        metavar="A,B",
        help="comma list of the agents every model runs under: mini-swe (default), opencode (the installed agent, "
        "docs/agents.md), or fake alone (no model); --runner NAME is its one-agent spelling",
    )
    add("--sessions", dest="predbench_sessions", type=int, metavar="N", help="sessions per (agent, model) (default 1)")
    add("--budget", dest="predbench_budget", type=float, metavar="DOLLARS", help="total budget (default 1.00)")
    add(
        "--model-budget",
        dest="predbench_model_budget",
        type=float,
        metavar="DOLLARS",
        help="per-entrant cap, an entrant being one (agent, model) pair (default: an equal share of --budget)",
    )
    add(
        "--session-budget",
        dest="predbench_session_budget",
        type=float,
        metavar="DOLLARS",
        help="per-session cap (default: the per-entrant cap / --sessions)",
    )
    add(
        "--no-budget-cap",
        dest="predbench_no_budget_cap",
        action="store_const",
        const=False,
        default=None,
        help="enforce no total or per-entrant cap (the contrast case); spend is still recorded",
    )
    add(
        "--model-settings",
        dest="predbench_model_settings",
        metavar="FILE",
        help="model settings TOML (mini-swe)",
    )
    add(
        "--run-dir",
        dest="predbench_run_dir",
        metavar="DIR",
        help="run directory (default reports/<run id>); write --run-dir=DIR (pytest reads a bare DIR as a test path)",
    )
    add(
        "--run-name",
        dest="predbench_run_name",
        metavar="NAME",
        help="a name for people, shown beside the run id in runs, status, compare and the data tables "
        "(not in the plan's digest)",
    )
    add(
        "--resume-bench",
        dest="predbench_resume",
        action="store_true",
        default=False,
        help="continue the last run (or --run-dir): run only the items without a terminal record",
    )
    add(
        "--call-timeout",
        dest="predbench_call_timeout",
        type=float,
        metavar="S",
        help="timeout of every model call, in seconds (default 120); a call that takes longer is infra",
    )
    add(
        "--max-model-calls",
        dest="predbench_max_model_calls",
        type=int,
        metavar="N",
        help="model calls per session (default 60)",
    )
    add(
        "--max-pred-calls",
        dest="predbench_max_pred_calls",
        type=int,
        metavar="N",
        help="pred invocations per session, scripts' included (default 150)",
    )
    add(
        "--session-seconds",
        dest="predbench_session_seconds",
        type=float,
        metavar="S",
        help="wall time of a session, in seconds (default 1800)",
    )
    add(
        "--command-timeout",
        dest="predbench_command_timeout",
        type=float,
        metavar="S",
        help="timeout of each of the agent's shell commands, in seconds (default 60)",
    )
    add(
        "--max-output-tokens",
        dest="predbench_max_output_tokens",
        type=int,
        metavar="N",
        help="output tokens per model call, reasoning included (default 8192)",
    )
    add(
        "--call-retries",
        dest="predbench_call_retries",
        type=int,
        metavar="N",
        help="retries of a model call after a rate limit, 5xx, timeout or dropped connection, with back-off, "
        "within the session's time (default 3); a call still failing then is infra",
    )
    add(
        "--prompt-cache",
        dest="predbench_prompt_cache",
        choices=("on", "off"),
        help="ask providers to cache the prompt prefix (cache-control marks where needed; default on)",
    )
    add(
        "--session-memory",
        dest="predbench_session_memory",
        type=int,
        metavar="MIB",
        help="memory of all a session's processes together, enforced by the kernel (default 4096)",
    )
    add(
        "--session-processes",
        dest="predbench_session_processes",
        type=int,
        metavar="N",
        help="processes a session may have at once, enforced by the kernel (default 256)",
    )
    add(
        "--session-disk",
        dest="predbench_session_disk",
        type=int,
        metavar="MIB",
        help="what a session's scratch and submission spool may hold together, enforced by the kernel (default 1024)",
    )
    add(
        "--session-cpu",
        dest="predbench_session_cpu",
        type=float,
        metavar="CORES",
        help="CPU time a session's processes may use together, in cores, enforced by the kernel "
        "(default: this machine's cores / the -n workers, at least 1; 0: no CPU bound)",
    )
    add(
        "--unbounded",
        dest="predbench_unbounded",
        action="store_const",
        const=True,
        default=None,
        help="run even where this machine cannot enforce the session bounds above (the preflight refuses otherwise)",
    )
    add(
        "--pred-version",
        dest="predbench_pred_version",
        metavar="V",
        help="the pred version the run stands on, one of verify/versions/ (default 0.6.0, the reference pin); "
        "built the first time it is asked for",
    )
    add(
        "--bug-pool",
        dest="predbench_bug_pool",
        metavar="POOL",
        help="run on a minted bug pool (`predbench mint`): sessions read its mutated source and call its minted pred, "
        "and the verifier judges on its minted build; its pred version is the run's. Write --bug-pool=POOL",
    )
    add(
        "--preflight-only",
        dest="predbench_preflight_only",
        action="store_true",
        default=False,
        help="run the preflight gates (pred, source, sandbox, one probe call per model), print one line "
        "per gate and exit 0 if all pass, 1 if not; nothing is run or written",
    )
    add(
        "--infra-backoff",
        dest="predbench_infra_backoff",
        type=float,
        default=2.0,
        metavar="S",
        help="after a model's session ends in an infrastructure failure, its next launch waits S seconds, "
        "doubling with each further failure in a row (at most 60); 0: no wait (default 2)",
    )
    add(
        "--pause-after",
        dest="predbench_pause_after",
        type=int,
        default=3,
        metavar="N",
        help="after N infrastructure failures of a model in a row, its remaining items are skipped as "
        '"paused: provider failing" for this invocation (a resume runs them); 0: never (default 3)',
    )
    add_store_options(add)
    add(
        "--progress-every",
        dest="predbench_progress_every",
        type=float,
        default=30.0,
        metavar="S",
        help="while the run goes, print the per-model progress table (done, running, skipped, bugs, spend, "
        "ETA) at most every S seconds; 0: after every item (default 30)",
    )
    add(
        "--fake-cost",
        dest="predbench_fake_cost",
        type=float,
        metavar="DOLLARS",
        help="fake runner: cost per session",
    )
    add(
        "--fake-cost-jitter",
        dest="predbench_fake_cost_jitter",
        type=float,
        metavar="DOLLARS",
        help="fake runner: cost drawn from cost +- jitter, seeded by the session id",
    )
    add("--fake-seconds", dest="predbench_fake_seconds", type=float, metavar="S", help="fake runner: latency")
    add(
        "--fake-certificate",
        dest="predbench_fake_certificates",
        action="append",
        metavar="FILE",
        help="fake runner: a canned certificate every session submits (repeatable)",
    )
    add(
        "--fake-stop",
        dest="predbench_fake_stop",
        metavar="KIND",
        help="fake runner: how every session stops (default finished; infra_error for an infrastructure failure)",
    )


def add_store_options(add) -> None:
    """A run that hosts share, kept in PostgreSQL (run/join.py)."""
    add(
        "--store",
        dest="predbench_store",
        metavar="URL",
        help="keep the run in this PostgreSQL database (postgresql://user@host:port/db), shared by every host "
        "that joins it; default: a run directory on this machine",
    )
    add(
        "--run-id",
        dest="predbench_run_id",
        metavar="ID",
        help="with --store: create the run under this id (default: a new one, printed)",
    )
    add(
        "--join",
        dest="predbench_join",
        metavar="ID",
        help="with --store: join run ID (on any host; also its resume): plan rebuilt here and checked against "
        "the run's digest, then the items no worker finished or holds are run",
    )
    add(
        "--plan-only",
        dest="predbench_plan_only",
        action="store_true",
        default=False,
        help="with --store: create the run and exit, without working (hosts then --join it)",
    )
    add(
        "--lease",
        dest="predbench_lease",
        type=float,
        metavar="S",
        help="with --store: seconds a reservation stays claimed without renewal; a host silent for longer is "
        "taken for gone and its sessions charged in full as lost (default 300)",
    )
    add(
        "--lease-renew",
        dest="predbench_lease_renew",
        type=float,
        metavar="S",
        help="with --store: how often a worker renews its leases, less than half of --lease (default 30)",
    )


STORE_ONLY = {
    "predbench_join": "--join",
    "predbench_run_id": "--run-id",
    "predbench_plan_only": "--plan-only",
    "predbench_lease": "--lease",
    "predbench_lease_renew": "--lease-renew",
}
"""Options that mean something only for a run kept in a shared store (dest -> flag)."""


def check_store_options(config: pytest.Config) -> None:
    """UsageError (one line, before anything is written) for an empty --store (an unset variable) or
    an option of a shared run without --store: ignored, --plan-only would run, and spend on, the whole
    benchmark on this machine alone."""
    store = config.getoption("predbench_store")
    if store is not None and not store.strip():
        raise pytest.UsageError(
            "--store is empty (an unset variable?): give the PostgreSQL URL, postgresql://user@host:port/database"
        )
    given = [flag for dest, flag in STORE_ONLY.items() if config.getoption(dest) not in (None, False)]
    if store is None and given:
        raise pytest.UsageError(
            f"{' and '.join(given)} need{'s' if len(given) == 1 else ''} --store=URL (a run that hosts share, kept in "
            "PostgreSQL); nothing was run"
        )


def given_plan_options(config: pytest.Config) -> dict[str, object]:
    """The plan options given on the command line, as PlanOptions fields."""
    given: dict[str, object] = {}
    for dest, field in PLAN_OPTIONS.items():
        value = config.getoption(dest)
        if value is None:
            continue
        if field in ("models", "agents"):
            value = [m.strip() for m in str(value).split(",")] if str(value).strip() else []
        elif field == "prompt_cache":
            value = value == "on"
        given[field] = value
    return given


def benchmark_requested(config: pytest.Config) -> bool:
    return bool(
        config.getoption("predbench_models") is not None
        or config.getoption("predbench_resume")
        or config.getoption("predbench_preflight_only")
        or config.getoption("predbench_join")
    )
