"""The four outcomes of a verification, against the real pred: accepted, rejected, inconclusive (the
verifier's own limits cut it short: never a false alarm) and error (the verifier failed: predbench's
fault, never the certificate's). Each case has its contrast: the same certificate, the plant removed
or the limit lifted, gets its verdict."""

import json

import pytest

from pytest_predbench import cli
from pytest_predbench.verify import reach, verifier
from pytest_predbench.verify.certificate import parse_certificate
from pytest_predbench.verify.pred import PredLimits
from pytest_predbench.verify.verdict import Outcome, Verdict
from pytest_predbench.verify.verifier import verify, verify_text
from tests.test_verifier import path3_ensemble

CHECKS = ("check_instance", "rederive", "check_solutions", "extract", "confirm_extraction")
TINY = PredLimits(timeout_s=0.001)
"""A wall-clock limit no process can meet: the first call is killed before it answers."""


def run(cert: dict, env_record, **kwargs) -> Verdict:
    return verify_text(json.dumps(cert), env_record, **kwargs)


@pytest.mark.parametrize("check", CHECKS)
def test_an_exception_planted_in_a_check_is_an_error_not_a_rejection(genuine, env_record, monkeypatch, check):
    def planted(*args, **kwargs):
        raise ZeroDivisionError("planted in the verifier")

    monkeypatch.setattr(verifier._Verification, check, planted)
    verdict = run(genuine, env_record)
    assert verdict.outcome is Outcome.ERROR and not verdict.accepted and not verdict.rejected
    assert "ZeroDivisionError: planted in the verifier" in verdict.reason and "fault of predbench" in verdict.reason
    monkeypatch.undo()
    assert run(genuine, env_record).outcome is Outcome.ACCEPTED  # the contrast: no plant, the bug


def test_a_call_past_the_wall_clock_limit_is_inconclusive(genuine, env_record):
    verdict = run(genuine, env_record, limits=TINY)
    assert verdict.outcome is Outcome.INCONCLUSIVE and not verdict.rejected
    cut = verdict.checks[-1]  # whichever check's call the 1 ms limit stopped first (load decides which)
    assert any(call.timed_out for call in cut.evidence) and not cut.passed
    assert all(check.passed for check in verdict.checks[:-1])
    assert verdict.reason.startswith(f"inconclusive at {cut.name}") and "time limit" in verdict.reason
    assert run(genuine, env_record, limits=reach.longer(TINY, 10_000)).accepted  # a longer limit decides it


def test_a_solve_past_its_cpu_limit_is_inconclusive_not_a_false_alarm(env_record, pred):
    """The CPU limit, not the clock, stops a long search (the machine's load cannot spend CPU time):
    the wall-clock backstop is far away, and the verdict says which limit it was."""
    verdict = run(path3_ensemble(pred), env_record, limits=PredLimits(cpu_s=1, timeout_s=600))
    assert verdict.outcome is Outcome.INCONCLUSIVE, verdict.reason
    assert verdict.reason.startswith("inconclusive at violation") and "used up its 1 s of CPU time" in verdict.reason
    solves = [c for c in verdict.checks[-1].evidence if c.argv[:2] == ["pred", "solve"]]
    [solve] = [c for c in solves if "brute-force" in c.argv]
    assert not solve.timed_out and solve.seconds < 600
    assert [c.argv[4] for c in solves] == ["brute-force", "ilp"]  # brute force cut short: pred's ILP is asked too


def test_the_verdict_of_an_old_record_reads_its_outcome_from_accepted():
    assert Verdict.model_validate({"accepted": True, "reason": "r"}).outcome is Outcome.ACCEPTED
    assert Verdict.model_validate({"accepted": False, "reason": "r"}).outcome is Outcome.REJECTED
    assert Verdict(outcome=Outcome.INCONCLUSIVE, reason="r").accepted is False
    with pytest.raises(ValueError, match="contradicts"):
        Verdict(accepted=True, outcome=Outcome.INCONCLUSIVE, reason="r")


