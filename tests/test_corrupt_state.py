"""Corrupt state: a damaged or hand-edited run directory is refused with one line naming the file,
and nothing in it is lost or silently reset.

Every case starts from real run directories made through the plugin with the labelled FAKE runner
(no model is called): `partial` (the s01 items of two models done, s02 still to run) and `finished`
(the same run resumed to the end). Each case damages one file in copies of both, then runs what a
user runs, as they run it:

    pytest --resume-bench --run-dir=PARTIAL     refused, exit 4 (pytest's usage error)
    predbench status PARTIAL                    refused, exit 2
    predbench report FINISHED                   exit 2 for an unreadable file; exit 1 (the merge
                                                gate's refusal, naming the item) for a file that
                                                reads but disagrees with the rest

and then compares every file of both directories with its bytes from before: nothing written,
nothing reset. The contrast is the intact copies: the same commands resume, show and publish.

checkpoint.json and results/*.jsonl are views rebuilt from items/ (records.rebuild_views), read by
nothing that decides anything: damaged, a resume rewrites them from the records and loses nothing.
"""

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_predbench.report.leaderboard import HTML_NAME, JSON_NAME, MARKDOWN_NAME, STALE_MARK
from pytest_predbench.state.audit import audited_records, read_snapshot
from pytest_predbench.state.plan import read_plan
from pytest_predbench.state.records import Checkpoint, ItemStatus, ResultLine, checkpoint_of
from pytest_predbench.state.rundir import RunDir
from tests.support.acceptance import REPO, Workspace, check, fake_args
from tests.support.partial import partial_run

pytestmark = pytest.mark.slow  # end to end in subprocesses: `make test`, not `make check`

MODELS = ("fake/alpha", "fake/beta")
DONE = ("fake/alpha-s01", "fake/beta-s01")
REMAINING = ("fake/alpha-s02", "fake/beta-s02")
VICTIM = "fake/alpha-s01"
"""The item whose record a case damages (done in both templates)."""
USAGE_ERROR = 4


# -- the run directories ------------------------------------------------------------------------


def resume(ws: Workspace, run: Path) -> subprocess.CompletedProcess:
    return ws.pytest("--resume-bench", f"--run-dir={run}", "-p", "no:xdist")


