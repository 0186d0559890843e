"""Observations: normalised (trailing whitespace, blank-line runs) before they are bounded, and
ended by the budget line. The real pred's padded table is the case that motivated it."""

import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_predbench.session.observation import (
    LINE_CARRY_BYTES,
    MAX_OBSERVATION_BYTES,
    NOTES_BYTES,
    BoundedCapture,
    NormalizedCapture,
    budget_line,
    cut_marker,
    harness_notes,
)
from pytest_predbench.session.protocol import Accounting, SessionLimits
from pytest_predbench.verify.environment import checked_record
from tests.support.versions import TEST_VERSION


def normalized(*chunks: bytes, limit: int = 10_000) -> str:
    capture = NormalizedCapture(limit)
    for chunk in chunks:
        capture.feed(chunk)
    return capture.text()


def test_trailing_whitespace_goes_and_blank_runs_collapse():
    raw = b"a   \nb\t\t\n\n\n\n  c  \r\n   \n\t\nd"
    assert normalized(raw) == "a\nb\n\n  c\n\nd", "leading indentation stays; one blank line of each run"


@pytest.mark.parametrize("size", [1, 2, 3, 7])
def test_chunk_boundaries_do_not_matter(size):
    raw = b"row one      \n\n\n\nrow two  \t\nlast   "
    chunks = [raw[i : i + size] for i in range(0, len(raw), size)]
    assert normalized(*chunks) == normalized(raw) == "row one\n\nrow two\nlast"


def test_a_huge_line_is_passed_on_in_pieces_and_keeps_its_inner_spaces():
    word = b"x" * (LINE_CARRY_BYTES + 10)
    capture = NormalizedCapture(limit=4 * LINE_CARRY_BYTES)
    capture.feed(word)
    assert len(capture.carry) == 0, "not held back without bound"
    capture.feed(b"   y   \n")
    assert capture.text() == (word + b"   y\n").decode()


def test_normalising_comes_before_bounding():
    padded = b"".join(b"row %d" % i + b" " * 200 + b"\n" for i in range(100))
    bounded = BoundedCapture(2_000)
    bounded.feed(padded)
    assert "cut from the middle" in bounded.text(), "the contrast: padding alone overflows the bound"
    assert normalized(padded, limit=2_000).count("row ") == 100, "normalised, every row fits"


def test_the_real_pred_list_shrinks_to_a_third():
    pred = checked_record(TEST_VERSION).pred_path
    raw = subprocess.run([pred, "list", "--rules"], capture_output=True, check=True).stdout
    capture = NormalizedCapture(len(raw) + 1)
    capture.feed(raw)
    text = capture.text()
    assert capture.raw_total == len(raw) and len(text.encode()) < len(raw) / 3
    assert all(line == line.rstrip() for line in text.splitlines())
    rows = [line.rstrip() for line in raw.decode().splitlines() if line.strip()]
    assert [line for line in text.splitlines() if line] == rows, "no row is lost or changed but its padding"


def test_the_budget_line_names_every_limit_and_the_time_left():
    limits = SessionLimits(dollars=1.5, model_calls=60, pred_calls=150, wall_seconds=1800)
    used = Accounting(dollars=0.03125, model_calls=5, pred_calls=12)
    line = budget_line(used, limits, elapsed=988.4)
    assert line == "[harness] used 5/60 model calls, 12/150 pred calls, $0.0312/$1.5000; 811 s of 1800 s left"
    assert "\n" not in line
    assert budget_line(used, limits, elapsed=5000).endswith("; 0 s of 1800 s left")


def test_the_harness_notes_are_bounded_and_say_how_many_were_left_out():
    notes = [f"[harness] submission refused: not a well-formed certificate: {'x' * 4000}"] * 25
    text = harness_notes(notes)
    assert len(text.encode()) <= NOTES_BYTES
    assert text.endswith("more note(s) not shown") and text.startswith("\n[harness] submission refused")
    assert len("".join(f"\n{note}" for note in notes)) > 10 * MAX_OBSERVATION_BYTES  # contrast: unbounded
    assert harness_notes(["[harness] a", "[harness] b"]) == "\n[harness] a\n[harness] b"  # short ones whole


def test_everything_the_model_sees_after_a_command_is_within_the_bound():
    """The output cut to its share, the notes, the budget line, the timeout notice and the template."""
    import jinja2

    from pytest_predbench.session.agent import OBSERVATION_TEMPLATE

    capture = NormalizedCapture()
    capture.feed("é".encode() * 200_000)
    notes = [f"[harness] submission refused: {'y' * 700}"] * 20
    limits = SessionLimits(pred_calls=10**9, model_calls=10**9, dollars=10**9)
    used = Accounting(pred_calls=10**9, model_calls=10**9, dollars=10**9)
    output = {
        "output": capture.text() + harness_notes(notes),
        "budget": budget_line(used, limits, 0),
        "returncode": -1,
        "exception_info": "the command timed out after 99999s and was killed",
    }
    shown = jinja2.Template(OBSERVATION_TEMPLATE).render(output=output)
    assert len(shown.encode()) <= MAX_OBSERVATION_BYTES, len(shown.encode())
    unbounded = capture.text() + "".join(f"\n{note}" for note in notes)
    assert len(unbounded.encode()) > MAX_OBSERVATION_BYTES  # contrast: the notes appended after the cut


# -- the bound holds after decoding -------------------------------------------------------------------


def test_invalid_utf8_cannot_triple_the_bound():
    """Each invalid byte decodes to U+FFFD, three bytes: 10,000 of them once showed as 25,614."""
    capture = BoundedCapture(8_500)
    capture.feed(b"\xff" * 30_000)
    text = capture.text()
    marker = cut_marker(30_000, 30_000)
    assert len(text.encode()) <= 8_500 + len(marker.encode()) and "bytes cut" in text, len(text.encode())
    assert len((b"\xff" * 8_500).decode("utf-8", "replace").encode()) > 3 * 8_000  # contrast: counted before


@settings(max_examples=100, deadline=None)
@given(chunks=st.lists(st.binary(max_size=3_000), max_size=12), limit=st.integers(min_value=2, max_value=4_000))
def test_any_output_is_shown_within_the_bound(chunks, limit):
    capture = NormalizedCapture(limit)
    for chunk in chunks:
        capture.feed(chunk)
    text = capture.text()
    total = capture.total
    assert len(text.encode()) <= limit + len(cut_marker(total, total).encode())
    whole = bytes(capture.head).decode("utf-8", "replace")
    if total <= limit // 2 and len(whole.encode()) <= limit // 2:  # contrast: what fits is shown whole
        assert text == whole
