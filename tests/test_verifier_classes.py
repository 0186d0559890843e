"""The verifier against four classes of false claims on correct rules (the real pred and extractor):
float tolerance, integer range, crash attribution, graph instances — and pred's aliases.

Each class has a property test that draws instances of it at random, with an oracle that decides
without the verifier (exact arithmetic, the instance's own definition): a claim on a correct rule is
never accepted, and where the class's trick is present the reason names it. The calibration set holds
one fixed case of each and its contrast.
"""

import copy
import itertools
import json
import math
import re
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_predbench.verify.extractor import Extractor, ExtractorFailure
from pytest_predbench.verify.known_bugs import load_registry
from pytest_predbench.verify.pred import Pred, PredLimits
from pytest_predbench.verify.verifier import verify_text
from tests.support.versions import CALIBRATION_DIR, TEST_VERSION
from tests.test_verifier import one_step

LIMITS = PredLimits(timeout_s=10.0)
I32_MAX = 2**31 - 1
SPIN_GLASS = {"graph": "SimpleGraph", "weight": "f64"}


def examples(n: int):
    return settings(
        max_examples=n,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )


@pytest.fixture(scope="module")
def extractor(env_record) -> Extractor:
    return Extractor(Path(env_record.extractor_path), LIMITS)


def reduced(pred: Pred, source: dict, target: str, variant: dict) -> dict:
    """The target of the one rule from `source` (pred's own reduction)."""
    return one_step(pred, source, target, variant)["target"]


def verify(cert: dict, env_record):
    return verify_text(json.dumps(cert), env_record, limits=LIMITS)


def failed_check(verdict) -> str | None:
    return next((c.name for c in verdict.checks if not c.passed), None)


# -- 1. float tolerance -------------------------------------------------------------------------------


def qubo_value(matrix: list[list[float]], x: tuple[int, ...]) -> Fraction:
    """A QUBO's value in exact arithmetic: the sum of Q_ij over i <= j with x_i = x_j = 1."""
    n = len(matrix)
    return sum((Fraction(matrix[i][j]) for i in range(n) for j in range(i, n) if x[i] and x[j]), Fraction(0))


big = st.sampled_from([2.0**49, -(2.0**49), 2.0**40, 5e9, 0.1, -0.1, 0.25, -1.5, 0.0])
general = st.integers(2, 4).flatmap(lambda n: st.lists(st.lists(big, min_size=n, max_size=n), min_size=n, max_size=n))
cancelling = st.builds(
    lambda k, small: [[2.0**k, -small, -(2.0**k)], [0.0, small, 0.0], [0.0, 0.0, 0.0]],
    st.integers(36, 52),
    st.sampled_from([0.1, 0.3, 0.7, 1.1, 0.05, 0.9]),
)
"""x0 and x2 cancel a huge term, with a small one added between: [1,1,1] is exactly 0 like [0,0,0], but
its float sum is off by the rounding of 2^k - small (found by the second audit)."""


@pytest.mark.slow
@examples(30)
@given(st.one_of(general, cancelling), st.data())
def test_float_claims_on_a_correct_rule_are_judged_in_exact_terms(env_record, pred, matrix, data):
    """Random QUBOs mixing huge and small terms (cancellation near zero, values near 5e9) through the
    correct QUBO -> SpinGlass rule: the claim takes an exact optimum of the source as the extraction of
    the matching target solution, and another configuration (often all ones) as better. In exact
    arithmetic nothing is better than an optimum, so nothing may be accepted, however the floats round."""
    n = len(matrix)
    matrix = [[v if j >= i else 0.0 for j, v in enumerate(row)] for i, row in enumerate(matrix)]
    source = {"type": "QUBO", "variant": {"weight": "f64"}, "data": {"num_vars": n, "matrix": matrix}}
    configs = list(itertools.product([0, 1], repeat=n))
    best = min(configs, key=lambda x: qubo_value(matrix, x))
    other = data.draw(st.just((1,) * n) | st.sampled_from(configs))
    assert qubo_value(matrix, other) >= qubo_value(matrix, best)  # the oracle: nothing beats an optimum
    cert = {
        "violation": "suboptimal_extraction",
        "source": source,
        "target": reduced(pred, source, "SpinGlass", SPIN_GLASS),
        "target_solution": list(best),  # the rule maps spins to bits one for one
        "source_solution": list(best),
        "better_source_solution": list(other),
    }
    verdict = verify(cert, env_record)
    assert not verdict.accepted, f"accepted a claim false in exact arithmetic: {json.dumps(cert)[:600]}"


# -- 2. integer range -----------------------------------------------------------------------------------


