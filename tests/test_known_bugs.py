"""The known-bug registry shipped in the package: valid, unique, and matched by exact rule."""

import json
from datetime import date

import pytest
from pydantic import ValidationError

from pytest_predbench.verify import pin
from pytest_predbench.verify.known_bugs import REGISTRY_FILE, Registry, load_registry
from tests.support.versions import TEST_VERSION


@pytest.mark.parametrize("version", ["0.5.0", "0.6.0"])
def test_each_versions_registry_loads_with_unique_ids_and_names_its_version(version):
    registry = load_registry(version)
    ids = [bug.id for bug in registry.bugs]
    assert registry.pred_version == version and len(ids) == len(set(ids)) and ids
    for bug in registry.bugs:
        assert bug.rule == f"{bug.source.name} -> {bug.target.name}"


@pytest.mark.parametrize("version", ["0.5.0", "0.6.0"])
def test_every_entry_says_whether_it_was_public_and_a_disclosed_one_where_and_when(version):
    registry = load_registry(version)
    statuses = {bug.disclosure.status for bug in registry.bugs}
    assert statuses == {"disclosed", "undisclosed"}, "both kinds, so recall can be shown apart"
    for bug in registry.bugs:
        disclosure = bug.disclosure
        if disclosure.status == "disclosed":
            assert disclosure.reference.startswith("https://github.com/"), bug.id
            assert disclosure.date is not None and disclosure.date <= registry.as_of, bug.id
        else:
            assert disclosure.reference is None and disclosure.date is None and disclosure.note, bug.id


def test_the_cutoff_splits_disclosed_bugs_by_date():
    bugs = {bug.id: bug for bug in load_registry("0.6.0").bugs}
    september = bugs["threedimensionalmatching-to-threepartition"]  # #1155, 2026-09-17
    april = bugs["minimumvertexcover-to-ensemblecomputation"]  # #1052, 2026-04-14
    never = bugs["ksatisfiability-to-kclique"]  # found here
    cutoff = date(2026, 6, 1)
    assert september.disclosed_after(cutoff) and not april.disclosed_after(cutoff)
    assert not never.disclosed_after(cutoff), "an undisclosed bug is no bug disclosed after the cutoff"


def _registry_data(version: str = "0.6.0") -> dict:
    return json.loads((pin.version_dir(version) / REGISTRY_FILE).read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda bug, data: bug.pop("disclosure"), "disclosure"),
        (lambda bug, data: bug["disclosure"].pop("date"), "reference and date"),
        (lambda bug, data: bug["disclosure"].pop("reference"), "reference and date"),
        (lambda bug, data: bug.update(disclosure={"status": "undisclosed", "date": "2026-01-01"}), "no reference"),
        (lambda bug, data: bug["disclosure"].update(date="2027-01-01"), "after the registry's date"),
        (lambda bug, data: data.pop("as_of"), "as_of"),
    ],
)
def test_a_registry_entry_without_a_well_formed_disclosure_is_refused(edit, message):
    data = _registry_data()
    [disclosed] = [bug for bug in data["bugs"] if bug["id"] == "steinertree-to-ilp"]
    Registry.model_validate(data)  # the contrast: as shipped, it loads
    edit(disclosed, data)
    with pytest.raises(ValidationError, match=message):
        Registry.model_validate(data)


def test_a_rule_matches_by_names_and_variants():
    registry = load_registry(TEST_VERSION)
    one = {"graph": "SimpleGraph", "weight": "One"}
    [bug] = registry.find("MinimumVertexCover", one, "EnsembleComputation", {})
    assert bug.kind == "suboptimal_extraction"
    assert registry.find("MinimumVertexCover", {**one, "weight": "i32"}, "EnsembleComputation", {}) == []
    assert registry.find("MinimumVertexCover", one, "MaximumIndependentSet", {}) == []


def _solve(pred, tmp_path, *args) -> tuple[int, dict | None, str]:
    call = pred.run(*args, cwd=tmp_path)
    try:
        return call.exit_code, json.loads(call.stdout), call.stderr
    except ValueError:
        return call.exit_code, None, call.stderr


def shows_the_bug(pred, tmp_path, bug) -> str | None:
    """What pred's round trip shows wrong on the entry's instance, or None when it looks right."""
    (tmp_path / "source.json").write_text(json.dumps(bug.instance))
    (tmp_path / "via.json").write_text(json.dumps(bug.via))
    reduce = pred.run("reduce", "source.json", "--via", "via.json", "-o", "bundle.json", cwd=tmp_path)
    if reduce.exit_code == 101:
        return "reduce panics"
    assert reduce.ok, reduce.brief()
    code, solved, _ = _solve(pred, tmp_path, "solve", "bundle.json", "--solver", bug.repro.solver)
    if code == 101:
        return "extraction panics"
    target, extracted = (solved["intermediate"]["evaluation"], solved["evaluation"]) if solved else (None, None)
    if (
        target
        and not target.endswith("(None)")
        and target != "Or(false)"
        and extracted in ("Or(false)",)
        or (extracted or "").endswith("(None)")
    ):
        return f"target {target} extracts to {extracted}"
    _, direct, _ = _solve(pred, tmp_path, "solve", "source.json", "--solver", "brute-force")
    if direct and extracted and direct["evaluation"] != extracted:
        return f"extracts to {extracted}, the source's optimum is {direct['evaluation']}"
    return None


REPRODUCIBLE = [b for b in load_registry(TEST_VERSION).bugs if b.instance and b.via and b.observable is True]


@pytest.mark.slow
@pytest.mark.parametrize("bug", REPRODUCIBLE, ids=[b.id for b in REPRODUCIBLE])
def test_each_reproduction_still_shows_its_bug_with_the_pinned_pred(bug, pred, tmp_path):
    tries = 20 if "probabilistic" in (bug.confidence or "") else 1  # KingsSubgraph: right half the time
    found = None
    for _ in range(tries):
        found = shows_the_bug(pred, tmp_path, bug)
        if found:
            break
    assert found, f"{bug.id}: pred's round trip shows nothing wrong on the registry's instance"


def test_a_correct_rule_shows_nothing_wrong(pred, tmp_path):
    """The contrast: the same check on a correct rule (MaximumIndependentSet -> MinimumVertexCover)."""
    one_step = {"name": "MaximumIndependentSet", "variant": {"graph": "SimpleGraph", "weight": "i32"}}
    bug = (
        load_registry(TEST_VERSION)
        .bugs[0]
        .model_copy(
            update={
                "instance": {
                    "type": "MaximumIndependentSet",
                    "variant": one_step["variant"],
                    "data": {"graph": {"num_vertices": 3, "edges": [[0, 1], [1, 2]]}, "weights": [1, 2, 1]},
                },
                "via": {"path": [{"from": one_step, "to": {**one_step, "name": "MinimumVertexCover"}}]},
            }
        )
    )
    assert shows_the_bug(pred, tmp_path, bug) is None
