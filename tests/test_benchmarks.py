"""The benchmark scripts (benchmarks/, `make perf`): each runs in its tiny --quick mode and prints
its figure line, and each one's pass/fail logic (`judge`: timings -> Figure) passes and fails on
made-up timings. Nothing here times anything or asserts a speed: the figures are for `make perf`.
"""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import (
    baseline_recall,
    batch_verification,
    brute_force_reach,
    budget_use,
    certificate_cost,
    cpu_share,
    endpoint_overhead,
    figures,
    gateway_overhead,
    mint_time,
    parallel_efficiency,
    plugin_overhead,
    prompt_caching,
    run_all,
    scale_out,
    setup_time,
    startup,
    verifier_overhead,
)
from pytest_predbench.session.protocol import Accounting, StopKind

REPO = Path(__file__).resolve().parent.parent

LINE = re.compile(
    r"^(?P<title>[a-z -]+): (?P<value>-?[\d.]+)\S*(?: [a-z0-9/ ]+)? \(target (<=|>=) [^)]+\) "
    r"(?P<verdict>OK|MISSED[^\[]*) \[(?P<cores>\d+) cores(?P<quick>, QUICK)?\]"
)


# -- pass/fail logic, on made-up timings ------------------------------------------------------


def verifier_timings(verifier: list[float], **changes) -> "verifier_overhead.Timings":
    fields = dict(
        certificates=22,
        pred_calls=60,
        counted_calls=60,
        same_exits=True,
        seconds={"verifier": verifier, "direct": [1.0] * len(verifier)},
    )
    return verifier_overhead.Timings(**{**fields, **changes})


def _costs(worst: float, full: str = "rejected", short: str = "inconclusive") -> "certificate_cost.Costs":
    from pytest_predbench.verify import reach

    one = certificate_cost.Cost
    return certificate_cost.Costs(
        command_timeout_s=60.0, cpu_per_call_s=120.0, budget_cpu_s=360.0, bound_cpu_s=361.0,
        certificate_bound=reach.certificate_cost_bound(60.0),
        costs=[one(name="slow, full", outcome=full, cpu_s=worst, wall_s=1.0, pred_calls=9),
               one(name="slow, short", outcome=short, cpu_s=120.0, wall_s=1.0, pred_calls=8),
               one(name="case", outcome="accepted", cpu_s=0.1, wall_s=0.1, pred_calls=9)],
    )  # fmt: skip


def test_certificate_cost_judge():
    assert certificate_cost.judge(_costs(121.0)).ok
    assert not certificate_cost.judge(_costs(400.0)).ok  # past the bound of one verification
    assert not certificate_cost.judge(_costs(121.0, full="inconclusive")).ok  # ILP never asked
    assert not certificate_cost.judge(_costs(121.0, short="rejected")).ok  # the budget not enforced
    assert "2163 in all" in certificate_cost.judge(_costs(121.0)).note


def test_verifier_overhead_judge():
    good = verifier_overhead.judge(verifier_timings([1.10, 1.05, 1.12]))
    assert good.ok and good.value == pytest.approx(1.10)
    slow = verifier_overhead.judge(verifier_timings([1.30, 1.20, 1.25]))
    assert not slow.ok and not slow.target_met
    # the median of the pairs: one disturbed repetition does not decide the figure
    assert verifier_overhead.judge(verifier_timings([1.05, 3.0, 1.10])).ok
    # a baseline that did not make the verifier's pred calls is no baseline, whatever the ratio
    assert not verifier_overhead.judge(verifier_timings([1.0, 1.0, 1.0], counted_calls=59)).ok
    assert not verifier_overhead.judge(verifier_timings([1.0, 1.0, 1.0], same_exits=False)).ok


def test_batch_verification_judge():
    def timings(parallel: list[float], **changes) -> "batch_verification.Timings":
        fields = dict(certificates=250, distinct=210, jobs=2, same_verdicts=True)
        return batch_verification.Timings(**{**fields, **changes}, seconds={"parallel": parallel, "serial": [10.0] * 3})

    assert batch_verification.judge(timings([5.5, 5.8, 5.2])).ok
    assert not batch_verification.judge(timings([7.0, 6.5, 6.8])).target_met
    assert not batch_verification.judge(timings([5.0, 5.0, 5.0], same_verdicts=False)).ok
    assert not batch_verification.judge(timings([5.0, 5.0, 5.0], certificates=150)).ok


