"""The benchmark while it runs: three plugins, registered side by side only when the benchmark is
being run, each one concern — as pytest-xdist registers its TerminalDistReporter beside DSession.

- `items.py` (ItemHooks): one item's books — reserve before any fixture (no room: skip, reason
  budget), the session under its lease, the record and the settlement in one locked step.
- `terminal.py` (TerminalHooks): what people see — the preflight header, the status letters, the
  live progress table, the summary.
- `lifecycle.py` (RunHooks): the run around its items — the frozen state sent to the workers,
  collection from the plan, the run's state read back at the end, the exit status, release.

They share one BenchContext (context.py): the frozen state, the store, the planned items, and the
end of the run as the controller read it.
"""

import pytest
from filelock import BaseFileLock

from pytest_predbench.run.context import BenchContext
from pytest_predbench.run.items import ItemHooks
from pytest_predbench.run.lifecycle import RunHooks
from pytest_predbench.run.preflight import GateResult
from pytest_predbench.run.start import RunState
from pytest_predbench.run.terminal import TerminalHooks


def register(
    config: pytest.Config,
    name: str,
    state: RunState,
    lock: BaseFileLock | None = None,
    preflight: list[GateResult] | None = None,
) -> None:
    """Register the three plugins; the item hooks under `name` (the bench_session fixture's)."""
    bench = BenchContext(config, state)
    config.pluginmanager.register(RunHooks(bench, lock), f"{name}-lifecycle")
    config.pluginmanager.register(TerminalHooks(bench, preflight or []), f"{name}-terminal")
    config.pluginmanager.register(ItemHooks(bench), name)