@pytest.mark.slow
@examples(20)
@given(st.integers(1, 70_000), st.integers(1, 70_000), st.integers(1, 70_000), st.booleans())
def test_overflowing_products_are_named_never_believed(env_record, pred, w0, w1, length, swap):
    """Random MinimumSumMulticenter instances (two vertices, one edge, one center) through the correct
    rule to ILP: a center's cost is weight x length, exactly; where one of the claim's solutions costs
    more than an i32 holds, the verdict says integer overflow; and no claim is ever accepted."""
    source = {
        "type": "MinimumSumMulticenter",
        "variant": {"graph": "SimpleGraph", "weight": "i32"},
        "data": {
            "graph": {"num_vertices": 2, "edges": [[0, 1]]},
            "vertex_weights": [w0, w1],
            "edge_lengths": [length],
            "k": 1,
        },
    }
    claimed, better = ([1, 0], [0, 1]) if not swap else ([0, 1], [1, 0])
    cost = {(1, 0): w1 * length, (0, 1): w0 * length}  # the oracle: the other vertex's weight x the edge
    cert = {
        "violation": "suboptimal_extraction",
        "source": source,
        "target": reduced(pred, source, "ILP", {"variable": "bool"}),
        "target_solution": [claimed[0], claimed[1], claimed[0], claimed[1], claimed[0], claimed[1]],
        "source_solution": claimed,
        "better_source_solution": better,
    }
    verdict = verify(cert, env_record)
    assert not verdict.accepted, verdict.reason
    if max(cost.values()) > I32_MAX:
        assert "integer overflow" in verdict.reason and failed_check(verdict) == "solutions", verdict.reason
    else:
        assert "integer overflow" not in verdict.reason, verdict.reason


def test_an_overflow_is_seen_by_the_extractor_where_pred_wraps(extractor, pred, tmp_path):
    problem = json.loads((CALIBRATION_DIR / "overflow_product_weight_times_distance.json").read_text())["source"]
    (tmp_path / "p.json").write_text(json.dumps(problem))
    wrapped = pred.run("evaluate", "p.json", "--config", "0,1", cwd=tmp_path)
    assert wrapped.ok and "-2147479015" in wrapped.stdout, "pred wraps silently"
    with pytest.raises(ExtractorFailure) as failure:
        extractor.evaluate(problem, [0, 1], tmp_path)
    assert failure.value.overflowed and "attempt to multiply with overflow" in failure.value.message
    assert extractor.evaluate(problem, [1, 0], tmp_path)[0] == "Min(46341)", "the contrast: no overflow, no panic"


# -- 3. crash attribution ---------------------------------------------------------------------------------


def test_a_panic_in_a_constructor_the_rule_calls_is_the_rules(extractor, tmp_path):
    """KColoring -> PartitionIntoCliques panics in PartitionIntoCliques::new (a model's file), called by the
    rule's reduce_to: the rule's frame is on the stack. A panic while a source loads has none."""
    cert = json.loads((CALIBRATION_DIR / "genuine_kcoloring_to_cliques_crash.json").read_text())
    path = [{"name": p["type"], "variant": p["variant"]} for p in (cert["source"], cert["target"])]
    with pytest.raises(ExtractorFailure) as failure:
        extractor.reduce(cert["source"], path, tmp_path)
    assert failure.value.in_rule and failure.value.stage == "reduce"
    assert "models/graph/partition_into_cliques.rs" in failure.value.panic.location
    assert "src/rules/kcoloring_partitionintocliques.rs" in failure.value.panic.rule_frame
    loading = copy.deepcopy(cert["source"])
    loading["data"]["graph"]["edges"] = [[0, 9]]  # SimpleGraph's Deserialize asserts its edges
    with pytest.raises(ExtractorFailure) as failure:
        extractor.reduce(loading, path, tmp_path)
    assert failure.value.panicked and failure.value.stage == "load_source" and not failure.value.in_rule


@pytest.mark.slow
@examples(25)
@given(
    st.integers(1, 4).flatmap(
        lambda n: st.tuples(
            st.just(n),
            st.lists(
                st.lists(st.integers(1, n).flatmap(lambda v: st.sampled_from([v, -v])), min_size=1, max_size=3),
                max_size=4,
            ),
        )
    )
)
def test_a_crash_is_confirmed_exactly_when_the_rules_own_code_panics(env_record, formula):
    """Random formulas through Satisfiability -> CircuitSAT, whose reduce_to panics on a variable that
    occurs in no clause (a known bug): the crash claim is accepted exactly then, naming the rule's file."""
    n, clauses = formula
    source = {
        "type": "Satisfiability",
        "variant": {},
        "data": {"num_vars": n, "clauses": [{"literals": c} for c in clauses]},
    }
    cert = {"violation": "crash", "source": source, "target": {"type": "CircuitSAT", "variant": {}, "data": None}}
    unused = set(range(1, n + 1)) - {abs(lit) for c in clauses for lit in c}
    verdict = verify(cert, env_record)
    assert verdict.accepted == bool(unused), verdict.reason
    if unused:
        assert "in the rule's own code (problemreductions-0.5.0/src/rules/sat_circuitsat.rs" in verdict.reason


