"""Host paths out of what pred tells the agent, as it streams.

The agent triggers panics on purpose (that is how bugs show), and a panic names the host path of
the source that panicked, so the gateway relays pred's output through a `Redaction`: the rewriting
of verify/hostpaths.py (the one both the agent's output and the records are rewritten by), applied
to whole lines of a stream that arrives in reads of any size.
"""

from pytest_predbench.verify.hostpaths import Rules, rewrite

HOLD_BYTES = 64 * 1024
"""A line longer than this is passed on without waiting for its end (no path is this long)."""


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
            return rewrite(data, self.patterns)
        cut = max(data.rfind(b"\n"), data.rfind(b" "), data.rfind(b"\t")) + 1
        if cut == 0 and len(data) > HOLD_BYTES:
            cut = len(data)
        self.held = data[cut:]
        return rewrite(data[:cut], self.patterns)
