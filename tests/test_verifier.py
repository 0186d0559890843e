"""The verifier against the real pred: every rejection path, each shown to matter.

Each rejection test changes one thing in a certificate that otherwise passes, and asserts the
check that rejects it, so removing that check makes the test fail.
"""

import copy
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from pytest_predbench.verify import verifier
from pytest_predbench.verify.certificate import MAX_CERTIFICATE_BYTES, parse_certificate
from pytest_predbench.verify.environment import PredEnvironmentError
from pytest_predbench.verify.exactness import library_arithmetic
from pytest_predbench.verify.extractor import Extractor
from pytest_predbench.verify.pred import Pred, PredLimits
from pytest_predbench.verify.verdict import Outcome
from pytest_predbench.verify.verifier import Evaluation, canonical, verify, verify_file, verify_text

REPO = Path(__file__).resolve().parent.parent
SAT = {
    "type": "Satisfiability",
    "variant": {},
    "data": {"num_vars": 3, "clauses": [{"literals": [1, 2]}, {"literals": [-1, 3]}, {"literals": [-2, -3]}]},
}
MIS = "MaximumIndependentSet/SimpleGraph/One"


def pred_json(pred: Pred, *args: str, stdin: dict) -> dict:
    """pred's JSON answer, read from its -o file (stdout is clipped as evidence)."""
    with tempfile.TemporaryDirectory() as tmp:
        call = pred.run(*args, "-o", "out.json", "-q", stdin=json.dumps(stdin), cwd=Path(tmp))
        assert call.ok, call.brief()
        return json.loads((Path(tmp) / "out.json").read_text())


def instance(problem: dict) -> dict:
    return copy.deepcopy({key: problem[key] for key in ("type", "variant", "data")})


def failed_check(verdict) -> str | None:
    return next((c.name for c in verdict.checks if not c.passed), None)


def check(verdict, name: str):
    return next(c for c in verdict.checks if c.name == name)


def run(cert: dict, env_record, **kwargs):
    return verify_text(json.dumps(cert), env_record, **kwargs)


# -- acceptance -------------------------------------------------------------------------------


def test_genuine_bug_is_accepted_on_the_librarys_evidence(genuine, env_record):
    verdict = run(genuine, env_record)
    assert verdict.accepted, verdict.reason
    assert verdict.violation == "suboptimal_extraction"
    assert [c.name for c in verdict.checks] == ["instance", "rederive", "solutions", "extraction", "violation"]
    assert all(c.passed for c in verdict.checks)
    assert verdict.rule == "MinimumVertexCover -> EnsembleComputation"
    commands = [call.command() for c in verdict.checks for call in c.evidence]
    assert commands[:2] == ["pred-extract validate", "pred-extract canonical"]
    assert commands[2].startswith("pred reduce source.json --via via.json")
    assert "pred-extract extract" in commands
    assert any(cmd.startswith("pred solve target.json --solver brute-force") for cmd in commands)
    extraction = json.loads(check(verdict, "extraction").evidence[0].stdout)
    assert extraction["source_solution"] == genuine["source_solution"] and extraction["target_matches"]
    assert verdict.pred_calls == len(commands) and verdict.seconds > 0
    assert "[1,1] (Min(2))" in verdict.reason and "[1,0] is Min(1)" in verdict.reason


def test_genuine_unsound_extraction_is_accepted(env_record):
    path = REPO / "fixtures" / "calibration" / "0.5.0" / "genuine_threepartition_to_flowshop_unsound.json"
    verdict = verify_file(path, env_record)
    assert verdict.accepted, verdict.reason
    assert verdict.violation == "unsound_extraction"
    extraction = json.loads(check(verdict, "extraction").evidence[0].stdout)
    assert extraction["target_evaluation"] == "Or(true)" and extraction["source_evaluation"] == "Or(false)"


