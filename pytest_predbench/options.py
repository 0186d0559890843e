"""The benchmark's command-line options, built from their one declaration (state/flags.py).

A plan option is a PlanOptions field: its option defaults to None, so "given" can be told from
"defaulted" (a resume takes the recorded plan and refuses any given option that would change it),
and its help quotes the default the plan or SessionLimits has. The options of one invocation are
the two tables below. Importing this module loads nothing of the benchmark; building the options
(pytest_addoption, in every pytest of the repo) imports the plan model and so pydantic, nothing of
the session stack (tests/test_plugin_usage.py).
"""

import types
import typing

import pytest

from pytest_predbench.state.flags import Flag

FIXTURE = "bench_session"
"""The fixture bench_sessions/ asks for: its parameter is the item's key."""
WORKERINPUT_KEY = "predbench"
"""Where the controller puts the frozen run state for the workers."""

INVOCATION_FLAGS = [
    Flag(
        ("--run-dir",),
        "run directory (default reports/<run id>); write --run-dir=DIR (pytest reads a bare DIR as a test path)",
        "DIR",
        dest="predbench_run_dir",
    ),
    Flag(
        ("--resume-bench",),
        "continue the last run (or --run-dir): run only the items without a terminal record",
        const=True,
        default=False,
        dest="predbench_resume",
    ),
    Flag(
        ("--preflight-only",),
        "run the preflight gates (pred, source, sandbox, one probe call per model), print one line "
        "per gate and exit 0 if all pass, 1 if not; nothing is run or written",
        const=True,
        default=False,
        dest="predbench_preflight_only",
    ),
    Flag(
        ("--infra-backoff",),
        "after a model's session ends in an infrastructure failure, its next launch waits S seconds, "
        "doubling with each further failure in a row (at most 60); 0: no wait (default {default:g})",
        "S",
        parse=float,
        default=2.0,
        dest="predbench_infra_backoff",
    ),
    Flag(
        ("--pause-after",),
        "after N infrastructure failures of a model in a row, its remaining items are skipped as "
        '"paused: provider failing" for this invocation (a resume runs them); 0: never (default {default})',
        "N",
        parse=int,
        default=3,
        dest="predbench_pause_after",
    ),
    Flag(
        ("--progress-every",),
        "while the run goes, print the per-model progress table (done, running, skipped, bugs, spend, "
        "ETA) at most every S seconds; 0: after every item (default {default:g})",
        "S",
        parse=float,
        default=30.0,
        dest="predbench_progress_every",
    ),
]
"""The options that steer one invocation and are no part of the plan."""

LEASE_S, RENEW_S = 300.0, 30.0
"""The defaults of --lease and --lease-renew (run/join.py reads them)."""

STORE_FLAGS = [
    Flag(
        ("--store",),
        "keep the run in this PostgreSQL database (postgresql://user@host:port/db), shared by every host "
        "that joins it; default: a run directory on this machine",
        "URL",
        dest="predbench_store",
    ),
    Flag(
        ("--run-id",),
        "with --store: create the run under this id (default: a new one, printed)",
        "ID",
        dest="predbench_run_id",
    ),
    Flag(
        ("--join",),
        "with --store: join run ID (on any host; also its resume): plan rebuilt here and checked against "
        "the run's digest, then the items no worker finished or holds are run",
        "ID",
        dest="predbench_join",
    ),
    Flag(
        ("--plan-only",),
        "with --store: create the run and exit, without working (hosts then --join it)",
        const=True,
        default=False,
        dest="predbench_plan_only",
    ),
    Flag(
        ("--lease",),
        "with --store: seconds a reservation stays claimed without renewal; a host silent for longer is "
        f"taken for gone and its sessions charged in full as lost (default {LEASE_S:g})",
        "S",
        parse=float,
        dest="predbench_lease",
    ),
    Flag(
        ("--lease-renew",),
        f"with --store: how often a worker renews its leases, less than half of --lease (default {RENEW_S:g})",
        "S",
        parse=float,
        dest="predbench_lease_renew",
    ),
]
"""A run that hosts share, kept in PostgreSQL (run/join.py)."""

STORE_ONLY = {flag.dest: flag.name for flag in STORE_FLAGS if flag.name != "--store"}
"""Options that mean something only for a run kept in a shared store (dest -> flag)."""


def plan_dest(field: str) -> str:
    return f"predbench_{field}"


def plan_flags() -> list[tuple[str, Flag]]:
    """Each plan option as (PlanOptions field, its Flag), in the order the plan declares them. The plan
    model is imported here, when pytest asks for the options, not when the plugin is imported."""
    from pytest_predbench.state.flags import flag_of
    from pytest_predbench.state.plan import PlanOptions

    return [(name, flag) for name, info in PlanOptions.model_fields.items() if (flag := flag_of(info))]


def plan_default(field: str, flag: Flag) -> object:
    """The default a plan option's help quotes, as the command line spells it (`on`/`off` for an on/off
    option): a session limit's is SessionLimits', not the plan's None."""
    from pytest_predbench.session.protocol import SessionLimits
    from pytest_predbench.state.plan import PlanOptions

    if flag.limit is not None:
        default = SessionLimits.model_fields[flag.limit].default
    else:
        default = PlanOptions.model_fields[field].default
    return ("on" if default else "off") if flag.on_off else default


def _value_type(field: str) -> type:
    """The field's type without None: what the command line's text is parsed as."""
    from pytest_predbench.state.plan import PlanOptions

    annotation = PlanOptions.model_fields[field].annotation
    if isinstance(annotation, types.UnionType):  # X | None
        (annotation,) = (a for a in typing.get_args(annotation) if a is not type(None))
    return typing.get_origin(annotation) or annotation


def _add(add, flag: Flag, dest: str, parse: type | None, default: object, shown: object) -> None:
    """One pytest option from a Flag; its help quotes `shown` where it says {default}."""
    kwargs: dict = dict(dest=dest, help=flag.help.format(default=shown))
    if flag.const is not None:
        kwargs.update(action="store_const", const=flag.const, default=default)
    elif flag.on_off:
        kwargs.update(choices=("on", "off"))
    else:
        kwargs.update(metavar=flag.metavar, action="append" if flag.repeat else "store", default=default)
        if parse in (int, float):
            kwargs.update(type=parse)
    add(*flag.names, **kwargs)


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("predbench", "predbench benchmark (pytest bench_sessions --models a,b)")
    for field, flag in plan_flags():
        _add(
            group.addoption, flag, plan_dest(field), _value_type(field), None, plan_default(field, flag)
        )  # None: not given
    for flag in INVOCATION_FLAGS + STORE_FLAGS:
        _add(group.addoption, flag, flag.dest, flag.parse, flag.default, flag.default)


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
    for field, flag in plan_flags():
        value = config.getoption(plan_dest(field))
        if value is None:
            continue
        if flag.on_off:
            value = value == "on"
        elif _value_type(field) is list and not flag.repeat:  # a comma list
            value = [m.strip() for m in str(value).split(",")] if str(value).strip() else []
        given[field] = value
    return given


def benchmark_requested(config: pytest.Config) -> bool:
    return bool(
        config.getoption("predbench_models") is not None
        or config.getoption("predbench_resume")
        or config.getoption("predbench_preflight_only")
        or config.getoption("predbench_join")
    )
