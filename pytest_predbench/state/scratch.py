"""This host's scratch directory for a run kept in a shared store: where its sessions write their
trajectories until the store keeps them (state/pgstore.py copies each one in as its item settles).

One per invocation that works on the run, in the system's temporary directory, named after the run
and the process that made it (pid and start time), and removed when that invocation ends. A SIGKILL
runs no exit path, so the next invocation on this host that works on a shared run first removes the
scratch directories whose maker is provably gone (state/liveness.py: no such pid, or another
process under it); one whose maker runs, or cannot be judged, is left alone.
"""

import re
import shutil
import tempfile
from pathlib import Path

from pytest_predbench.state.liveness import Owner, boot_id, current_owner, owner_gone

PREFIX = "predbench-"
_NAME = re.compile(r"^predbench-.+-(?P<pid>\d+)\.(?P<ticks>\d+)-[a-z0-9_]{8}$")  # mkdtemp adds 8 of these


def make_scratch(run_id: str, parent: Path | None = None) -> Path:
    """A new scratch directory for run `run_id`, named after this process."""
    owner = current_owner()
    maker = f"{owner.pid}.{owner.start_ticks}" if owner.start_ticks is not None else f"{owner.pid}"  # never reaped
    return Path(tempfile.mkdtemp(prefix=f"{PREFIX}{run_id}-{maker}-", dir=parent))


def maker_of(path: Path) -> Owner | None:
    """The process a scratch directory is named after (on this host, this boot), or None when the
    name is not a scratch directory's."""
    match = _NAME.match(path.name)
    if match is None:
        return None
    owner = current_owner()
    return Owner(host=owner.host, boot_id=boot_id(), pid=int(match["pid"]), start_ticks=int(match["ticks"]))


def reap_scratch(parent: Path | None = None) -> list[Path]:
    """Remove the scratch directories (in `parent`, default the temporary directory) whose maker is
    provably gone; the ones removed."""
    parent = Path(parent or tempfile.gettempdir())
    removed = []
    for path in parent.glob(f"{PREFIX}*"):
        maker = maker_of(path)
        if maker is not None and path.is_dir() and not path.is_symlink() and owner_gone(maker) is True:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed
