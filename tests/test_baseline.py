"""The random baseline (session/baseline.py and its probe): its pieces, its place in the plan, the
ledger and the preflight, and its labelled row on every surface. The sandbox, pred and the verifier
are the real ones; the end-to-end runs are in tests/test_baseline_run.py (slow)."""

import csv
import importlib.machinery
import importlib.util
import io
import json
import random
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from pytest_predbench.report.leaderboard import build, write_leaderboard
from pytest_predbench.report.status import read_status, status_lines
from pytest_predbench.run.planning import build_plan, plan_options
from pytest_predbench.run.preflight import GateStatus, baseline_gate, run_gates
from pytest_predbench.session import baseline
from pytest_predbench.session.baseline import BaselineRunner
from pytest_predbench.session.protocol import SessionEnv, SessionLimits, StopKind
from pytest_predbench.state.ledger import Ledger
from pytest_predbench.state.liveness import current_owner
from pytest_predbench.state.plan import Budget, PlanError
from pytest_predbench.verify import evaluation, instances
from pytest_predbench.verify.evaluation import Evaluation
from tests.support.partial import partial_run
from tests.support.versions import TEST_VERSION


def load_probe():
    """The probe script as a module (it is a file the sandbox runs, not part of the package), loaded
    from a directory laid out as the sandbox's tools are: the verifier's modules next to it."""
    tools = Path(tempfile.mkdtemp(prefix="predbench-probe-"))
    for name, text in baseline.probe_tools().items():
        (tools / name).write_text(text)
    sys.path.insert(0, str(tools))
    try:
        script = str(tools / baseline.PROBE_TOOL)  # no .py suffix: name its loader
        loader = importlib.machinery.SourceFileLoader("predbench_probe", script)
        spec = importlib.util.spec_from_file_location("predbench_probe", script, loader=loader)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(tools))
        shutil.rmtree(tools)
    return module


probe = load_probe()


# -- the probe's judgement is the verifier's ---------------------------------------------------------

INSTANCES = [
    {"type": "KSatisfiability", "variant": {"k": "K3"}, "data": {"num_vars": 3, "clauses": [{"literals": [1, -2, 3]}]}},
    {"type": "KSatisfiability", "variant": {"k": "K3"}, "data": {"num_vars": 3, "clauses": [{"literals": [1, 0, 3]}]}},
    {"type": "Satisfiability", "variant": {}, "data": {"num_vars": 2, "clauses": [{"literals": [1, -3]}]}},
    {"type": "MaximumIndependentSet", "variant": {"weight": "i32"}, "data": {"weights": [2**30, 2**30]}},
    {"type": "MaximumIndependentSet", "variant": {"weight": "i32"}, "data": {"weights": [2**30, 2**30 - 1]}},
    {"type": "Partition", "variant": {}, "data": {"sizes": [3_000_000_000, 3_000_000_000]}},
    {"type": "Partition", "variant": {}, "data": {"sizes": [2**52, 2**52, 1]}},
    {"type": "SpinGlass", "variant": {"weight": "f64"}, "data": {"couplings": [0.5, -1.5], "fields": [2.0]}},
]


def test_the_probe_judges_with_the_verifiers_own_code():
    """Not a copy kept in step with the verifier: the sandbox gets the verifier's modules byte for
    byte, and the probe's evaluations and instance checks are theirs."""
    tools = baseline.probe_tools()
    assert tools["evaluation.py"] == Path(evaluation.__file__).read_text()
    assert tools["instances.py"] == Path(instances.__file__).read_text()
    assert probe.Evaluation.__module__ == "evaluation", "the probe defines no Evaluation of its own"
    assert probe.Evaluation.parse.__func__.__code__.co_code == Evaluation.parse.__func__.__code__.co_code
    for name in ("literal_problem", "arithmetic_problem"):
        theirs, mine = getattr(instances, name), getattr(probe, name)
        assert mine.__module__ == "instances" and mine.__code__.co_code == theirs.__code__.co_code, name


def test_the_contrast_cases_are_refused_at_all():
    refused = [i for i in INSTANCES if probe.literal_problem(i, "source") or probe.arithmetic_problem(i, "source")]
    assert len(refused) == 4, "literal 0, literal past num_vars, an i32 sum past 2^31 - 1, a sum past 2^53"
    assert probe.Evaluation.parse("Min(1)").better_than(probe.Evaluation.parse("Min(2)")), "one is better"


# -- random instances --------------------------------------------------------------------------------

GRAPH = {
    "type": "MinimumVertexCover",
    "variant": {"graph": "SimpleGraph", "weight": "i64"},
    "data": {"graph": {"edges": [[0, 1], [1, 2]], "num_vertices": 3}, "weights": [1, 2, 3]},
}


