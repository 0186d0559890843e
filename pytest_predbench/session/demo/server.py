"""A local OpenAI-compatible server that replays scripted model replies.

It lets the real litellm and mini-swe-agent code paths run with no API key: the demo
models (`demo/finder`, `demo/idle`) and the agent-path tests talk to it over HTTP exactly
as they would talk to a provider. Only the model's replies are scripted.

Which reply to play is decided from the request alone, so sessions never interleave and a
retried request gets the same answer: the turn index is the number of assistant messages
plus the number of user messages after the task (format-error notices), i.e. how many
times the model has already answered in this conversation.

Usage is reported the way a provider does: `prompt_tokens` is counted over the request's
messages and tools, `completion_tokens` over the reply, both with the server's counter
(litellm's token counter when the runner starts it; one token per four characters, rounded
up, when none is given), and `completion_tokens` never exceeds the request's `max_tokens`.

Prompt caching is emulated as Anthropic's explicit cache works, so that `--prompt-cache on|off`
changes what a demo session costs: a request whose messages carry cache-control marks reads
from the cache the prefix it shares with the conversation's previous answered request (its
whole prompt, when the conversation only grew) and writes the rest; a request without marks
reads and writes nothing. It is reported in the fields real providers use and litellm prices:
`prompt_tokens_details.cached_tokens` (OpenAI's) and `cache_creation_input_tokens` (Anthropic's),
both part of `prompt_tokens`. A conversation is the session header's value and the model.

A script is a JSON file `{"description": str, "turns": [Turn, ...]}`; see `Turn`. Every reply
names the model exactly as it was requested, unless the script sets `served_as`: a provider
that routes the request to another model (the identity preflight must catch).
It binds to 127.0.0.1 only, on an ephemeral port.

Faults are how tests inject a provider's failures (429, 500, a hang, malformed JSON, a dropped
connection, a refused connection) into the real client path: for as long as a file exists
(`fault_while`), for the first N attempts at a turn in each conversation (`fault_times`: a
transient error that a retry gets past), or always. A refused connection cannot be
played on a connection the server has already accepted, so a script with a `refused` turn is
served on a port of its own (`Gate`, see `api_base`), which stops listening before the call
that meets that turn.
"""

import json
import math
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from enum import StrEnum
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

SESSION_HEADER = "X-Predbench-Session"
"""Sent by the runner so the server's usage log can be read back per session."""

TokenCounter = Callable[[str, list[dict], list[dict] | None], int]
"""(model, messages, tools) -> tokens."""


class Fault(StrEnum):
    HTTP_400 = "http_400"
    """A request the provider refuses: the model's or the harness's fault, not an outage."""
    HTTP_429 = "http_429"
    HTTP_500 = "http_500"
    HANG = "hang"
    """Answer nothing for `seconds`, then drop the connection: a call that times out."""
    MALFORMED_JSON = "malformed_json"
    CLOSE_CONNECTION = "close_connection"
    """Accept the request, then drop the connection without an answer."""
    REFUSED = "refused"
    """The provider's port refuses the connection (ECONNREFUSED): nothing listens when the call
    is made. Played by the script's own `Gate`; a request that reaches the shared port anyway
    (a client that ignored `api_base`) is dropped as CLOSE_CONNECTION."""


