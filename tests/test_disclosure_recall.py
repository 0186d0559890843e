"""Recall apart on disclosed and undisclosed known bugs, and after a model's training cutoff; the
candidates for the registry with their certificates (fast tier: records built here, no pred)."""

from datetime import date

from pytest_predbench.report import frames, scoring
from pytest_predbench.report.gate import merge_offences
from pytest_predbench.report.leaderboard import _score
from pytest_predbench.report.model import Reverification
from pytest_predbench.report.render import render_html, render_markdown
from pytest_predbench.run.planning import identify_models
from pytest_predbench.session.model_settings import load_settings
from pytest_predbench.state.certificates import CertificateFiles
from pytest_predbench.state.plan import ModelIdentity, Plan, PlanOptions
from pytest_predbench.verify.certificate import Certificate
from pytest_predbench.verify.known_bugs import load_registry
from pytest_predbench.verify.verdict import Outcome
from tests.support.report_runs import genuine_certificate
from tests.support.versions import TEST_VERSION
from tests.test_scoring import BUG, accepted, snapshot, verdict

REGISTRY = load_registry(TEST_VERSION)
"""The process's version's registry, the one scoring counts against."""
GENUINE = "minimumvertexcover-to-ensemblecomputation"  # genuine_certificate()'s: disclosed 2026-04-14 (#1052)


def _disclosed(after: date | None = None) -> int:
    return sum(
        bug.disclosure.status == "disclosed" and (after is None or bug.disclosed_after(after)) for bug in REGISTRY.bugs
    )


def _identity(cutoff: date | None) -> ModelIdentity:
    return ModelIdentity(
        call_name="m", api_base=None, input_cost_per_token=1e-6, output_cost_per_token=1e-6, price_source="settings",
        training_cutoff=cutoff,
    )  # fmt: skip


def test_recall_is_counted_apart_on_disclosed_undisclosed_and_after_the_cutoff():
    bugs = {bug.id: bug for bug in REGISTRY.bugs}
    undisclosed = next(bug.id for bug in REGISTRY.bugs if bug.disclosure.status == "undisclosed")
    late = max((b for b in REGISTRY.bugs if b.disclosure.date), key=lambda b: b.disclosure.date)
    found = [GENUINE, undisclosed, late.id]
    cutoff = date(2026, 6, 1)
    assert bugs[GENUINE].disclosure.date < cutoff < late.disclosure.date
    recall = scoring.recall(REGISTRY, found, cutoff)
    assert (recall.found, recall.known) == (3, len(REGISTRY.bugs))
    assert (recall.disclosed.found, recall.disclosed.known) == (2, _disclosed())
    assert recall.undisclosed.ids == [undisclosed]
    assert recall.undisclosed.known == len(REGISTRY.bugs) - _disclosed()
    assert recall.after_cutoff.ids == [late.id] and recall.after_cutoff.known == _disclosed(cutoff)
    assert scoring.recall(REGISTRY, found).after_cutoff is None, "the contrast: no cutoff, no such figure"


def _board(tmp_path, cutoff: date | None, certificate: Certificate | None = None):
    snap = snapshot(tmp_path, {1: [verdict(Outcome.ACCEPTED, "suboptimal_extraction", BUG)]})
    if cutoff is not None:
        snap.plan.model_identities["m/a"] = _identity(cutoff)
    [item] = snap.by_item()
    found = [accepted(snap, item, 1)]
    if certificate is not None:  # on a rule the registry does not list, its file kept in the run
        found = [found[0]._replace(certificate=certificate)]
        (tmp_path / "certificates").mkdir(parents=True, exist_ok=True)
        (tmp_path / "certificates" / "c1.json").write_text(certificate.model_dump_json())
        record = snap.by_item()[item]
        record.certificate_files = [
            CertificateFiles(certificate="certificates/c1.json", verdict="certificates/v1.json")
        ]
    check = Reverification(pred_version=REGISTRY.pred_version, pred_sha256="0" * 64, certificates=1, distinct=1)
    return _score([snap], found, check, {}, tmp_path), snap


