"""What a session's `pred reduce` call reduced: the instance and the path, snapshot by the gateway.

The funnel of a minted bug (report/funnel.py) asks whether a session ran pred along the bug's rule
(reached) and whether pred's round trip there was wrong on the session's own instance (triggered).
The gateway's log alone (argv, exit, bytes) cannot say either, so after a `pred reduce` call ends
the gateway (harness side) takes a bounded snapshot:

- the path, from the reduction bundle: pred's stdout (a capped copy taken as it is relayed, never
  written by the agent) or, with `-o FILE`, that file;
- the instance, from the input file the call names (`-` for stdin: the bundle's own `source`),
  stored content-addressed (`<sha256>.json`, canonical JSON) in the run's instance folder, and its
  sha256 recorded on the call (PredCall.reduction).

Every file here is the agent's, so every read is hostile-input safe: the path is walked component
by component from the scratch with O_NOFOLLOW (a symlink anywhere, `..`, a path outside /scratch:
no snapshot), the file opened without blocking and refused unless regular (a FIFO, a device), at
most MAX_SNAPSHOT_BYTES read, the JSON's shape bounded before it is parsed (files.json_shape_problem)
and checked after (no NaN, no lone surrogate, no deeper than the certificate's nesting limit). What
fails any of this just leaves the call without a summary; nothing here raises or blocks. A session
stores at most MAX_SESSION_SNAPSHOT_BYTES of instances; past that its calls keep their path and
sha256 only.

What the agent can still do is change a file between pred's read and the snapshot: then the stored
instance is not the one pred reduced. That cannot make a bug look triggered that is not: triggered
is decided by the verifier on the stored instance (report/funnel.py), never on the agent's word.
"""

import errno
import hashlib
import json
import os
import posixpath
import stat
import threading
from pathlib import Path

from pytest_predbench.files import json_shape_problem, read_untrusted, write_text_atomic
from pytest_predbench.session.bwrap import SCRATCH_DIR
from pytest_predbench.session.protocol import PathStep, Reduction
from pytest_predbench.verify.certificate import MAX_NESTING_DEPTH, json_value_problem

MAX_SNAPSHOT_BYTES = 256 * 1024
"""The most of one file (an instance, a bundle) or of a reduce call's stdout the gateway reads: a
certificate's own size limit (verify/certificate.py MAX_CERTIFICATE_BYTES), so any instance a
certificate could carry fits."""
MAX_SESSION_SNAPSHOT_BYTES = 16 * 1024 * 1024
"""The most instance bytes one session stores in the run's instance folder."""
MAX_CONTAINERS = 20_000
"""JSON arrays and objects in one snapshot, checked on its bytes before it is parsed."""
MAX_PATH_NODES = 64
"""A bundle's path with more hops than this is not recorded (pred's longest paths have a few)."""
MAX_NAME = 200
MAX_VARIANT_KEYS = 16
VALUE_OPTIONS = {"-o": "output", "--output": "output", "--to": None, "--via": None}
"""`pred reduce`'s options that take a value (`pred reduce --help`), and which one names the bundle."""


def reduce_files(argv: list[str]) -> tuple[str, str | None] | None:
    """(input, output file or None) of a `pred reduce` call's arguments, else None (another command,
    or arguments pred would refuse anyway)."""
    if not argv or argv[0] != "reduce":
        return None
    positional, output = [], None
    args = iter(argv[1:])
    for arg in args:
        name, eq, value = arg.partition("=")
        if arg.startswith("--") and name in VALUE_OPTIONS:
            value = value if eq else next(args, None)
            output = value if VALUE_OPTIONS[name] == "output" else output
        elif arg.startswith("-o") and len(arg) > 2:
            output = arg[2:].removeprefix("=")
        elif arg == "-o":
            output = next(args, None)
        elif arg == "-" or not arg.startswith("-"):
            positional.append(arg)
    return (positional[0], output) if len(positional) == 1 else None


def read_in_scratch(scratch: Path, cwd: str, value: str, limit: int = MAX_SNAPSHOT_BYTES) -> bytes | None:
    """At most `limit` bytes of the regular file `value` names (relative to the sandbox's `cwd`), read
    from the host's scratch without following any link: None for a symlink at any component, a path
    outside /scratch, a FIFO, socket or device, a file over `limit`, or anything that fails."""
    inside = posixpath.normpath(value if value.startswith("/") else posixpath.join(cwd, value))
    parts = [part for part in inside.split("/") if part]
    if not parts or parts[0] != SCRATCH_DIR.strip("/") or len(parts) < 2 or ".." in parts:
        return None
    fds: list[int] = []
    try:
        fds.append(os.open(scratch, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW))
        for part in parts[1:-1]:
            fds.append(os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fds[-1]))
        fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY, dir_fd=fds[-1])
        fds.append(fd)
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        if info.st_size > limit:
            return None
        data = os.read(fd, limit + 1)
        return data if len(data) <= limit else None
    except (OSError, ValueError):
        return None
    finally:
        for fd in fds:
            os.close(fd)


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
    """A problem instance as stored: canonical JSON of `{"type", "variant", "data"}`; None if not one."""
    if not isinstance(instance, dict) or not isinstance(instance.get("type"), str):
        return None
    if not isinstance(instance.get("variant", {}), dict) or "data" not in instance:
        return None
    shaped = {"type": instance["type"], "variant": instance.get("variant") or {}, "data": instance["data"]}
    return json.dumps(shaped, sort_keys=True, separators=(",", ":"))


class Snapshots:
    """One session's instance store: `<sha256>.json` files in a folder (shared by the run's sessions:
    content-addressed, an instance two sessions reduced is kept once), at most `budget` bytes written
    by this session. None as the folder: the path and sha256 are recorded, nothing is stored."""

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
            if len(data) > self.left:
                return sha
            target = self.folder / f"{sha}.json"
            try:
                if not target.is_file():
                    write_text_atomic(target, text)
                    self.left -= len(data)
            except OSError:
                pass
        return sha


def snapshot(scratch: Path, cwd: str, argv: list[str], stdout: bytes | None, store: Snapshots) -> Reduction | None:
    """The summary of a finished `pred reduce` call (None: not one, or nothing could be read safely)."""
    files = reduce_files(argv)
    if files is None:
        return None
    source, output = files
    bundle = parse_json(stdout) if stdout else None
    if bundle_path(bundle) is None and output and output != "-":
        bundle = parse_json(read_in_scratch(scratch, cwd, output))
    path = bundle_path(bundle)
    if path is None:
        return None
    instance = (bundle or {}).get("source") if source == "-" else parse_json(read_in_scratch(scratch, cwd, source))
    text = instance_text(instance)
    if text is None:
        return None
    return Reduction(instance_sha256=store.keep(text), path=path)


def load_instance(folder: Path, sha: str) -> dict | None:
    """A stored instance, checked against its name (a changed file is no instance); None if missing."""
    if len(sha) != 64 or not all(c in "0123456789abcdef" for c in sha):
        return None
    try:
        data = read_untrusted(folder / f"{sha}.json", MAX_SNAPSHOT_BYTES + 1)
    except OSError:
        return None
    if hashlib.sha256(data).hexdigest() != sha:
        return None
    return parse_json(data)
