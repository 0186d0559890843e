"""What an invocation of the benchmark may not do: choose items by pytest's selection options.

A run holds exactly its plan — every model times every session — and is published only when every
planned item has a terminal record. pytest's own ways of running part of a collection (-k, -m,
--deselect, --lf, --sw, a node id) would leave the other items without one: a run that `predbench
report` then refuses, for no reason the run itself recorded. So they are refused before anything is
run or written, in one line that says how to choose instead: --models and --sessions for a new run,
--resume-bench for the items a stopped run still owes. The refusal comes from the controller at
start-up, ahead of the run directory, the preflight gates and the workers.

--progress-every is checked here too, for the same reason: before anything is written.
"""

import math

import pytest

HOW = (
    "a run holds exactly its plan: choose models with --models and sessions with --sessions "
    "(a stopped run continues with --resume-bench); nothing was run or written"
)


def _selection(config: pytest.Config, bench_dir: str) -> str | None:
    """The first selection option given, as the user wrote it (None: none)."""
    option = config.option
    if getattr(option, "keyword", ""):
        return f"-k {option.keyword!r}"
    if getattr(option, "markexpr", ""):
        return f"-m {option.markexpr!r}"
    if getattr(option, "deselect", None):
        return f"--deselect {option.deselect[0]}"
    if getattr(option, "lf", False):
        return "--lf"
    if getattr(option, "stepwise", False) or getattr(option, "stepwise_skip", False):
        return "--stepwise"
    for arg in config.args:
        if "::" in arg and bench_dir in arg.split("::")[0]:
            return f"the node id {arg}"
    return None


def check_invocation(config: pytest.Config, bench_dir: str) -> None:
    """pytest.UsageError (one line) for a selection of items, or an unusable --progress-every."""
    chosen = _selection(config, bench_dir)
    if chosen is not None:
        raise pytest.UsageError(f"predbench: {chosen} would run part of the benchmark's items; {HOW}")
    every = config.getoption("predbench_progress_every")
    if not (math.isfinite(every) and every >= 0):
        raise pytest.UsageError(f"--progress-every must be a number of seconds, 0 or more; got {every}")
