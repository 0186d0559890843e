"""What the model is shown after each command: the output normalised, then bounded, then one
line of its budget.

Every observation is resent with every later model call, so one huge `pred list` would burn
tokens for the rest of the session. While the output is read it is normalised — trailing
whitespace stripped from every line (`pred list --rules` pads each row to the width of the
widest), runs of blank lines collapsed to one — and then bounded: cut in the middle, with a
marker saying how much was cut, so a command printing gigabytes costs the memory of the kept
part only. Normalising first means the bound keeps text, not padding.

The budget line ends every observation, so the model can plan its remaining calls: it is the
one place the model learns how much of its limits it has used (the pred-call limit, in a
measured real session, ran out before the model knew).

The bound holds for everything the model is shown after a command, not just the command's output:
the output gets OUTPUT_BYTES, and the harness's part — its notes (submission receipts, refusals),
the budget line, the timeout notice and the template around them — the rest, each note cut and
the notes past their room replaced by one line that says how many there were.
"""

from pytest_predbench.session.protocol import Accounting, SessionLimits

MAX_OBSERVATION_BYTES = 10_000
"""All the model is shown after one command; the same for every model (fairness)."""
HARNESS_BYTES = 1_500
"""The harness's part of it: notes, budget line, timeout notice, the observation template."""
OUTPUT_BYTES = MAX_OBSERVATION_BYTES - HARNESS_BYTES
"""The command's output; head and tail get half each."""
NOTES_BYTES = 1_000
"""The harness's notes (the budget line, the notice and the template have the other 500 bytes)."""
MAX_NOTE_BYTES = 300
LINE_CARRY_BYTES = 1 << 16
"""How much of an unfinished line is held back (for its trailing whitespace) before it is passed on."""
TRAILING = b" \t\r\f\v"


def cut_marker(cut: int, total: int) -> str:
    return f"\n[... {cut} of {total} bytes cut from the middle of this output ...]\n"


def harness_notes(notes: list[str], room: int = NOTES_BYTES) -> str:
    """The notes as they follow a command's output, each on its own line, within `room` bytes."""
    text = ""
    for n, note in enumerate(notes):
        line = "\n" + _cut(note, MAX_NOTE_BYTES)
        more = f"\n[harness] {len(notes) - n} more note(s) not shown"
        if len((text + line).encode()) + (len(more) if n + 1 < len(notes) else 0) > room:
            return text + more
        text += line
    return text


def _cut(text: str, limit: int) -> str:
    data = text.encode()
    return text if len(data) <= limit else data[: limit - 3].decode("utf-8", "ignore") + "..."


class BoundedCapture:
    """Keeps the first and last `limit // 2` bytes of a stream, and how many bytes it had."""

    def __init__(self, limit: int = OUTPUT_BYTES):
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
        """Head and tail decoded, each within `limit // 2` bytes *after* decoding: an invalid byte
        becomes U+FFFD, three bytes, so a bound counted before decoding could be tripled."""
        head, head_bytes = _fit(bytes(self.head), self.half, tail=False)
        tail, tail_bytes = _fit(bytes(self.tail), self.half, tail=True)
        cut = self.total - head_bytes - tail_bytes
        return head + tail if cut <= 0 else head + cut_marker(cut, self.total) + tail


def _fit(raw: bytes, limit: int, tail: bool) -> tuple[str, int]:
    """The longest prefix (or, for `tail`, suffix) of `raw` whose decoded text is at most `limit`
    bytes of UTF-8: (that text, how many of `raw`'s bytes it shows)."""

    def shown(n: int) -> str:
        return (raw[len(raw) - n :] if tail else raw[:n]).decode("utf-8", "replace")

    if len(shown(len(raw)).encode()) <= limit:
        return shown(len(raw)), len(raw)
    fits, over = 0, len(raw)  # shown(fits) fits, shown(over) does not
    while over - fits > 1:
        mid = (fits + over) // 2
        fits, over = (mid, over) if len(shown(mid).encode()) <= limit else (fits, mid)
    return shown(fits), fits


class NormalizedCapture(BoundedCapture):
    """A BoundedCapture of the stream with trailing whitespace stripped from every line and runs
    of blank lines collapsed to one, normalised as it arrives (memory stays bounded)."""

    def __init__(self, limit: int = OUTPUT_BYTES):
        super().__init__(limit)
        self.carry = bytearray()
        """The unfinished line (or, past LINE_CARRY_BYTES, its unpassed trailing whitespace)."""
        self.line_started = False
        """Part of the unfinished line was passed on already: it is not blank, whatever follows."""
        self.last_blank = False
        self.raw_total = 0
        """Bytes the command printed, before normalising."""

    def feed(self, chunk: bytes) -> None:
        self.raw_total += len(chunk)
        *lines, rest = chunk.split(b"\n")
        for line in lines:
            self._line(bytes(self.carry) + line)
            self.carry.clear()
            self.line_started = False
        self.carry += rest
        if len(self.carry) > LINE_CARRY_BYTES:  # a very long line: pass on all but its trailing whitespace
            text = bytes(self.carry).rstrip(TRAILING)
            keep = self.carry[len(text) :] if len(self.carry) - len(text) <= LINE_CARRY_BYTES else b""
            self._pass(text if keep else bytes(self.carry))
            self.carry = bytearray(keep)

    def _pass(self, data: bytes) -> None:
        if data:
            super().feed(data)
            self.line_started = True
            self.last_blank = False

    def _line(self, line: bytes) -> None:
        text = line.rstrip(TRAILING)
        if text or self.line_started:
            self._pass(text)
            super().feed(b"\n")
            self.last_blank = False
        elif not self.last_blank:
            super().feed(b"\n")
            self.last_blank = True

    def text(self) -> str:
        if self.carry:  # the last line, without a newline
            self._pass(bytes(self.carry).rstrip(TRAILING))
            self.carry.clear()
        return super().text()


def budget_line(used: Accounting, limits: SessionLimits, elapsed: float) -> str:
    """The harness line that ends every observation: what is used of each limit, and time left."""
    left = max(0, int(limits.wall_seconds - elapsed))
    return (
        f"[harness] used {used.model_calls}/{limits.model_calls} model calls, "
        f"{used.pred_calls}/{limits.pred_calls} pred calls, ${used.dollars:.4f}/${limits.dollars:.4f}; "
        f"{left} s of {int(limits.wall_seconds)} s left"
    )
