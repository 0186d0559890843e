"""Runs that several hosts share, kept in PostgreSQL (state/pgstore.py): creating one, joining one.

    pytest bench_sessions -n 8 --store=URL --run-id=ID --models a,b --budget 2     # create it, and work
    pytest bench_sessions --store=URL --run-id=ID --models a,b --budget 2 --plan-only  # only create it
    pytest bench_sessions -n 8 --store=URL --join=ID                                # any host: join it

A host that joins takes every plan option from the stored run, rebuilds the plan with its own code
and environment (pred, prompt, packages) and works only when the digests agree: otherwise it
refuses, naming the first difference, so that no run mixes results of two setups. It then passes
its own preflight gates, reads the run once and audits it (as a resume does), reaps what gone
owners left (expired leases; dead processes of this host) and freezes the items finished so far.
Every host collects every item; the reservation is the claim, so an item another worker finished
or is running is skipped without a record (run/books.py). `--join` is also the resume: it runs
whatever has no terminal record, infrastructure failures included.

Nothing is written before the creating host's preflight gates passed; --plan-only writes only
the plan and the accounts (nothing runs and nothing is spent: each joining host passes its own
gates before it works).
"""

import math
import socket
import uuid

import pytest

from pytest_predbench.files import CorruptStateError
from pytest_predbench.options import LEASE_S, RENEW_S
from pytest_predbench.run import topup
from pytest_predbench.run.planning import build_plan, plan_options
from pytest_predbench.run.preflight import GateResult, PreflightEntry, models_to_run
from pytest_predbench.run.start import CONTROLLER, Preflight, RunState, preflight_only
from pytest_predbench.state.audit import audited_records
from pytest_predbench.state.pgstore import PgStore
from pytest_predbench.state.plan import Plan, PlanError, dropped_option, first_difference
from pytest_predbench.state.records import terminal_items
from pytest_predbench.state.rundir import RunDir, new_run_id
from pytest_predbench.state.scratch import make_scratch, reap_scratch


def _lease_options(config: pytest.Config) -> tuple[float, float]:
    lease, renew = config.getoption("predbench_lease"), config.getoption("predbench_lease_renew")
    lease = LEASE_S if lease is None else lease
    renew = RENEW_S if renew is None else renew
    if not (math.isfinite(lease) and lease > 0):
        raise pytest.UsageError(f"--lease must be a positive number of seconds; got {lease}")
    if not (math.isfinite(renew) and 0 < renew < lease / 2):
        raise pytest.UsageError(
            f"--lease-renew must be more than 0 and less than half of --lease ({lease}); got {renew}"
        )
    return lease, renew


def shared_store(config: pytest.Config) -> PgStore:
    """The store the options name, for the run they name (a new id when creating without --run-id);
    UsageError (one line) for options that do not go together."""
    join, run_id = config.getoption("predbench_join"), config.getoption("predbench_run_id")
    clashes = [
        ("--join", "--run-id", join and run_id),
        ("--join", "--plan-only", join and config.getoption("predbench_plan_only")),
        ("--store", "--resume-bench (a run in a store resumes with --join=ID)", config.getoption("predbench_resume")),
        ("--store", "--run-dir (a run in a store is written out with `predbench export`)", _run_dir(config)),
    ]
    for first, second, given in clashes:
        if given:
            raise pytest.UsageError(f"{first} and {second} do not go together")
    lease, _ = _lease_options(config)
    return PgStore(config.getoption("predbench_store"), join or run_id or new_run_id(), lease_seconds=lease)


def _run_dir(config: pytest.Config) -> str | None:
    return config.getoption("predbench_run_dir")


def _working_state(store: PgStore, plan: Plan, digest: str, *, resumed: bool, collect_only: bool) -> RunState:
    """The state the workers get; this host's scratch directory (trajectories, until they are kept in
    the store) is made only when the run works (and what killed invocations left of theirs removed),
    unless the caller chose one."""
    local = store.local.path
    if not (collect_only or store.local_chosen):
        reap_scratch()
        local = make_scratch(store.run_id)
    store.local = RunDir(local)
    if not collect_only:
        store.local.create()
    state = RunState(
        run_dir=str(local),
        plan=plan,
        digest=digest,
        done=[],
        invocation=uuid.uuid4().hex,
        resumed=resumed,
        store_url=store.url,
        run_id=store.run_id,
        lease_seconds=store.lease_seconds,
    )
    state._store = store
    return state