def one_step(pred: Pred, source: dict, target: str, variant: dict) -> dict:
    """pred's bundle of the one rule from `source` to (target, variant)."""
    via = {
        "path": [
            {"from": {"name": source["type"], "variant": source["variant"]}, "to": {"name": target, "variant": variant}}
        ]
    }
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "via.json").write_text(json.dumps(via))
        (Path(tmp) / "source.json").write_text(json.dumps(source))
        call = pred.run("reduce", "source.json", "--via", "via.json", "-o", "out.json", "-q", cwd=Path(tmp))
        assert call.ok, call.brief()
        return json.loads((Path(tmp) / "out.json").read_text())


PACKING = {
    "type": "MaximumSetPacking",
    "variant": {"weight": "f64"},
    "data": {"sets": [[0], [1], [0, 1]], "weights": [1.0, 2.0, 4.0]},
}


def test_target_numbers_compare_as_json_values(env_record, pred):
    # pred prints QUBO weights as floats (-4.0); the same numbers written as ints are the same target.
    bundle = one_step(pred, PACKING, "QUBO", {"weight": "f64"})
    target = instance(bundle["target"])
    target["data"]["matrix"] = [[int(x) for x in row] for row in target["data"]["matrix"]]
    assert json.dumps(target["data"]) != json.dumps(bundle["target"]["data"])
    solved = pred_json(pred, "solve", "-", "--solver", "brute-force", stdin=bundle)
    cert = {
        "violation": "suboptimal_extraction",
        "source": PACKING,
        "target": target,
        "target_solution": solved["intermediate"]["solution"],
        "source_solution": solved["solution"],
        "better_source_solution": [1, 1, 0],
    }
    verdict = run(cert, env_record)
    assert check(verdict, "rederive").passed
    # The rule extracts the best packing ({2}: 4.0 beats {0,1}: 3.0), so the claim itself fails.
    assert not verdict.accepted and failed_check(verdict) == "solutions" and "not strictly better" in verdict.reason


def test_a_target_reached_in_several_steps_is_not_one_rule(genuine, env_record, pred):
    """One root cause on one instance is one rule: a route through intermediates is refused, naming the
    step to certify (a chain of correct hops was once accepted as a "bug", once per route)."""
    bundle = pred_json(pred, "reduce", "-", "--to", "QUBO", stdin=genuine["source"])
    assert len(bundle["path"]) > 2
    cert = {**genuine, "target": instance(bundle["target"])}
    cert.update(target_solution=[0] * 6, source_solution=[1, 1], better_source_solution=[1, 0])
    verdict = run(cert, env_record)
    assert failed_check(verdict) == "rederive" and "is not one rule" in verdict.reason
    last = bundle["path"][-2]
    assert f"--to {verifier.spec(last['name'], last['variant'])}" in verdict.reason


# -- step 1: re-derivation --------------------------------------------------------------------


def test_altered_target_is_rejected_at_rederivation(genuine, env_record):
    genuine["target"]["data"]["budget"] -= 1
    verdict = run(genuine, env_record)
    assert not verdict.accepted and failed_check(verdict) == "rederive"
    assert "target.data.budget" in verdict.reason


def test_rederivation_stops_a_forged_target_that_pred_solve_would_trust(env_record, pred):
    """pred 0.5.0's solve re-runs the reduction to extract and never checks the bundle's target."""
    bundle = pred_json(pred, "reduce", "-", "--to", MIS, stdin=SAT)
    forged = copy.deepcopy(bundle)
    forged["target"]["data"]["graph"]["edges"] = []
    trusted = pred_json(pred, "solve", "-", "--solver", "brute-force", stdin=forged)
    assert trusted["evaluation"] == "Or(false)", "pred itself maps the forged target's optimum to a non-solution"
    cert = {
        "violation": "unsound_extraction",
        "source": SAT,
        "target": instance(forged["target"]),
        "target_solution": trusted["intermediate"]["solution"],
        "source_solution": trusted["solution"],
    }
    verdict = run(cert, env_record)
    assert not verdict.accepted and failed_check(verdict) == "rederive"
    # Contrast: the honest target makes the same claim fail on pred's own round trip instead.
    honest = pred_json(pred, "solve", "-", "--solver", "brute-force", stdin=bundle)
    assert honest["evaluation"] == "Or(true)"


