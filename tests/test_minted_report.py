"""The report on a run on a minted bug pool, in process: the pool loaded from the plan (and refused
when missing or changed), each accepted certificate attributed by the pristine build's verdict (real
pred), minted recall by band beside the real bugs, the merge gate, the outputs and the data layer.
The end-to-end run of a demo session on the real test pool is tests/test_minted_run.py."""

import csv
import io

import pandas
import pytest

from pytest_predbench.report import minted, scoring
from pytest_predbench.report.frames import certificates_df
from pytest_predbench.report.gate import merge_offences
from pytest_predbench.report.leaderboard import Pristine, _score, default_verifier
from pytest_predbench.report.model import Comparison, Reverification
from pytest_predbench.report.render import render_comparison_markdown, render_html, render_markdown
from pytest_predbench.report.results_csv import results_csv
from pytest_predbench.report.scoring import Accepted
from pytest_predbench.state.plan import PoolInfo
from pytest_predbench.verify import pool as pools
from pytest_predbench.verify.verdict import Outcome
from tests.support.pool_manifests import rule, write_pool
from tests.support.report_runs import bogus_certificate, genuine_certificate
from tests.support.versions import TEST_VERSION
from tests.test_scoring import snapshot, verdict

MVC = ("MinimumVertexCover", {"graph": "SimpleGraph", "weight": "One"})
ENSEMBLE = ("EnsembleComputation", {})
GENUINE_RULE = "MinimumVertexCover -> EnsembleComputation"
OTHER = rule("Satisfiability", {}, "MaximumIndependentSet", {"graph": "SimpleGraph", "weight": "One"})
REGISTRY_ID = "minimumvertexcover-to-ensemblecomputation"


def on_pool(snap, pool: pools.Pool):
    snap.plan.options.bug_pool = str(pool.root)
    snap.plan.pool = PoolInfo(digest=pool.digest, seed=pool.manifest.seed, bugs=[b.id for b in pool.manifest.bugs])
    return snap


def two_bug_pool(root) -> pools.Pool:
    """minted-01 on the genuine certificate's rule (easy), minted-02 elsewhere (hard)."""
    return pools.load_pool(write_pool(root, [([rule(*MVC, *ENSEMBLE)], 90), ([OTHER], 5)], TEST_VERSION))


# -- the pool, from the plan ---------------------------------------------------------------------


def test_the_report_loads_the_runs_pool_and_refuses_a_missing_or_changed_one_in_a_line(tmp_path):
    pool = two_bug_pool(tmp_path / "pool")
    plain = snapshot(tmp_path / "plain", {1: []})
    assert minted.run_pool(plain) is None
    snap = on_pool(snapshot(tmp_path / "run", {1: []}), pool)
    assert minted.run_pool(snap).digest == pool.digest

    write_pool(tmp_path / "pool", [([OTHER], 90)], TEST_VERSION, seed=2)  # minted again in its place
    with pytest.raises(pools.PoolError) as changed:
        minted.run_pool(snap)
    assert f"the run was planned on {pool.digest[:12]}" in str(changed.value)
    assert "\n" not in str(changed.value)

    snap.plan.options.bug_pool = str(tmp_path / "gone")
    with pytest.raises(pools.PoolError) as missing:
        minted.run_pool(snap)
    assert "is not a bug pool" in str(missing.value) and str(tmp_path / "gone") in str(missing.value)
    assert "\n" not in str(missing.value)


# -- attribution on the pristine build (real pred) -----------------------------------------------


def test_the_pristine_build_tells_a_real_bug_from_a_minted_find(tmp_path, env_record):
    """The genuine certificate is accepted on pristine 0.5.0: a real bug. One the pristine build
    rejects is a minted find when a minted bug changes its rule, unattributed when none does."""
    pool = two_bug_pool(tmp_path / "pool")
    snap = on_pool(snapshot(tmp_path / "run", {1: []}), pool)
    pristine = Pristine(pool, default_verifier)

    def attributed(certificate):
        entry = Accepted(0, "m/a-s01", 1, "m/a", "m/a-s01", certificate, verdict(Outcome.ACCEPTED, rule=GENUINE_RULE))
        found, offence = pristine.attribute(entry, snap, (scoring.canonical_json(certificate.model_dump()), 60.0))
        assert offence is None
        return found

    real = attributed(genuine_certificate())
    assert (real.origin, real.minted) == (minted.REAL, ("minted-01",))
    planted = attributed(bogus_certificate())
    assert (planted.origin, planted.minted) == (minted.MINTED, ("minted-01",))
    assert pristine.env.pred_sha256 == env_record.pred_sha256  # the version's own build

    elsewhere = pools.load_pool(write_pool(tmp_path / "elsewhere", [([OTHER], 90)], TEST_VERSION))
    stray = Pristine(elsewhere, default_verifier)
    entry = Accepted(0, "m/a-s01", 1, "m/a", "m/a-s01", bogus_certificate(), verdict(Outcome.ACCEPTED))
    found, _ = stray.attribute(entry, snap, ("bogus", 60.0))
    assert (found.origin, found.minted) == (minted.UNATTRIBUTED, ())


