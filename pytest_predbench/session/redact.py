"""Host paths out of what pred tells the agent.

pred and pred-extract are compiled with the paths of their sources in them (cargo's registry for
the library and its dependencies, the checkout for the extractor), and a panic names one:
`thread 'main' panicked at /root/.cargo/registry/src/index.crates.io-…/problemreductions-0.5.0/
src/rules/x.rs:10:5`. The agent triggers panics on purpose (that is how bugs show), so the gateway
relays pred's output through a `Redaction`, which writes the library's paths as the agent sees
them (under /src/problemreductions, where it can open the file at that line) and every other
crate's and the extractor's under neutral prefixes. The binaries themselves are left as built:
they are the environment the verdicts were recorded with.
"""

import re

from pytest_predbench.session.bwrap import SOURCE_DIR

CRATES_DIR = "/cargo/registry/src"
EXTRACTOR_DIR = "/predbench/extractor"
HOLD_BYTES = 64 * 1024
"""A line longer than this is passed on without waiting for its end (no path is this long)."""


REGISTRY = b"/registry/src/"
EXTRACTOR = b"/pytest_predbench/verify/extractor"
LIBRARY = b"problemreductions-"
DELIMITERS = re.compile(rb"([\s:'\"`]+)")
"""What ends a path in pred's output (a panic's `file:line:col`, a quoted path)."""


class Rules(tuple):
    """The library's own directory (as built), which is written as SOURCE_DIR."""


def rules(source_dir: str) -> Rules:
    r"""The rewriting for a library built at `source_dir`: that directory, then any crate under any
    cargo registry (the library's own as SOURCE_DIR, others under CRATES_DIR), then the extractor
    crate wherever it was built (EXTRACTOR_DIR).

    Written with `find`, never with a backtracking pattern: pred's output is the agent's to shape
    (it echoes file names and arguments), and a path pattern like `/[^\s]*/registry/src/` tried at
    every slash of a long run of slashes costs the square of its length, in the harness."""
    return Rules((source_dir.rstrip("/").encode(),))


def _token(token: bytes) -> bytes:
    """One path-like token rewritten: from its first `/` to the last registry (or extractor) part."""
    first = token.find(b"/")
    at = token.rfind(REGISTRY)
    while 0 <= first < at:  # the last registry part followed by a component (as greedy matching finds)
        after = at + len(REGISTRY)
        end = _component_end(token, after)
        if end > after:
            version = end + 1 + len(LIBRARY)
            if token.startswith(LIBRARY, end + 1) and token[version : version + 1].isdigit():
                token = token[:first] + SOURCE_DIR.encode() + token[_component_end(token, version) :]
            else:
                token = token[:first] + CRATES_DIR.encode() + token[end:]
            break
        at = token.rfind(REGISTRY, 0, at)
    first = token.find(b"/")
    at = token.rfind(EXTRACTOR)
    if 0 <= first < at:
        token = token[:first] + EXTRACTOR_DIR.encode() + token[at + len(EXTRACTOR) :]
    return token


def _component_end(token: bytes, start: int) -> int:
    end = token.find(b"/", start)
    return len(token) if end < 0 else end


class Redaction:
    """One output stream's rewriting: whole lines (or whitespace-ended runs) at a time, so a path
    split across two reads is still seen whole."""

    def __init__(self, patterns: Rules):
        self.patterns = patterns
        self.held = b""

    def feed(self, chunk: bytes) -> bytes:
        """What can be passed on of the stream so far (b"" at its end: the rest)."""
        data = self.held + chunk
        if not chunk:
            self.held = b""
            return self._rewrite(data)
        cut = max(data.rfind(b"\n"), data.rfind(b" "), data.rfind(b"\t")) + 1
        if cut == 0 and len(data) > HOLD_BYTES:
            cut = len(data)
        self.held = data[cut:]
        return self._rewrite(data[:cut])

    def _rewrite(self, data: bytes) -> bytes:
        """Linear in `data`: one replace, one split, and `find`s within each path-like token."""
        for source in self.patterns:
            data = data.replace(source, SOURCE_DIR.encode())
        if REGISTRY not in data and EXTRACTOR not in data:
            return data
        parts = DELIMITERS.split(data)
        return b"".join(_token(part) if REGISTRY in part or EXTRACTOR in part else part for part in parts)