def test_unknown_target_type_is_rejected(genuine, env_record):
    genuine["target"]["type"] = "EnsembleComputations"
    verdict = run(genuine, env_record)
    assert failed_check(verdict) == "rederive" and "no one-step rule" in verdict.reason
    assert "-> EnsembleComputations" in verdict.reason


# -- step 2: the listed solutions ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"violation": "unsound_extraction", "better_source_solution": None}, "a valid solution"),
        ({"better_source_solution": [0, 0]}, "better_source_solution evaluates to Min(None)"),
        ({"better_source_solution": [1, 1]}, "not strictly better"),
        ({"better_source_solution": [0, 1, 0]}, "Config has 3 values but problem has 2 variables"),
        ({"source_solution": [1, 2]}, "out of range"),
        ({"target_solution": [0, 1, 2, 3, 0, 9]}, "out of range"),
        ({"target_solution": [0, 0, 0, 0, 0, 0]}, "not a valid target solution"),
    ],
    ids=[
        "unsound-but-valid",
        "better-invalid",
        "better-not-better",
        "wrong-length",
        "source-range",
        "target-range",
        "target-invalid",
    ],
)
def test_solution_recheck_rejects(genuine, env_record, change, expected):
    for key, value in change.items():
        genuine.pop(key) if value is None else genuine.update({key: value})
    verdict = run(genuine, env_record)
    assert not verdict.accepted and failed_check(verdict) == "solutions", verdict.reason
    assert expected in verdict.reason


# -- step 4: the library's own mapping back -----------------------------------------------------


def test_any_optimal_target_solution_qualifies_not_only_the_solvers_first(genuine, env_record, pred):
    target = json.dumps(genuine["target"])
    other = [1, 0, 2, 3, 0, 0]
    assert other != genuine["target_solution"]
    call = pred.run("evaluate", "-", "--config", ",".join(map(str, other)), stdin=target)
    assert json.loads(call.stdout)["result"] == "Min(2)", "an equally good target solution"
    first = pred_json(pred, "solve", "-", "--solver", "brute-force", stdin=json.loads(target))["solution"]
    assert first != other, "brute force returns another optimum first"
    genuine["target_solution"] = other
    verdict = run(genuine, env_record)
    assert verdict.accepted and "[1,0,2,3,0,0] (Min(2)) maps back to [1,1]" in verdict.reason
    # The contrast: a valid target solution that is not optimal does not qualify.
    genuine["target_solution"] = [0, 1, 0, 1, 2, 3]
    worse = run(genuine, env_record)
    assert failed_check(worse) == "violation" and "not optimal" in worse.reason and "Min(2)" in worse.reason


def test_source_solution_other_than_the_librarys_extraction_is_rejected(env_record, pred):
    bundle = pred_json(pred, "reduce", "-", "--to", MIS, stdin=SAT)
    solved = pred_json(pred, "solve", "-", "--solver", "brute-force", stdin=bundle)
    assert solved["evaluation"] == "Or(true)" and solved["solution"] != [1, 1, 1]
    cert = {
        "violation": "unsound_extraction",
        "source": SAT,
        "target": instance(bundle["target"]),
        "target_solution": solved["intermediate"]["solution"],
        "source_solution": [1, 1, 1],  # does not satisfy the formula: passes the solution re-check
    }
    verdict = run(cert, env_record)
    assert check(verdict, "solutions").passed
    assert failed_check(verdict) == "extraction" and f"back to {verifier._show(solved['solution'])}" in verdict.reason


def test_the_certificates_solver_plays_no_part(genuine, env_record):
    """Which solver found a target solution does not matter, only whether it qualifies."""
    genuine["solver"] = "ilp"  # pred has no path from EnsembleComputation to ILP
    assert run(genuine, env_record).accepted


