"""The gateway's snapshot of a `pred reduce` call (session/reductions.py): the instance and the path
a session reduced, taken from pred's own output (never from a file of the agent's scratch) without
ever hanging or raising.

The contrast of every bad input is the good call beside it: the same reduce on a plain file is
summarised (its path, its instance stored under its sha256), so a missing summary means the gateway
refused the output, not that reduce failed. Each bad call still runs and exits as pred decides."""

import hashlib
import json
import time

import pytest

from pytest_predbench.session import reductions
from tests.support.sandboxes import reduce_calls, snapshot_sandbox

MIS = '{"type":"MaximumIndependentSet","variant":{"graph":"SimpleGraph","weight":"One"},"data":null}'
SOURCE = "pred create MIS --graph 0-1,1-2 -o p.json"
HOPS = [("MaximumIndependentSet", {"graph": "SimpleGraph", "weight": "One"}), ("MinimumVertexCover", {})]


@pytest.fixture
def sandbox(env_record, tmp_path):
    with snapshot_sandbox(env_record, tmp_path) as made:
        yield made


def calls(sandbox, command: str, timeout: float = 60) -> list:
    return reduce_calls(sandbox, command, timeout)[0]


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
def test_a_link_pred_reads_through_is_summarised_from_pred_s_own_output(sandbox, make, name):
    """The gateway never opens the agent's files, so a link changes nothing: the summary is pred's bundle."""
    [good] = calls(sandbox, f"{SOURCE} && pred reduce p.json --to MVC > out.json")
    assert good.reduction is not None
    [linked] = calls(sandbox, f"{make} && pred reduce {name} --to MVC > out.json")
    assert linked.exit == 0 and linked.reduction == good.reduction
    [other] = calls(sandbox, f"pred reduce {name} --to QUBO > out.json")  # the contrast: another path
    assert other.reduction is not None and other.reduction.path != good.reduction.path


def test_a_bundle_written_with_o_is_pred_s_own_whatever_the_file_is(sandbox):
    """With `-o` the summary is the stdout of the same call run again without it (reductions.shadow_argv):
    a link as the -o file, or the file rewritten at once, changes nothing."""
    [good] = calls(sandbox, f"{SOURCE} && pred reduce p.json --to MVC -o b.json")
    assert good.reduction is not None
    [linked] = calls(sandbox, "ln -sf b.json l.json && pred reduce p.json --to MVC -o l.json")
    assert linked.exit == 0 and linked.reduction == good.reduction
    [rewritten] = calls(sandbox, "pred reduce p.json --to MVC -o r.json && echo '{}' > r.json")
    assert rewritten.reduction == good.reduction
    [piped] = calls(sandbox, "cat p.json | pred reduce - --to MVC -o s.json")  # the contrast: stdin is gone
    assert piped.exit == 0 and piped.reduction is None


@pytest.mark.parametrize(
    "make",
    ["mkfifo in.json", "ln -s /dev/zero in.json", "head -c 300000 /dev/zero > in.json", "printf '[[[[' > in.json"],
)
@pytest.mark.parametrize("where", ["input", "bundle"])
def test_a_hostile_file_never_holds_the_gateway(sandbox, make, where):
    """A FIFO, a device, an oversized or malformed file as the input or the -o bundle: the call ends as pred
    decides (a FIFO holds pred, not the gateway: it ends with the command); a summary is pred's own bundle
    (pred overwrote the -o file) or none."""
    call = "pred reduce in.json --to MVC" if where == "input" else "pred reduce p.json --to MVC -o in.json"
    [good] = calls(sandbox, f"{SOURCE} && pred reduce p.json --to MVC > out.json")  # the contrast
    assert good.reduction is not None
    sandbox.set_pred_quota(None)
    started = time.monotonic()
    sandbox.run(f"rm -f in.json; {make}; {call} > out.json", timeout=5)
    assert time.monotonic() - started < 15
    log = [c for c in sandbox.take_pred_log() if c.argv[:1] == ["reduce"]]
    assert all(c.reduction in (None, good.reduction) for c in log), log  # pred's own bundle or none
    assert where == "bundle" or all(c.reduction is None for c in log)  # pred read no instance there


BUNDLE = json.dumps({"source": json.loads(MIS), "target": {}, "path": [{"name": n, "variant": v} for n, v in HOPS]})


@pytest.mark.parametrize(
    "stdout",
    [
        BUNDLE[:-1] + ',"pad":"' + "x" * reductions.MAX_SNAPSHOT_BYTES + '"}',
        BUNDLE[:30],
        '{"source":' + "[" * 100_000 + "]" * 100_000 + "}",
        BUNDLE.replace("null", "NaN"),
        BUNDLE.replace("null", '"\\ud800"'),
        BUNDLE.replace("null", "[" + "[]," * 30_000 + "[]]"),
        BUNDLE.replace('"data"', '"dat"'),
    ],
)
def test_a_bad_bundle_on_stdout_gives_no_summary(tmp_path, stdout):
    """pred's stdout holds the agent's strings: too large, cut, too deep, not JSON numbers, not Unicode, too
    many containers, no instance as its source — no summary, at once; the well-formed bundle beside it is one."""
    store = reductions.Snapshots(tmp_path)
    started = time.monotonic()
    assert reductions.snapshot(stdout.encode(), store) is None
    assert time.monotonic() - started < 2
    summary = reductions.snapshot(BUNDLE.encode(), store)
    assert [step.name for step in summary.path] == [n for n, _ in HOPS]
    assert (tmp_path / f"{summary.instance_sha256}.json").is_file()


def test_bad_bundles_and_arguments_are_no_summary():
    assert reductions.reduce_files(["reduce", "p.json", "--to", "MVC", "-o", "b.json"]) == ("p.json", "b.json")
    assert reductions.reduce_files(["reduce", "--via=v.json", "-ob.json", "p.json"]) == ("p.json", "b.json")
    assert reductions.reduce_files(["solve", "p.json"]) is None
    assert reductions.reduce_files(["reduce", "a.json", "b.json"]) is None
    assert reductions.shadow_argv(["reduce", "--via=v.json", "-ob.json", "p.json", "-q"]) == [
        "reduce", "--via=v.json", "p.json", "-q"
    ]  # fmt: skip
    assert reductions.shadow_argv(["reduce", "p.json", "--output", "b.json", "--to", "MVC"]) == [
        "reduce", "p.json", "--to", "MVC"
    ]  # fmt: skip
    assert reductions.shadow_argv(["reduce", "p.json", "--to", "MVC"]) is None  # no file written: stdout is the bundle
    assert reductions.shadow_argv(["reduce", "-", "-o", "b.json"]) is None  # stdin cannot be read again
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
    store = reductions.Snapshots(tmp_path, budget=2 * reductions.FILE_BYTES + 100)
    small, large = "x" * 60, "y" * (reductions.FILE_BYTES + 200)  # the small one costs a block
    assert store.keep(small) == hashlib.sha256(small.encode()).hexdigest()
    store.keep(large)  # would pass the cap: its sha256 only
    assert sorted(p.name for p in tmp_path.iterdir()) == [hashlib.sha256(small.encode()).hexdigest() + ".json"]
