"""What a session's `pred reduce` call reduced: the instance and the path, snapshot by the gateway.

The funnel of a minted bug (report/funnel.py) asks whether a session ran pred along the bug's rule
(reached) and whether pred's round trip there was wrong on the session's own instance (triggered).
The gateway's log alone (argv, exit, bytes) cannot say either, so after a `pred reduce` call ends
the gateway (harness side) keeps a summary of pred's own output, the reduction bundle
(`{"source", "target", "path"}`): its path, and its `source` — the instance pred read — stored
content-addressed (`<sha256>.json`, canonical JSON) in the run's instance folder, its sha256 recorded
on the call (PredCall.reduction).

Nothing of it is read from a file. Every file in the scratch is the agent's, and the agent chooses
when the snapshot is taken: the gateway relays a call's output before it logs the call, so a session
whose stdout pipe is full holds the snapshot back (up to the relay's stall limit) while it rewrites
the input or the `-o` bundle — a path pred never took, an instance pred never reduced. So the bundle
is only ever pred's stdout, a capped copy taken as the gateway relays it; a call that wrote its bundle
to a file (`-o FILE`) is run once more by the gateway without `-o` (shadow_argv: same input, same
options, in the same sandbox, not counted, its output seen by nobody), and that run's stdout is the
bundle. That second run may read another input than the first if the agent swapped it in between,
but then it is that input pred reduced along that path: path and instance always come from one run
of the real pred. A reduce from stdin with `-o` cannot be run again and gets no summary.

The copy is hostile-input safe all the same (a source may hold the agent's strings): at most
MAX_SNAPSHOT_BYTES, the JSON's shape bounded before it is parsed (files.json_shape_problem) and
checked after (no NaN, no lone surrogate, no deeper than the certificate's nesting limit); what fails
leaves the call without a summary, nothing here raises. A session stores at most
MAX_SESSION_SNAPSHOT_BYTES of instances; past that its calls keep their path and sha256 only.
Triggered is still decided by the verifier on the stored instance (report/funnel.py), never on the
session's word.
"""

import hashlib
import json
import threading
from pathlib import Path

from pytest_predbench.files import json_shape_problem, read_untrusted, write_text_atomic
from pytest_predbench.session.protocol import PathStep, Reduction
from pytest_predbench.verify.certificate import MAX_NESTING_DEPTH, json_value_problem

MAX_SNAPSHOT_BYTES = 256 * 1024
"""The most of a reduce call's stdout (its bundle) the gateway keeps, and of a stored instance: a
certificate's own size limit (verify/certificate.py MAX_CERTIFICATE_BYTES), so any instance a
certificate could carry fits."""
MAX_SESSION_SNAPSHOT_BYTES = 16 * 1024 * 1024
"""The most disk one session's instances take in the run's instance folder."""
FILE_BYTES = 4096
"""What a stored instance costs the budget at least: a file takes a block on disk, so 16 MB of
100-byte instances would be 160,000 files and 650 MB."""
MAX_CONTAINERS = 20_000
"""JSON arrays and objects in one snapshot, checked on its bytes before it is parsed."""
MAX_PATH_NODES = 64
"""A bundle's path with more hops than this is not recorded (pred's longest paths have a few)."""
MAX_NAME = 200
MAX_VARIANT_KEYS = 16
VALUE_OPTIONS = {"-o": "output", "--output": "output", "--to": None, "--via": None}
"""`pred reduce`'s options that take a value (`pred reduce --help`), and which one names the bundle."""


def _parse(argv: list[str]) -> tuple[list[str], str | None, list[str]] | None:
    """A `pred reduce` call's arguments as (positional, output file or None, the arguments without
    the output option); None for another command."""
    if not argv or argv[0] != "reduce":
        return None
    positional, output, kept = [], None, [argv[0]]
    args = iter(argv[1:])
    for arg in args:
        name, eq, value = arg.partition("=")
        if arg.startswith("--") and name in VALUE_OPTIONS:
            value = value if eq else next(args, None)
            if VALUE_OPTIONS[name] == "output":
                output = value
            else:
                kept += [arg] if eq or value is None else [arg, value]
        elif arg.startswith("-o") and len(arg) > 2:
            output = arg[2:].removeprefix("=")
        elif arg == "-o":
            output = next(args, None)
        else:
            kept.append(arg)
            if arg == "-" or not arg.startswith("-"):
                positional.append(arg)
    return positional, output, kept


def reduce_files(argv: list[str]) -> tuple[str, str | None] | None:
    """(input, output file or None) of a `pred reduce` call's arguments, else None (another command,
    or arguments pred would refuse anyway)."""
    parsed = _parse(argv)
    if parsed is None or len(parsed[0]) != 1:
        return None
    return parsed[0][0], parsed[1]


def shadow_argv(argv: list[str]) -> list[str] | None:
    """The call to run again for pred's own bundle of a reduce that wrote it to a file: the same
    arguments without `-o`/`--output`, so pred prints the bundle (nothing else changes: pred's other
    options only choose the target and the route). None when the call wrote no file, or read its
    input from stdin (that input is gone)."""
    parsed = _parse(argv)
    if parsed is None or len(parsed[0]) != 1 or parsed[1] is None or parsed[0][0] == "-":
        return None
    return parsed[2]