# -- step 4: the violation ----------------------------------------------------------------------


def incomplete(pred: Pred, source: dict, to: str, source_solution: list[int]) -> dict:
    bundle = pred_json(pred, "reduce", "-", "--to", to, stdin=source)
    return {
        "violation": "incomplete_reduction",
        "source": source,
        "target": instance(bundle["target"]),
        "source_solution": source_solution,
    }


def test_incomplete_claim_against_a_correct_rule_is_rejected(env_record, pred):
    verdict = run(incomplete(pred, SAT, MIS, [0, 1, 0]), env_record)
    assert check(verdict, "solutions").passed
    assert failed_check(verdict) == "violation" and "the target has a solution" in verdict.reason


def test_incomplete_claim_needs_a_valid_source_solution(env_record, pred):
    verdict = run(incomplete(pred, SAT, MIS, [1, 1, 1]), env_record)
    assert failed_check(verdict) == "solutions" and "not a valid solution" in verdict.reason


SAT64 = {
    "type": "Satisfiability",
    "variant": {},
    "data": {"num_vars": 64, "clauses": [{"literals": [i + 1]} for i in range(64)]},
}


def test_brute_force_no_solution_at_64_variables_is_not_trusted(env_record, pred, monkeypatch):
    cert = incomplete(pred, SAT64, "NonTautology", [1] * 64)
    target = json.dumps(cert["target"])
    silent = json.loads(pred.run("solve", "-", "--solver", "brute-force", stdin=target).stdout)
    assert silent["evaluation"] == "Or(false)" and "solution" not in silent, "pred 0.5.0's silent overflow"
    verdict = run(cert, env_record)
    assert not verdict.accepted and failed_check(verdict) == "violation"
    assert verdict.outcome is Outcome.REJECTED
    assert "unproven" in verdict.reason and "cannot be trusted" in verdict.reason
    # Contrast, with the trust check removed: the same false claim would be accepted.
    monkeypatch.setattr(verifier._Verification, "_enumeration_size", lambda self, problem: (2, "trusted", [], 1))
    assert run(cert, env_record).accepted


def test_untrusted_no_solution_is_cross_checked_with_ilp(env_record, pred):
    verdict = run(incomplete(pred, SAT64, "KSatisfiability/K3", [1] * 64), env_record)
    assert failed_check(verdict) == "violation"
    assert "cannot be trusted" in verdict.reason and "pred's ILP finds" in verdict.reason


def job(cert: dict, pred: Pred, env_record, workdir: Path) -> "verifier._Verification":
    extractor = Extractor(Path(env_record.extractor_path), pred.limits)
    arithmetic = library_arithmetic(env_record.source_dir)
    return verifier._Verification(parse_certificate(json.dumps(cert)), pred, extractor, workdir, arithmetic)


def test_enumeration_size_comes_from_the_extractor(env_record, pred, tmp_path):
    bundle = pred_json(pred, "reduce", "-", "--to", MIS, stdin=SAT)
    (tmp_path / "target.json").write_text(json.dumps(bundle["target"]))
    size, note, evidence, largest = job(
        incomplete(pred, SAT, MIS, [0, 1, 0]), pred, env_record, tmp_path
    )._enumeration_size("target.json")
    nodes = bundle["target"]["data"]["graph"]["num_vertices"]
    assert size == 2**nodes and largest == 1 and [call.command() for call in evidence] == ["pred-extract dims"]