def plugin_timings(plugin: list[float], complete_runs: int = 3) -> "plugin_overhead.Timings":
    return plugin_overhead.Timings(
        items=1000,
        seconds={"plugin": plugin, "bare": [2.0] * len(plugin)},
        complete_runs=complete_runs,
        fsync_ms=1.0,
        fsyncs=3000,
    )


def test_plugin_overhead_judge():
    good = plugin_overhead.judge(plugin_timings([6.0, 6.5, 5.5]))
    assert good.ok and good.value == pytest.approx(4.0) and good.raw["ratio"] == pytest.approx(3.0)
    slow = plugin_overhead.judge(plugin_timings([8.0, 7.5, 9.0]))
    assert not slow.ok and slow.value == pytest.approx(6.0)
    assert not plugin_overhead.judge(plugin_timings([2.5, 2.5, 2.5], complete_runs=2)).ok


def parallel_timings(phase: float, all_ran: bool = True) -> "parallel_efficiency.Timings":
    lanes = parallel_efficiency.Lanes(items_per_worker=[8] * 8, start_skew=0.1, inside_ms=20, between_ms=30)
    run = parallel_efficiency.Run(wall=phase + 5, phase=phase, all_ran=all_ran, lanes=lanes)
    return parallel_efficiency.Timings(sessions=64, workers=8, seconds=1.0, runs=[run, run, run])


def test_parallel_efficiency_judge():
    good = parallel_efficiency.judge(parallel_timings(8.8))
    assert good.ok and good.value == pytest.approx(100 * 8 / 8.8)
    assert not parallel_efficiency.judge(parallel_timings(10.0)).ok  # 80%
    assert not parallel_efficiency.judge(parallel_timings(8.2, all_ran=False)).ok