class Turn(BaseModel):
    """One model reply: a bash tool call, a plain text reply (no tool call), or a fault."""

    model_config = ConfigDict(extra="forbid")

    say: str = ""
    """The assistant's text (its 'thought'); alone, a reply without a tool call."""
    bash: str | None = None
    fault: Fault | None = None
    seconds: float = 30.0
    """How long a `hang` lasts."""
    delay: float = 0.0
    """Seconds before the reply is sent (a long generation: a call in flight that will be answered)."""
    fault_times: int | None = None
    """The fault is played on the first `fault_times` requests for this turn in each conversation,
    the reply (say, bash) after them: a transient failure, as a retry meets it."""
    retry_after: float | None = None
    """A Retry-After header (seconds) on an http_429 or http_500 fault."""
    fault_while: str | None = None
    """A file: the fault is played only while it exists, the reply (say, bash) once it is gone.
    An outage a test can end without changing the script (whose hash is part of a run's plan).
    Environment variables in it ($VAR) are expanded when the turn plays, so each test can keep
    its outage file in a directory of its own; with the variable unset, no fault plays."""

    @model_validator(mode="after")
    def _one_kind(self) -> "Turn":
        passing = self.fault_while is not None or self.fault_times is not None
        if (self.fault_while is not None or self.fault_times is not None) and self.fault is None:
            raise ValueError("fault_while and fault_times need a fault")
        if self.fault_while is not None and self.fault_times is not None:
            raise ValueError("a fault lasts while a file exists (fault_while) or N times (fault_times), not both")
        if self.fault_times is not None and self.fault_times < 1:
            raise ValueError("fault_times must be at least 1")
        if self.bash is not None and self.fault is not None and not passing:
            raise ValueError("a turn is either a bash call or a fault, not both (unless the fault passes)")
        if self.bash is None and not self.say and (self.fault is None or passing):
            raise ValueError("an empty turn: give bash, fault or say")
        return self

    def after_fault(self) -> "Turn":
        """The turn once its fault has passed."""
        return Turn(say=self.say, bash=self.bash, delay=self.delay)

    def now(self) -> "Turn":
        """The turn as it plays at this moment (a fault_while outage may be over)."""
        if self.fault_while is None:
            return self
        outage = os.path.expandvars(self.fault_while)
        if "$" not in outage and Path(outage).exists():
            return Turn(fault=self.fault, seconds=self.seconds, retry_after=self.retry_after)
        return self.after_fault()


class Script(BaseModel):
    model_config = ConfigDict(extra="forbid")

    description: str = ""
    turns: list[Turn]
    served_as: str | None = None
    """The model every reply claims to come from; None: exactly the model requested."""

    def turn(self, index: int) -> Turn:
        """Turn `index` as it plays now (EXHAUSTED past the end)."""
        return (self.turns[index] if index < len(self.turns) else EXHAUSTED).now()

    @property
    def refuses(self) -> bool:
        """Whether any turn may refuse the connection: then the script needs a port of its own."""
        return any(t.fault is Fault.REFUSED for t in self.turns)


def load_script(path: Path) -> Script:
    return Script.model_validate_json(Path(path).read_text(encoding="utf-8"))


class UsageRecord(BaseModel):
    session: str
    model: str
    turn: int
    prompt_tokens: int
    """All of them, the cached and cache-written ones included."""
    completion_tokens: int
    cached_tokens: int = 0
    cache_write_tokens: int = 0


def cache_marked(messages: list[dict]) -> bool:
    """Whether a request asks for caching: a cache_control mark on a message or a content block."""
    for message in messages:
        content = message.get("content")
        blocks = content if isinstance(content, list) else []
        if "cache_control" in message or any(isinstance(b, dict) and "cache_control" in b for b in blocks):
            return True
    return False


def unmarked(message: dict) -> str:
    """A message as the cache compares it: without its marks, one text block read as plain text."""
    plain = {k: v for k, v in message.items() if k != "cache_control"}
    content = plain.get("content")
    if isinstance(content, list):
        texts = [b.get("text") for b in content if isinstance(b, dict) and b.get("type") == "text"]
        blocks = [{k: v for k, v in b.items() if k != "cache_control"} for b in content if isinstance(b, dict)]
        plain["content"] = texts[0] if len(texts) == len(content) == 1 else blocks
    return json.dumps(plain, sort_keys=True)


class CacheEntry(BaseModel):
    """What a conversation's previous answered request left in the emulated cache."""

    messages: list[str]
    """Its messages, unmarked."""
    prompt_tokens: int


def chars_per_four(model: str, messages: list[dict], tools: list[dict] | None) -> int:
    """The fallback counting rule: one token per four characters of compact JSON, rounded up."""
    text = json.dumps(messages, separators=(",", ":")) + (json.dumps(tools, separators=(",", ":")) if tools else "")
    return math.ceil(len(text) / 4)


