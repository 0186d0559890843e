"""A run stopped partway, as Ctrl-C or a killed controller leaves it, made deterministically.

The benchmark refuses pytest's ways of running part of its items (-k, --deselect, --lf: see
run/selection.py), so a test that needs a run with items still to do builds one here, in process,
with the harness's own code: the plan `pytest bench_sessions --runner fake --models ... --sessions N`
would build, started by start_new, and the chosen items reserved, run through BenchSession with the
FAKE runner, recorded and settled by the Bookkeeper exactly as a worker does. The other items never
started; `pytest --resume-bench --run-dir=DIR` runs them.
"""

from collections.abc import Callable
from pathlib import Path

from pytest_predbench.run.planning import build_plan, plan_options
from pytest_predbench.run.session import BenchSession, make_runner
from pytest_predbench.run.start import CONTROLLER, start_new
from pytest_predbench.state.audit import audited_records, read_snapshot
from pytest_predbench.state.plan import PlannedItem
from pytest_predbench.state.records import ItemStatus, rebuild_views
from pytest_predbench.state.rundir import RunDir


def partial_run(
    run_dir: Path, models: tuple[str, ...], sessions: int, done: Callable[[PlannedItem], bool], **options
) -> Path:
    """The fake-runner run of `models` x `sessions` in run_dir, with only the items `done` picks finished."""
    plan = build_plan(plan_options({"runner": "fake", "models": list(models), "sessions": sessions, **options}))
    run = RunDir(run_dir)
    state, lock = start_new(run, plan)
    try:
        books = state.bookkeeper(CONTROLLER)
        for item in plan.items():
            if not done(item):
                continue
            reservation = books.reserve(item)
            session = BenchSession(item, plan, run, reservation, make_runner(plan, item.agent))
            result = session.run()
            verdicts = session.verify()
            status = ItemStatus.FALSE_ALARM if session.false_alarms else ItemStatus.PASSED
            record = books.record(
                item,
                status,
                f"session finished ({result.stop.kind.value}); {len(verdicts)} certificate(s)",
                runner=result.runner,
                spent=result.accounting.dollars,
                reserved=reservation.dollars,
                reservation=reservation.id,
                result=result,
                verdicts=verdicts,
            )
            books.settle(reservation, record)
        rebuild_views(run, plan, audited_records(read_snapshot(run.path)))
    finally:
        lock.release()
    return run_dir
