"""The verifier reaches at least as far as the session, within a bounded cost per certificate
(verify/reach.py): each call's memory is at least the session's, brute force cut short by a limit
is followed by pred's ILP (which can disprove a claimed optimum, never prove one), and all the calls
of one verification share a CPU budget past which the claim is undecided. Against the real pred."""

import json
from pathlib import Path

import pytest

from benchmarks.certificate_cost import slow_claim
from pytest_predbench.session.protocol import SessionLimits
from pytest_predbench.verify import reach, verifier
from pytest_predbench.verify.certificate import parse_certificate
from pytest_predbench.verify.pred import Budget, Pred, PredLimits, limit_hit, stopped_by_limit
from pytest_predbench.verify.verdict import Outcome
from pytest_predbench.verify.verifier import verify

CUT_SHORT = PredLimits(cpu_s=1, timeout_s=600)
"""One CPU second per call: brute force on 2^42 configurations stops at it, pred's ILP answers within it."""


@pytest.fixture(scope="module")
def claim(env_record):
    return parse_certificate(json.dumps(slow_claim(env_record)))


def test_each_calls_memory_is_at_least_the_sessions():
    for mib in (64, 1024, 4096, 16384):
        assert reach.verifier_limits(session_memory_mib=mib).memory_bytes >= mib * 2**20
    assert verifier.DEFAULT_LIMITS.memory_bytes >= SessionLimits().memory_mib * 2**20
    assert SessionLimits().memory_mib == reach.SESSION_MEMORY_MIB  # one fact, in one place


def test_brute_force_cut_short_then_pred_s_ilp_decides(claim, env_record):
    """A false claim on a correct rule, in an instance brute force cannot enumerate within its limit:
    not `inconclusive` forever, but rejected on the better solution pred's ILP finds."""
    verdict = verify(claim, env_record, limits=CUT_SHORT)
    assert verdict.outcome is Outcome.REJECTED, verdict.reason
    assert "not optimal" in verdict.reason and "pred's ILP finds" in verdict.reason
    solvers = [c.argv[4] for c in verdict.checks[-1].evidence if c.argv[:2] == ["pred", "solve"]]
    assert solvers == ["brute-force", "ilp"]
    brute = next(c for c in verdict.checks[-1].evidence if c.argv[:2] == ["pred", "solve"] and "brute-force" in c.argv)
    assert stopped_by_limit(brute) and not brute.over_budget


def test_the_contrast_an_ilp_answer_proves_no_optimum(claim, env_record, monkeypatch):
    """The ILP's solution no better than the claimed one (here: the claim made to hold its value)
    leaves the claim undecided: a MIP solver's answer is not a proof of optimality."""
    found = verifier._Verification._ilp_instead

    def claimed_is_as_good(self, problem_file, role, why, evidence, largest):
        answer = found(self, problem_file, role, why, evidence, largest)
        return None if answer is None else (verifier.Evaluation.parse("Max(0)"), *answer[1:])

    monkeypatch.setattr(verifier._Verification, "_ilp_instead", claimed_is_as_good)
    verdict = verify(claim, env_record, limits=CUT_SHORT)
    assert verdict.outcome is Outcome.INCONCLUSIVE and "proves no optimum" in verdict.checks[-1].detail


def test_past_its_budget_the_claim_is_undecided(claim, env_record):
    """A budget that brute force alone spends: the ILP is not run at all, and the claim is undecided;
    the contrast (the same limits, budget enough for both) is decided."""
    spent = CUT_SHORT.model_copy(update={"budget_cpu_s": 1.0})
    verdict = verify(claim, env_record, limits=spent)
    assert verdict.outcome is Outcome.INCONCLUSIVE, verdict.reason
    skipped = [c for c in verdict.checks[-1].evidence if c.over_budget]
    assert skipped and "ilp" in skipped[0].argv
    assert "budget" in limit_hit(skipped[0], spent)
    enough = CUT_SHORT.model_copy(update={"budget_cpu_s": 3.0})
    assert verify(claim, env_record, limits=enough).outcome is Outcome.REJECTED


def test_a_spent_budget_runs_no_call(pred, tmp_path):
    budget = Budget(cpu_s=0.0)
    skipped = Pred(Path(pred.binary), pred.limits, budget=budget).run("--version", cwd=tmp_path)
    assert skipped.over_budget and stopped_by_limit(skipped) and skipped.exit_code is None
    left = Budget(cpu_s=5.0)
    ran = Pred(Path(pred.binary), pred.limits, budget=left).run("--version", cwd=tmp_path)
    assert ran.ok and not ran.over_budget and ran.cpu_seconds is not None
    assert left.left() == pytest.approx(5.0 - ran.cpu_seconds)


def test_the_stated_bound_is_the_budgets_of_the_run_and_the_reports_two_tries():
    bound = reach.certificate_cost_bound(60.0)
    one = reach.verification_cpu_bound(60.0)
    assert one == reach.verifier_limits(60.0).budget_cpu_s + reach.BUDGET_GRAIN_S
    longer = reach.longer(reach.verifier_limits(60.0))
    assert bound["report_cpu_s"] == one + longer.budget_cpu_s + reach.BUDGET_GRAIN_S
    assert bound["total_cpu_s"] == bound["run_cpu_s"] + bound["report_cpu_s"]
