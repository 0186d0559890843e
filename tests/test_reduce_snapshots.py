"""The gateway's snapshot of a `pred reduce` call (session/reductions.py): the instance and the path
a session reduced, read from its hostile scratch without ever hanging, raising or following a link.

The contrast of every bad input is the good call beside it: the same reduce on a plain file is
summarised (its path, its instance stored under its sha256), so a missing summary means the gateway
refused the file, not that reduce failed. Each bad call still runs and exits as pred decides."""

import hashlib
import json
import os
import time

import pytest

from pytest_predbench.session import reductions
from pytest_predbench.verify.environment import checked_record
from tests.support.sandboxes import session_channel
from tests.support.versions import TEST_VERSION

MIS = '{"type":"MaximumIndependentSet","variant":{"graph":"SimpleGraph","weight":"One"},"data":null}'
SOURCE = "pred create MIS --graph 0-1,1-2 -o p.json"
HOPS = [("MaximumIndependentSet", {"graph": "SimpleGraph", "weight": "One"}), ("MinimumVertexCover", {})]


@pytest.fixture(scope="module")
def record():
    return checked_record(TEST_VERSION)


@pytest.fixture
def sandbox(record, tmp_path):
    made, _ = session_channel(record, tmp_path / "state", snapshots=tmp_path / "instances")
    yield made
    made.close()


def calls(sandbox, command: str, timeout: float = 60) -> list:
    sandbox.set_pred_quota(None)
    started = time.monotonic()
    out = sandbox.run(command, timeout=timeout)
    assert time.monotonic() - started < timeout, out.output
    return [call for call in sandbox.take_pred_log() if call.argv[:1] == ["reduce"]]


def test_a_reduce_call_is_summarised_and_its_instance_stored(sandbox, tmp_path):
    first, second = calls(
        sandbox, f"{SOURCE} && pred reduce p.json --to MVC > b.json && pred reduce p.json --to QUBO -o q.json"
    )
    assert first.exit == 0 and first.reduction is not None
    names = [step.name for step in first.reduction.path]
    assert names[0] == "MaximumIndependentSet" and names[-1] == "MinimumVertexCover"
    assert second.reduction is not None and second.reduction.path[-1].name == "QUBO"  # from the -o bundle
    sha = first.reduction.instance_sha256
    assert second.reduction.instance_sha256 == sha  # one instance, stored once
    stored = tmp_path / "instances" / f"{sha}.json"
    assert hashlib.sha256(stored.read_bytes()).hexdigest() == sha
    assert reductions.load_instance(tmp_path / "instances", sha)["type"] == "MaximumIndependentSet"
    [piped] = calls(sandbox, "cat p.json | pred reduce - --to MVC > /dev/null")
    assert piped.reduction is not None and piped.reduction.instance_sha256 == sha  # stdin: the bundle's source


@pytest.mark.parametrize(
    "make, name", [("ln -s p.json link.json", "link.json"), ("mkdir -p d && ln -s .. d/up", "d/up/p.json")]
)
def test_pred_reads_through_a_link_but_the_gateway_does_not(sandbox, make, name):
    [good] = calls(sandbox, f"{SOURCE} && pred reduce p.json --to MVC > out.json")
    assert good.reduction is not None  # the contrast
    [linked] = calls(sandbox, f"{make} && pred reduce {name} --to MVC > out.json")
    assert linked.exit == 0 and linked.reduction is None


def test_a_bundle_file_replaced_by_a_link_gives_no_summary(sandbox):
    [good] = calls(sandbox, f"{SOURCE} && pred reduce p.json --to MVC -o b.json")
    assert good.reduction is not None
    [linked] = calls(sandbox, "ln -sf b.json l.json && pred reduce p.json --to MVC -o l.json")
    assert linked.exit == 0 and linked.reduction is None


BUNDLE = json.dumps({"source": json.loads(MIS), "target": {}, "path": [{"name": n, "variant": v} for n, v in HOPS]})