# -- scoring -------------------------------------------------------------------------------------


def pool_board_inputs(tmp_path):
    """A pool run of one model, two sessions: s01 found minted-01 and a false alarm, s02 a real bug
    (the registry's) and one on the minted build only."""
    pool = two_bug_pool(tmp_path / "pool")
    snap = on_pool(
        snapshot(
            tmp_path / "run",
            {
                1: [verdict(Outcome.ACCEPTED, "suboptimal_extraction", GENUINE_RULE), verdict(Outcome.REJECTED)],
                2: [
                    verdict(Outcome.ACCEPTED, "suboptimal_extraction", GENUINE_RULE),
                    verdict(Outcome.ACCEPTED, "unsound_extraction", "X -> Y"),
                ],
            },
        ),
        pool,
    )
    s1, s2 = sorted(snap.by_item())
    records = snap.by_item()

    def entry(item, n, origin, ids):
        return Accepted(0, item, n, "m/a", item, genuine_certificate(), records[item].verdicts[n - 1], origin, ids)

    found = [
        entry(s1, 1, minted.MINTED, ("minted-01",)),
        entry(s2, 1, minted.REAL, ("minted-01",)),
        entry(s2, 2, minted.UNATTRIBUTED, ()),
    ]
    return pool, snap, found


def test_minted_recall_by_band_beside_real_bugs_counted_apart(tmp_path):
    pool, snap, found = pool_board_inputs(tmp_path)
    row = scoring.model_row(snap.plan.entrant_of("m/a"), [snap], scoring.sessions_of([snap], found), pool)
    assert (row.minted.found, row.minted.known, row.minted.ids) == (1, 2, ["minted-01"])
    assert {band: (r.found, r.known) for band, r in row.minted.bands.items()} == {
        "easy": (1, 1),
        "medium": (0, 0),
        "hard": (0, 1),
    }
    assert row.real_bugs == [GENUINE_RULE] and row.unattributed == ["X -> Y"]
    assert (row.recall.found, row.recall.ids) == (1, [REGISTRY_ID]), "the real bug is the registry's"
    assert row.candidates == [] and row.false_alarms == 1

    # the contrast: without the real certificate, the minted find on the same rule is no known bug
    alone = scoring.model_row(snap.plan.entrant_of("m/a"), [snap], scoring.sessions_of([snap], found[:1]), pool)
    assert (alone.minted.found, alone.recall.found, alone.real_bugs, alone.candidates) == (1, 0, [], [])
    # and on the version's own build the same certificate is the registry's bug
    plain = [a._replace(origin=None, minted=()) for a in found[:1]]
    ordinary = scoring.model_row(snap.plan.entrant_of("m/a"), [snap], scoring.sessions_of([snap], plain))
    assert (ordinary.minted, ordinary.real_bugs, ordinary.recall.found) == (None, None, 1)


# -- the gate ------------------------------------------------------------------------------------


def pool_lines(snaps) -> list[str]:
    return [o.why for o in merge_offences(snaps) if "bug pool" in o.why]


def test_runs_on_different_pools_or_a_pool_and_no_pool_are_not_pooled(tmp_path):
    one = two_bug_pool(tmp_path / "one")
    other = pools.load_pool(write_pool(tmp_path / "other", [([OTHER], 90)], TEST_VERSION))
    plain = snapshot(tmp_path / "plain", {1: []})
    a = on_pool(snapshot(tmp_path / "a", {1: []}), one)
    b = on_pool(snapshot(tmp_path / "b", {1: []}), other)
    c = on_pool(snapshot(tmp_path / "c", {1: []}), one)
    [line] = pool_lines([plain, a])
    assert line == (
        f"cannot pool runs on different bug pools: {tmp_path / 'plain'} is on no bug pool (pred {TEST_VERSION}'s "
        f"own build), this one on bug pool {one.digest[:12]}; put them side by side with --compare"
    )
    [line] = pool_lines([a, b])
    assert f"is on bug pool {one.digest[:12]}, this one on bug pool {other.digest[:12]}" in line
    assert pool_lines([a, c]) == [] and pool_lines([plain, snapshot(tmp_path / "plain2", {1: []})]) == []


# -- outputs -------------------------------------------------------------------------------------


