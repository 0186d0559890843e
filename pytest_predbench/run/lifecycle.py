"""The run around its items: the frozen state handed to the workers, the items collected from the
plan, the run's state read back at the end, the exit status, and everything released.

Under xdist the controller never collects: parametrization and the deselection of finished items
happen on the workers, from the state the controller froze at start-up and sent them
(pytest_configure_node), so every worker collects the same items in the same order.

In a run that hosts share (--store) the run exits non-zero while any planned item lacks a terminal
record, on whichever host it is running.
"""

import shutil

import pytest
from filelock import BaseFileLock

from pytest_predbench.files import CorruptStateError
from pytest_predbench.options import FIXTURE, WORKERINPUT_KEY
from pytest_predbench.run.context import BenchContext, item_key
from pytest_predbench.run.interrupts import interrupt_on_sigterm, restore_sigterm
from pytest_predbench.state.audit import audited_records
from pytest_predbench.state.store import StoreError

ITEMS_REMAIN = pytest.ExitCode.TESTS_FAILED
"""A shared run's exit status while any planned item lacks a terminal record: join again."""


class RunHooks:
    def __init__(self, bench: BenchContext, lock: BaseFileLock | None):
        self.bench = bench
        self.state = bench.state
        self.lock = lock
        self._sigterm = interrupt_on_sigterm()

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node) -> None:
        node.workerinput[WORKERINPUT_KEY] = self.state.model_dump_json()

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if FIXTURE in metafunc.fixturenames:
            keys = list(self.bench.planned)
            metafunc.parametrize(FIXTURE, keys, ids=keys, indirect=True)

    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        done = set(self.state.done)
        finished = [item for item in items if item_key(item) in done]
        if finished:
            config.hook.pytest_deselected(items=finished)
            items[:] = [item for item in items if item_key(item) not in done]

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        end = self.bench.end
        end.interrupted = exitstatus == pytest.ExitCode.INTERRUPTED
        if not self.bench.writes:
            return
        store = self.bench.store
        try:
            snapshot = store.snapshot()
            end.records = audited_records(snapshot)
        except (StoreError, CorruptStateError) as exc:  # one line in the summary, never a traceback
            end.unreadable = str(exc)
            session.exitstatus = exitstatus or pytest.ExitCode.TESTS_FAILED
            return
        end.ledger = snapshot.ledger
        store.rebuild_views(self.state.plan, end.records)
        remaining = [key for key in self.bench.planned if not (key in end.records and end.records[key].status.terminal)]
        if not remaining and exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
            end.nothing_left = True
            session.exitstatus = pytest.ExitCode.OK
        elif remaining and store.shared and exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = ITEMS_REMAIN  # running on another host, or to be run by the next join

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        restore_sigterm(self._sigterm)
        if self.bench.leases is not None:
            self.bench.leases.stop()
        self.bench.store.close()
        if self.lock is not None:
            self.lock.release()
        if self.bench.store.shared and self.bench.is_controller:
            shutil.rmtree(self.bench.store.local.path, ignore_errors=True)  # this host's scratch: kept in the store
