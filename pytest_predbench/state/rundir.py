"""Where a run keeps its state: one directory, outside .pytest_cache, that survives any crash.

plan.json            the plan and its digest (written last when a run starts: its presence marks a run)
ledger.json          the budget ledger
preflight.json       the preflight gates each invocation passed, and what their probes cost
items/<item>.json    one record per item, written by the worker that ran it
certificates/<item>/NN.json, NN.verdict.json
                     each certificate the session submitted, and the verifier's verdict on it,
                     written with the item's record (state/certificates.py)
results/<model>.jsonl, checkpoint.json   views rebuilt from items/ by the controller
trajectories/        what each session did
progress/<item>.json a running session's figures so far (session/progress.py), for the live table
instances/<sha256>.json   the instances the sessions' `pred reduce` calls reduced, content-addressed
                     (session/reductions.py; the minted bugs' funnel re-runs them, report/funnel.py)

Every path a file of the run holds that points into the run is relative to the run directory,
so a copied, moved or zipped run still links up (`RunDir.relative`).
"""

import time
import uuid
from pathlib import Path

from filelock import FileLock


def safe_name(name: str) -> str:
    """A model id or item key as a file name: 'openai/gpt-x-s01' -> 'openai__gpt-x-s01'."""
    return name.replace("/", "__")


def certificate_name(key: str, n: int) -> str:
    """Where the n-th certificate (from 1) the item's session submitted is kept, relative to the run
    directory: the name a record lists, whether or not the file is written yet (a shared store
    writes it on export)."""
    return f"certificates/{safe_name(key)}/{n:02d}.json"


def verdict_name(key: str, n: int) -> str:
    """Where the verifier's verdict on the n-th certificate is kept, relative to the run directory."""
    return f"certificates/{safe_name(key)}/{n:02d}.verdict.json"


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]


class RunDir:
    def __init__(self, path: Path):
        self.path = Path(path).resolve()

    @classmethod
    def named(cls, name: str) -> "RunDir":
        """The layout of a run kept elsewhere (a database), under `name`: how messages name its
        parts, as they would be named once exported to a directory."""
        run = cls.__new__(cls)
        run.path = Path(name)
        return run

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    @property
    def plan(self) -> Path:
        return self.path / "plan.json"

    @property
    def ledger(self) -> Path:
        return self.path / "ledger.json"

    @property
    def preflight(self) -> Path:
        return self.path / "preflight.json"

    @property
    def items(self) -> Path:
        return self.path / "items"

    @property
    def results(self) -> Path:
        return self.path / "results"

    @property
    def checkpoint(self) -> Path:
        return self.path / "checkpoint.json"

    @property
    def trajectories(self) -> Path:
        return self.path / "trajectories"

    @property
    def instances(self) -> Path:
        return self.path / "instances"

    @property
    def certificates(self) -> Path:
        return self.path / "certificates"

    def item_record(self, key: str) -> Path:
        return self.items / f"{safe_name(key)}.json"

    def results_file(self, model: str) -> Path:
        return self.results / f"{safe_name(model)}.jsonl"

    def trajectory(self, key: str) -> Path:
        return self.trajectories / f"{safe_name(key)}.traj.json"

    def progress(self, key: str) -> Path:
        """A running session's figures so far, written by its worker after each step."""
        return self.path / "progress" / f"{safe_name(key)}.json"

    def certificate_dir(self, key: str) -> Path:
        return self.certificates / safe_name(key)

    def certificate_file(self, key: str, n: int) -> Path:
        """The n-th certificate (from 1) the item's session submitted."""
        return self.path / certificate_name(key, n)

    def verdict_file(self, key: str, n: int) -> Path:
        """The verifier's verdict on the n-th certificate."""
        return self.path / verdict_name(key, n)

    def relative(self, path: Path | str) -> str | None:
        """`path` relative to the run directory (POSIX form), or None when it lies outside it."""
        path = Path(path)
        if not path.is_absolute():
            path = self.path / path
        try:
            return path.resolve().relative_to(self.path).as_posix()
        except ValueError:
            return None

    def inside(self, relative: str) -> Path | None:
        """The file a relative path of the run names, or None when it is absolute or leaves the run."""
        if Path(relative).is_absolute():
            return None
        path = (self.path / relative).resolve()
        return path if path == self.path or self.path in path.parents else None

    def state_lock(self) -> FileLock:
        """Guards the ledger and the item records together: an item settles in one locked step."""
        return FileLock(str(self.path / ".state.lock"))

    def controller_lock(self) -> FileLock:
        """Held by the pytest controller for the whole run: two runs never drive one directory."""
        return FileLock(str(self.path / ".controller.lock"), blocking=False)

    def create(self) -> None:
        for directory in (self.items, self.results, self.trajectories, self.certificates):
            directory.mkdir(parents=True, exist_ok=True)
