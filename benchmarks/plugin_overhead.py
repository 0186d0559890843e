"""Plugin overhead: 1,000 items through the predbench plugin with a zero-cost FAKE runner, against
the same parametrized test without the plugin. Target: at most 5 ms per item.

    python -m benchmarks.plugin_overhead [--repeat 3] [--sessions 500]

Plugin side: `pytest bench_sessions --runner fake --fake-cost 0 --models m/a,m/b --sessions 500`,
one process, so every item is reserved, run, recorded and settled in the ledger (with the
fsyncs that make that crash-safe). Bare side: a test module with one test parametrized over the
same 1,000 ids doing nothing, in the same pytest with the plugin disabled (`-p no:predbench`).
Per-item overhead is the difference of the two wall times divided by the number of items, so
the plugin's fixed costs (plan, run directory, summary) are charged to the items too.

Each item makes three durable writes (the reservation, the item record, the settlement: each
fsync'd so that a crash loses neither money nor a result), so the latency of one durable write on
this disk, measured beside the runs, is a floor under the figure: on a disk busy with other work
it alone can exceed the target.
"""

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from pydantic import BaseModel

from benchmarks.figures import Figure, interleaved, median, paired, parser, repetitions, report, rounded, run_pytest
from pytest_predbench.state.records import ItemStatus
from tests.support.acceptance import RunView

TARGET_MS = 5.0
MODELS = ("m/a", "m/b")


def item_ids(sessions: int) -> list[str]:
    """The plugin's own test ids for this plan, in its order (models interleaved)."""
    width = max(2, len(str(sessions)))
    return [f"{model}-s{n:0{width}d}" for n in range(1, sessions + 1) for model in MODELS]


def write_bare_module(directory: Path, ids: list[str]) -> Path:
    module = directory / "test_bare.py"
    module.write_text(
        "import pytest\n\n\n"
        f"@pytest.mark.parametrize('bench_session', {ids!r})\n"
        "def test_session(bench_session):\n"
        "    pass\n"
    )
    return module


class Runs:
    """Numbered run directories in one scratch directory (each plugin run needs a fresh one)."""

    def __init__(self, scratch: Path):
        self.scratch = scratch
        self.made: list[Path] = []

    def next(self) -> Path:
        self.made.append(self.scratch / f"run-{len(self.made) + 1}")
        return self.made[-1]


def plugin_args(run_dir: Path, sessions: int) -> list[str]:
    return [
        "bench_sessions",
        "--runner",
        "fake",
        "--fake-cost",
        "0",
        "--models",
        ",".join(MODELS),
        "--sessions",
        str(sessions),
        f"--run-dir={run_dir}",
        "-q",
    ]


FSYNC_COUNTER = '''"""Counts this pytest process's fsyncs (benchmarks/plugin_overhead.py): cheap enough to leave on."""
import os

_real_fsync, _count = os.fsync, [0]


def _counting_fsync(fd):
    _count[0] += 1
    return _real_fsync(fd)


os.fsync = _counting_fsync


def pytest_unconfigure(config):
    with open(os.environ["PREDBENCH_FSYNC_COUNT"], "w") as out:
        out.write(str(_count[0]))
'''


class FsyncCounter:
    """A tiny pytest plugin (-p predbench_fsync_counter) that writes how many fsyncs a run made."""

    MODULE = "predbench_fsync_counter"

    def __init__(self, scratch: Path):
        self.directory = scratch / "counter"
        self.directory.mkdir()
        (self.directory / f"{self.MODULE}.py").write_text(FSYNC_COUNTER)

    args = ["-p", MODULE]

    def env(self, side: str) -> dict[str, str]:
        return {"PYTHONPATH": str(self.directory), "PREDBENCH_FSYNC_COUNT": str(self.directory / side)}

    def count(self, side: str) -> int:
        """The fsyncs of the last run of that side."""
        return int((self.directory / side).read_text())