def turn_index(messages: list[dict]) -> int:
    """How many times the model has already answered in this conversation."""
    answers = sum(1 for m in messages if m.get("role") == "assistant")
    notices = max(0, sum(1 for m in messages if m.get("role") == "user") - 1)
    return answers + notices


def assistant_message(turn: Turn, index: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": turn.say or None}
    if turn.bash is not None:
        message["tool_calls"] = [
            {
                "id": f"call_{index}",
                "type": "function",
                "function": {"name": "bash", "arguments": json.dumps({"command": turn.bash})},
            }
        ]
    return message


EXHAUSTED = Turn(say="(the demo script has no more turns)")
MAX_CACHED_CONVERSATIONS = 256
"""The emulated cache forgets the oldest conversation past this many (a long-lived worker)."""


def _pinned_socket() -> socket.socket:
    """A TCP socket bound to a loopback port named explicitly, not to port 0: on Linux such a
    socket keeps its port when it stops listening (shutdown), so while a Gate refuses, the kernel
    refuses connections to the port and hands it to no one binding port 0 (a fixed-port bind
    with SO_REUSEADDR could still take it; nothing in predbench does that)."""
    while True:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # to listen again past TIME_WAIT
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:  # taken in between: draw another
            sock.close()
            continue
        return sock


class Gate:
    """One script's own port, for `refused` faults: it listens while the provider is up and
    stops listening (the port kept, see _pinned_socket) while it refuses. Every answer closes
    its connection, so each call connects anew and meets the gate as it is at that moment.
    It serves one conversation at a time (a session or a preflight probe, as a worker runs them)."""

    def __init__(self, demo: "DemoServer", gated: str):
        self.demo = demo
        self.gated = gated
        """The model this gate serves."""
        self.sock = _pinned_socket()
        self.port = int(self.sock.getsockname()[1])
        self.listening = False
        self.refusals = 0
        """How many times the gate closed: each is a call about to be refused."""
        self._cond = threading.Condition()
        self._stopped = False
        self.open()
        threading.Thread(target=self._accept_loop, name="predbench-demo-gate", daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def open(self) -> None:
        with self._cond:
            if not self.listening and not self._stopped:
                self.sock.listen(16)
                self.listening = True
                self._cond.notify_all()

    def refuse(self) -> None:
        """Stop listening: the next connection is refused (a blocked accept wakes with EINVAL)."""
        with self._cond:
            if self.listening:
                self.sock.shutdown(socket.SHUT_RD)
                self.listening = False
                self.refusals += 1

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            if self.listening:
                self.sock.shutdown(socket.SHUT_RD)
                self.listening = False
            self._cond.notify_all()
        self.sock.close()

    def _accept_loop(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self.listening or self._stopped)
                if self._stopped:
                    return
            try:
                conn, address = self.sock.accept()
            except OSError:
                continue  # the gate closed under accept (or stopped): wait until it opens again
            threading.Thread(target=self._serve, args=(conn, address), daemon=True).start()

    def _serve(self, conn: socket.socket, address: Any) -> None:
        try:
            DemoHandler(conn, address, self)
        except OSError:
            pass  # the client went away
        finally:
            conn.close()


class DemoServer:
    """Serve scripts by model name; use as a context manager or call start()/stop()."""

    def __init__(self, count_tokens: TokenCounter | None = None):
        self.count_tokens = count_tokens or chars_per_four
        self.scripts: dict[str, Script] = {}
        self.usage: list[UsageRecord] = []
        self._cache: dict[tuple[str, str], CacheEntry] = {}
        self._faults_played: dict[tuple[str, str, int], int] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._gates: dict[str, Gate] = {}

    # -- scripts -------------------------------------------------------------------------------

    def add_script(self, name: str, script: Script | Path) -> str:
        """Serve `script` as model `name`; returns the name (what litellm sends as `model`)."""
        loaded = script if isinstance(script, Script) else load_script(script)
        with self._lock:
            self.scripts[name] = loaded
        return name

    def usage_for(self, session: str) -> list[UsageRecord]:
        with self._lock:
            return [u for u in self.usage if u.session == session]

    # -- lifecycle -----------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the demo server is not started")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """The api_base to give litellm (for a script that may refuse: `api_base`)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def api_base(self, name: str) -> str:
        """The api_base for one new conversation with model `name`: the shared port, or for a
        script that may refuse the connection, its own gate, opened for the conversation (closed
        at once if turn 0 refuses now)."""
        with self._lock:
            script = self.scripts.get(name)
            if script is None or not script.refuses:
                return self.url
            gate = self._gates.get(name)
            if gate is None:
                gate = self._gates[name] = Gate(self, name)
        if script.turn(0).fault is Fault.REFUSED:
            gate.refuse()
        else:
            gate.open()
        return gate.url

    def refusals(self, name: str) -> int:
        """How many calls to model `name` its gate has refused so far (closed for)."""
        with self._lock:
            gate = self._gates.get(name)
        return gate.refusals if gate is not None else 0

    def start(self) -> "DemoServer":
        if self._httpd is not None:
            return self
        self._stopping.clear()
        self._httpd = _SharedPort(self)
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="predbench-demo-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._httpd = None
        with self._lock:
            gates, self._gates = list(self._gates.values()), {}
        for gate in gates:
            gate.stop()

    def __enter__(self) -> "DemoServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- one request ---------------------------------------------------------------------------

    def reply(self, request: dict, session: str) -> tuple[Turn, dict | None]:
        """The turn to play and, unless it is a fault, the chat-completion body."""
        model = str(request.get("model", ""))
        messages = request.get("messages") or []
        with self._lock:
            script = self.scripts.get(model)
        if script is None:
            raise KeyError(model)
        index = turn_index(messages)
        turn = script.turn(index)
        if turn.fault is not None and turn.fault_times is not None:
            with self._lock:
                played = self._faults_played.get((session, model, index), 0)
                self._faults_played[(session, model, index)] = played + 1
            turn = turn if played < turn.fault_times else turn.after_fault()
        if turn.fault is not None:
            return turn, None
        message = assistant_message(turn, index)
        prompt_tokens = self.count_tokens(model, messages, request.get("tools"))
        completion_tokens = self.count_tokens(model, [message], None)
        if request.get("max_tokens"):
            completion_tokens = min(completion_tokens, int(request["max_tokens"]))
        cached = self._cached_tokens(session, model, messages, request.get("tools"), prompt_tokens)
        written = prompt_tokens - cached if cache_marked(messages) else 0
        with self._lock:
            self.usage.append(
                UsageRecord(
                    session=session,
                    model=model,
                    turn=index,
                    prompt_tokens=prompt_tokens,
                    completion_tokens=completion_tokens,
                    cached_tokens=cached,
                    cache_write_tokens=written,
                )
            )
        body = {
            "id": f"chatcmpl-demo-{index}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model if script.served_as is None else script.served_as,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if turn.bash is not None else "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
                "prompt_tokens_details": {"cached_tokens": cached},
                "cache_creation_input_tokens": written,
            },
        }
        return turn, body

    def _cached_tokens(
        self, session: str, model: str, messages: list[dict], tools: list[dict] | None, prompt_tokens: int
    ) -> int:
        """Emulated explicit caching: the tokens of the prefix this request shares with the
        conversation's previous one, if it is marked for caching (0 if not); remembers this one."""
        if not cache_marked(messages):
            return 0
        plain = [unmarked(m) for m in messages]
        with self._lock:
            previous = self._cache.get((session, model))
            self._cache[(session, model)] = CacheEntry(messages=plain, prompt_tokens=prompt_tokens)
            while len(self._cache) > MAX_CACHED_CONVERSATIONS:
                del self._cache[next(iter(self._cache))]
        if previous is None:
            return 0
        shared = 0
        for old, new in zip(previous.messages, plain, strict=False):
            if old != new:
                break
            shared += 1
        if shared == 0:
            return 0
        if shared == len(previous.messages):
            return min(previous.prompt_tokens, prompt_tokens)
        return min(self.count_tokens(model, messages[:shared], tools), prompt_tokens)


class DemoHandler(BaseHTTPRequestHandler):
    """One HTTP exchange, for the shared port (`_SharedPort`) or a script's own `Gate`: both carry
    the DemoServer as `demo`, and `gated`, the model a Gate serves (None for the shared port)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet: tests read the usage log
        pass

    def _send(
        self, status: int, body: bytes, content_type: str = "application/json", headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if self.server.gated is not None:  # each call through a gate connects anew
            self.send_header("Connection", "close")
            self.close_connection = True
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: int, message: str, kind: str, retry_after: float | None = None) -> None:
        body = {"error": {"message": message, "type": kind, "code": status}}
        headers = {"Retry-After": f"{retry_after:g}"} if retry_after else {}
        self._send(status, json.dumps(body).encode(), headers=headers)

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            with self.server.demo._lock:
                names = sorted(self.server.demo.scripts)
            self._send(
                200,
                json.dumps({"object": "list", "data": [{"id": n, "object": "model"} for n in names]}).encode(),
            )
        else:
            self._error(404, f"no route {self.path}", "not_found")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._error(404, f"no route {self.path}", "not_found")
            return
        try:
            request = json.loads(raw)
            turn, body = self.server.demo.reply(request, self.headers.get(SESSION_HEADER, ""))
        except json.JSONDecodeError:
            self._error(400, "request body is not JSON", "invalid_request_error")
            return
        except KeyError as exc:
            self._error(404, f"the demo server has no script for model {exc}", "not_found")
            return
        if turn.fault is Fault.HTTP_400:
            self._error(400, "scripted bad request", "invalid_request_error")
        elif turn.fault is Fault.HTTP_429:
            self._error(429, "scripted rate limit", "rate_limit_exceeded", turn.retry_after)
        elif turn.fault is Fault.HTTP_500:
            self._error(500, "scripted internal server error", "server_error", turn.retry_after)
        elif turn.fault is Fault.MALFORMED_JSON:
            self._send(200, b'{"id": "chatcmpl-broken", "choices": [{"index": 0, "message": {"role": "assi')
        elif turn.fault is Fault.HANG:
            self.server.demo._stopping.wait(turn.seconds)
            self.close_connection = True
        elif turn.fault in (Fault.CLOSE_CONNECTION, Fault.REFUSED):
            self.close_connection = True
        else:
            assert body is not None
            self._close_gate_if_next_refuses(request)
            if turn.delay:
                self.server.demo._stopping.wait(turn.delay)
            self._send(200, json.dumps(body).encode())

    def _close_gate_if_next_refuses(self, request: dict) -> None:
        """Before this answer goes out: if the conversation's next call meets a refusal,
        close the gate now, so that call finds nothing listening (no race with the client)."""
        gate = self.server
        if not isinstance(gate, Gate):
            return
        with gate.demo._lock:
            script = gate.demo.scripts.get(gate.gated)
        if script is not None and script.turn(turn_index(request.get("messages") or []) + 1).fault is Fault.REFUSED:
            gate.refuse()


class _SharedPort(ThreadingHTTPServer):
    """The port every script is served on (but those that refuse connections: see Gate)."""

    daemon_threads = True
    gated = None

    def __init__(self, demo: "DemoServer"):
        super().__init__(("127.0.0.1", 0), DemoHandler)
        self.demo = demo

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away (a timed-out or retried call) is no error of the server's: quiet.
        Anything else is printed as socketserver does."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


_shared: DemoServer | None = None
_shared_lock = threading.Lock()


def litellm_count(model: str, messages: list[dict], tools: list[dict] | None) -> int:
    """The shared server's counting rule: litellm's, the one the harness counts a prompt by before
    sending it, so a session's reserved worst case and the demo provider's bill count the same tokens."""
    from pytest_predbench.session.model_settings import import_litellm  # offline, and seconds to import

    return import_litellm().token_counter(model=model, messages=messages, tools=tools)


def shared_server() -> DemoServer:
    """The process's demo server, started on first use (sessions in one worker share it). Its counting
    rule is fixed (litellm_count): whichever caller starts it, sessions and tests see the same bills."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = DemoServer(litellm_count).start()
        return _shared