def hostile(scratch, kind: str) -> None:
    """`in.json` in the host's copy of a scratch, as the agent may leave it."""
    target = scratch / "in.json"
    if kind == "good":
        target.write_text(MIS)
    elif kind == "symlink":
        (scratch / "real.json").write_text(MIS)
        target.symlink_to("real.json")
    elif kind == "fifo":
        os.mkfifo(target)
    elif kind == "oversized":
        target.write_text(MIS[:-1] + ',"pad":"' + "x" * reductions.MAX_SNAPSHOT_BYTES + '"}')
    elif kind == "malformed":
        target.write_text(MIS[:30])
    elif kind == "deep":
        target.write_text('{"type":"T","variant":{},"data":' + "[" * 100_000 + "]" * 100_000 + "}")
    elif kind == "device":
        target.symlink_to("/dev/zero")


@pytest.mark.parametrize("kind", ["good", "symlink", "fifo", "oversized", "malformed", "deep", "device"])
@pytest.mark.parametrize("where", ["input", "bundle"])
def test_a_hostile_file_gives_no_summary_and_no_hang(tmp_path, kind, where):
    """The snapshot itself on a scratch holding each hostile file, as the input instance or as the -o
    bundle: only the good file is summarised, and nothing takes longer than a moment."""
    scratch, store = tmp_path / "scratch", reductions.Snapshots(tmp_path / "instances")
    scratch.mkdir()
    if where == "input":
        hostile(scratch, kind)
        stdout, argv = BUNDLE.encode(), ["reduce", "in.json", "--to", "MVC"]
    else:
        (scratch / "p.json").write_text(MIS)
        hostile(scratch, kind)
        if kind == "good":
            (scratch / "in.json").write_text(BUNDLE)
        stdout, argv = b"", ["reduce", "p.json", "--to", "MVC", "-o", "in.json"]
    started = time.monotonic()
    summary = reductions.snapshot(scratch, "/scratch", argv, stdout, store)
    assert time.monotonic() - started < 5
    assert (summary is not None) == (kind == "good"), (kind, where, summary)
    if summary is not None:
        assert [step.name for step in summary.path] == [n for n, _ in HOPS]
        assert (tmp_path / "instances" / f"{summary.instance_sha256}.json").is_file()


def test_a_path_outside_the_scratch_is_never_read(tmp_path):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (tmp_path / "secret.json").write_text(MIS)
    for name in ("/etc/passwd", "../secret.json", "/scratch/../secret.json", str(tmp_path / "secret.json")):
        assert reductions.read_in_scratch(scratch, "/scratch", name) is None, name
    (scratch / "ok.json").write_text(MIS)
    assert reductions.read_in_scratch(scratch, "/scratch", "/scratch/ok.json") == MIS.encode()


def test_bad_bundles_and_arguments_are_no_summary():
    assert reductions.reduce_files(["reduce", "p.json", "--to", "MVC", "-o", "b.json"]) == ("p.json", "b.json")
    assert reductions.reduce_files(["reduce", "--via=v.json", "-ob.json", "p.json"]) == ("p.json", "b.json")
    assert reductions.reduce_files(["solve", "p.json"]) is None
    assert reductions.reduce_files(["reduce", "a.json", "b.json"]) is None
    good = {"source": json.loads(MIS), "path": [{"name": n, "variant": v} for n, v in HOPS]}
    assert [s.name for s in reductions.bundle_path(good)] == [n for n, _ in HOPS]
    for bad in (
        {"path": "x"},
        {"path": [{"name": "A"}]},
        {"path": [{"name": "A", "variant": {"w": 1}}, {"name": "B"}]},
        {"path": [{"name": "A"}] * (reductions.MAX_PATH_NODES + 1)},
        None,
    ):
        assert reductions.bundle_path(bad) is None, bad
    assert reductions.parse_json(b"[" * 5000 + b"]" * 5000) is None
    assert reductions.parse_json(b'{"a": NaN}') is None
    assert reductions.parse_json(b'{"a": 1}') == {"a": 1}


def test_the_session_store_stops_at_its_cap(tmp_path):
    store = reductions.Snapshots(tmp_path, budget=100)
    small, large = "x" * 60, "y" * 60
    assert store.keep(small) == hashlib.sha256(small.encode()).hexdigest()
    store.keep(large)  # would pass the cap: its sha256 only
    assert sorted(p.name for p in tmp_path.iterdir()) == [hashlib.sha256(small.encode()).hexdigest() + ".json"]
