"""A demo session on the real test pool (tests/support/pools.py) finds a minted bug, and the report
counts it as minted: a scripted model reproduces a minted bug with pred in its sandbox
(tests/support/pool_demo.py), the benchmark runs it on the pool's minted build, and `predbench report`
re-verifies it there and on the pristine build. Beside it, demo/finder finds the version's real bug on
the same build: a real bug, counted apart, the registry's. The contrast: the same script on the
pristine build builds a certificate that is rejected there, and no minted find is counted. Then the two
runs side by side (`--compare`, the pool named) and pooled (refused in one line)."""

import json

import pytest

from pytest_predbench.verify import pin
from tests.support.acceptance import Workspace
from tests.support.pool_demo import MODEL, write_demo
from tests.support.report_runs import report

pytestmark = pytest.mark.slow  # benchmark runs and reports in subprocesses, on the real pool

GENUINE = "MinimumVertexCover -> EnsembleComputation"


def test_a_demo_session_on_a_pool_finds_a_minted_bug_and_the_report_counts_it_as_minted(tmp_path, minted_pool):
    pool = minted_pool
    bugs = pool.manifest.bugs
    bug = next(b for b in bugs if json.loads(pool.certificate_path(b).read_text())["violation"] != "crash")
    settings = write_demo(pool, bug.id, tmp_path / "demo")
    ws, env = Workspace(tmp_path), {pin.VERSION_ENV: pool.version}
    common = ("bench_sessions", f"--model-settings={settings}", "--pred-version", pool.version)

    on_pool = tmp_path / "on-pool"
    models = f"{MODEL},demo/finder"
    proc = ws.pytest(*common, "--models", models, f"--bug-pool={pool.root}", f"--run-dir={on_pool}", env=env)
    assert proc.returncode == 0, proc.stdout[-3000:]
    published = report(str(on_pool))
    assert published.returncode == 0, published.stderr
    board = json.loads((on_pool / "leaderboard.json").read_text())
    row, finder = (next(r for r in board["models"] if r["model"] == m) for m in (MODEL, "demo/finder"))
    found = row["minted"]
    assert (found["found"], found["known"], found["ids"]) == (1, len(bugs), [bug.id])
    assert found["bands"][bug.band] == {"found": 1, "known": sum(b.band == bug.band for b in bugs)}
    assert row["false_alarms"] == 0 and row["real_bugs"] == [] and row["recall"]["found"] == 0
    assert finder["real_bugs"] == [GENUINE] and finder["minted"]["found"] == 0 and finder["false_alarms"] == 0
    assert finder["recall"]["ids"] == ["minimumvertexcover-to-ensemblecomputation"] and finder["candidates"] == []
    assert board["pool"]["digest"] == pool.digest and board["reverification"]["pristine_certificates"] == 2
    assert f"minted 1 of {len(bugs)}" in published.stdout
    pages = {s["model"]: (on_pool / s["page"]).read_text() for s in board["sessions"]}
    assert f"a minted bug ({bug.id}): the pristine build rejects it" in pages[MODEL]
    assert "a real bug of the version: the pristine build accepts it too" in pages["demo/finder"]

    pristine = tmp_path / "pristine"
    proc = ws.pytest(*common, "--models", MODEL, f"--run-dir={pristine}", env=env)
    assert proc.returncode == 1, proc.stdout[-3000:]  # its certificate is a false alarm there
    published = report(str(pristine))
    assert published.returncode == 0, published.stderr
    [plain] = json.loads((pristine / "leaderboard.json").read_text())["models"]
    assert plain["minted"] is None and plain["verified_bugs"] == 0 and plain["false_alarms"] == 1

    side = report(str(on_pool), str(pristine), "--compare", "--out", str(tmp_path / "compare"))
    assert side.returncode == 0, side.stderr
    text = (tmp_path / "compare" / "comparison.md").read_text()
    assert f"| {on_pool.name} | {pool.version} | pool {pool.digest[:12]} | {MODEL}" in text  # runs by their ids
    assert f"| {pristine.name} | {pool.version} | pristine | {MODEL}" in text
    merged = report(str(on_pool), str(pristine), "--out", str(tmp_path / "merged"))
    assert merged.returncode == 1 and "cannot pool runs on different bug pools" in merged.stderr
