"""Start-up: `pytest bench_sessions --collect-only -q` with the plugin, against a bare
`pytest --collect-only -q` of a trivial test. Target: at most 1.5 s extra.

    python -m benchmarks.startup [--repeat 7]

The plugin side plans a real run (`--models demo/finder,demo/idle`, the mini-swe runner, as
`make bench` does): it resolves the models, checks the pinned pred and collects the items,
writing nothing. The bare side is a one-test module in an empty directory, with the plugin
disabled (`-p no:predbench`). litellm and mini-swe-agent must not be imported at start-up: one
extra run under `python -X importtime` checks that, and names the plugin's own import time.
"""

import shutil
import sys
import tempfile
from pathlib import Path

from pydantic import BaseModel

from benchmarks.figures import Figure, interleaved, median, paired, parser, repetitions, report, rounded, run_pytest

TARGET_SECONDS = 1.5
MODELS = "demo/finder,demo/idle"
AGENT_STACK = ("litellm", "minisweagent")


def plugin_args(models: str = MODELS) -> list[str]:
    return ["bench_sessions", "--collect-only", "-q", "--models", models]


def imported(importtime_log: str) -> dict[str, int]:
    """Top-level modules -> cumulative microseconds, from `python -X importtime` output."""
    modules: dict[str, int] = {}
    for line in importtime_log.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = line.split("|", 2)
        if not cumulative.strip().isdigit():
            continue
        top = name.strip().split(".")[0]
        if name.startswith(" ") and not name.startswith("  "):  # a module imported at top level
            modules[top] = modules.get(top, 0) + int(cumulative)
        modules.setdefault(top, 0)
    return modules


class Timings(BaseModel):
    """What `measure` found; `judge` turns it into the figure."""

    seconds: dict[str, list[float]]
    """plugin and bare, in rotating order."""
    agent_stack_loaded: list[str]
    """Modules of the agent stack the plugin side imported (must be none)."""
    plugin_import_ms: float
    quick: bool = False


def measure(repeat: int = 7, models: str = MODELS, quick: bool = False) -> Timings:
    scratch = Path(tempfile.mkdtemp(prefix="predbench-perf-startup-"))
    try:
        (scratch / "test_trivial.py").write_text("def test_trivial():\n    pass\n")
        times = interleaved(
            {
                "plugin": lambda: run_pytest(*plugin_args(models)),
                "bare": lambda: run_pytest("--collect-only", "-q", "-p", "no:predbench", cwd=scratch),
            },
            repeat,
        )
        log = run_pytest(*plugin_args(models), python_flags=("-X", "importtime")).stderr
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    modules = imported(log)
    return Timings(
        seconds={k: rounded(v) for k, v in times.items()},
        agent_stack_loaded=sorted(name for name in AGENT_STACK if name in modules),
        plugin_import_ms=modules.get("pytest_predbench", 0) / 1000,
        quick=quick,
    )


def judge(t: Timings) -> Figure:
    """The figure: the median over repetitions of plugin - bare, each pair measured back to back."""
    extra = median(paired(t.seconds, "plugin", "bare", lambda p, b: p - b))
    plugin, bare = median(t.seconds["plugin"]), median(t.seconds["bare"])
    loaded = t.agent_stack_loaded
    return Figure(
        key="startup",
        title="start-up",
        value=extra,
        target=TARGET_SECONDS,
        unit=" s extra",
        conditions={"litellm and mini-swe-agent not imported": not loaded},
        note=(
            f"collect-only with the plugin {plugin:.2f}s vs bare {bare:.2f}s, median of {len(t.seconds['plugin'])}; "
            f"the plugin's own imports {t.plugin_import_ms:.0f} ms"
            + (f"; imported: {', '.join(loaded)}" if loaded else "; litellm, minisweagent not imported")
        ),
        raw=t.model_dump(),
        quick=t.quick,
    )


def main(argv: list[str] | None = None) -> int:
    args = parser(__doc__.splitlines()[0], repeat=7).parse_args(argv)
    return report("start-up", lambda: judge(measure(repetitions(args), quick=args.quick)), args.json)


if __name__ == "__main__":
    sys.exit(main())
