"""The folder tree is the architecture: pytest_predbench/'s folders are the stages of a run, and
imports only flow down them.

    files (foundation) <- verify <- session <- mint <- state <- report <- run
                                                                     ^ plugin, options, cli on top

Every import counts, lazy ones inside functions included: a lazy import still makes the stage
depend on the other. The checks read the source with `ast` (nothing is imported), and each is
also run on a copy of the package with one bad import planted, to show that it can fail.
"""

import ast
import re
import shutil
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGE = "pytest_predbench"

STAGES = ("verify", "session", "mint", "state", "report", "run")
"""In import order: each stage may import the stages before it, never one after."""
FOUNDATION = {"files"}
"""Top-level modules every stage may use."""
TOP = {"plugin", "options", "cli", "analysis"}
"""The entry points (and the options they read): above every stage. run/ reads the options too."""
AGENT_STACK = ("minisweagent", "litellm")
AGENT_MODULES = {f"{PACKAGE}.session.agent", f"{PACKAGE}.session.model_settings"}
"""The only modules that import the agent stack (model_settings only inside a function, for prices)."""
ENTRY_POINTS = {
    f"{PACKAGE}.plugin",
    f"{PACKAGE}.cli",
    f"{PACKAGE}.verify.__main__",
    f"{PACKAGE}.verify.setup",
    f"{PACKAGE}.verify.extractor_stage",  # `python -m ... VERSION DEST` stages the extractor's crate
    f"{PACKAGE}.mint.mutator",  # `make mutator` (and the first mint) installs cargo-mutants
    f"{PACKAGE}.analysis",
}
"""Used from outside the package: the pytest11 entry point, the console script, `python -m
pytest_predbench.verify`, `make setup`, and the data layer researchers import."""


def modules(root: Path) -> dict[str, Path]:
    """Every module of the package under `root`, by dotted name (a folder without __init__.py, like the
    extractor's crate, is not a package: its scripts are not modules)."""
    found = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        if not (path.parent / "__init__.py").is_file():
            continue
        parts = path.relative_to(root).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def absolute(node: ast.ImportFrom, path: Path, known: dict[str, Path]) -> str | None:
    """The module a `from` import names, a relative one (`from ..report import x`) resolved against
    the package of the file it is in; None for a relative import past the top."""
    if node.level == 0:
        return node.module
    name = next((module for module, file in known.items() if file == path), None)
    if name is None:
        return None
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    if node.level - 1 >= len(package):
        return None
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports(path: Path, known: dict[str, Path]) -> Iterator[tuple[str, int]]:
    """(imported module, line) for every import in a file, at any depth, relative ones resolved; a
    `from package import name` naming a submodule counts as that submodule."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom) and (module := absolute(node, path, known)):
            for alias in node.names:
                inner = f"{module}.{alias.name}"
                yield (inner if inner in known else module), node.lineno


def stage(module: str) -> str:
    """'verify', 'session', ... for a module inside a stage; the module's own name at the top."""
    return module.split(".")[1] if module.count(".") >= 1 else ""


def direction_offences(root: Path) -> list[str]:
    known = modules(root)
    offences = []
    for name, path in known.items():
        mine = stage(name)
        for imported, line in sorted(set(imports(path, known))):
            if not imported.startswith(PACKAGE + ".") or name in ENTRY_POINTS:
                continue
            theirs = stage(imported)
            if mine in FOUNDATION:
                allowed = set()
            elif mine in STAGES:
                allowed = {*STAGES[: STAGES.index(mine) + 1], *FOUNDATION, *(["options"] if mine == "run" else [])}
            else:
                allowed = {*STAGES, *FOUNDATION, *TOP}
            if theirs not in allowed:
                offences.append(f"{path.relative_to(root)}:{line}: {mine or name} imports {imported}")
    return offences


