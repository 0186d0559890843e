"""The extractor (pred-extract, built by setup from verify/extractor/ on the pinned library) maps a
target solution back exactly as pred does: on a sample of correct rules its extraction of pred's own
witness equals what `pred solve` extracts, solution and evaluation alike."""

import json
import math
from pathlib import Path

import pytest

from pytest_predbench.verify.extractor import Extractor, ExtractorFailure
from pytest_predbench.verify.known_bugs import load_registry
from pytest_predbench.verify.pred import Pred, PredLimits
from tests.support.versions import TEST_VERSION

SAMPLE = 55
"""Rules compared (at least 50 must be): the first in name order whose canonical example's target brute
force enumerates quickly."""
SMALL = 2**18
"""Targets with at most this many configurations: brute force solves them in well under a second."""
LIMITS = PredLimits(timeout_s=15.0)


@pytest.fixture(scope="module")
def extractor(env_record) -> Extractor:
    return Extractor(Path(env_record.extractor_path), LIMITS)


def _json(pred: Pred, cwd: Path, *args: str) -> dict | None:
    call = pred.run(*args, "-o", "out.json", "-q", cwd=cwd)
    if not call.ok:
        return None
    return json.loads((cwd / "out.json").read_text())


def correct_rules(pred: Pred, cwd: Path) -> list[tuple[str, str]]:
    """The one-step rules of the pinned pred that the known-bug registry does not list, but those into ILP
    (their targets are too big for brute force; the full comparison, README, takes them with pred's ILP)."""
    listed = _json(pred, cwd, "list", "--rules", "--json")["rules"]
    buggy = {
        (bug.rule_spec.split(" -> ")[0], bug.rule_spec.split(" -> ")[1]) for bug in load_registry(TEST_VERSION).bugs
    }
    rules = {(r["source"], r["target"]) for r in listed} - buggy
    return sorted((source, target) for source, target in rules if not target.startswith("ILP"))


@pytest.mark.slow
def test_the_extraction_of_preds_witness_equals_preds_on_correct_rules(env_record, extractor, tmp_path):
    pred = Pred(Path(env_record.pred_path), LIMITS)
    compared, differing = [], []
    for source, target in correct_rules(pred, tmp_path):
        if len(compared) >= SAMPLE:
            break
        example = _json(pred, tmp_path, "create", "--example", source, "--to", target)
        if example is None:
            continue
        (tmp_path / "source.json").write_text(json.dumps(example))
        bundle = _json(pred, tmp_path, "reduce", "source.json", "--to", target)
        if bundle is None or len(bundle["path"]) != 2 or len(json.dumps(bundle["target"])) > 20_000:
            continue  # not this one rule, or a target too big to solve here
        if math.prod(extractor.dims(bundle["target"], tmp_path)[0]) > SMALL:
            continue
        (tmp_path / "bundle.json").write_text(json.dumps(bundle))
        solved = _json(pred, tmp_path, "solve", "bundle.json", "--solver", "brute-force", "--timeout", "10")
        if solved is None or "solution" not in solved.get("intermediate", {}):
            continue
        extraction, _ = extractor.extract(bundle, solved["intermediate"]["solution"], tmp_path)
        mine = (extraction.source_solution, extraction.source_evaluation, extraction.target_matches)
        preds = (solved["solution"], solved["evaluation"], True)
        (compared if mine == preds else differing).append((f"{source} -> {target}", mine, preds))
    assert differing == []
    assert len(compared) >= 50, f"only {len(compared)} rules compared"


def test_validate_applies_the_librarys_constructor_rules(extractor, tmp_path):
    short = {"type": "KSatisfiability", "variant": {"k": "K3"}, "data": {"num_vars": 2, "clauses": [{"literals": [1]}]}}
    validity, _ = extractor.validate(short, tmp_path)
    assert not validity.valid and validity.checked and "expected 3" in validity.reason
    whole = {**short, "data": {"num_vars": 3, "clauses": [{"literals": [1, -2, 3]}]}}
    validity, _ = extractor.validate(whole, tmp_path)
    assert validity.valid and validity.checked and validity.constructor == "KSatisfiability<K3>::new"


def test_dims_and_an_empty_configuration(extractor, tmp_path):
    graph = {"num_vertices": 3, "edges": [[0, 1]]}
    mis = {
        "type": "MaximumIndependentSet",
        "variant": {"graph": "SimpleGraph", "weight": "One"},
        "data": {"graph": graph, "weights": [1, 1, 1]},
    }
    assert extractor.dims(mis, tmp_path)[0] == [2, 2, 2]
    empty = {"type": "Satisfiability", "variant": {}, "data": {"num_vars": 0, "clauses": []}}
    assert extractor.evaluate(empty, [], tmp_path)[0] == "Or(true)"
    with pytest.raises(ExtractorFailure, match="config must have 3 values"):
        extractor.evaluate(mis, [1], tmp_path)


def test_a_panic_of_the_library_is_reported_with_its_place(extractor, pred, tmp_path):
    """Satisfiability -> CircuitSAT panics on a variable in no clause (a known bug): the extractor, replaying
    the reduction, reports the panic and where it happened, not a dead process."""
    sat = {"type": "Satisfiability", "variant": {}, "data": {"num_vars": 2, "clauses": [{"literals": [1]}]}}
    bundle = {
        "source": sat,
        "target": {"type": "CircuitSAT", "variant": {}, "data": {}},
        "path": [{"name": "Satisfiability", "variant": {}}, {"name": "CircuitSAT", "variant": {}}],
    }
    with pytest.raises(ExtractorFailure) as failure:
        extractor.extract(bundle, [0], tmp_path)
    assert failure.value.panicked and failure.value.stage == "reduce"
    assert (
        "Variable x2 not found in CircuitSAT" in failure.value.message and "sat_circuitsat.rs" in failure.value.message
    )
