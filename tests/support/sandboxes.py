"""A session's sandbox for the sandbox, gateway and bounds tests: built as every session builds it."""

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from pytest_predbench.session.protocol import SessionLimits
from pytest_predbench.session.sandbox import Sandbox
from pytest_predbench.session.submission import Spool, channel_sandbox
from pytest_predbench.verify.environment import EnvRecord


def session_channel(
    record: EnvRecord, state_dir: Path, snapshots: Path | None = None, **limits
) -> tuple[Sandbox, Spool]:
    """channel_sandbox with the recorded pred and extractor, its state under `state_dir` (`snapshots`:
    where its gateway stores reduced instances); the caller closes the sandbox."""
    return channel_sandbox(
        pred_path=Path(record.pred_path),
        extractor_path=Path(record.extractor_path),
        source_dir=Path(record.source_dir),
        state_dir=state_dir,
        limits=SessionLimits(**limits),
        snapshots=snapshots,
    )


SHAPE_ONLY_CERT = {
    "violation": "suboptimal_extraction",
    "source": {"type": "T", "variant": {}, "data": {}},
    "target": {"type": "U", "variant": {}, "data": {}},
    "target_solution": [0],
    "source_solution": [1],
    "better_source_solution": [0],
}
"""A certificate the spool's shape check accepts (no rule behind it: the spool never verifies)."""


@contextmanager
def sandboxes(record: EnvRecord, root: Path) -> Iterator[Callable[..., Sandbox]]:
    """`build(name, **limits)`: a session's sandbox under `root / name`; every one built is closed at the end."""
    made: list[Sandbox] = []

    def build(name: str, **limits) -> Sandbox:
        sandbox, _ = session_channel(record, root / name, **limits)
        made.append(sandbox)
        return sandbox

    try:
        yield build
    finally:
        for sandbox in made:
            sandbox.close()


@contextmanager
def snapshot_sandbox(record: EnvRecord, root: Path) -> Iterator[Sandbox]:
    """A session's sandbox whose gateway stores its reduce snapshots in `root`/instances."""
    made, _ = session_channel(record, root / "state", snapshots=root / "instances")
    try:
        yield made
    finally:
        made.close()


def reduce_calls(sandbox: Sandbox, command: str, timeout: float = 60) -> tuple[list, object]:
    """The `pred reduce` calls the gateway logged for `command` (no pred-call quota), and the run's
    result; the command must end within `timeout` (the gateway never holds it past that)."""
    sandbox.set_pred_quota(None)
    started = time.monotonic()
    out = sandbox.run(command, timeout=timeout)
    assert time.monotonic() - started < timeout, out.output
    return [call for call in sandbox.take_pred_log() if call.argv[:1] == ["reduce"]], out
