"""The per-model progress table (status, summary, live) and the live tally, in process: long model ids
fold inside their column and every figure stays whole; the live table counts what the reports say
and estimates when each model is done."""

import re
import time

from pytest_predbench.report.progress import ModelFigures, duration, eta, pace_of
from pytest_predbench.report.tables import progress_text
from pytest_predbench.run.books import RUNNING_ELSEWHERE
from pytest_predbench.run.live import PROPERTY_NAMES, LiveProgress, Ticker, item_properties
from pytest_predbench.run.planning import build_plan
from pytest_predbench.session.progress import SessionProgress
from pytest_predbench.state.ledger import Ledger
from pytest_predbench.state.plan import PlanOptions
from pytest_predbench.state.records import ItemRecord, ItemStatus

LONG = "openrouter/anthropic/claude-sonnet-4-5-20250929-thinking-extended-context-v2"


def figures(model: str, **changes) -> ModelFigures:
    values = dict(
        model=model,
        planned=3,
        done=2,
        skipped=0,
        infra=0,
        remaining=1,
        verified_bugs=["R"],
        false_alarms=1,
        spent=0.1234,
        cap=1.0,
        reserved=0.0,
        running=1,
        stop_reasons={"cost_limit": 2},
        eta_seconds=125,
    )
    return ModelFigures(**{**values, **changes})


def column_of(line: str, text: str) -> int:
    return line.index(text) + len(text)


def test_a_long_model_id_folds_in_its_column_and_the_figures_stay_whole():
    table = progress_text(
        [figures(LONG), figures("a/x", spent=0.3, stop_reasons={"finished": 3}, eta_seconds=0)], width=120
    )
    lines = table.splitlines()
    header = next(line for line in lines if line.startswith("model"))
    model_width = header.index("done") - 1
    body = lines[lines.index(header) + 2 :]
    assert all(len(line) <= 120 for line in lines)
    assert header.split().count("alarms") == 1 and "false alarms" in header  # one-line headers
    folded = "".join(line[:model_width].strip() for line in body[: len(body) - 1])
    assert folded == LONG, "the id is folded, never cut"
    first, last = body[0], body[-1]
    assert "$0.1234" in first and "$1.0000" in first and "2m05s" in first
    assert last.startswith("a/x") and "$0.3000" in last and "done" in last
    assert column_of(first, "$0.1234") == column_of(last, "$0.3000"), "figures stay in line"
    assert "cost_limit 2" in table and "finished 3" in table


def test_a_table_too_wide_for_the_terminal_is_printed_wider_not_cut():
    table = progress_text([figures(LONG, stop_reasons={"cost_limit": 2, "step_limit": 1})], width=40)
    assert "$0.1234" in table and "$1.0000" in table and "2m05s" in table
    assert max(len(line) for line in table.splitlines()) > 40


def test_infra_and_reserved_columns_appear_only_when_some_model_has_them():
    plain = progress_text([figures("a/x")], width=200)
    assert "infra" not in plain and "reserved" not in plain
    busy = progress_text([figures("a/x", infra=1, reserved=0.05)], width=200)
    assert "infra" in busy and "reserved" in busy and "$0.0500" in busy


def test_eta_counts_the_items_left_up_to_each_models_last_one_in_plan_order():
    plan = build_plan(PlanOptions(runner="fake", models=["m/a", "m/b"], sessions=3))
    keys = [item.key for item in plan.items()]  # a-s1, b-s1, a-s2, b-s2, a-s3, b-s3
    done = set(keys[:3])
    assert eta(plan, done, 10.0) == {"m/a": 20.0, "m/b": 30.0}
    assert eta(plan, set(keys), 10.0) == {"m/a": 0.0, "m/b": 0.0}
    assert eta(plan, done, None) == {"m/a": None, "m/b": None}
    assert duration(0) == "done" and duration(None) == "—" and duration(3725) == "1h02m" and duration(65) == "1m05s"


def test_pace_from_the_moments_items_finished():
    from datetime import UTC, datetime, timedelta

    start = datetime(2026, 1, 1, tzinfo=UTC)
    assert pace_of([start, start + timedelta(seconds=10), start + timedelta(seconds=30)]) == 15.0
    assert pace_of([start]) is None