def test_mutations_are_reproducible_and_keep_edges_pairs():
    first = [probe.mutate(GRAPH, random.Random(seed)) for seed in range(300)]
    assert first == [probe.mutate(GRAPH, random.Random(seed)) for seed in range(300)], "seeded: reproducible"
    changed = [mutant for mutant, _ in first if mutant != GRAPH]
    assert len(changed) > 250, "nearly every mutation changes the instance"
    assert GRAPH["data"]["weights"] == [1, 2, 3], "the base instance is left alone"
    for mutant, what in first:
        edges = mutant["data"]["graph"]["edges"]
        assert all(isinstance(e, list) and len(e) == 2 for e in edges), what
        assert all(v < probe.BIG_NUMBER for e in edges for v in e), f"an index is not a quantity: {what}"
    bigs = [m for m, what in first if "big weights" in what]
    assert any(max(m["data"]["weights"] or [0]) >= probe.BIG_NUMBER for m in bigs), "a weight past i32"


def test_random_formulas_are_formulas_of_the_variant():
    base = {"type": "KSatisfiability", "variant": {"k": "K3"}, "data": {"num_vars": 3, "clauses": []}}
    formulas = [probe.random_formula(base, random.Random(seed)) for seed in range(200)]
    assert all(len(c["literals"]) == 3 for f in formulas for c in f["data"]["clauses"])
    assert all(probe.literal_problem(f, "source") is None for f in formulas), "every literal is ±v, 1 <= v <= num_vars"
    assert len({json.dumps(f) for f in formulas}) > 150
    assert probe.random_formula(GRAPH, random.Random(0)) is None, "the contrast: a graph is not a formula"


# -- the walk ---------------------------------------------------------------------------------------


def test_the_walk_order_is_the_sessions_and_differs_between_sessions():
    one, two = (baseline.session_seed(f"baseline/random-s0{n}") for n in (1, 2))
    order = baseline.rule_order(260, one)
    assert order == baseline.rule_order(260, baseline.session_seed("baseline/random-s01")), "reproducible"
    assert sorted(order) == list(range(260)), "every rule, once"
    assert order != baseline.rule_order(260, two), "another session walks another order"


def test_a_rules_share_of_the_pred_calls():
    assert baseline.rule_share(150, 260) == baseline.MIN_RULE_CALLS, "at least one instance"
    assert baseline.rule_share(2000, 260) == 7
    assert baseline.rule_share(10**6, 260) == baseline.MAX_RULE_CALLS, "at most the cap, so a walk can finish"


def test_the_probe_summary_is_its_last_line():
    output = 'noise\nPROBE {"rule": "A -> B"}\nmore noise\nPROBE {"rule": "C -> D"}\n'
    assert baseline.probe_summary(output) == {"rule": "C -> D"}
    assert baseline.probe_summary("PROBE {not json") is None
    assert baseline.probe_summary("nothing") is None


# -- the plan, the ledger, the preflight --------------------------------------------------------------


def test_a_baseline_is_planned_beside_models_with_no_price_and_its_probe():
    plan = build_plan(plan_options({"models": ["demo/finder", "baseline/random"], "budget": 0.5}))
    identity = plan.model_identities["baseline/random"]
    assert (identity.input_cost_per_token, identity.output_cost_per_token) == (0.0, 0.0)
    assert identity.price_source == baseline.PRICE_SOURCE and identity.call_name == "predbench-probe"
    assert identity.demo_script_sha256 == baseline.probe_sha256(), "the digest covers the probe"
    assert plan.model_identities["demo/finder"].input_cost_per_token > 0
    agents = {item.model: item.agent for item in plan.items()}
    assert agents == {"baseline/random": "baseline", "demo/finder": "mini-swe"}
    assert plan.budget.per_model == 0.5, "the baseline takes no share of the budget"
    assert plan.pred is not None


def test_a_baseline_runs_under_the_fake_runner_too():
    plan = build_plan(plan_options({"runner": "fake", "models": ["fake/a", "baseline/random"]}))
    assert {item.model: item.agent for item in plan.items()} == {"baseline/random": "baseline", "fake/a": "fake"}
    assert plan.pred is not None, "its certificates are verified"


def test_an_unknown_baseline_is_refused_in_one_line():
    with pytest.raises(PlanError) as refused:
        build_plan(plan_options({"models": ["baseline/smart"]}))
    assert str(refused.value) == "--models: 'baseline/smart' is not a baseline; the baselines are baseline/random"


