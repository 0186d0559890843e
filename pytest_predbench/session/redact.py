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


def rules(source_dir: str) -> list[tuple[re.Pattern[bytes], bytes]]:
    """(pattern, replacement) in order: the library's own directory, then any crate under any
    cargo registry, then the extractor crate wherever it was built."""
    path = rb"[^\s:'\"`]*"
    return [
        (re.compile(re.escape(source_dir.rstrip("/").encode())), SOURCE_DIR.encode()),
        (re.compile(rb"/" + path + rb"/registry/src/[^/\s]+/problemreductions-[0-9][^/\s]*"), SOURCE_DIR.encode()),
        (re.compile(rb"/" + path + rb"/registry/src/[^/\s]+"), CRATES_DIR.encode()),
        (re.compile(rb"/" + path + rb"/pytest_predbench/verify/extractor"), EXTRACTOR_DIR.encode()),
    ]


class Redaction:
    """One output stream's rewriting: whole lines (or whitespace-ended runs) at a time, so a path
    split across two reads is still seen whole."""

    def __init__(self, patterns: list[tuple[re.Pattern[bytes], bytes]]):
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
        for pattern, replacement in self.patterns:
            data = pattern.sub(replacement, data)
        return data