def test_the_live_table_counts_the_reports_it_receives():
    plan = build_plan(PlanOptions(runner="fake", models=["m/a", "m/b"], sessions=2))
    printed: list[str] = []
    now = [100.0]
    live = LiveProgress(plan, {}, Ledger.for_plan(plan), every=0, write=printed.append, clock=lambda: now[0])
    node = "bench_sessions/test_sessions.py::test_session[{}]"
    live.started(node.format("m/a-s01"))
    live.started(node.format("m/b-s01"))
    assert [(r.model, r.running) for r in live.rows()] == [("m/a", 1), ("m/b", 1)]
    now[0] = 110.0
    found = item_properties(
        "fake",
        ItemStatus.PASSED,
        "cost_limit",
        0.02,
        certificates=3,
        accepted=1,
        rejected=1,
        inconclusive=1,
        bugs=["R1"],
    )
    assert [name for name, _ in found] == list(PROPERTY_NAMES)
    live.ended(node.format("m/a-s01"), found)
    live.ended(node.format("m/b-s01"), item_properties("fake", ItemStatus.SKIPPED_BUDGET))
    a, b = live.rows()
    assert (a.done, a.running, a.remaining, a.false_alarms, a.verified_bugs, a.stop_reasons) == (
        1,
        0,
        1,
        1,
        ["R1"],
        {"cost_limit": 1},
    )
    assert a.spent == 0.02 and (b.skipped, b.remaining, b.done) == (1, 1, 0)
    assert a.eta_seconds == 5.0 * 1 and b.eta_seconds == 5.0 * 2  # 10 s for 2 items; a-s02, then b-s02
    assert len(printed) == 2 and "cost_limit 1" in printed[-1] and re.search(r"m/a\s+1\s+0\s+0\s+1\s+1", printed[-1])
    live.ended("tests/test_other.py::test_x", [])  # not a benchmark item: ignored
    assert len(printed) == 2


def test_the_live_table_prints_at_most_every_so_often():
    plan = build_plan(PlanOptions(runner="fake", models=["m/a"], sessions=3))
    printed: list[str] = []
    now = [0.0]
    live = LiveProgress(plan, {}, Ledger.for_plan(plan), every=30, write=printed.append, clock=lambda: now[0])
    for n, at in enumerate((10.0, 20.0, 31.0), 1):
        now[0] = at
        live.ended(f"x::test_session[m/a-s0{n}]", item_properties("fake", ItemStatus.PASSED, "finished"))
    assert len(printed) == 1 and "predbench progress after 31s" in printed[0]


def test_an_item_held_elsewhere_is_left_not_skipped_and_one_finished_elsewhere_is_counted_once():
    """Another host holds m/a-s01 (no record here: it is left, as the summary and `predbench status`
    count it); m/a-s02 was finished by another host after this one read the records (counted once)."""
    plan = build_plan(PlanOptions(runner="fake", models=["m/a"], sessions=3))
    done_elsewhere = {
        "m/a-s02": ItemRecord(
            item="m/a-s02",
            model="m/a",
            session=2,
            plan_digest=plan.digest(),
            runner="fake",
            status=ItemStatus.PASSED,
            invocation="other",
            worker="gw0",
            pid=1,
        )
    }
    live = LiveProgress(plan, done_elsewhere, Ledger.for_plan(plan), every=0, write=lambda text: None)
    node = "bench_sessions/test_sessions.py::test_session[{}]"
    live.ended(node.format("m/a-s01"), item_properties("fake", RUNNING_ELSEWHERE))
    live.ended(node.format("m/a-s02"), item_properties("fake", ItemStatus.PASSED))
    [row] = live.rows()
    assert (row.done, row.skipped, row.remaining) == (1, 0, 2)
    assert row.eta_seconds != 0, "not done: two items are left"
    assert dict(item_properties("fake", RUNNING_ELSEWHERE))["status"] == "running_elsewhere"