def test_an_optimum_is_brute_forces_cross_checked_by_ilp(env_record, pred, tmp_path):
    """ILP reaches the target through more reductions; it must agree with brute force where it applies."""
    bundle = pred_json(pred, "reduce", "-", "--to", MIS, stdin=SAT)
    (tmp_path / "target.json").write_text(json.dumps(bundle["target"]))
    best = pred_json(pred, "solve", "-", "--solver", "brute-force", stdin=bundle["target"])["evaluation"]
    optimum, reason, evidence, exactness = job(
        incomplete(pred, SAT, MIS, [0, 1, 0]), pred, env_record, tmp_path
    )._optimum("target.json", "target")
    assert str(optimum) == best and "pred's ILP agrees" in reason and exactness.exact  # MIS: integer weights
    # each solver's optimum is evaluated again in the overflow-checked extractor
    checked = ["pred-extract", "evaluate"]
    solve = ["pred", "solve"]
    assert [call.argv[:2] for call in evidence] == [["pred-extract", "dims"], solve, checked, solve, checked]


# -- bad input and limits -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("not json", "not JSON"),
        ('{"violation": "suboptimal_extraction"}', "source: Field required"),
        (" " * (MAX_CERTIFICATE_BYTES + 1), "byte limit"),
    ],
    ids=["not-json", "missing-fields", "oversized"],
)
def test_malformed_input_is_a_rejected_verdict_before_pred_runs(env_record, text, expected):
    verdict = verify_text(text, env_record)
    assert not verdict.accepted and failed_check(verdict) == "certificate"
    assert expected in verdict.reason and "\n" not in verdict.reason
    assert verdict.pred_calls == 0


def test_oversized_certificate_object_is_rejected_before_pred_runs(genuine, env_record):
    cert = parse_certificate(json.dumps(genuine))
    cert.target.data["padding"] = "x" * MAX_CERTIFICATE_BYTES
    verdict = verify(cert, env_record)
    assert not verdict.accepted and "byte limit" in verdict.reason and verdict.pred_calls == 0


def test_unreadable_file_is_a_rejected_verdict(tmp_path, env_record):
    verdict = verify_file(tmp_path, env_record)
    assert not verdict.accepted and "cannot read" in verdict.reason


def test_memory_limit_is_inconclusive_instead_of_crashing(genuine, env_record):
    """The verifier's own memory limit stopped the call: no answer, so no verdict either way."""
    genuine["source"]["data"]["graph"]["num_vertices"] = 500_000_000
    verdict = run(genuine, env_record, limits=PredLimits(timeout_s=20, memory_bytes=256 * 2**20))
    assert failed_check(verdict) == "instance" and "ran out of memory (limit 256 MiB)" in verdict.reason
    assert verdict.outcome is Outcome.INCONCLUSIVE


def path3_ensemble(pred: Pred) -> dict:
    """A suboptimal_extraction claim whose target, EnsembleComputation with 10 variables, takes pred's
    brute force more than a few seconds."""
    path3 = {
        "type": "MinimumVertexCover",
        "variant": {"graph": "SimpleGraph", "weight": "One"},
        "data": {"graph": {"num_vertices": 3, "edges": [[0, 1], [1, 2]]}, "weights": [1, 1, 1]},
    }
    bundle = one_step(pred, path3, "EnsembleComputation", {})
    return {
        "violation": "suboptimal_extraction",
        "source": path3,
        "target": instance(bundle["target"]),
        "target_solution": [3, 1, 4, 0, 4, 2, 0, 0, 0, 0],
        "source_solution": [1, 1, 1],
        "better_source_solution": [0, 1, 0],
    }


def test_time_limit_makes_a_solve_that_takes_too_long_inconclusive(env_record, pred):
    verdict = run(path3_ensemble(pred), env_record, limits=PredLimits(timeout_s=2))
    assert check(verdict, "extraction").passed
    assert failed_check(verdict) == "violation" and "exceeded the 2s time limit" in verdict.reason
    assert verdict.outcome is Outcome.INCONCLUSIVE and not verdict.rejected


def test_a_pred_that_differs_from_its_record_is_refused(genuine, env_record):
    altered = env_record.model_copy(update={"pred_sha256": "0" * 64})
    with pytest.raises(PredEnvironmentError, match="refusing to verify with a different binary"):
        verify(parse_certificate(json.dumps(genuine)), altered)


