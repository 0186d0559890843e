"""Red team of the gateway's `pred reduce` snapshots (session/reductions.py, issue 34): attacks a hostile
session can make on the instance and path the funnel (report/funnel.py) reads, each on the real gateway,
sandbox and pred where it needs a session.

The agent controls when the gateway takes its snapshot: the gateway relays a call's output before it
logs the call, and waits up to RELAY_WRITE_SECONDS for a pipe that is full. A session that fills its own
stdout pipe and reads it only after a while holds the snapshot back for as long as it likes within that
bound, and can rewrite any file in the meantime. So nothing the snapshot records may come from a file:
path and instance are pred's own output (its stdout, and for `-o FILE` a second run of the same call
whose stdout the gateway keeps)."""

import hashlib
import json
import time

import pytest

from pytest_predbench.files import json_shape_problem
from pytest_predbench.session import reductions
from tests.support.sandboxes import reduce_calls, snapshot_sandbox

SOURCE = "pred create MIS --graph 0-1,1-2 -o p.json"
OTHER = json.dumps(
    {
        "type": "MaximumIndependentSet",
        "variant": {"graph": "SimpleGraph", "weight": "One"},
        "data": {"graph": {"num_vertices": 2, "edges": [[0, 1]]}, "weights": [1, 1]},
    }
)
FORGED = json.dumps(
    {
        "source": json.loads(OTHER),
        "target": {},
        "path": [
            {"name": "MaximumIndependentSet", "variant": {"graph": "SimpleGraph", "weight": "One"}},
            {"name": "QUBO", "variant": {"weight": "f64"}},
        ],
    }
)
STALL = "{{ head -c 300000 /dev/zero & {call}; wait; }} 2>&1 | {{ sleep 2; {swap}; cat > /dev/null; }}"
"""The agent's command that holds the snapshot back: its pipe is full (head), so the gateway cannot
relay pred's output until the reader wakes, and the reader first rewrites a file (`swap`)."""


@pytest.fixture
def sandbox(env_record, tmp_path):
    with snapshot_sandbox(env_record, tmp_path) as made:
        yield made


def canonical_sha(instance: dict) -> str:
    return hashlib.sha256(reductions.instance_text(instance).encode()).hexdigest()


def test_a_bundle_file_rewritten_before_the_snapshot_is_not_the_recorded_path(sandbox, tmp_path):
    """Reached forged: pred wrote MIS -> MVC to b.json, the agent put a bundle naming MIS -> QUBO there
    while the gateway waited on its pipe. The call must not be recorded as a reduction to QUBO."""
    setup = f"{SOURCE} && printf '%s' '{FORGED}' > fake.json"
    [plain], _ = reduce_calls(sandbox, f"{setup} && pred reduce p.json --to MVC -o b.json")
    assert plain.reduction is not None and plain.reduction.path[-1].name == "MinimumVertexCover"  # the contrast
    [stalled], out = reduce_calls(
        sandbox, STALL.format(call="pred reduce p.json --to MVC -o b.json", swap="cp fake.json b.json")
    )
    assert stalled.exit == 0, out.output
    assert "QUBO" in sandbox.run("cat b.json", timeout=10).output  # the swap happened before the gateway looked
    assert stalled.reduction is not None, "pred's own bundle is still known"
    assert [s.name for s in stalled.reduction.path] == [s.name for s in plain.reduction.path]
    assert stalled.reduction.instance_sha256 == plain.reduction.instance_sha256


def test_an_input_swapped_after_pred_read_it_is_not_the_recorded_instance(sandbox, tmp_path):
    """Triggered's input forged: pred reduced p.json's graph 0-1,1-2; the agent replaced p.json with another
    instance before the snapshot. The instance recorded must be the one pred reduced (its bundle's source)."""
    [plain], _ = reduce_calls(sandbox, f"{SOURCE} && pred reduce p.json --to MVC > /dev/null")
    pred_read = plain.reduction.instance_sha256
    assert pred_read != canonical_sha(json.loads(OTHER))  # the contrast: two different instances
    swap = f"printf '%s' '{OTHER}' > p.json"
    [stalled], out = reduce_calls(sandbox, STALL.format(call="pred reduce p.json --to MVC", swap=swap))
    assert stalled.exit == 0, out.output
    assert stalled.reduction is not None and stalled.reduction.instance_sha256 == pred_read
    stored = reductions.load_instance(tmp_path / "instances", pred_read)
    assert stored["data"]["graph"]["edges"] == [[0, 1], [1, 2]]


def test_the_json_shape_check_is_linear_on_unterminated_strings():
    """`"\\"\\"\\"...` never closes its string: a scan of strings that restarts at every quote is quadratic
    (32 KB took 7 s, the snapshot's 256 KB many minutes, holding the GIL). The check must stay linear and
    still skip brackets inside strings."""
    for payload in (b'"' + b'\\"' * 16_000, b'["' + b'\\"' * 16_000 + b"\\"):
        started = time.monotonic()
        json_shape_problem(payload, 20_000, 64)
        assert time.monotonic() - started < 1.0
    assert json_shape_problem(b'["[[[[[["]', 1, 64) is None  # brackets in a string are not containers
    assert json_shape_problem(b"[[[[[[]]]]]]", 1, 64) is not None  # the contrast


def test_a_stored_instance_can_always_be_loaded(tmp_path):
    """An instance is stored only if load_instance can read it back: canonical JSON written with \\u
    escapes grows a 4-byte character to 12 bytes, past the size load_instance reads, so an instance pred
    took could be stored (budget spent) and then never tried."""
    store = reductions.Snapshots(tmp_path)
    wide = {"type": "T", "variant": {}, "data": "\U0001f600" * 50_000}  # 200 KB of UTF-8
    text = reductions.instance_text(wide)
    assert text is not None
    sha = store.keep(text)
    assert reductions.load_instance(tmp_path, sha) == wide
    small = {"type": "T", "variant": {}, "data": "x"}  # the contrast
    assert reductions.load_instance(tmp_path, store.keep(reductions.instance_text(small))) == small


def test_many_tiny_instances_cost_the_budget_their_disk(tmp_path):
    """Distinct tiny instances (one per reduce call) each take a block on disk: the session's budget counts
    that, not their few bytes, so 16 MB of budget is at most 16 MB of disk."""
    store = reductions.Snapshots(tmp_path, budget=4 * 4096)
    for n in range(10):
        store.keep(reductions.instance_text({"type": "T", "variant": {}, "data": n}))
    assert len(list(tmp_path.glob("*.json"))) == 4
    big = reductions.Snapshots(tmp_path / "big", budget=100 * 4096)  # the contrast
    for n in range(10):
        big.keep(reductions.instance_text({"type": "T", "variant": {}, "data": n}))
    assert len(list((tmp_path / "big").glob("*.json"))) == 10