def parse_json(data: bytes | None) -> dict | None:
    """A JSON object of at most MAX_SNAPSHOT_BYTES, its shape bounded before parsing; else None."""
    if data is None or len(data) > MAX_SNAPSHOT_BYTES:
        return None
    if json_shape_problem(data, MAX_CONTAINERS, MAX_NESTING_DEPTH):
        return None
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict) or json_value_problem(value):
        return None
    return value


def _node(value: object) -> PathStep | None:
    if not isinstance(value, dict):
        return None
    name, variant = value.get("name"), value.get("variant") or {}
    if not isinstance(name, str) or not 0 < len(name) <= MAX_NAME or not isinstance(variant, dict):
        return None
    if len(variant) > MAX_VARIANT_KEYS:
        return None
    if not all(isinstance(k, str) and isinstance(v, str) and len(k) + len(v) <= MAX_NAME for k, v in variant.items()):
        return None
    return PathStep(name=name, variant=variant)


def bundle_path(bundle: dict | None) -> list[PathStep] | None:
    """The path of a reduction bundle (`{"source", "target", "path": [{"name", "variant"}, ...]}`),
    every hop with its variant; None when it is not one."""
    path = (bundle or {}).get("path")
    if not isinstance(path, list) or not 2 <= len(path) <= MAX_PATH_NODES:
        return None
    nodes = [_node(value) for value in path]
    return None if any(node is None for node in nodes) else nodes  # type: ignore[return-value]


def instance_text(instance: object) -> str | None:
    """A problem instance as stored: canonical JSON (UTF-8, not \\u escapes: those can triple its size)
    of `{"type", "variant", "data"}`; None if not one, or too large to be loaded back."""
    if not isinstance(instance, dict) or not isinstance(instance.get("type"), str):
        return None
    if not isinstance(instance.get("variant", {}), dict) or "data" not in instance:
        return None
    shaped = {"type": instance["type"], "variant": instance.get("variant") or {}, "data": instance["data"]}
    text = json.dumps(shaped, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text if len(text.encode()) <= MAX_SNAPSHOT_BYTES else None  # what load_instance can read back


class Snapshots:
    """One session's instance store: `<sha256>.json` files in a folder (shared by the run's sessions:
    content-addressed, an instance two sessions reduced is kept once), at most `budget` bytes written
    by this session, each file counted as at least FILE_BYTES. None as the folder: the path and
    sha256 are recorded, nothing is stored."""

    def __init__(self, folder: Path | None, budget: int = MAX_SESSION_SNAPSHOT_BYTES):
        self.folder = folder
        self.left = budget
        self.lock = threading.Lock()

    def keep(self, text: str) -> str:
        """The sha256 of `text`, stored when the budget allows (a failed write stores nothing)."""
        data = text.encode()
        sha = hashlib.sha256(data).hexdigest()
        if self.folder is None:
            return sha
        with self.lock:
            cost = max(len(data), FILE_BYTES)
            if cost > self.left:
                return sha
            target = self.folder / f"{sha}.json"
            try:
                if not target.is_file():
                    write_text_atomic(target, text)
                    self.left -= cost
            except OSError:
                pass
        return sha


def snapshot(stdout: bytes | None, store: Snapshots) -> Reduction | None:
    """The summary of a finished `pred reduce` call from pred's own stdout (its bundle; for a call
    with `-o`, the stdout of its shadow run): None when that is no bundle of at most MAX_SNAPSHOT_BYTES."""
    bundle = parse_json(stdout)
    path = bundle_path(bundle)
    if path is None:
        return None
    text = instance_text((bundle or {}).get("source"))
    if text is None:
        return None
    return Reduction(instance_sha256=store.keep(text), path=path)


def is_sha256(name: object) -> bool:
    return isinstance(name, str) and len(name) == 64 and all(c in "0123456789abcdef" for c in name)


def instance_problem(sha: object, data: bytes) -> str | None:
    """Why `data` is no stored instance named `sha` (None: it is): the one rule for a file of a run's
    instances/ and a row of a shared store's."""
    if not is_sha256(sha):
        return "its name is no sha256"
    if len(data) > MAX_SNAPSHOT_BYTES:
        return f"more than {MAX_SNAPSHOT_BYTES} bytes"
    if hashlib.sha256(data).hexdigest() != sha:
        return "its content is not its address"
    return None


def stored_bytes(folder: Path, sha: str) -> bytes | None:
    """A stored instance's bytes, checked against its name (a changed file is no instance); None if
    missing."""
    if not is_sha256(sha):  # never a path of the agent's choosing
        return None
    try:
        data = read_untrusted(folder / f"{sha}.json", MAX_SNAPSHOT_BYTES + 1)
    except OSError:
        return None
    return None if instance_problem(sha, data) else data


def load_instance(folder: Path, sha: str) -> dict | None:
    """A stored instance (stored_bytes), parsed."""
    data = stored_bytes(folder, sha)
    return None if data is None else parse_json(data)


def reduced_instances(pred_log: list) -> list[str]:
    """The content addresses of the instances a session's `pred reduce` calls reduced (its PredCalls)."""
    return sorted({call.reduction.instance_sha256 for call in pred_log if call.reduction is not None})