# -- the evaluation strings -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "valid"),
    [
        ("Or(true)", True),
        ("Or(false)", False),
        ("Min(2)", True),
        ("Min(None)", False),
        ("Max(-3)", True),
        ("Max(2.5)", True),
        ("Sum(5)", False),
        ("garbage", False),
    ],
)
def test_evaluation_validity(text, valid):
    assert Evaluation.parse(text).valid is valid


def test_evaluation_order_respects_min_and_max():
    assert Evaluation.parse("Min(1)").better_than(Evaluation.parse("Min(2)"))
    assert not Evaluation.parse("Min(2)").better_than(Evaluation.parse("Min(1)"))
    assert Evaluation.parse("Max(2.5)").better_than(Evaluation.parse("Max(2)"))
    assert not Evaluation.parse("Max(2)").better_than(Evaluation.parse("Max(2)"))
    assert not Evaluation.parse("Min(1)").better_than(Evaluation.parse("Min(None)"))
    assert not Evaluation.parse("Max(3)").better_than(Evaluation.parse("Min(1)"))


def test_canonical_json_values():
    assert canonical({"a": 1, "b": [2.0]}) == canonical({"b": [2], "a": 1.0})
    assert canonical([True]) != canonical([1])
    assert canonical({"a": 1}) != canonical({"a": 1, "b": 0})


# -- the programs ---------------------------------------------------------------------------------


def predbench(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", "import sys; from pytest_predbench.cli import main; sys.exit(main())", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        **kwargs,
    )


def test_cli_verify_json_prints_the_accepted_verdict(env_record):
    genuine_path = REPO / "fixtures" / "calibration" / "0.5.0" / "genuine_mvc_to_ensemble_suboptimal.json"
    result = predbench("verify", "--json", str(genuine_path))
    assert result.returncode == 0, result.stderr
    verdict = json.loads(result.stdout)
    assert verdict["accepted"] and verdict["violation"] == "suboptimal_extraction"
    assert verdict["checks"][1]["evidence"][0]["argv"][:2] == ["pred", "reduce"]


def test_cli_verify_exit_codes(env_record, genuine, tmp_path):
    good = tmp_path / "good.json"
    good.write_text(json.dumps(genuine))
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    both = predbench("verify", "--json", str(good), str(bad))
    assert both.returncode == 1
    assert [v["accepted"] for v in json.loads(both.stdout)] == [True, False]
    text = predbench("verify", str(bad))
    assert text.returncode == 1 and text.stdout.startswith(f"REJECTED {bad}: malformed certificate: not JSON")
    missing = predbench("verify", str(tmp_path / "absent.json"))
    assert missing.returncode == 2 and "no such file" in missing.stderr and not missing.stdout
    assert predbench("verify").returncode == 2


def test_python_m_verify_is_the_same_program(env_record, genuine, tmp_path):
    path = tmp_path / "cert.json"
    path.write_text(json.dumps(genuine))
    result = subprocess.run(
        [sys.executable, "-m", "pytest_predbench.verify", str(path)], capture_output=True, text=True, cwd=REPO
    )
    assert result.returncode == 0 and result.stdout.startswith(f"ACCEPTED {path}")


def test_cli_refuses_a_pred_that_differs_from_the_record(env_record, genuine, tmp_path):
    record = tmp_path / "env.json"
    record.write_text(env_record.model_copy(update={"pred_sha256": "0" * 64}).model_dump_json())
    cert = tmp_path / "cert.json"
    cert.write_text(json.dumps(genuine))
    result = predbench("verify", "--env-record", str(record), str(cert))
    assert result.returncode == 2 and "refusing to verify with a different binary" in result.stderr
    assert "Traceback" not in result.stderr


