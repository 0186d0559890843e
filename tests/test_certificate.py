"""The certificate format: the checked-in schema is the model's, and every field rule holds."""

import json

import pytest

from pytest_predbench.verify.certificate import (
    MAX_CERTIFICATE_BYTES,
    MAX_SOLUTION_LENGTH,
    SCHEMA_PATH,
    Certificate,
    CertificateError,
    Solver,
    Violation,
    load_certificate,
    parse_certificate,
    schema_text,
)
from tests.support.versions import CALIBRATION_DIR


def test_checked_in_schema_is_the_models():
    # Regenerate with `python -m pytest_predbench.verify.certificate` after changing the model.
    assert SCHEMA_PATH.read_text() == schema_text()


def test_schema_forbids_unknown_fields():
    schema = json.loads(SCHEMA_PATH.read_text())
    assert schema["additionalProperties"] is False
    assert schema["$defs"]["ProblemInstance"]["additionalProperties"] is False
    assert set(schema["required"]) == {"violation", "source", "target"}


def test_genuine_certificate_parses(genuine):
    cert = parse_certificate(json.dumps(genuine))
    assert cert.violation is Violation.SUBOPTIMAL_EXTRACTION
    assert cert.solver is Solver.BRUTE_FORCE
    assert json.loads(cert.source.to_pred_json()) == genuine["source"]


def _error(payload) -> str:
    with pytest.raises(CertificateError) as info:
        parse_certificate(payload if isinstance(payload, str | bytes) else json.dumps(payload))
    assert "\n" not in str(info.value)
    return str(info.value)


def test_solver_defaults_to_brute_force(genuine):
    del genuine["solver"]
    assert parse_certificate(json.dumps(genuine)).solver is Solver.BRUTE_FORCE


@pytest.mark.parametrize("where", ["top", "source"])
def test_unknown_fields_are_rejected_not_ignored(genuine, where):
    (genuine if where == "top" else genuine["source"])["confidence"] = 0.9
    assert "confidence: Extra inputs are not permitted" in _error(genuine)


@pytest.mark.parametrize("field", ["violation", "source", "target"])
def test_required_fields(genuine, field):
    del genuine[field]
    assert f"{field}: Field required" in _error(genuine)


def test_every_claim_but_a_crash_needs_its_source_solution(genuine):
    del genuine["source_solution"]
    assert "suboptimal_extraction needs source_solution" in _error(genuine)


def test_a_crash_names_no_source_solution(genuine):
    crash = {k: genuine[k] for k in ("source", "target")} | {"violation": "crash"}
    assert parse_certificate(json.dumps(crash)).violation is Violation.CRASH
    assert parse_certificate(json.dumps({**crash, "target_solution": [0] * 6})).target_solution == [0] * 6
    assert "crash takes no source_solution" in _error({**crash, "source_solution": [1, 1]})


@pytest.mark.parametrize(
    "value",
    [[1, -1], [1, True], ["1", 1], [1.0, 1], "1,1", None],
    ids=["negative", "bool", "string", "float", "text", "null"],
)
def test_solutions_are_lists_of_non_negative_ints(genuine, value):
    genuine["source_solution"] = value
    assert ("source_solution" if value is not None else "suboptimal_extraction needs source_solution") in _error(
        genuine
    )


def test_solution_length_is_limited(genuine):
    genuine["source_solution"] = [0] * (MAX_SOLUTION_LENGTH + 1)
    assert "source_solution: List should have at most" in _error(genuine)


def test_size_limit_is_checked_before_parsing():
    assert f"over the {MAX_CERTIFICATE_BYTES}-byte limit" in _error(" " * (MAX_CERTIFICATE_BYTES + 1))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{not json", "not JSON"),
        (b"\xff\xfe\x00", "not JSON"),
        ("[" * 100_000, "nested too deeply"),
        ("[1, 2]", "a certificate is a JSON object, got list"),
    ],
    ids=["syntax", "bytes", "deep", "list"],
)
def test_non_certificate_input(text, expected):
    assert expected in _error(text)


@pytest.mark.parametrize(
    ("violation", "change", "expected"),
    [
        (
            "incomplete_reduction",
            {"better_source_solution": None},
            "incomplete_reduction takes no target_solution",
        ),
        (
            "unsound_extraction",
            {"target_solution": None, "better_source_solution": None},
            "needs target_solution",
        ),
        ("suboptimal_extraction", {"target_solution": None}, "suboptimal_extraction needs target_solution"),
        ("suboptimal_extraction", {"better_source_solution": None}, "needs better_source_solution"),
        ("unsound_extraction", {}, "better_source_solution is only for suboptimal_extraction"),
    ],
)
def test_fields_must_fit_the_violation(genuine, violation, change, expected):
    genuine["violation"] = violation
    for key, value in change.items():
        genuine.pop(key) if value is None else genuine.update({key: value})
    assert expected in _error(genuine)


def test_incomplete_reduction_needs_no_target_solution(genuine):
    for key in ("target_solution", "better_source_solution"):
        del genuine[key]
    genuine["violation"] = "incomplete_reduction"
    assert parse_certificate(json.dumps(genuine)).target_solution is None


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"violation": "wrong_answer"}, "violation: Input should be"),
        ({"solver": "customized"}, "solver: Input should be 'brute-force' or 'ilp'"),
        ({"rule": 7}, "rule: Input should be a valid string"),
    ],
)
def test_enumerations_and_strict_types(genuine, change, expected):
    genuine.update(change)
    assert expected in _error(genuine)


def test_problem_instance_rules(genuine):
    genuine["source"]["type"] = ""
    assert "source.type: String should have at least 1 character" in _error(genuine)
    genuine["source"]["type"] = "MinimumVertexCover"
    genuine["source"]["variant"]["weight"] = 1
    assert "source.variant.weight: Input should be a valid string" in _error(genuine)


def test_load_certificate_reports_unreadable_files(tmp_path):
    with pytest.raises(CertificateError, match="cannot read"):
        load_certificate(tmp_path / "absent.json")


def test_model_round_trips_through_json(genuine):
    cert = parse_certificate(json.dumps(genuine))
    assert Certificate.model_validate_json(cert.model_dump_json()) == cert


def calibration_certificates() -> list[Certificate]:
    """The calibration set's certificates (its malformed-input cases are not certificates)."""
    found = []
    for path in sorted(CALIBRATION_DIR.glob("*.json")):
        try:
            found.append(Certificate.model_validate_json(path.read_text()))
        except ValueError:
            continue
    return found


def test_a_certificate_file_reads_back_as_the_certificate():
    """What the run writes as a certificate's file (file_text) is that certificate again — including a
    crash's target with `data` null, which leaving out every None field dropped."""
    certificates = calibration_certificates()
    assert any(c.target.data is None for c in certificates), "the set holds a crash while reducing"
    for certificate in certificates:
        assert Certificate.model_validate_json(certificate.file_text()) == certificate, certificate.rule