KNOWN_CRASHES = [b for b in load_registry(TEST_VERSION).bugs if b.kind == "crash" and b.instance and b.via]


@pytest.mark.slow
@pytest.mark.parametrize("bug", KNOWN_CRASHES, ids=[b.id for b in KNOWN_CRASHES])
def test_every_known_crash_is_still_confirmed_in_the_rules_own_code(env_record, bug):
    """The contrast of attribution: each crash of the known-bug registry (a rule's deliberate size-limit
    assert, a constructor the rule calls, its own panic) is still a crash, with its rule's file on the stack."""
    step = bug.via["path"][0]
    target = {"type": step["to"]["name"], "variant": step["to"].get("variant") or {}, "data": None}
    verdict = verify({"violation": "crash", "source": bug.instance, "target": target}, env_record)
    assert verdict.accepted, verdict.reason
    assert "in the rule's own code (problemreductions-0.5.0/src/rules/" in verdict.reason


# -- 4. graph instances ------------------------------------------------------------------------------------


def _mis(graph_type: str, graph: dict, n: int) -> dict:
    return {
        "type": "MaximumIndependentSet",
        "variant": {"graph": graph_type, "weight": "One"},
        "data": {"graph": graph, "weights": [1] * n},
    }


@examples(60)
@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), min_size=1, max_size=4, unique=True),
    st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), max_size=4),
    st.sampled_from([0.5, 1.0, 1.5, 3.0]),
)
def test_a_graph_is_valid_exactly_when_its_constructor_builds_it(extractor, tmp_path, points, stored, radius):
    """Random unit-disk graphs with random stored edges, and bipartite graphs with random edges: valid
    exactly when the stored form is what the constructor builds (edges within reach, within the vertex
    counts), decided here from the definition."""
    positions = [[float(x), float(y)] for x, y in points]
    n = len(positions)
    reach = [[i, j] for i in range(n) for j in range(i + 1, n) if math.dist(positions[i], positions[j]) <= radius]
    for edges in (reach, [list(e) for e in stored]):
        graph = {"positions": positions, "radius": radius, "edges": edges}
        validity, _ = extractor.validate(_mis("UnitDiskGraph", graph, n), tmp_path)
        assert validity.valid == (edges == reach), (graph, validity.reason)
    bipartite = {"left_size": 2, "right_size": 3, "edges": [list(e) for e in stored]}
    validity, _ = extractor.validate(
        {"type": "BicliqueCover", "variant": {}, "data": {"graph": bipartite, "k": 1}}, tmp_path
    )
    assert validity.valid == all(u < 2 and v < 3 for u, v in stored), validity.reason


def _slash(label: str) -> str:
    """`KColoring{graph=SimpleGraph,k=K3}` (keys sorted) as pred's `KColoring/SimpleGraph/K3`."""
    name, _, inner = label.partition("{")
    values = [pair.split("=", 1)[1] for pair in inner.rstrip("}").split(",") if pair]
    return "/".join([name, *values])


def test_every_graph_type_and_every_rules_source_is_checked(extractor, env_record, tmp_path):
    """The generated table covers every type a rule of the pinned version accepts, and every graph type of
    the library's topology (read from its source) has its check: rebuilt, or a Deserialize that builds."""
    run = extractor.runner.run
    rules = json.loads(run("rules", cwd=tmp_path).full_stdout)["rules"]
    covered = {_slash(c["problem"]) for c in json.loads(run("checks", cwd=tmp_path).full_stdout)}
    graphs = {g["graph"] for g in json.loads(run("graphs", cwd=tmp_path).full_stdout)["graphs"]}
    assert sorted({rule["source"] for rule in rules} - covered) == []
    declared = set()
    for path in (Path(env_record.source_dir) / "src" / "topology").glob("*.rs"):
        declared |= set(re.findall(r'impl_variant_param!\((\w+), "graph"', path.read_text()))
    assert {"UnitDiskGraph", "BipartiteGraph", "MixedGraph", "PlanarGraph", "SimpleGraph"} <= declared
    assert declared <= graphs, declared - graphs
    topology_types = set(
        re.findall(r"pub use \w+::(\w+);", (Path(env_record.source_dir) / "src/topology/mod.rs").read_text())
    )
    assert {t for t in topology_types if t.endswith(("Graph", "Subgraph"))} <= graphs


# -- aliases -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["MVC", "mvc", "MinimumVertexCover"])
def test_preds_aliases_are_accepted_where_pred_accepts_them(genuine, env_record, name):
    cert = copy.deepcopy(genuine)
    cert["source"]["type"] = name
    verdict = verify(cert, env_record)
    assert verdict.accepted, verdict.reason
    assert verdict.rule == "MinimumVertexCover -> EnsembleComputation"
    cert["source"]["type"] = name + "X"  # the contrast: no such problem
    assert not verify(cert, env_record).accepted