def test_cli_without_an_environment_record_sets_the_version_up_first(genuine, tmp_path):
    """A version this machine never built is built when asked for; here cargo is missing, which is
    one line, not a traceback."""
    cert = tmp_path / "cert.json"
    cert.write_text(json.dumps(genuine))
    result = predbench("verify", str(cert), env={"PREDBENCH_CACHE": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert "pred 0.6.0 is not set up on this machine yet: setting it up now" in result.stdout  # the default
    assert result.returncode == 2 and result.stderr.strip().endswith(
        "cargo is not on PATH; install the Rust toolchain (rustup) first"
    )
    assert "Traceback" not in result.stderr


def test_the_verifier_never_imports_the_agent_stack():
    code = (
        "import pytest_predbench.verify.verifier, pytest_predbench.cli, sys; "
        "bad = [m for m in sys.modules if m.startswith(('minisweagent', 'litellm'))]; assert not bad, bad"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


# -- robustness: a verdict for any Certificate, one line for a broken environment -----------------


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("source_solution", "not a list", "source_solution"),
        ("target_solution", [0, -1, 2], "target_solution"),
        ("violation", "won", "violation"),
        ("source", None, "source"),
        ("target_solution", [object()], "cannot be written as JSON"),
    ],
    ids=["string-solution", "negative-value", "unknown-violation", "no-source", "unserialisable"],
)
def test_a_certificate_changed_after_validation_gets_a_verdict(genuine, env_record, field, value, expected):
    cert = parse_certificate(json.dumps(genuine))
    setattr(cert, field, value)  # pydantic does not validate assignments
    verdict = verify(cert, env_record)
    assert not verdict.accepted and failed_check(verdict) == "certificate" and expected in verdict.reason
    assert verdict.pred_calls == 0
    assert verify(parse_certificate(json.dumps(genuine)), env_record).accepted  # the contrast


def test_not_a_certificate_at_all_gets_a_verdict(env_record):
    verdict = verify({"violation": "crash"}, env_record)  # type: ignore[arg-type]
    assert not verdict.accepted and "a certificate is a Certificate, got dict" in verdict.reason


def test_a_fifo_is_refused_without_blocking(tmp_path, env_record):
    fifo = tmp_path / "cert.json"
    os.mkfifo(fifo)  # nothing ever writes to it: reading it would block forever
    verdict = verify_file(fifo, env_record)
    assert not verdict.accepted and "not a regular file" in verdict.reason


def test_a_huge_file_is_refused_before_it_is_read(tmp_path, env_record):
    huge = tmp_path / "cert.json"
    with open(huge, "wb") as handle:
        handle.truncate(MAX_CERTIFICATE_BYTES * 1000)  # sparse: its size is all there is to it
    verdict = verify_file(huge, env_record)
    assert not verdict.accepted and "byte limit; not read" in verdict.reason


def test_limits_that_cannot_be_set_are_one_line_and_exit_2(genuine, tmp_path):
    """As root the limits can always be raised; without CAP_SYS_RESOURCE, under a lower hard limit, not."""
    cert = tmp_path / "cert.json"
    cert.write_text(json.dumps(genuine))
    command = ["setpriv", "--bounding-set=-sys_resource", "prlimit", "--cpu=5:5"]
    result = subprocess.run(
        [*command, sys.executable, "-m", "pytest_predbench.cli", "verify", str(cert)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    [line] = result.stderr.splitlines()
    assert "its limits could not be set" in line
    assert predbench("verify", str(cert)).returncode == 0  # the contrast: the same, with limits that can be set


def test_a_bug_of_predbench_itself_is_one_line_exit_3_not_a_traceback(genuine, tmp_path, monkeypatch, capsys):
    from pytest_predbench import cli
    from pytest_predbench.verify import batch

    def broken(*args, **kwargs):
        raise RuntimeError("an invariant broke\nsecond line")

    cert = tmp_path / "cert.json"
    cert.write_text(json.dumps(genuine))
    monkeypatch.setattr(batch, "verify_found", broken)  # stands for any bug inside a command
    assert cli.main(["verify", str(cert)]) == cli.INTERNAL
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("predbench: internal error: RuntimeError: an invariant broke (a bug of predbench")
