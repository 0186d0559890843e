"""Bounded observations: what a command printed, kept to a fixed size, head and tail.

Every observation is resent with every later model call, so one huge `pred list` would
burn tokens for the rest of the session. Output is cut in the middle, with a marker saying
how much was cut, while it is read: a command printing gigabytes costs the memory of the
kept part only.
"""

MAX_OBSERVATION_BYTES = 10_000
"""The same for every model (fairness); head and tail get half each."""


def cut_marker(cut: int, total: int) -> str:
    return f"\n[... {cut} of {total} bytes cut from the middle of this output ...]\n"


class BoundedCapture:
    """Keeps the first and last `limit // 2` bytes of a stream, and how many bytes it had."""

    def __init__(self, limit: int = MAX_OBSERVATION_BYTES):
        self.half = limit // 2
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > self.half:
                del self.tail[: len(self.tail) - self.half]

    def text(self) -> str:
        head = self.head.decode("utf-8", "replace")
        tail = self.tail.decode("utf-8", "replace")
        cut = self.total - len(self.head) - len(self.tail)
        return head + tail if cut <= 0 else head + cut_marker(cut, self.total) + tail
