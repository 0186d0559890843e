"""Run every benchmark (`make perf`), print their figures as one table, and write them to
benchmarks/results.json (everything, raw timings included) and benchmarks/figures.md (the table
and the notes, ready for the README). Exits 1 when any figure misses its target or any benchmark
could not measure.

    python -m benchmarks.run_all [--only NAME ...] [--quick] [--out-dir DIR]

Each benchmark runs as its own process, one after the other, so none measures another's leftovers.
The load average before and after goes with the figures: the machines are shared, and a figure is
only as quiet as the machine was.
"""

import argparse
import datetime
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

from pydantic import BaseModel

from benchmarks.figures import BENCH_DIR, REPO, Figure, cores

BENCHMARKS = (
    "verifier_overhead",
    "batch_verification",
    "plugin_overhead",
    "parallel_efficiency",
    "budget_use",
    "startup",
    "scale_out",
    "prompt_caching",
    "brute_force_reach",
    "certificate_cost",
    "baseline_recall",
    "gateway_overhead",
    "endpoint_overhead",
    "cpu_share",
    "setup_time",
    "mint_time",
)


class Results(BaseModel):
    """What results.json holds: the figures and the machine they were measured on."""

    measured_at: str
    cores: int
    load_average: list[float]
    """At the start of the run: the machines are shared, so the figures are only as quiet as this."""
    load_average_end: list[float] = []
    python: str
    quick: bool = False
    figures: list[Figure]
    failed: dict[str, str] = {}
    """Benchmarks that could not measure, with what they said."""

    @property
    def ok(self) -> bool:
        return not self.failed and all(f.ok for f in self.figures)


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def run_benchmark(name: str, scratch: Path, quick: bool) -> tuple[Figure | None, str]:
    out = scratch / f"{name}.json"
    proc = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{name}", "--json", str(out), *(["--quick"] if quick else [])],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    if out.exists():
        return Figure.model_validate_json(out.read_text()), proc.stdout.strip()
    return None, (proc.stdout + proc.stderr).strip() or f"exited {proc.returncode} without a word"


def target(figure: Figure) -> str:
    return f"{'>=' if figure.higher_is_better else '<='} {figure.shown(figure.target)}"


def verdict(figure: Figure) -> str:
    return "OK" if figure.ok else "MISSED"


def rows(results: Results) -> list[tuple[str, str, str, str]]:
    return [
        ("figure", "value", "target", ""),
        *((f.title, f.shown(f.value), target(f), verdict(f)) for f in results.figures),
        *((name, "-", "-", "NOT MEASURED") for name in results.failed),
    ]


def table(results: Results) -> list[str]:
    """The figures as aligned plain-text lines, for the terminal."""
    body = rows(results)
    widths = [max(len(row[i]) for row in body) for i in range(4)]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in body]


def machine(results: Results) -> str:
    end = f", {results.load_average_end} after" if results.load_average_end else ""
    return (
        f"{results.cores} cores (nproc), load average {results.load_average} before{end}, "
        f"Python {results.python}, {results.measured_at}"
        + (" — QUICK mode, not figures to quote" if results.quick else "")
    )


def markdown(results: Results) -> str:
    """figures.md: the table to paste into the README, then each figure's note."""
    head, *body = rows(results)
    lines = [
        "# predbench performance (`make perf`)",
        "",
        f"Measured on {machine(results)}.",
        "",
        "| " + " | ".join(head[:3]) + " | |",
        "|---|---|---|---|",
        *("| " + " | ".join(row) + " |" for row in body),
        "",
    ]
    for figure in results.figures:
        lines += [f"- **{figure.title}**: {figure.note}"]
    for name, said in results.failed.items():
        lines += [f"- **{name}**: not measured: {said.splitlines()[-1] if said else ''}"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parse = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parse.add_argument("--only", nargs="+", choices=BENCHMARKS, help="run only these benchmarks")
    parse.add_argument("--quick", action="store_true", help="each benchmark in its tiny --quick mode")
    parse.add_argument(
        "--out-dir", type=Path, default=BENCH_DIR, help=f"where results.json and figures.md go (default {BENCH_DIR})"
    )
    args = parse.parse_args(argv)
    results = Results(
        measured_at=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        cores=cores(),
        load_average=load_average(),
        python=platform.python_version(),
        quick=args.quick,
        figures=[],
    )
    print(f"predbench benchmarks on {results.cores} cores, load average {results.load_average}", flush=True)
    with tempfile.TemporaryDirectory(prefix="predbench-perf-") as tmp:
        for name in args.only or BENCHMARKS:
            figure, output = run_benchmark(name, Path(tmp), args.quick)
            print(output, flush=True)
            if figure is None:
                results.failed[name] = output
            else:
                results.figures.append(figure)
    results.load_average_end = load_average()
    print()
    for line in table(results):
        print(line)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "results.json").write_text(results.model_dump_json(indent=2) + "\n")
    (args.out_dir / "figures.md").write_text(markdown(results))
    print(f"\n{machine(results)}\nfigures written to {args.out_dir / 'figures.md'} and results.json")
    return 0 if results.ok else 1


if __name__ == "__main__":
    sys.exit(main())
