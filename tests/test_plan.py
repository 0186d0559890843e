"""The plan: items in one fixed interleaved order, budgets resolved as documented, and a digest
that moves with everything a result depends on (and with nothing else)."""

import json
import subprocess
import sys

import pytest

from pytest_predbench.files import CorruptStateError
from pytest_predbench.run.planning import build_plan, package_versions, plan_options
from pytest_predbench.session.protocol import SessionLimits
from pytest_predbench.state.plan import Plan, PlanError, PlanOptions, first_difference, read_plan, write_plan


def fake(**fields) -> PlanOptions:
    return PlanOptions(**{"runner": "fake", "models": ["m/b", "m/a"], **fields})


def test_items_interleave_sorted_models_in_one_order():
    plan = build_plan(fake(sessions=3))
    keys = [item.key for item in plan.items()]
    assert keys == ["m/a-s01", "m/b-s01", "m/a-s02", "m/b-s02", "m/a-s03", "m/b-s03"]
    assert plan.items() == build_plan(fake(models=["m/a", "m/b"], sessions=3)).items()
    assert [(i.model, i.session) for i in plan.items()][:2] == [("m/a", 1), ("m/b", 1)]


def test_session_numbers_widen_past_99_and_keep_order():
    keys = [item.key for item in build_plan(fake(models=["x"], sessions=120)).items()]
    assert keys[0] == "x-s001" and keys[-1] == "x-s120" and len(set(keys)) == 120


def test_default_budget_is_an_equal_share_then_split_per_session():
    budget = build_plan(fake(budget=0.2, sessions=4)).budget
    assert budget.capped and budget.total == 0.2
    assert budget.per_model == pytest.approx(0.1)
    assert budget.per_session == pytest.approx(0.025)


def test_explicit_model_and_session_budgets_win():
    plan = build_plan(fake(budget=1.0, model_budget=0.3, session_budget=0.05))
    assert (plan.budget.per_model, plan.budget.per_session) == (0.3, 0.05)
    assert plan.limits.dollars == 0.05, "the session cap is the session's hard dollar limit"


def test_no_budget_cap_caps_nothing_but_keeps_a_session_limit():
    uncapped = build_plan(fake(budget_cap=False)).budget
    assert not uncapped.capped and uncapped.total is None and uncapped.per_model is None
    assert uncapped.per_session == SessionLimits().dollars
    assert build_plan(fake(budget_cap=False, session_budget=0.05)).budget.per_session == 0.05


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"models": []}, "no models"),
        ({"models": ["a", "a"]}, "more than once"),
        ({"models": ["a b"]}, "not a model id"),
        ({"models": ["../x"]}, "not a model id"),
        ({"budget": -0.2}, "--budget must be a positive"),
        ({"budget": 0}, "--budget must be a positive"),
        ({"model_budget": -1}, "--model-budget must be a positive"),
        ({"session_budget": 0.6}, "exceeds the per-entrant cap"),
        ({"sessions": 0}, "--sessions must be at least 1"),
        ({"runner": "codex"}, "--agents: each must be one of"),
        ({"fake_cost": -0.01}, "cannot be negative"),
    ],
)
def test_invalid_plans_are_refused_in_one_line(fields, message):
    with pytest.raises(PlanError) as info:
        build_plan(fake(**fields))
    assert message in str(info.value) and "\n" not in str(info.value)


def test_fake_certificate_needs_the_fake_runner():
    with pytest.raises(PlanError, match="needs --agents fake"):
        build_plan(PlanOptions(models=["demo/finder"], fake_certificates=["x.json"]))


def test_a_missing_fake_certificate_is_a_one_line_error(tmp_path):
    with pytest.raises(PlanError, match="--fake-certificate: cannot read"):
        build_plan(fake(fake_certificates=[str(tmp_path / "missing.json")]))


def test_real_runner_resolves_every_model_to_a_priced_identity():
    plan = build_plan(PlanOptions(models=["demo/idle", "demo/finder"]))
    identity = plan.model_identities["demo/finder"]
    assert identity.call_name == "openai/demo-finder" and identity.price_source == "demo"
    assert identity.input_cost_per_token > 0 and identity.demo_script_sha256
    assert plan.pred is not None, "a real run verifies certificates: it needs the recorded pred"
    with pytest.raises(PlanError, match="unknown demo model"):
        build_plan(PlanOptions(models=["demo/no-such-script"]))


