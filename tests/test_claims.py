"""An undecided claim is an unconfirmed claim (verify/claims.py), on every surface that counts claims:
the one Tally every rate and precision comes from (a property test over random outcomes), the
progress table of the run's summary and `predbench status`, junitxml's properties, and the data
frames. In process, no pred: the fast tier."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_predbench.report.progress import ModelFigures
from pytest_predbench.report.tables import progress_text
from pytest_predbench.run.live import item_properties
from pytest_predbench.state.records import ItemStatus
from pytest_predbench.verify.claims import Tally, label
from pytest_predbench.verify.verdict import Outcome

JUDGED = st.lists(st.sampled_from([Outcome.ACCEPTED, Outcome.REJECTED, Outcome.INCONCLUSIVE]), max_size=30)


@given(JUDGED, st.data())
def test_turning_a_rejection_into_an_undecided_claim_changes_no_rate(outcomes, data):
    """Hiding a false claim in an undecidable instance gains nothing: the swap leaves every figure
    but the split itself as it was; turning it into a confirmed claim (a bug) does change them."""
    before = Tally.of(outcomes)
    rejected = [n for n, o in enumerate(outcomes) if o is Outcome.REJECTED]
    if not rejected:
        outcomes = [*outcomes, Outcome.REJECTED]
        before, rejected = Tally.of(outcomes), [len(outcomes) - 1]
    at = data.draw(st.sampled_from(rejected))
    hidden = Tally.of([Outcome.INCONCLUSIVE if n == at else o for n, o in enumerate(outcomes)])
    assert (hidden.precision, hidden.false_alarm_rate, hidden.unconfirmed) == (
        before.precision,
        before.false_alarm_rate,
        before.unconfirmed,
    )
    assert (hidden.rejected, hidden.undecided) == (before.rejected - 1, before.undecided + 1)
    confirmed = Tally.of([Outcome.ACCEPTED if n == at else o for n, o in enumerate(outcomes)])
    assert confirmed.precision > before.precision and confirmed.false_alarm_rate < before.false_alarm_rate


def test_an_error_is_no_claim_and_nothing_judged_has_no_rate():
    assert Tally.of([Outcome.ERROR, Outcome.ACCEPTED]) == Tally(confirmed=1)
    assert Tally.of([]).precision is None and Tally.of([Outcome.ERROR]).false_alarm_rate is None
    assert Tally(1, 2, 3) + Tally(1, 0, 1) == Tally(2, 2, 4)
    assert label(Outcome.INCONCLUSIVE) == "undecided" and label(Outcome.REJECTED) == "rejected"


def _figures(**changes) -> ModelFigures:
    values = dict(
        model="m/a", planned=2, done=2, skipped=0, infra=0, remaining=0, verified_bugs=["R"], confirmed=1,
        false_alarms=0, spent=0.0, cap=1.0, reserved=0.0,
    )  # fmt: skip
    return ModelFigures(**{**values, **changes})


def test_the_progress_table_shows_undecided_apart_and_its_precision_counts_it_as_unconfirmed():
    undecided = progress_text([_figures(inconclusive=1)], width=200).splitlines()
    header, row = undecided[0], undecided[2]
    assert "undecided" in header and "precision" in header and "inconclusive" not in header
    assert row.split()[header.split().index("precision") - 1] == "50%"  # the header's "false alarms" is two words
    rejected = _figures(false_alarms=1).claims
    assert rejected.precision == _figures(inconclusive=1).claims.precision == 0.5
    # the contrast: without an undecided certificate the table is as before
    assert "undecided" not in progress_text([_figures()], width=200)


def test_junitxml_properties_carry_the_precision_an_undecided_claim_lowers():
    def precision(**counts) -> object:
        return dict(item_properties("fake", ItemStatus.PASSED, certificates=2, **counts))["precision"]

    assert precision(accepted=1, inconclusive=1) == precision(accepted=1, rejected=1) == pytest.approx(0.5)
    assert precision(accepted=2) == 1.0 and precision() == ""


def test_the_data_frames_show_an_undecided_certificate_apart_and_unconfirmed(tmp_path):
    from pytest_predbench.report.frames import _session_row, certificates_df
    from tests.test_scoring import snapshot, verdict

    bug = verdict(Outcome.ACCEPTED, "suboptimal_extraction", "A -> B")
    snap = snapshot(tmp_path, {1: [bug, verdict(Outcome.INCONCLUSIVE)], 2: [bug, verdict(Outcome.REJECTED)]})
    frame = certificates_df([snap])
    assert list(frame["outcome"]) == ["accepted", "undecided", "accepted", "rejected"]
    assert list(frame["unconfirmed"]) == [False, True, False, True]
    first, second = (_session_row(1, snap, key, record, "done") for key, record in sorted(snap.by_item().items()))
    assert (first["undecided"], first["false_alarms"], second["undecided"], second["false_alarms"]) == (1, 0, 0, 1)
    assert first["precision"] == second["precision"] == 0.5  # the undecided one lowers it as the rejected one