def predbench(*args: str) -> subprocess.CompletedProcess:
    """The `predbench` command (pytest_predbench.cli:main, the console script's entry point)."""
    return subprocess.run(
        [sys.executable, "-m", "pytest_predbench.cli", *args],
        cwd=REPO,
        env=Workspace.environment(),
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def templates(tmp_path_factory) -> dict[str, Path]:
    ws = Workspace(tmp_path_factory.mktemp("corrupt-state"))
    partial = partial_run(ws.run_dir("partial"), MODELS, 2, done=lambda item: item.session == 1)
    finished = ws.run_dir("finished")
    shutil.copytree(partial, finished)
    check(resume(ws, finished), 0)
    return {"partial": partial, "finished": finished}


@pytest.fixture
def ws(tmp_path) -> Workspace:
    return Workspace(tmp_path)


def copy_of(template: Path, ws: Workspace, name: str) -> Path:
    target = ws.run_dir(name)
    shutil.copytree(template, target)
    return target


def snapshot(run: Path) -> dict[str, bytes]:
    """Every file of the run directory (lock files included) and its bytes."""
    return {str(p.relative_to(run)): p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}


def lines_of(proc: subprocess.CompletedProcess) -> list[str]:
    return [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]


def assert_one_line_naming(proc: subprocess.CompletedProcess, exit_code: int, named: Path) -> str:
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    assert proc.returncode == exit_code, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    [line] = lines_of(proc)
    assert str(named) in line, line
    return line


# -- damage -------------------------------------------------------------------------------------


def _edit(relative: str, change: Callable[[dict], None]) -> Callable[[Path], Path]:
    def damage(run: Path) -> Path:
        path = run / relative
        data = json.loads(path.read_text())
        change(data)
        path.write_text(json.dumps(data, indent=2))
        return path

    return damage


def _write(relative: str, content: bytes) -> Callable[[Path], Path]:
    def damage(run: Path) -> Path:
        path = run / relative
        path.write_bytes(content)
        return path

    return damage


def _truncate(relative: str) -> Callable[[Path], Path]:
    def damage(run: Path) -> Path:
        path = run / relative
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
        return path

    return damage


def _remove(relative: str) -> Callable[[Path], Path]:
    def damage(run: Path) -> Path:
        path = run / relative
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()
        return path

    return damage


def _replace_with_directory(relative: str) -> Callable[[Path], Path]:
    def damage(run: Path) -> Path:
        path = run / relative
        path.unlink()
        path.mkdir()
        return path

    return damage


ITEM = "items/" + VICTIM.replace("/", "__") + ".json"
ALPHA_S02 = "items/fake__alpha-s02.json"


def _first_charge(change: Callable[[dict], None]) -> Callable[[dict], None]:
    def edit(ledger: dict) -> None:
        change(next(c for c in ledger["charges"] if c["item"] == VICTIM))

    return edit


UNREADABLE: dict[str, tuple[Callable[[Path], Path], str]] = {
    # name: (damage, the file the one line must name)
    "ledger truncated": (_truncate("ledger.json"), "ledger.json"),
    "ledger emptied": (_write("ledger.json", b""), "ledger.json"),
    "ledger not UTF-8": (_write("ledger.json", b"\xff\xfe{\x00\x00"), "ledger.json"),
    "ledger wrong type": (_edit("ledger.json", _first_charge(lambda c: c.update(dollars="free"))), "ledger.json"),
    "ledger unknown charge kind": (
        _edit("ledger.json", _first_charge(lambda c: c.update(kind="refund"))),
        "ledger.json",
    ),
    "ledger missing key": (_edit("ledger.json", lambda d: d.pop("models")), "ledger.json"),
    "ledger books an unknown model": (
        _edit("ledger.json", _first_charge(lambda c: c.update(model="fake/gamma"))),
        "ledger.json",
    ),
    "ledger missing": (_remove("ledger.json"), "ledger.json"),
    "item truncated": (_truncate(ITEM), ITEM),
    "item invalid JSON": (_write(ITEM, b"{not json"), ITEM),
    "item not an object": (_write(ITEM, b"[]"), ITEM),
    "item wrong type": (_edit(ITEM, lambda d: d.update(spent="lots")), ITEM),
    "item unknown status": (_edit(ITEM, lambda d: d.update(status="won")), ITEM),
    "item missing key": (_edit(ITEM, lambda d: d.pop("plan_digest")), ITEM),
    "item nested wrong type": (_edit(ITEM, lambda d: d["result"]["accounting"].update(model_calls=[1])), ITEM),
    "item is a directory": (_replace_with_directory(ITEM), ITEM),
    "plan truncated": (_truncate("plan.json"), "plan.json"),
    "plan wrong type": (_edit("plan.json", lambda d: d.update(digest=5)), "plan.json"),
    "plan edited (digest no longer matches)": (
        _edit("plan.json", lambda d: d["plan"]["options"].update(sessions=1)),
        "plan.json",
    ),
}
"""A file that cannot be read or validated: one line naming it from every command, exit 2 from
`predbench report` too."""


def _swap_item_key(record: dict) -> None:
    record.update(item="fake/alpha-s02", session=2)


INCONSISTENT: dict[str, tuple[Callable[[Path], Path], str, str]] = {
    # name: (damage, the file the one line must name, what the merge gate names)
    "ledger charge removed": (
        _edit("ledger.json", lambda d: d["charges"].remove(next(c for c in d["charges"] if c["item"] == VICTIM))),
        "ledger.json",
        VICTIM,
    ),
    "ledger charge lowered": (_edit("ledger.json", _first_charge(lambda c: c.update(dollars=0.0))), ITEM, VICTIM),
    "item record deleted": (_remove(ITEM), ITEM, VICTIM),
    "items directory deleted": (_remove("items"), "items/", "fake/"),
    "item status passed -> infra": (_edit(ITEM, lambda d: d.update(status=ItemStatus.INFRA.value)), ITEM, VICTIM),
    "item spend lowered": (
        _edit(ITEM, lambda d: (d.update(spent=0.001), d["result"]["accounting"].update(dollars=0.001))),
        ITEM,
        VICTIM,
    ),
    "item earlier spend forged": (_edit(ITEM, lambda d: d.update(earlier_spent=0.5)), ITEM, VICTIM),
    "item relabelled as another item": (_edit(ITEM, _swap_item_key), ITEM, "fake/alpha-s02"),
}
"""Files that read and validate, but disagree with the rest in a way no harness process leaves them
(each would make an item run and be paid for again, lose spend, or lift a cap): resume and status
refuse with one line naming the file; report refuses through the merge gate, naming the item."""


def damaged_pair(templates: dict[str, Path], ws: Workspace, damage: Callable[[Path], Path]):
    partial = copy_of(templates["partial"], ws, "partial")
    finished = copy_of(templates["finished"], ws, "finished")
    damage(partial)
    damage(finished)
    return partial, finished, snapshot(partial), snapshot(finished)


def assert_untouched(run: Path, before: dict[str, bytes]) -> None:
    after = snapshot(run)
    assert sorted(after) == sorted(before), "files appeared or vanished"
    changed = [name for name in before if after[name] != before[name]]
    assert changed == [], f"changed: {changed}"


# -- the contrast: intact runs ------------------------------------------------------------------


def test_intact_runs_resume_show_and_publish(templates, ws):
    partial = copy_of(templates["partial"], ws, "partial")
    finished = copy_of(templates["finished"], ws, "finished")
    shown = predbench("status", str(partial))
    assert shown.returncode == 0 and "2 remaining" in shown.stdout, shown.stderr
    before = snapshot(partial)
    resumed = resume(ws, partial)
    assert resumed.returncode == 0, resumed.stdout[-2000:]
    run = RunDir(partial)
    records = audited_records(read_snapshot(run.path))
    assert sorted(records) == sorted(DONE + REMAINING)
    assert all(records[key].invocation != records[DONE[0]].invocation for key in REMAINING), "the rest ran"
    assert all((partial / name).read_bytes() == before[name] for name in before if name.startswith("items/"))
    published = predbench("report", str(finished))
    assert published.returncode == 0, published.stderr
    assert (finished / JSON_NAME).is_file()
    assert predbench("status", str(finished)).returncode == 0


# -- unreadable files ---------------------------------------------------------------------------


@pytest.mark.parametrize("case", list(UNREADABLE))
def test_an_unreadable_file_is_one_line_naming_it_and_nothing_changes(templates, ws, case):
    damage, damaged_file = UNREADABLE[case]
    partial, finished, before_partial, before_finished = damaged_pair(templates, ws, damage)

    assert_one_line_naming(resume(ws, partial), USAGE_ERROR, partial / damaged_file)
    assert_one_line_naming(predbench("status", str(partial)), 2, partial / damaged_file)
    assert_one_line_naming(predbench("status", str(finished)), 2, finished / damaged_file)
    assert_one_line_naming(predbench("report", str(finished)), 2, finished / damaged_file)

    assert_untouched(partial, before_partial)
    assert_untouched(finished, before_finished)
    assert not any((finished / name).exists() for name in (JSON_NAME, MARKDOWN_NAME, HTML_NAME))


# -- files that read, but disagree --------------------------------------------------------------


@pytest.mark.parametrize("case", list(INCONSISTENT))
def test_a_hand_edit_that_breaks_the_books_is_refused_and_nothing_changes(templates, ws, case):
    damage, damaged_file, gate_names = INCONSISTENT[case]
    partial, finished, before_partial, before_finished = damaged_pair(templates, ws, damage)

    assert_one_line_naming(resume(ws, partial), USAGE_ERROR, partial / damaged_file)
    assert_one_line_naming(predbench("status", str(partial)), 2, partial / damaged_file)
    assert_one_line_naming(predbench("status", str(finished)), 2, finished / damaged_file)

    refused = predbench("report", str(finished))
    assert refused.returncode == 1 and "Traceback" not in refused.stderr, refused.stderr
    header, *offences = refused.stderr.splitlines()
    assert "nothing was published" in header and offences
    assert any(line.startswith(gate_names) for line in offences), offences

    assert_untouched(partial, before_partial)
    assert_untouched(finished, before_finished)
    assert not any((finished / name).exists() for name in (JSON_NAME, MARKDOWN_NAME, HTML_NAME))


def test_a_refused_report_marks_the_pages_an_earlier_report_left_as_stale(templates, ws):
    finished = copy_of(templates["finished"], ws, "finished")
    published = predbench("report", str(finished))
    assert published.returncode == 0, published.stderr
    # the contrast: a report that published carries no banner
    assert STALE_MARK not in (finished / HTML_NAME).read_text()
    assert STALE_MARK not in (finished / MARKDOWN_NAME).read_text()

    _remove(ITEM)(finished)
    for _ in range(2):  # refused twice: still one banner
        refused = predbench("report", str(finished))
        assert refused.returncode == 1 and "Traceback" not in refused.stderr, refused.stderr
    assert f"marked stale: {finished / HTML_NAME}" in refused.stderr
    page, markdown = (finished / HTML_NAME).read_text(), (finished / MARKDOWN_NAME).read_text()
    assert page.count(f'id="{STALE_MARK}"') == 1 and "a later report of this run was refused" in page
    assert markdown.startswith(f"> {STALE_MARK}: STALE") and markdown.count(STALE_MARK) == 1


# -- the views: rebuilt from items/ -------------------------------------------------------------

VIEWS: dict[str, Callable[[Path], Path]] = {
    "checkpoint truncated": _truncate("checkpoint.json"),
    "checkpoint hand-edited (everything done)": _edit(
        "checkpoint.json", lambda d: d.update(done=d["done"] + d["remaining"], remaining=[])
    ),
    "checkpoint missing": _remove("checkpoint.json"),
    "results file truncated": _truncate("results/fake__alpha.jsonl"),
    "results file garbage": _write("results/fake__alpha.jsonl", b"\xff\x00 not json\n"),
    "results file emptied": _write("results/fake__beta.jsonl", b""),
    "results file with a forged line": lambda run: _forge_result(run / "results" / "fake__beta.jsonl"),
}


def _forge_result(path: Path) -> Path:
    line = json.loads(path.read_text().splitlines()[0])
    line.update(item="fake/beta-s02", session=2, verified_rules=["Forged => Rule"])
    path.write_text(path.read_text() + json.dumps(line) + "\n")
    return path


def views_of(run: Path) -> tuple[Checkpoint, dict[str, list[ResultLine]]]:
    rundir = RunDir(run)
    checkpoint = Checkpoint.model_validate_json(rundir.checkpoint.read_text())
    results = {
        model: [ResultLine.model_validate_json(x) for x in rundir.results_file(model).read_text().splitlines()]
        for model in MODELS
    }
    return checkpoint, results


@pytest.mark.parametrize("case", list(VIEWS))
def test_a_damaged_view_is_rebuilt_from_the_records_on_resume(templates, ws, case):
    partial = copy_of(templates["partial"], ws, "partial")
    finished = copy_of(templates["finished"], ws, "finished")
    VIEWS[case](partial)
    VIEWS[case](finished)
    records_before = {p.name: p.read_bytes() for p in (partial / "items").iterdir()}
    ledger_before = json.loads((partial / "ledger.json").read_text())

    assert predbench("status", str(partial)).returncode == 0  # status reads no view
    resumed = resume(ws, partial)
    assert resumed.returncode == 0, resumed.stdout[-2000:]

    run = RunDir(partial)
    stored = read_plan(run.plan)
    records = audited_records(read_snapshot(run.path))
    assert sorted(records) == sorted(DONE + REMAINING), "the remaining items ran, the done ones did not"
    for name, data in records_before.items():
        assert (partial / "items" / name).read_bytes() == data, f"{name} changed"
    ledger_after = json.loads((partial / "ledger.json").read_text())
    assert ledger_after["charges"][: len(ledger_before["charges"])] == ledger_before["charges"]
    assert len(ledger_after["charges"]) == len(ledger_before["charges"]) + len(REMAINING)

    checkpoint, results = views_of(partial)
    expected = checkpoint_of(stored.plan, records)
    assert checkpoint.model_dump(exclude={"updated_at"}) == expected.model_dump(exclude={"updated_at"})
    assert checkpoint.done == [item.key for item in stored.plan.items()] and checkpoint.remaining == []
    for model in MODELS:
        keys = [line.item for line in results[model]]
        assert keys == [f"{model}-s01", f"{model}-s02"], "one line per terminal record, no forged line"
        assert all(line == ResultLine.of(records[line.item]) for line in results[model])

    # a finished run: report and status read the records, never the views
    published = predbench("report", str(finished))
    assert published.returncode == 0, published.stderr
    board = json.loads((finished / JSON_NAME).read_text())
    assert [row["sessions"] for row in board["models"]] == [2, 2]
    assert all(row["rules"] == [] for row in board["models"]), "the forged line counts for nothing"
    assert predbench("status", str(finished)).returncode == 0


def test_a_leftover_temp_file_of_an_interrupted_write_is_not_a_record(templates, ws):
    """What an atomic write leaves when killed before its rename: ignored, and the run resumes."""
    partial = copy_of(templates["partial"], ws, "partial")
    (partial / "items" / ".fake__alpha-s02.json.x1y2.tmp").write_text('{"item": "fake/alpha-s02", "sta')
    (partial / ".ledger.json.x1y2.tmp").write_text("{")
    assert predbench("status", str(partial)).returncode == 0
    assert resume(ws, partial).returncode == 0
    run = RunDir(partial)
    assert sorted(audited_records(read_snapshot(run.path))) == sorted(DONE + REMAINING)


def test_state_damaged_while_the_run_goes_ends_it_with_one_line_not_a_traceback(ws):
    """A record damaged while the run is still going (its first item done, the second running): the
    end of the run reads the whole state once more, finds the damage and says so in one line naming
    the file, with a failing exit code, and does not rewrite the damaged file."""
    run = ws.run_dir("damaged-late")
    proc = ws.start(*fake_args(run, "--sessions", "2", "--fake-seconds", "3", "-p", "no:xdist", models=("fake/a",)),
                    log=ws.root / "log")  # fmt: skip
    victim = RunDir(run).item_record("fake/a-s01")
    deadline = time.monotonic() + 120
    while not victim.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert victim.exists() and proc.poll() is None, "the first item was recorded while the second ran"
    victim.write_text('{"half": ')
    assert proc.wait(timeout=120) == 1
    log = (ws.root / "log").read_text()
    assert "Traceback" not in log and "INTERNALERROR" not in log, log[-3000:]
    [line] = [line for line in log.splitlines() if "the run's state could not be read" in line]
    assert str(victim) in line, line
    assert victim.read_text() == '{"half": '