def scale_side(hosts: int, phase: float, all_ran: bool = True) -> "scale_out.Side":
    items = [36 // hosts] * hosts
    return scale_out.Side(
        hosts=hosts, wall=phase + 10, phase=phase, items_per_host=items, start_skew=0.1, all_ran=all_ran
    )


def scale_timings(one: float, three: float, all_ran: bool = True) -> "scale_out.Timings":
    sides = {"one": [scale_side(1, one)] * 3, "three": [scale_side(3, three, all_ran)] * 3}
    return scale_out.Timings(sessions=36, seconds=1.0, workers=2, **sides)


def test_scale_out_judge():
    good = scale_out.judge(scale_timings(18.5, 6.5))
    assert good.ok and good.value == pytest.approx(100 * 18.5 / 6.5 / 3)
    assert not scale_out.judge(scale_timings(18.5, 7.5)).ok  # 82%
    assert not scale_out.judge(scale_timings(18.5, 6.2, all_ran=False)).ok


def budget_run(spent: float, **changes) -> "budget_use.Run":
    fields = dict(
        spent=spent, cap=1.0, overspend=0.0, violations=[], sessions=190, skipped_budget=210, open_reservations=0
    )
    return budget_use.Run(**{**fields, **changes})


def test_budget_use_judge():
    plan = budget_use.BudgetPlan()
    good = budget_use.judge(budget_use.Outcome(plan=plan, runs=[budget_run(0.97), budget_run(0.985)]))
    assert good.ok and good.value == pytest.approx(97.0)  # the worst run is the figure
    low = budget_use.judge(budget_use.Outcome(plan=plan, runs=[budget_run(0.99), budget_run(0.93)]))
    assert not low.ok and low.value == pytest.approx(93.0)
    # a full budget is worth nothing if it was crossed
    over = budget_run(1.0, overspend=0.004, violations=["total spent 1.004 over its cap 1.0"])
    assert not budget_use.judge(budget_use.Outcome(plan=plan, runs=[over])).ok
    # nor if the budget never bound (every item ran): then use says nothing about the cap
    assert not budget_use.judge(budget_use.Outcome(plan=plan, runs=[budget_run(0.99, skipped_budget=0)])).ok
    assert not budget_use.judge(budget_use.Outcome(plan=plan, runs=[budget_run(0.99, open_reservations=1)])).ok


def startup_timings(plugin: list[float], loaded: list[str] | None = None) -> "startup.Timings":
    return startup.Timings(
        seconds={"plugin": plugin, "bare": [0.5] * len(plugin)}, agent_stack_loaded=loaded or [], plugin_import_ms=300
    )


def test_startup_judge():
    good = startup.judge(startup_timings([1.4, 1.5, 1.3]))
    assert good.ok and good.value == pytest.approx(0.9)
    assert not startup.judge(startup_timings([2.2, 2.1, 2.4])).ok
    assert not startup.judge(startup_timings([0.9, 0.9, 0.9], loaded=["litellm"])).ok


def caching_timings(cached: float, calls: int = 30, stop: StopKind = StopKind.FINISHED) -> "prompt_caching.Timings":
    def side(dollars: float) -> "prompt_caching.Side":
        return prompt_caching.Side(
            stop=stop, accounting=Accounting(dollars=dollars, model_calls=calls, prompt_tokens=9)
        )

    prices = {key: 1e-6 for key in prompt_caching.PRICE_KEYS}
    return prompt_caching.Timings(priced_as="m", prices=prices, cached=side(cached), uncached=side(1.0))


def test_prompt_caching_judge():
    good = prompt_caching.judge(caching_timings(0.2))
    assert good.ok and good.value == pytest.approx(0.2)
    assert not prompt_caching.judge(caching_timings(0.5)).ok
    assert not prompt_caching.judge(caching_timings(0.2, calls=6)).ok, "too short a session is no figure"
    assert not prompt_caching.judge(caching_timings(0.2, stop=StopKind.COST_LIMIT)).ok


def test_brute_force_reach_judge():
    def timings(seconds: float, solved: float | None, cpu: float | None = 39.0) -> "brute_force_reach.Timings":
        return brute_force_reach.Timings(
            seconds={20: [0.3], 24: [seconds, seconds]}, timeout_s=60, stated_binary=27, stated_solved_in=solved,
            checked=True, stated_cpu_s=cpu, verifier_cpu_s=120.0,
        )  # fmt: skip

    good = brute_force_reach.judge(timings(4.0, 40.0))
    assert good.ok and good.value == pytest.approx(27.9, abs=0.05)  # 2^24 / 4 s * 60 s = 2^27.9
    assert not brute_force_reach.judge(timings(9.0, 40.0)).ok, "slower than the prompt claims"
    assert not brute_force_reach.judge(timings(4.0, None, None)).ok, "the stated size did not solve in time"
    assert not brute_force_reach.judge(timings(4.0, 40.0, 121.0)).ok, "past the verifier's CPU limit"


def test_baseline_recall_judge():
    def setting(calls: int, recall: list[str], false_alarms: int = 0, stops=None) -> "baseline_recall.Setting":
        return baseline_recall.Setting(
            pred_calls_limit=calls, sessions=2, recall=recall, known=32, bugs=[], crashes=[], candidates=[],
            certificates=len(recall) + false_alarms, accepted=len(recall), false_alarms=false_alarms,
            pred_calls=[calls, calls], wall_seconds=[60.0, 61.0], stop_reasons=stops or {"pred_limit": 2}, command="",
        )  # fmt: skip

    four = ["a", "b", "c", "d"]
    good = baseline_recall.judge(baseline_recall.Timings(settings=[setting(150, ["a"]), setting(2000, four)]))
    assert good.ok and good.value == 4
    assert not baseline_recall.judge(baseline_recall.Timings(settings=[setting(150, []), setting(2000, ["a"])])).ok
    alarm = baseline_recall.judge(baseline_recall.Timings(settings=[setting(150, [], 1), setting(2000, four)]))
    assert alarm.target_met and not alarm.ok, "one false alarm anywhere fails the figure"
    crashed = [setting(150, []), setting(2000, four, stops={"error": 2})]
    assert not baseline_recall.judge(baseline_recall.Timings(settings=crashed)).ok


def test_cpu_share_judge():
    def timings(bounded: list[float]) -> "cpu_share.Timings":
        return cpu_share.Timings(hogs=32, seconds=5, share=1.0, bounded=bounded, unbounded=[0.05, 0.06, 0.04])

    good = cpu_share.judge(timings([0.9, 0.95, 0.3]))
    assert good.ok and good.value == pytest.approx(0.9) and "0.05 cores" in good.note
    assert not cpu_share.judge(timings([0.3, 0.35, 0.9])).ok, "the victim starved in most repetitions"


def test_gateway_overhead_judge():
    def timings(gateway: list[float], booked: int = 62) -> "gateway_overhead.Timings":
        return gateway_overhead.Timings(
            calls=20, gateway=gateway, direct=[0.030] * 3, host=[0.025] * 3, booked=booked, expected=62
        )

    good = gateway_overhead.judge(timings([0.033, 0.036, 0.060]))
    assert good.ok and good.value == pytest.approx(1.2)
    assert not gateway_overhead.judge(timings([0.045, 0.042, 0.040])).ok, "1.4x the direct call"
    assert not gateway_overhead.judge(timings([0.030] * 3, booked=61)).ok, "a call not booked exactly once"


def test_endpoint_overhead_judge():
    direct = [0.050, 0.060, 0.070]
    good = endpoint_overhead.judge(endpoint_overhead.Timings(direct=direct, endpoint=[0.052, 0.063, 0.090]))
    assert good.ok and good.value == pytest.approx(1.05) and "p90" in good.note
    slow = endpoint_overhead.judge(endpoint_overhead.Timings(direct=direct, endpoint=[0.060, 0.072, 0.080]))
    assert not slow.ok, "1.2x the direct call"


def test_endpoint_overhead_measures_both_sides_against_the_demo_server():
    timings = endpoint_overhead.measure(3, quick=True)
    assert len(timings.direct) == len(timings.endpoint) == 3 and min(timings.endpoint) > 0


def test_importtime_parsing_sees_top_level_and_nested_modules():
    log = (
        "import time: self [us] | cumulative | imported package\n"
        "import time:       100 |        900 | pytest_predbench\n"
        "import time:       800 |        800 |   pydantic\n"
        "import time:        50 |       5000 | litellm\n"
        "import time:        10 |         10 |     minisweagent.config\n"
    )
    modules = startup.imported(log)
    assert modules["pytest_predbench"] == 900 and modules["litellm"] == 5000
    assert "minisweagent" in modules and "pydantic" in modules  # nested imports are seen too


def test_interleaved_rotates_the_order_and_paired_follows_the_pairs():
    order: list[str] = []
    times = figures.interleaved({name: (lambda n=name: order.append(n)) for name in "abc"}, repeat=3)
    assert order == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]
    assert all(len(values) == 3 for values in times.values())
    made_up = {"x": [2.0, 4.0, 9.0], "y": [1.0, 2.0, 3.0]}
    assert figures.paired(made_up, "x", "y", lambda x, y: x / y) == [2.0, 2.0, 3.0]