def boards(tmp_path):
    pool, snap, found = pool_board_inputs(tmp_path)
    check = Reverification(pred_version=TEST_VERSION, pred_sha256="ab" * 32, certificates=3, distinct=2)
    check.pool, check.pristine_sha256, check.pristine_certificates = pool.label(), "cd" * 32, 2
    on = _score([snap], found, check, {}, tmp_path, pool)
    plain_snap = snapshot(tmp_path / "plain", {1: [verdict(Outcome.ACCEPTED, "suboptimal_extraction", GENUINE_RULE)]})
    [item] = plain_snap.by_item()
    entry = Accepted(0, item, 1, "m/a", item, genuine_certificate(), plain_snap.by_item()[item].verdicts[0])
    plain = _score([plain_snap], [entry], Reverification(pred_version=TEST_VERSION, pred_sha256="ab" * 32,
                                                          certificates=1, distinct=1), {}, tmp_path)  # fmt: skip
    return pool, on, plain


def test_a_pool_board_shows_minted_recall_and_real_bugs_an_ordinary_one_does_not(tmp_path):
    pool, on, plain = boards(tmp_path)
    assert on.pool.digest == pool.digest and on.runs[0].pool_digest == pool.digest
    text = render_markdown(on)
    assert "| minted recall | minted by difficulty | real bugs |" in text.replace("distinct bugs | ", "")
    assert "1 of 2 (minted-01) | easy 1 of 1, medium 0 of 0, hard 0 of 1 | 1 (" + GENUINE_RULE + ")" in text
    assert (
        "found 1 of 2 minted bugs (minted-01)" in text and "On the minted build only, on no minted rule: X -> Y" in text
    )
    assert "minted build only" in text, "the unattributed rule's row says what it is, not 'candidate'"
    assert f"bug pool | {pool.label()}, digest {pool.digest}" in text
    assert "and 2 accepted one(s) again on the pristine pred" in text
    html = render_html(on)
    assert 'class="minted-recall"' in html and "minted recall</th>" in html
    for ordinary in (render_markdown(plain), render_html(plain)):
        assert "minted" not in ordinary and "bug pool" not in ordinary


def test_compare_labels_the_pool_and_the_csv_gets_pool_columns_only_with_a_pool(tmp_path):
    pool, on, plain = boards(tmp_path)
    text = render_comparison_markdown(Comparison(boards=[on, plain], pairwise=[]))
    assert "| run | pred | bug pool | model |" in text
    assert f"| run | {TEST_VERSION} | pool {pool.digest[:12]} | m/a |" in text  # each run by its id
    assert f"| plain | {TEST_VERSION} | pristine | m/a |" in text
    only_plain = render_comparison_markdown(Comparison(boards=[plain, plain], pairwise=[]))
    assert "bug pool" not in only_plain and "minted" not in only_plain

    rows = list(csv.DictReader(io.StringIO(results_csv([on, plain]))))
    assert [(r["pool"], r["minted_bugs"], r["real_bugs"]) for r in rows] == [
        (f"pool {pool.digest[:12]}", "minted-01", ""),
        (f"pool {pool.digest[:12]}", "", GENUINE_RULE),
        ("pristine", "", ""),
    ]
    assert "pool" not in results_csv([plain]).splitlines()[0].split(",")


def test_certificates_df_names_the_minted_bugs_and_takes_the_reports_origins(tmp_path):
    pool, snap, _ = pool_board_inputs(tmp_path)
    s1, s2 = sorted(snap.by_item())
    origins = {(1, s1, 1): minted.MINTED, (1, s2, 1): minted.REAL, (1, s2, 2): minted.UNATTRIBUTED}
    frame = certificates_df([snap], origins).set_index(["item", "n"])
    assert frame.loc[(s1, 1), "minted_bugs"] == ["minted-01"] and frame.loc[(s1, 1), "real_bug"] is False
    assert frame.loc[(s1, 1), "known_bugs"] == [], "a minted find is not the registry's bug"
    assert frame.loc[(s2, 1), "real_bug"] is True and frame.loc[(s2, 1), "known_bugs"] == [REGISTRY_ID]
    assert frame.loc[(s1, 2), "minted_bugs"] == [] and pandas.isna(frame.loc[(s1, 2), "origin"])  # a false alarm
    assert set(frame["pool"]) == {pool.digest}
    unknown = certificates_df([snap]).set_index(["item", "n"])
    assert pandas.isna(unknown.loc[(s1, 1), "real_bug"]), "without the report's verdicts it is not known"
    plain = certificates_df([snapshot(tmp_path / "plain", {1: [verdict(Outcome.ACCEPTED, rule=GENUINE_RULE)]})])
    assert plain["pool"].isna().all() and plain["minted_bugs"].isna().all()
