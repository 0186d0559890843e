"""A session's sandbox for the sandbox, gateway and bounds tests: built as every session builds it."""

from pathlib import Path

from pytest_predbench.session.protocol import SessionLimits
from pytest_predbench.session.sandbox import Sandbox
from pytest_predbench.session.submission import Spool, channel_sandbox
from pytest_predbench.verify.environment import EnvRecord


def session_channel(record: EnvRecord, state_dir: Path, **limits) -> tuple[Sandbox, Spool]:
    """channel_sandbox with the recorded pred and extractor, its state under `state_dir`; the
    caller closes the sandbox."""
    return channel_sandbox(
        pred_path=Path(record.pred_path),
        extractor_path=Path(record.extractor_path),
        source_dir=Path(record.source_dir),
        state_dir=state_dir,
        limits=SessionLimits(**limits),
    )