def test_figure_line_names_verdict_cores_and_failed_conditions():
    figure = figures.Figure(key="k", title="thing", value=1.2, target=1.15, conditions={"held": True})
    assert figure.line().startswith("thing: 1.20 (target <= 1.15) MISSED [")
    assert f"[{figures.cores()} cores]" in figure.line()
    met = figure.model_copy(update={"value": 1.1, "conditions": {"zero overspend": False}})
    assert not met.ok and "MISSED (zero overspend failed)" in met.line()
    assert figure.model_copy(update={"value": 1.1}).ok


def test_run_all_tables_name_every_figure_and_failure():
    ok = figures.Figure(key="a", title="budget use", value=97.0, target=95.0, higher_is_better=True, unit="%")
    missed = figures.Figure(key="b", title="start-up", value=2.0, target=1.5, unit=" s extra", note="slow imports")
    results = run_all.Results(
        measured_at="2026-01-01T00:00:00+00:00",
        cores=2,
        load_average=[0.1, 0.2, 0.3],
        python="3.11",
        figures=[ok, missed],
        failed={"verifier_overhead": "verifier overhead: not measured: no pred"},
    )
    assert not results.ok
    text = "\n".join(run_all.table(results))
    assert "budget use" in text and "OK" in text and "MISSED" in text and "NOT MEASURED" in text
    md = run_all.markdown(results)
    assert "| budget use | 97.00% | >= 95.00% | OK |" in md
    assert "2 cores" in md and "slow imports" in md and "not measured: no pred" in md
    assert run_all.Results(**{**results.model_dump(), "figures": [ok], "failed": {}}).ok


