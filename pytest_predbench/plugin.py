"""predbench's pytest plugin (the pytest11 entry point): loaded in every pytest run of the repo.

It stays inert unless the benchmark is being run: --models or
--resume-bench given, or bench_sessions/ named on the command line. Then it refuses pytest's ways of
running part of the items (run/selection.py: -k, --lf, --deselect, ...), starts the run
on the controller (run/start.py: a new run directory, or the one to resume), redirects
collection to bench_sessions/, and registers the plugins (run/hooks.py) that do the work.
Otherwise it only keeps bench_sessions/ out of collection (`pytest .` does not start a
benchmark), and collects the calibration sets, fixtures/calibration/<version>/*.json, as test
items (each run on its own version).

Path options take the `--run-dir=DIR` form: pytest picks its rootdir before any plugin adds
its options, so a bare value naming an existing path is read as a test path.
"""

from pathlib import Path

import pytest

from pytest_predbench import options

PLUGIN_NAME = "predbench-bench"
BENCH_DIR = "bench_sessions"
CALIBRATION_DIR = Path("fixtures") / "calibration"
"""Relative to the rootdir: the calibration set that `pytest fixtures` (CI's calibration job) runs."""


def pytest_addoption(parser: pytest.Parser) -> None:
    options.add_options(parser)


def _bench_dir(config: pytest.Config) -> Path:
    return config.rootpath / BENCH_DIR


def _arg_paths(config: pytest.Config) -> list[Path]:
    return [(config.invocation_params.dir / arg.split("::")[0]).resolve() for arg in config.args]


def _names_bench(config: pytest.Config) -> bool:
    if config.args_source is not pytest.Config.ArgsSource.ARGS:
        return False
    bench = _bench_dir(config).resolve()
    return any(path == bench or bench in path.parents for path in _arg_paths(config))


def _collect_bench_only(config: pytest.Config) -> None:
    """`pytest --resume-bench` alone means the benchmark, not the testpaths."""
    if config.args_source is pytest.Config.ArgsSource.ARGS:
        if not _names_bench(config):
            raise pytest.UsageError(
                f"--models/--resume-bench run the benchmark in {BENCH_DIR}/; drop {' '.join(config.args)}"
            )
        return
    bench = _bench_dir(config)
    if not bench.is_dir():
        raise pytest.UsageError(
            f"no {BENCH_DIR}/ under rootdir {config.rootpath}: run from the predbench checkout, and write "
            "path options as --run-dir=DIR (pytest takes a bare value naming an existing path for a test)"
        )
    config.args[:] = [str(bench)]


def pytest_configure(config: pytest.Config) -> None:

    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        frozen = workerinput.get(options.WORKERINPUT_KEY)
        if frozen:
            from pytest_predbench.run import hooks
            from pytest_predbench.run.start import RunState

            _collect_bench_only(config)
            state = RunState.model_validate_json(frozen)  # the run's plan: its version and pool, as values
            hooks.register(config, PLUGIN_NAME, state)
        return
    options.check_store_options(config)
    if not (options.benchmark_requested(config) or _names_bench(config)):
        return
    from pytest_predbench.run.selection import check_invocation

    check_invocation(config, BENCH_DIR)
    _collect_bench_only(config)
    from pytest_predbench.run import hooks
    from pytest_predbench.run.start import start_run

    shared = None
    if config.getoption("predbench_store"):  # a run that hosts share, kept in PostgreSQL
        from pytest_predbench.run.join import start_shared as shared
    state, lock, gates = start_run(config, shared)  # the plan checks --pred-version, resolves the default
    hooks.register(config, PLUGIN_NAME, state, lock, gates)


@pytest.hookimpl(wrapper=True)
def pytest_cmdline_main(config: pytest.Config):
    """A resume runs on the workers the run was executed with, unless -n is given (run/execution.py):
    set here, before xdist's own pytest_cmdline_main reads -n."""
    if config.getoption("predbench_resume", False):
        from pytest_predbench.run.execution import keep_workers
        from pytest_predbench.run.runs import remembered

        given = config.getoption("predbench_run_dir")
        keep_workers(config, Path(given) if given else remembered(config.rootpath))
    return (yield)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if collection_path == _bench_dir(config) and not config.pluginmanager.has_plugin(PLUGIN_NAME):
        return True
    return None


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """Each fixtures/calibration/<version>/*.json is a test item: `pytest fixtures` runs the calibration
    sets, each certificate on its own version."""
    if file_path.suffix == ".json" and file_path.parent.parent == parent.config.rootpath / CALIBRATION_DIR:
        from pytest_predbench.verify.calibration import CalibrationFile

        return CalibrationFile.from_parent(parent, path=file_path)
    return None


@pytest.fixture
def bench_session(request: pytest.FixtureRequest):
    """The planned item this test runs: its session, its verdicts (see bench_sessions/)."""
    return request.config.pluginmanager.get_plugin(PLUGIN_NAME).session_for(request)
