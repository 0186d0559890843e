"""Where a path the agent names for pred really points, as pred's sandbox would see it.

The gateway accepts a pred call's working directory and file arguments only inside /scratch. A
lexical check (`normpath` starts with /scratch) is no check: a symlink in /scratch may point to
/predbench/libexec (the real binaries, present in pred's sandbox) or anywhere else of that
sandbox. So a path is resolved component by component on the host's copy of the scratch, every
symlink followed as the sandbox would follow it (an absolute target is read in the sandbox's
view: inside /scratch it continues there, anything else is outside), and refused if it leaves
the scratch at any step. The walk is bounded: at most MAX_LINKS links, PATH_MAX bytes.
"""

import os
import posixpath
from pathlib import Path

from pytest_predbench.session.bwrap import SCRATCH_DIR

MAX_LINKS = 40
"""Symlinks followed in one path (the kernel's own limit)."""
PATH_MAX = 4096


class Outside(ValueError):
    """The path leaves /scratch (directly, by `..`, or through a symlink); the message says where."""


def resolve(host_scratch: Path, path: str, cwd: str = SCRATCH_DIR) -> str:
    """`path` (absolute, or relative to `cwd`, both in the sandbox's view) with every symlink
    followed: the sandbox path it names, always under /scratch, else Outside. Missing components
    are kept as named (an output file not written yet)."""
    if len(path.encode("utf-8", "surrogateescape")) > PATH_MAX:
        raise Outside("the path is longer than PATH_MAX")
    todo = [part for part in (path if path.startswith("/") else f"{cwd}/{path}").split("/") if part]
    done: list[str] = []
    links = 0
    while todo:
        part = todo.pop(0)
        if part == ".":
            continue
        if part == "..":
            if not done:
                raise Outside("it goes above /")
            done.pop()
            continue
        done.append(part)
        if not _inside(done):
            raise Outside(f"it points to {'/' + '/'.join(done + todo)}")
        host = host_scratch.joinpath(*done[1:])
        if host.is_symlink():
            links += 1
            if links > MAX_LINKS:
                raise Outside("too many symlinks")
            target = os.readlink(host)
            done.pop()
            if target.startswith("/"):
                done = []
            todo = [p for p in target.split("/") if p] + todo
    inside = "/" + "/".join(done)
    if not _inside(done):
        raise Outside(f"it points to {inside}")
    return posixpath.normpath(inside)


def _inside(parts: list[str]) -> bool:
    return bool(parts) and parts[0] == SCRATCH_DIR.strip("/")


def host(host_scratch: Path, cwd: str, path: str) -> Path:
    """The host path of `path` taken lexically (for a first look: does it exist?), or the scratch
    itself when it is not below it."""
    inside = posixpath.normpath(path if path.startswith("/") else f"{cwd}/{path}")
    parts = [p for p in inside.split("/") if p]
    return host_scratch.joinpath(*parts[1:]) if _inside(parts) else host_scratch / ".outside"