def import_cycles(root: Path) -> list[list[str]]:
    known = modules(root)
    graph = {
        name: {imported for imported, _ in imports(path, known) if imported in known and imported != name}
        for name, path in known.items()
    }
    cycles, state = [], {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                cycles.append([*stack[stack.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt, [*stack, nxt])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return cycles


def agent_stack_offences(root: Path) -> list[str]:
    known = modules(root)
    found = []
    for name, path in known.items():
        for imported, line in imports(path, known):
            if imported.split(".")[0] in AGENT_STACK and name not in AGENT_MODULES:
                found.append(f"{path.relative_to(root)}:{line}: {name} imports {imported}")
            if imported.split(".")[0] == "pytest" and stage(name) == "state":
                found.append(f"{path.relative_to(root)}:{line}: state imports pytest")
    return found


def unused_modules(root: Path) -> list[str]:
    """Modules nothing in the package (nor an entry point) imports: they would exist only for tests."""
    known = modules(root)
    used = set(ENTRY_POINTS)
    for path in known.values():
        for imported, _ in imports(path, known):
            while imported:
                used.add(imported)  # importing a.b.c runs a and a.b too
                imported = imported.rpartition(".")[0]
    return sorted(name for name in known if name not in used)


def planted(tmp_path: Path, module: str, line: str) -> Path:
    """A copy of the package with `line` added to `module` (a dotted name)."""
    root = tmp_path / "copy"
    shutil.copytree(REPO / PACKAGE, root / PACKAGE, ignore=shutil.ignore_patterns("__pycache__"))
    path = root / (module.replace(".", "/") + ".py")
    path.write_text(path.read_text() + f"\n\ndef _planted():\n    {line}\n")
    return root


# -- the package as it is ------------------------------------------------------------------------


def test_the_folders_are_the_stages_and_pyproject_ships_each():
    folders = sorted(p.name for p in (REPO / PACKAGE).iterdir() if (p / "__init__.py").is_file())
    assert folders == sorted(STAGES)
    top = sorted(p.stem for p in (REPO / PACKAGE).glob("*.py") if p.stem != "__init__")
    assert top == sorted(TOP | FOUNDATION)
    packages = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    in_tree = sorted(name for name in modules(REPO) if (REPO / name.replace(".", "/") / "__init__.py").is_file())
    data = [  # folders of data: importable names to setuptools, so listed to be shipped without a warning
        ".".join(p.relative_to(REPO).parts)
        for p in (REPO / PACKAGE).rglob("*")
        if p.is_dir() and p.name.isidentifier() and p.name != "__pycache__" and not (p / "__init__.py").exists()
    ]
    fixtures = [f"{PACKAGE}.fixtures", f"{PACKAGE}.fixtures.calibration"]
    assert sorted(packages) == sorted([*in_tree, *data, *fixtures])


def test_imports_flow_down_the_stages():
    assert direction_offences(REPO) == []


def test_no_import_cycles():
    assert import_cycles(REPO) == []


def test_only_the_agent_module_imports_the_agent_stack_and_state_never_imports_pytest():
    assert agent_stack_offences(REPO) == []


def test_no_module_exists_only_for_tests():
    assert unused_modules(REPO) == []


def test_no_test_harness_in_the_package():
    sources = "\n".join(p.read_text() for p in modules(REPO).values())
    assert not re.search(r"\bfrom tests\b|\bimport tests\b", sources)


# -- each check fails when it should --------------------------------------------------------------


def test_verify_importing_session_is_caught(tmp_path):
    root = planted(tmp_path, f"{PACKAGE}.verify.pred", "from pytest_predbench.session import protocol")
    [offence] = direction_offences(root)
    assert (
        offence.startswith(f"{PACKAGE}/verify/pred.py:")
        and "verify imports pytest_predbench.session.protocol" in offence
    )


@pytest.mark.parametrize(
    ("module", "line", "offence"),
    [
        (
            f"{PACKAGE}.verify.pred",
            "from ..report import leaderboard",
            "verify imports pytest_predbench.report.leaderboard",
        ),
        (f"{PACKAGE}.state.ledger", "from ..run.books import Bookkeeper", "state imports pytest_predbench.run.books"),
        (
            f"{PACKAGE}.verify.__init__",
            "from ..session import protocol",
            "verify imports pytest_predbench.session.protocol",
        ),
    ],
    ids=["module", "module-deeper", "package-init"],
)
def test_a_relative_import_going_the_wrong_way_is_caught(tmp_path, module, line, offence):
    root = planted(tmp_path, module, line)
    assert any(offence in found for found in direction_offences(root)), direction_offences(root)


def test_a_relative_import_within_a_stage_is_allowed(tmp_path):
    root = planted(tmp_path, f"{PACKAGE}.report.leaderboard", "from . import scoring\n    from ..verify import pin")
    assert direction_offences(root) == []


def test_state_importing_run_lazily_is_caught(tmp_path):
    root = planted(tmp_path, f"{PACKAGE}.state.ledger", "from pytest_predbench.run.books import Bookkeeper")
    assert any("state imports pytest_predbench.run.books" in o for o in direction_offences(root))


def test_a_cycle_is_caught(tmp_path):
    root = planted(tmp_path, f"{PACKAGE}.verify.pin", "from pytest_predbench.verify import environment")
    cycles = import_cycles(root)
    pair = {f"{PACKAGE}.verify.environment", f"{PACKAGE}.verify.pin"}  # found from either end
    assert any(len(c) == 3 and c[0] == c[2] and set(c) == pair for c in cycles), cycles


def test_the_agent_stack_outside_its_module_is_caught(tmp_path):
    root = planted(tmp_path, f"{PACKAGE}.report.leaderboard", "import litellm")
    assert [o.split(": ", 1)[1] for o in agent_stack_offences(root)] == [
        f"{PACKAGE}.report.leaderboard imports litellm"
    ]


@pytest.mark.parametrize("orphan", ["report/orphan.py", "state/orphan.py"])
def test_a_module_nothing_imports_is_caught(tmp_path, orphan):
    root = planted(tmp_path, f"{PACKAGE}.files", "pass")
    (root / PACKAGE / orphan).write_text('"""Only a test would import me."""\n')
    assert unused_modules(root) == [f"{PACKAGE}.{orphan.removesuffix('.py').replace('/', '.')}"]
