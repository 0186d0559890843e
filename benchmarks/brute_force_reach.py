"""Brute-force reach: how large an instance pred's brute force solves within the agent's command
timeout, measured with the real pred, against what the prompt tells the model.

    python -m benchmarks.brute_force_reach [--repeat 3] [--quick] [--json FILE]

The prompt (session/prompts/instance.j2) states the reach from one constant, verify/reach.py's
BRUTE_FORCE_CONFIGS_PER_SECOND: about 2^k configurations within the command timeout; the verifier's
CPU-time limit per call derives from the same constant. This script measures the rate — `pred solve
--solver brute-force` on MaximumIndependentSet over cycles of 20 to 24 vertices (2^n configurations;
brute force enumerates them all), the median of `--repeat` runs of the largest — and then solves the
instance of the size the prompt states, with the default command timeout, to show the claim holds,
and that the CPU time it took is within the verifier's limit (so the verifier can repeat any search
the prompt promises, whatever the load). The figure is the measured reach in binary variables; its
target, the prompt's. --quick measures up to 20 vertices and skips the checks.
"""

import math
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pydantic import BaseModel

from benchmarks.figures import Figure, parser, repetitions, report
from pytest_predbench.session import prompts
from pytest_predbench.session.protocol import SessionLimits
from pytest_predbench.verify import pin
from pytest_predbench.verify.environment import checked_record
from pytest_predbench.verify.reach import verifier_limits

SIZES = (20, 22, 24)
QUICK_SIZES = (16, 18, 20)


class Timings(BaseModel):
    seconds: dict[int, list[float]]
    """Vertices (binary variables) -> wall seconds of each solve."""
    timeout_s: float
    stated_binary: int
    """The reach the prompt states for that timeout."""
    stated_solved_in: float | None = None
    """Seconds the instance of the stated size took (None: not checked, or past the timeout)."""
    stated_cpu_s: float | None = None
    """CPU seconds that solve used (None: not checked, or past the timeout)."""
    verifier_cpu_s: float | None = None
    """The verifier's CPU-time limit per call at this command timeout (verify/reach.py)."""
    checked: bool = False
    quick: bool = False


def cycle_mis(n: int, directory: Path) -> Path:
    """MaximumIndependentSet on an n-cycle, unit weights: n binary variables."""
    edges = [[i, (i + 1) % n] for i in range(n)]
    path = directory / f"mis{n}.json"
    path.write_text(
        '{"type": "MaximumIndependentSet", "variant": {"graph": "SimpleGraph", "weight": "One"}, '
        f'"data": {{"graph": {{"num_vertices": {n}, "edges": {edges}}}, "weights": {[1] * n}}}}}'
    )
    return path


def solve_seconds(pred: str, problem: Path, timeout: float) -> float | None:
    return solve_times(pred, problem, timeout)[0]


def solve_times(pred: str, problem: Path, timeout: float) -> tuple[float | None, float | None]:
    """Wall and CPU seconds of one brute-force solve (None, None past the timeout)."""
    start, cpu = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        subprocess.run(
            [pred, "solve", str(problem), "--solver", "brute-force"], capture_output=True, check=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return None, None
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.perf_counter() - start, after.ru_utime + after.ru_stime - cpu.ru_utime - cpu.ru_stime


def measure(repeat: int, quick: bool) -> Timings:
    pred = checked_record(pin.default_choice()).pred_path
    timeout = SessionLimits().command_timeout_s
    stated = prompts.brute_force_reach(timeout)["brute_force_binary"]
    seconds: dict[int, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="predbench-perf-bf-") as tmp:
        for n in QUICK_SIZES if quick else SIZES:
            problem = cycle_mis(n, Path(tmp))
            runs = [solve_seconds(pred, problem, timeout) for _ in range(repeat)]
            seconds[n] = [round(r, 4) for r in runs if r is not None]
        timings = Timings(
            seconds=seconds, timeout_s=timeout, stated_binary=stated, quick=quick,
            verifier_cpu_s=verifier_limits(timeout).cpu_s,
        )  # fmt: skip
        if not quick:
            took, cpu = solve_times(pred, cycle_mis(stated, Path(tmp)), timeout)
            timings.checked, timings.stated_solved_in = True, None if took is None else round(took, 2)
            timings.stated_cpu_s = None if cpu is None else round(cpu, 2)
    return timings


def judge(t: Timings) -> Figure:
    largest = max(n for n, runs in t.seconds.items() if runs)
    seconds = statistics.median(t.seconds[largest])
    rate = 2**largest / seconds
    reach = math.log2(rate * t.timeout_s)
    conditions = {}
    if t.checked:
        conditions[f"the stated 2^{t.stated_binary} solves within {t.timeout_s:.0f} s"] = t.stated_solved_in is not None
        if t.verifier_cpu_s is not None:
            conditions[f"its CPU time is within the verifier's {t.verifier_cpu_s:.0f} s limit"] = (
                t.stated_cpu_s is not None and t.stated_cpu_s <= t.verifier_cpu_s
            )
    solved = f"{t.stated_solved_in} s" if t.stated_solved_in is not None else "past the timeout"
    return Figure(
        key="brute_force_reach",
        title="brute force reach",
        value=reach,
        target=float(t.stated_binary),
        higher_is_better=True,
        unit=" binary variables",
        digits=1,
        conditions=conditions,
        note=(
            f"pred brute force {rate / 1e6:.1f} million configurations/s (MaximumIndependentSet on a "
            f"{largest}-cycle, 2^{largest} in {seconds:.2f} s, median of {len(t.seconds[largest])}); within the "
            f"{t.timeout_s:.0f} s command timeout 2^{reach:.1f}; the prompt states 2^{t.stated_binary} "
            f"(at {prompts.BRUTE_FORCE_CONFIGS_PER_SECOND / 1e6:g} million/s)"
            + (f"; the 2^{t.stated_binary} instance solved in {solved}" if t.checked else "")
            + (
                f" using {t.stated_cpu_s} s of CPU (the verifier may use {t.verifier_cpu_s:.0f} s per call)"
                if t.checked and t.stated_cpu_s is not None and t.verifier_cpu_s is not None
                else ""
            )
        ),
        raw=t.model_dump(),
        quick=t.quick,
    )


def main(argv: list[str] | None = None) -> int:
    args = parser(__doc__.splitlines()[0], repeat=3).parse_args(argv)
    return report("brute force reach", lambda: judge(measure(repetitions(args), args.quick)), args.json)


if __name__ == "__main__":
    sys.exit(main())
