"""Entrants (state/entrants.py): the (agent, model) pairs a run ranks, and the one rule that labels
them; a plan of two agents — its items, accounts and per-entrant cap, its digest (a plan of one agent
keeps the digest it had when the option was `--runner`), and its resume, refused on another set of
agents and accepted on the same one."""

import uuid

import pytest

from pytest_predbench.run.join import create_shared, join_shared
from pytest_predbench.run.planning import build_plan, plan_options
from pytest_predbench.run.start import start_new, start_resumed
from pytest_predbench.session import opencode_install
from pytest_predbench.state.entrants import Entrant, entrants
from pytest_predbench.state.pgstore import PgStore
from pytest_predbench.state.plan import PlanError, PlanOptions
from pytest_predbench.state.rundir import RunDir

TWO = {"agents": ["mini-swe", "opencode"], "models": ["demo/finder"], "budget": 1.0}


def test_the_default_agent_s_entrants_keep_the_bare_model_id_the_others_carry_their_agent():
    assert Entrant("mini-swe", "demo/finder").label == "demo/finder"
    assert Entrant("opencode", "demo/finder").label == "opencode:demo/finder"  # contrast: another agent
    assert Entrant("fake", "m/a").label == "m/a" and Entrant("baseline", "baseline/random").label == "baseline/random"
    found = entrants(["mini-swe", "opencode"], ["baseline/random", "demo/finder"])
    assert found == [
        Entrant("baseline", "baseline/random"),  # a baseline is its own agent: once, whatever the agents
        Entrant("mini-swe", "demo/finder"),
        Entrant("opencode", "demo/finder"),
    ]


def test_a_plan_of_two_agents_has_an_item_an_account_and_a_cap_per_entrant():
    plan = build_plan(plan_options({**TWO, "sessions": 2}))
    assert [(i.key, i.agent, i.model) for i in plan.items()] == [
        ("demo/finder-s01", "mini-swe", "demo/finder"),
        ("opencode:demo/finder-s01", "opencode", "demo/finder"),
        ("demo/finder-s02", "mini-swe", "demo/finder"),
        ("opencode:demo/finder-s02", "opencode", "demo/finder"),
    ]
    assert plan.accounts == ["demo/finder", "opencode:demo/finder"]
    assert plan.budget.per_model == 0.5, "the budget is shared equally among the entrants"
    one = build_plan(plan_options({**TWO, "agents": ["mini-swe"]}))
    assert one.budget.per_model == 1.0 and one.accounts == ["demo/finder"], "contrast: one agent, one share"
    assert plan.agent_version("opencode") == opencode_install.VERSION
    assert plan.agent_version("mini-swe") == plan.packages["mini-swe-agent"] and one.agent_versions == {}


def test_the_agents_digest_in_any_order_and_one_agent_keeps_the_digest_of_runner():
    plan = build_plan(plan_options(TWO))
    assert build_plan(plan_options({**TWO, "agents": ["opencode", "mini-swe"]})).digest() == plan.digest()
    assert plan.content()["options"]["agents"] == ["mini-swe", "opencode"]
    one = build_plan(plan_options({**TWO, "agents": ["mini-swe"]}))
    assert one.digest() != plan.digest()
    options = one.content()["options"]
    assert options["runner"] == "mini-swe" and "agents" not in options, "as a plan recorded before agents"
    legacy = {k: v for k, v in one.options.model_dump().items() if k != "agents"} | {"runner": "mini-swe"}
    assert PlanOptions.model_validate(legacy) == one.options, "a recorded `runner` reads as its one agent"


@pytest.mark.parametrize(
    ("agents", "message"),
    [
        (["mini-swe", "codex"], "--agents: each must be one of mini-swe, opencode, fake, got 'codex'"),
        (["opencode", "opencode"], "--agents lists opencode more than once"),
        (["fake", "mini-swe"], "--agents: the fake runner measures no model, so it runs alone"),
        ([], "no agents: give --agents"),
    ],
)
def test_agents_that_cannot_be_planned_are_refused_in_one_line(agents, message):
    with pytest.raises(PlanError) as info:
        build_plan(plan_options({**TWO, "agents": agents}))
    assert str(info.value).startswith(message) and "\n" not in str(info.value)


def test_a_model_id_that_is_another_entrant_s_label_is_refused():
    with pytest.raises(PlanError, match="opencode:demo/finder names two entrants"):
        build_plan(plan_options({**TWO, "models": ["demo/finder", "opencode:demo/finder"]}))


def test_a_run_of_two_agents_resumes_on_the_same_agents_and_is_refused_on_others(tmp_path):
    run = RunDir(tmp_path / "run")
    state, lock = start_new(run, build_plan(plan_options(TWO)))
    lock.release()
    item = next(i for i in state.plan.items() if i.agent == "opencode")
    reservation = state.bookkeeper("gw0").reserve(item)
    assert reservation.model == "opencode:demo/finder", "booked to its entrant's account"
    assert state.store().snapshot().ledger.accounts["demo/finder"].reserved == 0, "not to the model's"

    with pytest.raises(PlanError) as info:
        start_resumed(run, {"agents": ["mini-swe"]})
    assert "planned differently: options.agents (run: ['mini-swe', 'opencode'], now: ['mini-swe'])" in str(info.value)

    resumed, lock = start_resumed(run, {"agents": ["opencode", "mini-swe"]})  # the same agents, as spelled
    lock.release()
    assert resumed.digest == state.digest and resumed.plan.agents == ["mini-swe", "opencode"]
    assert [i.key for i in resumed.plan.items()] == ["demo/finder-s01", "opencode:demo/finder-s01"]


def test_a_shared_run_of_two_agents_keeps_an_account_per_entrant_and_a_join_checks_the_agents(pg_server, tmp_path):
    """The same in PostgreSQL (`--store`, `--join`): its account rows are the entrants'."""
    run_id = f"t-{uuid.uuid4().hex[:12]}"

    def store() -> PgStore:
        return PgStore(pg_server.url, run_id, local=tmp_path / "local")

    state = create_shared(store(), build_plan(plan_options(TWO)))
    item = next(i for i in state.plan.items() if i.agent == "opencode")
    assert state.bookkeeper("gw0").reserve(item).model == "opencode:demo/finder"
    accounts = state.store().snapshot().ledger.accounts
    assert set(accounts) == {"demo/finder", "opencode:demo/finder"}
    assert accounts["opencode:demo/finder"].reserved > 0 and accounts["demo/finder"].reserved == 0
    with pytest.raises(PlanError, match="--join refused: .* planned differently: options.agents"):
        join_shared(store(), {"agents": ["opencode"]})
    joined = join_shared(store(), {})  # contrast: the same agents
    assert joined.digest == state.digest and joined.plan.accounts == ["demo/finder", "opencode:demo/finder"]