def fsync_ms(directory: Path, count: int = 30) -> float:
    """Median latency of one small durable write (write, fsync, rename) where the runs write: the
    floor under every item's locked steps, which fsync their state so a crash loses nothing."""
    times = []
    for n in range(count):
        start = time.perf_counter()
        tmp = directory / f".probe-{n}.tmp"
        with open(tmp, "w") as handle:
            handle.write("{}\n" * 200)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, directory / "probe.json")
        times.append(time.perf_counter() - start)
    return 1000 * median(times)


class Timings(BaseModel):
    """What `measure` found; `judge` turns it into the figure."""

    items: int
    seconds: dict[str, list[float]]
    """plugin and bare, in rotating order."""
    complete_runs: int
    """Plugin runs in which every item passed, was recorded and charged once."""
    fsync_ms: float
    fsyncs: int
    """fsyncs of the last plugin run, less the bare side's (none)."""
    quick: bool = False


def complete(run_dir: Path, items: int) -> bool:
    view = RunView.load(run_dir)
    return len(view.with_status(ItemStatus.PASSED)) == items and len(view.ledger.charges) == items


def measure(sessions: int = 500, repeat: int = 3, quick: bool = False) -> Timings:
    items = len(MODELS) * sessions
    scratch = Path(tempfile.mkdtemp(prefix="predbench-perf-plugin-"))
    try:
        bare_dir = scratch / "bare"
        bare_dir.mkdir()
        write_bare_module(bare_dir, item_ids(sessions))
        runs, counter = Runs(scratch), FsyncCounter(scratch)
        times = interleaved(
            {
                "plugin": lambda: run_pytest(
                    *plugin_args(runs.next(), sessions), *counter.args, env=counter.env("plugin")
                ),
                "bare": lambda: run_pytest(
                    str(bare_dir), "-q", "-p", "no:predbench", *counter.args, cwd=bare_dir, env=counter.env("bare")
                ),
            },
            repeat,
        )
        complete_runs = sum(complete(run_dir, items) for run_dir in runs.made)
        fsyncs = counter.count("plugin") - counter.count("bare")
        floor = fsync_ms(scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    seconds = {k: rounded(v) for k, v in times.items()}
    return Timings(
        items=items, seconds=seconds, complete_runs=complete_runs, fsync_ms=floor, fsyncs=fsyncs, quick=quick
    )


def judge(t: Timings) -> Figure:
    """The figure: the median over repetitions of (plugin - bare) / items, each pair back to back."""
    per_item_ms = median(paired(t.seconds, "plugin", "bare", lambda p, b: (p - b) / t.items * 1000))
    ratio = median(paired(t.seconds, "plugin", "bare", lambda p, b: p / b))
    plugin, bare = median(t.seconds["plugin"]), median(t.seconds["bare"])
    repeat = len(t.seconds["plugin"])
    per_item_fsyncs = t.fsyncs / t.items
    return Figure(
        key="plugin_overhead",
        title="plugin overhead",
        value=per_item_ms,
        target=TARGET_MS,
        unit=" ms/item",
        conditions={"every item ran, was recorded and charged": t.complete_runs == repeat},
        note=(
            f"{t.items} items: plugin {plugin:.2f}s vs bare {bare:.2f}s (ratio {ratio:.2f}), median of {repeat}; "
            f"{per_item_fsyncs:.2f} durable writes per item, at {t.fsync_ms:.2f} ms each on this disk (write, fsync, "
            f"rename): a floor of {per_item_fsyncs * t.fsync_ms:.2f} ms/item, the rest "
            f"{per_item_ms - per_item_fsyncs * t.fsync_ms:.2f} ms/item"
        ),
        raw={"ratio": ratio, **t.model_dump()},
        quick=t.quick,
    )


QUICK_SESSIONS = 10


def main(argv: list[str] | None = None) -> int:
    parse = parser(__doc__.splitlines()[0], repeat=3)
    parse.add_argument("--sessions", type=int, default=500, help="sessions per model (2 models; default 500)")
    args = parse.parse_args(argv)
    sessions = QUICK_SESSIONS if args.quick else args.sessions
    return report("plugin overhead", lambda: judge(measure(sessions, repetitions(args), args.quick)), args.json)


if __name__ == "__main__":
    sys.exit(main())