def _log_preflight(store: PgStore, state: RunState, gates: list[GateResult]) -> None:
    entry = PreflightEntry(invocation=state.invocation, gates=gates).model_dump(mode="json")
    store.log_preflight({**entry, "host": socket.gethostname()})


def create_shared(
    store: PgStore,
    plan: Plan,
    *,
    collect_only: bool = False,
    plan_only: bool = False,
    preflight: Preflight | None = None,
) -> RunState:
    """A new run of `plan` in the store; nothing is written before the preflight gates passed (none
    run for --plan-only, which runs nothing)."""
    state = _working_state(store, plan, plan.digest(), resumed=False, collect_only=collect_only or plan_only)
    if collect_only:
        return state
    gates = preflight(plan, plan.models) if preflight and not plan_only else []
    store.create(plan)
    if gates:
        _log_preflight(store, state, gates)
    return state


def _plan_here(store: PgStore, given: dict, join: str | None) -> Plan:
    """The plan this host would work on: the stored run's options under the given ones, or the given."""
    if join:
        given = {**store.plan_file().plan.options.model_dump(), **topup.split_caps(given)[0]}
    return build_plan(plan_options(given))


def join_shared(
    store: PgStore, given: dict, *, collect_only: bool = False, preflight: Preflight | None = None
) -> RunState:
    """The run in the store, joined with the options `given` over its recorded ones: the same plan
    digest, audited books, finished items frozen out."""
    recorded = store.plan_file()  # the first contact: a wrong URL, a server down or an unknown id fail here
    given, caps = topup.split_caps(given)
    if caps and topup.requested_raise(recorded.plan, caps, store.snapshot(retry=False).ledger, "") is not None:
        raise PlanError(
            f"--join refused: {topup.given_text(caps)}: raising the caps of a run kept in a store is not supported "
            "yet (a run directory's caps are raised with --resume-bench); join without it"
        )
    current = build_plan(plan_options({**recorded.plan.options.model_dump(), **given}))
    if current.digest() != recorded.digest:
        difference = first_difference(recorded.plan, current)
        raise PlanError(f"--join refused: {store.where} was planned differently: {difference}")
    dropped = dropped_option(recorded.plan, current, given, host_paths=True)
    if dropped:
        raise PlanError(f"--join refused: {dropped}; join without it")
    try:
        records = audited_records(store.snapshot(retry=False))
    except CorruptStateError as exc:
        raise CorruptStateError(f"--join refused: {exc}") from None
    state = _working_state(store, recorded.plan, recorded.digest, resumed=True, collect_only=collect_only)
    done = terminal_items(records)
    if not collect_only:
        gates = preflight(recorded.plan, models_to_run(recorded.plan, done)) if preflight else []
        if preflight:
            _log_preflight(store, state, gates)
        state.bookkeeper(CONTROLLER).reap()
    state.done = sorted(done)
    return state


def start_shared(config: pytest.Config, given: dict, *, collect_only: bool, preflight: Preflight) -> RunState:
    """Create or join the run the options name (see the module's docstring); --preflight-only runs
    the gates of the plan this host would work on, and exits."""
    store = shared_store(config)
    _, renew = _lease_options(config)
    if config.getoption("predbench_preflight_only"):
        preflight_only(config, lambda: _plan_here(store, given, config.getoption("predbench_join")))
    if config.getoption("predbench_join"):
        state = join_shared(store, given, collect_only=collect_only, preflight=preflight)
    else:
        plan_only = config.getoption("predbench_plan_only")
        state = create_shared(
            store, build_plan(plan_options(given)), collect_only=collect_only, plan_only=plan_only, preflight=preflight
        )
        if plan_only and not collect_only:
            store.close()
            print(
                f"created {store.where} (plan {state.digest[:12]}); "
                f"hosts join it with --store=URL --join={store.run_id}"
            )
            pytest.exit(f"{store.where}: created, nothing run (--plan-only)", returncode=0)
    state.renew_seconds = renew
    return state