def test_the_training_cutoff_from_the_plan_splits_the_recall_on_every_page(tmp_path):
    before, _ = _board(tmp_path / "before", date(2026, 1, 1))  # the genuine bug was disclosed after it
    after, snap = _board(tmp_path / "after", date(2026, 6, 1))  # ... and before this one
    [row_before], [row_after] = before.models, after.models
    assert row_before.recall.after_cutoff.ids == [GENUINE] and row_after.recall.after_cutoff.found == 0
    assert row_after.recall.disclosed.ids == [GENUINE] and row_after.recall.undisclosed.found == 0
    clause = f"disclosed 1 of {_disclosed()}; undisclosed 0 of {len(REGISTRY.bugs) - _disclosed()}"
    for page in (render_markdown(before), render_html(before)):
        assert clause in page and f"training cutoff (2026-01-01) 1 of {_disclosed(date(2026, 1, 1))}" in page
    assert f"training cutoff (2026-06-01) 0 of {_disclosed(date(2026, 6, 1))}" in render_markdown(after)
    none, _ = _board(tmp_path / "none", None)
    assert none.models[0].recall.training_cutoff is None and clause in render_markdown(none)
    assert "its training cutoff (" not in render_markdown(none), "the contrast: no cutoff given, none shown"
    [row] = frames.certificates_df(snap).to_dict("records")
    assert (row["known_bugs"], row["disclosure"], row["disclosed_on"]) == ([GENUINE], "disclosed", date(2026, 4, 14))
    assert row["after_cutoff"] is False
    [plain] = frames.certificates_df(none_snap(tmp_path)).to_dict("records")
    assert plain["disclosure"] == "disclosed" and plain["after_cutoff"] is None


def none_snap(tmp_path):
    return snapshot(tmp_path / "plain", {1: [verdict(Outcome.ACCEPTED, "suboptimal_extraction", BUG)]})


def test_a_bug_outside_the_registry_is_listed_as_a_candidate_with_its_certificate(tmp_path):
    genuine = genuine_certificate()
    outside = genuine.model_copy(update={"target": genuine.target.model_copy(update={"type": "NotInTheRegistry"})})
    board, _ = _board(tmp_path / "outside", None, outside)
    markdown, html = render_markdown(board), render_html(board)
    assert "## Candidates for the registry" in markdown and "[#1](<certificates/c1.json>)" in markdown
    assert 'class="candidate-row"' in html and 'href="certificates/c1.json"' in html
    known, _ = _board(tmp_path / "known", None)
    assert "None: every bug found is in the registry." in render_markdown(known), "the contrast: a known bug"
    assert 'class="candidate-row"' not in render_html(known)


def test_the_model_settings_give_a_training_cutoff_and_a_plan_without_one_keeps_its_digest(tmp_path):
    settings = tmp_path / "models.toml"
    settings.write_text(
        '[models."my/model"]\ninput_cost_per_token = 1e-6\noutput_cost_per_token = 2e-6\ntraining_cutoff = 2026-06-30\n'
    )
    assert load_settings(settings)["my/model"].training_cutoff == date(2026, 6, 30)
    options = PlanOptions(runner="mini-swe", models=["my/model", "demo/finder"], model_settings=str(settings))
    identities = identify_models(options)  # what the plan records, and the report reads
    assert identities["my/model"].training_cutoff == date(2026, 6, 30)
    assert identities["demo/finder"].training_cutoff is None, "the contrast: a model without one"
    plan = Plan.model_validate(none_snap(tmp_path).plan.model_dump())
    plan.model_identities["m/a"] = _identity(None)
    digest = plan.digest()
    assert "training_cutoff" not in plan.content()["model_identities"]["m/a"]
    plan.model_identities["m/a"] = _identity(date(2026, 6, 30))
    assert plan.digest() != digest and plan.content()["model_identities"]["m/a"]["training_cutoff"] == "2026-06-30"


def test_runs_that_give_one_model_two_training_cutoffs_are_not_merged(tmp_path):
    first, second = none_snap(tmp_path / "first"), none_snap(tmp_path / "second")
    first.plan.model_identities["m/a"] = _identity(date(2026, 1, 1))
    second.plan.model_identities["m/a"] = _identity(date(2026, 6, 30))
    dated = "model m/a is given another training cutoff there"
    assert any(dated in o.why for o in merge_offences([first, second]))
    second.plan.model_identities["m/a"] = _identity(date(2026, 1, 1))
    assert not any("model m/a" in o.why for o in merge_offences([first, second])), "the contrast: the same cutoff"