def test_brute_force_and_ilp_disagreeing_is_a_rejection(env_record, pred, tmp_path, monkeypatch):
    """Two of pred's solvers disagreeing on the target's optimum prove nothing: the claim is unproven,
    a rejection (both answered, so no longer limit would settle it), never brute force's word alone."""
    from tests.test_verifier import MIS, SAT, incomplete, job, pred_json

    bundle = pred_json(pred, "reduce", "-", "--to", MIS, stdin=SAT)
    (tmp_path / "target.json").write_text(json.dumps(bundle["target"]))
    verification = job(incomplete(pred, SAT, MIS, [0, 1, 0]), pred, env_record, tmp_path)
    best, how, _, _ = verification._optimum("target.json", "target")
    assert "pred's ILP agrees" in how  # the contrast: the real solvers agree
    solve = verifier._Verification._solve

    def ilp_says_otherwise(self, problem_file, solver):
        call, answer = solve(self, problem_file, solver)
        if solver == "ilp" and answer is not None:
            answer = {**answer, "evaluation": "Max(0)"}
        return call, answer

    monkeypatch.setattr(verifier._Verification, "_solve", ilp_says_otherwise)
    with pytest.raises(verifier.Rejected) as rejected:
        verification._optimum("target.json", "target")
    assert f"brute force and ILP disagree on the target's optimum ({best} vs Max(0))" in rejected.value.detail
    assert not rejected.value.undecided  # a rejection, not an inconclusive verification


def test_the_verifiers_limits_cover_the_prompts_promise_with_margin():
    """One figure (reach.BRUTE_FORCE_CONFIGS_PER_SECOND) sets both: the search the prompt promises
    within the command timeout fits the verifier's CPU limit twice over, at any command timeout."""
    for timeout in (10.0, 60.0, 600.0):
        promised = reach.promised_configurations(timeout)
        seconds_at_promised_rate = promised / reach.BRUTE_FORCE_CONFIGS_PER_SECOND
        limits = reach.verifier_limits(timeout)
        assert limits.cpu_s >= 2 * seconds_at_promised_rate and limits.cpu_s >= 2 * timeout
        assert limits.timeout_s >= 10 * limits.cpu_s  # the clock is only a backstop
        assert 2 ** reach.brute_force_reach(timeout)["brute_force_binary"] <= promised
    assert verifier.DEFAULT_LIMITS == reach.verifier_limits(60.0)


# -- predbench verify: its own exit code and count for each outcome --------------------------------


def test_cli_verify_exit_3_and_an_error_count_when_the_verifier_fails(genuine, tmp_path, monkeypatch, capsys):
    cert = tmp_path / "cert.json"
    cert.write_text(json.dumps(genuine))
    monkeypatch.setattr(verifier._Verification, "check_solutions", lambda self: 1 / 0)
    assert cli.main(["verify", "-j", "1", str(cert)]) == cli.INTERNAL
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"ERROR {cert}: error: the verifier failed (ZeroDivisionError")
    assert out[-1].endswith("0 accepted, 0 rejected, 0 inconclusive, 1 error")
    monkeypatch.undo()
    assert cli.main(["verify", str(cert)]) == cli.OK  # the contrast


def test_cli_verify_exit_4_and_an_inconclusive_count_when_a_limit_cuts_it_short(genuine, tmp_path, monkeypatch, capsys):
    cert = tmp_path / "cert.json"
    cert.write_text(json.dumps(genuine))
    bogus = tmp_path / "bogus.json"
    bogus.write_text("{")
    monkeypatch.setattr(verifier, "DEFAULT_LIMITS", TINY)
    assert cli.main(["verify", str(cert)]) == cli.INCONCLUSIVE
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"INCONCLUSIVE {cert}: inconclusive at instance")
    assert out[-1].endswith("0 accepted, 0 rejected, 1 inconclusive, 0 error")
    assert cli.main(["verify", str(cert), str(bogus)]) == cli.FAILED  # a rejection says more
    monkeypatch.undo()
    assert cli.main(["verify", str(cert)]) == cli.OK  # the contrast


def test_calibration_does_not_take_an_inconclusive_verdict_for_a_rejection(env_record, monkeypatch):
    from pytest_predbench.verify.calibration import run_case
    from tests.support.versions import CALIBRATION_DIR

    case = CALIBRATION_DIR / "altered_target.json"
    assert run_case(case, env_record).ok
    monkeypatch.setattr(verifier, "DEFAULT_LIMITS", TINY)
    outcome = run_case(case, env_record)
    assert not outcome.ok and "expected rejected, got inconclusive" in outcome.mismatches[0]


def test_a_certificate_object_changed_after_validation_is_still_rejected_not_an_error(genuine, env_record):
    cert = parse_certificate(json.dumps(genuine))
    cert.target_solution = [object()]  # type: ignore[list-item]
    assert verify(cert, env_record).outcome is Outcome.REJECTED