# -- each script, in --quick mode --------------------------------------------------------------


def run_quick(name: str, tmp_path: Path) -> tuple[subprocess.CompletedProcess, "figures.Figure"]:
    out = tmp_path / f"{name}.json"
    proc = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{name}", "--quick", "--json", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        env=figures.child_environment(),
    )
    assert out.exists(), f"{name} --quick wrote no figure (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return proc, figures.Figure.model_validate_json(out.read_text())


def check_quick(name: str, tmp_path: Path) -> None:
    proc, figure = run_quick(name, tmp_path)
    line = proc.stdout.strip().splitlines()[-1]
    match = LINE.match(line)
    assert match, f"not a figure line: {line!r}"
    assert match["quick"] and int(match["cores"]) == figures.cores()
    assert line == figure.line()
    # the exit code is the verdict the line shows (quick figures may miss: they are not figures)
    assert proc.returncode == (0 if figure.ok else 1)
    assert match["verdict"].startswith("OK" if figure.ok else "MISSED")
    assert figure.quick and json.loads(figure.model_dump_json())["raw"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["plugin_overhead", "parallel_efficiency", "budget_use", "scale_out", "cpu_share"])
def test_quick_mode_fake_runner(name: str, tmp_path: Path):
    check_quick(name, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    [
        "verifier_overhead",
        "batch_verification",
        "startup",
        "brute_force_reach",
        "certificate_cost",
        "prompt_caching",
        "baseline_recall",
        "gateway_overhead",
        "setup_time",
    ],
)
def test_quick_mode_with_pred(name: str, tmp_path: Path, env_record):
    check_quick(name, tmp_path)


@pytest.mark.slow
def test_quick_mint_time_remints_the_cached_test_pool(tmp_path: Path, minted_pool):
    """mint_time --quick mints the tests' pool again: its builds must be in the cache first (the
    minted_pool fixture mints it, under its lock, outside this test's subprocess timeout), or on a
    fresh machine the quick run is a cold mint and no quick check."""
    check_quick("mint_time", tmp_path)


def test_setup_time_is_the_ratio_of_a_fresh_setup_to_a_bare_install():
    timings = setup_time.Timings(version="0.6.0", bare_seconds=1000.0, setup_seconds=1100.0, load_average=[2.0])
    figure = setup_time.judge(timings)
    assert figure.value == pytest.approx(1.1) and figure.ok and "18.3 min" in figure.note
    slow = setup_time.judge(timings.model_copy(update={"setup_seconds": 1200.0}))
    assert not slow.ok  # the contrast: 1.2x misses 1.15x


def test_mint_time_counts_builds_and_needs_every_bug_validated():
    timings = mint_time.MintTiming(
        version="0.6.0", seed=1, requested=10, minted=10, rounds=1, seconds=900.0, warm_targets=False,
        bands={"easy": 7, "hard": 3}, dropped=[], load_average=[2.0],
    )  # fmt: skip
    figure = mint_time.judge(timings)
    assert figure.ok and figure.value == 1 and "15.0 min" in figure.note and "7 easy" in figure.note
    assert not mint_time.judge(timings.model_copy(update={"rounds": 2})).ok  # a second build misses
    assert not mint_time.judge(timings.model_copy(update={"minted": 9})).ok  # so does a bug short


def test_a_benchmark_that_cannot_measure_says_so_in_one_line(tmp_path: Path):
    """No pred behind the environment record: exit 2 and one line naming the benchmark, no traceback."""
    missing = tmp_path / "nowhere" / "env.json"
    code = (
        "import sys; from benchmarks import figures\n"
        "from pytest_predbench.verify.environment import load_record\n"
        f"sys.exit(figures.report('verifier overhead', lambda: load_record('0.6.0', {str(missing)!r}), None))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == figures.NOT_MEASURED
    assert proc.stderr.strip().startswith(
        "verifier overhead: not measured: PredEnvironmentError: no environment record"
    )
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
