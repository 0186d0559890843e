"""Atomic writes and validated reads: state on disk is either whole or absent, never torn.

Everything read back is re-validated into its pydantic model, so a corrupt or hand-edited
file is a clear error naming the file instead of a silent reset.
"""

import errno
import hashlib
import json
import os
import re
import stat
import tempfile
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)


class CorruptStateError(Exception):
    """A state file exists but cannot be trusted; the message names the file and the fault."""


def umask() -> int:
    """The process's umask, read without changing it (os.umask can only set it, and a set-and-restore
    races with the other threads of the process, a lease keeper's among them)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # no /proc (not Linux): the only other way to learn it
    os.umask(mask)
    return mask


def write_text_atomic(path: Path, text: str) -> None:
    """Write via a temp file in the same directory, fsync, then rename over the target. The file gets
    the mode any new file would (0644 under umask 0022): the temp file is made 0600, and a report
    copied to a web server or a shared directory must stay readable there."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~umask())
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_model(path: Path, model: BaseModel) -> None:
    write_text_atomic(path, model.model_dump_json(indent=2) + "\n")


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _read_text(path: Path) -> str:
    """The file as UTF-8 text; FileNotFoundError passes through (callers decide what absent means)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise CorruptStateError(f"{path}: cannot read ({exc.strerror})") from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptStateError(f"{path}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})") from exc


def parse_model(data: str | bytes | dict, model_type: type[M], where: object) -> M:
    """Validate JSON text (or a dict of values) into its model; any fault becomes a one-line
    CorruptStateError naming `where` it came from (a file, a database row)."""
    try:
        if isinstance(data, dict):
            return model_type.model_validate(data)
        return model_type.model_validate_json(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "<root>"
        problem = _one_line(f"{loc}: {first['msg']}")
        raise CorruptStateError(f"{where}: not a valid {model_type.__name__} ({problem})") from exc


def read_model(path: Path, model_type: type[M]) -> M:
    """Read and validate; any fault becomes a one-line CorruptStateError naming the file."""
    path = Path(path)
    return parse_model(_read_text(path), model_type, path)


def read_json(path: Path) -> object:
    """Plain JSON read with the same one-line error contract."""
    path = Path(path)
    text = _read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CorruptStateError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from exc


def read_untrusted(path: Path, limit: int) -> bytes:
    """At most `limit` bytes of a regular file that someone else may have planted or changed.

    Never follows a link, never blocks on a FIFO or device (it is opened without blocking and
    refused unless regular); the size is checked before anything is read. Anything else raises
    OSError. A caller that must refuse larger files asks for `limit + 1` bytes and compares."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        return os.read(fd, limit)
    finally:
        os.close(fd)


_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*+(?:"|\\?\Z)', re.DOTALL)
"""A JSON string, or an unterminated one to the end of the data: a scan that had to find its closing
quote would fail from every quote of `"\\"\\"\\"...` onwards, quadratic in the data (and holding the GIL).
Possessive, so it never backtracks."""
_CONTAINER_MARKS = b"[]{}"


def json_shape_problem(data: bytes, most_containers: int, most_depth: int) -> str | None:
    """Why `data` is too big a JSON value to parse, judged on its bytes before any parse (None: it
    may be parsed). Parsing costs memory per array and object, not per byte: 60 MB of `[[],[],...]`
    holds 20 million Python lists (1.6 GB), so a byte limit alone does not bound a parse. Brackets
    inside strings are not counted; the depth is counted only once the number is within bounds (so
    the count bounds that loop too)."""
    bare = _JSON_STRING.sub(b"", data)
    containers = bare.count(b"[") + bare.count(b"{")
    if containers > most_containers:
        return f"{containers} JSON arrays and objects, over the {most_containers} allowed"
    depth = deepest = 0
    for mark in bare.translate(None, delete=bytes(set(range(256)) - set(_CONTAINER_MARKS))):
        depth += 1 if mark in b"[{" else -1
        if depth > deepest:
            deepest = depth
            if deepest > most_depth:
                return f"nested too deeply (over {most_depth} levels)"
    return None


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def file_hashes(root: Path) -> dict[str, str]:
    """Every regular file under `root` (no symlink), by path relative to it -> its sha256."""
    return {
        str(p.relative_to(root)): sha256_file(p) for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()
    }
