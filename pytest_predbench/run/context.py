"""What the benchmark's three plugins share in one process: the frozen run state, the store, the
planned items, and, on the controller, what the run's end found (RunEnd)."""

from dataclasses import dataclass, field

import pytest

from pytest_predbench.options import FIXTURE
from pytest_predbench.run.lease import LeaseKeeper
from pytest_predbench.run.start import RunState
from pytest_predbench.state.ledger import Ledger
from pytest_predbench.state.plan import PlannedItem
from pytest_predbench.state.records import ItemRecord
from pytest_predbench.state.store import Store


def item_key(item: pytest.Item) -> str | None:
    """The planned item a test item runs (its parameter), None for any other test."""
    callspec = getattr(item, "callspec", None)
    return callspec.params.get(FIXTURE) if callspec is not None else None


@dataclass
class RunEnd:
    """What the controller read at the end of the invocation, for the summary."""

    records: dict[str, ItemRecord] = field(default_factory=dict)
    ledger: Ledger | None = None
    unreadable: str = ""
    """Why the run's state could not be read at the end (the store did not answer, a file is unsound), if so."""
    nothing_left: bool = False
    interrupted: bool = False


class BenchContext:
    def __init__(self, config: pytest.Config, state: RunState):
        self.config = config
        self.state = state
        self.workerinput: dict | None = getattr(config, "workerinput", None)
        self.store: Store = state.store()
        self.planned: dict[str, PlannedItem] = {item.key: item for item in state.plan.items()}
        self.leases = LeaseKeeper(self.store, state.lease_seconds, state.renew_seconds) if self.store.shared else None
        self.end = RunEnd()

    @property
    def is_controller(self) -> bool:
        return self.workerinput is None

    @property
    def writes(self) -> bool:
        """Only the controller writes the views, and nothing is written under --collect-only."""
        return self.is_controller and not self.config.option.collectonly
