"""Atomic writes give a file the mode any new file gets under the umask: a run's state and a report
copied to a web server or a shared directory stay readable there (0644 under umask 0022), and a
stricter umask is honoured too (0600 under 0077, the contrast)."""

import os
import stat
from contextlib import contextmanager

import pytest

from pytest_predbench.files import umask, write_text_atomic
from tests.test_books import Runs, finish


@contextmanager
def process_umask(mask: int):
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.parametrize(
    "mask, expected", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)], ids=["umask-022", "umask-077", "umask-002"]
)
def test_an_atomic_write_honours_the_umask(tmp_path, mask, expected):
    target = tmp_path / "leaderboard.md"
    with process_umask(mask):
        assert umask() == mask
        write_text_atomic(target, "first\n")
        assert mode(target) == expected
        write_text_atomic(target, "second\n")  # replaced: still the mode of a new file, the text whole
    assert mode(target) == expected and target.read_text() == "second\n"
    assert [p.name for p in tmp_path.iterdir()] == ["leaderboard.md"], "no temp file left behind"


@pytest.mark.parametrize("mask, expected", [(0o022, 0o644), (0o077, 0o600)], ids=["umask-022", "umask-077"])
def test_a_runs_state_and_certificate_files_get_the_mode_of_new_files(tmp_path, mask, expected):
    with process_umask(mask):
        runs = Runs("directory", tmp_path, None, certified=True)
        state = runs.new()
        finish(state, "m/a-s01", 0.01, certified=True)
    written = [p for p in state.run.path.rglob("*") if p.is_file() and not p.name.startswith(".")]
    names = {p.relative_to(state.run.path).as_posix() for p in written}
    assert {"plan.json", "ledger.json", "checkpoint.json", "items/m__a-s01.json"} <= names
    assert "certificates/m__a-s01/01.json" in names and "certificates/m__a-s01/01.verdict.json" in names
    assert {p.relative_to(state.run.path).as_posix(): oct(mode(p)) for p in written} == {
        name: oct(expected) for name in names
    }
