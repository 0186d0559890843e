"""What every benchmark shares: a Figure (one measured number against its target), timing side
by side, and the pytest command the benchmarks run.

The machines are small and noisy (2 cores, other work running), so a figure is always a ratio or
a difference of two things measured in the same run, alternating between them, taken as the
median of several repetitions; the raw timings travel with it so a reader can judge the spread.

Each benchmark script is `python -m benchmarks.NAME [--repeat N] [--quick] [--json FILE]`: it
prints one line (`verifier overhead: 1.08 (target <= 1.15) OK [2 cores]; ...`) and exits 1 when
the target is missed. `--quick` runs a tiny version (few items, one repetition) that shows the
script works, not a figure to quote. Each script splits `measure` (the timings) from `judge`
(timings -> Figure, pure), so the pass/fail logic is tested without timing anything.
"""

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import BaseModel, Field

from pytest_predbench.files import CorruptStateError
from pytest_predbench.verify.environment import PredEnvironmentError
from tests.support.acceptance import Workspace

REPO = Path(__file__).resolve().parent.parent
BENCH_DIR = REPO / "benchmarks"


def cores() -> int:
    """The CPUs this process may run on (what `nproc` says)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class Figure(BaseModel):
    """One benchmark's result: a value, its target, and the raw numbers behind it."""

    key: str
    title: str
    value: float
    target: float
    higher_is_better: bool = False
    unit: str = ""
    digits: int = 2
    conditions: dict[str, bool] = {}
    """Further facts that must hold for the figure to count (e.g. "zero overspend")."""
    note: str = ""
    """What else the reader needs: the secondary figures, what is and is not included."""
    raw: dict = {}
    cores: int = Field(default_factory=cores)
    """The machine's CPU count when measured: every figure is only meaningful with it."""
    quick: bool = False
    """Measured in --quick mode: shows the script works, not a figure to quote."""

    @property
    def target_met(self) -> bool:
        return self.value >= self.target if self.higher_is_better else self.value <= self.target

    @property
    def ok(self) -> bool:
        return self.target_met and all(self.conditions.values())

    def shown(self, value: float) -> str:
        return f"{value:.{self.digits}f}{self.unit}"

    def line(self) -> str:
        sign = ">=" if self.higher_is_better else "<="
        failed = [name for name, held in self.conditions.items() if not held]
        verdict = "OK" if self.ok else "MISSED" + (f" ({', '.join(failed)} failed)" if failed else "")
        tail = f"; {self.note}" if self.note else ""
        machine = f"[{self.cores} cores{', QUICK' if self.quick else ''}]"
        return (
            f"{self.title}: {self.shown(self.value)} (target {sign} {self.shown(self.target)}) {verdict} "
            f"{machine}{tail}"
        )


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def paired(times: dict[str, list[float]], a: str, b: str, how: Callable[[float, float], float]) -> list[float]:
    """`how(a, b)` of each repetition's pair (measured back to back), for a median that follows the
    machine's drift better than a ratio of two separate medians."""
    return [how(x, y) for x, y in zip(times[a], times[b], strict=True)]


def timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def interleaved(actions: dict[str, Callable[[], object]], repeat: int) -> dict[str, list[float]]:
    """Wall seconds of each action, `repeat` times, in rotating order (a b c, b c a, ...) so that
    drift in the machine's load falls on every side alike."""
    names = list(actions)
    times: dict[str, list[float]] = {name: [] for name in names}
    for n in range(repeat):
        for name in names[n % len(names) :] + names[: n % len(names)]:
            times[name].append(timed(actions[name]))
    return times


def rounded(values: Sequence[float], digits: int = 4) -> list[float]:
    return [round(v, digits) for v in values]


def pytest_command(*args: str) -> list[str]:
    """The same pytest for both sides of a comparison; no cache (nothing written to the checkout)."""
    return [sys.executable, "-m", "pytest", *args, "-p", "no:cacheprovider"]


def child_environment() -> dict[str, str]:
    """This environment without what an enclosing pytest(-xdist) run set, and with bytecode caching
    on, as in a user's shell: under PYTHONDONTWRITEBYTECODE pytest re-rewrites the assertions of
    every plugin module (hypothesis, anyio) in every process it starts, a second or more each."""
    env = Workspace.environment()
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def run_pytest(
    *args: str,
    cwd: Path = REPO,
    allowed: tuple[int, ...] = (0,),
    python_flags: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess:
    """pytest in a child process (see child_environment; `env` is added to it)."""
    proc = subprocess.run(
        [sys.executable, *python_flags, *pytest_command(*args)[1:]],
        cwd=cwd,
        env={**child_environment(), **(env or {})},
        capture_output=True,
        text=True,
        timeout=900,
    )
    if proc.returncode not in allowed:
        raise RuntimeError(
            f"`pytest {' '.join(args)}` exited {proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
        )
    return proc


def parser(description: str, repeat: int) -> argparse.ArgumentParser:
    parse = argparse.ArgumentParser(description=description)
    parse.add_argument("--repeat", type=int, default=repeat, help=f"repetitions, median taken (default {repeat})")
    parse.add_argument(
        "--quick", action="store_true", help="a tiny run (few items, one repetition): checks the script, no figure"
    )
    parse.add_argument("--json", type=Path, metavar="FILE", help="also write the figure to FILE as JSON")
    return parse


def repetitions(args: argparse.Namespace) -> int:
    return 1 if args.quick else max(1, args.repeat)


NOT_MEASURED = 2
"""The exit code of a benchmark that could not measure at all (pred missing, a run that failed)."""


def finish(figure: Figure, json_path: Path | None) -> int:
    """Print the figure's line (and write its JSON); the exit code says whether it met its target."""
    print(figure.line(), flush=True)
    if json_path is not None:
        json_path.write_text(figure.model_dump_json(indent=2) + "\n")
    return 0 if figure.ok else 1


def report(title: str, compute: Callable[[], Figure], json_path: Path | None) -> int:
    """finish(compute()), or, when the measurement itself fails (no pred, a pytest run that failed),
    what went wrong under the benchmark's title and exit NOT_MEASURED, without a traceback."""
    try:
        figure = compute()
    except (RuntimeError, OSError, subprocess.SubprocessError, PredEnvironmentError, CorruptStateError) as exc:
        print(f"{title}: not measured: {type(exc).__name__}: {str(exc).strip()}", file=sys.stderr, flush=True)
        return NOT_MEASURED
    return finish(figure, json_path)
