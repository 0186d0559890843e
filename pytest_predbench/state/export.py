"""Writing a run kept in a shared store out as a run directory, in today's format.

`predbench report` and its publication gate read run directories; an exported run is one, so
they run on it unchanged, and the audit (state/audit.py) checks it as it checks any other. The
export is written from one consistent read of the store, into a new directory beside the
target, and only then moved into place: a reader never sees half an export, and an export
interrupted midway leaves the target as it was.

The target must be new, empty, or an earlier export of the same run (export.json says whose):
an export never overwrites another run's directory.
"""

import json
import os
import shutil
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, Field

from pytest_predbench.files import CorruptStateError, read_model, write_model, write_text_atomic
from pytest_predbench.state.ledger import Ledger
from pytest_predbench.state.plan import PlanFile
from pytest_predbench.state.records import ItemRecord, rebuild_views, write_files
from pytest_predbench.state.rundir import RunDir

MARKER = "export.json"


class ExportMark(BaseModel):
    """export.json: which run of which store this directory was written from, and when."""

    run_id: str
    store: str
    """The store's URL without its password."""
    digest: str
    exported_at: datetime = Field(default_factory=lambda: datetime.now(UTC))


@dataclass
class StoredRun:
    """Everything a run holds, as one consistent read of its store."""

    plan_text: str
    """plan.json's content, as it was stored."""
    plan_file: PlanFile
    ledger: Ledger
    records: list[ItemRecord]
    preflight: list[dict]
    """Each invocation's preflight entry (run/preflight.py's PreflightEntry, as JSON)."""
    trajectories: dict[str, bytes]
    instances: dict[str, bytes]
    """The instances the sessions' `pred reduce` calls reduced, by sha256 (instances/<sha256>.json)."""
    now: datetime
    """The store's clock at the read."""


def _check_target(target: Path, mark: ExportMark) -> None:
    if not target.exists():
        return
    if not target.is_dir():
        raise CorruptStateError(f"{target}: exists and is not a directory; give a new directory to export into")
    if not any(target.iterdir()):
        return
    try:
        earlier = read_model(target / MARKER, ExportMark)
    except FileNotFoundError:
        raise CorruptStateError(f"{target}: not empty and not an export; give a new directory to export into") from None
    if (earlier.run_id, earlier.digest) != (mark.run_id, mark.digest):
        raise CorruptStateError(f"{target}: holds an export of run {earlier.run_id}, not of run {mark.run_id}")


def write_run_dir(target: Path, mark: ExportMark, stored: StoredRun) -> RunDir:
    """The run as a directory at `target` (see the module's docstring)."""
    target = Path(target).resolve()
    _check_target(target, mark)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = RunDir(target.parent / f".{target.name}.export-{uuid.uuid4().hex[:8]}")
    try:
        staging.create()
        write_text_atomic(staging.plan, stored.plan_text)
        write_text_atomic(staging.ledger, stored.ledger.text())
        if stored.preflight:
            write_text_atomic(staging.preflight, json.dumps({"entries": stored.preflight}, indent=2) + "\n")
        for record in stored.records:
            write_files(staging, record)
            write_model(staging.item_record(record.item), record)
        for item, content in stored.trajectories.items():
            staging.trajectory(item).write_bytes(content)
        if stored.instances:
            staging.instances.mkdir()
        for sha, content in stored.instances.items():
            (staging.instances / f"{sha}.json").write_bytes(content)  # the schema checked the name's shape
        rebuild_views(staging, stored.plan_file.plan, {record.item: record for record in stored.records})
        write_model(staging.path / MARKER, mark)
        _swap(staging.path, target)
    except BaseException:
        shutil.rmtree(staging.path, ignore_errors=True)
        raise
    return RunDir(target)


def _swap(staging: Path, target: Path) -> None:
    """Move the finished export into place, replacing an earlier export of the same run."""
    if not target.exists():
        os.rename(staging, target)
        return
    old = target.parent / f".{target.name}.old-{uuid.uuid4().hex[:8]}"
    os.rename(target, old)
    os.rename(staging, target)
    shutil.rmtree(old, ignore_errors=True)