def test_a_baseline_reserves_nothing_and_is_never_skipped_for_budget():
    caps = Budget(capped=True, total=0.1, per_model=0.1, per_session=0.05)
    book = Ledger(models=["a", "baseline/random"]).bound(caps)
    assert book.reserve("a-s01", "a", current_owner()) and book.reserve("a-s02", "a", current_owner())
    assert book.reserve("a-s03", "a", current_owner()) is None, "the contrast: the model is out of budget"
    held = book.reserve("baseline/random-s01", "baseline/random", current_owner())
    assert held is not None and held.dollars == 0.0
    assert book.total.reserved == pytest.approx(0.1), "the baseline holds none of the budget"


def test_a_baselines_gate_is_its_program_in_the_sandbox_with_no_call(env_record):
    results = run_gates(["baseline/random"], "mini-swe", SessionLimits(), version=TEST_VERSION)
    assert [r.gate for r in results] == ["pred", "source", "sandbox", "bounds", "model baseline/random"]
    assert all(r.status is GateStatus.PASSED for r in results), [r.line for r in results]
    gate = results[-1]
    assert gate.dollars == 0.0 and "no probe call and no price" in gate.detail and "Python 3" in gate.detail
    broken = baseline_gate(env_record, "baseline/random", bwrap="/nonexistent/bwrap")
    assert broken.status is GateStatus.FAILED and "does not start" in broken.detail


# -- a session in the real sandbox ------------------------------------------------------------------


def session_env(record, root: Path, session_id: str = "baseline/random-s01") -> SessionEnv:
    return SessionEnv(
        pred_version=record.pred_version,
        pred_path=record.pred_path,
        extractor_path=record.extractor_path,
        source_dir=record.source_dir,
        workdir=str(root / "scratch"),
        trajectory_path=str(root / "trajectory.json"),
        session_id=session_id,
    )


def test_a_tiny_pred_call_limit_stops_it_with_pred_limit(env_record, tmp_path):
    result = BaselineRunner().run(session_env(env_record, tmp_path), "baseline/random", SessionLimits(pred_calls=3))
    assert result.stop.kind is StopKind.PRED_LIMIT, result.stop
    assert result.stop.detail.startswith("the limit of 3 pred calls is used up after 0 of 260 rules")
    acct = result.accounting
    assert (acct.pred_calls, acct.dollars, acct.model_calls) == (3, 0.0, 0)
    assert acct.shell_actions == 2, "the catalogue, then one rule cut short by the sandbox's quota"
    trajectory = json.loads(Path(result.trajectory_path).read_text())
    assert trajectory["runner"] == "baseline" and trajectory["label"] == baseline.LABEL
    assert [s["pred_calls"] for s in trajectory["steps"]] == [1, 2]
    assert trajectory["steps"][1]["said"]["stopped"] == "quota"


def test_too_little_wall_time_stops_it_with_time_limit(env_record, tmp_path):
    limits = SessionLimits(wall_seconds=baseline.MIN_COMMAND_S - 1)
    result = BaselineRunner().run(session_env(env_record, tmp_path), "baseline/random", limits)
    assert result.stop.kind is StopKind.TIME_LIMIT and result.accounting.pred_calls == 0


# -- the labelled row on every surface --------------------------------------------------------------


def test_every_surface_labels_the_baselines_row(tmp_path):
    run = partial_run(tmp_path / "run", ("baseline/random", "fake/a"), 1, lambda item: True, max_pred_calls=3)
    board = build([run])
    rows = {row.model: row for row in board.models}
    assert rows["baseline/random"].label == baseline.LABEL and rows["baseline/random"].runner == "baseline"
    assert rows["fake/a"].label is None and rows["fake/a"].runner == "fake"
    assert rows["baseline/random"].dollars == 0.0
    paths = write_leaderboard(tmp_path / "out", board)
    shown = f"baseline/random — {baseline.LABEL}"
    markdown, html = paths["md"].read_text(), paths["html"].read_text()
    assert shown in markdown and "baseline/random is a baseline (no model)" in markdown
    assert "fake/a — " not in markdown, "the contrast: a model is not labelled"
    assert 'class="model-row baseline-row" data-model="baseline/random"' in html and shown in html
    table = {r["model"]: r for r in csv.DictReader(io.StringIO(paths["csv"].read_text()))}
    assert (table["baseline/random"]["runner"], table["baseline/random"]["label"]) == ("baseline", baseline.LABEL)
    assert (table["fake/a"]["runner"], table["fake/a"]["label"]) == ("fake", "")
    manifest = dict(json.loads(paths["json"].read_text())["runs"][0]["model_identities"])
    assert manifest["baseline/random"]["price_source"] == baseline.PRICE_SOURCE
    status = "\n".join(status_lines(read_status(run), width=160))
    assert "runner fake, baseline (no model) for baseline/random" in status and shown in status