def test_digest_is_stable_and_moves_with_every_part_of_the_plan():
    base = build_plan(fake(sessions=2))
    assert build_plan(fake(sessions=2)).digest() == base.digest()
    variants = [
        build_plan(fake(sessions=3)),
        build_plan(fake(models=["m/a", "m/c"], sessions=2)),
        build_plan(fake(sessions=2, budget=2.0)),
        build_plan(fake(sessions=2, fake_cost=0.02)),
        build_plan(fake(sessions=2, budget_cap=False)),
        build_plan(fake(sessions=2, session_memory=2048)),
        build_plan(fake(sessions=2, session_processes=128)),
        build_plan(fake(sessions=2, session_disk=512)),
        build_plan(fake(sessions=2, session_cpu=1.5)),
        build_plan(fake(sessions=2, unbounded=True)),
        base.model_copy(update={"limits": SessionLimits(dollars=base.limits.dollars, model_calls=5)}),
        base.model_copy(update={"prompt_hash": "0" * 64}),
        base.model_copy(update={"packages": {**base.packages, "litellm": "1.0.0"}}),
    ]
    if base.pred is not None:
        variants.append(base.model_copy(update={"pred": base.pred.model_copy(update={"sha256": "0" * 64})}))
    digests = {v.digest() for v in variants}
    assert base.digest() not in digests and len(digests) == len(variants)


def test_the_session_bounds_are_limits_of_the_plan():
    plan = build_plan(fake(session_memory=2048, session_processes=128, session_disk=512, unbounded=True))
    limits = plan.limits
    assert (limits.memory_mib, limits.processes, limits.disk_mib, limits.unbounded) == (2048, 128, 512, True)
    defaults = build_plan(fake()).limits  # contrast: the defaults the README gives
    assert (defaults.memory_mib, defaults.processes, defaults.disk_mib, defaults.unbounded) == (4096, 256, 1024, False)
    with pytest.raises(PlanError, match="--session-processes must be a whole number, 16 or more"):
        build_plan(fake(session_processes=4))


def test_the_cpu_share_is_a_limit_of_the_plan_and_a_plan_without_it_keeps_its_digest():
    plan = build_plan(fake(session_cpu=1.5))
    assert plan.limits.cpu_cores == 1.5 and build_plan(fake(session_cpu=0)).limits.cpu_cores == 0
    default = build_plan(fake())  # contrast: not given, the share is the machine's (bounds.cpu_share)
    assert default.limits.cpu_cores is None
    content = default.content()  # so a plan recorded before the CPU bound has the digest it had
    assert "cpu_cores" not in content["limits"] and "session_cpu" not in content["options"]
    assert "cpu_cores" in plan.content()["limits"]
    for bad in (-1.0, 0.05):
        with pytest.raises(PlanError, match="--session-cpu must be a number of cores, 0.1 or more"):
            build_plan(fake(session_cpu=bad))
    with pytest.raises(PlanError, match="--session-cpu: Input should be a finite number"):  # no option is NaN
        plan_options({"runner": "fake", "models": ["m/a"], "session_cpu": float("nan")})


def test_where_pred_lives_is_not_part_of_the_digest():
    plan = build_plan(PlanOptions(models=["demo/finder"]))
    moved = plan.model_copy(update={"pred": plan.pred.model_copy(update={"path": "/elsewhere/pred"})})
    assert moved.digest() == plan.digest()


def test_first_difference_names_what_was_asked_for_first():
    old, new = build_plan(fake(budget=0.2)), build_plan(fake(budget=0.4))
    assert first_difference(old, new) == "options.budget (run: 0.2, now: 0.4)"


def test_plan_file_round_trips_and_an_edit_is_caught(tmp_path):
    plan = build_plan(fake(sessions=2))
    path = tmp_path / "plan.json"
    write_plan(path, plan)
    stored = read_plan(path)
    assert stored.digest == plan.digest() and isinstance(stored.plan, Plan)
    raw = json.loads(path.read_text())
    raw["plan"]["options"]["sessions"] = 9
    path.write_text(json.dumps(raw))
    with pytest.raises(CorruptStateError, match="does not match its digest"):
        read_plan(path)
    path.write_text("{")
    with pytest.raises(CorruptStateError, match="not a valid PlanFile"):
        read_plan(path)


def test_package_versions_come_from_metadata_without_importing_them():
    code = (
        "import sys; from pytest_predbench.run.planning import package_versions as p; v = p(); "
        "print(v['litellm'], v['mini-swe-agent'], 'litellm' in sys.modules, 'minisweagent' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[2:] == ["False", "False"]
    assert out[:2] == [package_versions()["litellm"], package_versions()["mini-swe-agent"]] and out[0] != "None"
