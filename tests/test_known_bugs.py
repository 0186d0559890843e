"""The known-bug registry shipped in the package: valid, unique, and matched by exact rule."""

from pytest_predbench.verify.known_bugs import load_registry


def test_the_registry_loads_with_unique_ids_and_names_the_pinned_version():
    from pytest_predbench.verify.pin import PRED_VERSION

    registry = load_registry()
    ids = [bug.id for bug in registry.bugs]
    assert registry.pred_version == PRED_VERSION and len(ids) == len(set(ids)) and ids
    for bug in registry.bugs:
        assert bug.rule == f"{bug.source.name} -> {bug.target.name}"


def test_a_rule_matches_by_names_and_variants():
    registry = load_registry()
    one = {"graph": "SimpleGraph", "weight": "One"}
    [bug] = registry.find("MinimumVertexCover", one, "EnsembleComputation", {})
    assert bug.kind == "suboptimal_extraction"
    assert registry.find("MinimumVertexCover", {**one, "weight": "i32"}, "EnsembleComputation", {}) == []
    assert registry.find("MinimumVertexCover", one, "MaximumIndependentSet", {}) == []
