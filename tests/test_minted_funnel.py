"""Reached / triggered / certified on a real pool run (report/funnel.py, issue 34): two scripted models
on the real test pool (tests/support/pools.py), run by the benchmark on the minted build through the
real gateway, reported by `predbench report`.

demo/minted reads the rule file of one minted bug, runs pred along it on the instance that exposes it
and certifies nothing there, then reproduces and certifies the other bug: for the first, reached and
triggered but not certified; for the second, all three. demo/looker runs pred along the first bug's
rule on an instance the bug does not expose: reached only. So the three flags differ, each against a
contrast, and per model reached >= triggered >= certified."""

import json

import pyarrow.parquet as pq
import pytest

from pytest_predbench.verify import pin
from tests.support.acceptance import Workspace
from tests.support.pool_demo import LOOKER, MODEL, write_funnel_demo
from tests.support.postgres import PgServer
from tests.support.report_runs import predbench, report

pytestmark = pytest.mark.slow  # a benchmark run and a report in subprocesses, on the real pool


def pool_run(tmp_path, pool, settings, store: bool):
    """The two models' run on the pool: in a run directory, or kept in PostgreSQL (planned, joined,
    exported): the directory the report reads."""
    ws, env = Workspace(tmp_path), {pin.VERSION_ENV: pool.version}
    plan = [
        "--model-settings=" + str(settings), "--pred-version", pool.version, "--models", f"{MODEL},{LOOKER}",
        f"--bug-pool={pool.root}",
    ]  # fmt: skip
    run = tmp_path / "run"
    if not store:
        proc = ws.pytest("bench_sessions", *plan, f"--run-dir={run}", env=env)
        assert proc.returncode == 0, proc.stdout[-3000:]
        return run
    with PgServer() as server:
        common = ["bench_sessions", f"--store={server.url}", "-p", "no:cacheprovider"]
        planned = ws.pytest(*common, "--run-id=funnel", "--plan-only", *plan, env=env)
        assert planned.returncode == 0, planned.stdout[-3000:] + planned.stderr[-2000:]
        joined = ws.pytest(*common, "--join=funnel", f"--bug-pool={pool.root}", env=env)
        assert joined.returncode == 0, joined.stdout[-3000:] + joined.stderr[-2000:]
        exported = predbench("export", "--store", server.url, "funnel", str(run))
        assert exported.returncode == 0, exported.stderr
    assert list((run / "instances").glob("*.json")), "the store kept the sessions' instances"
    return run


@pytest.mark.parametrize("store", [False, True], ids=["run-dir", "postgresql"])
def test_the_funnel_tells_reached_triggered_and_certified_apart(tmp_path, minted_pool, store):
    pool = minted_pool
    certified, looked_at = "minted-01", "minted-02"
    assert {bug.id for bug in pool.manifest.bugs} == {certified, looked_at}
    settings = write_funnel_demo(pool, certified, looked_at, tmp_path / "demo")
    run = pool_run(tmp_path, pool, settings, store)
    published = report(str(run))
    assert published.returncode == 0, published.stderr
    board = json.loads((run / "leaderboard.json").read_text())

    flags = {
        s["model"]: {f["id"]: (f["reached"], f["triggered"], f["certified"]) for f in s["funnel"]}
        for s in board["sessions"]
    }
    assert flags[MODEL] == {looked_at: (True, True, False), certified: (True, True, True)}
    assert flags[LOOKER] == {looked_at: (True, False, False), certified: (False, False, False)}
    tried = {s["model"]: {f["id"]: f["tried"] for f in s["funnel"]} for s in board["sessions"]}
    assert tried[LOOKER][looked_at] == 1 and tried[MODEL][certified] == 0  # certified: no trial needed

    rows = {row["model"]: row for row in board["models"]}
    assert rows[MODEL]["funnel"] == {"known": 2, "reached": 2, "triggered": 2, "certified": 1}
    assert rows[LOOKER]["funnel"] == {"known": 2, "reached": 1, "triggered": 0, "certified": 0}
    assert rows[MODEL]["minted"]["ids"] == [certified]  # certified is the minted recall, counted once

    pages = {s["model"]: (run / s["page"]).read_text() for s in board["sessions"]}
    assert f"{looked_at}</td><td>reached</td><td>triggered</td><td>—</td>" in pages[MODEL]
    assert f"{looked_at}</td><td>reached</td><td>—</td><td>—</td>" in pages[LOOKER]
    markdown = (run / "leaderboard.md").read_text()
    assert "reached 2, triggered 2, certified 1 of 2" in markdown
    assert "reached 1, triggered 0, certified 0 of 2" in markdown

    frame = pq.read_table(run / "funnel.parquet").to_pylist()
    got = {(r["model"], r["minted_bug"]): (r["reached"], r["triggered"], r["certified"]) for r in frame}
    assert got[(LOOKER, looked_at)] == (True, False, False) and got[(MODEL, certified)] == (True, True, True)


def test_reached_is_any_hop_and_only_a_first_hop_is_tried(minted_pool):
    """A path through the minted rule at any hop reaches it; only a first hop has the rule's source on
    record, so only it is a candidate for `triggered`. The same rule with another variant is no hop."""
    from pytest_predbench.report import funnel
    from pytest_predbench.session.protocol import PathStep, PredCall, Reduction

    bug = next(b for b in minted_pool.manifest.bugs if b.id == "minted-01")
    rule = bug.rules[0]
    source = PathStep(name=rule.source.name, variant=rule.source.variant or {})
    target = PathStep(name=rule.target.name, variant=rule.target.variant or {})
    other = PathStep(name=rule.source.name, variant={"weight": "i32"})

    def call(*path: PathStep) -> PredCall:
        reduction = Reduction(instance_sha256="0" * 64, path=list(path))
        return PredCall(tool="pred", argv=["reduce"], exit=0, seconds=0.1, reduction=reduction)

    first, deeper, wrong = call(source, target), call(other, source, target), call(other, target)
    assert funnel.reaches(first, bug) and funnel.first_rule(first, bug) == rule
    assert funnel.reaches(deeper, bug) and funnel.first_rule(deeper, bug) is None
    assert not funnel.reaches(wrong, bug) and funnel.first_rule(wrong, bug) is None