def test_the_timer_prints_the_table_while_no_item_ends_with_each_running_sessions_figures():
    """A session that runs for minutes (a baseline's) still shows: the timer prints every `every`
    seconds, and each running session's line gives what its worker last wrote."""
    plan = build_plan(PlanOptions(runner="fake", models=["m/a"], sessions=2))
    printed: list[str] = []
    now = [0.0]
    figures_of = {"m/a-s01": SessionProgress(steps=4, model_calls=4, pred_calls=17, dollars=0.0123, elapsed_seconds=75)}
    live = LiveProgress(
        plan, {}, Ledger.for_plan(plan), every=30, write=printed.append, clock=lambda: now[0],
        progress_of=figures_of.get,
    )  # fmt: skip
    live.started("x::test_session[m/a-s01]")
    live.started("x::test_session[m/a-s02]")
    for at in (10.0, 29.0, 30.0, 45.0, 61.0):
        now[0] = at
        live.maybe_print()  # what the timer's thread calls
    assert [text.splitlines()[0] for text in printed] == [
        "predbench progress after 30s",
        "predbench progress after 61s",
    ]
    assert printed[0].splitlines()[-2:] == [
        "  running m/a-s01: 4 step(s), 4 model call(s), 17 pred call(s), $0.0123 so far, 1m15s",
        "  running m/a-s02: starting",
    ]


def test_the_ticker_thread_prints_without_any_item_ending():
    plan = build_plan(PlanOptions(runner="fake", models=["m/a"], sessions=1))
    printed: list[str] = []
    live = LiveProgress(plan, {}, Ledger.for_plan(plan), every=0.1, write=printed.append)
    ticker = Ticker(live, period=0.05)
    ticker.start()
    try:
        for _ in range(200):  # up to 10 s on a loaded machine; usually 0.2 s
            if len(printed) >= 2:
                break
            time.sleep(0.05)
    finally:
        ticker.stop()
    assert len(printed) >= 2 and not ticker.is_alive()
    assert all(text.startswith("predbench progress after") for text in printed)


def test_no_timer_contrast_nothing_is_printed_while_no_item_ends():
    plan = build_plan(PlanOptions(runner="fake", models=["m/a"], sessions=1))
    printed: list[str] = []
    LiveProgress(plan, {}, Ledger.for_plan(plan), every=0.1, write=printed.append)
    time.sleep(0.3)
    assert printed == []


def test_crashes_are_counted_apart_from_bugs_in_the_records_the_live_table_and_the_status_table():
    """A crash is never a bug: the summary and status (from the records) and the live table (from the
    reports) count them in their own column, as the leaderboard does."""
    from pytest_predbench.report.progress import model_figures
    from pytest_predbench.state.records import ItemRecord
    from pytest_predbench.verify.verdict import Verdict

    plan = build_plan(PlanOptions(runner="fake", models=["m/a"], sessions=1))
    [item] = plan.items()
    verdicts = [
        Verdict(accepted=True, violation="suboptimal_extraction", reason="bug", rule="A -> B"),
        Verdict(accepted=True, violation="crash", reason="crash", rule="C -> D"),
    ]
    record = ItemRecord(
        item=item.key, model="m/a", session=1, plan_digest=plan.digest(), runner="fake",
        status=ItemStatus.PASSED, verdicts=verdicts, invocation="i", worker="w", pid=1,
    )  # fmt: skip
    assert (record.verified_rules, record.crash_rules) == (["A -> B"], ["C -> D"])
    [row] = model_figures(plan, {item.key: record}, Ledger.for_plan(plan))
    assert (row.verified_bugs, row.crashes) == (["A -> B"], ["C -> D"])
    table = progress_text([row], width=200)
    header = next(line for line in table.splitlines() if line.startswith("model"))
    assert header.split()[5:7] == ["bugs", "crashes"] and re.search(r"m/a(\s+\S+){4}\s+1\s+1\s", table)

    live = LiveProgress(plan, {}, Ledger.for_plan(plan), every=0, write=lambda text: None, clock=lambda: 0.0)
    properties = item_properties(
        "fake", ItemStatus.PASSED, certificates=2, accepted=2, bugs=["A -> B"], crashes=["C -> D"]
    )
    live.ended(f"x::test_session[{item.key}]", properties)
    [shown] = live.rows()
    assert (shown.verified_bugs, shown.crashes) == (["A -> B"], ["C -> D"])
